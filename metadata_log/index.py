"""Sparse per-segment indexes: offset -> byte position (`.index`), time -> offset (`.timeindex`).

Each file is a magic, fixed-size entries `(key, value)` as two big-endian int64, and a footer
`(covered segment bytes, next offset, max timestamp, CRC32)`. An index is trusted only if its CRC
holds, its keys are sorted and it covers exactly the segment's current size; otherwise the
segment is scanned and the index rebuilt.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from metadata_log.container import replace_file

_ENTRY = struct.Struct(">qq")
_FOOTER = struct.Struct(">qqqI")
OFFSET_MAGIC = b"MLOGOIX1"
TIME_MAGIC = b"MLOGTIX1"


@dataclass(frozen=True, slots=True)
class IndexFooter:
    """What an index file says about the segment it covers."""

    covered_bytes: int
    next_offset: int
    max_timestamp: int


class SparseIndex:
    """Sorted (key, value) pairs with floor lookup; appended to as blocks are written."""

    __slots__ = ("keys", "values")

    def __init__(self) -> None:
        self.keys: list[int] = []
        self.values: list[int] = []

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, key: int, value: int) -> None:
        """Add an entry; keys must not decrease."""
        self.keys.append(key)
        self.values.append(value)

    def floor_entry(self, key: int) -> tuple[int, int] | None:
        """(key, value) of the last entry whose key is <= `key`, or None if there is none."""
        i = bisect.bisect_right(self.keys, key)
        return (self.keys[i - 1], self.values[i - 1]) if i else None

    def last_below(self, key: int) -> int | None:
        """Value of the last entry whose key is < `key`, or None if there is none."""
        i = bisect.bisect_left(self.keys, key)
        return self.values[i - 1] if i else None

    def save(self, path: Path, magic: bytes, footer: IndexFooter) -> None:
        """Write the index atomically (temporary file, fsync, rename, directory fsync)."""
        parts = [magic]
        parts.extend(_ENTRY.pack(k, v) for k, v in zip(self.keys, self.values, strict=True))
        payload = (
            b"".join(parts)
            + _FOOTER.pack(footer.covered_bytes, footer.next_offset, footer.max_timestamp, 0)[:-4]
        )
        data = payload + struct.pack(">I", zlib.crc32(payload))
        replace_file(path, data)

    @classmethod
    def load(cls, path: Path, magic: bytes) -> tuple[SparseIndex, IndexFooter] | None:
        """Read an index file; None if it is missing or damaged in any way."""
        try:
            data = path.read_bytes()
        except OSError:
            return None
        body_len = len(data) - len(magic) - _FOOTER.size
        if body_len < 0 or body_len % _ENTRY.size or not data.startswith(magic):
            return None
        (crc,) = struct.unpack_from(">I", data, len(data) - 4)
        if zlib.crc32(data[:-4]) != crc:
            return None
        index = cls()
        for key, value in _ENTRY.iter_unpack(data[len(magic) : len(magic) + body_len]):
            index.add(key, value)
        if index.keys != sorted(index.keys):
            return None
        covered, next_offset, max_ts, _ = _FOOTER.unpack_from(data, len(data) - _FOOTER.size)
        return index, IndexFooter(covered, next_offset, max_ts)
