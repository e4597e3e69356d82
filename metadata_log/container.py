"""The Avro object container file format, as the log writes and checks it.

A segment is a standard container file with the snappy codec: a header (magic, metadata map with
the writer's schema, a random 16-byte sync marker), then blocks. Each block is
`count (long) | size (long) | snappy(body) | crc32(body) (4 bytes, big-endian) | sync`.
fastavro reads these files but ignores the CRC; `read_block` checks everything.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from dataclasses import dataclass

import cramjam

from records.varint import encode_long, read_long

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
MAX_BLOCK_BODY = 1 << 30
_CRC = struct.Struct(">I")


class TruncatedBlock(Exception):
    """The buffer ends inside the block: more bytes are needed, or the tail is torn."""


class BlockDamage(Exception):
    """The block is damaged; the message says how."""


@dataclass(frozen=True, slots=True)
class Header:
    """What a segment's header says."""

    schema_json: str
    sync: bytes
    size: int
    metadata: dict[str, bytes]


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
    """A container-file header declaring `schema_json`, the snappy codec and `extra` metadata."""
    meta = {"avro.schema": schema_json.encode(), "avro.codec": b"snappy", **extra}
    parts = [MAGIC, encode_long(len(meta))]
    for key, value in meta.items():
        parts.append(_encode_bytes(key.encode()))
        parts.append(_encode_bytes(value))
    parts.append(encode_long(0))
    parts.append(sync)
    return b"".join(parts)


def decode_header(buf: bytes) -> Header:
    """Parse a header from the start of `buf`.

    Raises TruncatedBlock if `buf` ends inside the header, BlockDamage if it is not a valid header.
    """
    if len(buf) < len(MAGIC):
        raise TruncatedBlock("header")
    if buf[: len(MAGIC)] != MAGIC:
        raise BlockDamage("not an Avro container file (bad magic)")
    pos = len(MAGIC)
    meta: dict[str, bytes] = {}
    try:
        while True:
            count, pos = read_long(buf, pos)
            if count == 0:
                break
            if count < 0:
                count = -count
                _, pos = read_long(buf, pos)  # byte size of the map block, unused
            for _ in range(count):
                key_len, pos = read_long(buf, pos)
                key = bytes(buf[pos : pos + key_len])
                pos += key_len
                value_len, pos = read_long(buf, pos)
                if key_len < 0 or value_len < 0:
                    raise BlockDamage("negative length in header")
                meta[key.decode("utf-8", "replace")] = bytes(buf[pos : pos + value_len])
                pos += value_len
                if pos > len(buf):
                    raise TruncatedBlock("header")
    except IndexError:
        raise TruncatedBlock("header") from None
    except ValueError as exc:
        raise BlockDamage(f"bad header: {exc}") from None
    if pos + SYNC_SIZE > len(buf):
        raise TruncatedBlock("header")
    if meta.get("avro.codec", b"null") != b"snappy":
        raise BlockDamage(f"codec {meta.get('avro.codec')!r} is not snappy")
    try:
        schema_json = meta["avro.schema"].decode()
        json.loads(schema_json)
    except (KeyError, UnicodeDecodeError, ValueError):
        raise BlockDamage("header has no valid avro.schema") from None
    return Header(
        schema_json=schema_json,
        sync=bytes(buf[pos : pos + SYNC_SIZE]),
        size=pos + SYNC_SIZE,
        metadata=meta,
    )


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


def read_block(buf: bytes | memoryview, pos: int, sync: bytes, base: int = 0) -> RawBlock:
    """Read and verify the block at `buf[pos:]`; `base` is the file position of `buf[0]`.

    Raises TruncatedBlock when `buf` ends inside the block and BlockDamage when the block is
    damaged: a bad count or size, a wrong sync marker, undecompressable data or a CRC mismatch.
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
    end = at + size + SYNC_SIZE
    if end > len(buf):
        raise TruncatedBlock("block data")
    if buf[end - SYNC_SIZE : end] != sync:
        raise BlockDamage("sync marker does not match the header's")
    crc_at = at + size - 4
    try:
        body = bytes(cramjam.snappy.decompress_raw(bytes(buf[at:crc_at])))
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


def fsync_directory(path: str | os.PathLike[str]) -> None:
    """Make a created, renamed or removed directory entry durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
