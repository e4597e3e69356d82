"""The core's entries in a FetchResponse's `records` bytes: our own framing, checksummed.

Not Kafka record batches: the payloads are opaque here, and a frame that is truncated,
damaged or claims more than it holds is refused with one line (`RaftWireError`).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from itertools import repeat

from api.protocol.quorum.errors import RaftWireError
from api.protocol.quorum.messages import Entry, EntryKind

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1

ENTRIES_MAGIC = b"mlqe"
"""The first bytes of `FetchResponse.records` holding core entries (metadata-log quorum entries)."""
ENTRIES_VERSION = 1

_ENTRIES_HEADER = struct.Struct(">4sBII")  # magic, version, count, crc32 of what follows
_ENTRY_HEAD = struct.Struct(">qiBI")  # offset, epoch, flags, payload length
_CONTROL = 0x01


def encode_entries(entries: Sequence[Entry]) -> bytes:
    """The `records` bytes of a FetchResponse holding the batches `entries` (b"" for none).

    Layout, version 1: `mlqe`, version (int8), count (uint32), CRC-32 of the rest (uint32),
    then per offset: offset (int64), epoch (int32), flags (int8, 1 = control), payload length
    (uint32), payload. A batch of `count` offsets is its body at its first offset followed by
    `count - 1` empty ones of its epoch (the frame predates batch-aware entries and stays
    byte for byte the same). Offsets must be dense and epochs must not go down (a Fetch
    answer is a stretch of the leader's log); `RaftWireError` otherwise.
    """
    if not entries:
        return b""
    parts: list[bytes] = []
    previous: Entry | None = None
    total = 0
    for entry in entries:
        _check_entry(entry, previous, "cannot send entries")
        control = _CONTROL if entry.kind is EntryKind.LEADER_CHANGE else 0
        parts.append(_ENTRY_HEAD.pack(entry.offset, entry.epoch, control, len(entry.payload)))
        parts.append(entry.payload)
        if entry.count > 1:
            parts.append(_empty_heads(entry.offset + 1, entry.count - 1, entry.epoch))
        total += entry.count
        previous = entry
    body = b"".join(parts)
    header = _ENTRIES_HEADER.pack(
        ENTRIES_MAGIC, ENTRIES_VERSION, total, zlib.crc32(body) & 0xFFFFFFFF
    )
    return header + body


def _check_entry(entry: Entry, previous: Entry | None, what: str) -> None:
    if not 0 <= entry.offset <= _INT64_MAX or not 0 <= entry.epoch <= _INT32_MAX or entry.count < 1:
        raise RaftWireError(
            f"{what}: entry at offset {entry.offset}, epoch {entry.epoch} is out of range"
        )
    if previous is not None:
        if entry.offset != previous.end_offset:
            raise RaftWireError(
                f"{what}: offset {entry.offset} follows {previous.end_offset - 1} (entries must "
                "be dense)"
            )
        if entry.epoch < previous.epoch:
            raise RaftWireError(
                f"{what}: epoch {entry.epoch} at offset {entry.offset} follows epoch "
                f"{previous.epoch} (epochs never go down)"
            )


def decode_entries(data: bytes | None) -> tuple[Entry, ...]:
    """The batches of a FetchResponse's `records` bytes (None or empty: none).

    An empty, plain offset of the same epoch right after a data batch extends that batch
    (`encode_entries`' layout); any other offset starts a batch.

    `RaftWireError` (one line) for anything but a well-formed frame of `encode_entries`:
    another magic or version, a CRC mismatch, a count or a payload length beyond the bytes
    there are, bytes left over, unknown flags, offsets not dense or epochs going down.
    """
    if not data:
        return ()
    count = _entry_count(data)
    pos = _ENTRIES_HEADER.size
    size = len(data)
    entries: list[Entry] = []
    previous: Entry | None = None
    head = _ENTRY_HEAD.unpack_from
    head_size = _ENTRY_HEAD.size
    data_bytes = data  # slices of it (a bytes subclass too) are plain bytes
    index = 0
    while index < count:
        if size - pos < head_size:
            raise RaftWireError(f"fetch records: entry {index} of {count} is truncated")
        offset, epoch, flags, length = head(data_bytes, pos)
        pos += head_size
        if flags & ~_CONTROL:
            raise RaftWireError(f"fetch records: entry {index} has unknown flags {flags:#x}")
        end = pos + length
        if end > size:
            raise RaftWireError(
                f"fetch records: entry {index} claims {length} payload bytes, {size - pos} remain "
                "(truncated or damaged)"
            )
        payload = data_bytes[pos:end]
        pos = end
        index += 1
        kind = EntryKind.DATA
        batch = 1
        if flags == _CONTROL:
            kind = EntryKind.LEADER_CHANGE
        else:
            # The batch's empty offsets right after its body, taken as one run (the Python
            # loop cost ~0.6 µs an offset, a follower's largest share of a write).
            most = min(count - index, (size - pos) // head_size, _INT64_MAX - offset)
            if most:
                run = _empty_run(data_bytes, pos, offset + 1, epoch, most)
                pos += run * head_size
                index += run
                batch += run
        entry = Entry(offset=offset, epoch=epoch, payload=payload, count=batch, kind=kind)
        # The common case (the next offset, the same epoch) checked inline; the rest names it.
        if (
            previous is None
            or offset != previous.offset + previous.count
            or epoch < previous.epoch
            or epoch < 0
        ):
            _check_entry(entry, previous, "fetch records")
        entries.append(entry)
        previous = entry
    if pos != size:
        raise RaftWireError(f"fetch records: {size - pos} bytes after the last entry")
    return tuple(entries)


def _entry_count(data: bytes) -> int:
    """The entry count of a frame whose header, size and CRC-32 hold; `RaftWireError` else."""
    view = memoryview(data)
    size = len(view)
    if size < _ENTRIES_HEADER.size:
        raise RaftWireError(f"fetch records: {size} bytes are too short for the entries header")
    magic, version, count, crc = _ENTRIES_HEADER.unpack_from(view, 0)
    if magic != ENTRIES_MAGIC:
        raise RaftWireError(
            f"fetch records: they start {bytes(magic)!r}, not {ENTRIES_MAGIC!r} (not quorum "
            "entries of metadata-log)"
        )
    if version != ENTRIES_VERSION:
        raise RaftWireError(
            f"fetch records: entries version {version} is not {ENTRIES_VERSION}; upgrade this "
            "node to the leader's release"
        )
    pos = _ENTRIES_HEADER.size
    if count == 0 or count > (size - pos) // _ENTRY_HEAD.size:
        raise RaftWireError(
            f"fetch records: {count} entries claimed in {size - pos} bytes (truncated or damaged)"
        )
    if zlib.crc32(view[pos:]) & 0xFFFFFFFF != crc:
        raise RaftWireError("fetch records: CRC-32 mismatch (damaged in transit)")
    return int(count)


def _empty_heads(first: int, count: int, epoch: int) -> bytes:
    """The heads of a batch's `count` empty offsets from `first` (`encode_entries`' layout)."""
    offsets = range(first, first + count)
    zeros = repeat(0)  # flags and payload length
    return b"".join(map(_ENTRY_HEAD.pack, offsets, repeat(epoch), zeros, zeros))


def _empty_run(data: bytes, pos: int, first: int, epoch: int, most: int) -> int:
    """How many of the (at most `most`) heads at `pos` are empty offsets of the batch before.

    An empty offset extends the data batch before it when it is the next offset, of the same
    epoch, with no flags and no payload: exactly `_empty_heads`' bytes. The run is found by
    doubling (1, 2, 4, ... heads compared whole) and then halving, so its cost follows the
    run's length, not `most`: an answer of thousands of one-offset blocks (`most` large, every
    run empty) would otherwise build and compare `most` heads per block, quadratic in them.
    """
    size = _ENTRY_HEAD.size
    low, high = 0, 1  # the first `low` heads match; `high` is the next length to try
    expected = b""
    while True:
        high = min(high, most)
        if len(expected) < high * size:
            expected = _empty_heads(first, min(most, 2 * high), epoch)
        stop = high * size
        if data[pos : pos + stop] != expected[:stop]:
            break
        low = high
        if high == most:
            return most
        high *= 2
    while high - low > 1:
        middle = (low + high) // 2
        stop = middle * size
        if data[pos : pos + stop] == expected[:stop]:
            low = middle
        else:
            high = middle
    return low
