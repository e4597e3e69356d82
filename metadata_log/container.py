"""The Avro object container file format, as the log writes and checks it.

A segment is a standard container file with the snappy codec: a header (magic, metadata map with
the writer's schema, a random 16-byte sync marker), then blocks. Each block is
`count (long) | size (long) | snappy(body) | crc32(body) (4 bytes, big-endian) | sync`.
fastavro reads these files but ignores the CRC; `read_block` checks everything.

Headers written by this code also carry, in the metadata map (so any Avro tool still reads the
file): the chain to the previous segment (`mlog.previous_last_offset`, `mlog.previous_sync`),
`mlog.hash_chain` ("1" when the writer kept the hash chain from the segment's birth, so its
`.chain` file must exist: metadata_log.chain) and `mlog.header_crc32`, a CRC32 of every
header byte (magic to sync marker, the CRC's own eight hex digits counted as "00000000").
Headers without the CRC (written before it existed) are accepted after their schema passes
`schema_check`.

Every length and count read here is checked against the bytes that are left before anything is
allocated: damaged data raises `BlockDamage`, never a `MemoryError` or an endless decode.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import cramjam

from metadata_log.private_files import FILE_MODE
from records.varint import encode_long, read_long

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
MAX_BLOCK_BODY = 1 << 30
MAX_HEADER_BYTES = 1 << 20
"""A header is read whole, in one buffer of at most this size (today's is about 9 KB)."""
MIN_BLOCK_BYTES = 1 + 1 + 1 + 4 + SYNC_SIZE
"""The smallest complete block: count, size, snappy preamble, CRC32 and sync marker."""
SNAPPY_MAX_RATIO = 22
"""No snappy element expands more than 64 bytes out of 3 (a 2-byte-offset copy), so a body
that claims more than 22 bytes per compressed byte is damaged, whatever its preamble says."""
_CRC = struct.Struct(">I")

BASE_OFFSET_KEY = "mlog.base_offset"
PREVIOUS_LAST_OFFSET_KEY = "mlog.previous_last_offset"
PREVIOUS_SYNC_KEY = "mlog.previous_sync"
HEADER_CRC_KEY = "mlog.header_crc32"
HASH_CHAIN_KEY = "mlog.hash_chain"
"""Present ("1") in the header of a segment created by a writer keeping the hash chain."""
_CRC_PLACEHOLDER = b"00000000"
_LEGACY_KEYS = frozenset((BASE_OFFSET_KEY,))
"""The only `mlog.` key a header without a CRC may hold: headers written before the CRC."""


class TruncatedBlock(Exception):
    """The buffer ends inside the block: more bytes are needed, or the tail is torn."""

    def __init__(self, what: str, needed: int | None = None) -> None:
        super().__init__(what)
        self.needed = needed
        """Buffer position the block claims to end at, when its framing could be read."""


class BlockDamage(Exception):
    """The block is damaged; the message says how."""


@dataclass(frozen=True, slots=True)
class Header:
    """What a segment's header says."""

    schema_json: str
    sync: bytes
    size: int
    metadata: dict[str, bytes]
    checksummed: bool = False
    """True if the header carries `mlog.header_crc32` (and it matched)."""

    @property
    def previous_last_offset(self) -> int | None:
        """The previous segment's last offset (-1: none), or None if the header predates it."""
        value = self.metadata.get(PREVIOUS_LAST_OFFSET_KEY)
        return None if value is None else int(value)

    @property
    def previous_sync(self) -> bytes | None:
        """The previous segment's sync marker (empty: none), or None if the header predates it."""
        value = self.metadata.get(PREVIOUS_SYNC_KEY)
        return None if value is None else bytes.fromhex(value.decode())

    @property
    def hash_chained(self) -> bool:
        """True if the segment was born with the hash chain: its `.chain` file must exist."""
        return self.metadata.get(HASH_CHAIN_KEY) == b"1"


@dataclass(frozen=True, slots=True)
class RawBlock:
    """One verified block: its place in the file and its uncompressed body."""

    position: int
    end: int
    count: int
    body: bytes


def _encode_bytes(value: bytes) -> bytes:
    return encode_long(len(value)) + value


def encode_header(schema_json: str, sync: bytes, extra: dict[str, bytes]) -> bytes:
    """A container-file header declaring `schema_json`, the snappy codec and `extra` metadata.

    The last metadata entry is `mlog.header_crc32`, the CRC32 of the whole header with its own
    value read as "00000000".
    """
    meta = {"avro.schema": schema_json.encode(), "avro.codec": b"snappy", **extra}
    meta[HEADER_CRC_KEY] = _CRC_PLACEHOLDER
    parts = [MAGIC, encode_long(len(meta))]
    for key, value in meta.items():
        parts.append(_encode_bytes(key.encode()))
        parts.append(_encode_bytes(value))
    parts.append(encode_long(0))
    parts.append(sync)
    header = b"".join(parts)
    crc_at = len(header) - SYNC_SIZE - 1 - len(_CRC_PLACEHOLDER)
    crc = f"{zlib.crc32(header):08x}".encode()
    return header[:crc_at] + crc + header[crc_at + len(_CRC_PLACEHOLDER) :]


def _read_length(buf: bytes | memoryview, pos: int, what: str) -> tuple[int, int]:
    """A length (long) at `pos`, checked to be >= 0 and to fit in what is left of `buf`."""
    try:
        value, pos = read_long(buf, pos)
    except IndexError:
        raise TruncatedBlock("header") from None
    except ValueError as exc:
        raise BlockDamage(f"bad header: {exc}") from None
    if value < 0:
        raise BlockDamage(f"negative {what} length {value} in the header")
    if value > len(buf) - pos:
        raise TruncatedBlock("header")
    return value, pos


def decode_header(buf: bytes | memoryview) -> Header:
    """Parse a header from the start of `buf`.

    Raises TruncatedBlock if `buf` ends inside the header, BlockDamage if it is not a valid header.
    """
    if len(buf) < len(MAGIC):
        raise TruncatedBlock("header")
    if buf[: len(MAGIC)] != MAGIC:
        raise BlockDamage("not an Avro container file (bad magic)")
    meta, pos, crc_at = _read_metadata(buf, len(MAGIC))
    if pos + SYNC_SIZE > len(buf):
        raise TruncatedBlock("header")
    size = pos + SYNC_SIZE
    checksummed = crc_at >= 0
    if checksummed:
        _check_header_crc(buf, size, crc_at, meta[HEADER_CRC_KEY])
    else:
        unexpected = sorted(k for k in meta if k.startswith("mlog.") and k not in _LEGACY_KEYS)
        if unexpected:
            # Headers that hold these keys are written with a CRC: one whose CRC entry is gone
            # (a damaged key or count) must not pass as an older header.
            raise BlockDamage(f"header holds {', '.join(unexpected)} but no {HEADER_CRC_KEY}")
    if meta.get("avro.codec", b"null") != b"snappy":
        raise BlockDamage(f"codec {meta.get('avro.codec')!r} is not snappy")
    try:
        schema_json = meta["avro.schema"].decode()
        json.loads(schema_json)
    except (KeyError, UnicodeDecodeError, ValueError, RecursionError):
        raise BlockDamage("header has no valid avro.schema") from None
    _check_chain_values(meta)
    return Header(
        schema_json=schema_json,
        sync=bytes(buf[pos:size]),
        size=size,
        metadata=meta,
        checksummed=checksummed,
    )


def _read_metadata(buf: bytes | memoryview, pos: int) -> tuple[dict[str, bytes], int, int]:
    """(metadata map, position after it, position of the CRC value or -1) from `buf[pos:]`."""
    meta: dict[str, bytes] = {}
    crc_at = -1
    while True:
        try:
            count, pos = read_long(buf, pos)
        except IndexError:
            raise TruncatedBlock("header") from None
        except ValueError as exc:
            raise BlockDamage(f"bad header: {exc}") from None
        if count == 0:
            return meta, pos, crc_at
        if count < 0:
            count = -count
            _, pos = _read_length(buf, pos, "map block")  # byte size of the map block, unused
        # Each entry takes at least two bytes (two lengths): a larger count is damage or a
        # buffer that ends early, and is never used to size anything.
        if count > (len(buf) - pos) // 2:
            raise TruncatedBlock("header")
        for _ in range(count):
            key_len, pos = _read_length(buf, pos, "key")
            key = bytes(buf[pos : pos + key_len]).decode("utf-8", "replace")
            pos += key_len
            value_len, pos = _read_length(buf, pos, "value")
            if key in meta:
                raise BlockDamage(f"header metadata key {key!r} appears twice")
            if key == HEADER_CRC_KEY:
                crc_at = pos
            meta[key] = bytes(buf[pos : pos + value_len])
            pos += value_len


def _check_header_crc(buf: bytes | memoryview, size: int, crc_at: int, stored: bytes) -> None:
    if len(stored) != len(_CRC_PLACEHOLDER):
        raise BlockDamage(f"{HEADER_CRC_KEY} is {len(stored)} bytes long, not 8")
    header = bytes(buf[:size])
    blank = header[:crc_at] + _CRC_PLACEHOLDER + header[crc_at + len(_CRC_PLACEHOLDER) :]
    # Compared as text: "0A" and "0a" are the same number but not the same bytes, and a
    # flipped case bit must not pass.
    if f"{zlib.crc32(blank):08x}".encode() != stored:
        raise BlockDamage("CRC32 of the header does not match its bytes")


def _check_chain_values(meta: dict[str, bytes]) -> None:
    """The chain keys, when present, must hold what the writer puts there."""
    for key in (BASE_OFFSET_KEY, PREVIOUS_LAST_OFFSET_KEY):
        value = meta.get(key)
        if value is not None and not value.lstrip(b"-").isdigit():
            raise BlockDamage(f"header {key} is not an integer ({value[:40]!r})")
    previous_sync = meta.get(PREVIOUS_SYNC_KEY)
    if previous_sync is not None:
        try:
            raw = bytes.fromhex(previous_sync.decode())
        except (UnicodeDecodeError, ValueError):
            raw = b"?"
        if len(raw) not in (0, SYNC_SIZE):
            raise BlockDamage(f"header {PREVIOUS_SYNC_KEY} is not a sync marker")


def encode_block(count: int, body: bytes) -> bytes:
    """Frame a block body: count, size, snappy-compressed body, CRC32 of the body.

    The segment's sync marker, which ends the block, is added by the writer once it knows which
    segment the block goes to.
    """
    compressed = bytes(cramjam.snappy.compress_raw(body))
    return b"".join(
        (
            encode_long(count),
            encode_long(len(compressed) + 4),
            compressed,
            _CRC.pack(zlib.crc32(body)),
        )
    )


def block_frame(buf: bytes | memoryview, pos: int) -> tuple[int, int, int]:
    """(count, data start, end) of the block at `buf[pos:]` from its count and size alone.

    `end` is one past the block's sync marker. Raises TruncatedBlock when `buf` ends inside the
    two numbers and BlockDamage when they are impossible.
    """
    try:
        count, at = read_long(buf, pos)
        size, at = read_long(buf, at)
    except IndexError:
        raise TruncatedBlock("block header") from None
    except ValueError as exc:
        raise BlockDamage(str(exc)) from None
    if count < 1:
        raise BlockDamage(f"block claims {count} entries")
    if size < 5 or size > MAX_BLOCK_BODY:
        raise BlockDamage(f"block claims {size} bytes")
    return count, at, at + size + SYNC_SIZE


def snappy_length(data: bytes | memoryview) -> int:
    """The uncompressed length a raw snappy buffer declares, checked before decompressing.

    Snappy allocates what the preamble declares before it looks at the data (and aborts the
    process if that fails), so a damaged preamble must be caught here.
    """
    length = 0
    for i in range(min(5, len(data))):
        byte = data[i]
        length |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            break
    else:
        raise BlockDamage("snappy data has no valid length preamble")
    if length > MAX_BLOCK_BODY or length > SNAPPY_MAX_RATIO * len(data):
        raise BlockDamage(
            f"snappy data of {len(data)} bytes claims to hold {length} bytes, which it cannot"
        )
    return length


def read_block(buf: bytes | memoryview, pos: int, sync: bytes, base: int = 0) -> RawBlock:
    """Read and verify the block at `buf[pos:]`; `base` is the file position of `buf[0]`.

    Raises TruncatedBlock when `buf` ends inside the block (its `needed` is where the block
    claims to end) and BlockDamage when the block is damaged: a bad count or size, a wrong sync
    marker, undecompressable data, a CRC mismatch, more entries than body bytes.
    """
    # The checks of block_frame and snappy_length, inlined: this runs for every block read.
    try:
        count, at = read_long(buf, pos)
        size, at = read_long(buf, at)
    except IndexError:
        raise TruncatedBlock("block header") from None
    except ValueError as exc:
        raise BlockDamage(str(exc)) from None
    if count < 1:
        raise BlockDamage(f"block claims {count} entries")
    if size < 5 or size > MAX_BLOCK_BODY:
        raise BlockDamage(f"block claims {size} bytes")
    end = at + size + SYNC_SIZE
    if end > len(buf):
        raise TruncatedBlock("block data", end)
    if buf[end - SYNC_SIZE : end] != sync:
        raise BlockDamage("sync marker does not match the header's")
    crc_at = end - SYNC_SIZE - 4
    compressed = bytes(buf[at:crc_at])
    first = compressed[0]
    if first < 0x80:
        length = first
    elif len(compressed) > 1 and compressed[1] < 0x80:
        length = (first & 0x7F) | (compressed[1] << 7)
    else:
        length = snappy_length(compressed)
    if length > SNAPPY_MAX_RATIO * len(compressed):
        snappy_length(compressed)  # raises, saying why
    if count > length:
        raise BlockDamage(f"block claims {count} entries in a body of {length} bytes")
    try:
        body = bytes(cramjam.snappy.decompress_raw(compressed))
    except Exception as exc:  # cramjam raises its own DecompressionError
        raise BlockDamage(f"snappy data does not decompress ({exc})") from None
    (expected,) = _CRC.unpack_from(buf, crc_at)
    if zlib.crc32(body) != expected:
        raise BlockDamage("CRC32 of the block does not match its data")
    return RawBlock(position=base + pos, end=base + end, count=count, body=body)


def body_prefix(body: bytes) -> tuple[int, int, int]:
    """(offset, epoch, timestamp) of the first entry of a block body, without decoding it.

    An entry starts `offset (long) | epoch (int) | timestamp (long)`; the writer stamps every
    entry of a block with the same epoch and timestamp.
    """
    offset, at = read_long(body, 0)
    epoch, at = read_long(body, at)
    timestamp, _ = read_long(body, at)
    return offset, epoch, timestamp


def write_all(fd: int, data: bytes) -> None:
    """Write all of `data` to `fd`, however many calls it takes; raises OSError otherwise.

    `os.write` may write less than asked (a full disk, a signal): the rest is written by the
    next call, and a call that writes nothing is an error, never a silent short file.
    """
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(28, "the write made no progress (is the disk full?)")
        view = view[written:]


def replace_file(path: Path, data: bytes, *, sync_directory: bool = True) -> None:
    """Replace `path` with `data` atomically: a temporary file beside it, fsynced, renamed.

    The rename is made durable by a directory fsync unless `sync_directory` is False (a
    file whose older version is still true may lose the rename, never its content). Raises
    `OSError` as the failing call does.
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync_directory:
        fsync_directory(path.parent)


def fsync_directory(path: str | os.PathLike[str]) -> None:
    """Make a created, renamed or removed directory entry durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
