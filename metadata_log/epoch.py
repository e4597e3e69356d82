"""The persisted leader epoch: each writer incarnation takes the next epoch."""

from __future__ import annotations

import errno
from pathlib import Path

from metadata_log.container import replace_file
from metadata_log.errors import LogError

EPOCH_NAME = "leader-epoch"


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
