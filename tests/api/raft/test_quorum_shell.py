"""The quorum's shell over real logs: elections, committed writes, followers, leader changes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from api.protocol.quorum.messages import FetchRequest, FetchResponse
from records.model import LeaderChangeRecord, TopicRecord
from replay.controller.commands import RegisterBroker
from replay.controller.errors import ApiError, ErrorCode
from tests.support.quorum_harness import STEADY, Cluster, create_topic, register

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a deadline


def _entries(node_log: object) -> list[tuple[int, int, int, object]]:
    return [(e.offset, e.epoch, e.timestamp, e.record) for e in node_log.read()]  # type: ignore[attr-defined]


async def test_three_nodes_elect_a_leader_and_replicate_committed_writes(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        await create_topic(leader, "orders")
        offset = leader.service.image.provenance.offset
        await cluster.converged(offset)
        images = [n.service.image for n in cluster.network.nodes.values()]
        assert all(image.topics.get_by_name("orders") is not None for image in images)
        logs = [_entries(n.log)[: offset + 1] for n in cluster.network.nodes.values()]
        assert logs[0] == logs[1] == logs[2]
        assert isinstance(logs[0][0][3], LeaderChangeRecord)
        assert sum(isinstance(e[3], TopicRecord) for e in logs[0]) == 1
    finally:
        await cluster.stop_all()


async def test_a_write_on_a_follower_names_the_leader(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    nodes = await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        follower = next(n for n in nodes if n is not leader)
        await cluster.converged(leader.service.image.provenance.offset)
        with pytest.raises(ApiError) as refused:
            await create_topic(follower, "t")
        assert refused.value.error_code == ErrorCode.NOT_CONTROLLER
        assert f"node {leader.config.node_id} at 127.0.0.1:" in str(refused.value)
    finally:
        await cluster.stop_all()


async def test_a_stopped_leader_hands_over_and_catches_up_when_back(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, **STEADY)  # the new leader must stay one on a loaded host
    await cluster.start_all()
    try:
        first = await cluster.leader()
        await register(first, 1)
        await create_topic(first, "a")
        old = first.config.node_id
        await cluster.stop(old)
        second = await cluster.leader()
        assert second.config.node_id != old
        assert second.service.image.topics.get_by_name("a") is not None
        await create_topic(second, "b")
        back = await cluster.start(old)
        await cluster.converged(second.service.image.provenance.offset)
        assert back.service.image.topics.get_by_name("b") is not None
        assert not back.leading
    finally:
        await cluster.stop_all()


async def test_an_isolated_leader_loses_its_pending_write_and_the_rest_go_on(
    tmp_path: Path,
) -> None:

    cluster = Cluster(tmp_path)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        cluster.network.isolate(leader.config.node_id)
        pending = asyncio.ensure_future(create_topic(leader, "lost"))
        await asyncio.sleep(0.05)
        assert not pending.done()  # not committed: no majority acknowledges it
        new = await cluster.leader(excluding=leader)
        await create_topic(new, "kept")
        with pytest.raises(ApiError) as refused:
            await pending
        assert refused.value.error_code == ErrorCode.NOT_CONTROLLER
        cluster.network.heal()
        await cluster.converged(new.service.image.provenance.offset)
        for node in cluster.network.nodes.values():
            assert node.service.image.topics.get_by_name("lost") is None
            assert node.service.image.topics.get_by_name("kept") is not None
    finally:
        await cluster.stop_all()


async def test_all_stopped_then_a_majority_restarted_keeps_every_committed_write(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        for i in range(5):
            await create_topic(leader, f"t{i}")
        committed = leader.service.image.provenance.offset
        for node_id in list(cluster.network.nodes):
            await cluster.stop(node_id, resign=False)
        await cluster.start(1)
        await cluster.start(2)
        again = await cluster.leader()
        assert again.service.image.provenance.offset >= committed
        assert all(again.service.image.topics.get_by_name(f"t{i}") for i in range(5))
        await create_topic(again, "after")
        await cluster.start(3)
        await cluster.converged(again.service.image.provenance.offset)
        logs = [_entries(n.log) for n in cluster.network.nodes.values()]
        assert logs[0] == logs[1] == logs[2]
    finally:
        await cluster.stop_all()


async def test_a_restarted_node_starts_from_its_newest_snapshot_of_committed_state(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path, snapshots=True)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        for i in range(4):
            await create_topic(leader, f"t{i}")
        await cluster.converged(leader.service.image.provenance.offset)
        follower = next(n for n in cluster.network.nodes.values() if n is not leader)
        service = follower.service
        assert service._snapshots is not None
        # The snapshot is written on its worker thread while the loop goes on.
        info = await asyncio.wrap_future(service._snapshots.request(service.image, service.log))
        assert info is not None and info.offset == service.image.provenance.offset
        leader = await cluster.leader()
        await create_topic(leader, "after-the-snapshot")
        await cluster.converged(leader.service.image.provenance.offset)
        node_id = follower.config.node_id
        await cluster.stop(node_id, resign=False)
        again = await cluster.start(node_id)
        await cluster.agreed()
        snapshots = again.service._snapshots
        assert snapshots is not None and snapshots.started_from is not None
        assert snapshots.started_from.offset == info.offset
        assert again.service.image.topics.get_by_name("after-the-snapshot")
    finally:
        await cluster.stop_all()


async def test_five_voters_survive_two_silent_failures(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, size=5)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        others = [i for i in cluster.ids if i != leader.config.node_id]
        await cluster.stop(leader.config.node_id, resign=False)
        await cluster.stop(others[0], resign=False)
        survivor = await cluster.leader()
        await create_topic(survivor, "still")
        assert survivor.service.image.topics.get_by_name("still") is not None
    finally:
        await cluster.stop_all()


async def test_embedded_writes_on_a_quorum_node_are_refused(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        service = leader.service
        with pytest.raises(ApiError) as refused:
            service.execute(
                lambda image: service.controller.register_broker(image, RegisterBroker(broker_id=7))
            )
        assert refused.value.error_code == ErrorCode.NOT_CONTROLLER
    finally:
        await cluster.stop_all()


async def test_a_leader_whose_disk_fails_stops_and_another_takes_over(tmp_path: Path) -> None:
    import errno

    from metadata_log.errors import LogFailedError

    cluster = Cluster(tmp_path)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        reasons: list[str] = []
        leader.on_failure = reasons.append

        def full(*args: object, **kwargs: object) -> int:
            raise LogFailedError(f"append failed: {OSError(errno.ENOSPC, 'No space left')}")

        leader.log.write_blocks = full  # type: ignore[method-assign]
        with pytest.raises(ApiError) as refused:
            await create_topic(leader, "never")
        assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert leader.failed is not None and reasons == [leader.failed]
        assert "No space left" in leader.failed
        successor = await cluster.leader(excluding=leader)
        await create_topic(successor, "after")
        assert successor.service.image.topics.get_by_name("never") is None
    finally:
        await cluster.stop_all()


async def test_fetches_are_taken_and_answered_in_place_by_a_leader(tmp_path: Path) -> None:
    """A leader steps a follower's fetch in the handler's own call, not on its loop's turn.

    Both followers are cut off, and their fetches are made here. The first is answered with
    the write queued meanwhile (from the blocks in memory); once both followers acknowledge
    it, it is committed (a majority without the leader's own flush, which lingers). Each
    answer is returned without the handler ever suspending.
    """
    cluster = Cluster(tmp_path, fetch_timeout_ms=3000, append_linger_ms=25)
    nodes = await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        await cluster.converged(leader.service.image.provenance.offset)
        first, second = (n.config.node_id for n in nodes if n is not leader)
        cluster.network.isolate(first)
        cluster.network.isolate(second)
        log = leader.core.log
        while log.flushed_offset < log.end_offset:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)  # the loop waits for input again
        end, epoch = log.end_offset, log.last_epoch

        def in_place(follower: int, offset: int, wait_ms: int) -> FetchResponse:
            handler = leader.handle(
                follower,
                FetchRequest(
                    correlation_id=offset,
                    replica_id=follower,
                    current_leader_epoch=leader.epoch,
                    fetch_offset=offset,
                    last_fetched_epoch=epoch,
                    max_wait_ms=wait_ms,
                ),
            )
            with pytest.raises(StopIteration) as returned:
                handler.send(None)  # runs to its end without waiting for anything
            answer = returned.value.value
            assert isinstance(answer, FetchResponse) and answer.error_code == 0
            return answer

        write = asyncio.get_running_loop().create_task(create_topic(leader, "in-place"))
        await asyncio.sleep(0)  # queued for the loop's next turn; the fetch comes first
        carried = in_place(first, end, wait_ms=500)  # would wait for news: the write is
        (entry,) = carried.records
        assert entry.offset == end and log.end_offset == end + entry.count
        assert not write.done() and leader.core.high_watermark == end
        in_place(second, log.end_offset, wait_ms=0)
        assert leader.core.high_watermark == end  # one follower and the leader have `end`
        committed = in_place(first, log.end_offset, wait_ms=0)
        assert committed.high_watermark == log.end_offset == leader.core.high_watermark
        await asyncio.wait_for(write, 30)
    finally:
        for node_id in list(cluster.network.nodes):
            await cluster.stop(node_id, resign=False)  # no successor to wait for


async def test_a_followers_flushes_leave_the_loop_thread_while_they_are_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower's fast fsync runs on the loop's thread; one slower than INLINE_FLUSH_S sends
    the next to the worker thread, and a fast one there brings them back. (A leader's runs
    behind its loop: `test_a_leaders_flush_runs_behind_its_loop`.)"""
    import threading

    from api.raft import flushes as flushes_module

    monkeypatch.setattr(flushes_module, "INLINE_FLUSH_S", 60.0)  # every flush counts as fast
    cluster = Cluster(tmp_path)
    nodes = await cluster.start_all()
    try:
        leader = await cluster.leader()
        follower = next(n for n in nodes if n is not leader)
        on_follower: list[threading.Thread] = []
        flush = follower.log.flush

        def watched() -> int:
            on_follower.append(threading.current_thread())
            return flush()

        follower.log.flush = watched  # type: ignore[method-assign]
        loop_thread = threading.current_thread()
        await register(leader, 1)
        await create_topic(leader, "fast")
        await cluster.converged(leader.service.image.provenance.offset)
        assert on_follower and set(on_follower) == {loop_thread}

        monkeypatch.setattr(flushes_module, "INLINE_FLUSH_S", 0.0)  # every flush counts as slow
        on_follower.clear()
        for name in ("slow-1", "slow-2", "slow-3"):
            await create_topic(leader, name)
            await cluster.converged(leader.service.image.provenance.offset)
        assert len(on_follower) >= 2
        assert on_follower[0] is loop_thread and loop_thread not in on_follower[1:]

        monkeypatch.setattr(flushes_module, "INLINE_FLUSH_S", 60.0)
        on_follower.clear()
        for name in ("fast-1", "fast-2", "fast-3"):
            await create_topic(leader, name)
            await cluster.converged(leader.service.image.provenance.offset)
        assert len(on_follower) >= 2
        assert on_follower[0] is not loop_thread and set(on_follower[1:]) == {loop_thread}
    finally:
        await cluster.stop_all()


@pytest.mark.parametrize("compiled", [True, False], ids=["syncer", "worker-thread"])
async def test_a_leaders_flush_runs_behind_its_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled: bool
) -> None:
    """A leader's slow fsync holds back no write: its loop proposes and answers fetches
    meanwhile, and the followers make the majority; once its flush ends, the leader counts
    toward the majority with one follower (the other cut off). The fsync runs on the
    compiled thread (`Syncer`), or without it on the worker thread."""
    import threading

    from metadata_log import syncer as syncers

    if compiled and not syncers.AVAILABLE:
        pytest.skip("metadata_log._syncer is not built")
    monkeypatch.setattr(syncers, "AVAILABLE", compiled)
    cluster = Cluster(tmp_path, **STEADY)  # its leader must stay one on a loaded host
    nodes = await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        # The registration's own flush must end first: on a loaded disk it outlasted the
        # four writes below, which then never asked for a flush of their own to hold.
        for _ in range(1200):  # 60 s
            if leader.core.log.flushed_offset >= leader.core.log.end_offset:
                break
            await asyncio.sleep(0.05)
        slow: list[str] = []
        held: list[Callable[[], None]] = []
        released = threading.Event()
        if compiled:
            start = syncers.Syncer.start

            def slow_start(syncer: syncers.Syncer, loop: Any, *args: Any) -> None:
                slow.append("sync")  # the job is held until the writes are answered
                held.append(lambda: start(syncer, loop, *args))

            monkeypatch.setattr(syncers.Syncer, "start", slow_start)
        else:
            flush = leader.log.flush

            def slow_flush() -> int:
                assert threading.current_thread() is not threading.main_thread()
                slow.append("flush")
                released.wait(60)  # held until the writes are answered
                return flush()

            monkeypatch.setattr(leader.log, "flush", slow_flush)
        for name in ("behind-1", "behind-2", "behind-3", "behind-4"):
            # Answered while the leader's fsync is held: a write that waited for it never is.
            await asyncio.wait_for(create_topic(leader, name), 30)
        assert slow and not released.is_set()
        released.set()
        for release in held:
            release()
        monkeypatch.undo()  # fsyncs as fast as the disk's again
        monkeypatch.setattr(syncers, "AVAILABLE", compiled)
        await asyncio.sleep(0.7)  # the held flushes end
        cut = next(n for n in nodes if n is not leader).config.node_id
        cluster.network.isolate(cut)
        await asyncio.wait_for(create_topic(leader, "leader-and-one"), 30)
        assert leader.core.log.flushed_offset == leader.core.high_watermark
    finally:
        for node_id in list(cluster.network.nodes):
            await cluster.stop(node_id, resign=False)


async def test_a_leaders_failing_flush_behind_stops_that_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An fdatasync that fails on the compiled thread (EINVAL here: a pipe, as a broken disk
    would answer EIO) stops the leader's log and the node, fail-stop as a flush in a turn."""
    import os

    from metadata_log import syncer as syncers
    from metadata_log.active import PendingSync

    if not syncers.AVAILABLE:
        pytest.skip("metadata_log._syncer is not built")
    cluster = Cluster(tmp_path)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        read_end, write_end = os.pipe()
        os.close(read_end)
        pipe = (os.fstat(write_end).st_dev, os.fstat(write_end).st_ino)

        def broken() -> PendingSync:
            return PendingSync(fd=write_end, covers=leader.log.end_offset, descriptors=-1)

        monkeypatch.setattr(leader.log, "begin_flush", broken)
        # The write may still commit on the two followers' fsyncs before the node stops.
        with contextlib.suppress(ApiError):
            await asyncio.wait_for(create_topic(leader, "its-flush-fails"), 10)
        for _ in range(600):  # 30 s: a loaded host may take seconds to run the syncer thread
            if leader.failed is not None:
                break
            await asyncio.sleep(0.05)
        assert leader.failed is not None and "flush failed" in leader.failed
        # `end_flush` closed the descriptor it was given: the number is free, or already
        # taken again by a file the busy node opened since (never the pipe).
        with contextlib.suppress(OSError):
            now = os.fstat(write_end)
            assert (now.st_dev, now.st_ino) != pipe
    finally:
        for node_id in list(cluster.network.nodes):
            await cluster.stop(node_id, resign=False)
