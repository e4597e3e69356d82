"""FetchSnapshot in the core (`api/raft/core/snapshot_fetch.py`), one rule at a time.

A follower below the leader's log start copies the leader's snapshot end to end; and each rule
alone: who the leader answers, what an answer carries before the shell fills it, the follower's
liveness while it copies, and each way a chunk is refused.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from api.protocol.quorum.messages import (
    NO_LEADER,
    UNCOUNTED_REPLICA,
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
from api.raft.core.ready import SnapshotInstall
from api.raft.core.replication import diverging_epoch
from api.raft.core.states import NEVER
from api.raft.core.transfer import snapshot_checksum_ok, with_checksum
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
from tests.support.raft_states import (
    fetch_deadline,
    fetch_in_flight,
    machine,
    running_transfer,
    transfer,
)


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


def ask_of(leader: RaftCore, **changes: object) -> FetchSnapshotRequest:
    ask = FetchSnapshotRequest(
        correlation_id=5,
        replica_id=2,
        current_leader_epoch=leader.epoch,
        snapshot_id=SNAP,
        position=0,
        max_bytes=1 << 20,
    )
    return replace(ask, **changes)  # type: ignore[arg-type] # the fields of a request


def test_the_checksum_frame_of_empty_bytes_is_four_bytes() -> None:
    assert snapshot_checksum_ok(with_checksum(b"")) and len(with_checksum(b"")) == 4
    assert not snapshot_checksum_ok(b"\x00\x00\x00")  # shorter than a CRC32
    assert snapshot_checksum_ok(with_checksum(b"x"))


# --- the leader ------------------------------------------------------------------------------


def test_the_leader_drops_a_request_naming_another_replica_or_from_itself() -> None:
    leader = trimmed_leader()
    leader.step(2, ask_of(leader, replica_id=3))  # sent by 2, in 3's name
    assert sent(drain(leader), FetchSnapshotResponse) == []
    leader.step(1, ask_of(leader, replica_id=1))
    assert sent(drain(leader), FetchSnapshotResponse) == []
    leader.step(2, ask_of(leader, replica_id=UNCOUNTED_REPLICA))  # a voter without state
    assert len(sent(drain(leader), FetchSnapshotResponse)) == 1


def test_a_request_from_a_later_epoch_is_unknown_and_answers_carry_no_bytes_of_their_own() -> None:
    leader = trimmed_leader()
    leader.step(2, ask_of(leader, current_leader_epoch=leader.epoch + 1, position=7))
    out = only(drain(leader), FetchSnapshotResponse)
    message = out.message  # type: ignore[attr-defined]
    assert message.error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert (out.read_from, out.read_until) == (7, 0)  # type: ignore[attr-defined] # no bytes
    assert message.size == 0 and message.position == 7  # the shell fills the size


def test_a_request_for_no_bytes_still_gets_one() -> None:
    leader = trimmed_leader()
    leader.step(2, ask_of(leader, max_bytes=0, position=30))
    out = only(drain(leader), FetchSnapshotResponse)
    assert (out.read_from, out.read_until) == (30, 31)  # type: ignore[attr-defined]


def test_a_replica_copying_a_snapshot_counts_as_fetching_but_an_uncounted_one_does_not() -> None:
    leader = trimmed_leader()
    leader.tick(leader.now_ms + 300)
    leader.step(2, ask_of(leader))
    leader.step(3, ask_of(leader, replica_id=UNCOUNTED_REPLICA))
    drain(leader)
    progress = machine(leader).leader_state.progress  # type: ignore[union-attr]
    assert progress[2].last_fetch_ms == leader.now_ms
    assert 3 not in progress or progress[3].last_fetch_ms != leader.now_ms


# --- the follower ----------------------------------------------------------------------------


def test_a_transfer_replaces_the_fetch_in_flight_and_is_counted() -> None:
    node = follower()
    assert node.snapshot_transfers == 0
    start(node)
    assert fetch_in_flight(node) is None and transfer(node) is not None
    assert node.snapshot_transfers == 1


def test_a_refused_chunk_waits_the_retry_backoff_and_late_fetch_answers_do_not_count() -> None:
    node = follower()
    first = only(drain(node), FetchRequest).message  # type: ignore[attr-defined]
    node.step(
        1,
        FetchResponse(
            correlation_id=first.correlation_id,
            error_code=ErrorCode.NONE,
            high_watermark=12,
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=4),
            snapshot_id=SNAP,
        ),
    )
    ask = only(drain(node), FetchSnapshotRequest).message  # type: ignore[attr-defined]
    node.tick(node.now_ms + 100)
    refused_at = node.now_ms
    node.step(1, chunk(ask, error=ErrorCode.SNAPSHOT_NOT_FOUND))
    assert transfer(node) is None
    assert sent(drain(node), FetchRequest) == []  # not at once: after the backoff
    assert node.next_deadline_ms() == refused_at + machine(node).config.retry_backoff_ms
    # the first Fetch's answer, late and again: the placeholder fetch matches no request
    node.step(1, replace(first, correlation_id=first.correlation_id))  # a request: ignored
    late = FetchResponse(
        correlation_id=first.correlation_id,
        error_code=ErrorCode.NONE,
        high_watermark=12,
        current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=4),
        snapshot_id=SNAP,
    )
    node.step(1, late)
    assert sent(drain(node), FetchSnapshotRequest) == [] and transfer(node) is None
    node.tick(refused_at + machine(node).config.retry_backoff_ms)
    [out] = sent(drain(node), FetchRequest)
    assert out.destination == 1


def test_a_follower_copying_from_its_leader_is_hearing_from_it() -> None:
    node = follower()
    ask = start(node)
    node.tick(node.now_ms + 1500)
    node.step(1, chunk(ask))
    assert machine(node).fetched_ms == node.now_ms
    assert fetch_deadline(node) == node.now_ms + machine(node).config.fetch_timeout_ms
    node.tick(node.now_ms + machine(node).config.fetch_timeout_ms - 1)
    assert node.role is Role.FOLLOWER  # no election while the chunks keep coming


def test_an_answer_naming_a_later_epoch_without_a_voter_leader_makes_the_node_unattached() -> None:
    for hint in (LeaderIdAndEpoch(leader_id=NO_LEADER, leader_epoch=5),
                 LeaderIdAndEpoch(leader_id=2, leader_epoch=5)):  # fmt: skip # itself
        node = follower()
        ask = start(node)
        node.step(1, chunk(ask, leader=hint))
        assert node.role is Role.UNATTACHED and node.epoch == 5


def refused(node: RaftCore, answer: FetchSnapshotResponse) -> None:
    """The chunk is refused: the transfer starts over with a Fetch at once."""
    node.step(1, answer)
    ready = drain(node)
    assert sent(ready, FetchSnapshotRequest) == [] and ready.install is None
    [out] = sent(ready, FetchRequest)
    assert out.message.fetch_offset == 3
    assert transfer(node) is None


def test_a_chunk_past_the_size_is_refused() -> None:
    node = follower()
    ask = start(node)
    refused(node, replace(chunk(ask), size=10))  # 64 bytes of a 10-byte snapshot


def test_an_empty_chunk_before_the_end_is_refused() -> None:
    node = follower()
    ask = start(node)
    refused(node, replace(chunk(ask), unaligned_records=b""))


def test_a_bad_checksum_starts_over_at_once() -> None:
    node = follower()
    bad = BLOB[:60] + b"!!!!"  # one chunk, whose CRC32 is wrong
    ask = start(node)
    refused(node, chunk(ask, data=bad))


def copying_observer() -> tuple[RaftCore, FetchSnapshotRequest]:
    """Node 9, an observer, copying SNAP from the voter it asked (its chunk request unsent)."""
    node = RaftCore(
        QuorumConfig(node_id=9, voters=VOTERS, fetch_snapshot_max_bytes=64),
        state=None,
        log=LogView.from_log(end_offset=3, epochs=[(1, 0)]),
        rng=random.Random(0),
        now_ms=0,
    )
    ready = drain(node)
    for _ in range(3):  # the first answer teaches the epoch, a later one names the snapshot
        [request] = sent(ready, FetchRequest)
        source = request.destination
        node.step(
            source,
            FetchResponse(
                correlation_id=request.message.correlation_id,
                error_code=ErrorCode.NONE,
                high_watermark=12,
                current_leader=LeaderIdAndEpoch(leader_id=source, leader_epoch=4),
                snapshot_id=SNAP,
            ),
        )
        ready = drain(node)
        if transfer(node) is not None:
            break
    assert node.role is Role.OBSERVER and transfer(node) is not None
    ask = only(ready, FetchSnapshotRequest).message  # type: ignore[attr-defined]
    return node, ask


def test_an_observer_whose_chunk_goes_unanswered_asks_around_again() -> None:
    node, _ = copying_observer()
    node.tick(node.now_ms + machine(node).config.request_timeout_ms)
    ready = drain(node)
    assert transfer(node) is None and node.leader_id == NO_LEADER
    assert machine(node).fetch_target == NO_LEADER  # any voter may answer, not only the silent one
    assert sent(ready, FetchSnapshotRequest) == []
    assert len(sent(ready, FetchRequest)) == 1


def test_a_chunk_past_the_size_is_refused_even_if_its_checksum_holds() -> None:
    node = follower()
    ask = start(node)
    whole = with_checksum(b"y" * 60)  # 64 bytes that frame themselves
    refused(node, replace(chunk(ask, data=whole), size=10))


def test_an_empty_chunk_at_the_size_completes_the_transfer() -> None:
    node = follower()
    ask = start(node)
    whole = with_checksum(b"y" * 60)
    node.step(1, replace(chunk(ask, data=whole), size=100))  # 64 of 100 bytes
    ask = only(drain(node), FetchSnapshotRequest).message  # type: ignore[attr-defined]
    assert ask.position == 64
    node.step(1, replace(chunk(ask), size=64, unaligned_records=b""))  # the leader: 64 in all
    ready = drain(node)
    assert ready.install is not None and ready.install.data == whole


def test_an_observer_copying_a_snapshot_gets_no_fetch_deadline() -> None:
    node, ask = copying_observer()
    before = fetch_deadline(node)
    assert transfer(node) is not None
    node.step(
        running_transfer(node).source,
        replace(
            chunk(ask),
            current_leader=LeaderIdAndEpoch(
                leader_id=running_transfer(node).source, leader_epoch=4
            ),
        ),
    )
    assert len(sent(drain(node), FetchSnapshotRequest)) == 1  # taken: the next one asked
    assert fetch_deadline(node) == before == NEVER


def test_a_request_naming_a_negative_snapshot_is_dropped() -> None:
    leader = trimmed_leader()
    leader.step(2, ask_of(leader, snapshot_id=replace(SNAP, end_offset=-1)))
    leader.step(2, ask_of(leader, snapshot_id=replace(SNAP, epoch=-1)))
    assert sent(drain(leader), FetchSnapshotResponse) == []


def test_an_observers_next_deadline_is_its_chunk_retry() -> None:
    node, _ = copying_observer()
    assert transfer(node) is not None
    assert node.next_deadline_ms() == running_transfer(node).retry_at


def test_an_observer_told_of_another_leader_drops_its_transfer_and_fetches_from_it() -> None:
    node, ask = copying_observer()
    assert transfer(node) is not None
    other = min(VOTERS - {running_transfer(node).source})
    hint = LeaderIdAndEpoch(leader_id=other, leader_epoch=5)
    node.step(running_transfer(node).source, replace(chunk(ask), current_leader=hint))
    ready = drain(node)
    assert transfer(node) is None and sent(ready, FetchSnapshotRequest) == []
    [out] = sent(ready, FetchRequest)
    assert out.destination == other


def test_a_fetch_below_the_start_counts_as_fetching_unless_uncounted() -> None:
    leader = trimmed_leader()
    leader.tick(leader.now_ms + 300)
    leader.step(2, fetch(2, leader.epoch, 3, 1))
    leader.step(3, replace(fetch(3, leader.epoch, 3, 1), replica_id=UNCOUNTED_REPLICA))
    ready = drain(leader)
    assert [out.message.snapshot_id for out in sent(ready, FetchResponse)] == [SNAP, SNAP]
    progress = machine(leader).leader_state.progress  # type: ignore[union-attr]
    assert progress[2].last_fetch_ms == leader.now_ms
    assert 3 not in progress or progress[3].last_fetch_ms != leader.now_ms


def test_kafkas_defaults_and_a_repr_without_the_snapshots_bytes() -> None:
    assert QuorumConfig(node_id=1, voters=VOTERS).fetch_snapshot_max_bytes == 1 << 20
    assert UNCOUNTED_REPLICA == -1  # Kafka's replica id of a fetcher that is not counted
    install = SnapshotInstall(snapshot_id=SNAP, data=b"secret bytes")
    assert "secret" not in repr(install) and "SnapshotInstall" in repr(install)
