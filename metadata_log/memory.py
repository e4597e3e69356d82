"""An in-memory log for unit tests and simulations: the user's protocol, no files.

`MemoryLog` implements `AppendLog` with the file log's rules (dense offsets from 0, one
timestamp per append that never goes down, atomic batches, the same range arguments and
errors), checked by the same conformance suite (tests/metadata_log/test_log_conformance.py).
Records are encoded on append, so a record the file log refuses is refused here too. The
replica protocol's in-memory log is `MemoryReplicaLog` (metadata_log/memory_replica.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

from metadata_log.errors import LogClosedError, LogError
from metadata_log.writer import AppendResult, check_batch
from records.codec import DEFAULT_CODEC, RecordBlock, RecordCodec
from records.entry import LogEntry
from records.model import Record


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class MemoryLog:
    """The user's append/read log kept in a list; nothing is durable past the process."""

    def __init__(
        self,
        *,
        epoch: int = 1,
        codec: RecordCodec = DEFAULT_CODEC,
        clock_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        self.codec = codec
        self.epoch = epoch
        self._clock_ms = clock_ms
        self._entries: list[LogEntry] = []
        self._closed = False

    @property
    def end_offset(self) -> int:
        """The offset the next appended entry will get."""
        return len(self._entries)

    @property
    def log_start_offset(self) -> int:
        """Always 0: a memory log is never trimmed."""
        return 0

    @property
    def last_timestamp(self) -> int:
        """The timestamp (ms) of the last entry, -1 for an empty log."""
        return self._entries[-1].timestamp if self._entries else -1

    def append(self, records: Iterable[Record], *, principal: str | None = None) -> AppendResult:
        """Append `records` as one atomic batch; (first, last) offset."""
        (result,) = self.append_batches([(records, principal)])
        return result

    def append_batches(
        self, batches: Iterable[tuple[Iterable[Record], str | None]]
    ) -> list[AppendResult]:
        """Append several batches, each with its principal, all or none."""
        checked = [(check_batch(records), principal) for records, principal in batches]
        if not checked:
            raise LogError("an append needs at least one batch")
        if self._closed:
            raise LogClosedError("the log is closed")
        timestamp = max(self._clock_ms(), self.last_timestamp)
        first = self.end_offset
        # Encoded (and dropped) so that what the file log refuses is refused here too.
        self.codec.encode_batches(
            checked, first_offset=first, epoch=self.epoch, timestamp=timestamp
        )
        results = []
        offset = first
        for records, principal in checked:
            results.append(AppendResult(offset, offset + len(records) - 1, timestamp))
            for record in records:
                self._entries.append(
                    LogEntry(
                        offset=offset,
                        epoch=self.epoch,
                        timestamp=timestamp,
                        principal=principal,
                        record=record,
                    )
                )
                offset += 1
        return results

    async def append_async(
        self, records: Iterable[Record], *, principal: str | None = None
    ) -> AppendResult:
        """`append`; there is no disk to share a write with."""
        return self.append(records, principal=principal)

    def _range(self, gt: int | None, lte: int | None, limit: int | None) -> tuple[int, int]:
        for name, value in (("gt", gt), ("lte", lte), ("limit", limit)):
            if value is not None and (not isinstance(value, int) or value < -1):
                raise LogError(f"{name} must be an offset (integer >= -1), got {value!r}")
        if limit is not None and limit < 0:
            raise LogError(f"limit must be >= 0, got {limit}")
        if self._closed:
            raise LogClosedError("the log is closed")
        start = 0 if gt is None else gt + 1
        stop = self.end_offset if lte is None else min(lte + 1, self.end_offset)
        if limit is not None:
            stop = min(stop, start + limit)
        return start, max(start, stop)

    def read(
        self, *, gt: int | None = None, lte: int | None = None, limit: int | None = None
    ) -> Iterator[LogEntry]:
        """Entries with `gt < offset <= lte`, at most `limit` of them, oldest first."""
        start, stop = self._range(gt, lte, limit)
        return iter(self._entries[start:stop])

    def read_records(
        self, *, gt: int | None = None, lte: int | None = None
    ) -> Iterator[RecordBlock]:
        """The records with `gt < offset <= lte`, one block per run of the same timestamp."""
        start, stop = self._range(gt, lte, None)  # checked now, as the file log does
        return self._blocks(self._entries[start:stop])

    @staticmethod
    def _blocks(entries: list[LogEntry]) -> Iterator[RecordBlock]:
        i = 0
        while i < len(entries):
            j = i
            while j < len(entries) and entries[j].timestamp == entries[i].timestamp:
                j += 1
            run = entries[i:j]
            yield RecordBlock(
                first_offset=run[0].offset,
                records=[e.record for e in run],
                offsets=[e.offset for e in run],
                epochs=[e.epoch for e in run],
                timestamps=[e.timestamp for e in run],
                principals=[e.principal for e in run],
            )
            i = j

    def close(self) -> None:
        """Later reads and appends raise `LogClosedError`."""
        self._closed = True

    async def aclose(self) -> None:
        """Close (nothing is ever in flight)."""
        self.close()

    def __enter__(self) -> MemoryLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
