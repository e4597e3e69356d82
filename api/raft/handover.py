"""A node's way out of the quorum: no votes from it, and a leader's handover to a successor.

A stopping node grants no vote and stands for no election (`Handover.stopping`). A leader
resigns (EndQuorumEpoch: the core's `resign`, on the loop's next turn) and waits until the
successor's LeaderChange marker is in its own log. On its way out it waits only when the
other voters still up are a majority without it; otherwise (the last nodes of a shutdown:
nobody can be elected) it stops at once. A voter counts as up when it fetched within the
fetch timeout and its link did not go down after that fetch (`LinkWatch`: a voter that stops
closes its connections).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from api.protocol.quorum.messages import NO_LEADER
from api.raft.core.config import QuorumConfig
from api.raft.core.core import RaftCore
from api.raft.transport.protocol import QuorumTransport

HANDOVER_WAIT_S = 3.0
"""How long a stopping leader waits for a successor before it stops anyway."""


@runtime_checkable
class LinkWatch(Protocol):
    """A transport that tells when its link to a node went down (a node that stopped)."""

    def lost_at_ms(self, destination: int) -> int | None:
        """When (the core's clock, ms) the link to `destination` went down; None while up."""


class Handover:
    """A node's votes withheld once it stops, and its leadership handed over (`resign`)."""

    def __init__(
        self,
        core: RaftCore,
        config: QuorumConfig,
        transport: QuorumTransport,
        *,
        wake: Callable[[], None],
        role_seen: asyncio.Event,
        refuse_fetches: Callable[[], None],
    ) -> None:
        """A node's handover, its core and links given; the rest are the node's.

        `wake()` wakes the node's loop; `role_seen` is set when the node's role changes;
        `refuse_fetches()` answers the fetches parked on this node at once.
        """
        self.core = core
        self.config = config
        self._transport = transport
        self._wake = wake
        self._role_seen = role_seen
        self._refuse_fetches = refuse_fetches
        self.stopping = False
        """The node is shutting down: it grants no (pre-)vote and sends no VoteRequest."""
        self.requested = False
        """A resignation waits for the loop, which tells the core (`RaftCore.resign`)."""

    async def resign(self, timeout: float, *, failed: Callable[[], bool]) -> None:
        """Ask the loop to resign, and wait for a successor (`QuorumNode.resign`).

        Returns once the successor's marker is in this node's log, at once when a stopping
        node's successor cannot be elected, and after `timeout` (or once `failed()`) anyway.
        """
        live: dict[int, int] = {}
        if self.stopping:
            live = recent_fetches(self.core, self.config)
            if self._no_successor(live):
                return
            timeout = handover_wait_s(self.config, timeout)
        epoch = self.core.epoch
        self.requested = True
        self._wake()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not failed():
            core = self.core
            leader = core.leader_id
            # Done once the successor's LeaderChange marker is in this log too: a node that
            # stops before it has it ends one committed entry shorter than the others.
            if (
                core.epoch > epoch
                and leader not in (NO_LEADER, self.config.node_id)
                and core.log.last_epoch == core.epoch
            ):
                return
            if live and self._no_successor(live):
                return  # the voters it counted on stopped too (their links went down)
            self._role_seen.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.02):
                    await self._role_seen.wait()

    def _no_successor(self, fetched: dict[int, int]) -> bool:
        """Whether nobody can be elected (`successor_possible` is False).

        Then a stopping leader stops as it is, its parked fetches answered at once (or the
        server's stop waits out their long poll, ~0.4 s here).
        """
        if successor_possible(fetched, voters=len(self.core.voters), transport=self._transport):
            return False
        self._refuse_fetches()
        return True


def recent_fetches(core: RaftCore, config: QuorumConfig) -> dict[int, int]:
    """The other voters that fetched within the fetch timeout: their last fetch (ms)."""
    since = core.now_ms - config.fetch_timeout_ms
    return {
        voter.replica_id: voter.last_fetch_timestamp
        for voter in core.describe_quorum().current_voters
        if voter.replica_id != config.node_id and voter.last_fetch_timestamp >= since
    }


def successor_possible(fetched: dict[int, int], *, voters: int, transport: QuorumTransport) -> bool:
    """Whether the voters of `fetched` still up are a majority of `voters` without this one.

    A voter whose link went down after its last fetch (`transport` a `LinkWatch`) has stopped
    (a rolling stop of every node: the last leader does not wait a handover for voters that
    left a moment ago).
    """
    lost_at = transport.lost_at_ms if isinstance(transport, LinkWatch) else None
    up = 0
    for voter, fetched_at in fetched.items():
        lost = lost_at(voter) if lost_at is not None else None
        up += lost is None or lost < fetched_at
    return up > voters // 2


def handover_wait_s(config: QuorumConfig, timeout: float) -> float:
    """How long a stopping leader with a possible successor waits for it, `timeout` at most.

    A successor is elected within a round trip of the EndQuorumEpoch when one can be, or
    after one lost election and its retry on a busy host; a stopping node does not wait a
    whole handover for one that cannot (a voter that fetched lately may have stopped
    meanwhile): at most the fetch timeout and one election round.
    """
    round_ms = config.election_timeout_ms + config.election_backoff_max_ms
    return min(timeout, (config.fetch_timeout_ms + round_ms) / 1000)
