"""The log's checkpoints: how far it starts and how far it is known to be durable.

Like Kafka's `log-start-offset-checkpoint` and `recovery-point-offset-checkpoint`, kept in one
small text file, `<log dir>/checkpoints`, with a CRC32 of its lines:

```
mlog-checkpoints 1
log_start_offset 0
recovery_point 1234
newest_segment 1200
crc32 0a1b2c3d
```

`recovery_point` is the end offset when the file was written: every entry below it was fsynced
and acknowledged, so a log that ends before it lost acknowledged entries. `newest_segment` is
the base offset of the newest segment then: a log whose newest segment starts before it lost
that segment, even an empty one. Writers write the file when they create the log, after
recovery of a log that had none, on every roll, periodically while appending and on a clean
close; it is replaced atomically (temporary file, fsync, rename). Readers read it before they
list the segments, so a segment created meanwhile is never "missing".
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

from metadata_log.container import replace_file

CHECKPOINT_NAME = "checkpoints"
_MAGIC = "mlog-checkpoints 1"
_FIELDS = ("log_start_offset", "recovery_point", "newest_segment")
_MAX_BYTES = 4096


class CheckpointDamage(Exception):
    """The checkpoint file exists but cannot be trusted; the message says why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """What the log knew about its own extent when the file was written."""

    log_start_offset: int
    """Offset of the first entry the log keeps (0 unless a repair or retention moved it)."""
    recovery_point: int
    """End offset then: every entry below it was durable and acknowledged."""
    newest_segment: int
    """Base offset of the newest segment then."""

    def encode(self) -> bytes:
        """The file's bytes: the fields, one a line, and a CRC32 of those lines."""
        lines = [_MAGIC, *(f"{name} {getattr(self, name)}" for name in _FIELDS)]
        text = "\n".join(lines) + "\n"
        return f"{text}crc32 {zlib.crc32(text.encode()):08x}\n".encode()

    @classmethod
    def decode(cls, data: bytes) -> Checkpoint:
        """Parse the file's bytes; raises CheckpointDamage if they are not a valid checkpoint."""
        text = data.decode("ascii", "replace")
        body, sep, last = text.rstrip("\n").rpartition("\n")
        if not sep or not last.startswith("crc32 "):
            raise CheckpointDamage("it has no crc32 line")
        try:
            stored = int(last.removeprefix("crc32 "), 16)
        except ValueError:
            raise CheckpointDamage("its crc32 line is not hexadecimal") from None
        if zlib.crc32((body + "\n").encode()) != stored:
            raise CheckpointDamage("its CRC32 does not match its lines")
        lines = body.split("\n")
        if lines[0] != _MAGIC:
            raise CheckpointDamage(f"its first line is {lines[0][:40]!r}, not {_MAGIC!r}")
        values: dict[str, int] = {}
        for line in lines[1:]:
            name, _, value = line.partition(" ")
            if name not in _FIELDS or name in values or not value.isdigit():
                raise CheckpointDamage(f"it has an unexpected line {line[:60]!r}")
            values[name] = int(value)
        if set(values) != set(_FIELDS):
            raise CheckpointDamage(f"it lacks {', '.join(sorted(set(_FIELDS) - set(values)))}")
        return cls(**values)


def checkpoint_path(directory: Path) -> Path:
    """Where the checkpoint file of the log in `directory` lives."""
    return directory / CHECKPOINT_NAME


def read_checkpoint(directory: Path) -> Checkpoint | None:
    """The checkpoint, None if there is no file; raises CheckpointDamage if it is damaged."""
    path = checkpoint_path(directory)
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(data) > _MAX_BYTES:
        raise CheckpointDamage(f"it is larger than {_MAX_BYTES} bytes")
    return Checkpoint.decode(data)


def write_checkpoint(
    directory: Path, checkpoint: Checkpoint, *, sync_directory: bool = False
) -> None:
    """Replace the checkpoint file atomically: its bytes are fsynced before the rename.

    The directory is fsynced only on request: a checkpoint is a lower bound, so a rename lost
    in a power cut leaves the previous, older one, which is still true. Its content must never
    be lost behind a durable rename, hence the file's fsync.
    """
    replace_file(checkpoint_path(directory), checkpoint.encode(), sync_directory=sync_directory)
