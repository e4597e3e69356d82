"""One segment of the log: a container file named by its base offset, with its indexes."""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metadata_log.container import (
    BASE_OFFSET_KEY,
    HASH_CHAIN_KEY,
    MAX_HEADER_BYTES,
    PREVIOUS_LAST_OFFSET_KEY,
    PREVIOUS_SYNC_KEY,
    SYNC_SIZE,
    BlockDamage,
    Header,
    RawBlock,
    TruncatedBlock,
    body_prefix,
    decode_header,
    encode_header,
    fsync_directory,
    read_block,
    write_all,
)
from metadata_log.errors import LogCorruptionError
from metadata_log.index import OFFSET_MAGIC, TIME_MAGIC, IndexFooter, SparseIndex
from metadata_log.private_files import FILE_MODE
from metadata_log.schema_check import check_entry_schema
from records.codec import RecordBlock, RecordCodec
from records.entry import LogEntry

SEGMENT_SUFFIX = ".avro"
_SEGMENT_NAME = re.compile(r"^(\d{20})\.avro$")
_READ_CHUNK = 1 << 20
_HEAD_READ = 64 * 1024


def segment_name(base_offset: int) -> str:
    """File name of the segment starting at `base_offset`: 20 digits and `.avro`."""
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    """Base offset encoded in a segment file name, or None if it is not a segment name."""
    match = _SEGMENT_NAME.match(name)
    return int(match.group(1)) if match else None


class ScanProblem(Exception):
    """A scan stopped at a block that is incomplete (`truncated`) or damaged."""

    def __init__(
        self,
        position: int,
        reason: str,
        *,
        truncated: bool,
        certain_damage: bool = False,
        first_offset: int | None = None,
    ) -> None:
        super().__init__(reason)
        self.position = position
        self.reason = reason
        self.truncated = truncated
        self.certain_damage = certain_damage
        """True when the data is known to be wrong, not torn: e.g. a CRC-valid block follows."""
        self.first_offset = first_offset
        """Offset the bad block's first entry has (or would have), when the scan knows it."""


def decoder_failure(exc: BaseException) -> str:
    """A short description of an exception a decoder raised on damaged data.

    Decoders of damaged data raise anything (KeyError, ValueError, fastavro's own errors) with
    messages that may quote a whole schema: keep the type and the start of the message.
    """
    text = str(exc).replace("\n", " ")
    if len(text) > 160:
        text = text[:157] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentInfo:
    """A public description of a segment."""

    base_offset: int
    next_offset: int
    """One past the offset of the segment's last entry (== base_offset when empty)."""
    size_bytes: int
    path: Path
    max_timestamp: int
    """Largest entry timestamp (ms), or -1 when empty."""


class Segment:
    """A segment file and what is known about its committed content.

    Only the writer changes a segment, under the log's write lock; readers read `size` once and
    never look past it, so they see whole, fsynced blocks only.
    """

    def __init__(self, path: Path, base_offset: int, header: Header) -> None:
        self.path = path
        self.base_offset = base_offset
        self.header = header
        self.size = header.size
        self.next_offset = base_offset
        self.first_timestamp = -1
        self.max_timestamp = -1
        self.last_epoch = 0
        self.damage: LogCorruptionError | None = None
        """Damage found past `size` by a read-only open; reads that reach it raise it."""
        self.offset_index = SparseIndex()
        self.time_index = SparseIndex()
        self._last_indexed = -(1 << 62)

    @property
    def index_path(self) -> Path:
        """Path of the offset index file."""
        return self.path.with_suffix(".index")

    @property
    def time_index_path(self) -> Path:
        """Path of the time index file."""
        return self.path.with_suffix(".timeindex")

    @property
    def is_empty(self) -> bool:
        """True if the segment holds no entries."""
        return self.next_offset == self.base_offset

    def info(self) -> SegmentInfo:
        """A public description of the segment."""
        return SegmentInfo(
            base_offset=self.base_offset,
            next_offset=self.next_offset,
            size_bytes=self.size,
            path=self.path,
            max_timestamp=self.max_timestamp,
        )

    @classmethod
    def create(
        cls,
        directory: Path,
        base_offset: int,
        schema_json: str,
        previous: Segment | None = None,
        *,
        hash_chained: bool = False,
    ) -> Segment:
        """Create an empty segment: born complete (temporary name, fsync, rename, dir fsync).

        The header links to `previous` (its last offset and sync marker), so a missing or
        foreign segment before this one is noticed. With `hash_chained` (its writer keeps the
        hash chain) the header says so, so a missing chain file is noticed. Replaces an existing
        file of the same name atomically (an empty active segment rewritten with a newer schema).
        """
        extra = {
            BASE_OFFSET_KEY: str(base_offset).encode(),
            PREVIOUS_LAST_OFFSET_KEY: str(base_offset - 1).encode(),
            PREVIOUS_SYNC_KEY: b"" if previous is None else previous.header.sync.hex().encode(),
        }
        if hash_chained:
            extra[HASH_CHAIN_KEY] = b"1"
        header_bytes = encode_header(schema_json, os.urandom(SYNC_SIZE), extra)
        path = directory / segment_name(base_offset)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            write_all(fd, header_bytes)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(tmp, path)
        fsync_directory(directory)
        return cls(path, base_offset, decode_header(header_bytes))

    @classmethod
    def open_header(cls, path: Path, base_offset: int) -> Segment:
        """Open an existing segment by reading its header; raises BlockDamage if it is bad.

        Segments are born complete, so a header that ends early (a zero-length file included)
        is damage, like one that fails its CRC or, written before the CRC existed, whose schema
        could not be decoded safely. At most `MAX_HEADER_BYTES` are read.
        """
        with open(path, "rb") as f:
            head = f.read(_HEAD_READ)
            if not head:
                raise BlockDamage("the segment file is empty (0 bytes): its header is missing")
            try:
                header = decode_header(head)
            except TruncatedBlock:
                if len(head) == _HEAD_READ:
                    head += f.read(MAX_HEADER_BYTES - _HEAD_READ)
                try:
                    header = decode_header(head)
                except TruncatedBlock:
                    if len(head) >= MAX_HEADER_BYTES:
                        raise BlockDamage(
                            f"the header claims to be larger than {MAX_HEADER_BYTES} bytes"
                        ) from None
                    raise BlockDamage(
                        f"the header is incomplete: the file ends at byte {len(head)}, inside it"
                    ) from None
        declared = header.metadata.get(BASE_OFFSET_KEY)
        if declared is not None and declared != str(base_offset).encode():
            raise BlockDamage(f"header says base offset {declared!r}, file name {base_offset}")
        if not header.checksummed:
            check_entry_schema(header.schema_json)
        return cls(path, base_offset, header)

    def array_schema(self, codec: RecordCodec) -> Any:
        """The codec's decoder for this segment's writer schema; an unusable one is damage."""
        try:
            return codec.reader_array_schema(self.header.schema_json)
        except MemoryError:
            raise
        except Exception as exc:
            raise LogCorruptionError(
                self.path,
                0,
                f"the header's schema cannot be used ({decoder_failure(exc)})",
                first_offset=self.base_offset,
            ) from None

    def note_block(
        self,
        *,
        position: int,
        end: int,
        first_offset: int,
        count: int,
        epoch: int,
        timestamp: int,
        interval: int,
    ) -> None:
        """Account for a verified block; indexes it if `interval` bytes passed since the last."""
        if position - self._last_indexed >= interval or not self.offset_index:
            self.offset_index.add(first_offset, position)
            self.time_index.add(timestamp, first_offset)
            self._last_indexed = position
        if self.first_timestamp < 0:
            self.first_timestamp = timestamp
        self.max_timestamp = max(self.max_timestamp, timestamp)
        self.last_epoch = epoch
        self.next_offset = first_offset + count
        self.size = end

    def forget_from(self, position: int, next_offset: int) -> None:
        """Account for the file having been cut at byte `position`, where offset `next_offset` was.

        Drops the index entries at or past the cut and takes the timestamps and epoch of the
        last block kept (one read from the index point before it).
        """
        keep = bisect.bisect_left(self.offset_index.values, position)
        for index in (self.offset_index, self.time_index):
            del index.keys[keep:]
            del index.values[keep:]
        self._last_indexed = self.offset_index.values[-1] if self.offset_index else -(1 << 62)
        self.size = position
        self.next_offset = next_offset
        self.first_timestamp = self.time_index.keys[0] if self.time_index else -1
        self.max_timestamp = -1
        self.last_epoch = 0
        last = self.last_block()
        if last is not None:
            _, self.last_epoch, self.max_timestamp = body_prefix(last[0].body)

    def last_block(self) -> tuple[RawBlock, int] | None:
        """(the last block, offset of its first entry), or None if the segment is empty."""
        if self.is_empty:
            return None
        found = None
        for block in self._blocks_from(self.next_offset - 1, self.size):
            found = block
        return found

    def iter_blocks(self, start: int, end: int) -> Iterator[RawBlock]:
        """Verified blocks from byte `start` up to byte `end`; raises ScanProblem at a bad one.

        Reads in chunks of about a MiB. A block that claims to be larger than what is loaded
        has its sync marker checked (one small read) before its bytes are loaded, so a damaged
        size never makes the scan load more than the largest real block.
        """
        sync = self.header.sync
        fd = os.open(self.path, os.O_RDONLY)
        try:
            buf = b""
            base = start
            pos = start
            while pos < end:
                try:
                    block = read_block(buf, pos - base, sync, base)
                except TruncatedBlock as exc:
                    loaded_to = base + len(buf)
                    needed = None if exc.needed is None else base + exc.needed
                    if needed is not None and needed > end:
                        raise ScanProblem(
                            pos,
                            f"incomplete block: it claims to end at byte {needed}, past the "
                            f"end of the data at byte {end}",
                            truncated=True,
                        ) from None
                    if loaded_to >= end:
                        raise ScanProblem(pos, f"incomplete {exc}", truncated=True) from None
                    if (
                        needed is not None
                        and needed - loaded_to > _READ_CHUNK
                        and os.pread(fd, SYNC_SIZE, needed - SYNC_SIZE) != sync
                    ):
                        raise ScanProblem(
                            pos, "sync marker does not match the header's", truncated=False
                        ) from None
                    want = max(_READ_CHUNK, (needed or 0) - loaded_to)
                    more = os.pread(fd, min(want, end - loaded_to), loaded_to)
                    if not more:
                        raise ScanProblem(pos, f"incomplete {exc}", truncated=True) from None
                    buf = buf[pos - base :] + more
                    base = pos
                    continue
                except BlockDamage as exc:
                    raise ScanProblem(pos, str(exc), truncated=False) from None
                yield block
                pos = block.end
        finally:
            os.close(fd)

    def recover_scan(self, file_size: int, interval: int, codec: RecordCodec) -> ScanProblem | None:
        """Scan all blocks, noting each verified one; returns the problem that stopped the scan.

        The CRC covers a block's entries but not its entry count, so each count is checked
        against the next block's first offset, and the last block is decoded in full.
        """
        # block, first offset, epoch, timestamp
        pending: tuple[RawBlock, int, int, int] | None = None
        stop: ScanProblem | None = None
        try:
            for block in self.iter_blocks(self.header.size, file_size):
                try:
                    offset, epoch, timestamp = body_prefix(block.body)
                except (IndexError, ValueError):
                    return ScanProblem(
                        block.position,
                        "the block's first entry does not start with an offset",
                        truncated=False,
                        certain_damage=True,
                        first_offset=self.next_offset if pending is None else None,
                    )
                if pending is not None:
                    previous, first, _, _ = pending
                    if first + previous.count != offset:
                        return ScanProblem(
                            previous.position,
                            f"block claims {previous.count} entries from offset {first}, but the "
                            f"next block starts at offset {offset}",
                            truncated=False,
                            certain_damage=True,
                            first_offset=first,
                        )
                    self._note(pending, interval)
                elif offset != self.next_offset:
                    return ScanProblem(
                        block.position,
                        f"block starts at offset {offset}, expected {self.next_offset}",
                        truncated=False,
                        certain_damage=True,
                        first_offset=self.next_offset,
                    )
                pending = (block, offset, epoch, timestamp)
        except ScanProblem as problem:
            stop = problem
        if pending is not None:
            block, first, _, _ = pending
            try:
                self.decode(codec, block, self.array_schema(codec), first)
            except LogCorruptionError as exc:
                # A whole block whose CRC holds was written completely: not a torn write.
                return ScanProblem(
                    block.position,
                    exc.reason,
                    truncated=False,
                    certain_damage=True,
                    first_offset=first,
                )
            self._note(pending, interval)
        if stop is not None:
            stop.first_offset = self.next_offset
        return stop

    def _note(self, pending: tuple[RawBlock, int, int, int], interval: int) -> None:
        block, first, epoch, timestamp = pending
        self.note_block(
            position=block.position,
            end=block.end,
            first_offset=first,
            count=block.count,
            epoch=epoch,
            timestamp=timestamp,
            interval=interval,
        )

    def _blocks_from(self, start_offset: int, end: int) -> Iterator[tuple[RawBlock, int]]:
        """(verified block, its first offset) from the indexed block holding `start_offset`."""
        found = self.offset_index.floor_entry(start_offset)
        expected, position = found if found else (self.base_offset, self.header.size)
        try:
            for block in self.iter_blocks(position, end):
                if expected + block.count > start_offset:
                    yield block, expected
                expected += block.count
        except ScanProblem as problem:
            raise LogCorruptionError(
                self.path, problem.position, problem.reason, first_offset=expected
            ) from None

    def entries(
        self, codec: RecordCodec, start_offset: int, end: int | None = None
    ) -> Iterator[LogEntry]:
        """Entries with offset >= `start_offset`, from the indexed block at or before it."""
        array_schema = self.array_schema(codec)
        for block, expected in self._blocks_from(start_offset, self.size if end is None else end):
            try:
                batch = codec.decode_entries(block.count, block.body, array_schema)
            except MemoryError:
                raise
            except Exception as exc:
                raise LogCorruptionError(
                    self.path, block.position, decoder_failure(exc), first_offset=expected
                ) from None
            self._check_offsets(block, expected, batch[0].offset, batch[-1].offset)
            if batch[0].offset < start_offset:
                batch = batch[start_offset - batch[0].offset :]
            yield from batch

    def blocks_with_offsets(
        self, start_offset: int, end: int | None = None
    ) -> Iterator[tuple[RawBlock, int]]:
        """(verified block, offset of its first entry) from the block holding `start_offset`."""
        return self._blocks_from(start_offset, self.size if end is None else end)

    def raw_blocks(self, start_offset: int, end: int | None = None) -> Iterator[RawBlock]:
        """The verified, still undecoded blocks from the one holding `start_offset`."""
        for block, _ in self._blocks_from(start_offset, self.size if end is None else end):
            yield block

    def record_blocks(
        self, codec: RecordCodec, start_offset: int, end: int | None = None
    ) -> Iterator[RecordBlock]:
        """The records of each block from the one holding `start_offset` (the first trimmed)."""
        array_schema = self.array_schema(codec)
        for block, expected in self._blocks_from(start_offset, self.size if end is None else end):
            yield self.decode(codec, block, array_schema, expected)

    def decode(
        self, codec: RecordCodec, block: RawBlock, array_schema: Any, expected: int
    ) -> RecordBlock:
        """Decode and check one block (records, dense offsets from `expected`).

        Whatever the decoder raises on damaged data becomes a `LogCorruptionError`; only a
        `MemoryError` passes (the bounds checked before decoding make it a real shortage).
        """
        try:
            decoded = codec.decode_block(block.count, block.body, array_schema)
        except MemoryError:
            raise
        except Exception as exc:
            raise LogCorruptionError(
                self.path, block.position, decoder_failure(exc), first_offset=expected
            ) from None
        self._check_offsets(block, expected, decoded.first_offset, decoded.offsets[-1])
        return decoded

    def _check_offsets(self, block: RawBlock, expected: int, first: int, last: int) -> None:
        if first != expected or last != expected + block.count - 1:
            raise LogCorruptionError(
                self.path,
                block.position,
                f"block holds offsets {first}..{last}, expected from {expected}",
                first_offset=expected,
            )

    def save_indexes(self) -> None:
        """Persist both indexes, stamped with the size they cover."""
        footer = IndexFooter(self.size, self.next_offset, self.max_timestamp)
        self.offset_index.save(self.index_path, OFFSET_MAGIC, footer)
        self.time_index.save(self.time_index_path, TIME_MAGIC, footer)

    def load_indexes(self, file_size: int) -> bool:
        """Adopt persisted indexes if both are intact and cover exactly `file_size` bytes."""
        loaded = SparseIndex.load(self.index_path, OFFSET_MAGIC)
        loaded_time = SparseIndex.load(self.time_index_path, TIME_MAGIC)
        if loaded is None or loaded_time is None:
            return False
        (offsets, footer), (times, time_footer) = loaded, loaded_time
        if footer != time_footer or footer.covered_bytes != file_size:
            return False
        if footer.next_offset < self.base_offset or len(offsets) != len(times):
            return False
        if offsets and (
            offsets.keys[0] != self.base_offset or offsets.values[0] < self.header.size
        ):
            return False
        if offsets.values != sorted(offsets.values) or (
            offsets and offsets.values[-1] >= file_size
        ):
            return False
        self.offset_index, self.time_index = offsets, times
        self.size = file_size
        self.next_offset = footer.next_offset
        self.max_timestamp = footer.max_timestamp
        self.first_timestamp = times.keys[0] if times else -1
        return True
