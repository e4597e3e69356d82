"""The syncer: writes and fdatasyncs for an event loop off the interpreter lock; its lock."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from metadata_log import syncer as syncer_module
from metadata_log.syncer import JobLock, JobResult, Syncer

needs_syncer = pytest.mark.skipif(
    not syncer_module.AVAILABLE, reason="metadata_log._syncer is not built (no C compiler)"
)


@pytest.fixture
def syncer() -> Iterator[Syncer]:
    """A syncer on its compiled thread (where built)."""
    if not syncer_module.AVAILABLE:
        pytest.skip("metadata_log._syncer is not built (no C compiler at install)")
    made = Syncer()
    yield made
    made.close()


async def _write_and_sync(syncer: Syncer, fd: int, data: bytes | None) -> float:
    """`start` a job and wait for its end on this loop; the fdatasync's seconds, or its error."""
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[JobResult] = loop.create_future()

    def done(result: JobResult) -> None:
        if not ended.done():
            ended.set_result(result)

    syncer.start(loop, fd, data, done)
    result = await asyncio.shield(ended)  # a cancelled caller leaves the job to end
    if result.error is not None:
        raise result.error
    return result.sync_seconds


def _append_fd(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def test_data_is_written_at_the_end_then_synced(tmp_path: Path, syncer: Syncer) -> None:
    path = tmp_path / "segment"
    path.write_bytes(b"head:")
    fd = _append_fd(path)
    try:

        async def writes() -> list[float]:
            return [
                await _write_and_sync(syncer, fd, b"one,"),
                await _write_and_sync(syncer, fd, b"two" * 100_000),
                await _write_and_sync(syncer, fd, None),
            ]

        seconds = asyncio.run(writes())
    finally:
        os.close(fd)
    assert path.read_bytes() == b"head:one," + b"two" * 100_000
    assert all(s >= 0 for s in seconds)


def test_a_write_error_is_an_oserror_with_its_errno(tmp_path: Path, syncer: Syncer) -> None:
    path = tmp_path / "read-only"
    path.write_bytes(b"x")
    fd = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(OSError) as caught:
            asyncio.run(_write_and_sync(syncer, fd, b"data"))
    finally:
        os.close(fd)
    assert caught.value.errno == errno.EBADF
    assert path.read_bytes() == b"x"


def test_a_sync_error_is_an_oserror_with_its_errno(syncer: Syncer) -> None:
    read_end, write_end = os.pipe()  # fdatasync of a pipe: EINVAL
    try:
        with pytest.raises(OSError) as caught:
            asyncio.run(_write_and_sync(syncer, write_end, None))
    finally:
        os.close(read_end)
        os.close(write_end)
    assert caught.value.errno == errno.EINVAL


def test_a_cancelled_caller_leaves_its_job_to_end(tmp_path: Path, syncer: Syncer) -> None:
    path = tmp_path / "segment"
    fd = _append_fd(path)
    try:

        async def cancel_then_write() -> None:
            task = asyncio.ensure_future(_write_and_sync(syncer, fd, b"a" * 1_000_000))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            syncer.finish_blocking()  # the job may have ended meanwhile: then this does nothing
            assert not syncer.busy
            await _write_and_sync(syncer, fd, b"b")

        asyncio.run(cancel_then_write())
    finally:
        os.close(fd)
    # The cancelled job ran to its end all the same, before the next one.
    assert path.read_bytes() == b"a" * 1_000_000 + b"b"


def test_one_job_at_a_time(tmp_path: Path, syncer: Syncer) -> None:
    fd = _append_fd(tmp_path / "segment")
    ended: list[JobResult] = []
    try:

        async def start_twice() -> None:
            loop = asyncio.get_running_loop()
            syncer.start(loop, fd, b"first", ended.append)
            # No turn of the loop in between: the first job's end cannot have been taken.
            with pytest.raises(RuntimeError, match="already running"):
                syncer.start(loop, fd, b"second", ended.append)
            syncer.finish_blocking()

        asyncio.run(start_twice())
    finally:
        os.close(fd)
    assert len(ended) == 1
    assert (tmp_path / "segment").read_bytes() == b"first"


def test_finish_blocking_runs_the_jobs_end_here(tmp_path: Path, syncer: Syncer) -> None:
    path = tmp_path / "segment"
    fd = _append_fd(path)
    ended: list[JobResult] = []
    try:

        async def start_and_finish() -> None:
            syncer.start(asyncio.get_running_loop(), fd, b"x" * 100_000, ended.append)
            assert syncer.busy and not ended
            syncer.finish_blocking()  # without a turn of the loop
            assert not syncer.busy
            assert len(ended) == 1 and ended[0].error is None
            await asyncio.sleep(0.01)  # the loop's reader finds nothing more to run
            assert len(ended) == 1

        asyncio.run(start_and_finish())
    finally:
        os.close(fd)
    assert path.stat().st_size == 100_000


def test_one_syncer_serves_one_loop_then_another(tmp_path: Path, syncer: Syncer) -> None:
    path = tmp_path / "segment"
    fd = _append_fd(path)
    try:
        asyncio.run(_write_and_sync(syncer, fd, b"first "))
        asyncio.run(_write_and_sync(syncer, fd, b"second"))
    finally:
        os.close(fd)
    assert path.read_bytes() == b"first second"


def test_a_closed_syncer_takes_no_more_jobs(tmp_path: Path, syncer: Syncer) -> None:
    fd = _append_fd(tmp_path / "segment")
    try:
        asyncio.run(_write_and_sync(syncer, fd, b"x"))
        syncer.close()
        with pytest.raises(RuntimeError, match="closed"):
            asyncio.run(_write_and_sync(syncer, fd, b"y"))
    finally:
        os.close(fd)


@needs_syncer
def test_a_lock_held_by_a_job_is_taken_on_its_thread_by_finishing_the_job(
    tmp_path: Path, syncer: Syncer
) -> None:
    lock = JobLock()
    path = tmp_path / "segment"
    fd = _append_fd(path)
    events: list[str] = []
    try:

        async def run() -> None:
            assert lock.acquire(blocking=False)
            lock.held_by_job(syncer)

            def ended(result: JobResult) -> None:
                events.append("job ended")
                lock.job_ended()

            syncer.start(asyncio.get_running_loop(), fd, b"block", ended)
            assert not lock.acquire(blocking=False)  # held by the job
            with lock:  # a synchronous writer on the loop's thread: no deadlock
                events.append("locked")
            assert not lock.locked()

        asyncio.run(run())
    finally:
        os.close(fd)
    assert events == ["job ended", "locked"]
    assert path.read_bytes() == b"block"


@needs_syncer
def test_another_thread_waits_for_the_jobs_end_on_the_loop(tmp_path: Path, syncer: Syncer) -> None:
    lock = JobLock()
    fd = _append_fd(tmp_path / "segment")
    events: list[str] = []
    try:

        async def run() -> None:
            assert lock.acquire(blocking=False)
            lock.held_by_job(syncer)
            ended_on_loop = asyncio.Event()

            def ended(result: JobResult) -> None:
                events.append("job ended")
                lock.job_ended()
                ended_on_loop.set()

            def other() -> None:
                with lock:
                    events.append("other thread locked")

            thread = threading.Thread(target=other)
            syncer.start(asyncio.get_running_loop(), fd, b"block", ended)
            thread.start()
            await ended_on_loop.wait()
            await asyncio.to_thread(thread.join)

        asyncio.run(run())
    finally:
        os.close(fd)
    assert events == ["job ended", "other thread locked"]
