"""Ctrl-C (SIGINT) around writes: held while one runs, and powerless once it was answered.

An append to the log (or a server's answer to a write) is whole or not at all: SIGINT is held
back while it runs. Once it is answered, `mlog` (one command per process, `one_command`) lets
the command run to its end and print what it did, so a Ctrl-C that came late does not make a
committed change look failed. The Python API (no `one_command`) gets the Ctrl-C raised as the
write ends. A module of its own, light to import: `mlog` enters `one_command` in every command.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType


class CommandInterrupts:
    """Ctrl-C (SIGINT) in a command of `mlog`, which runs one command per process."""

    def __init__(self) -> None:
        self.active = False
        """Inside `one_command`: once a write is answered, the command runs to its end."""
        self.settled = False
        """A write of the command was answered (committed, or refused by the rules)."""
        self.noted = 0
        """Ctrl-Cs that came while a write ran or after it was answered."""


_COMMAND = CommandInterrupts()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def one_command() -> Iterator[CommandInterrupts]:
    """Run one `mlog` command: after one of its writes is answered, a Ctrl-C lets it finish.

    A change committed before a Ctrl-C is the command's outcome: it prints what it did and
    exits as it would have (a script that took the interrupt for a failure would retry a
    change already made). A second Ctrl-C after that raises KeyboardInterrupt, for a command
    stuck after its write; the caller says the outcome stands. The SIGINT handler in place
    when the block starts is put back when it ends.
    """
    if not _in_main_thread():  # no signals there: nothing to hold (a test's thread)
        yield CommandInterrupts()
        return
    previous = signal.getsignal(signal.SIGINT)
    _COMMAND.active, _COMMAND.settled, _COMMAND.noted = True, False, 0
    try:
        yield _COMMAND
    finally:
        _COMMAND.active = False
        signal.signal(signal.SIGINT, previous)


def _after_answer(signum: int, frame: FrameType | None) -> None:
    """SIGINT once a command's write was answered: noted; the second one ends the command."""
    _COMMAND.noted += 1
    if _COMMAND.noted > 1:
        raise KeyboardInterrupt


@contextlib.contextmanager
def writes_finish(on_interrupt: Callable[[], object] | None = None) -> Iterator[list[int]]:
    """Hold SIGINT (Ctrl-C) back inside the block, so a write in it is whole or not at all.

    Yields the list of the signals that came. `on_interrupt` runs on the first (a wait for a
    server's answer cancels itself: nothing is known of the write, the Ctrl-C ends it). When
    the block ends normally the write was answered: inside `one_command` the command then
    runs to its end (`_after_answer`); elsewhere (the Python API) a Ctrl-C that came is
    raised now. Outside the main thread (where Python delivers signals) nothing is held.
    """
    came: list[int] = []
    if not _in_main_thread():
        yield came
        return

    def remember(signum: int, frame: FrameType | None) -> None:
        came.append(signum)
        if on_interrupt is not None and len(came) == 1:
            on_interrupt()

    previous = signal.signal(signal.SIGINT, remember)
    try:
        yield came
    except BaseException:
        signal.signal(signal.SIGINT, previous)
        raise
    if _COMMAND.active:
        _COMMAND.noted += min(len(came), 1)
        committed()
        return
    signal.signal(signal.SIGINT, previous)
    if came:
        raise KeyboardInterrupt


def committed() -> None:
    """Say the command's change is committed: from now on a Ctrl-C lets it finish.

    For a change that a Ctrl-C may still stop while it runs (a long database write, which an
    interrupt rolls back) and so runs outside `writes_finish`. Inside `one_command` only.
    """
    if _COMMAND.active and _in_main_thread():
        _COMMAND.settled = True
        signal.signal(signal.SIGINT, _after_answer)
