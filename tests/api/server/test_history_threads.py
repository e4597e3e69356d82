"""The history reads' threads: few at once, each below the process's priority."""

from __future__ import annotations

import asyncio
import contextvars
import os
import threading
import time

import pytest

from api.server.history_threads import NICENESS, THREADS, HistoryThreads

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

        niceness, name, asked_by = await pool.run(where)
        assert niceness == os.getpriority(os.PRIO_PROCESS, 0) + NICENESS
        assert name.startswith("mlog-history")
        assert asked_by == "a console page"
        assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) < niceness  # the loop's
    finally:
        pool.close()


async def test_at_most_threads_reads_run_at_once() -> None:
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
        await asyncio.gather(*(pool.run(read) for _ in range(4 * THREADS)))
    finally:
        pool.close()
    assert most == THREADS


async def test_an_error_is_the_callers_and_bad_sizes_are_refused() -> None:
    pool = HistoryThreads(threads=1, niceness=0)
    try:
        with pytest.raises(ZeroDivisionError):
            await pool.run(lambda: 1 // 0)
        assert await pool.run(sum, [1, 2]) == 3
    finally:
        pool.close()
    with pytest.raises(ValueError, match="threads must be 1 or more"):
        HistoryThreads(threads=0)
    with pytest.raises(ValueError, match="niceness 0 or more"):
        HistoryThreads(niceness=-1)
