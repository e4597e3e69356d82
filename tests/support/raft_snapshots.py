"""A three-voter quorum whose follower fetches the leader's snapshot, driven by hand."""

from __future__ import annotations

import random

from api.protocol.quorum.messages import (
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    SnapshotId,
)
from api.raft.core import LogView, QuorumConfig, QuorumState, RaftCore, Ready
from api.raft.core.transfer import with_checksum
from tests.support.raft_core import drain, elect, sent

VOTERS = frozenset({1, 2, 3})


SNAP = SnapshotId(end_offset=10, epoch=2)


BLOB = with_checksum(b"the image at offset 9, " * 10)


def trimmed_leader() -> RaftCore:
    """Node 1, elected leader of epoch 4, whose log starts at 8 (snapshot at end 10)."""
    view = LogView.from_log(
        end_offset=12,
        epochs=[(2, 8), (3, 11)],
        start_offset=8,
        start_epoch=1,
        snapshot=SNAP,
    )
    core = RaftCore(
        QuorumConfig(node_id=1, voters=VOTERS, fetch_snapshot_max_bytes=64),
        state=QuorumState(leader_epoch=3, voters=VOTERS),
        log=view,
        rng=random.Random(0),
        now_ms=0,
    )
    elect(core)
    drain(core)
    return core


def follower(end: int = 3, epochs: list[tuple[int, int]] | None = None) -> RaftCore:
    """Node 2, following node 1 in epoch 4, with a short log."""
    return RaftCore(
        QuorumConfig(node_id=2, voters=VOTERS, fetch_snapshot_max_bytes=64),
        state=QuorumState(leader_epoch=4, leader_id=1, voters=VOTERS),
        log=LogView.from_log(end_offset=end, epochs=epochs if epochs is not None else [(1, 0)]),
        rng=random.Random(0),
        now_ms=0,
    )


def only(ready: Ready, kind: type) -> object:
    [out] = sent(ready, kind)
    return out


def start(node: RaftCore) -> FetchSnapshotRequest:
    request = only(drain(node), FetchRequest).message  # type: ignore[attr-defined]
    node.step(
        1,
        FetchResponse(
            correlation_id=request.correlation_id,
            error_code=ErrorCode.NONE,
            high_watermark=12,
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=4),
            snapshot_id=SNAP,
        ),
    )
    ask = only(drain(node), FetchSnapshotRequest).message  # type: ignore[attr-defined]
    assert isinstance(ask, FetchSnapshotRequest)
    return ask


def chunk(
    ask: FetchSnapshotRequest,
    *,
    data: bytes = BLOB,
    position: int | None = None,
    error: ErrorCode = ErrorCode.NONE,
    leader: LeaderIdAndEpoch | None = None,
) -> FetchSnapshotResponse:
    at = ask.position if position is None else position
    return FetchSnapshotResponse(
        correlation_id=ask.correlation_id,
        error_code=error,
        snapshot_id=ask.snapshot_id,
        current_leader=leader or LeaderIdAndEpoch(leader_id=1, leader_epoch=4),
        size=len(data),
        position=at,
        unaligned_records=data[at : at + 64],
    )
