"""The hash chain over the log's blocks, kept beside each segment in `<base>.chain`.

Each block's chain value is SHA-256(previous value || first offset || count || body): the
previous block's value (32 zero bytes at the chain's origin), the block's first offset (8 bytes,
big-endian), its entry count (4 bytes, big-endian) and its uncompressed Avro body. Changing
any byte of an older block changes its value and every later one, so a block rewritten with
valid CRCs no longer matches the value stored when it was written (`verify` names it), and a
digest an auditor holds (`metadata_log.digest`) no longer matches the recomputed chain.

The values live in a sidecar file per segment, so the segments stay standard Avro container
files that any Avro tool reads, and a log written before the chain stays readable:

    header, 52 bytes: "mlogchn1" | origin (u64) | previous (32 bytes) | CRC32 of the 48 before
    record per block, 44 bytes: first offset (u64) | count (u32) | chain value (32 bytes)

`origin` is the offset of the block the chain started at (from 32 zero bytes); `previous` is the
value before the segment's first block: the previous segment's last value, or, for the log's
first segment after a trim, the state carried across the trimmed start. A writer appends one
record per block after the block's fsync, 64 records per write, without a fsync of its own;
the file is written and fsynced at each roll, checkpoint and close. A crash can leave the
newest segment's file short (the next writer open hashes the missing blocks) or long (records
past a torn tail are dropped); stored values are never rewritten.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from metadata_log.container import replace_file, write_all
from metadata_log.errors import LogCorruptionError
from metadata_log.private_files import FILE_MODE
from metadata_log.segment import Segment

CHAIN_SUFFIX = ".chain"
ZERO = bytes(32)
"""The value before the chain's first block."""
_MAGIC = b"mlogchn1"
_HEAD = struct.Struct(">8sQ32s")
_HEAD_CRC = struct.Struct(">I")
HEADER_SIZE = _HEAD.size + _HEAD_CRC.size
_RECORD = struct.Struct(">QI32s")
RECORD_SIZE = _RECORD.size
_PREFIX = struct.Struct(">QI")
WRITE_EVERY = 64
"""Records a writer keeps in memory before it writes them (one write instead of 64: the
newest blocks' records are recomputed from the blocks by whoever finds them missing)."""


def link(previous: bytes, first_offset: int, count: int, body: bytes) -> bytes:
    """The chain value of the block (`first_offset`, `count`, `body`) after `previous`."""
    digest = hashlib.sha256(previous)
    digest.update(_PREFIX.pack(first_offset, count))
    digest.update(body)
    return digest.digest()


def chain_path(segment_path: Path) -> Path:
    """The chain file beside the segment file `segment_path`."""
    return segment_path.with_suffix(CHAIN_SUFFIX)


class ChainDamage(Exception):
    """A chain file that cannot be read; the message says how."""


@dataclass(frozen=True, slots=True)
class ChainRecord:
    """The stored chain value of one block."""

    first_offset: int
    count: int
    value: bytes

    @property
    def end_offset(self) -> int:
        """One past the block's last offset."""
        return self.first_offset + self.count


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainFile:
    """What one chain file holds."""

    origin: int
    previous: bytes
    records: tuple[ChainRecord, ...]
    torn_bytes: int = 0
    """Bytes of a partial last record (a crash cut its write short), ignored."""

    @property
    def head(self) -> bytes:
        """The last stored value (`previous` when there is no record)."""
        return self.records[-1].value if self.records else self.previous


def encode_header(origin: int, previous: bytes) -> bytes:
    """A chain file's header."""
    head = _HEAD.pack(_MAGIC, origin, previous)
    return head + _HEAD_CRC.pack(zlib.crc32(head))


def encode_record(record: ChainRecord) -> bytes:
    """A chain file's record."""
    return _RECORD.pack(record.first_offset, record.count, record.value)


def decode_record(data: bytes) -> ChainRecord:
    """One record from its 44 bytes."""
    first, count, value = _RECORD.unpack(data)
    return ChainRecord(first, count, value)


def read_chain_file(path: Path) -> ChainFile | None:
    """The chain file at `path`, or None if there is none; raises ChainDamage if unreadable."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    return decode_chain_file(data)


def decode_chain_file(data: bytes) -> ChainFile:
    """Parse a chain file's bytes; raises ChainDamage for a bad header or records out of order."""
    if len(data) < HEADER_SIZE:
        raise ChainDamage(f"the chain file is {len(data)} bytes long, shorter than its header")
    magic, origin, previous = _HEAD.unpack_from(data)
    (crc,) = _HEAD_CRC.unpack_from(data, _HEAD.size)
    if magic != _MAGIC:
        raise ChainDamage("the chain file does not start with its magic bytes")
    if zlib.crc32(data[: _HEAD.size]) != crc:
        raise ChainDamage("CRC32 of the chain file's header does not match its bytes")
    whole = (len(data) - HEADER_SIZE) // RECORD_SIZE
    records = []
    expected: int | None = None
    for i in range(whole):
        first, count, value = _RECORD.unpack_from(data, HEADER_SIZE + i * RECORD_SIZE)
        if count < 1 or (expected is not None and first != expected):
            raise ChainDamage(
                f"record {i} of the chain file names offsets {first}..{first + count - 1}, "
                f"which do not follow the previous record"
            )
        records.append(ChainRecord(first, count, value))
        expected = first + count
    torn = len(data) - HEADER_SIZE - whole * RECORD_SIZE
    return ChainFile(origin=origin, previous=previous, records=tuple(records), torn_bytes=torn)


def write_chain_file(path: Path, chain: ChainFile) -> None:
    """Replace the chain file at `path` by `chain` (temporary file, fsync, rename)."""
    data = encode_header(chain.origin, chain.previous) + b"".join(
        encode_record(r) for r in chain.records
    )
    replace_file(path, data)


def hash_blocks(segment: Segment, previous: bytes, start_offset: int) -> Iterator[ChainRecord]:
    """Chain records of the segment's blocks from the one starting at `start_offset` on."""
    value = previous
    if start_offset >= segment.next_offset:
        return
    for block, first in segment.blocks_with_offsets(start_offset):
        value = link(value, first, block.count, block.body)
        yield ChainRecord(first, block.count, value)


def settle_segment(segment: Segment, previous: bytes, origin: int, *, newest: bool) -> ChainFile:
    """The segment's chain file, made to cover exactly its blocks; written if it changed.

    Stored values are never recomputed: records past the segment's end (a torn tail was cut,
    or a quorum log was truncated) are dropped, and blocks without a record are hashed from the
    last stored value. A missing file is created from `previous` and `origin`. A file whose
    records do not line up with the segment's blocks is left to `verify`, unless it is the
    newest segment's, which the writer must extend: it is then started over from the last
    record that lines up.
    """
    path = chain_path(segment.path)
    try:
        stored = read_chain_file(path)
    except ChainDamage:
        if not newest:
            return ChainFile(origin=origin, previous=previous, records=())
        stored = None
    if stored is None:
        chain = ChainFile(origin=origin, previous=previous, records=())
        changed = True
    else:
        chain = stored
        changed = stored.torn_bytes > 0
    records = list(chain.records)
    if records and records[0].first_offset != segment.base_offset:
        if not newest:
            return chain
        records, changed = [], True
    kept = [r for r in records if r.end_offset <= segment.next_offset]
    if len(kept) != len(records):
        records, changed = kept, True
    covered = records[-1].end_offset if records else segment.base_offset
    if covered < segment.next_offset:
        head = records[-1].value if records else chain.previous
        records.extend(hash_blocks(segment, head, covered))
        changed = True
    settled = ChainFile(origin=chain.origin, previous=chain.previous, records=tuple(records))
    if changed:
        write_chain_file(path, settled)
    return settled


def missing_chain_files(segments: Sequence[Segment]) -> list[Segment]:
    """The segments born with the hash chain (their header says so) whose chain file is gone.

    The newest segment is left out while it holds no block: a crash between its creation and
    its chain file's leaves it so, and nothing of the chain is lost (its writer creates it).
    """
    missing = []
    for i, segment in enumerate(segments):
        if not segment.header.hash_chained or chain_path(segment.path).exists():
            continue
        if i == len(segments) - 1 and segment.is_empty:
            continue
        missing.append(segment)
    return missing


def refuse_missing(missing: Sequence[Segment]) -> LogCorruptionError:
    """The error a writer open raises for chain files gone from segments born with the chain."""
    names = ", ".join(chain_path(s.path).name for s in missing)
    return LogCorruptionError(
        chain_path(missing[0].path),
        -1,
        f"{len(missing)} segment(s) were written with the hash chain, but their chain files "
        f"are missing ({names}); a writer does not build the chain again over blocks that may "
        "have been changed since. Check the log against a digest you kept (`mlog log verify "
        "--digest TOKEN`); if it MATCHES, `mlog log export --with-secrets` and `mlog log "
        "import` into a new data directory copy it with a new chain",
        first_offset=missing[0].base_offset,
        repairable=False,
    )


class ChainKeeper:
    """The writer's end of the chain: the newest segment's chain file, open for appending.

    Callers hold the log's write lock.
    """

    def __init__(self, segment: Segment, chain: ChainFile) -> None:
        self.segment = segment
        self.origin = chain.origin
        self.previous = chain.previous
        self.records: list[ChainRecord] = list(chain.records)
        """The newest segment's records (about 44 bytes per block), for digests."""
        self.fd: int | None = os.open(chain_path(segment.path), os.O_WRONLY | os.O_APPEND)
        self.dirty = False
        self._unwritten: list[bytes] = []

    @property
    def head(self) -> bytes:
        """The chain value of the last block written."""
        return self.records[-1].value if self.records else self.previous

    @classmethod
    def open(cls, segments: Sequence[Segment]) -> ChainKeeper:
        """Settle the chain files of `segments` (the log, oldest first) and keep the newest's.

        A log written before the chain gets its chain files here: its first segment's chain
        starts from 32 zero bytes at its first block. Sealed segments whose files already
        cover them are only read. A segment born with the chain whose file is gone is refused
        (`LogCorruptionError`): hashing its blocks again would vouch for whatever they hold now.
        """
        missing = missing_chain_files(segments)
        if missing:
            raise refuse_missing(missing)
        previous, origin = ZERO, segments[0].base_offset
        chain = ChainFile(origin=origin, previous=previous, records=())
        for i, segment in enumerate(segments):
            newest = i == len(segments) - 1
            if i == 0:
                try:
                    first = read_chain_file(chain_path(segment.path))
                except ChainDamage:
                    first = None
                if first is not None:
                    previous, origin = first.previous, first.origin
            chain = settle_segment(segment, previous, origin, newest=newest)
            previous, origin = chain.head, chain.origin
        return cls(segments[-1], chain)

    def append(self, first_offset: int, count: int, body: bytes) -> None:
        """Chain one block written at the end of the newest segment (no fsync)."""
        record = ChainRecord(first_offset, count, link(self.head, first_offset, count, body))
        self.records.append(record)
        self._unwritten.append(encode_record(record))
        self.dirty = True
        if len(self._unwritten) >= WRITE_EVERY:
            self.write()

    def write(self) -> None:
        """Write the records kept in memory to the file (no fsync)."""
        if self.fd is not None and self._unwritten:
            write_all(self.fd, b"".join(self._unwritten))
        self._unwritten = []

    def sync(self) -> None:
        """Make the records so far durable."""
        self.write()
        if self.fd is not None and self.dirty:
            os.fsync(self.fd)
        self.dirty = False

    def roll(self, segment: Segment) -> None:
        """Seal the current file (fsynced) and start `segment`'s, from the current head."""
        self.sync()
        head = self.head
        self.close()
        path = chain_path(segment.path)
        replace_file(path, encode_header(self.origin, head))
        self.segment = segment
        self.previous = head
        self.records = []
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND, FILE_MODE)

    def value_at(self, end_offset: int) -> bytes | None:
        """The stored value of the newest segment's block ending just before `end_offset`."""
        if end_offset == self.segment.base_offset:
            return self.previous
        for record in reversed(self.records):
            if record.end_offset == end_offset:
                return record.value
            if record.end_offset < end_offset:
                break
        return None

    def close(self, *, write: bool = True) -> None:
        """Write what is kept in memory (unless not `write`) and close the file.

        `sync` first for durability; records not written are hashed again by the next open.
        """
        try:
            if write:
                self.write()
        finally:
            self._unwritten = []
            self._close_fd()

    def _close_fd(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
