"""What KIP-595 nodes exchange, with Kafka's message and field names (snake_case).

Only the fields the core needs are here; the single metadata partition makes Kafka's
`Topics`/`Partitions` nesting one level. `correlation_id` stands for the request header's
correlation id: a response echoes its request's, so a node can drop late or duplicated answers.
Error codes are Kafka's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import IntEnum

NO_LEADER = -1
"""Kafka's `LeaderId` when no leader is known."""
NO_HIGH_WATERMARK = -1
"""`HighWatermark` before the leader has committed an entry of its own epoch."""
UNCOUNTED_REPLICA = -1
"""The `ReplicaId` of a Fetch or FetchSnapshot that acknowledges nothing (Kafka's observer id).

A voter without durable state sends it until it has written its quorum state again: it may
have forgotten acknowledging entries of a later epoch, so no leader may count it (nor, for
check-quorum, as alive). The leader answers the sender as usual.
"""


class ErrorCode(IntEnum):
    """Kafka's error codes that the quorum protocol answers with."""

    NONE = 0
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    INCONSISTENT_VOTER_SET = 94
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127


class EntryKind(IntEnum):
    """What an entry's body is: a batch of records, or the leader-change control marker."""

    DATA = 0
    LEADER_CHANGE = 1
    """A new leader's LeaderChange marker (`LeaderChangeMessage.encode()`), one offset."""
    VOTERS = 2
    """A new voter set (KIP-853's VotersRecord, `VoterSet.encode()`): one offset, or the
    three of a static quorum's kraft.version upgrade (its voters with the level's records)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One batch of the log as the core sees it: `count` offsets from `offset`, one epoch.

    A batch is written and read whole (one atomic block of the log): every fetch answer,
    truncation and high watermark falls on batch boundaries. The body is opaque to the core.
    """

    offset: int
    epoch: int
    payload: bytes
    count: int = 1
    kind: EntryKind = EntryKind.DATA

    @property
    def end_offset(self) -> int:
        """The offset after the batch's last."""
        return self.offset + self.count


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderChangeMessage:
    """The marker a new leader appends first (Kafka's LeaderChangeMessage control record)."""

    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]

    def encode(self) -> bytes:
        """The marker's body in the log."""
        return json.dumps(
            {
                "version": 0,
                "leaderId": self.leader_id,
                "voters": list(self.voters),
                "grantingVoters": list(self.granting_voters),
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, payload: bytes) -> LeaderChangeMessage:
        """The marker `encode()` wrote."""
        data = json.loads(payload)
        return cls(
            leader_id=int(data["leaderId"]),
            voters=tuple(int(v) for v in data["voters"]),
            granting_voters=tuple(int(v) for v in data["grantingVoters"]),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderIdAndEpoch:
    """Kafka's `CurrentLeader` field."""

    leader_id: int = NO_LEADER
    leader_epoch: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochEndOffset:
    """Kafka's `DivergingEpoch`: the leader's end offset of the largest epoch <= the asked one."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotId:
    """Kafka's `SnapshotId`: a snapshot's end offset and the epoch of its last entry."""

    end_offset: int
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteRequest:
    """VoteRequest (52): a candidate asks for a vote.

    With `pre_vote`, a prospective asks whether it could win, without anyone's epoch or vote
    changing (KIP-996).
    """

    correlation_id: int
    replica_epoch: int
    """The candidate's epoch (a pre-vote sends the epoch it would stand in)."""
    replica_id: int
    last_offset_epoch: int
    last_offset: int
    """The candidate's log end offset."""
    pre_vote: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class VoteResponse:
    """VoteResponse (52)."""

    correlation_id: int
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginQuorumEpochRequest:
    """BeginQuorumEpochRequest (53): a new leader tells the voters it leads `leader_epoch`."""

    correlation_id: int
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BeginQuorumEpochResponse:
    """BeginQuorumEpochResponse (53)."""

    correlation_id: int
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EndQuorumEpochRequest:
    """EndQuorumEpochRequest (54): a resigning leader names its preferred successors.

    Most caught-up first, so they start the next election at once.
    """

    correlation_id: int
    leader_id: int
    leader_epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndQuorumEpochResponse:
    """EndQuorumEpochResponse (54)."""

    correlation_id: int
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchRequest:
    """FetchRequest (1) as KRaft uses it: the follower's position is its acknowledgement."""

    correlation_id: int
    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    """The fetcher's flushed log end offset: everything before it is durable there."""
    last_fetched_epoch: int
    """The epoch of the entry before `fetch_offset` (0 for an empty log)."""
    max_wait_ms: int = 0
    replica_directory_id: str = ""
    """The fetcher's directory id (KIP-853; "" where none), filled by the shell: a node wiped
    and formatted anew fetches with a new one, so the leader tells its incarnations apart."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResponse:
    """FetchResponse (1) as KRaft uses it.

    The core fills everything but `records`: the shell reads those from its log, from the
    request's `fetch_offset` up to `Outgoing.read_until`.
    """

    correlation_id: int
    error_code: ErrorCode
    high_watermark: int
    current_leader: LeaderIdAndEpoch
    diverging_epoch: EpochEndOffset | None = None
    snapshot_id: SnapshotId | None = None
    """Set when the fetch offset is below the leader's log start: fetch this snapshot."""
    records: tuple[Entry, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaState:
    """DescribeQuorum's per-replica state."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    directory_id: str = ""
    """The replica's directory id (KIP-853; "" where none is known): the one it fetched with,
    else the voter set's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeQuorumResponse:
    """DescribeQuorumResponse (55): what `mlog quorum describe` shows."""

    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchSnapshotRequest:
    """FetchSnapshotRequest (59): a follower below the log start asks for a snapshot chunk."""

    correlation_id: int
    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchSnapshotResponse:
    """FetchSnapshotResponse (59): `unaligned_records` holds bytes [position, ...) of `size`.

    The core fills all but `size` and the bytes: the shell reads those from its serialization
    of the snapshot, at `Outgoing.read_from` up to `Outgoing.read_until`.
    """

    correlation_id: int
    error_code: ErrorCode
    snapshot_id: SnapshotId
    current_leader: LeaderIdAndEpoch
    size: int
    position: int
    unaligned_records: bytes = field(default=b"", repr=False)


Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
    | FetchSnapshotRequest
    | FetchSnapshotResponse
)
"""What `RaftCore.step` accepts (DescribeQuorum is answered by the shell)."""
