"""The user's log: a segmented metadata log to append records to and read them back.

`MetadataLog` is the storage (`SegmentStorage`, read through `StoredLog`) with the user's
writer (`LogWriter`: atomic, durable appends with group commit). A quorum node's log is a
`ReplicaLog` (metadata_log.replica_log); a reader that takes no lock is a `LogReader`
(metadata_log.reader).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

from metadata_log.active import ActiveSegment, lock_directory
from metadata_log.config import LogConfig
from metadata_log.epoch import bump_epoch
from metadata_log.errors import LogClosedError
from metadata_log.recovery import Repair
from metadata_log.segment import SegmentInfo
from metadata_log.storage import SegmentStorage
from metadata_log.stored_log import StoredLog
from metadata_log.timings import LogTimings
from metadata_log.writer import AppendResult, LogWriter
from records.codec import DEFAULT_CODEC, RecordCodec
from records.model import Record

__all__ = ["AppendResult", "MetadataLog"]


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class MetadataLog(StoredLog):
    """An append-only log of metadata records in Avro segments, in one directory.

    Open with `MetadataLog.open(directory)`. One writer per directory (an OS lock); any number
    of `LogReader`s may read alongside it. Appends are atomic (one batch never spans two
    blocks) and durable (acknowledged after fdatasync); concurrent `append_async` callers
    share one write and one fsync (group commit), done off the event loop.
    """

    def __init__(self, storage: SegmentStorage, active: ActiveSegment, writer: LogWriter) -> None:
        super().__init__(storage)
        self._active = active
        self._writer = writer

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        config: LogConfig | None = None,
        codec: RecordCodec = DEFAULT_CODEC,
        clock_ms: Callable[[], int] = _wall_clock_ms,
    ) -> MetadataLog:
        """Open (create if needed) and recover the log in `directory` for appending.

        Takes the directory lock, truncates a torn tail (logging a WARNING that names the
        segment, byte position and entries dropped), writes the checkpoints and takes the next
        leader epoch. Raises `LogCorruptionError` for damage: a damaged block or header, a
        missing segment, a log that ends before its recovery point.
        """
        path = Path(directory)
        lock = lock_directory(path)
        try:
            storage = SegmentStorage.open(
                path, config=config or LogConfig(), codec=codec, recovery=Repair()
            )
            active = ActiveSegment(storage, lock)
            active.prepare()
            epoch = bump_epoch(path, at_least=storage.segments[-1].last_epoch)
            active.start()
        except BaseException:
            lock.release()
            raise
        return cls(storage, active, LogWriter(active, epoch=epoch, clock_ms=clock_ms))

    @property
    def epoch(self) -> int:
        """The leader epoch this writer stamps on its entries."""
        return self._writer.epoch

    def append(self, records: Iterable[Record], *, principal: str | None = None) -> AppendResult:
        """Append `records` as one atomic batch; returns (first, last) offset after fsync."""
        return self._writer.append(records, principal=principal)

    def append_batches(
        self, batches: Iterable[tuple[Iterable[Record], str | None]]
    ) -> list[AppendResult]:
        """Append several batches, each with its own principal, as one atomic block.

        All are written or none: a batch that does not encode raises and nothing is appended.
        For copying entries from another log, where each entry keeps who asked for it.
        """
        return self._writer.append_batches(batches)

    def append_async(
        self, records: Iterable[Record], *, principal: str | None = None
    ) -> Coroutine[Any, Any, AppendResult]:
        """Append `records` as one atomic batch, group-committed with concurrent callers.

        The write and fsync run on a worker thread; batches submitted while one is in flight go
        together in the next write. If the caller is cancelled the batch may still be written.
        The writer's coroutine itself is returned (no second coroutine per append).
        """
        return self._writer.append_async(records, principal=principal)

    def flush(self) -> int:
        """Every append is durable when it returns: the end offset."""
        if self.storage.closed:
            raise LogClosedError("the log is closed")
        return self.storage.next_offset

    @property
    def timings(self) -> LogTimings:
        """How long this log's block writes and fsyncs took (for the metrics)."""
        return self._active.timings

    def keep_merkle_index(self, end: int) -> bool:
        """Extend the Merkle index over the durable entries below `end` (off the write path).

        See `ActiveSegment.keep_index`: whether the index covers them; raises IndexHeldBack.
        """
        return self._active.keep_index(end)

    def trim_before(self, offset: int) -> list[SegmentInfo]:
        """Remove the whole segments whose entries all lie below `offset`; the log start moves.

        The newest segment is never removed, nor one holding `offset` or later entries, so
        the log afterwards starts at a segment's base offset, at or before `offset`. The
        caller decides what may go (`mlog log trim --before-snapshot`: below the newest
        snapshot). The Merkle index is first extended over the entries that go, so the tree
        still starts at 0; if it cannot be, `IndexHeldBack` is raised and nothing goes.
        Durable and crash-safe: the checkpoints name the new start first, then the
        segments are deleted, oldest first; segments a crash left below the start are deleted
        on the next open. Returns what was removed.
        """
        return self._active.trim_before(offset)

    def close(self) -> None:
        """Persist the active segment's indexes and the checkpoints, release the lock.

        Idempotent.
        """
        if self.storage.closed:
            return
        self.storage.closed = True
        self._writer.shutdown()
        self._active.close()

    async def aclose(self) -> None:
        """Wait for in-flight asynchronous appends, then close."""
        await self._writer.drain()
        self.close()
