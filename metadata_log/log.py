"""The segmented metadata log: durable atomic appends with group commit, reads, recovery."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from metadata_log.checkpoint import (
    Checkpoint,
    CheckpointDamage,
    checkpoint_path,
    read_checkpoint,
    write_checkpoint,
)
from metadata_log.config import LogConfig
from metadata_log.container import SYNC_SIZE, BlockDamage, encode_block, fsync_directory, write_all
from metadata_log.epoch import bump_epoch, read_epoch
from metadata_log.errors import (
    LogClosedError,
    LogCorruptionError,
    LogError,
    LogFailedError,
    ReadOnlyLogError,
)
from metadata_log.extent import Link, extent_problems, link_problem
from metadata_log.lock import DirectoryLock
from metadata_log.segment import (
    ScanProblem,
    Segment,
    SegmentInfo,
    parse_segment_name,
    segment_name,
)
from metadata_log.spans import ReadSpan, spans_of
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
    ) -> None:
        self.directory = directory
        self.config = config
        self.codec = codec
        self.read_only = read_only
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
    ) -> MetadataLog:
        """Open (and for a writer, create and recover) the log in `directory`.

        A writer takes the directory lock, truncates a torn tail (logging a WARNING that names
        the segment, byte position and entries dropped), writes the checkpoints and takes the
        next leader epoch. A read-only open changes nothing on disk and stops before a torn
        tail. Both raise `LogCorruptionError` for damage: a damaged block or header, a missing
        segment, a log that ends before its recovery point. With `up_to_damage` (read-only
        only) the log is served up to the first damage instead, with a WARNING naming it, and
        reads that reach it raise it.
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
        bases = []
        for name in os.listdir(self.directory):
            base = parse_segment_name(name)
            if base is not None:
                bases.append(base)
            elif name.endswith(".tmp") and not self.read_only:
                # An interrupted segment, index, checkpoint or epoch write: never the only copy.
                (self.directory / name).unlink()
        links = self._open_segments(sorted(bases))
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
        if not self.read_only:
            self._start_writing(0 if checkpoint is None else checkpoint.log_start_offset)

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
            self._next_offset = start
            self._write_checkpoint(start)
            self._segments.append(
                Segment.create(self.directory, start, self.codec.entry_schema_json)
            )
        active = self._segments[-1]
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

    def _write_checkpoint(self, log_start_offset: int | None = None) -> None:
        """Persist the checkpoints: the log start, the end offset now, the newest segment."""
        start = log_start_offset
        if start is None:
            start = 0 if self._checkpoint is None else self._checkpoint.log_start_offset
        checkpoint = Checkpoint(
            log_start_offset=start,
            recovery_point=self._next_offset,
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
    def epoch(self) -> int:
        """The leader epoch this writer stamps on its entries (last persisted one if read-only)."""
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
            active = self._segments[-1]
            if not active.is_empty and (
                active.size + len(framed) + SYNC_SIZE > self.config.segment_bytes
                or timestamp - active.first_timestamp >= self.config.segment_ms
            ):
                active = self._roll()
            data = framed + active.header.sync
            position = active.size
            fd = self._fd
            if fd is None:  # pragma: no cover - guarded by _check_writable
                raise LogClosedError("the log is closed")
            write_all(fd, data)
            os.fdatasync(fd)
        except OSError as exc:
            self._failed = exc
            logger.error("append failed, the log stops accepting writes: %s", exc)
            raise LogFailedError(
                f"append failed: {exc}. The log accepts no more writes; fix the storage problem "
                "and restart (the log recovers on open)"
            ) from exc
        # Publish only after fsync: readers never look past `active.size`.
        active.note_block(
            position=position,
            end=position + len(data),
            first_offset=first,
            count=total,
            timestamp=timestamp,
            interval=self.config.index_interval_bytes,
        )
        self._last_timestamp = timestamp
        self._next_offset = offset
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

    def _roll(self) -> Segment:
        old = self._segments[-1]
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
        if damaged is not None and damaged.damage is not None and start < damaged.next_offset:
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
