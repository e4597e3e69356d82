"""A command that fails leaves nothing it created: the data directory (or file) it made goes.

`mlog log import` of a missing file, a server whose listener cannot bind, a snapshot database
whose tables cannot be made: each creates its directory (or file) on the way, and a failure
used to leave it behind, half made, where the next command takes it for a real one. Only what
did not exist when the command started is removed, never data that was there before, and never
once the command says it must stay (a server that served: its log holds acknowledged writes).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path


def _first_missing(path: Path) -> Path | None:
    """The outermost of `path` and its parents that does not exist (None: `path` exists)."""
    if path.exists():
        return None
    top = path
    for parent in path.parents:
        if parent.exists():
            break
        top = parent
    return top


@contextlib.contextmanager
def removed_on_failure(path: Path) -> Iterator[Callable[[], None]]:
    """Remove `path` and the parents made for it if the block fails and `path` was new.

    Yields `keep`: once called, what is at `path` stays, whatever follows. A failure is any
    exception, a Ctrl-C (KeyboardInterrupt) included.
    """
    top = _first_missing(path)
    kept: list[bool] = []
    try:
        yield lambda: kept.append(True)
    except BaseException:
        if top is not None and not kept:
            if top.is_dir() and not top.is_symlink():
                shutil.rmtree(top, ignore_errors=True)
            else:
                top.unlink(missing_ok=True)
        raise
