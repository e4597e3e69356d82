"""The sans-IO consensus core's facade: what the shell calls, as etcd's `RawNode`.

The core owns neither the log nor the transport nor a clock (etcd raft's model). It is fed
messages (`step`), time (`tick`) and proposals (`propose`, `change_voters`); each call may
queue work, and `ready()` hands it over as a `Ready` the shell carries out IN ORDER: write the
quorum state durably, install a snapshot, truncate, append, flush, and only then send the
messages (a vote or a fetch acknowledges what was persisted before it). The shell then calls
`advance()` with the log's flushed end offset.

`RaftCore` is only that interface and read-only views of the node; the state and its
transitions are the internal `RaftMachine` (machine.py), which the rules of the core take as
their argument. Nothing outside `api/raft/core/` reaches the machine
(`tests/api/raft/test_raft_boundaries.py`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from api.protocol.quorum.messages import (
    DescribeQuorumResponse,
    LeaderIdAndEpoch,
    Message,
    SnapshotId,
)
from api.raft.core import handlers, leading, proposals, timers
from api.raft.core.config import QuorumConfig
from api.raft.core.log_view import LogView
from api.raft.core.machine import RaftMachine
from api.raft.core.quorum_state import QuorumState
from api.raft.core.ready import (
    Batch,
    NotLeader,
    OffsetRange,
    Ready,
    ReadyDone,
    VoterChangeRefused,
)
from api.raft.core.roles import Role
from api.raft.core.voters import Voter, VoterHistory, VoterSet


class RaftCore:
    """One node of the quorum: `step`, `tick`, `propose`, then `ready` / `advance`."""

    def __init__(
        self,
        config: QuorumConfig,
        *,
        state: QuorumState | None,
        log: LogView,
        rng: random.Random,
        now_ms: int,
    ) -> None:
        """Start from the durable state; `state=None` means none survived (or never existed).

        `log` is the shell's view of its log, kept in step by the core from then on.
        """
        self._machine = RaftMachine(config, state=state, log=log, rng=rng, now_ms=now_ms)

    # ------------------------------------------------------------------------------ input

    def step(self, sender: int, message: Message) -> None:
        """Handle one message from `sender` (a malformed one is dropped, as if lost)."""
        handlers.step(self._machine, sender, message)

    def tick(self, now_ms: int) -> None:
        """Let time pass to `now_ms` (never backwards) and fire the timers that expired."""
        timers.tick(self._machine, now_ms)

    def propose(self, entries: Sequence[Batch]) -> OffsetRange | NotLeader:
        """Append `entries` (each a batch of `count` offsets) in this leader's epoch, or refuse."""
        return proposals.propose(self._machine, entries)

    def change_voters(
        self, *, add: Voter | None = None, remove: int | None = None, directory_id: str = ""
    ) -> OffsetRange | NotLeader | VoterChangeRefused:
        """KIP-853's AddRaftVoter / RemoveRaftVoter: append the new voter set, or refuse."""
        return proposals.change_voters(
            self._machine, add=add, remove=remove, directory_id=directory_id
        )

    def upgrade_voters(
        self, voters: VoterSet, *, count: int = 1
    ) -> OffsetRange | NotLeader | VoterChangeRefused:
        """The kraft.version upgrade: a static quorum's voters appended as an entry of `count`."""
        return proposals.upgrade_voters(self._machine, voters, count=count)

    def resign(self) -> None:
        """Graceful leader change: stop leading and name the successors (EndQuorumEpoch)."""
        self._machine.resign()

    def snapshot_taken(self, snapshot_id: SnapshotId) -> None:
        """The shell stored a snapshot of committed state: offer it to fetchers below the start.

        Its end offset must be in this log (or at its start) with the epoch of the entry
        before it; only a newer snapshot than the one known replaces it.
        """
        self._machine.log.take_snapshot(snapshot_id)

    # ----------------------------------------------------------------------------- output

    def ready(self) -> Ready:
        """Hand over the queued work (and forget it)."""
        return self._machine.ready()

    def advance(self, done: ReadyDone) -> None:
        """The shell did the last `Ready`; its log is flushed up to `done.flushed_offset`."""
        self._machine.advance(done)

    def next_deadline_ms(self) -> int:
        """When `tick` next has something to do (the shell may tick more often)."""
        return timers.next_deadline_ms(self._machine)

    def describe_quorum(self) -> DescribeQuorumResponse:
        """DescribeQuorum as this node answers it (NOT_LEADER_OR_FOLLOWER off the leader)."""
        return leading.describe_quorum(self._machine)

    # ------------------------------------------------------------------------------ views

    def current_leader(self) -> LeaderIdAndEpoch:
        """The leader this node knows of, and its epoch."""
        return self._machine.current_leader()

    @property
    def role(self) -> Role:
        """The node's role now."""
        return self._machine.role

    @property
    def epoch(self) -> int:
        """The epoch this node is in."""
        return self._machine.epoch

    @property
    def leader_id(self) -> int:
        """The leader of this epoch it knows of (`NO_LEADER`: none)."""
        return self._machine.leader_id

    @property
    def voted_id(self) -> int:
        """Whom it voted for in this epoch (`NO_LEADER`: nobody)."""
        return self._machine.voted_id

    @property
    def high_watermark(self) -> int:
        """Entries below this are known committed (0 after a restart until told)."""
        return self._machine.high_watermark

    @property
    def dynamic(self) -> bool:
        """Whether the voters are in the log (KIP-853) rather than `controller.quorum.voters`."""
        return self._machine.dynamic

    @property
    def voters(self) -> frozenset[int]:
        """The ids of the voters in force: the latest voter set of the log (KIP-853)."""
        return self._machine.voters

    @property
    def voter_set(self) -> VoterSet:
        """The voters in force, with their directory ids and addresses."""
        return self._machine.voter_set

    @property
    def history(self) -> VoterHistory:
        """The voter set at each offset of the log; the latest is in force."""
        return self._machine.history

    @property
    def is_voter(self) -> bool:
        """Whether this node is among the voters in force."""
        return self._machine.is_voter

    @property
    def log(self) -> LogView:
        """The core's view of the log (the shell trims its start after a retention trim)."""
        return self._machine.log

    @property
    def now_ms(self) -> int:
        """The time of the last `tick` (or of the start), on the shell's monotonic clock."""
        return self._machine.now_ms

    @property
    def snapshot_transfers(self) -> int:
        """How many snapshot transfers this node started (for metrics, tests and logs)."""
        return self._machine.snapshot_transfers
