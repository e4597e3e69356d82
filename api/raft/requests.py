"""The quorum requests a node answers, and the answers its shell makes without the core.

A request the core dropped (the node is stopping, or failed, or no answer came in time) is
refused naming the leader this node knows; DescribeQuorum's timestamps are turned from the
core's monotonic clock to wall-clock milliseconds, as Kafka's are.
"""

from __future__ import annotations

import time
from dataclasses import replace

from api.protocol.quorum.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)

Request = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
)
"""A request another node sends (the core answers it)."""

Response = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
)
"""The answer to a `Request`."""


def refusal(message: Request, leader: LeaderIdAndEpoch) -> Response:
    """NOT_LEADER_OR_FOLLOWER for `message`, naming `leader`."""
    error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    if isinstance(message, FetchRequest):
        return FetchResponse(
            correlation_id=message.correlation_id,
            error_code=error,
            high_watermark=-1,
            current_leader=leader,
        )
    if isinstance(message, FetchSnapshotRequest):
        return FetchSnapshotResponse(
            correlation_id=message.correlation_id,
            error_code=error,
            snapshot_id=message.snapshot_id,
            current_leader=leader,
            size=0,
            position=message.position,
        )
    if isinstance(message, VoteRequest):
        return VoteResponse(
            correlation_id=message.correlation_id,
            error_code=error,
            leader_id=leader.leader_id,
            leader_epoch=leader.leader_epoch,
            vote_granted=False,
        )
    kind = (
        BeginQuorumEpochResponse
        if isinstance(message, BeginQuorumEpochRequest)
        else EndQuorumEpochResponse
    )
    return kind(
        correlation_id=message.correlation_id,
        error_code=error,
        leader_id=leader.leader_id,
        leader_epoch=leader.leader_epoch,
    )


def on_wall_clock(answer: DescribeQuorumResponse, *, now_ms: int) -> DescribeQuorumResponse:
    """`answer` (timestamps of the core's clock, now `now_ms`) in wall-clock milliseconds.

    -1 stays -1: never.
    """
    shift = time.time_ns() // 1_000_000 - now_ms

    def wall(replica: ReplicaState) -> ReplicaState:
        return replace(
            replica,
            last_fetch_timestamp=_shifted(replica.last_fetch_timestamp, shift),
            last_caught_up_timestamp=_shifted(replica.last_caught_up_timestamp, shift),
        )

    return replace(
        answer,
        current_voters=tuple(wall(r) for r in answer.current_voters),
        observers=tuple(wall(r) for r in answer.observers),
    )


def _shifted(timestamp: int, shift: int) -> int:
    return timestamp if timestamp < 0 else timestamp + shift
