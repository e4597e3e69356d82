"""Pull-based replication: the leader's view of its voters, the high watermark, divergence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from api.protocol.quorum.messages import EpochEndOffset, ErrorCode, FetchRequest
from api.raft.core.log_view import LogView
from api.raft.core.roles import Role


def majority_offset(offsets: list[int], majority: int) -> int:
    """The largest offset that at least `majority` of `offsets` have reached."""
    return sorted(offsets, reverse=True)[majority - 1]


def diverging_epoch(
    log: LogView, *, fetch_offset: int, last_fetched_epoch: int
) -> EpochEndOffset | None:
    """The leader's answer to a fetch position its epoch cache disagrees with, else None.

    The position agrees when the leader has the fetcher's last epoch and that epoch ends at or
    after the fetch offset; otherwise the answer is the largest epoch <= the fetcher's last one
    and where it ends in the leader's log, and the fetcher truncates to it.
    """
    epoch, end = log.end_offset_for_epoch(last_fetched_epoch)
    if epoch == last_fetched_epoch and fetch_offset <= end:
        return None
    return EpochEndOffset(epoch=epoch, end_offset=end)


def truncation_offset(log: LogView, diverging: EpochEndOffset) -> int:
    """Where a follower cuts its log after a diverging-epoch answer (Kafka's rule).

    The follower keeps what both logs agree on: its own end of the largest epoch <= the
    leader's, and never past the leader's end of that epoch.
    """
    _epoch, end = log.end_offset_for_epoch(diverging.epoch)
    return min(end, diverging.end_offset)


OBSERVER_SESSION_TIMEOUT_MS = 300_000
"""An observer not heard from for this long is no longer described (Kafka's LeaderState
`OBSERVER_SESSION_TIMEOUT_MS`): a node stopped or removed leaves the list by itself."""


@dataclass(slots=True)
class VoterProgress:
    """What the leader knows of one replica from its fetches in this epoch."""

    end_offset: int = -1
    """The replica's flushed end offset from its last fetch (-1: no fetch this epoch)."""
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    directory_id: str = ""
    """The directory id the replica fetched with ("" where it sent none)."""


@dataclass(slots=True)
class LeaderState:
    """The leader's role state: progress per replica, parked fetches, who was told."""

    role: ClassVar[Role] = Role.LEADER

    epoch_start_offset: int
    started_ms: int
    voters: frozenset[int]
    progress: dict[int, VoterProgress] = field(default_factory=dict)
    parked: dict[int, tuple[FetchRequest, int]] = field(default_factory=dict)
    """A fetch with nothing new, per replica, with the time it must be answered by."""
    told: dict[int, int] = field(default_factory=dict)
    """The high watermark last sent to each replica in a fetch answer: a fetch from a replica
    told less than the current one is answered at once, not parked (KIP-1166's rule, without
    the request field: the leader remembers what it said)."""
    begin_sent_ms: dict[int, int] = field(default_factory=dict)
    uncounted: dict[int, VoterProgress] = field(default_factory=dict)
    """Where replicas fetching without their id (no durable state: a wiped or new incarnation)
    are, for DescribeQuorum only: never counted toward the high watermark or check-quorum."""

    def record_uncounted(
        self, replica: int, fetch_offset: int, now_ms: int, end_offset: int, directory_id: str = ""
    ) -> None:
        """A fetch without a replica id from `replica`: a new incarnation of that node.

        What its old incarnation acknowledged is void (it lost its state), so that progress
        is dropped: describe shows where the new one is, never the old one's lag.
        """
        if replica < 0:
            return  # a fetcher without an id (a tool's): no replica to describe, as in Kafka
        self.progress.pop(replica, None)
        progress = _incarnation(self.uncounted, replica, directory_id)
        progress.end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        if fetch_offset >= end_offset:
            progress.last_caught_up_ms = now_ms

    def described(self, replica: int) -> VoterProgress:
        """What DescribeQuorum shows of `replica`: its counted progress, else its uncounted."""
        return self.progress.get(replica) or self.uncounted.get(replica) or VoterProgress()

    def described_observers(self, voters: frozenset[int], now_ms: int) -> list[int]:
        """The replicas DescribeQuorum lists as observers: every fetcher but the voters.

        Only node ids (a fetch without one, id -1, is nobody's), and only those heard from
        within `OBSERVER_SESSION_TIMEOUT_MS`: the others are forgotten here, as Kafka's
        leader clears its inactive observers when it describes the quorum.
        """
        for known in (self.progress, self.uncounted):
            for replica in [r for r in known if r not in voters]:
                if replica < 0 or now_ms - known[replica].last_fetch_ms >= (
                    OBSERVER_SESSION_TIMEOUT_MS
                ):
                    del known[replica]
        return sorted((set(self.progress) | set(self.uncounted)) - voters)

    def record_fetch(
        self, replica: int, fetch_offset: int, now_ms: int, end_offset: int, directory_id: str = ""
    ) -> None:
        """A fetch is the replica's acknowledgement of everything before its offset.

        From another directory than the last one it fetched with, it is another incarnation
        (a node wiped and formatted anew): the old one's progress is not carried over. A
        fetcher without an id (-1) acknowledges nothing and is not recorded.
        """
        if replica < 0:
            return
        self.uncounted.pop(replica, None)
        progress = _incarnation(self.progress, replica, directory_id)
        progress.end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        if fetch_offset >= end_offset:
            progress.last_caught_up_ms = now_ms

    def knows_less(self, replica: int, high_watermark: int) -> bool:
        """Whether `replica` was last told an older high watermark than `high_watermark`."""
        return self.told.get(replica, -1) < high_watermark

    def high_watermark(self, *, leader: int, flushed_offset: int, majority: int) -> int:
        """The majority's flushed end offset (the leader's own counts as its flushed offset)."""
        offsets = [flushed_offset if voter == leader else self._end(voter) for voter in self.voters]
        return majority_offset(offsets, majority)

    def _end(self, voter: int) -> int:
        progress = self.progress.get(voter)
        return progress.end_offset if progress is not None else -1

    def has_quorum(self, *, leader: int, now_ms: int, timeout_ms: int, majority: int) -> bool:
        """Check-quorum: a majority (with the leader) fetched within `timeout_ms`."""
        if now_ms - self.started_ms < timeout_ms:
            return True
        recent = sum(
            1
            for voter in self.voters
            if voter == leader
            or (
                (progress := self.progress.get(voter)) is not None
                and now_ms - progress.last_fetch_ms < timeout_ms
            )
        )
        return recent >= majority

    def successors(self, leader: int) -> tuple[int, ...]:
        """The other voters, most caught-up first (EndQuorumEpoch's preferred successors)."""
        others = [v for v in self.voters if v != leader]
        return tuple(sorted(others, key=lambda v: (-self._end(v), v)))


def _incarnation(
    progress: dict[int, VoterProgress], replica: int, directory_id: str
) -> VoterProgress:
    """`replica`'s entry in `progress`, a fresh one if it was another directory's."""
    known = progress.get(replica)
    if known is None or (directory_id and known.directory_id not in ("", directory_id)):
        known = progress[replica] = VoterProgress()
    if directory_id:
        known.directory_id = directory_id
    return known


def leader_refusal(state: object, *, epoch: int, current_leader_epoch: int) -> ErrorCode | None:
    """Why a leader's request (Fetch, FetchSnapshot) is refused here, or None: Kafka's order.

    NOT_LEADER_OR_FOLLOWER unless this node leads (`state` is its role state); then
    FENCED_LEADER_EPOCH for an older epoch than its own `epoch`; UNKNOWN_LEADER_EPOCH for a
    newer one.
    """
    if not isinstance(state, LeaderState):
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if current_leader_epoch < epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if current_leader_epoch > epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return None
