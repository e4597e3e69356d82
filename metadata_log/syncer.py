"""Durable writes off the interpreter lock: a thread that writes and fdatasyncs for an event loop.

A Python worker thread doing a log's write and fsync takes the interpreter lock back after each
system call, and on a busy event loop each time costs the loop a hand-off: it is asked to drop
the lock, sleeps until the worker drops it again, and is woken (a futex wake, another core's
scheduling). `Syncer` runs each job (write some bytes at a descriptor's end, then fdatasync
it) on a thread compiled without the interpreter lock (`metadata_log._syncer`), which takes
jobs and reports their end over two eventfds; the loop watches the second with `add_reader`, so
an ended job costs it one read. One job runs at a time. `AVAILABLE` says whether the compiled
helper was built; without it the log's writer keeps its Python worker thread.

`JobLock` is the lock of the writing end while such a job runs: held by the job from its
start to its end, across turns of the loop, and handed back by the job's end. A caller on the
loop's own thread that wants the lock meanwhile (a synchronous append, a close) could never
get it by waiting, since the loop would not turn; it finishes the job instead (waits for the
thread's report and runs the job's end itself), then takes the lock.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

try:
    from metadata_log import _syncer  # type: ignore[attr-defined]  # optional C extension
except ImportError:  # pragma: no cover - built by setup.py where a C compiler is
    _syncer = None

AVAILABLE: bool = _syncer is not None and not os.environ.get("MLOG_NO_EXTENSION")
"""Whether the compiled thread is there (else writers keep their Python worker thread)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobResult:
    """How a job ended: its error (`OSError`, None on success) and its durations."""

    error: OSError | None
    write_seconds: float
    sync_seconds: float


class Syncer:
    """Runs write-and-fdatasync jobs on the compiled thread for one event loop at a time."""

    def __init__(self, *, name: str = "mlog-sync") -> None:
        if _syncer is None:  # pragma: no cover - callers check AVAILABLE
            raise RuntimeError("metadata_log._syncer is not built")
        self._name = name
        self._thread = _syncer.SyncThread()
        self._runner: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_end: Callable[[JobResult], None] | None = None
        self._closed = False

    @property
    def busy(self) -> bool:
        """Whether a job was started and its end not yet handled."""
        return self._on_end is not None

    def start(
        self,
        loop: asyncio.AbstractEventLoop,
        fd: int,
        data: bytes | None,
        on_end: Callable[[JobResult], None],
    ) -> None:
        """Write `data` (if any) at `fd`'s end, then fdatasync `fd`, off the lock.

        `on_end` runs once with the result, on `loop` (or in `finish_blocking`). `fd` and
        `data` must stay valid until then. One job at a time.
        """
        if self._closed:
            raise RuntimeError("the syncer is closed")
        if self._on_end is not None:
            raise RuntimeError("a sync job is already running")
        self._watch(loop)
        self._on_end = on_end
        try:
            self._thread.start(fd, data)
        except BaseException:
            self._on_end = None
            raise

    def finish_blocking(self) -> None:
        """If a job runs: wait for its end here and run its `on_end` now (not on the loop)."""
        while self._on_end is not None:
            select.select([self._thread.done_fd], [], [])
            self._job_ended()

    def close(self) -> None:
        """Finish the job in flight (if any), stop the thread, stop watching its eventfd."""
        if self._closed:
            return
        self.finish_blocking()
        self._closed = True
        self._unwatch()
        self._thread.stop()
        if self._runner is not None:
            self._runner.join()
            self._runner = None

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._runner is None:
            self._runner = threading.Thread(target=self._thread.run, name=self._name, daemon=True)
            self._runner.start()
        if self._loop is not loop:
            # A log used from one loop, then another (`asyncio.run` twice): follow it.
            self._unwatch()
            loop.add_reader(self._thread.done_fd, self._job_ended)
            self._loop = loop

    def _unwatch(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self._thread.done_fd)

    def _job_ended(self) -> None:
        taken = self._thread.take()
        if taken is None:  # already handled (by `finish_blocking`), or a spurious wake-up
            return
        on_end, self._on_end = self._on_end, None
        error_number, write_seconds, sync_seconds = taken
        error = OSError(error_number, os.strerror(error_number)) if error_number else None
        if on_end is not None:
            on_end(JobResult(error=error, write_seconds=write_seconds, sync_seconds=sync_seconds))


class JobLock:
    """A lock that a `Syncer` job may hold across turns of the event loop (see the module).

    Otherwise a plain `threading.Lock`: `with lock:` and `acquire`/`release`.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._job: Syncer | None = None
        self._job_thread = 0

    def held_by_job(self, syncer: Syncer) -> None:
        """The lock (held by the caller) now belongs to `syncer`'s job until `job_ended`."""
        self._job = syncer
        self._job_thread = threading.get_ident()

    def job_ended(self) -> None:
        """The job's end hands the lock back: released."""
        self._job = None
        self._lock.release()

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock; on the job's thread, finish a job that holds it first."""
        job = self._job
        if blocking and job is not None and self._job_thread == threading.get_ident():
            job.finish_blocking()
        return self._lock.acquire(blocking)

    def release(self) -> None:
        """Release the lock."""
        self._lock.release()

    def locked(self) -> bool:
        """Whether the lock is held (by a thread or a job)."""
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
