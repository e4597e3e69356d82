"""Ctrl-C in `mlog`: one line and exit 130, never in the middle of a write, never after one.

`main` turns a `KeyboardInterrupt` into `mlog: interrupted` (exit 130, the shell's code for
SIGINT) in every command, a following one (`log dump --follow`) included;
`api.write_interrupts.writes_finish` holds an interrupt back while a command appends to the
log (or waits for a server's answer to a write), so an append is either written whole or not
at all. Once a write is answered the change stands: an interrupt then no longer ends the
command, which prints what it did and exits as it would have (`one_command` there), with a
line saying the Ctrl-C came too late; `wait_for_input` waits for a typed line so that a
Ctrl-C is never lost on the way (`typed_lines` reads a terminal's lines so).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import warnings
from typing import TextIO

EXIT_INTERRUPTED = 130
"""The exit code of a command ended by Ctrl-C (128 + SIGINT, as shells report it)."""

INTERRUPTED = "mlog: interrupted"
"""The one line a command ended by Ctrl-C prints on stderr."""

FINISHED_AFTER_WRITE = "mlog: Ctrl-C came after the change was answered: the command finished"
"""The line after a command's output when a Ctrl-C came once its write was answered (exit as
if none had come: the change stands, and a retry would find it made)."""

INTERRUPTED_AFTER_WRITE = "mlog: interrupted after the change was answered: the change stands"
"""The line of a command ended by a second Ctrl-C after its write was answered (exit 0)."""


def quiet_teardown() -> None:
    """Drop what finalizers raise or warn from now on: the command was interrupted and is over.

    A Ctrl-C can land inside a constructor: asyncio's `StreamWriter.__init__` cut before it
    set its transport, whose `__del__` then fails as the process exits, and Python prints
    "Exception ignored in ..." with a traceback under the one line `mlog: interrupted`. It can
    also land between a coroutine's creation and its first await: collected as the process
    exits, the coroutine warns "was never awaited" (and "Enable tracemalloc ...") there.
    """
    sys.unraisablehook = _ignore
    warnings.simplefilter("ignore")


def _ignore(_: object) -> None:
    return None


def wait_for_input(fd: int) -> None:
    """Block until `fd` (a terminal) has a line to read; Ctrl-C raises KeyboardInterrupt.

    A SIGINT that lands after Python's last look at its signals and before a blocking read()
    is only noted by the C handler: the read sleeps on until the next key, and the Ctrl-C
    seems lost. Here the handler also writes a byte to a wakeup pipe that select() watches,
    so the wait ends either way and the interrupt is raised at once. Outside the main thread
    (no signals there) it returns at once, and the read that follows does the waiting.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    wake_r, wake_w = os.pipe()
    try:
        os.set_blocking(wake_w, False)
        previous = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        try:
            select.select([fd, wake_r], [], [])
        finally:
            signal.set_wakeup_fd(previous)
    finally:
        os.close(wake_r)
        os.close(wake_w)


def typed_lines(stream: TextIO) -> list[str]:
    """The lines typed at a terminal until end of input; a Ctrl-C while waiting always ends it.

    A blocking read misses a SIGINT that lands just before it (`wait_for_input`): each line
    is waited for first, then read (a terminal hands over one line per read, so none waits
    in the stream's buffer).
    """
    lines: list[str] = []
    while True:
        wait_for_input(stream.fileno())
        line = stream.readline()
        if not line:
            return lines
        lines.append(line)
