"""A snapshot being copied from the leader, and the framing of a snapshot's bytes.

The bytes are opaque to the core but for their framing: the last 4 are a big-endian CRC32 of
the rest, checked once the last chunk is in.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

from api.protocol.quorum.messages import SnapshotId


def snapshot_checksum_ok(data: bytes) -> bool:
    """Whether `data` ends with the big-endian CRC32 of what precedes it."""
    return len(data) >= 4 and zlib.crc32(data[:-4]).to_bytes(4, "big") == data[-4:]


def with_checksum(body: bytes) -> bytes:
    """`body` framed as a snapshot's bytes: followed by its big-endian CRC32."""
    return body + zlib.crc32(body).to_bytes(4, "big")


@dataclass(slots=True)
class SnapshotTransfer:
    """A snapshot being copied from `source`: the bytes so far and the request in flight."""

    snapshot_id: SnapshotId
    source: int
    data: bytearray = field(default_factory=bytearray)
    correlation: int = 0
    retry_at: int = 0
