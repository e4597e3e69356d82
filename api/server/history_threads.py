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

THREADS = 2
"""History reads that run at once; more wait their turn."""

NICENESS = 10
"""How much lower than the process's a history thread's priority is (`nice`)."""


def _lower_priority(niceness: int) -> None:
    try:
        own = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, own, os.getpriority(os.PRIO_PROCESS, own) + niceness)
    except (OSError, AttributeError):  # pragma: no cover - not Linux, or refused
        pass


class HistoryThreads:
    """A small pool of low-priority threads for the history reads (see the module docstring)."""

    def __init__(self, threads: int = THREADS, niceness: int = NICENESS) -> None:
        if threads < 1 or niceness < 0:
            raise ValueError(
                f"threads must be 1 or more, niceness 0 or more: {threads}, {niceness}"
            )
        self._executor = ThreadPoolExecutor(
            threads,
            thread_name_prefix="mlog-history",
            initializer=_lower_priority,
            initargs=(niceness,),
        )

    async def run(self, work: Callable[..., T], /, *args: object) -> T:
        """`work(*args)` on one of the threads (in this task's context, as `to_thread`)."""
        context = contextvars.copy_context()
        call = functools.partial(context.run, work, *args)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def close(self) -> None:
        """Let the reads under way end; those still waiting are cancelled."""
        self._executor.shutdown(wait=False, cancel_futures=True)
