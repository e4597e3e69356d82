"""The segmented metadata log: durable atomic appends with group commit, reads, recovery."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, NoReturn

from metadata_log.checkpoint import (
    Checkpoint,
    CheckpointDamage,
    checkpoint_path,
    read_checkpoint,
    write_checkpoint,
)
from metadata_log.config import LogConfig
from metadata_log.container import (
    MAX_BLOCK_BODY,
    SYNC_SIZE,
    BlockDamage,
    RawBlock,
    body_prefix,
    encode_block,
    fsync_directory,
    write_all,
)
from metadata_log.epoch import (
    EPOCH_CHECKPOINT_NAME,
    EpochCheckpointDamage,
    bump_epoch,
    read_epoch,
    read_epoch_checkpoint,
    write_epoch_checkpoint,
)
from metadata_log.errors import (
    LogClosedError,
    LogCorruptionError,
    LogError,
    LogFailedError,
    ReadOnlyLogError,
    ReplicaBlockError,
)
from metadata_log.extent import Link, extent_problems, link_problem, trimmed_leftovers
from metadata_log.lock import DirectoryLock
from metadata_log.repair import cut_segment, move_segment
from metadata_log.replica import ReplicaBlock
from metadata_log.segment import (
    ScanProblem,
    Segment,
    SegmentInfo,
    decoder_failure,
    parse_segment_name,
    segment_name,
)
from metadata_log.spans import ReadSpan, spans_of
from metadata_log.start_snapshot import (
    START_SNAPSHOT_NAME,
    StartSnapshot,
    StartSnapshotDamage,
    read_start_snapshot,
    write_start_snapshot,
)
from metadata_log.tail import judge_tail
from metadata_log.verify import VerifyReport, verify_log
from records.codec import DEFAULT_CODEC, RecordBlock, RecordCodec
from records.entry import LogEntry
from records.errors import RecordError
from records.model import Record

if TYPE_CHECKING:
    # Only the asynchronous appends use asyncio; they import it when called, so that readers
    # and synchronous writers (every `mlog` command) start without it.
    import asyncio

logger = logging.getLogger("metadata_log")

_INT32_MAX = (1 << 31) - 1


class AppendResult(tuple[int, int]):
    """(first offset, last offset) of an appended batch, and the `timestamp` its entries carry.

    A plain pair to unpack (`first, last = log.append(...)`); the timestamp is the one the log
    wrote (one per block, never lower than an earlier entry's), which the service gives the
    image it commits, so that the image after a restart is the same to the millisecond.
    """

    timestamp: int

    def __new__(cls, first: int, last: int, timestamp: int) -> AppendResult:
        """The pair (first, last), with `timestamp` kept beside it."""
        result = super().__new__(cls, (first, last))
        result.timestamp = timestamp
        return result


def _epochs_from(epochs: list[tuple[int, int]], start: int) -> list[tuple[int, int]]:
    """The epoch cache of a log that starts at `start`: earlier epochs dropped or clipped."""
    kept = [
        (e, o)
        for i, (e, o) in enumerate(epochs)
        if i + 1 >= len(epochs) or epochs[i + 1][1] > start
    ]
    return [(e, max(o, start)) for e, o in kept]


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _link(segment: Segment) -> Link:
    header = segment.header
    return Link(
        path=segment.path,
        base_offset=segment.base_offset,
        next_offset=segment.next_offset,
        sync=header.sync,
        previous_last_offset=header.previous_last_offset,
        previous_sync=header.previous_sync,
    )


class MetadataLog:
    """An append-only log of metadata records in Avro segments, in one directory.

    Open with `MetadataLog.open(directory)`. One writer per directory (an OS lock); any number of
    read-only instances (`read_only=True`) may read alongside it. Appends are atomic (one batch
    never spans two blocks) and durable (acknowledged after fdatasync); concurrent `append_async`
    callers share one write and one fsync (group commit), done off the event loop.

    Opened with `replicated=True` the log is a quorum node's: entries arrive as whole blocks
    (`write_blocks`, made durable by `flush`) with the epochs the quorum gives them, the
    leader-epoch cache is kept in `leader-epoch-checkpoint`, `truncate_to` removes a divergent
    tail and `replica_blocks` reads whole blocks for other nodes. `append` is refused there.
    """

    def __init__(
        self,
        directory: Path,
        *,
        config: LogConfig,
        codec: RecordCodec,
        read_only: bool,
        clock_ms: Callable[[], int],
        lock: DirectoryLock | None,
        replicated: bool = False,
    ) -> None:
        self.directory = directory
        self.config = config
        self.codec = codec
        self.read_only = read_only
        self.replicated = replicated
        """Quorum mode: blocks come from `write_blocks`, epochs from the quorum."""
        self._flushed_offset = 0
        self._dirty = False
        """True while written blocks wait for `flush` (quorum mode only)."""
        self._epochs: list[tuple[int, int]] = []
        self._clock_ms = clock_ms
        self._lock = lock
        self._segments: list[Segment] = []
        self._next_offset = 0
        self._last_timestamp = -1
        self._record_bytes_appended = 0
        self._epoch = read_epoch(directory) if directory.is_dir() else 0
        self._fd: int | None = None
        self._closed = False
        self._failed: OSError | None = None
        self._write_lock = threading.Lock()
        self._pending: list[tuple[tuple[Record, ...], str | None, asyncio.Future[AppendResult]]]
        self._pending = []
        self._flusher: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.torn_tail: str | None = None
        self.damage: LogCorruptionError | None = None
        """With `up_to_damage`: the first damage found on open (reads stop before it)."""
        self._up_to_damage = False
        self._checkpoint: Checkpoint | None = None
        self._start_snapshot: StartSnapshot | None = None
        self._rebuilt: list[Segment] = []
        self._checkpointed_at = time.monotonic()

    # ---------------------------------------------------------------- opening and closing

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        config: LogConfig | None = None,
        codec: RecordCodec = DEFAULT_CODEC,
        read_only: bool = False,
        up_to_damage: bool = False,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        replicated: bool = False,
    ) -> MetadataLog:
        """Open (and for a writer, create and recover) the log in `directory`.

        A writer takes the directory lock, truncates a torn tail (logging a WARNING that names
        the segment, byte position and entries dropped), writes the checkpoints and takes the
        next leader epoch. A read-only open changes nothing on disk and stops before a torn
        tail. Both raise `LogCorruptionError` for damage: a damaged block or header, a missing
        segment, a log that ends before its recovery point. With `up_to_damage` (read-only
        only) the log is served up to the first damage instead, with a WARNING naming it, and
        reads that reach it raise it.

        With `replicated` (quorum mode) no writer epoch is taken: entries carry the epochs of
        the blocks written with `write_blocks`. The open then fsyncs the recovered log (all of
        it is durable) and loads `leader-epoch-checkpoint`, checked against the log's end and
        its last block; a missing or inconsistent one is rebuilt from the entries' epochs with
        one WARNING.
        """
        path = Path(directory)
        lock: DirectoryLock | None = None
        if up_to_damage and not read_only:
            raise LogError("up_to_damage is for read-only opens: a writer never opens past damage")
        if read_only:
            if not path.is_dir():
                raise LogError(
                    f"there is no log at {path}; check --data-dir (the log lives in <data-dir>/log)"
                )
        else:
            if not path.is_dir():
                path.mkdir(parents=True)
                fsync_directory(path.parent)
            lock = DirectoryLock(path)
            lock.acquire()
        log = cls(
            path,
            config=config or LogConfig(),
            codec=codec,
            read_only=read_only,
            clock_ms=clock_ms,
            lock=lock,
            replicated=replicated,
        )
        log._up_to_damage = up_to_damage
        try:
            log._load()
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return log

    def _problem(self, error: LogCorruptionError) -> None:
        """Damage found on open: raised, or with `up_to_damage` logged and remembered."""
        if not self._up_to_damage:
            raise error
        logger.warning("reading up to the damage: %s", error)
        if self.damage is None:
            self.damage = error

    def _load(self) -> None:
        # The checkpoints first: a segment created after they were read is then merely newer
        # than they say, never "missing".
        try:
            checkpoint = read_checkpoint(self.directory)
        except CheckpointDamage as exc:
            self._problem(
                LogCorruptionError(
                    checkpoint_path(self.directory), 0, f"the checkpoint file is damaged: {exc}"
                )
            )
            checkpoint = None
        self._checkpoint = checkpoint
        try:
            self._start_snapshot = read_start_snapshot(self.directory)
        except StartSnapshotDamage as exc:
            self._problem(
                LogCorruptionError(
                    self.directory / START_SNAPSHOT_NAME, 0, f"the file is damaged: {exc}"
                )
            )
        snapshot = self._start_snapshot
        if snapshot is not None and (
            checkpoint is None or checkpoint.log_start_offset < snapshot.offset + 1
        ):
            if self.read_only:
                raise LogError(
                    f"the log in {self.directory} is being reset to start after snapshot offset "
                    f"{snapshot.offset} (an install a crash interrupted); start the node (its "
                    "writer finishes the reset), then read it"
                )
            logger.info(
                "finishing the log reset to offset %d that a crash interrupted (an install)",
                snapshot.offset + 1,
            )
            self._reset_files(snapshot.offset + 1)
            checkpoint = self._checkpoint
        bases = []
        for name in os.listdir(self.directory):
            base = parse_segment_name(name)
            if base is not None:
                bases.append(base)
            elif name.endswith(".tmp") and not self.read_only:
                # An interrupted segment, index, checkpoint or epoch write: never the only copy.
                (self.directory / name).unlink()
        bases.sort()
        leftovers = trimmed_leftovers(
            bases, 0 if checkpoint is None else checkpoint.log_start_offset
        )
        if leftovers:
            if not self.read_only:
                # A trim stopped after it moved the log start: finish it.
                for base in bases[:leftovers]:
                    move_segment(self.directory / segment_name(base), None)
                fsync_directory(self.directory)
                logger.info(
                    "removed %d segment(s) below the log start %d left by an interrupted trim",
                    leftovers,
                    bases[leftovers],
                )
            bases = bases[leftovers:]
        links = self._open_segments(bases)
        for problem in extent_problems(
            self.directory,
            checkpoint,
            links[0] if links else None,
            links[-1] if links else None,
            chained=any(s.header.checksummed for s in self._segments),
            check_end=len(self._segments) == len(bases) and self.damage is None,
        ):
            self._problem(problem)
        if self._segments:
            self._next_offset = self._segments[-1].next_offset
            self._last_timestamp = max(s.max_timestamp for s in self._segments)
        self._flushed_offset = self._next_offset
        if not self.read_only:
            self._start_writing(0 if checkpoint is None else checkpoint.log_start_offset)
        elif self.replicated and self.damage is None:
            self._load_epoch_cache(persist=False)

    def _open_segments(self, bases: list[int]) -> list[Link]:
        """Open the segments in order, checking each against the previous; their links."""
        links: list[Link] = []
        for i, base in enumerate(bases):
            path = self.directory / segment_name(base)
            segment = self._open_segment(path, base, is_last=i == len(bases) - 1)
            if segment is None:
                break  # up_to_damage: nothing past a damaged header is served
            link = _link(segment)
            if links:
                problem = link_problem(links[-1], link)
                if problem is not None:
                    self._problem(problem)
                    break
            links.append(link)
            self._segments.append(segment)
            if segment.damage is not None:
                break
        return links

    def _start_writing(self, start: int) -> None:
        """After a sound open: save rebuilt indexes, take the epoch, open the active segment."""
        for segment in self._rebuilt:
            logger.info("rebuilt the indexes of segment %s", segment.path)
            segment.save_indexes()
        if not self._segments:
            self._next_offset = self._flushed_offset = start
            self._write_checkpoint(start)
            self._segments.append(
                Segment.create(self.directory, start, self.codec.entry_schema_json)
            )
        active = self._segments[-1]
        if not self.replicated:
            self._epoch = bump_epoch(self.directory, at_least=active.last_epoch)
        if active.is_empty and active.header.schema_json != self.codec.entry_schema_json:
            # Nothing was written with the old schema: start the segment over with this one.
            previous = self._segments[-2] if len(self._segments) > 1 else None
            active = Segment.create(
                self.directory, active.base_offset, self.codec.entry_schema_json, previous
            )
            self._segments[-1] = active
        self._fd = os.open(active.path, os.O_WRONLY | os.O_APPEND)
        if self._checkpoint is None or self._checkpoint.newest_segment != active.base_offset:
            # A log from before checkpoints existed, or one repaired down to an older segment.
            self._write_checkpoint(start)
        if active.header.schema_json != self.codec.entry_schema_json:
            # A segment's blocks are read with the schema in its header, and this code's union
            # of record types differs (a newer version added a type): new entries go to a new
            # segment, so every segment stays readable by any Avro tool and by this code.
            logger.info("the record schema changed; starting a new segment")
            self._roll()
        if self.replicated:
            # What a crashed process left in the page cache is served as durable (the core
            # builds its view from it): make it so before anything is acknowledged.
            try:
                os.fsync(self._fd)
            except OSError as exc:
                raise LogError(
                    f"cannot fsync the log in {self.directory}: {exc.strerror or exc}; fix the "
                    "disk, then open the log again"
                ) from exc
            self._load_epoch_cache(persist=True)

    def _write_checkpoint(self, log_start_offset: int | None = None) -> None:
        """Persist the checkpoints: the log start, the end offset now, the newest segment."""
        start = log_start_offset
        if start is None:
            start = 0 if self._checkpoint is None else self._checkpoint.log_start_offset
        checkpoint = Checkpoint(
            log_start_offset=start,
            recovery_point=self._flushed_offset,
            newest_segment=self._segments[-1].base_offset if self._segments else start,
        )
        write_checkpoint(self.directory, checkpoint)
        self._checkpoint = checkpoint
        self._checkpointed_at = time.monotonic()

    def _open_segment(self, path: Path, base: int, *, is_last: bool) -> Segment | None:
        try:
            file_size = path.stat().st_size
            segment = Segment.open_header(path, base)
        except BlockDamage as exc:
            self._problem(
                LogCorruptionError(path, 0, f"bad segment header: {exc}", first_offset=base)
            )
            return None
        interval = self.config.index_interval_bytes
        if not is_last:
            if segment.load_indexes(file_size):
                return segment
            # A sealed segment was complete (fsynced) before the next one was created: any
            # problem in it is damage, never a torn tail.
            problem = segment.recover_scan(file_size, interval, self.codec)
            if problem is not None:
                return self._damaged(segment, problem)
            if not self.read_only:
                self._rebuilt.append(segment)  # saved once the whole log is known to be sound
            return segment
        problem = segment.recover_scan(file_size, interval, self.codec)
        if problem is None:
            return segment
        if problem.certain_damage:
            return self._damaged(segment, problem)
        verdict = judge_tail(path, segment.header.sync, problem.position, file_size)
        if not verdict.torn:
            return self._damaged(segment, problem, f"; {verdict.why}")
        recovery_point = 0 if self._checkpoint is None else self._checkpoint.recovery_point
        if segment.next_offset < recovery_point:
            return self._damaged(
                segment,
                problem,
                f"; it looks torn ({verdict.why}), but the checkpoints say offsets up to "
                f"{recovery_point - 1} were durable",
            )
        description = (
            f"segment {path}: torn tail at byte {problem.position} ({problem.reason}; "
            f"{verdict.why}); {verdict.dropped()} dropped"
        )
        if self.read_only:
            self.torn_tail = description
            return segment
        logger.warning("truncating torn tail of %s", description)
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, problem.position)
            os.fsync(fd)
        finally:
            os.close(fd)
        return segment

    def _damaged(self, segment: Segment, problem: ScanProblem, why: str = "") -> Segment:
        """Damage in a segment: raised, or (up_to_damage) served up to it.

        Reads that reach the damage raise it, and `verify` reports it, so nothing past it is
        ever served and nothing before it is hidden.
        """
        error = LogCorruptionError(
            segment.path,
            problem.position,
            problem.reason + why,
            first_offset=problem.first_offset,
        )
        self._problem(error)
        segment.damage = error
        return segment

    def close(self) -> None:
        """Persist the active segment's indexes and the checkpoints, release the lock.

        Idempotent.
        """
        if self._closed:
            return
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        with self._write_lock:
            if self._fd is not None:
                if self._dirty and self._failed is None:
                    try:
                        self._sync_active()
                    except OSError as exc:  # the blocks may be lost; the checkpoints say so
                        logger.warning("could not flush the log on close: %s", exc)
                os.close(self._fd)
                self._fd = None
                if self._failed is None and self._segments:
                    try:
                        self._segments[-1].save_indexes()
                        self._write_checkpoint()
                    except OSError as exc:  # rebuilt or rewritten on the next open
                        logger.warning("could not save the index or checkpoints: %s", exc)
        if self._lock is not None:
            self._lock.release()

    async def aclose(self) -> None:
        """Wait for in-flight asynchronous appends, then close."""
        import asyncio

        while self._flusher is not None:
            await asyncio.shield(self._flusher)
        self.close()

    def __enter__(self) -> MetadataLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---------------------------------------------------------------- state

    @property
    def end_offset(self) -> int:
        """The offset the next appended entry will get (one past the last committed entry)."""
        return self._next_offset

    @property
    def record_bytes_appended(self) -> int:
        """Uncompressed bytes of the entries this process appended since the log was opened.

        Kafka's `metadata.log.max.record.bytes.between.snapshots` counts record bytes, not what
        they take on disk after compression; this is that count for the entries written here.
        """
        return self._record_bytes_appended

    def record_bytes_after(self, offset: int, *, limit: int | None = None) -> int:
        """Uncompressed bytes of the entries after `offset`, counted by whole blocks.

        The block holding `offset + 1` counts whole. Stops early once the count passes `limit`
        (the caller only wants to know whether a threshold is reached). Reads and verifies the
        blocks, so it costs a decompression of that part of the log.
        """
        total = 0
        for segment in list(self._segments):
            if segment.next_offset <= offset + 1:
                continue
            for block in segment.raw_blocks(max(offset + 1, segment.base_offset)):
                total += len(block.body)
                if limit is not None and total >= limit:
                    return total
        return total

    @property
    def flushed_offset(self) -> int:
        """One past the last durable entry.

        The same as `end_offset` except between `write_blocks` and `flush` in quorum mode.
        """
        return self._flushed_offset

    @property
    def last_timestamp(self) -> int:
        """The timestamp (ms) of the last entry, -1 for an empty log.

        Timestamps never decrease along the log: a leader stamps a new block with at least this.
        """
        return self._last_timestamp

    @property
    def log_start_offset(self) -> int:
        """Offset of the first entry the log keeps (its first segment's base offset)."""
        return self._segments[0].base_offset if self._segments else self._next_offset

    @property
    def epoch(self) -> int:
        """The leader epoch this writer stamps on its entries (last persisted one if read-only).

        In quorum mode: the epoch of the last entry (0 for an empty log).
        """
        return self._epoch

    def segments(self) -> list[SegmentInfo]:
        """The segments, oldest first."""
        return [s.info() for s in self._segments]

    # ---------------------------------------------------------------- appending

    def _check_writable(self) -> None:
        if self._closed:
            raise LogClosedError("the log is closed")
        if self.read_only:
            raise ReadOnlyLogError(
                f"the log at {self.directory} was opened read-only; open it without "
                "read_only to append"
            )
        if self._failed is not None:
            raise LogFailedError(
                f"an earlier append failed ({self._failed}); the log accepts no more writes. "
                "Fix the storage problem and restart: the log recovers on open"
            )

    @staticmethod
    def _check_batch(records: Iterable[Record]) -> tuple[Record, ...]:
        batch = tuple(records)
        if not batch:
            raise LogError("an append needs at least one record")
        for record in batch:
            if not isinstance(record, Record):
                raise RecordError(f"{record!r} is not a metadata record")
        return batch

    def append(self, records: Iterable[Record], *, principal: str | None = None) -> AppendResult:
        """Append `records` as one atomic batch; returns (first, last) offset after fsync."""
        self._check_not_replicated()
        batch = self._check_batch(records)
        with self._write_lock:
            (result,) = self._write_group([(batch, principal)])
        if isinstance(result, BaseException):
            raise result
        return result

    def append_batches(
        self, batches: Iterable[tuple[Iterable[Record], str | None]]
    ) -> list[AppendResult]:
        """Append several batches, each with its own principal, as one atomic block.

        All are written or none: a batch that does not encode raises and nothing is appended.
        For copying entries from another log, where each entry keeps who asked for it.
        """
        self._check_not_replicated()
        checked = [(self._check_batch(records), principal) for records, principal in batches]
        if not checked:
            raise LogError("an append needs at least one batch")
        with self._write_lock:
            results = self._write_group(checked, atomic=True)
        return [r for r in results if isinstance(r, AppendResult)]

    async def append_async(
        self, records: Iterable[Record], *, principal: str | None = None
    ) -> AppendResult:
        """Append `records` as one atomic batch, group-committed with concurrent callers.

        The write and fsync run on a worker thread; batches submitted while one is in flight go
        together in the next write. If the caller is cancelled the batch may still be written.
        """
        import asyncio

        self._check_not_replicated()
        batch = self._check_batch(records)
        self._check_writable()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AppendResult] = loop.create_future()
        self._pending.append((batch, principal, future))
        if self._flusher is None:
            self._flusher = loop.create_task(self._flush_pending())
        return await future

    async def _flush_pending(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="mlog-append")
        try:
            while self._pending:
                group, self._pending = self._pending, []
                batches = [(records, principal) for records, principal, _ in group]
                try:
                    results = await loop.run_in_executor(
                        self._executor, self._locked_write_group, batches
                    )
                except Exception as exc:
                    for _, _, future in group:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, _, future), result in zip(group, results, strict=True):
                    if future.done():
                        continue
                    if isinstance(result, BaseException):
                        future.set_exception(result)
                    else:
                        future.set_result(result)
        finally:
            self._flusher = None

    def _locked_write_group(
        self, batches: Sequence[tuple[tuple[Record, ...], str | None]]
    ) -> list[AppendResult | Exception]:
        with self._write_lock:
            return self._write_group(batches)

    def _write_group(
        self, batches: Sequence[tuple[tuple[Record, ...], str | None]], *, atomic: bool = False
    ) -> list[AppendResult | Exception]:
        """Write `batches` as one block with one fsync; the caller holds the write lock.

        A batch that does not encode fails alone and the others are written, unless `atomic`:
        then nothing is written and the error is raised. All entries of the block carry the
        same timestamp, never lower than any earlier entry's.
        """
        self._check_writable()
        timestamp = max(self._clock_ms(), self._last_timestamp)
        epoch = self._epoch
        first = self._next_offset
        try:
            results, total, body = self._encode_group(batches, first, epoch, timestamp)
        except RecordError:
            if atomic:
                raise
            results, total, body = self._encode_batches_alone(batches, first, epoch, timestamp)
        if total == 0:
            return results
        offset = first + total
        framed = encode_block(total, body)
        try:
            active = self._segment_for(len(framed), timestamp)
            data = framed + active.header.sync
            position = active.size
            fd = self._fd
            if fd is None:  # pragma: no cover - guarded by _check_writable
                raise LogClosedError("the log is closed")
            write_all(fd, data)
            os.fdatasync(fd)
        except OSError as exc:
            self._fail("append", exc)
        # Publish only after fsync: readers never look past `active.size`.
        active.note_block(
            position=position,
            end=position + len(data),
            first_offset=first,
            count=total,
            epoch=epoch,
            timestamp=timestamp,
            interval=self.config.index_interval_bytes,
        )
        self._last_timestamp = timestamp
        self._next_offset = self._flushed_offset = offset
        self._record_bytes_appended += len(body)
        if time.monotonic() - self._checkpointed_at >= self.config.checkpoint_interval_ms / 1000:
            try:
                self._write_checkpoint()
            except OSError as exc:  # the block is durable; the next roll or close retries
                self._checkpointed_at = time.monotonic()
                logger.warning("could not write the log checkpoints: %s", exc)
        return results

    def _encode_group(
        self,
        batches: Sequence[tuple[tuple[Record, ...], str | None]],
        first: int,
        epoch: int,
        timestamp: int,
    ) -> tuple[list[AppendResult | Exception], int, bytes]:
        """Encode all batches in one codec call (the common case: every batch is valid)."""
        results: list[AppendResult | Exception] = []
        offset = first
        for records, _ in batches:
            results.append(AppendResult(offset, offset + len(records) - 1, timestamp))
            offset += len(records)
        count, body = self.codec.encode_batches(
            batches, first_offset=first, epoch=epoch, timestamp=timestamp
        )
        return results, count, body

    def _encode_batches_alone(
        self,
        batches: Sequence[tuple[tuple[Record, ...], str | None]],
        first: int,
        epoch: int,
        timestamp: int,
    ) -> tuple[list[AppendResult | Exception], int, bytes]:
        """Encode batch by batch, so that a batch that does not encode fails alone."""
        results: list[AppendResult | Exception] = []
        bodies = []
        offset = first
        for batch in batches:
            try:
                (result,), count, body = self._encode_group([batch], offset, epoch, timestamp)
            except RecordError as exc:
                results.append(exc)
                continue
            results.append(result)
            bodies.append(body)
            offset += count
        return results, offset - first, b"".join(bodies)

    def _segment_for(self, framed_size: int, timestamp: int) -> Segment:
        """The segment a block of `framed_size` bytes stamped `timestamp` goes to (rolls if due)."""
        active = self._segments[-1]
        if not active.is_empty and (
            active.size + framed_size + SYNC_SIZE > self.config.segment_bytes
            or timestamp - active.first_timestamp >= self.config.segment_ms
        ):
            active = self._roll()
        return active

    def _fail(self, what: str, exc: OSError) -> NoReturn:
        """An I/O error while writing: the log stops accepting writes (fail-stop)."""
        self._failed = exc
        logger.error("%s failed, the log stops accepting writes: %s", what, exc)
        raise LogFailedError(
            f"{what} failed: {exc}. The log accepts no more writes; fix the storage problem "
            "and restart (the log recovers on open)"
        ) from exc

    def _sync_active(self) -> None:
        """Make every block written so far durable (fdatasync of the active segment)."""
        if self._fd is not None:
            os.fdatasync(self._fd)
        self._dirty = False
        self._flushed_offset = self._next_offset

    def _roll(self) -> Segment:
        old = self._segments[-1]
        if self._dirty:
            # A sealed segment is complete and durable before the next one exists: on open,
            # anything wrong in a segment that is not the newest is damage, never a torn tail.
            self._sync_active()
        old.save_indexes()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        segment = Segment.create(
            self.directory, self._next_offset, self.codec.entry_schema_json, old
        )
        self._fd = os.open(segment.path, os.O_WRONLY | os.O_APPEND)
        self._segments = [*self._segments, segment]
        # The checkpoints now name the new segment: from here on, losing it is noticed.
        self._write_checkpoint()
        logger.info("rolled to segment %s", segment.path.name)
        return segment

    # ---------------------------------------------------------------- quorum mode

    def _check_not_replicated(self) -> None:
        if self.replicated:
            raise LogError(
                f"the log at {self.directory} is a quorum node's (opened with replicated=True): "
                "entries are written as blocks of the quorum's epochs with write_blocks, not "
                "appended"
            )

    def _check_replicated(self, what: str) -> None:
        if not self.replicated:
            raise LogError(
                f"{what} is for a quorum node's log; open the log at {self.directory} with "
                "replicated=True"
            )

    def encode_block(
        self,
        batches: Sequence[tuple[Sequence[Record], str | None]],
        *,
        first_offset: int,
        epoch: int,
        timestamp: int,
    ) -> ReplicaBlock:
        """Encode `batches` as one block of entries `first_offset..` of `epoch`; nothing written.

        Each batch is (records, principal). Raises `RecordError` if a record does not encode
        and `LogError` for an empty batch or an offset, epoch or timestamp out of range.
        """
        checked = [(self._check_batch(records), principal) for records, principal in batches]
        if not checked:
            raise LogError("a block needs at least one batch")
        if first_offset < 0 or not 0 <= epoch <= _INT32_MAX or timestamp < 0:
            raise LogError(
                f"a block needs an offset >= 0, an int32 epoch >= 0 and a timestamp >= 0, got "
                f"offset {first_offset}, epoch {epoch}, timestamp {timestamp}"
            )
        count, body = self.codec.encode_batches(
            checked, first_offset=first_offset, epoch=epoch, timestamp=timestamp
        )
        return ReplicaBlock(
            first_offset=first_offset,
            count=count,
            epoch=epoch,
            timestamp=timestamp,
            body=body,
            crc32=zlib.crc32(body),
        )

    def write_blocks(self, blocks: Sequence[ReplicaBlock], *, check: bool) -> int:
        """Append whole `blocks` at the end WITHOUT fsync (see `flush`); the new end offset.

        Every block must start where the log (or the previous block) ends, and epochs and
        timestamps never go down: otherwise `ReplicaBlockError` and nothing is written.
        `check=True` (blocks from another node) also verifies each body's CRC32 and decodes
        every entry: offsets dense from the block's first, each entry's epoch and timestamp
        the block's, valid records that fill the body exactly. Readers see the blocks
        at once. The first block of a new epoch is recorded in `leader-epoch-checkpoint`
        before it is written. An I/O error is `LogFailedError` (fail-stop, as for appends).
        """
        self._check_replicated("write_blocks")
        with self._write_lock:
            self._check_writable()
            self._check_blocks(blocks, decode=check)
            for block in blocks:
                self._write_block(block)
            return self._next_offset

    def _check_blocks(self, blocks: Sequence[ReplicaBlock], *, decode: bool) -> None:
        """Raise ReplicaBlockError unless `blocks` fit at the end of the log, in order."""
        expected = self._next_offset
        last_epoch = self._epochs[-1][0] if self._epochs else 0
        last_timestamp = self._last_timestamp
        for block in blocks:
            if not isinstance(block, ReplicaBlock):
                raise ReplicaBlockError(f"{type(block).__name__} is not a ReplicaBlock")
            where = f"replica block of offsets {block.first_offset}..{block.last_offset}"
            if block.count < 1 or not block.body or len(block.body) > MAX_BLOCK_BODY:
                raise ReplicaBlockError(
                    f"{where} claims {block.count} entries in {len(block.body)} bytes"
                )
            if block.first_offset != expected:
                kind = "leaves a gap after" if block.first_offset > expected else "overlaps"
                raise ReplicaBlockError(
                    f"{where} {kind} the log, which ends before offset {expected}; fetch from "
                    f"offset {expected}"
                )
            if not last_epoch <= block.epoch <= _INT32_MAX:
                raise ReplicaBlockError(
                    f"{where} has epoch {block.epoch} after the log's epoch {last_epoch}: epochs "
                    "never go down (and fit an int32); truncate the divergent tail first"
                )
            if block.timestamp < last_timestamp:
                raise ReplicaBlockError(
                    f"{where} has timestamp {block.timestamp}, before the log's last entry "
                    f"({last_timestamp}): timestamps never go down along the log"
                )
            if decode:
                self._check_body(block, where)
            expected = block.end_offset
            last_epoch = block.epoch
            last_timestamp = block.timestamp

    def _check_body(self, block: ReplicaBlock, where: str) -> None:
        """Raise ReplicaBlockError unless the body is the CRC-valid encoding of valid entries.

        The decoder checks what the encoder would: every value in its Avro type's range, enum
        values and union branches that exist, UTF-8 text, and entries filling the body exactly.
        """
        if not block.crc_ok():
            raise ReplicaBlockError(
                f"{where}: CRC32 of the body does not match ({zlib.crc32(block.body):08x}, the "
                f"block says {block.crc32:08x}); fetch it again"
            )
        codec = self.codec
        try:
            decoded = codec.decode_block(
                block.count, block.body, codec.reader_array_schema(codec.entry_schema_json)
            )
        except MemoryError:
            raise
        except Exception as exc:
            raise ReplicaBlockError(
                f"{where}: its body does not decode as {block.count} entries "
                f"({decoder_failure(exc)})"
            ) from None
        offsets = decoded.offsets
        if len(offsets) != block.count or offsets != list(
            range(block.first_offset, block.end_offset)
        ):
            raise ReplicaBlockError(
                f"{where}: its {len(offsets)} entries hold offsets {offsets[0]}..{offsets[-1]}"
            )
        stamps = zip(decoded.epochs, decoded.timestamps, strict=True)
        for i, (epoch, timestamp) in enumerate(stamps):
            if epoch != block.epoch or timestamp != block.timestamp:
                raise ReplicaBlockError(
                    f"{where}: entry {offsets[i]} has epoch {epoch} and timestamp {timestamp}, "
                    f"the block says {block.epoch} and {block.timestamp}"
                )

    def _write_block(self, block: ReplicaBlock) -> None:
        """Write one checked block at the end, without fsync; the caller holds the write lock."""
        if not self._epochs or block.epoch > self._epochs[-1][0]:
            # Before the block: a cache naming an epoch the log lacks (a crash lost the block)
            # is always noticed and repaired on open; a log holding an epoch the cache lacks
            # is noticed only while that epoch is the last one.
            self._persist_epochs([*self._epochs, (block.epoch, block.first_offset)])
        framed = encode_block(block.count, block.body)
        try:
            active = self._segment_for(len(framed), block.timestamp)
            data = framed + active.header.sync
            position = active.size
            fd = self._fd
            if fd is None:  # pragma: no cover - guarded by _check_writable
                raise LogClosedError("the log is closed")
            self._dirty = True
            write_all(fd, data)
        except OSError as exc:
            self._fail("writing replicated blocks", exc)
        active.note_block(
            position=position,
            end=position + len(data),
            first_offset=block.first_offset,
            count=block.count,
            epoch=block.epoch,
            timestamp=block.timestamp,
            interval=self.config.index_interval_bytes,
        )
        self._next_offset = block.end_offset
        self._last_timestamp = block.timestamp
        self._epoch = block.epoch
        self._record_bytes_appended += len(block.body)

    def flush(self) -> int:
        """Make what `write_blocks` wrote durable (fsync); returns the flushed end offset.

        In single-node mode every append is already durable: it returns `end_offset`.
        """
        with self._write_lock:
            if self._closed:
                raise LogClosedError("the log is closed")
            if self._dirty:
                self._check_writable()
                try:
                    self._sync_active()
                except OSError as exc:
                    self._fail("flush", exc)
                interval = self.config.checkpoint_interval_ms / 1000
                if time.monotonic() - self._checkpointed_at >= interval:
                    try:
                        self._write_checkpoint()
                    except OSError as exc:  # the blocks are durable; the next roll retries
                        self._checkpointed_at = time.monotonic()
                        logger.warning("could not write the log checkpoints: %s", exc)
            return self._flushed_offset

    def truncate_to(self, offset: int) -> int:
        """Durably remove every entry at `offset` and after; returns how many entries went.

        Any offset from the log start on; past the end nothing happens (0). A cut inside a
        block keeps that block's entries before `offset` as a smaller block (the segment is
        rewritten through a temporary file, so a crash leaves the old or the new one). The
        indexes, checkpoints and epoch cache follow; one INFO line says what went.
        """
        self._check_replicated("truncate_to")
        with self._write_lock:
            self._check_writable()
            start = self.log_start_offset
            if not isinstance(offset, int) or offset < start:
                raise LogError(
                    f"cannot truncate to offset {offset!r}: the log starts at offset {start}"
                )
            end = self._next_offset
            if offset >= end:
                return 0
            try:
                kept_epochs = [(e, o) for e, o in self._epochs if o < offset]
                self._cut(offset)
                self._persist_epochs(kept_epochs)
            except OSError as exc:
                self._fail("truncation", exc)
            logger.info(
                "truncated the log in %s to offset %d: removed %d entries (offsets %d..%d)",
                self.directory,
                offset,
                end - offset,
                offset,
                end - 1,
            )
            return end - offset

    def _cut(self, offset: int) -> None:
        """Remove the entries from `offset` (< end) on; the caller holds the write lock."""
        index = max(i for i, s in enumerate(self._segments) if s.base_offset <= offset)
        segment = self._segments[index]
        later = self._segments[index + 1 :]
        # The checkpoints first, durably: they are lower bounds of the log, and a log shorter
        # than its recovery point, or without the newest segment they name, is damaged.
        start = 0 if self._checkpoint is None else self._checkpoint.log_start_offset
        checkpoint = Checkpoint(
            log_start_offset=start,
            recovery_point=min(self._flushed_offset, offset),
            newest_segment=segment.base_offset,
        )
        write_checkpoint(self.directory, checkpoint, sync_directory=True)
        self._checkpoint = checkpoint
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        # Newest first: a crash leaves a shorter but whole log.
        for old in reversed(later):
            move_segment(old.path, None)
        if later:
            fsync_directory(self.directory)
        self._segments = self._segments[: index + 1]
        block, first = next(segment.blocks_with_offsets(offset))
        if first == offset:
            cut_segment(segment.path, block.position, None)
            segment.forget_from(block.position, offset)
        else:
            self._rewrite_block(segment, block, first, offset - first)
        self._next_offset = self._flushed_offset = offset
        self._dirty = False
        self._last_timestamp = max(s.max_timestamp for s in self._segments)
        active = segment
        if active.header.schema_json != self.codec.entry_schema_json and active.is_empty:
            previous = self._segments[-2] if len(self._segments) > 1 else None
            active = Segment.create(
                self.directory, active.base_offset, self.codec.entry_schema_json, previous
            )
            self._segments[-1] = active
        self._fd = os.open(active.path, os.O_WRONLY | os.O_APPEND)
        if active.header.schema_json != self.codec.entry_schema_json:
            self._roll()  # new blocks go in this code's schema, as after an open

    def _rewrite_block(self, segment: Segment, block: RawBlock, first: int, keep: int) -> None:
        """Replace the segment's last block (after the cut) by its first `keep` entries.

        The body is cut at the end of entry `keep` (found by decoding with the segment's writer
        schema), so the kept entries keep their exact bytes. The new file is written beside the
        old one and renamed over it.
        """
        import fastavro  # only a cut inside a block needs it

        schema = fastavro.parse_schema(json.loads(segment.header.schema_json))
        stream = io.BytesIO(block.body)
        for _ in range(keep):
            fastavro.schemaless_reader(stream, schema, None)
        body = block.body[: stream.tell()]
        framed = encode_block(keep, body) + segment.header.sync
        path = segment.path
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            with open(path, "rb") as source:
                remaining = block.position
                while remaining:
                    chunk = source.read(min(remaining, 1 << 20))
                    if not chunk:
                        raise OSError(5, f"{path} ended early while it was copied")
                    write_all(fd, chunk)
                    remaining -= len(chunk)
            write_all(fd, framed)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(tmp, path)
        fsync_directory(self.directory)
        for suffix in (".index", ".timeindex"):
            path.with_suffix(suffix).unlink(missing_ok=True)
        _, epoch, timestamp = body_prefix(body)
        segment.forget_from(block.position, first)
        segment.note_block(
            position=block.position,
            end=block.position + len(framed),
            first_offset=first,
            count=keep,
            epoch=epoch,
            timestamp=timestamp,
            interval=self.config.index_interval_bytes,
        )

    def trim_before(self, offset: int) -> list[SegmentInfo]:
        """Remove the whole segments whose entries all lie below `offset`; the log start moves.

        The newest segment is never removed, nor one holding `offset` or later entries, so
        the log afterwards starts at a segment's base offset, at or before `offset`. The
        caller decides what may go (`mlog log trim --before-snapshot`: below the newest
        snapshot). Durable and crash-safe: the checkpoints (and, in quorum mode, the epoch
        cache) name the new start first, then the segments are deleted, oldest first; segments
        a crash left below the start are deleted on the next open. Returns what was removed.
        """
        with self._write_lock:
            self._check_writable()
            if not isinstance(offset, int) or offset < 0:
                raise LogError(f"cannot trim before offset {offset!r}: give an offset >= 0")
            gone = [s for s in self._segments[:-1] if s.next_offset <= offset]
            if not gone:
                return []
            start = self._segments[len(gone)].base_offset
            infos = [s.info() for s in gone]
            try:
                checkpoint = Checkpoint(
                    log_start_offset=start,
                    recovery_point=self._flushed_offset,
                    newest_segment=self._segments[-1].base_offset,
                )
                write_checkpoint(self.directory, checkpoint, sync_directory=True)
                self._checkpoint = checkpoint
                if self.replicated:
                    self._persist_epochs(_epochs_from(self._epochs, start))
                for segment in gone:
                    move_segment(segment.path, None)
                fsync_directory(self.directory)
            except OSError as exc:
                self._fail("trim", exc)
            self._segments = self._segments[len(gone) :]
            logger.info(
                "trimmed the log in %s: removed %d segment(s), offsets %d..%d; it starts at %d",
                self.directory,
                len(gone),
                infos[0].base_offset,
                start - 1,
                start,
            )
            return infos

    @property
    def start_snapshot(self) -> StartSnapshot | None:
        """The snapshot this log starts just after (an install), if it still starts there."""
        snapshot = self._start_snapshot
        if snapshot is None or snapshot.offset + 1 != self.log_start_offset:
            return None
        return snapshot

    def reset_to_snapshot(self, snapshot: StartSnapshot) -> None:
        """Make the log empty, starting just after `snapshot` (a quorum node's install).

        The caller stored the snapshot durably first. Crash-safe in this order: the
        `log-start-snapshot` file (the intent), the segments from the new start on (newest
        first), the new empty segment, the checkpoints and the empty epoch cache, then the
        older segments; an open that finds the file ahead of the checkpoints' start finishes
        the reset.
        """
        self._check_replicated("reset_to_snapshot")
        start = snapshot.offset + 1
        with self._write_lock:
            self._check_writable()
            try:
                write_start_snapshot(self.directory, snapshot)
                self._start_snapshot = snapshot
                if self._fd is not None:
                    os.close(self._fd)
                    self._fd = None
                active = self._reset_files(start)
                self._fd = os.open(active.path, os.O_WRONLY | os.O_APPEND)
            except OSError as exc:
                self._fail("the reset to a snapshot", exc)
            self._segments = [active]
            self._next_offset = self._flushed_offset = start
            self._dirty = False
            self._last_timestamp = snapshot.timestamp
        logger.info(
            "reset the log in %s to start at offset %d after snapshot (offset %d, epoch %d)",
            self.directory,
            start,
            snapshot.offset,
            snapshot.epoch,
        )

    def _reset_files(self, start: int) -> Segment:
        """On disk: only an empty segment at `start`, checkpoints and epoch cache naming it."""
        bases = sorted(
            base
            for name in os.listdir(self.directory)
            if (base := parse_segment_name(name)) is not None
        )
        for base in reversed([b for b in bases if b >= start]):
            move_segment(self.directory / segment_name(base), None)
        fsync_directory(self.directory)
        active = Segment.create(self.directory, start, self.codec.entry_schema_json)
        checkpoint = Checkpoint(log_start_offset=start, recovery_point=start, newest_segment=start)
        write_checkpoint(self.directory, checkpoint, sync_directory=True)
        self._checkpoint = checkpoint
        write_epoch_checkpoint(self.directory, [])
        self._epochs = []
        for base in [b for b in bases if b < start]:
            move_segment(self.directory / segment_name(base), None)
        fsync_directory(self.directory)
        return active

    def epoch_cache(self) -> list[tuple[int, int]]:
        """The leader-epoch cache: [(epoch, offset of its first entry)], oldest first.

        Epochs and offsets strictly increase; the first starts at the log start (offset 0),
        and only epochs that have entries are in it (`LogView.from_log` takes it as it is).
        """
        self._check_replicated("epoch_cache")
        if self._closed:
            raise LogClosedError("the log is closed")
        return list(self._epochs)

    def _persist_epochs(self, epochs: list[tuple[int, int]]) -> None:
        """Make `epochs` the cache, written to `leader-epoch-checkpoint` first."""
        try:
            write_epoch_checkpoint(self.directory, epochs)
        except OSError as exc:
            self._fail(f"writing {EPOCH_CHECKPOINT_NAME}", exc)
        self._epochs = epochs
        self._epoch = epochs[-1][0] if epochs else 0

    def _load_epoch_cache(self, *, persist: bool) -> None:
        """Load `leader-epoch-checkpoint`, checked against the log; rebuild it if it is wrong."""
        path = self.directory / EPOCH_CHECKPOINT_NAME
        problem: str | None = None
        stored: list[tuple[int, int]] | None = None
        try:
            stored = read_epoch_checkpoint(self.directory)
        except EpochCheckpointDamage as exc:
            problem = f"is damaged ({exc})"
        except OSError as exc:
            problem = f"cannot be read ({exc})"
        if stored is not None:
            # A trim writes the checkpoints first: a cache from before it still starts earlier.
            stored = _epochs_from(stored, self.log_start_offset)
            problem = self._epochs_problem(stored)
        elif problem is None and self._next_offset > self.log_start_offset:
            problem = "is missing"
        if problem is None:
            self._epochs = stored or []
        else:
            self._epochs = self._scan_epochs()
            last = f", the last {self._epochs[-1]}" if self._epochs else ""
            logger.warning(
                "%s %s; rebuilt it from the epochs of the entries (%d epochs%s)",
                path,
                problem,
                len(self._epochs),
                last,
            )
            if persist:
                self._persist_epochs(self._epochs)
        self._epoch = self._epochs[-1][0] if self._epochs else 0

    def _epochs_problem(self, epochs: list[tuple[int, int]]) -> str | None:
        """What is wrong with `epochs` as this log's cache, None if it agrees with the log.

        Checks the ends (first start, last epoch's start and the log's last block) with a
        couple of block reads, never a scan.
        """
        start, end = self.log_start_offset, self._next_offset
        if end == start:
            return None if not epochs else f"names epochs {epochs[-3:]} but the log is empty"
        if not epochs:
            return f"is empty but the log holds offsets {start}..{end - 1}"
        if epochs[0][1] != start:
            return f"starts at offset {epochs[0][1]}, the log at {start}"
        epoch, first = epochs[-1]
        if first >= end:
            return f"names epoch {epoch} from offset {first}, at or past the log's end ({end})"
        _, last_epoch, _ = body_prefix(self._block_holding(end - 1)[0].body)
        if last_epoch != epoch:
            return f"ends with epoch {epoch}, but the log's last block has epoch {last_epoch}"
        block, block_first = self._block_holding(first)
        if block_first != first or body_prefix(block.body)[1] != epoch:
            return f"says epoch {epoch} starts at offset {first}, which the log contradicts"
        if first > start:
            before, _ = self._block_holding(first - 1)
            if body_prefix(before.body)[1] >= epoch:
                return f"says epoch {epoch} starts at offset {first}, but it starts earlier"
        return None

    def _block_holding(self, offset: int) -> tuple[RawBlock, int]:
        """(the block holding `offset`, its first offset); `offset` must be in the log."""
        segment = next(s for s in reversed(self._segments) if s.base_offset <= offset)
        return next(segment.blocks_with_offsets(offset))

    def _scan_epochs(self) -> list[tuple[int, int]]:
        """The epoch cache from the entries: the first block of each higher epoch."""
        epochs: list[tuple[int, int]] = []
        for segment in list(self._segments):
            for block, first in segment.blocks_with_offsets(segment.base_offset):
                _, epoch, _ = body_prefix(block.body)
                # A lower epoch after a higher one (only in logs from before quorum mode) is
                # skipped, as Kafka's cache does: epochs in the cache only go up.
                if not epochs or epoch > epochs[-1][0]:
                    epochs.append((epoch, first))
        return epochs

    def replica_blocks(self, *, start: int, max_bytes: int) -> list[ReplicaBlock]:
        """Whole stored blocks from the one that begins at offset `start`, for another node.

        At least one block if the log holds an entry at `start` (empty at the end), then
        more while their bodies total at most `max_bytes`. `LogError` if `start` is outside
        the log or inside a block. Blocks of a segment written with an older entry schema are
        re-encoded in this codec's schema.
        """
        if self._closed:
            raise LogClosedError("the log is closed")
        if not isinstance(start, int) or not self.log_start_offset <= start <= self._next_offset:
            raise LogError(
                f"cannot read blocks from offset {start!r}: the log holds offsets "
                f"{self.log_start_offset}..{self._next_offset - 1}"
            )
        if max_bytes < 0:
            raise LogError(f"max_bytes must be 0 or more, got {max_bytes}")
        blocks: list[ReplicaBlock] = []
        total = 0
        for segment in list(self._segments):
            if segment.next_offset <= start:
                continue
            for raw, first in segment.blocks_with_offsets(max(start, segment.base_offset)):
                if not blocks and first != start:
                    raise LogError(
                        f"offset {start} is inside the block holding offsets "
                        f"{first}..{first + raw.count - 1}: read from {first} or "
                        f"{first + raw.count}"
                    )
                block = self._replica_block(segment, raw, first)
                if blocks and total + len(block.body) > max_bytes:
                    return blocks
                blocks.append(block)
                total += len(block.body)
        return blocks

    def _replica_block(self, segment: Segment, raw: RawBlock, first: int) -> ReplicaBlock:
        body = raw.body
        _, epoch, timestamp = body_prefix(body)
        if segment.header.schema_json != self.codec.entry_schema_json:
            entries = segment.entries(self.codec, first, raw.end)
            _, body = self.codec.encode_entries(
                (e.offset, e.epoch, e.timestamp, e.principal, e.record) for e in entries
            )
        return ReplicaBlock(
            first_offset=first,
            count=raw.count,
            epoch=epoch,
            timestamp=timestamp,
            body=body,
            crc32=zlib.crc32(body),
        )

    # ---------------------------------------------------------------- reading

    def _range(
        self, gt: int | None, lte: int | None, limit: int | None
    ) -> tuple[list[Segment], int, int, Segment | None]:
        """Checked range arguments as (segments, first offset, last offset, damaged segment)."""
        for name, value in (("gt", gt), ("lte", lte), ("limit", limit)):
            if value is not None and (not isinstance(value, int) or value < -1):
                raise LogError(f"{name} must be an offset (integer >= -1), got {value!r}")
        if limit is not None and limit < 0:
            raise LogError(f"limit must be >= 0, got {limit}")
        if self._closed:
            raise LogClosedError("the log is closed")
        start = 0 if gt is None else gt + 1
        segments = list(self._segments)
        last = self._next_offset - 1 if lte is None else min(lte, self._next_offset - 1)
        damaged = next((seg for seg in segments if seg.damage is not None), None)
        if damaged is not None:
            # Serve what precedes the damage; a range reaching into it raises at that point.
            last = min(last, damaged.next_offset - 1)
            if lte is not None and lte < damaged.next_offset:
                damaged = None
        return segments, start, last, damaged

    @staticmethod
    def _spans(
        segments: list[Segment], start: int, last: int
    ) -> Iterator[tuple[Segment, int, int]]:
        """(segment, first offset wanted in it, its size when the read began) up to `last`."""
        sizes = [s.size for s in segments]
        for segment, size in zip(segments, sizes, strict=True):
            if start > last or segment.base_offset > last:
                return
            if segment.next_offset <= start and segment is not segments[-1]:
                continue
            yield segment, start, size
            start = max(start, segment.next_offset)

    def read(
        self, *, gt: int | None = None, lte: int | None = None, limit: int | None = None
    ) -> Iterator[LogEntry]:
        """Committed entries with `gt < offset <= lte`, at most `limit` of them, oldest first.

        Uses the offset index to start at the right block, never a scan from the start.
        """
        segments, start, last, damaged = self._range(gt, lte, limit)
        return self._entries(segments, start, last, limit, damaged)

    def _entries(
        self,
        segments: list[Segment],
        start: int,
        last: int,
        limit: int | None,
        damaged: Segment | None,
    ) -> Iterator[LogEntry]:
        remaining = limit
        if remaining == 0:
            return
        for segment, first, size in self._spans(segments, start, last):
            for entry in segment.entries(self.codec, first, size):
                if entry.offset > last:
                    break
                yield entry
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return
        if damaged is not None and damaged.damage is not None:
            raise damaged.damage

    def read_records(
        self, *, gt: int | None = None, lte: int | None = None
    ) -> Iterator[RecordBlock]:
        """The records with `gt < offset <= lte`, a block at a time, without LogEntry objects.

        For bulk readers (replay, snapshots): the same entries as `read`, about a third cheaper.
        """
        segments, start, last, damaged = self._range(gt, lte, None)
        return self._record_blocks(segments, start, last, damaged)

    def _record_blocks(
        self, segments: list[Segment], start: int, last: int, damaged: Segment | None
    ) -> Iterator[RecordBlock]:
        for segment, first, size in self._spans(segments, start, last):
            for block in segment.record_blocks(self.codec, first, size):
                if block.first_offset > last:
                    break
                yield block.trimmed(start, last)
                if block.last_offset >= last:
                    break
        if damaged is not None and damaged.damage is not None:
            raise damaged.damage

    def block_bodies(self, *, start: int, last: int, max_entries: int) -> tuple[str, int, bytes]:
        """Whole blocks from the one holding `start`, as they are stored: for replication.

        Returns (the segment's writer schema JSON, entry count, the blocks' uncompressed bodies
        joined: one valid Avro block body). Blocks are taken from one segment (each segment
        may have its own writer schema) until they reach `last` or hold `max_entries`; the
        first block may begin before `start` and the last end after `last`, so the reader
        trims by offset. Nothing is decoded here; every block's CRC is checked.
        """
        segments, first, last, damaged = self._range(start - 1, last, None)
        for segment, wanted, size in self._spans(segments, first, last):
            bodies: list[bytes] = []
            count = 0
            for block, block_first in segment.blocks_with_offsets(wanted, size):
                if block_first > last:
                    break
                bodies.append(block.body)
                count += block.count
                if count >= max_entries:
                    break
            return segment.header.schema_json, count, b"".join(bodies)
        if damaged is not None and damaged.damage is not None:
            raise damaged.damage
        return self.codec.entry_schema_json, 0, b""

    def read_spans(self, *, split_bytes: int = 32 << 20) -> list[ReadSpan]:
        """The committed blocks as byte ranges of about `split_bytes`, for parallel readers.

        Cut at index points, so no block is decoded; read each with `spans.read_span`. A
        damaged log raises its `LogCorruptionError` rather than serve a part of it silently.
        """
        if split_bytes < 1:
            raise LogError(f"split_bytes must be positive, got {split_bytes}")
        if self._closed:
            raise LogClosedError("the log is closed")
        segments = list(self._segments)
        damaged = next((seg for seg in segments if seg.damage is not None), None)
        if damaged is not None and damaged.damage is not None:
            raise damaged.damage
        return [span for seg in segments for span in spans_of(seg, split_bytes)]

    def offset_for_time(self, timestamp_ms: int) -> int | None:
        """Offset of the first entry whose timestamp is >= `timestamp_ms`, or None."""
        for entry in self.read_from_time(timestamp_ms, limit=1):
            return entry.offset
        return None

    def read_from_time(
        self, timestamp_ms: int, *, lte: int | None = None, limit: int | None = None
    ) -> Iterator[LogEntry]:
        """Entries from the first one whose timestamp is >= `timestamp_ms` (ms since the epoch).

        Timestamps never decrease along the log, so the time index finds the start block.
        """
        if not isinstance(timestamp_ms, int):
            raise LogError(f"timestamp must be milliseconds since the epoch, got {timestamp_ms!r}")
        segments = list(self._segments)
        for segment in segments:
            if segment.max_timestamp >= timestamp_ms:
                start = segment.time_index.last_below(timestamp_ms)
                start = segment.base_offset if start is None else start
                entries = self.read(gt=start - 1, lte=lte)
                return self._from_time(entries, timestamp_ms, limit)
        return iter(())

    @staticmethod
    def _from_time(
        entries: Iterator[LogEntry], timestamp_ms: int, limit: int | None
    ) -> Iterator[LogEntry]:
        remaining = limit
        if remaining == 0:
            return
        for entry in entries:
            if entry.timestamp < timestamp_ms:
                continue
            yield entry
            if remaining is not None:
                remaining -= 1
                if remaining == 0:
                    return

    def verify(self, progress: Callable[[int], None] | None = None) -> VerifyReport:
        """Decode and check every block of every segment (CRC, framing, dense offsets).

        Checks the directory as `verify_log` does, up to what this instance has committed (a
        writer's in-flight block is not looked at), and reports the torn tail this open saw.
        """
        if self._closed:
            raise LogClosedError("the log is closed")
        sizes = {s.base_offset: s.size for s in self._segments}
        report = verify_log(self.directory, self.codec, progress=progress, sizes=sizes)
        if self.torn_tail is not None and report.torn_tail is None:
            report = dataclasses.replace(report, torn_tail=self.torn_tail)
        return report
