"""Edits an attacker makes to a log's files: a block rewritten with valid CRCs and framing.

Written with fastavro and cramjam only (no project code decodes or encodes), as the issue
describes: the header bytes are kept, the block's body is re-encoded with one value changed,
snappy-compressed, given a fresh CRC32 and framed again.
"""

from __future__ import annotations

import io
import json
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cramjam
import fastavro


def _zigzag(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (n >> 1) ^ -(n & 1), pos


def rewrite_entries(path: Path, change: Callable[[dict[str, Any]], bool]) -> int:
    """Rewrite every block of the segment at `path` in which `change` alters an entry.

    `change` gets each decoded entry (a dict, mutable) and returns True if it changed it.
    Returns the number of entries changed. Headers and untouched blocks keep their bytes.
    """
    data = path.read_bytes()
    with open(path, "rb") as f:
        reader = fastavro.reader(f)
        schema = fastavro.parse_schema(reader.writer_schema)
        header_end = f.tell()
    sync = data[header_end - 16 : header_end]
    # fastavro's reader has read the first block already: find the header's end by its sync.
    pos = data.index(sync) + 16
    json.dumps(reader.writer_schema)  # the schema is plain JSON: nothing hidden
    out = [data[:pos]]
    changed = 0
    while pos < len(data):
        count, at = _read_long(data, pos)
        size, at = _read_long(data, at)
        compressed = data[at : at + size - 4]
        end = at + size + 16
        body = bytes(cramjam.snappy.decompress_raw(compressed))
        stream = io.BytesIO(body)
        entries: list[dict[str, Any]] = []
        for _ in range(count):
            entry = fastavro.schemaless_reader(stream, schema, None)
            assert isinstance(entry, dict)
            entries.append(entry)
        touched = len([entry for entry in entries if change(entry)])
        if touched:
            changed += touched
            new_body = io.BytesIO()
            for entry in entries:
                fastavro.schemaless_writer(new_body, schema, entry)
            raw = new_body.getvalue()
            packed = bytes(cramjam.snappy.compress_raw(raw))
            out.append(
                _zigzag(count)
                + _zigzag(len(packed) + 4)
                + packed
                + struct.pack(">I", zlib.crc32(raw))
                + sync
            )
        else:
            out.append(data[pos:end])
        pos = end
    path.write_bytes(b"".join(out))
    return changed


def rename_topic(old: str, new: str) -> Callable[[dict[str, Any]], bool]:
    """A `change` for `rewrite_entries`: the TopicRecord named `old` is named `new`."""

    def change(entry: dict[str, Any]) -> bool:
        record = entry["record"]
        value = record[1] if isinstance(record, tuple) else record
        if isinstance(value, dict) and value.get("name") == old and "topic_id" in value:
            value["name"] = new
            return True
        return False

    return change


_CHAINED = _zigzag(len(b"mlog.hash_chain")) + b"mlog.hash_chain" + _zigzag(1)
_CRC_KEY = _zigzag(len(b"mlog.header_crc32")) + b"mlog.header_crc32" + _zigzag(8)


def forget_chain(log_dir: Path) -> None:
    """Delete the log's chain files and say in every header that the segment had none.

    What an attacker does so that the next writer open hashes the (edited) blocks afresh, and
    what a log written before the chain looks like: each header's `mlog.hash_chain` "1" becomes
    "0" (same size, so positions and indexes hold) and its CRC32 is computed again.
    """
    for path in log_dir.glob("*.chain"):
        path.unlink()
    for path in sorted(log_dir.glob("*.avro")):
        data = bytearray(path.read_bytes())
        at = data.find(_CHAINED)
        if at < 0:
            continue
        data[at + len(_CHAINED)] = ord("0")
        crc_at = data.index(_CRC_KEY) + len(_CRC_KEY)
        header_end = crc_at + 8 + 1 + 16  # the CRC is the map's last entry, then 0 and sync
        data[crc_at : crc_at + 8] = b"00000000"
        data[crc_at : crc_at + 8] = f"{zlib.crc32(bytes(data[:header_end])):08x}".encode()
        path.write_bytes(bytes(data))
