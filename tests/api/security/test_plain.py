"""SASL PLAIN (RFC 4616) checked against stored SCRAM credentials."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.security.errors import AuthenticationFailed
from api.security.plain import MAX_TOKEN_BYTES, PlainServer, plain_token
from records.model import ScramMechanism
from replay.security.scram_keys import ScramCredential, new_credential

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
INVALID = "Authentication failed: Invalid username or password"

ALICE_256 = new_credential(SHA256, "alice-pw")
BOB_512 = new_credential(SHA512, "bob-pw")
# Carol has both; her SHA-256 credential is of an old password: SHA-512 decides.
CAROL_256 = new_credential(SHA256, "old-pw")
CAROL_512 = new_credential(SHA512, "new-pw")
STORE: dict[tuple[str, ScramMechanism], ScramCredential] = {
    ("alice", SHA256): ALICE_256,
    ("bob", SHA512): BOB_512,
    ("carol", SHA256): CAROL_256,
    ("carol", SHA512): CAROL_512,
    ("ünï", SHA256): new_credential(SHA256, "pä✓"),
}


def lookup(name: str, mechanism: ScramMechanism) -> ScramCredential | None:
    return STORE.get((name, mechanism))


def login(token: bytes) -> PlainServer:
    server = PlainServer(lookup)
    assert server.evaluate(token) == b""
    return server


@pytest.mark.parametrize(
    ("user", "password"), [("alice", "alice-pw"), ("bob", "bob-pw"), ("ünï", "pä✓")]
)
def test_right_password_logs_in(user: str, password: str) -> None:
    server = login(plain_token(user, password))
    assert server.complete and server.username == user


def test_sha512_is_preferred_when_both_exist() -> None:
    assert login(plain_token("carol", "new-pw")).username == "carol"
    with pytest.raises(AuthenticationFailed, match=INVALID):
        login(plain_token("carol", "old-pw"))


def test_authzid_equal_to_the_user_is_accepted() -> None:
    assert login(b"alice\x00alice\x00alice-pw").username == "alice"


@pytest.mark.parametrize(
    "token",
    [
        plain_token("alice", "wrong"),
        plain_token("alice", "alice-pw "),
        plain_token("alice", "ALICE-PW"),
        plain_token("Alice", "alice-pw"),
        plain_token("nobody", "alice-pw"),
        plain_token("bob", "alice-pw"),
        # No SASLprep or normalization, as in Kafka: the decomposed form is another password.
        plain_token("ünï", unicodedata.normalize("NFD", "pä✓")),
    ],
)
def test_wrong_password_and_unknown_user_get_the_same_answer(token: bytes) -> None:
    server = PlainServer(lookup)
    with pytest.raises(AuthenticationFailed) as failure:
        server.evaluate(token)
    assert str(failure.value) == INVALID
    assert failure.value.error_code == 58
    assert not server.complete and server.username is None


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"", "expected 3 tokens, got 1"),
        (b"alice", "expected 3 tokens, got 1"),
        (b"alice\x00alice-pw", "expected 3 tokens, got 2"),
        (b"\x00alice\x00alice-pw\x00", "expected 3 tokens, got 4"),
        (b"\x00" * 10, "expected 3 tokens, got 11"),
        (b"\x00\x00alice-pw", "username not specified"),
        (b"\x00alice\x00", "password not specified"),
        (b"bob\x00alice\x00alice-pw", "authorization id that is different from username"),
        (b"\x00al\xffice\x00alice-pw", "not UTF-8"),
        (b"\x00alice\x00\xc3", "not UTF-8"),
        (b"\x00alice\x00" + b"x" * MAX_TOKEN_BYTES, "longer than"),
    ],
)
def test_malformed_messages_are_refused_clearly(token: bytes, message: str) -> None:
    with pytest.raises(AuthenticationFailed, match=message) as failure:
        PlainServer(lookup).evaluate(token)
    assert b"alice-pw" not in str(failure.value).encode()


def test_a_second_message_is_refused_even_after_success() -> None:
    server = login(plain_token("alice", "alice-pw"))
    with pytest.raises(AuthenticationFailed, match="already over"):
        server.evaluate(plain_token("bob", "bob-pw"))
    assert server.username == "alice"


def test_a_second_try_after_a_failure_is_refused() -> None:
    server = PlainServer(lookup)
    with pytest.raises(AuthenticationFailed):
        server.evaluate(plain_token("alice", "wrong"))
    with pytest.raises(AuthenticationFailed, match="already over"):
        server.evaluate(plain_token("alice", "alice-pw"))
    assert server.username is None


def test_a_long_password_just_under_the_limit_is_checked() -> None:
    password = "p" * (MAX_TOKEN_BYTES - 10)
    store = {("long", SHA256): new_credential(SHA256, password)}
    server = PlainServer(lambda name, mechanism: store.get((name, mechanism)))
    server.evaluate(plain_token("long", password))
    assert server.username == "long"


def test_the_lookup_is_asked_for_sha512_then_sha256() -> None:
    asked: list[tuple[str, ScramMechanism]] = []

    def spy(name: str, mechanism: ScramMechanism) -> ScramCredential | None:
        asked.append((name, mechanism))
        return None

    with pytest.raises(AuthenticationFailed, match=INVALID):
        PlainServer(spy).evaluate(plain_token("x", "y"))
    assert asked == [("x", SHA512), ("x", SHA256)]


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("a\x00", "pw"), "user name cannot hold a NUL"),
        (("a", "p\x00w"), "password cannot hold a NUL"),
        (("a", "pw", "z\x00"), "authzid cannot hold a NUL"),
        (("", "pw"), "needs a user name and a password"),
        (("a", ""), "needs a user name and a password"),
    ],
)
def test_client_token_refuses_what_cannot_be_sent(args: tuple[str, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        plain_token(*args)


def test_client_token_layout() -> None:
    assert plain_token("u", "p") == b"\x00u\x00p"
    assert plain_token("u", "p", "u") == b"u\x00u\x00p"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_is_refused_never_a_crash(data: bytes) -> None:
    with pytest.raises(AuthenticationFailed):
        PlainServer(lookup).evaluate(data)
