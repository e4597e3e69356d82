"""The user's writer: atomic, durable appends of record batches, with group commit.

`LogWriter` stamps each block with the writer's epoch and a timestamp that never goes down,
encodes all waiting batches in one codec call and writes them as one block with one fsync
through the `ActiveSegment`. Concurrent `append_async` callers share that write (group commit).
The block is encoded on the event loop's thread and its write and fdatasync run on the
`Syncer`'s compiled thread, which never takes the interpreter lock (metadata_log.syncer); the
segment's lock is held by that job until its end publishes the block. Without the compiled
helper, or while another thread holds the lock, the whole group is written on a Python worker
thread instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from metadata_log import syncer as syncers
from metadata_log.active import ActiveSegment, PreparedBlock
from metadata_log.container import encode_block
from metadata_log.errors import LogError
from records.errors import RecordError
from records.model import Record

if TYPE_CHECKING:
    # Only the asynchronous appends use asyncio; they import it when called, so that readers
    # and synchronous writers (every `mlog` command) start without it.
    import asyncio

Batch = tuple[tuple[Record, ...], str | None]
"""One batch to append: its records and the principal who asked for them."""

Pending = tuple[tuple[Record, ...], str | None, "asyncio.Future[AppendResult]"]
"""A batch waiting for the next group commit, with its caller's future."""


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


def check_batch(records: Iterable[Record]) -> tuple[Record, ...]:
    """`records` as a tuple; `LogError` if empty, `RecordError` if one is not a record."""
    batch = tuple(records)
    if not batch:
        raise LogError("an append needs at least one record")
    for record in batch:
        if not isinstance(record, Record):
            raise RecordError(f"{record!r} is not a metadata record")
    return batch


class LogWriter:
    """Appends batches at the end of the log as one writer incarnation of epoch `epoch`."""

    def __init__(self, active: ActiveSegment, *, epoch: int, clock_ms: Callable[[], int]) -> None:
        self.active = active
        self.storage = active.storage
        self.epoch = epoch
        self.clock_ms = clock_ms
        self._pending: list[Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._syncer: syncers.Syncer | None = None

    def append(self, records: Iterable[Record], *, principal: str | None = None) -> AppendResult:
        """Append `records` as one atomic batch; returns (first, last) offset after fsync."""
        batch = check_batch(records)
        with self.active.write_lock:
            (result,) = self._write_group([(batch, principal)])
        if isinstance(result, BaseException):
            raise result
        return result

    def append_batches(
        self, batches: Iterable[tuple[Iterable[Record], str | None]]
    ) -> list[AppendResult]:
        """Append several batches, each with its own principal, as one atomic block."""
        checked = [(check_batch(records), principal) for records, principal in batches]
        if not checked:
            raise LogError("an append needs at least one batch")
        with self.active.write_lock:
            results = self._write_group(checked, atomic=True)
        return [r for r in results if isinstance(r, AppendResult)]

    async def append_async(
        self, records: Iterable[Record], *, principal: str | None = None
    ) -> AppendResult:
        """Append `records` as one atomic batch, group-committed with concurrent callers."""
        import asyncio

        batch = check_batch(records)
        self.active.check_writable()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AppendResult] = loop.create_future()
        self._pending.append((batch, principal, future))
        if self._flusher is None:
            self._flusher = loop.create_task(self._flush_pending())
        return await future

    async def drain(self) -> None:
        """Wait for the asynchronous appends in flight."""
        import asyncio

        while self._flusher is not None:
            await asyncio.shield(self._flusher)

    def shutdown(self) -> None:
        """Stop the worker threads (after what they are writing)."""
        if self._syncer is not None:
            self._syncer.close()  # a job in flight ends here, its callers answered
            self._syncer = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    async def _flush_pending(self) -> None:
        import asyncio

        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                group, self._pending = self._pending, []
                batches = [(records, principal) for records, principal, _ in group]
                if syncers.AVAILABLE and self.active.write_lock.acquire(blocking=False):
                    ended = self._start_group(loop, group, batches)
                    if ended is not None:
                        await ended
                    continue
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(1, thread_name_prefix="mlog-append")
                try:
                    results = await loop.run_in_executor(
                        self._executor, self._locked_write_group, batches
                    )
                except Exception as exc:
                    _answer(group, exc)
                    continue
                _answer(group, results)
        finally:
            self._flusher = None

    def _start_group(
        self, loop: asyncio.AbstractEventLoop, group: list[Pending], batches: Sequence[Batch]
    ) -> asyncio.Future[None] | None:
        """Encode `group` as one block and start its write and fsync on the syncer.

        The caller took the write lock; the job's end releases it, publishes the block and
        answers the group's callers (`_group_written`). Returns the future of that end, or
        None when the group was answered at once (nothing to write, or a refusal).
        """
        active = self.active
        try:
            block, results = self._prepare_group(batches)
            fd = active.fd
            if fd is None:  # pragma: no cover - check_writable refuses a closed log first
                raise LogError("the log is closed")
        except BaseException as exc:
            active.write_lock.release()
            _answer(group, exc)
            if not isinstance(exc, Exception):
                raise
            return None
        if block is None:
            active.write_lock.release()
            _answer(group, results)
            return None
        syncer = self._syncer
        if syncer is None:
            syncer = self._syncer = syncers.Syncer(name="mlog-append")
        ended: asyncio.Future[None] = loop.create_future()

        def job_ended(result: syncers.JobResult) -> None:
            outcome: list[AppendResult | Exception] | Exception
            try:
                self._group_written(block, result)
            except Exception as exc:
                outcome = exc
            else:
                outcome = results
            finally:
                active.write_lock.job_ended()
            if loop.is_closed():
                return  # finished by a close after the loop ended: nobody waits any more
            _answer(group, outcome)
            if not ended.done():
                ended.set_result(None)

        active.write_lock.held_by_job(syncer)
        try:
            syncer.start(loop, fd, block.data, job_ended)
        except Exception as exc:  # the thread could not be woken: nothing was written
            active.write_lock.job_ended()
            _answer(group, exc)
            return None
        return ended

    def _prepare_group(
        self, batches: Sequence[Batch], *, atomic: bool = False
    ) -> tuple[PreparedBlock | None, list[AppendResult | Exception]]:
        """The block of `batches` (None if no batch encodes) and each batch's result.

        Stamped with the writer's epoch and a timestamp never lower than an earlier entry's;
        a batch that does not encode fails alone, unless `atomic` (then the error is raised).
        """
        active = self.active
        storage = self.storage
        active.check_writable()
        timestamp = max(self.clock_ms(), storage.last_timestamp)
        first = storage.next_offset
        try:
            results, total, body = self._encode_group(batches, first, self.epoch, timestamp)
        except RecordError:
            if atomic:
                raise
            results, total, body = self._encode_batches_alone(batches, first, self.epoch, timestamp)
        if total == 0:
            return None, results
        block = active.prepare_block(
            encode_block(total, body),
            body=body,
            first_offset=first,
            count=total,
            epoch=self.epoch,
            timestamp=timestamp,
            what="append",
        )
        return block, results

    def _group_written(self, block: PreparedBlock, result: syncers.JobResult) -> None:
        """After the syncer's job: publish the block (or fail the log on its I/O error)."""
        active = self.active
        if result.error is not None:
            active.fail(block.what, result.error)
        active.block_written(
            block, write_seconds=result.write_seconds, sync_seconds=result.sync_seconds
        )
        self._advance(block)

    def _advance(self, block: PreparedBlock) -> None:
        """The log's end after a durable block (either path); the checkpoints if due."""
        storage = self.storage
        storage.last_timestamp = block.timestamp
        storage.next_offset = storage.flushed_offset = block.first_offset + block.count
        storage.record_bytes_appended += len(block.body)
        self.active.checkpoint_if_due()

    def _locked_write_group(self, batches: Sequence[Batch]) -> list[AppendResult | Exception]:
        with self.active.write_lock:
            return self._write_group(batches)

    def _write_group(
        self, batches: Sequence[Batch], *, atomic: bool = False
    ) -> list[AppendResult | Exception]:
        """Write `batches` as one block with one fsync; the caller holds the write lock.

        A batch that does not encode fails alone and the others are written, unless `atomic`:
        then nothing is written and the error is raised. All entries of the block carry the
        same timestamp, never lower than any earlier entry's.
        """
        block, results = self._prepare_group(batches, atomic=atomic)
        if block is not None:
            self.active.write(block, durable=True)
            self._advance(block)
        return results

    def _encode_group(
        self, batches: Sequence[Batch], first: int, epoch: int, timestamp: int
    ) -> tuple[list[AppendResult | Exception], int, bytes]:
        """Encode all batches in one codec call (the common case: every batch is valid)."""
        results: list[AppendResult | Exception] = []
        offset = first
        for records, _ in batches:
            results.append(AppendResult(offset, offset + len(records) - 1, timestamp))
            offset += len(records)
        count, body = self.storage.codec.encode_batches(
            batches, first_offset=first, epoch=epoch, timestamp=timestamp
        )
        return results, count, body

    def _encode_batches_alone(
        self, batches: Sequence[Batch], first: int, epoch: int, timestamp: int
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


def _answer(
    group: Sequence[Pending], results: Sequence[AppendResult | Exception] | BaseException
) -> None:
    """Settle each caller's future with its batch's result (or everyone's with one error)."""
    for index, (_, _, future) in enumerate(group):
        if future.done():
            continue
        result = results if isinstance(results, BaseException) else results[index]
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)
