"""Leader epochs on disk: the single-node writer's incarnation epoch and the quorum's epoch cache.

Single-node mode keeps one number, `leader-epoch`: each writer incarnation takes the next epoch.
Quorum mode keeps Kafka's `leader-epoch-checkpoint`: the (epoch, start offset) of every epoch
that has entries in the log, in Kafka's text format:

```
0            (format version)
2            (number of lines that follow)
1 0          (epoch, offset of its first entry)
3 120
```
"""

from __future__ import annotations

import errno
from pathlib import Path

from metadata_log.container import replace_file
from metadata_log.errors import LogError

EPOCH_NAME = "leader-epoch"
EPOCH_CHECKPOINT_NAME = "leader-epoch-checkpoint"
_CHECKPOINT_VERSION = "0"
_MAX_CHECKPOINT_BYTES = 64 << 20
"""No cache of real epochs comes near this (a line is at most 31 bytes)."""


def read_epoch(directory: Path) -> int:
    """The last persisted leader epoch, or 0 if none was ever persisted."""
    path = directory / EPOCH_NAME
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return 0
    if not text.isdigit():
        raise LogError(
            f"{path} should hold a non-negative integer, found {text[:40]!r}; restore it or write "
            "the highest epoch shown by `mlog log dump` into it"
        )
    return int(text)


def bump_epoch(directory: Path, at_least: int = 0) -> int:
    """Persist and return the next epoch (above both the stored one and `at_least`)."""
    epoch = max(read_epoch(directory), at_least) + 1
    if epoch >= 2**31:
        raise LogError(f"leader epoch would overflow the int32 entry field ({epoch})")
    path = directory / EPOCH_NAME
    try:
        replace_file(path, f"{epoch}\n".encode())
    except OSError as exc:
        # Opening a log on a full or failing disk: one line naming the file, not a traceback.
        name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
        raise LogError(
            f"cannot write the leader epoch to {path}: {exc.strerror or exc} [{name}]; "
            "free space or fix the disk, then open the log again"
        ) from exc
    return epoch


class EpochCheckpointDamage(Exception):
    """The `leader-epoch-checkpoint` file cannot be parsed; the message says why."""


def encode_epoch_checkpoint(epochs: list[tuple[int, int]]) -> bytes:
    """The file's bytes for `epochs` [(epoch, start offset)]: Kafka's text format."""
    lines = [_CHECKPOINT_VERSION, str(len(epochs)), *(f"{e} {o}" for e, o in epochs)]
    return ("\n".join(lines) + "\n").encode()


def decode_epoch_checkpoint(data: bytes) -> list[tuple[int, int]]:
    """Parse the file's bytes; EpochCheckpointDamage if not the format or not increasing."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise EpochCheckpointDamage("it is not ASCII text") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != _CHECKPOINT_VERSION:
        first = lines[0][:40] if lines else ""
        raise EpochCheckpointDamage(f"its version line is {first!r}, not {_CHECKPOINT_VERSION!r}")
    if len(lines) < 2 or not _is_number(lines[1]):
        raise EpochCheckpointDamage("its second line is not a count")
    count = int(lines[1])
    if count != len(lines) - 2:
        raise EpochCheckpointDamage(f"it announces {count} lines but holds {len(lines) - 2}")
    epochs: list[tuple[int, int]] = []
    for line in lines[2:]:
        epoch, sep, offset = line.partition(" ")
        if not sep or not _is_number(epoch) or not _is_number(offset):
            raise EpochCheckpointDamage(f"it has a line {line[:60]!r}, not 'epoch offset'")
        pair = (int(epoch), int(offset))
        if epochs and (pair[0] <= epochs[-1][0] or pair[1] <= epochs[-1][1]):
            raise EpochCheckpointDamage(
                f"its epochs or offsets do not increase ({epochs[-1]} then {pair})"
            )
        epochs.append(pair)
    return epochs


def _is_number(text: str) -> bool:
    """True for a non-negative decimal of at most 19 digits (it fits an int64)."""
    return 0 < len(text) <= 19 and text.isdigit()


def read_epoch_checkpoint(directory: Path) -> list[tuple[int, int]] | None:
    """The epoch cache stored in `directory`, None if there is no file.

    Raises EpochCheckpointDamage if the file cannot be parsed (the log then rebuilds it).
    """
    path = directory / EPOCH_CHECKPOINT_NAME
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_CHECKPOINT_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(data) > _MAX_CHECKPOINT_BYTES:
        raise EpochCheckpointDamage(f"it is larger than {_MAX_CHECKPOINT_BYTES} bytes")
    return decode_epoch_checkpoint(data)


def write_epoch_checkpoint(directory: Path, epochs: list[tuple[int, int]]) -> None:
    """Replace `leader-epoch-checkpoint` atomically and durably (raises OSError as it fails)."""
    replace_file(directory / EPOCH_CHECKPOINT_NAME, encode_epoch_checkpoint(epochs))
