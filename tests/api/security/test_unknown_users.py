"""What a login tells an attacker of user names: the same as of real users (issue 54, finding 6).

Before: SCRAM answered every unknown name with one count (the most common of the real users'),
so a real user whose count differs (`i=8192` among 4096s) was named real by its server-first
message; PLAIN checked an unknown name at SCRAM-SHA-512 and that count whatever the real users
had, ~1.2 ms less than a real SCRAM-SHA-256 user at 8192. Now both are drawn per name from the
real users' counts and mechanisms.
"""

from __future__ import annotations

import hmac
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from api.security.errors import AuthenticationFailed
from api.security.plain import plain_token
from api.security.scram_messages import b64decode
from api.security.unknown_users import FakeSalts, UnknownIterations
from api.server.sasl import LoginCosts, mechanism_server
from api.server.server import ServerListener
from records.model import ScramMechanism, UserScramCredentialRecord
from replay.security.scram_keys import new_credential
from replay.security.scram_rules import DEFAULT_ITERATIONS
from tests.support.attacks import Wire
from tests.support.sasl_users import seed_users
from tests.support.server_thread import running_server

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
SECRET = b"s" * 32

COUNTS = {"u0": 4096, "u1": 4096, "u2": 4096, "u3": 4096, "u4": 8192, "u5": 8192, "u6": 16384}
"""Real users and their counts: four at the default, two at 8192, one at 16384."""

UNKNOWN = [f"guess-{n}" for n in range(200)]
"""Names nobody has: with one real user in 7 at 16384, all 200 miss it with p = (6/7)^200."""

SASL = ServerListener(
    name="SASL_PLAINTEXT",
    security_protocol="SASL_PLAINTEXT",
    host="127.0.0.1",
    port=0,
    sasl_mechanisms=("SCRAM-SHA-256", "PLAIN"),
)


def _record(name: str, mechanism: ScramMechanism, iterations: int) -> UserScramCredentialRecord:
    credential = new_credential(mechanism, f"{name}-pw", iterations=iterations)
    return UserScramCredentialRecord(
        name=name,
        mechanism=mechanism,
        salt=credential.salt,
        stored_key=credential.stored_key,
        server_key=credential.server_key,
        iterations=iterations,
    )


Store = dict[tuple[str, ScramMechanism], UserScramCredentialRecord]


def _costs(store: Store, keys: object = None) -> LoginCosts:
    """The login costs a server wires (api/server/server.py), over `store`."""
    unknown = UnknownIterations(SECRET)
    return LoginCosts(
        keys=keys,  # type: ignore[arg-type]  # a spy with DerivedKeys' one method
        unknown_iterations=lambda mechanism, name: unknown.of(store, mechanism, name),
        unknown_plain=lambda name: unknown.plain_of(store, name),
        fake_salts=FakeSalts(SECRET),
    )


def _lookup(store: Store) -> Callable[[str, ScramMechanism], UserScramCredentialRecord | None]:
    return lambda name, mechanism: store.get((name, mechanism))


# ------------------------------------------------------------------ the draw itself


def test_an_unknown_name_gets_a_real_users_count_the_same_every_time() -> None:
    store = {
        (name, SHA512): _record(name, SHA512, count)
        for name, count in (("a", 4096), ("b", 4096), ("c", 8192), ("d", 4096))
    }
    draws = UnknownIterations(SECRET)
    seen = Counter(draws.of(store, SHA512, name) for name in UNKNOWN)
    assert set(seen) == {4096, 8192}
    # A quarter of the real users have 8192: about a quarter of the names are told 8192.
    assert 0.15 < seen[8192] / len(UNKNOWN) < 0.35
    again = UnknownIterations(SECRET)
    assert [again.of(dict(store), SHA512, n) for n in UNKNOWN] == [
        draws.of(store, SHA512, n) for n in UNKNOWN
    ]
    assert draws.of({}, SHA512, "anyone") == DEFAULT_ITERATIONS
    assert draws.of(store, SHA256, "anyone") == DEFAULT_ITERATIONS  # nobody has SHA-256


def test_one_user_more_moves_few_names() -> None:
    store = {(f"u{n}", SHA512): _record(f"u{n}", SHA512, 4096 * (1 + n % 2)) for n in range(6)}
    draws = UnknownIterations(SECRET)
    before = [draws.of(store, SHA512, n) for n in UNKNOWN]
    grown = {**store, ("u9", SHA512): _record("u9", SHA512, 16384)}
    after = [draws.of(grown, SHA512, n) for n in UNKNOWN]
    moved = sum(b != a for b, a in zip(before, after, strict=True))
    assert 0 < moved < len(UNKNOWN) // 3


def test_plain_draws_the_mechanism_a_real_users_check_uses() -> None:
    store = {("a", SHA256): _record("a", SHA256, 8192), ("b", SHA256): _record("b", SHA256, 8192)}
    draws = UnknownIterations(SECRET)
    assert {draws.plain_of(store, name) for name in UNKNOWN} == {(SHA256, 8192)}
    both = {**store, ("a", SHA512): _record("a", SHA512, 4096)}
    assert {draws.plain_of(both, name) for name in UNKNOWN} == {(SHA256, 8192), (SHA512, 4096)}
    assert draws.plain_of({}, "anyone") == (SHA512, DEFAULT_ITERATIONS)


# ------------------------------------------------------------------ PLAIN: the same work


class _Keys:
    """DerivedKeys' one method, counting what each check derives."""

    def __init__(self) -> None:
        self.calls: list[tuple[ScramMechanism, int]] = []

    def stored_key(
        self, mechanism: ScramMechanism, password: bytes, salt: bytes, iterations: int
    ) -> bytes:
        self.calls.append((mechanism, iterations))
        return bytes(32 if mechanism is SHA256 else 64)[:-1] + b"\x01"


def test_plain_does_the_same_work_for_an_unknown_user_as_for_a_real_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The case: real users have SCRAM-SHA-256 at 8192 only.
    store = {(n, SHA256): _record(n, SHA256, 8192) for n in ("alice", "bob")}
    compares: list[int] = []
    real_compare = hmac.compare_digest

    def compare(a: bytes, b: bytes) -> bool:
        compares.append(len(b))
        return real_compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", compare)  # what plain.py calls
    for name in ("alice", "nobody", "mallory"):
        keys = _Keys()
        compares.clear()
        server = mechanism_server("PLAIN", _lookup(store), _costs(store, keys))
        with pytest.raises(AuthenticationFailed, match="Invalid username or password"):
            server.evaluate(plain_token(name, "wrong"))
        assert keys.calls == [(SHA256, 8192)], name
        assert compares == [32], name


# ------------------------------------------------------------------ through a server


def _server_first(server: object, name: str) -> tuple[int, bytes]:
    wire = Wire(server, "SASL_PLAINTEXT")  # type: ignore[arg-type]
    try:
        _, answer = wire.scram_first(name, "x")
    finally:
        wire.close()
    fields = dict(part.split("=", 1) for part in answer.decode().split(","))
    return int(fields["i"]), b64decode(fields["s"])


def test_server_first_counts_of_unknown_names_are_the_real_users(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    for count in sorted(set(COUNTS.values())):
        seed_users(
            log_dir, {n: f"{n}-pw" for n, c in COUNTS.items() if c == count}, iterations=count
        )
    with running_server(log_dir, brokers=1, listeners=[SASL]) as server:
        real = {name: _server_first(server, name)[0] for name in COUNTS}
        unknown = {name: _server_first(server, name) for name in UNKNOWN}
        again = {name: _server_first(server, name) for name in UNKNOWN[:20]}
    assert real == COUNTS
    # What an attacker sees of a name it probes: a count from the same set as the real users',
    # the same count and salt on every probe.
    assert {count for count, _ in unknown.values()} == set(COUNTS.values())
    assert all(unknown[name] == answer for name, answer in again.items())
