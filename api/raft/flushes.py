"""The quorum node's flush policy: where a follower's fsync runs, and a leader's behind its loop.

A follower acknowledges only what it flushed, so its fsync is on its commit path: it runs on the
loop's thread while fast and on the worker thread while slow (`INLINE_FLUSH_S`). A leader counts
itself toward the high watermark only for what it flushed, and its fsync runs behind its loop
(on the compiled syncer's thread where it is built, on the worker thread otherwise), one at a
time, another after it when asked for meanwhile. `QuorumNode` (node.py) owns one `Flushes` and
tells the core what `flushed` says; the node decides what an ended flush means for its role.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import Executor
from enum import Enum

from metadata_log import syncer as syncers
from metadata_log.active import PendingSync
from metadata_log.replica_log import ReplicaLog
from records.errors import MetadataLogError

INLINE_FLUSH_S = 0.002
"""A follower's flush (fsync) runs on the event loop's thread while the last one took less
than this, on the worker thread otherwise (until one there is as quick again). A follower
acknowledges only what it flushed, so the fsync is on its commit path, and a hop to the
worker costs more than a fast fsync: the worker takes the interpreter lock back to report
it, and on busy cores the loop then waits for a thread the OS has not run yet. A slow disk's
fsync never holds the loop more than once in a row. A leader's flush runs behind its loop
instead (`Flushes.behind`): inline, it held the fleet bench's heartbeats during a
20% fence (whole-run p99 49 ms in two runs against 23-26 ms with a follower's flush alone
inline)."""


class _Behind(Enum):
    """A leader's flushes behind its loop: none under way, one, or one and another after it."""

    IDLE = 0
    FLUSHING = 1
    AGAIN = 2


class Flushes:
    """A node's flushes of its log and the offset it knows flushed (`flushed`)."""

    def __init__(
        self,
        log: ReplicaLog,
        executor: Executor,
        *,
        name: str,
        ended_behind: Callable[[int, int, bool], None],
        failed: Callable[[BaseException], None],
    ) -> None:
        """Flushes of `log`, on `executor` when not inline, on a syncer thread named `name`.

        `ended_behind(epoch, flushed, again)`: a flush behind ended (on the loop's thread);
        `again`: another was asked for meanwhile. `failed(error)`: one failed.
        """
        self._log = log
        self._executor = executor
        self._name = name
        self._ended_behind = ended_behind
        self._failed = failed
        self.flushed = log.end_offset
        """The offset up to which this node knows its log flushed (what the core is told)."""
        self._inline = True  # the next flush runs on the loop's thread (INLINE_FLUSH_S)
        self._behind = _Behind.IDLE
        self._syncer: syncers.Syncer | None = None
        """The compiled thread a leader's flushes run on (made at the first)."""

    @property
    def idle(self) -> bool:
        """No flush behind the loop is under way."""
        return self._behind is _Behind.IDLE

    async def inline_or_on_worker(self) -> None:
        """A follower's flush (`INLINE_FLUSH_S` says on which thread); `flushed` follows it."""
        if self._inline:
            flushed, took = timed_flush(self._log)
        else:
            loop = asyncio.get_running_loop()
            flushed, took = await loop.run_in_executor(self._executor, timed_flush, self._log)
        self._inline = took < INLINE_FLUSH_S
        self.flushed = flushed

    def behind(self, epoch: int) -> None:
        """A leader's flush, on the worker thread, while its loop goes on.

        The leader counts itself toward the high watermark only for what it flushed. Awaited
        in the loop's turn, its fsync held back the next proposals and fetch answers; behind
        the loop it overlaps the followers' round, so that with the linger at 0 (the default)
        the leader and the faster follower make the majority, not both followers (the group
        commit etcd's leader does: docs/replication.md). One runs at a time; asked for again
        meanwhile, another follows it, covering all that was written by then.
        """
        if self._behind is not _Behind.IDLE:
            self._behind = _Behind.AGAIN
            return
        loop = asyncio.get_running_loop()
        if not syncers.AVAILABLE:
            self._behind = _Behind.FLUSHING
            future = loop.run_in_executor(self._executor, timed_flush, self._log)
            future.add_done_callback(functools.partial(self._flush_ran, epoch))
            return
        # The fdatasync on the compiled thread (no interpreter lock to take back: the loop is
        # not asked to hand it over), its end read by the loop from an eventfd.
        pending = self._log.begin_flush()  # a storage failure stops the node, as in a turn
        if pending is None:  # nothing waits: all written is flushed (by a roll, say)
            self.flushed = max(self.flushed, self._log.flushed_offset)
            return
        if self._syncer is None:
            self._syncer = syncers.Syncer(name=self._name)
        self._behind = _Behind.FLUSHING
        self._syncer.start(loop, pending.fd, None, functools.partial(self._synced, epoch, pending))

    def close(self) -> None:
        """Stop the compiled thread; a flush under way ends first (its descriptor closed)."""
        if self._syncer is not None:
            self._syncer.close()

    def _synced(self, epoch: int, pending: PendingSync, result: syncers.JobResult) -> None:
        """The compiled thread's fdatasync ended (on the loop's thread, or in `close`)."""
        try:
            flushed = self._log.end_flush(pending, seconds=result.sync_seconds, error=result.error)
        except MetadataLogError as exc:
            self._behind = _Behind.IDLE
            self._failed(exc)
            return
        self._ended(epoch, flushed)

    def _flush_ran(self, epoch: int, future: asyncio.Future[tuple[int, float]]) -> None:
        """A flush on the worker thread ended (without the compiled thread)."""
        if future.cancelled():
            self._behind = _Behind.IDLE
            return
        error = future.exception()
        if error is not None:
            self._behind = _Behind.IDLE
            self._failed(error)
            return
        self._ended(epoch, future.result()[0])

    def _ended(self, epoch: int, flushed: int) -> None:
        again = self._behind is _Behind.AGAIN
        self._behind = _Behind.IDLE
        self._ended_behind(epoch, flushed, again)


def timed_flush(log: ReplicaLog) -> tuple[int, float]:
    """The log flushed: (the flushed offset, the seconds it took)."""
    started = time.perf_counter()
    flushed = log.flush()
    return flushed, time.perf_counter() - started
