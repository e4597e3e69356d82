"""The parts that bound login work and its log (issue #31): slots, summaries, caches, counts."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from api.security.derived_keys import DerivedKeys
from api.security.plain import PlainServer, plain_token
from api.security.unknown_users import FakeSalts
from api.server.login_guard import LoginPool, SourceSlots, SummarizedWarnings
from records.model import ScramMechanism
from replay.security.scram_keys import ScramCredential, new_credential

SHA512 = ScramMechanism.SCRAM_SHA_512


def test_source_slots_bound_each_address_alone() -> None:
    slots = SourceSlots(2)
    assert slots.take("a") and slots.take("a")
    assert not slots.take("a")
    assert slots.take("b")
    slots.give_back("a")
    assert slots.taken("a") == 1 and slots.take("a")


def test_summarized_warnings_log_one_line_per_group_then_a_summary(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="t")

    async def run() -> None:
        warnings = SummarizedWarnings(logging.getLogger("t"), "failed authentication")
        for index in range(50):
            warnings.warn("EXTERNAL", f"line {index}", "user 'x' from 10.0.0.1 on EXTERNAL")
        warnings.warn("LOCAL", "local line", "user 'y' from ::1 on LOCAL")
        warnings.flush()
        assert warnings.total == 51

    asyncio.run(run())
    assert [r.getMessage() for r in caplog.records] == [
        "line 0",
        "local line",
        "failed authentication: 49 more in 10 s: 49 user 'x' from 10.0.0.1 on EXTERNAL",
    ]


def test_derived_keys_derive_once_per_input_and_forget_the_oldest() -> None:
    keys = DerivedKeys(entries=2)
    salt = bytes(16)
    first = keys.stored_key(SHA512, b"pw", salt, 4096)
    assert keys.stored_key(SHA512, b"pw", salt, 4096) == first
    assert keys.derivations == 1
    keys.stored_key(SHA512, b"pw2", salt, 4096)
    keys.stored_key(SHA512, b"pw3", salt, 4096)  # the first one goes
    keys.stored_key(SHA512, b"pw", salt, 4096)
    assert keys.derivations == 4
    assert keys.stored_key(SHA512, b"pw", bytes(17), 4096) != first  # the salt is in the key


def test_plain_with_the_cache_accepts_the_password_and_refuses_others() -> None:
    credential = new_credential(SHA512, "secret")
    keys = DerivedKeys()

    def lookup(name: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return credential if (name, mechanism) == ("alice", SHA512) else None

    for _ in range(2):
        server = PlainServer(lookup, keys=keys)
        server.evaluate(plain_token("alice", "secret"))
        assert server.username == "alice"
    assert keys.derivations == 1
    wrong = PlainServer(lookup, keys=keys)
    with pytest.raises(Exception, match="Invalid username or password"):
        wrong.evaluate(plain_token("alice", "other"))
    assert wrong.attempted_username == "alice"


def test_fake_salts_are_stable_per_name_and_differ_between_names() -> None:
    salts = FakeSalts(b"k" * 32)
    assert salts.salt(SHA512, "a") == salts.salt(SHA512, "a") != salts.salt(SHA512, "b")
    assert len(salts.salt(SHA512, "a")) == 32


def test_login_pool_runs_at_most_its_bound_per_address_at_once() -> None:
    lock = threading.Lock()
    running = [0, 0]
    release = threading.Event()

    def work() -> None:
        with lock:
            running[0] += 1
            running[1] = max(running)
        release.wait(5)
        with lock:
            running[0] -= 1

    async def run() -> None:
        pool = LoginPool(threads=4, per_ip=2)
        tasks = [asyncio.ensure_future(pool.run("10.0.0.1", work)) for _ in range(6)]
        await asyncio.sleep(0.2)
        assert running[0] == 2  # four threads, but two for this address
        release.set()
        await asyncio.gather(*tasks)
        pool.close()

    asyncio.run(run())
    assert running == [0, 2]
