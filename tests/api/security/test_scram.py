"""SCRAM logins (RFC 5802, RFC 7677): the server and client exchanges, honest and hostile."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.security.errors import SASL_AUTHENTICATION_FAILED, AuthenticationFailed, SaslClientError
from api.security.scram import ScramClient, ScramServer
from api.security.scram_messages import MAX_MESSAGE_BYTES, escape_name, unescape_name
from records.model import ScramMechanism
from replay.security.scram_keys import ScramCredential, h, hmac_of, new_credential, salted_password
from replay.security.scram_rules import HASH_NAMES, MAX_ITERATIONS, MIN_ITERATIONS, key_size

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3, byte for byte.
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

INVALID = (
    "Authentication failed during authentication due to invalid credentials with SASL "
    "mechanism SCRAM-SHA-256"
)

_CREDENTIALS: dict[tuple[str, ScramMechanism, str], ScramCredential] = {}


def credential(mechanism: ScramMechanism, password: str, name: str = "") -> ScramCredential:
    """A credential, cached: PBKDF2 at 4096 iterations is the slow part of these tests."""
    key = (name, mechanism, password)
    if key not in _CREDENTIALS:
        _CREDENTIALS[key] = new_credential(mechanism, password)
    return _CREDENTIALS[key]


def users(mechanism: ScramMechanism, **passwords: str) -> Callable[[str], ScramCredential | None]:
    """A lookup over `name=password` users."""
    table = {name: credential(mechanism, pw, name) for name, pw in passwords.items()}
    return table.get


def rfc_server() -> ScramServer:
    stored = new_credential(SHA256, "pencil", iterations=4096, salt=RFC_SALT)
    return ScramServer({"user": stored}.get, SHA256, server_nonce=RFC_SERVER_NONCE)


def login(server: ScramServer, client: ScramClient) -> tuple[bytes, bytes, bytes, bytes]:
    client_first = client.first()
    server_first = server.first(client_first)
    client_final = client.final(server_first)
    server_final = server.final(client_final)
    client.verify(server_final)
    return client_first, server_first, client_final, server_final


# ------------------------------------------------------------------------------ RFC 7677


def test_rfc7677_example_server_side_byte_for_byte() -> None:
    server = rfc_server()
    assert server.first(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not server.complete and server.username is None
    assert server.final(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"


def test_rfc7677_example_client_side_byte_for_byte() -> None:
    client = ScramClient("user", "pencil", SHA256, nonce=RFC_CLIENT_NONCE)
    assert client.first() == RFC_CLIENT_FIRST
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert not client.complete
    client.verify(RFC_SERVER_FINAL)
    assert client.complete


def test_rfc7677_example_through_evaluate() -> None:
    server = rfc_server()
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    with pytest.raises(AuthenticationFailed, match="already over"):
        server.evaluate(RFC_CLIENT_FINAL)


def test_a_replayed_client_final_fails_against_a_fresh_server_nonce() -> None:
    # A recorded exchange replayed against a server with its own random nonce.
    stored = new_credential(SHA256, "pencil", iterations=4096, salt=RFC_SALT)
    server = ScramServer({"user": stored}.get, SHA256)
    server_first = server.first(RFC_CLIENT_FIRST)
    assert server_first != RFC_SERVER_FIRST
    with pytest.raises(AuthenticationFailed) as failure:
        server.final(RFC_CLIENT_FINAL)
    assert str(failure.value) == INVALID
    assert failure.value.error_code == SASL_AUTHENTICATION_FAILED == 58
    assert server.username is None and not server.complete


# ------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_client_and_server_agree(mechanism: ScramMechanism) -> None:
    server = ScramServer(users(mechanism, alice="s3cret"), mechanism)
    client = ScramClient("alice", "s3cret", mechanism)
    login(server, client)
    assert server.username == "alice" and client.complete


@pytest.mark.parametrize("name", ["a,b", "a=b", "=2C", "==", ",,,", "ü ser", "x=3D,y"])
def test_names_with_commas_and_equals_are_escaped(name: str) -> None:
    server = ScramServer(users(SHA256, **{name: "pw"}), SHA256)
    client = ScramClient(name, "pw", SHA256)
    assert b"," not in client.first()[len(b"n,,") :].split(b",r=")[0]
    login(server, client)
    assert server.username == name


@settings(max_examples=200)
@given(st.text(min_size=1).filter(lambda s: "\x00" not in s))
def test_escape_then_unescape_is_the_name(name: str) -> None:
    escaped = escape_name(name)
    assert "," not in escaped
    assert unescape_name(escaped) == name


@pytest.mark.parametrize("text", ["", "a=", "a=2", "a=2c", "=", "a=41", "x\x00"])
def test_unescape_refuses_stray_equals_and_empty(text: str) -> None:
    with pytest.raises(ValueError):
        unescape_name(text)


def test_unicode_password_is_its_utf8_bytes() -> None:
    server = ScramServer(users(SHA512, bob="pä$$wörd ✓"), SHA512)
    login(server, ScramClient("bob", "pä$$wörd ✓", SHA512))
    assert server.username == "bob"


def test_every_login_uses_a_fresh_server_nonce() -> None:
    lookup = users(SHA256, alice="pw")
    firsts = {ScramServer(lookup, SHA256).first(b"n,,n=alice,r=abc") for _ in range(5)}
    assert len(firsts) == 5


# ------------------------------------------------------------------------------ refusals


def test_wrong_password_is_kafkas_message() -> None:
    server = ScramServer(users(SHA256, alice="right"), SHA256)
    client = ScramClient("alice", "wrong", SHA256)
    with pytest.raises(AuthenticationFailed) as failure:
        server.final(client.final(server.first(client.first())))
    assert str(failure.value) == INVALID
    assert "right" not in str(failure.value) and "wrong" not in str(failure.value)
    assert not server.complete


def test_sha512_message_names_its_mechanism() -> None:
    server = ScramServer(users(SHA512, alice="right"), SHA512)
    client = ScramClient("alice", "wrong", SHA512)
    with pytest.raises(AuthenticationFailed, match=r"with SASL mechanism SCRAM-SHA-512$"):
        server.final(client.final(server.first(client.first())))


def test_a_credential_of_the_other_mechanism_does_not_log_in() -> None:
    # A SHA-256 client against a SHA-512 server: different key sizes, a refusal, no crash.
    server = ScramServer(users(SHA512, alice="pw"), SHA512)
    client = ScramClient("alice", "pw", SHA256)
    with pytest.raises(AuthenticationFailed):
        server.final(client.final(server.first(client.first())))


def test_unknown_user_looks_like_a_known_one_until_the_proof() -> None:
    key = b"k" * 32
    lookup = users(SHA256, alice="pw")
    known = ScramServer(lookup, SHA256, fake_salt_key=key).first(b"n,,n=alice,r=abc")
    unknown = ScramServer(lookup, SHA256, fake_salt_key=key).first(b"n,,n=mallory,r=abc")
    again = ScramServer(lookup, SHA256, fake_salt_key=key).first(b"n,,n=mallory,r=abc")
    other = ScramServer(lookup, SHA256, fake_salt_key=key).first(b"n,,n=eve,r=abc")

    def fields(message: bytes) -> tuple[int, str]:
        _, salt, iterations = message.decode().split(",")
        return len(base64.b64decode(salt[2:])), iterations

    assert fields(unknown) == fields(known) == (32, "i=4096")
    # The same salt each time for a name (a changing salt would reveal a made-up user) ...
    assert unknown.split(b",")[1] == again.split(b",")[1]
    # ... and different names get different salts, as real users do.
    assert unknown.split(b",")[1] != other.split(b",")[1]


def test_unknown_user_fails_at_the_proof_with_the_same_message() -> None:
    server = ScramServer(users(SHA256, alice="pw"), SHA256)
    client = ScramClient("mallory", "pw", SHA256)
    client_final = client.final(server.first(client.first()))
    with pytest.raises(AuthenticationFailed) as failure:
        server.final(client_final)
    assert str(failure.value) == INVALID


def run_to_final(client_final_of: Callable[[bytes], bytes]) -> ScramServer:
    """A server past its first message, fed a client-final made from the server-first."""
    server = ScramServer(users(SHA256, alice="pw"), SHA256)
    client = ScramClient("alice", "pw", SHA256, nonce="abc")
    server_first = server.first(client.first())
    good = client.final(server_first)
    server.final(client_final_of(good))
    return server


def test_wrong_nonce_is_refused() -> None:
    def tamper(good: bytes) -> bytes:
        c, r, p = good.split(b",")
        return b",".join([c, r + b"X", p])

    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        run_to_final(tamper)


def test_channel_binding_other_than_n_is_refused() -> None:
    def tamper(good: bytes) -> bytes:
        _, r, p = good.split(b",")
        return b",".join([b"c=" + base64.b64encode(b"y,,"), r, p])

    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        run_to_final(tamper)


def test_flipped_proof_bits_are_refused() -> None:
    for bit in (0, 7, 100, 255):

        def tamper(good: bytes, bit: int = bit) -> bytes:
            c, r, p = good.split(b",")
            proof = bytearray(base64.b64decode(p[2:]))
            proof[bit // 8] ^= 1 << (bit % 8)
            return b",".join([c, r, b"p=" + base64.b64encode(bytes(proof))])

        with pytest.raises(AuthenticationFailed, match="invalid credentials"):
            run_to_final(tamper)


def test_the_good_final_passes_through_run_to_final() -> None:
    # The tampering tests above mean something only if the untampered message passes.
    assert run_to_final(lambda good: good).username == "alice"


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (b"", "fewer than four"),
        (b"n,,n=alice", "fewer than four"),
        (b"y,,n=alice,r=abc", "flag must be 'n'"),
        (b"p=tls-unique,,n=alice,r=abc", "channel binding is not supported"),
        (b"x,,n=alice,r=abc", "flag must be 'n'"),
        (b"n,,m=ext,n=alice,r=abc", "mandatory extensions"),
        (b"n,,r=abc,n=alice", "'n' is missing"),
        (b"n,,n=alice,n=alice,r=abc", "'r' is missing"),
        (b"n,,n=alice,r=abc,r=def", "appears twice"),
        (b"n,,n=alice,r=abc,ext=1,ext=2", "appears twice"),
        (b"n,,n=alice,r=abc,=1", "not key=value"),
        (b"n,,n=alice,r=abc,noequals", "not key=value"),
        (b"n,,n=,r=abc", "user name is empty"),
        (b"n,,n=al=ice,r=abc", "not followed by 2C or 3D"),
        (b"n,,n=al\x00ice,r=abc", "NUL"),
        (b"n,,n=alice,r=", "nonce is empty"),
        (b"n,,n=alice,r=a b", "not printable"),
        (b"n,,n=alice,r=\xc3\xa9", "not printable"),
        (b"n,x=y,n=alice,r=abc", "'a' is missing"),
        (b"n,,n=alice,r=abc\x00", "not printable"),
        (b"\xff\xfe", "not UTF-8"),
        (b"n,,n=" + b"a" * MAX_MESSAGE_BYTES + b",r=abc", "longer than"),
    ],
)
def test_malformed_client_first_is_refused_clearly(message: bytes, reason: str) -> None:
    server = ScramServer(users(SHA256, alice="pw"), SHA256)
    with pytest.raises(AuthenticationFailed, match="invalid SCRAM client-first") as failure:
        server.first(message)
    assert reason in str(failure.value)
    # The exchange is over: nothing more is accepted.
    with pytest.raises(AuthenticationFailed):
        server.evaluate(b"n,,n=alice,r=abc")


def test_malformed_messages_never_echo_the_input() -> None:
    secret = "hunter2-proof-material"
    server = ScramServer(users(SHA256, alice="pw"), SHA256)
    with pytest.raises(AuthenticationFailed) as failure:
        server.first(f"n,,n=alice,r=abc,{secret}".encode())
    assert secret not in str(failure.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda c, r, p: b"",
        lambda c, r, p: c + b"," + r,
        lambda c, r, p: r + b"," + c + b"," + p,
        lambda c, r, p: c + b"," + p + b"," + r,
        lambda c, r, p: c + b"," + r + b"," + p + b"," + p,
        lambda c, r, p: c + b"," + c + b"," + r + b"," + p,
        lambda c, r, p: c + b"," + r + b",r=abc," + p,
        lambda c, r, p: c + b"," + r + b",p=!!!",
        lambda c, r, p: c + b"," + r + b",p=" + base64.b64encode(b"short"),
        lambda c, r, p: c + b"," + r + b",p=" + base64.b64encode(bytes(64)),
        lambda c, r, p: c + b"," + r + b"," + p + b"\xff",
        lambda c, r, p: c + b"," + r + b"," + p + b"=" * MAX_MESSAGE_BYTES,
    ],
)
def test_malformed_client_final_is_refused(make: Callable[[bytes, bytes, bytes], bytes]) -> None:
    def tamper(good: bytes) -> bytes:
        c, r, p = good.split(b",")
        return make(c, r, p)

    with pytest.raises(AuthenticationFailed, match="Authentication failed"):
        run_to_final(tamper)


def final_with_header(server_first: bytes, bare: str, gs2_header: str, password: str) -> bytes:
    """A client-final binding `gs2_header`, computed by hand (our client always sends n,,)."""
    nonce, salt, iterations = (field[2:] for field in server_first.decode().split(","))
    salted = salted_password(SHA256, password.encode(), base64.b64decode(salt), int(iterations))
    client_key = hmac_of(SHA256, salted, b"Client Key")
    without_proof = f"c={base64.b64encode(gs2_header.encode()).decode()},r={nonce}"
    auth_message = f"{bare},{server_first.decode()},{without_proof}".encode()
    signature = hmac_of(SHA256, h(SHA256, client_key), auth_message)
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_authzid_equal_to_the_user_is_accepted() -> None:
    server = ScramServer(users(SHA256, alice="pw"), SHA256)
    server_first = server.first(b"n,a=alice,n=alice,r=abc")
    server.final(final_with_header(server_first, "n=alice,r=abc", "n,a=alice,", "pw"))
    assert server.username == "alice"


def test_channel_binding_must_repeat_the_first_messages_header() -> None:
    # A valid proof over c=biws ("n,,") after a client-first that sent "n,a=alice,".
    server = ScramServer(users(SHA256, alice="pw"), SHA256)
    server_first = server.first(b"n,a=alice,n=alice,r=abc")
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        server.final(final_with_header(server_first, "n=alice,r=abc", "n,,", "pw"))


def test_authzid_other_than_the_user_is_refused() -> None:
    server = ScramServer(users(SHA256, alice="pw", admin="x"), SHA256)
    with pytest.raises(
        AuthenticationFailed, match="authorization id that is different from username"
    ):
        server.first(b"n,a=admin,n=alice,r=abc")


def test_token_auth_extension_is_refused() -> None:
    server = ScramServer(users(SHA256, alice="pw"), SHA256)
    with pytest.raises(AuthenticationFailed, match="delegation tokens"):
        server.first(b"n,,n=alice,r=abc,tokenauth=true")


def test_unknown_extensions_are_ignored() -> None:
    server = ScramServer(users(SHA256, alice="pw"), SHA256)
    assert server.first(b"n,,n=alice,r=abc,foo=bar").startswith(b"r=abc")


def test_final_before_first_is_refused() -> None:
    server = ScramServer(users(SHA256, alice="pw"), SHA256)
    with pytest.raises(AuthenticationFailed, match="unexpected SCRAM client-final"):
        server.final(RFC_CLIENT_FINAL)


def test_first_twice_is_refused() -> None:
    server = ScramServer(users(SHA256, alice="pw"), SHA256)
    server.first(b"n,,n=alice,r=abc")
    with pytest.raises(AuthenticationFailed, match="unexpected SCRAM client-first"):
        server.first(b"n,,n=alice,r=abc")


def test_after_a_failure_even_the_right_proof_is_refused() -> None:
    server = ScramServer(users(SHA256, alice="pw"), SHA256)
    client = ScramClient("alice", "pw", SHA256)
    good = client.final(server.first(client.first()))
    c, r, p = good.split(b",")
    with pytest.raises(AuthenticationFailed):
        server.final(c + b"," + r + b"X," + p)
    with pytest.raises(AuthenticationFailed):
        server.final(good)
    assert server.username is None


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_garbage_first_messages_never_crash(data: bytes) -> None:
    server = ScramServer(users(SHA256, alice="pw"), SHA256, fake_salt_key=b"k")
    try:
        answer = server.first(data)
    except AuthenticationFailed:
        return
    assert answer.startswith(b"r=")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_garbage_final_messages_are_refused(data: bytes) -> None:
    server = ScramServer(users(SHA256, alice="pw"), SHA256)
    server.first(b"n,,n=alice,r=abc")
    with pytest.raises(AuthenticationFailed):
        server.final(data)


def test_server_rejects_a_bad_injected_nonce() -> None:
    with pytest.raises(ValueError, match="printable"):
        ScramServer(users(SHA256), SHA256, server_nonce="a,b")
    with pytest.raises(ValueError, match="not a SCRAM mechanism"):
        ScramServer(users(SHA256), ScramMechanism.UNKNOWN)


# ------------------------------------------------------------------------------ our client


def server_first_for(
    client: ScramClient, *, iterations: str = "4096", salt: str = "c2FsdA=="
) -> bytes:
    nonce = client.first().decode().split(",r=")[1]
    return f"r={nonce}srv,s={salt},i={iterations}".encode()


@pytest.mark.parametrize("iterations", [str(MAX_ITERATIONS + 1), "1000000000", "4095", "0"])
def test_client_refuses_iterations_out_of_kafkas_range(iterations: str) -> None:
    client = ScramClient("alice", "pw", SHA256)
    with pytest.raises(SaslClientError, match=f"{MIN_ITERATIONS} to {MAX_ITERATIONS}"):
        client.final(server_first_for(client, iterations=iterations))


@pytest.mark.parametrize(
    "iterations", ["-4096", "+4096", "4096.0", "0x1000", "", "4" * 5000, "٤٠٩٦", " 4096"]
)
def test_client_refuses_iteration_counts_that_are_not_numbers(iterations: str) -> None:
    client = ScramClient("alice", "pw", SHA256)
    with pytest.raises(SaslClientError, match="iteration count is not a number"):
        client.final(server_first_for(client, iterations=iterations))


def test_client_accepts_the_extreme_allowed_iterations() -> None:
    for iterations in (MIN_ITERATIONS, MAX_ITERATIONS):
        client = ScramClient("alice", "pw", SHA256)
        assert client.final(server_first_for(client, iterations=str(iterations))).startswith(
            b"c=biws,r="
        )


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"r=abc",
        b"s=c2FsdA==,r=NONCEsrv,i=4096",
        b"r=NONCE,s=c2FsdA==,i=4096",
        b"r=OTHERsrv,s=c2FsdA==,i=4096",
        b"r=NONCEsrv,s=,i=4096",
        b"r=NONCEsrv,s=!!,i=4096",
        b"r=NONCEsrv,s=c2FsdA==,i=4096,r=again",
        b"m=x,r=NONCEsrv,s=c2FsdA==,i=4096",
        b"r=NONCEs rv,s=c2FsdA==,i=4096",
        b"\xff",
    ],
)
def test_client_refuses_malformed_server_first(message: bytes) -> None:
    client = ScramClient("alice", "pw", SHA256, nonce="NONCE")
    with pytest.raises(SaslClientError, match="server-first message is invalid"):
        client.final(message)


def test_client_refuses_a_wrong_server_signature() -> None:
    client = ScramClient("user", "pencil", SHA256, nonce=RFC_CLIENT_NONCE)
    client.final(RFC_SERVER_FIRST)
    forged = b"v=" + base64.b64encode(bytes(32))
    with pytest.raises(SaslClientError, match="signature is wrong"):
        client.verify(forged)
    assert not client.complete


def test_client_detects_a_server_that_does_not_know_the_password() -> None:
    # A server holding another password's credential: the client refuses its server-final
    # even though the server (wrongly) accepted the proof.
    impostor = ScramServer(lambda name: credential(SHA256, "other"), SHA256)
    client = ScramClient("alice", "pw", SHA256)
    client_final = client.final(impostor.first(client.first()))
    with pytest.raises(SaslClientError, match="signature is wrong"):
        client.verify(b"v=" + base64.b64encode(bytes(32)))
    with pytest.raises(AuthenticationFailed):
        impostor.final(client_final)


@pytest.mark.parametrize(
    ("message", "match"),
    [
        (b"e=invalid-proof", "refused the login: 'invalid-proof'"),
        (b"e=\x1b[31mred", "refused the login: '\\\\x1b"),
        (b"v=!!!", "server-final message is invalid"),
        (b"x=abc", "server-final message is invalid"),
        (b"", "server-final message is invalid"),
        (b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=,v=again", "appears twice"),
    ],
)
def test_client_refuses_bad_server_final(message: bytes, match: str) -> None:
    client = ScramClient("user", "pencil", SHA256, nonce=RFC_CLIENT_NONCE)
    client.final(RFC_SERVER_FIRST)
    with pytest.raises(SaslClientError, match=match):
        client.verify(message)


def test_client_order_is_enforced() -> None:
    client = ScramClient("user", "pencil", SHA256, nonce=RFC_CLIENT_NONCE)
    with pytest.raises(SaslClientError, match="before the server-first"):
        client.verify(RFC_SERVER_FINAL)
    client.final(RFC_SERVER_FIRST)
    with pytest.raises(SaslClientError, match="second SCRAM server-first"):
        client.final(RFC_SERVER_FIRST)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("", "pw"), "non-empty"),
        (("a\x00b", "pw"), "NUL"),
    ],
)
def test_client_refuses_unusable_names(args: tuple[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ScramClient(*args, SHA256)
    with pytest.raises(ValueError, match="printable"):
        ScramClient("alice", "pw", SHA256, nonce="a,b")


_NAMES = st.text(min_size=1, max_size=30).filter(lambda s: "\x00" not in s)


@settings(max_examples=25, deadline=None)
@given(name=_NAMES, password=st.text(max_size=40), mechanism=st.sampled_from([SHA256, SHA512]))
def test_any_name_and_password_round_trip(
    name: str, password: str, mechanism: ScramMechanism
) -> None:
    # PBKDF2 at MIN_ITERATIONS per example: few examples, each a whole login.
    stored = new_credential(mechanism, password)
    server = ScramServer({name: stored}.get, mechanism)
    login(server, ScramClient(name, password, mechanism))
    assert server.username == name
    wrong = ScramServer({name: stored}.get, mechanism)
    client = ScramClient(name, password + "x", mechanism)
    with pytest.raises(AuthenticationFailed):
        wrong.final(client.final(wrong.first(client.first())))


def test_a_key_size_is_the_digest_size_of_the_mechanism_hash() -> None:
    assert set(HASH_NAMES) == {SHA256, SHA512}
    for mechanism, name in HASH_NAMES.items():
        assert key_size(mechanism) == hashlib.new(name).digest_size
    with pytest.raises(ValueError, match="not a SCRAM mechanism"):
        key_size(ScramMechanism.UNKNOWN)
