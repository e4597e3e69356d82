"""Modes of what the server writes under its data directory: 0600 files, 0700 directories.

The log, its indexes and checkpoints, `snapshots.db`, `quorum-state` and `meta.properties`
hold the SCRAM credentials and every ACL (issue #31, finding 7): only the server's user may
read them, whatever the umask. The modes are given when a file or directory is created
(the umask can only take bits away, never add them); existing ones are left as they are, and
`loose_paths` finds those a start warns about.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

FILE_MODE = 0o600
"""Mode of every file created under the data directory."""

DIR_MODE = 0o700
"""Mode of every directory created under (and for) the data directory."""

_LOOSE = stat.S_IRWXG | stat.S_IRWXO


def make_dirs(path: Path) -> None:
    """Create `path` and its missing parents, each with `DIR_MODE` (exist_ok)."""
    missing: list[Path] = []
    for candidate in (path, *path.parents):
        if candidate.is_dir():
            break
        missing.append(candidate)
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:
            if not directory.is_dir():
                raise


def create_private(path: Path, data: bytes) -> None:
    """Write `path` (created or truncated) with `data`; a created file gets `FILE_MODE`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def loose_paths(root: Path, *, limit: int = 5) -> list[Path]:
    """Up to `limit` files or directories under `root` (itself included) readable by others.

    Group or other permission bits of any kind count: a server warns once at start.
    """
    found: list[Path] = []
    if not root.exists():
        return found
    for path in (root, *sorted(root.rglob("*"))):
        try:
            mode = path.lstat().st_mode
        except OSError:
            continue
        if stat.S_ISLNK(mode) or not mode & _LOOSE:
            continue
        found.append(path)
        if len(found) >= limit:
            break
    return found
