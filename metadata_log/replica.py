"""One stored log block as it travels between quorum nodes: `ReplicaBlock` and its byte form.

A block is the log's atomic batch: entries of one epoch, densely numbered, with one timestamp.
Its `body` is the uncompressed Avro block body exactly as a segment stores it (the entries in
the codec's entry schema), so a follower writes the very bytes the leader wrote.

The byte form is versioned and self-delimiting, all integers big-endian:

```
magic "MLRB" | version (1 byte, 0) | first_offset (int64) | count (uint32) | epoch (int32)
| timestamp (int64) | crc32 (uint32) | body length (uint32) | body
```

`decode` checks the framing and every field's range before it allocates anything; the CRC of
the body is checked by `ReplicaLog.write_blocks(check=True)`, which decodes the entries too.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from metadata_log.container import MAX_BLOCK_BODY
from metadata_log.errors import ReplicaBlockError
from records.fields import INT32_MAX

MAGIC = b"MLRB"
VERSION = 0
_HEAD = struct.Struct(">4sBqIiqII")
HEADER_SIZE = _HEAD.size
"""Bytes before the body: 37."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaBlock:
    """One whole stored block: entries `first_offset .. first_offset + count - 1` of one epoch."""

    first_offset: int
    """Offset of its first entry."""
    count: int
    """How many entries it holds (>= 1)."""
    epoch: int
    """The epoch of every entry (a block never mixes epochs)."""
    timestamp: int
    """The block's timestamp (ms since the Unix epoch), as stored in each of its entries."""
    body: bytes
    """The uncompressed Avro block body: the entries, in the codec's entry schema."""
    crc32: int
    """CRC32 of `body` (what the snappy codec stores with the block); checked on receipt."""

    @property
    def last_offset(self) -> int:
        """Offset of its last entry."""
        return self.first_offset + self.count - 1

    @property
    def end_offset(self) -> int:
        """One past its last entry: where the next block starts."""
        return self.first_offset + self.count

    def crc_ok(self) -> bool:
        """True if `crc32` is the CRC32 of `body`."""
        return zlib.crc32(self.body) == self.crc32

    def encode(self) -> bytes:
        """The versioned, self-delimiting byte form; ReplicaBlockError for a field out of range."""
        _check_fields(self.first_offset, self.count, self.epoch, self.timestamp, self.crc32)
        _check_length(self.count, len(self.body))
        head = _HEAD.pack(
            MAGIC,
            VERSION,
            self.first_offset,
            self.count,
            self.epoch,
            self.timestamp,
            self.crc32,
            len(self.body),
        )
        return head + self.body

    @classmethod
    def decode(cls, data: bytes) -> ReplicaBlock:
        """The one block `data` holds (nothing after it); ReplicaBlockError if malformed."""
        block, end = cls.decode_from(data, 0)
        if end != len(data):
            raise ReplicaBlockError(
                f"replica block holds {len(data) - end} bytes after its body; the sender "
                "framed it wrongly"
            )
        return block

    @classmethod
    def decode_from(cls, data: bytes | memoryview, position: int) -> tuple[ReplicaBlock, int]:
        """(the block at `data[position:]`, the position after it), for blocks laid end to end."""
        if len(data) - position < HEADER_SIZE:
            raise ReplicaBlockError(
                f"replica block is truncated: {len(data) - position} bytes, a header alone "
                f"takes {HEADER_SIZE}"
            )
        magic, version, first, count, epoch, timestamp, crc, length = _HEAD.unpack_from(
            data, position
        )
        if magic != MAGIC:
            raise ReplicaBlockError(f"not a replica block: it starts with {bytes(magic)!r}")
        if version != VERSION:
            raise ReplicaBlockError(
                f"replica block version {version} is not known here (this node reads "
                f"version {VERSION}); run the same version on every node"
            )
        _check_fields(first, count, epoch, timestamp, crc)
        _check_length(count, length)
        start = position + HEADER_SIZE
        if length > len(data) - start:
            raise ReplicaBlockError(
                f"replica block is truncated: its body claims {length} bytes, "
                f"{len(data) - start} follow"
            )
        body = bytes(data[start : start + length])
        block = cls(
            first_offset=first, count=count, epoch=epoch, timestamp=timestamp, body=body, crc32=crc
        )
        return block, start + length


def _check_fields(first: int, count: int, epoch: int, timestamp: int, crc: int) -> None:
    """Raise ReplicaBlockError unless every field is in its range."""
    if not 0 <= first < 1 << 63:
        raise ReplicaBlockError(f"replica block first offset {first} is not an offset")
    if not 1 <= count <= INT32_MAX:
        raise ReplicaBlockError(f"replica block claims {count} entries")
    if not 0 <= epoch <= INT32_MAX:
        raise ReplicaBlockError(f"replica block epoch {epoch} is not an int32 epoch")
    if not 0 <= timestamp < 1 << 63:
        raise ReplicaBlockError(f"replica block timestamp {timestamp} is not a time in ms")
    if not 0 <= crc <= 0xFFFFFFFF:
        raise ReplicaBlockError(f"replica block CRC32 {crc} is not a 32-bit value")


def _check_length(count: int, length: int) -> None:
    """Raise ReplicaBlockError unless a body of `length` bytes can hold `count` entries."""
    if length > MAX_BLOCK_BODY:
        raise ReplicaBlockError(
            f"replica block body of {length} bytes is larger than a block can be ({MAX_BLOCK_BODY})"
        )
    if count > length:
        raise ReplicaBlockError(f"replica block claims {count} entries in a body of {length} bytes")
