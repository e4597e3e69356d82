"""FetchSnapshot in the core, one rule at a time: a follower below the leader's log start."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from api.protocol.quorum.messages import (
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    SnapshotId,
)
from api.raft.core import LogView, QuorumConfig, QuorumState, RaftCore, ReadyDone, Role
from api.raft.core.errors import RaftError
from api.raft.core.replication import diverging_epoch
from api.raft.core.transfer import snapshot_checksum_ok
from tests.support.raft_core import drain, fetch, sent
from tests.support.raft_snapshots import (
    BLOB,
    SNAP,
    VOTERS,
    chunk,
    follower,
    only,
    start,
    trimmed_leader,
)
from tests.support.raft_states import transfer


def serve(out: object, blob: bytes = BLOB) -> FetchSnapshotResponse:
    """What a leader's shell fills into a FetchSnapshot answer: the bytes asked for."""
    message = out.message  # type: ignore[attr-defined] # an Outgoing
    assert isinstance(message, FetchSnapshotResponse)
    start, until = out.read_from, out.read_until  # type: ignore[attr-defined] # an Outgoing
    return FetchSnapshotResponse(
        correlation_id=message.correlation_id,
        error_code=message.error_code,
        snapshot_id=message.snapshot_id,
        current_leader=message.current_leader,
        size=len(blob),
        position=message.position,
        unaligned_records=blob[start:until] if message.error_code == ErrorCode.NONE else b"",
    )


def test_the_log_view_knows_its_start_and_the_epoch_before_it() -> None:
    view = LogView.from_log(
        end_offset=12, epochs=[(2, 8), (3, 11)], start_offset=8, start_epoch=1, snapshot=SNAP
    )
    assert view.end_offset_for_epoch(1) == (1, 8)
    assert view.end_offset_for_epoch(2) == (2, 11)
    empty = LogView.from_log(
        end_offset=10, epochs=[], start_offset=10, start_epoch=2, snapshot=SNAP
    )
    assert empty.last_epoch == 2 and empty.end_offset_for_epoch(2) == (2, 10)
    assert diverging_epoch(empty, fetch_offset=10, last_fetched_epoch=2) is None
    with pytest.raises(RaftError, match="no snapshot reaches it"):
        LogView.from_log(end_offset=12, epochs=[(2, 8)], start_offset=8, start_epoch=1)
    with pytest.raises(RaftError, match="disagrees"):
        view.take_snapshot(SnapshotId(end_offset=12, epoch=2))  # entry 11 is of epoch 3
    view.truncate(3)
    assert view.end_offset == 8  # never below the start


@pytest.mark.parametrize(
    ("offset", "last_epoch", "below"),
    [(3, 1, True), (8, 0, True), (8, 1, False), (9, 0, True), (10, 2, False), (12, 3, False)],
)
def test_the_leader_names_its_snapshot_to_a_fetch_it_cannot_place(
    offset: int, last_epoch: int, below: bool
) -> None:
    core = trimmed_leader()
    core.step(2, fetch(2, core.epoch, offset, last_epoch))
    message = only(drain(core), FetchResponse).message  # type: ignore[attr-defined]
    assert (message.snapshot_id == SNAP) is below
    if below:
        assert message.records == () and message.diverging_epoch is None


def test_a_follower_below_the_start_copies_the_snapshot_in_chunks_and_installs_it() -> None:
    leader = trimmed_leader()
    node = follower()
    request = only(drain(node), FetchRequest).message  # type: ignore[attr-defined]
    leader.step(2, request)
    node.step(1, only(drain(leader), FetchResponse).message)  # type: ignore[attr-defined]
    chunks = 0
    while True:
        ready = drain(node)
        if ready.install is not None:
            break
        ask = only(ready, FetchSnapshotRequest).message  # type: ignore[attr-defined]
        assert ask.snapshot_id == SNAP and ask.position == 64 * chunks
        leader.step(2, ask)
        node.step(1, serve(only(drain(leader), FetchSnapshotResponse)))
        chunks += 1
    assert chunks == -(-len(BLOB) // 64)
    assert ready.install.snapshot_id == SNAP and ready.install.data == BLOB
    assert ready.append == () and ready.truncate_to is None
    assert (node.log.start_offset, node.log.end_offset, node.log.last_epoch) == (10, 10, 2)
    assert node.high_watermark == 10 and ready.high_watermark == 10
    again = only(ready, FetchRequest).message  # type: ignore[attr-defined]
    assert (again.fetch_offset, again.last_fetched_epoch) == (10, 2)
    leader.step(2, again)
    answer = only(drain(leader), FetchResponse)
    assert answer.message.snapshot_id is None  # type: ignore[attr-defined]
    assert (answer.read_from, answer.read_until) == (10, 13)  # type: ignore[attr-defined] # + marker


@pytest.mark.parametrize(
    "trouble",
    ["not found", "position", "checksum", "new leader", "timeout then answer"],
)
def test_a_transfer_that_goes_wrong_starts_over_with_a_fetch(trouble: str) -> None:
    node = follower()
    ask = start(node)
    node.step(1, chunk(ask))
    ask = only(drain(node), FetchSnapshotRequest).message  # type: ignore[attr-defined]
    if trouble == "not found":
        node.step(1, chunk(ask, error=ErrorCode.SNAPSHOT_NOT_FOUND))
        node.tick(node.next_deadline_ms())
    elif trouble == "position":
        node.step(1, chunk(ask, position=0))
    elif trouble == "checksum":
        bad = BLOB[:-1] + bytes([BLOB[-1] ^ 1])
        while True:
            node.step(1, chunk(ask, data=bad))
            ready = drain(node)
            asks = sent(ready, FetchSnapshotRequest)
            if not asks:
                break
            ask = asks[0].message
        assert ready.install is None and not snapshot_checksum_ok(bad)
        node.tick(node.next_deadline_ms())
    elif trouble == "new leader":
        node.step(3, chunk(ask, leader=LeaderIdAndEpoch(leader_id=3, leader_epoch=5)))
        ready = drain(node)
        [out] = sent(ready, FetchRequest)
        assert out.destination == 3 and out.message.current_leader_epoch == 5
        assert transfer(node) is None and node.log.end_offset == 3
        return
    elif trouble == "timeout then answer":
        node.tick(node.next_deadline_ms())
        retry = only(drain(node), FetchSnapshotRequest).message  # type: ignore[attr-defined]
        assert retry.position == ask.position and retry.correlation_id != ask.correlation_id
        node.step(1, chunk(ask))  # the first request's late answer: ignored
        assert sent(drain(node), FetchSnapshotRequest) == []
        return
    ready = drain(node)
    [out] = sent(ready, FetchRequest)
    assert (out.message.fetch_offset, out.message.last_fetched_epoch) == (3, 1)
    assert ready.install is None and node.log.end_offset == 3


def test_the_leader_refuses_a_chunk_of_another_snapshot_or_epoch() -> None:
    leader = trimmed_leader()
    ask = FetchSnapshotRequest(
        correlation_id=5,
        replica_id=2,
        current_leader_epoch=leader.epoch,
        snapshot_id=SnapshotId(end_offset=9, epoch=2),
        position=0,
        max_bytes=1 << 20,
    )
    leader.step(2, ask)
    answer = only(drain(leader), FetchSnapshotResponse).message  # type: ignore[attr-defined]
    assert answer.error_code == ErrorCode.SNAPSHOT_NOT_FOUND
    leader.step(2, replace(ask, snapshot_id=SNAP, current_leader_epoch=leader.epoch - 1))
    answer = only(drain(leader), FetchSnapshotResponse).message  # type: ignore[attr-defined]
    assert answer.error_code == ErrorCode.FENCED_LEADER_EPOCH
    leader.step(2, replace(ask, snapshot_id=SNAP))
    out = only(drain(leader), FetchSnapshotResponse)
    assert out.message.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    assert (out.read_from, out.read_until) == (0, 64)  # type: ignore[attr-defined] # capped
    node = follower()
    drain(node)
    node.step(1, replace(ask, replica_id=1, snapshot_id=SNAP))
    assert only(drain(node), FetchSnapshotResponse).message.error_code == (  # type: ignore[attr-defined]
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    )


def test_a_follower_truncates_no_lower_than_its_start() -> None:
    node = RaftCore(
        QuorumConfig(node_id=2, voters=VOTERS),
        state=QuorumState(leader_epoch=4, leader_id=1, voters=VOTERS),
        log=LogView.from_log(
            end_offset=14, epochs=[(3, 10)], start_offset=10, start_epoch=2, snapshot=SNAP
        ),
        rng=random.Random(0),
        now_ms=0,
    )
    request = only(drain(node), FetchRequest).message  # type: ignore[attr-defined]
    node.step(
        1,
        FetchResponse(
            correlation_id=request.correlation_id,
            error_code=ErrorCode.NONE,
            high_watermark=10,
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=4),
            diverging_epoch=EpochEndOffset(epoch=1, end_offset=7),
        ),
    )
    ready = drain(node)
    assert ready.truncate_to == 10 and node.log.end_offset == 10
    assert node.role is Role.FOLLOWER


def test_the_shell_offers_only_snapshots_that_match_its_log() -> None:
    core = trimmed_leader()
    core.snapshot_taken(SnapshotId(end_offset=11, epoch=2))
    assert core.log.snapshot == SnapshotId(end_offset=11, epoch=2)
    core.snapshot_taken(SNAP)  # older: the newest stays
    assert core.log.snapshot == SnapshotId(end_offset=11, epoch=2)
    with pytest.raises(RaftError):
        core.snapshot_taken(SnapshotId(end_offset=99, epoch=3))
    drain(core)
    core.advance(ReadyDone(flushed_offset=core.log.end_offset))
