"""`log-start-snapshot`: which snapshot a quorum node's log starts from, after an install.

A follower that installed a snapshot from its leader (FetchSnapshot) has a log that starts,
empty, just after the snapshot's offset: the entry the snapshot was taken at is not in it, so
the snapshot cannot be checked against the log as other snapshots are (same offset, epoch and
timestamp). This small file beside the checkpoints names it instead:

```
mlog-log-start-snapshot 1
offset 1234
epoch 7
timestamp 1700000000000
checksum 3f2a...
crc32 0a1b2c3d
```

A leader that keeps the hash chain sends its chain's state at the snapshot's offset with the
snapshot; the file is then version 2, with two more lines before the CRC: `chain_origin N`
(the offset the leader's chain started at) and `chain <64 hex digits>` (its value after the
snapshot's offset). The new log's first chain file starts from that value, so the node's chain
values, and its digests, are the leader's from the new start on.

It is written (temporary file, fsync, rename, directory fsync) BEFORE the log is reset, so it
is also the reset's intent: a log whose checkpoints start below `offset + 1` while the file
exists is a reset a crash interrupted, and the next writer finishes it. Later trims may move the
start past it; it then names an older snapshot and is not used.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

from metadata_log.container import replace_file

START_SNAPSHOT_NAME = "log-start-snapshot"
_MAGIC = "mlog-log-start-snapshot 1"
_MAGIC_CHAINED = "mlog-log-start-snapshot 2"
_INTS = ("offset", "epoch", "timestamp")
_CHAIN_KEYS = ("chain_origin", "chain")
_MAX_BYTES = 4096


class StartSnapshotDamage(Exception):
    """The file exists but cannot be trusted; the message says why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CarriedChain:
    """The hash chain's state after a snapshot's offset, as the node that served it held it."""

    origin: int
    """The offset the chain started at (from 32 zero bytes)."""
    value: bytes
    """The chain value after the snapshot's offset (32 bytes)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StartSnapshot:
    """The snapshot a log starts from: its last entry's offset, epoch and timestamp."""

    offset: int
    epoch: int
    timestamp: int
    checksum: str
    """The snapshot's content checksum (the SQL store's)."""
    chain: CarriedChain | None = None
    """The leader's chain state at `offset`, when it kept the chain: the new log's carried start."""

    def encode(self) -> bytes:
        """The file's bytes: the fields, one a line, and a CRC32 of those lines."""
        lines = [
            _MAGIC if self.chain is None else _MAGIC_CHAINED,
            *(f"{name} {getattr(self, name)}" for name in (*_INTS, "checksum")),
        ]
        if self.chain is not None:
            lines += [f"chain_origin {self.chain.origin}", f"chain {self.chain.value.hex()}"]
        text = "\n".join(lines) + "\n"
        return f"{text}crc32 {zlib.crc32(text.encode()):08x}\n".encode()

    @classmethod
    def decode(cls, data: bytes) -> StartSnapshot:
        """Parse the file's bytes; raises StartSnapshotDamage if they are not valid."""
        text = data.decode("ascii", "replace")
        body, sep, last = text.rstrip("\n").rpartition("\n")
        if not sep or not last.startswith("crc32 "):
            raise StartSnapshotDamage("it has no crc32 line")
        if f"{zlib.crc32((body + chr(10)).encode()):08x}" != last.removeprefix("crc32 "):
            raise StartSnapshotDamage("its CRC32 does not match its lines")
        lines = body.split("\n")
        if lines[0] not in (_MAGIC, _MAGIC_CHAINED):
            raise StartSnapshotDamage(f"its first line is {lines[0][:40]!r}, not {_MAGIC!r}")
        chained = lines[0] == _MAGIC_CHAINED
        keys = (*_INTS, "checksum", *(_CHAIN_KEYS if chained else ()))
        values: dict[str, str] = dict(line.partition(" ")[::2] for line in lines[1:])
        if set(values) != set(keys) or not all(values[k].isdigit() for k in _INTS):
            raise StartSnapshotDamage(f"its lines are not {', '.join(keys)}")
        chain = None
        if chained:
            origin, value = values["chain_origin"], values["chain"]
            if not origin.isdigit() or not _is_hash(value):
                raise StartSnapshotDamage("its chain lines are not an offset and 64 hex digits")
            chain = CarriedChain(origin=int(origin), value=bytes.fromhex(value))
        return cls(
            offset=int(values["offset"]),
            epoch=int(values["epoch"]),
            timestamp=int(values["timestamp"]),
            checksum=values["checksum"],
            chain=chain,
        )


def _is_hash(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def read_start_snapshot(directory: Path) -> StartSnapshot | None:
    """The log's start snapshot, None without the file; StartSnapshotDamage if damaged."""
    try:
        with open(directory / START_SNAPSHOT_NAME, "rb") as f:
            data = f.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(data) > _MAX_BYTES:
        raise StartSnapshotDamage(f"it is larger than {_MAX_BYTES} bytes")
    return StartSnapshot.decode(data)


def write_start_snapshot(directory: Path, snapshot: StartSnapshot) -> None:
    """Replace the file atomically and durably (its rename too: it is the reset's intent)."""
    replace_file(directory / START_SNAPSHOT_NAME, snapshot.encode(), sync_directory=True)
