"""Reading a stored log: entries, record blocks, whole blocks, spans, time lookup, verify.

`StoredLog` is what every role of a log directory shares (the user's `MetadataLog`, a quorum
node's `ReplicaLog`, a `LogReader`): reads over the `SegmentStorage`, never past what the
writer has published (each segment's `size`, read once per read).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Self

from metadata_log.config import LogConfig
from metadata_log.container import RawBlock, body_prefix
from metadata_log.digest import LogDigest, chain_state_at, take_digest
from metadata_log.epoch import read_epoch
from metadata_log.errors import LogClosedError, LogError
from metadata_log.replica import ReplicaBlock
from metadata_log.segment import Segment, SegmentInfo
from metadata_log.spans import ReadSpan, spans_of
from metadata_log.start_snapshot import CarriedChain, StartSnapshot
from metadata_log.storage import SegmentStorage
from metadata_log.verify import VerifyReport, verify_log
from records.codec import RecordBlock, RecordCodec
from records.entry import LogEntry


class StoredLog:
    """The reads and the state of a log directory, shared by every role that opens one."""

    def __init__(self, storage: SegmentStorage) -> None:
        self.storage = storage
        self.directory: Path = storage.directory
        self.config: LogConfig = storage.config
        self.codec: RecordCodec = storage.codec

    # ---------------------------------------------------------------- closing

    def close(self) -> None:
        """Stop reading; later reads raise `LogClosedError`. Idempotent."""
        self.storage.closed = True

    async def aclose(self) -> None:
        """Close (nothing is in flight for a role that does not append asynchronously)."""
        self.close()

    def __enter__(self) -> Self:
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
    def epoch(self) -> int:
        """The leader epoch of the log's writer (for a reader: the last one a writer persisted)."""
        return read_epoch(self.directory)

    @property
    def end_offset(self) -> int:
        """The offset the next entry will get (one past the last committed entry)."""
        return self.storage.next_offset

    @property
    def flushed_offset(self) -> int:
        """One past the last durable entry (less than `end_offset` only on a replica)."""
        return self.storage.flushed_offset

    @property
    def last_timestamp(self) -> int:
        """The timestamp (ms) of the last entry, -1 for an empty log.

        Timestamps never decrease along the log: a leader stamps a new block with at least this.
        """
        return self.storage.last_timestamp

    @property
    def log_start_offset(self) -> int:
        """Offset of the first entry the log keeps (its first segment's base offset)."""
        return self.storage.log_start_offset

    @property
    def record_bytes_appended(self) -> int:
        """Uncompressed bytes of the entries this process wrote since the log was opened.

        Kafka's `metadata.log.max.record.bytes.between.snapshots` counts record bytes, not what
        they take on disk after compression; this is that count for the entries written here.
        """
        return self.storage.record_bytes_appended

    @property
    def start_snapshot(self) -> StartSnapshot | None:
        """The snapshot this log starts just after (an install), if it still starts there."""
        snapshot = self.storage.start_snapshot
        if snapshot is None or snapshot.offset + 1 != self.log_start_offset:
            return None
        return snapshot

    @property
    def torn_tail(self) -> str | None:
        """The torn tail a read-only open saw and stopped before (a writer's open cut it)."""
        return self.storage.torn_tail

    def segments(self) -> list[SegmentInfo]:
        """The segments, oldest first."""
        return [s.info() for s in self.storage.segments]

    def record_bytes_after(self, offset: int, *, limit: int | None = None) -> int:
        """Uncompressed bytes of the entries after `offset`, counted by whole blocks.

        The block holding `offset + 1` counts whole. Stops early once the count passes `limit`
        (the caller only wants to know whether a threshold is reached). Reads and verifies the
        blocks, so it costs a decompression of that part of the log.
        """
        total = 0
        for segment in list(self.storage.segments):
            if segment.next_offset <= offset + 1:
                continue
            for block in segment.raw_blocks(max(offset + 1, segment.base_offset)):
                total += len(block.body)
                if limit is not None and total >= limit:
                    return total
        return total

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
        storage = self.storage
        if storage.closed:
            raise LogClosedError("the log is closed")
        start = 0 if gt is None else gt + 1
        segments = list(storage.segments)
        end = storage.next_offset
        last = end - 1 if lte is None else min(lte, end - 1)
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

    def replica_blocks(
        self, *, start: int, max_bytes: int, max_blocks: int | None = None
    ) -> list[ReplicaBlock]:
        """Whole stored blocks from the one that begins at offset `start`, for another node.

        At least one block if the log holds an entry at `start` (empty at the end), then
        more while their bodies total at most `max_bytes` and they number at most `max_blocks`
        (None: no count bound). `LogError` if `start` is outside
        the log or inside a block. Blocks of a segment written with an older entry schema are
        re-encoded in this codec's schema.
        """
        storage = self.storage
        if storage.closed:
            raise LogClosedError("the log is closed")
        log_start, end = self.log_start_offset, storage.next_offset
        if not isinstance(start, int) or not log_start <= start <= end:
            raise LogError(
                f"cannot read blocks from offset {start!r}: the log holds offsets "
                f"{log_start}..{end - 1}"
            )
        if max_bytes < 0:
            raise LogError(f"max_bytes must be 0 or more, got {max_bytes}")
        blocks: list[ReplicaBlock] = []
        total = 0
        for segment in list(storage.segments):
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
                if blocks and (
                    total + len(block.body) > max_bytes
                    or (max_blocks is not None and len(blocks) >= max_blocks)
                ):
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

    def read_spans(self, *, split_bytes: int = 32 << 20) -> list[ReadSpan]:
        """The committed blocks as byte ranges of about `split_bytes`, for parallel readers.

        Cut at index points, so no block is decoded; read each with `spans.read_span`. A
        damaged log raises its `LogCorruptionError` rather than serve a part of it silently.
        """
        if split_bytes < 1:
            raise LogError(f"split_bytes must be positive, got {split_bytes}")
        if self.storage.closed:
            raise LogClosedError("the log is closed")
        segments = list(self.storage.segments)
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
        segments = list(self.storage.segments)
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

    def digest(self, at_offset: int | None = None, *, at_or_before: bool = False) -> LogDigest:
        """The hash chain's digest at `at_offset` (a block's last offset; default: the end).

        With `at_or_before`, at the last block end at or before `at_offset` (a committed
        offset inside a block). Read from the stored chain values (metadata_log.digest).
        """
        if self.storage.closed:
            raise LogClosedError("the log is closed")
        return take_digest(list(self.storage.segments), at_offset, at_or_before=at_or_before)

    def chain_state(self, offset: int) -> CarriedChain:
        """The hash chain's origin and value after `offset` (a block's last offset).

        What a snapshot at `offset` carries to a node that installs it. DigestError if the
        log keeps no chain or `offset` is not a block's last offset.
        """
        if self.storage.closed:
            raise LogClosedError("the log is closed")
        return chain_state_at(list(self.storage.segments), offset + 1)

    def verify(self, progress: Callable[[int], None] | None = None) -> VerifyReport:
        """Decode and check every block of every segment (CRC, framing, dense offsets).

        Checks the directory as `verify_log` does, up to what this instance has committed (a
        writer's in-flight block is not looked at), and reports the torn tail this open saw.
        """
        storage = self.storage
        if storage.closed:
            raise LogClosedError("the log is closed")
        sizes = {s.base_offset: s.size for s in storage.segments}
        report = verify_log(self.directory, self.codec, progress=progress, sizes=sizes)
        if storage.torn_tail is not None and report.torn_tail is None:
            report = dataclasses.replace(report, torn_tail=storage.torn_tail)
        return report
