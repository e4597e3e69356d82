"""The threads a server answers history reads on: few, and below its event loop's priority.

FetchLog, ImageAt, Diff and History (a console's pages, the CLI's time travel) read the log and
build images on threads beside the event loop. On asyncio's default executor up to
min(32, CPUs + 4) of them ran at once at the loop's own priority, and a node serving a
console's readers kept the host's cores from the quorum's writes (`bench/console_bench.py`'s
readers row). Here at most `THREADS` run at once, each `NICENESS` below the process (Linux's
nice is per thread: `setpriority` on the thread's id), so the loop and the host's other
processes come first; the switch interval (`api.service.interpreter_lock`) hands the loop the
interpreter lock back within 0.5 ms. Where the priority cannot be changed, the threads run at
the process's own.

Two lanes, so that a costly read never makes a cheap one wait: `build` for ImageAt, Diff and
History, whose cost grows with the image and the span of log asked for (a Diff of two far
points of a 1M-partition, 5M-entry log takes seconds), and `fetch` for FetchLog, bounded by
its request's entry limit, which a console's live timeline and a follower's catch-up use.
With one pool, two such Diffs held both threads and every FetchLog waited behind them.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

BUILD_THREADS = 2
"""Images, diffs and entity histories built at once; more wait their turn."""

FETCH_THREADS = 1
"""FetchLog reads at once, beside the builds; more wait their turn (each is bounded)."""

NICENESS = 10
"""How much lower than the process's a history thread's priority is (`nice`)."""


def _lower_priority(niceness: int) -> None:
    try:
        own = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, own, os.getpriority(os.PRIO_PROCESS, own) + niceness)
    except (OSError, AttributeError):  # pragma: no cover - not Linux, or refused
        pass


class HistoryThreads:
    """Low-priority threads for the history reads, in two lanes (see the module docstring)."""

    def __init__(
        self,
        builds: int = BUILD_THREADS,
        fetches: int = FETCH_THREADS,
        niceness: int = NICENESS,
    ) -> None:
        if builds < 1 or fetches < 1 or niceness < 0:
            raise ValueError(
                "builds and fetches must be 1 or more, niceness 0 or more: "
                f"{builds}, {fetches}, {niceness}"
            )
        self._builds = _pool(builds, "mlog-history-build", niceness)
        self._fetches = _pool(fetches, "mlog-history-fetch", niceness)

    async def build(self, work: Callable[..., T], /, *args: object) -> T:
        """`work(*args)` (an image, a diff, a history) on a build thread, in this context."""
        return await _run(self._builds, work, *args)

    async def fetch(self, work: Callable[..., T], /, *args: object) -> T:
        """`work(*args)` (a bounded read of log blocks) on a fetch thread, in this context."""
        return await _run(self._fetches, work, *args)

    def close(self) -> None:
        """Let the reads under way end; those still waiting are cancelled."""
        for executor in (self._builds, self._fetches):
            executor.shutdown(wait=False, cancel_futures=True)


def _pool(threads: int, name: str, niceness: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(
        threads, thread_name_prefix=name, initializer=_lower_priority, initargs=(niceness,)
    )


async def _run(executor: ThreadPoolExecutor, work: Callable[..., T], /, *args: object) -> T:
    """`work(*args)` on `executor`, in this task's context (as `asyncio.to_thread`)."""
    context = contextvars.copy_context()
    call = functools.partial(context.run, work, *args)
    return await asyncio.get_running_loop().run_in_executor(executor, call)
