"""Group commits on the compiled syncer: its thread, its lock handed across the loop, its errors."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from metadata_log import LogConfig, LogFailedError, MetadataLog, syncer
from records import ConfigRecord, ConfigResourceType

pytestmark = pytest.mark.skipif(
    not syncer.AVAILABLE, reason="metadata_log._syncer is not built (no C compiler)"
)


def _config(name: str, value: int) -> ConfigRecord:
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name=name, name="k", value=str(value)
    )


def _values(log_dir: Path) -> list[tuple[int, str]]:
    with MetadataLog.open(log_dir) as log:
        return [(e.offset, e.record.resource_name) for e in log.read()]  # type: ignore[attr-defined]


async def test_group_commits_run_on_the_compiled_thread(tmp_path: Path) -> None:
    log = MetadataLog.open(tmp_path / "log")
    try:
        await asyncio.gather(*(log.append_async([_config(f"t{i}", i)]) for i in range(20)))
        names = {thread.name for thread in threading.enumerate()}
        assert "mlog-append" in names  # the syncer's thread
        assert not any(name.startswith("mlog-append_") for name in names)  # no Python worker
    finally:
        await log.aclose()
    assert [offset for offset, _ in _values(tmp_path / "log")] == list(range(20))


async def test_a_synchronous_append_on_the_loop_finishes_the_group_in_flight(
    tmp_path: Path,
) -> None:
    log = MetadataLog.open(tmp_path / "log")
    try:
        in_flight = asyncio.ensure_future(log.append_async([_config("async", 1)]))
        lock = log._active.write_lock  # the lock under test
        for _ in range(10):  # until the group's job has started and holds the lock
            if lock.locked():
                break
            await asyncio.sleep(0)
        assert lock.locked()
        # Waiting for the lock here would never end (the loop cannot turn): the append
        # finishes the job itself, then writes after it.
        assert log.append([_config("sync", 2)]) == (1, 1)
        assert await in_flight == (0, 0)
        assert await log.append_async([_config("after", 3)]) == (2, 2)
    finally:
        await log.aclose()
    assert _values(tmp_path / "log") == [(0, "async"), (1, "sync"), (2, "after")]


async def test_group_commits_roll_segments(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=64 * 1024)
    log = MetadataLog.open(tmp_path / "log", config=config)
    try:
        for _ in range(30):
            await asyncio.gather(
                *(log.append_async([_config(os.urandom(300).hex(), i)]) for i in range(10))
            )
        assert len(log.segments()) > 1
    finally:
        await log.aclose()
    assert [offset for offset, _ in _values(tmp_path / "log")] == list(range(300))


async def test_an_io_error_of_the_compiled_write_fails_the_log(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    log = MetadataLog.open(log_dir)
    try:
        assert await log.append_async([_config("kept", 1)]) == (0, 0)
        segment = log.segments()[-1].path
        # The segment's descriptor now refuses writes (EBADF), as a failing disk would.
        active_fd = log._active.fd  # the descriptor under test
        assert active_fd is not None
        read_only = os.open(segment, os.O_RDONLY)
        os.dup2(read_only, active_fd)
        os.close(read_only)
        results = await asyncio.gather(
            *(log.append_async([_config("lost", i)]) for i in range(3)), return_exceptions=True
        )
        assert all(isinstance(r, LogFailedError) for r in results), results
        assert "append failed" in str(results[0]) and "Bad file descriptor" in str(results[0])
        with pytest.raises(LogFailedError, match="accepts no more writes"):
            await log.append_async([_config("refused", 9)])
    finally:
        log.close()
    assert _values(log_dir) == [(0, "kept")]


def test_a_close_after_the_loop_ended_finishes_the_group_in_flight(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    log = MetadataLog.open(log_dir)

    async def leave_a_group_in_flight() -> None:
        left = asyncio.ensure_future(log.append_async([_config("in-flight", 1)]))
        assert not left.done()
        lock = log._active.write_lock  # the lock under test
        for _ in range(10):
            if lock.locked():
                return  # asyncio.run cancels the waiting tasks and closes the loop
            await asyncio.sleep(0)
        raise AssertionError("the group never started")

    asyncio.run(leave_a_group_in_flight())
    log.close()  # finishes the job itself, with no loop to answer on, and releases the lock
    assert _values(log_dir) == [(0, "in-flight")]
