"""Ctrl-C in `mlog`: one line and exit 130, and never in the middle of a write.

`main` turns a `KeyboardInterrupt` into `mlog: interrupted` (exit 130, the shell's code for
SIGINT); `writes_finish` holds an interrupt back while a command appends to the log, so an
append is either written whole or not at all, and the interrupt then ends the command.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

EXIT_INTERRUPTED = 130
"""The exit code of a command ended by Ctrl-C (128 + SIGINT, as shells report it)."""

INTERRUPTED = "mlog: interrupted"
"""The one line a command ended by Ctrl-C prints on stderr."""


@contextlib.contextmanager
def writes_finish() -> Iterator[None]:
    """Hold SIGINT back inside the block; one that came is raised when the block ends.

    Outside the main thread (where Python delivers signals) nothing needs holding back.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []

    def remember(signum: int, frame: FrameType | None) -> None:
        came.append(signum)

    previous = signal.signal(signal.SIGINT, remember)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if came:
        raise KeyboardInterrupt
