"""The ranges every number of a quorum message must be in before it may change any state.

A request comes from outside: a forged epoch of 2^31-1, stored as the node's epoch, made its
next election compute 2^31 and stopped it, again after every restart. So the core holds one
invariant, checked here at the door: its epoch never exceeds `LAST_EPOCH`, and an election
into an epoch past it is never started (`RaftMachine.may_start_election`). Offsets are Kafka's
int64, ids its int32; a count or a position is never negative.

`out_of_range` names the first field of a message that breaks a rule (one line), or None.
The transport calls it on what it decodes, and the core on what it is stepped, so a bad
message is refused whichever way it comes.
"""

from __future__ import annotations

from api.protocol.quorum.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    LeaderIdAndEpoch,
    Message,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from records.fields import INT32_MAX, INT64_MAX

LAST_EPOCH = INT32_MAX - 1
"""The largest epoch the quorum may reach: one election more must still fit an int32."""
MAX_REPLICA_ID = INT32_MAX
"""The largest node id (Kafka's `node.id` is an int32 >= 0)."""


def epoch_problem(value: int, what: str) -> str | None:
    """Why `value` cannot be an epoch of a message (None: it can)."""
    if value < 0:
        return f"{what} {value} is negative"
    if value > LAST_EPOCH:
        return (
            f"{what} {value} is past the last epoch an election can reach ({LAST_EPOCH}); "
            "a real node never sends it"
        )
    return None


def offset_problem(value: int, what: str, *, lowest: int = 0) -> str | None:
    """Why `value` cannot be an offset (or a position, a size) of a message (None: it can)."""
    if not lowest <= value <= INT64_MAX:
        return f"{what} {value} is not in {lowest}..{INT64_MAX}"
    return None


def id_problem(value: int, what: str, *, lowest: int = 0) -> str | None:
    """Why `value` cannot be a node id of a message (None: it can); -1 allowed if `lowest`."""
    if not lowest <= value <= MAX_REPLICA_ID:
        return f"{what} {value} is not a node id (0..{MAX_REPLICA_ID})"
    return None


def _first(*problems: str | None) -> str | None:
    return next((p for p in problems if p is not None), None)


def _leader(value: LeaderIdAndEpoch, what: str) -> str | None:
    return _first(
        id_problem(value.leader_id, f"{what} leader id", lowest=NO_LEADER),
        epoch_problem(value.leader_epoch, f"{what} leader epoch"),
    )


def _snapshot(value: SnapshotId, what: str) -> str | None:
    return _first(
        offset_problem(value.end_offset, f"{what} end offset"),
        epoch_problem(value.epoch, f"{what} epoch"),
    )


def out_of_range(message: Message) -> str | None:
    """The first field of `message` out of its range, as one line (None: all in range)."""
    if isinstance(message, VoteRequest):
        return _first(
            epoch_problem(message.replica_epoch, "ReplicaEpoch"),
            id_problem(message.replica_id, "ReplicaId"),
            epoch_problem(message.last_offset_epoch, "LastOffsetEpoch"),
            offset_problem(message.last_offset, "LastOffset"),
        )
    if isinstance(message, BeginQuorumEpochRequest):
        return _first(
            id_problem(message.leader_id, "LeaderId"),
            epoch_problem(message.leader_epoch, "LeaderEpoch"),
        )
    if isinstance(message, EndQuorumEpochRequest):
        return _first(
            id_problem(message.leader_id, "LeaderId"),
            epoch_problem(message.leader_epoch, "LeaderEpoch"),
            *(id_problem(c, "PreferredCandidate") for c in message.preferred_successors),
        )
    if isinstance(message, FetchRequest):
        return _first(
            id_problem(message.replica_id, "ReplicaId", lowest=-1),
            epoch_problem(message.current_leader_epoch, "CurrentLeaderEpoch"),
            offset_problem(message.fetch_offset, "FetchOffset"),
            epoch_problem(message.last_fetched_epoch, "LastFetchedEpoch"),
            None if 0 <= message.max_wait_ms <= INT32_MAX else "MaxWaitMs is negative",
        )
    if isinstance(message, FetchSnapshotRequest):
        return _first(
            id_problem(message.replica_id, "ReplicaId", lowest=-1),
            epoch_problem(message.current_leader_epoch, "CurrentLeaderEpoch"),
            _snapshot(message.snapshot_id, "SnapshotId"),
            offset_problem(message.position, "Position"),
            None if 0 <= message.max_bytes <= INT32_MAX else "MaxBytes is negative",
        )
    if isinstance(message, VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse):
        return _first(
            id_problem(message.leader_id, "LeaderId", lowest=NO_LEADER),
            epoch_problem(message.leader_epoch, "LeaderEpoch"),
        )
    if isinstance(message, FetchResponse):
        diverging = message.diverging_epoch
        return _first(
            offset_problem(message.high_watermark, "HighWatermark", lowest=-1),
            _leader(message.current_leader, "CurrentLeader"),
            None
            if diverging is None
            else _first(
                epoch_problem(diverging.epoch, "DivergingEpoch epoch"),
                offset_problem(diverging.end_offset, "DivergingEpoch end offset"),
            ),
            None if message.snapshot_id is None else _snapshot(message.snapshot_id, "SnapshotId"),
        )
    return _first(
        _snapshot(message.snapshot_id, "SnapshotId"),
        _leader(message.current_leader, "CurrentLeader"),
        offset_problem(message.size, "Size"),
        offset_problem(message.position, "Position"),
    )


__all__ = [
    "LAST_EPOCH",
    "epoch_problem",
    "id_problem",
    "offset_problem",
    "out_of_range",
]
