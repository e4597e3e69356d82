"""A stopping leader's handover: who could succeed it, how long it waits, when it gives up."""

from __future__ import annotations

import asyncio

from api.protocol.quorum.messages import Message
from api.raft.core import QuorumConfig
from api.raft.core.core import RaftCore
from api.raft.core.roles import Role
from api.raft.handover import Handover, handover_wait_s, recent_fetches, successor_possible
from tests.support.raft_core import drain, fetch, leader, role


class _Links:
    """A transport that sends nothing; `lost` says when each link went down."""

    def __init__(self, lost: dict[int, int] | None = None) -> None:
        self.lost = lost or {}

    def send(self, destination: int, message: Message) -> bool:
        return True

    async def close(self) -> None:
        return None


class _WatchedLinks(_Links):
    def lost_at_ms(self, destination: int) -> int | None:
        return self.lost.get(destination)


def _fetched(core: RaftCore, node: int, at_ms: int) -> None:
    """`node` fetches from the leader `core` at `at_ms` (the core's clock)."""
    core.tick(at_ms)
    core.step(node, fetch(node, core.epoch, core.log.end_offset, core.log.last_epoch))
    drain(core)


def test_a_successor_needs_a_majority_of_the_voters_without_this_one() -> None:
    links = _Links()
    assert not successor_possible({}, voters=3, transport=links)
    assert not successor_possible({2: 100}, voters=3, transport=links)
    assert successor_possible({2: 100, 3: 100}, voters=3, transport=links)
    assert not successor_possible({2: 100, 3: 100}, voters=5, transport=links)
    assert successor_possible({2: 100, 3: 100, 4: 100}, voters=5, transport=links)


def test_a_voter_whose_link_went_down_after_its_fetch_has_stopped() -> None:
    fetched = {2: 100, 3: 100}
    assert not successor_possible(fetched, voters=3, transport=_WatchedLinks({3: 150}))
    # A link an idle timeout closed before the voter's last fetch says nothing of it.
    assert successor_possible(fetched, voters=3, transport=_WatchedLinks({3: 50}))
    # A transport that does not watch its links counts every voter that fetched.
    assert successor_possible(fetched, voters=3, transport=_Links({3: 150}))


def test_the_wait_is_a_fetch_timeout_and_an_election_round_at_most() -> None:
    config = QuorumConfig(
        node_id=1,
        voters=frozenset({1, 2, 3}),
        fetch_timeout_ms=2000,
        election_timeout_ms=1000,
        election_backoff_max_ms=500,
    )
    assert handover_wait_s(config, 10.0) == 3.5
    assert handover_wait_s(config, 1.0) == 1.0


def test_recent_fetches_are_the_other_voters_within_the_fetch_timeout() -> None:
    core = leader(fetch_timeout_ms=2000)
    config = QuorumConfig(node_id=1, voters=frozenset({1, 2, 3}), fetch_timeout_ms=2000)
    t0 = core.now_ms
    _fetched(core, 2, t0 + 1000)
    _fetched(core, 2, t0 + 2000)  # the clock a fetch timeout on: node 3 never fetched
    assert recent_fetches(core, config) == {2: t0 + 2000}
    _fetched(core, 3, t0 + 2500)
    _fetched(core, 2, t0 + 3000)
    assert recent_fetches(core, config) == {2: t0 + 3000, 3: t0 + 2500}
    _fetched(core, 2, t0 + 4000)
    _fetched(core, 2, t0 + 4600)
    assert recent_fetches(core, config) == {2: t0 + 4600}
    assert role(core) is Role.LEADER


async def test_a_stopping_leader_with_no_possible_successor_does_not_resign() -> None:
    core = leader(fetch_timeout_ms=2000)
    config = QuorumConfig(node_id=1, voters=frozenset({1, 2, 3}), fetch_timeout_ms=2000)
    t0 = core.now_ms
    _fetched(core, 2, t0 + 1000)
    _fetched(core, 2, t0 + 2000)  # only node 2 fetched lately: no majority without this one
    assert role(core) is Role.LEADER
    woken: list[bool] = []
    refused: list[bool] = []
    handover = Handover(
        core,
        config,
        _Links(),
        wake=lambda: woken.append(True),
        role_seen=asyncio.Event(),
        refuse_fetches=lambda: refused.append(True),
    )
    handover.stopping = True
    await handover.resign(3.0, failed=lambda: False)
    assert not handover.requested
    assert not woken
    assert refused == [True]  # its parked fetches are answered at once


async def test_a_resignation_is_asked_of_the_loop_and_waits_for_a_successor() -> None:
    core = leader()
    config = QuorumConfig(node_id=1, voters=frozenset({1, 2, 3}))
    woken: list[bool] = []
    handover = Handover(
        core,
        config,
        _Links(),
        wake=lambda: woken.append(True),
        role_seen=asyncio.Event(),
        refuse_fetches=lambda: None,
    )
    # Nobody else leads within the timeout: it returns then, the resignation still asked.
    await handover.resign(0.05, failed=lambda: False)
    assert handover.requested
    assert woken == [True]
