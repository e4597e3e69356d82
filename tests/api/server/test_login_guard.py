"""The parts that bound login work and its log (issues #31, #54): slots, pools, summaries."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from api.security.derived_keys import DerivedKeys
from api.security.plain import PlainServer, plain_token
from api.security.unknown_users import FakeSalts
from api.server.login_guard import HandshakeSlots, LoginPool, PreloginMemory, SummarizedWarnings
from records.model import ScramMechanism
from replay.security.scram_keys import ScramCredential, new_credential

SHA512 = ScramMechanism.SCRAM_SHA_512


def test_handshake_slots_queue_an_address_past_its_bound_and_hand_slots_on_in_order() -> None:
    async def run() -> None:
        slots = HandshakeSlots(2, stall=60.0)
        closed: list[str] = []
        await slots.take("a", lambda: closed.append("a1"))
        first = lambda: closed.append("a2")  # noqa: E731 - one key, used twice
        await slots.take("a", first)
        await slots.take("b", lambda: closed.append("b1"))  # another address: not counted
        third = asyncio.ensure_future(slots.take("a", lambda: closed.append("a3")))
        fourth = asyncio.ensure_future(slots.take("a", lambda: closed.append("a4")))
        await asyncio.sleep(0.05)
        assert not third.done() and slots.waiting("a") == 2 and slots.running("a") == 2
        slots.give_back("a", first)
        await asyncio.sleep(0)
        assert third.done() and not fourth.done()  # first come, first served
        fourth.cancel()
        await asyncio.sleep(0)
        assert slots.waiting("a") == 0 and closed == []

    asyncio.run(run())


def test_a_handshake_slot_freed_behind_a_waiter_that_left_is_taken_at_once() -> None:
    async def run() -> None:
        slots = HandshakeSlots(1, stall=60.0)
        first = lambda: None  # noqa: E731 - one key, used twice
        await slots.take("a", first)
        left = asyncio.ensure_future(slots.take("a", lambda: None))
        behind = asyncio.ensure_future(slots.take("a", lambda: None))
        await asyncio.sleep(0)
        left.cancel()
        await asyncio.sleep(0)
        slots.give_back("a", first)
        await asyncio.wait_for(behind, 5)
        await asyncio.wait_for(slots.take("b", lambda: None), 5)
        assert slots.running("a") == 1 and slots.waiting("a") == 0

    asyncio.run(run())


def test_a_stalled_handshake_gives_way_to_a_waiting_one_of_its_address() -> None:
    async def run() -> None:
        slots = HandshakeSlots(1, stall=0.1)
        closed: list[str] = []
        stalled = lambda: closed.append("stalled")  # noqa: E731 - one key, used twice
        await slots.take("a", stalled)
        await asyncio.wait_for(slots.take("a", lambda: closed.append("new")), 5)
        assert closed == ["stalled"] and slots.gave_way == 1
        slots.give_back("a", stalled)  # its own give_back after closing changes nothing
        assert slots.running("a") == 1

    asyncio.run(run())


class Holder:
    """A connection as `PreloginMemory` sees it."""

    def __init__(self, pool: PreloginMemory, ip: str, idle_since: float) -> None:
        self.pool = pool
        self.ip = ip
        self.idle_since = idle_since
        self.held = 0
        self.closed = False

    def send(self, size: int) -> bool:
        held, self.held = self.held, self.held + size
        return self.pool.hold(held, self.held, self)

    def give_way(self) -> None:
        self.closed = True
        self.pool.hold(self.held, 0, self)
        self.held = 0


def test_a_full_prelogin_pool_makes_the_idlest_of_the_heaviest_address_give_way() -> None:
    pool = PreloginMemory(100)
    old = Holder(pool, "attacker", idle_since=1.0)
    newer = Holder(pool, "attacker", idle_since=2.0)
    other = Holder(pool, "other", idle_since=0.5)
    assert old.send(40) and newer.send(40) and other.send(20)
    assert pool.used == 100
    login = Holder(pool, "client", idle_since=3.0)
    assert login.send(10)  # room made: the login is not made to wait
    assert old.closed and not newer.closed and not other.closed
    assert pool.used == 70 and pool.gave_way == 1
    same = Holder(pool, "attacker", idle_since=4.0)
    assert same.send(50)  # a login of the same address: its idlest other goes
    assert newer.closed and pool.used == 80


def test_a_prelogin_pool_with_nothing_else_to_free_makes_the_newcomer_wait() -> None:
    pool = PreloginMemory(100)
    alone = Holder(pool, "a", idle_since=1.0)
    assert alone.send(100)
    assert not alone.send(1)  # over, and no one else holds anything: it waits
    assert not alone.closed and pool.holding("a") == 101


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
