"""The history reads' threads: few at once, below the process's priority, in two lanes."""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import time

import pytest

from api.server.history_threads import BUILD_THREADS, FETCH_THREADS, NICENESS, HistoryThreads

pytestmark = pytest.mark.asyncio

_asked_by: contextvars.ContextVar[str] = contextvars.ContextVar("asked_by", default="nobody")


async def test_reads_run_below_the_process_priority_in_the_callers_context() -> None:
    pool = HistoryThreads()
    try:
        _asked_by.set("a console page")

        def where() -> tuple[int, str, str]:
            own = threading.get_native_id()
            return (
                os.getpriority(os.PRIO_PROCESS, own),
                threading.current_thread().name,
                (_asked_by.get()),
            )

        for lane, prefix in (
            (pool.build, "mlog-history-build"),
            (pool.fetch, "mlog-history-fetch"),
        ):
            niceness, name, asked_by = await lane(where)
            assert niceness == os.getpriority(os.PRIO_PROCESS, 0) + NICENESS
            assert name.startswith(prefix)
            assert asked_by == "a console page"
            assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) < niceness
    finally:
        pool.close()


@pytest.mark.parametrize(("lane", "threads"), [("build", BUILD_THREADS), ("fetch", FETCH_THREADS)])
async def test_at_most_a_lanes_threads_run_at_once(lane: str, threads: int) -> None:
    pool = HistoryThreads()
    running, most = 0, 0
    lock = threading.Lock()

    def read() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.02)
        with lock:
            running -= 1

    try:
        await asyncio.gather(*(getattr(pool, lane)(read) for _ in range(4 * threads)))
    finally:
        pool.close()
    assert most == threads


async def test_a_fetch_never_waits_behind_builds_that_hold_every_build_thread() -> None:
    pool = HistoryThreads()
    release = threading.Event()
    started = threading.Semaphore(0)

    def costly_diff() -> str:
        started.release()
        release.wait(60)  # generous: the fetch below ends it
        return "diff"

    try:
        builds = [asyncio.ensure_future(pool.build(costly_diff)) for _ in range(BUILD_THREADS)]
        waiting = asyncio.ensure_future(pool.build(lambda: "image"))  # queued behind them
        for _ in range(BUILD_THREADS):
            await asyncio.to_thread(started.acquire, True, 60)
        assert await asyncio.wait_for(pool.fetch(lambda: "blocks"), 60) == "blocks"
        assert not waiting.done()
        release.set()
        assert await asyncio.gather(*builds, waiting) == ["diff"] * BUILD_THREADS + ["image"]
    finally:
        release.set()
        pool.close()


async def test_an_error_is_the_callers_and_bad_sizes_are_refused() -> None:
    pool = HistoryThreads(builds=1, fetches=1, niceness=0)
    try:
        for lane in (pool.build, pool.fetch):
            with pytest.raises(ZeroDivisionError):
                await lane(lambda: 1 // 0)
            assert await lane(sum, [1, 2]) == 3
    finally:
        pool.close()
    with pytest.raises(ValueError, match="builds and fetches must be 1 or more"):
        HistoryThreads(builds=0)
    with pytest.raises(ValueError, match="builds and fetches must be 1 or more"):
        HistoryThreads(fetches=0)
    with pytest.raises(ValueError, match="niceness 0 or more"):
        HistoryThreads(niceness=-1)
