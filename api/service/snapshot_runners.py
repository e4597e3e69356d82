"""Where a background snapshot is written: on the snapshotter's thread, or in a forked child.

A snapshot walks the whole image (building and hashing its rows in Python) and hands the rows
to the database driver. On the snapshotter's thread that walk shares the interpreter lock with
the event loop beside it, and the duty cycle (`snapshot_pacing.py`) keeps the loop answering by
resting the writer between slices. In a child forked for the snapshot (`ForkedRunner`, what
`mlog serve` uses) the image is shared copy-on-write and the child never holds this process's
interpreter lock: the event loop loses only the CPU the child takes. The child runs at the
server's own priority (`niceness` 0 by default): it needs no pacing, and a lower priority
starved it behind other processes on a busy host, so snapshots, and the log retention that
waits for them, fell behind. Every voter of a quorum snapshots the same offset at about the
same time; in the child that costs each loop its share of the cores, not turns of the lock.

The child shares nothing with this process but the memory it was forked with: it closes the
sockets it inherited (`_close_inherited_sockets`: a client connection the server closes while
the child runs must end then, not when the child does), opens its own database connections
(`in_child`, e.g. `SnapshotStore.forget_connections`, leaves the ones it inherited alone: their
sockets are gone from the child, the parent's stay open), sends back its result or its
one-line error through a pipe, and ends with `os._exit`, running none of this process's exit
handlers. It dies with the thread that forked it (Linux's parent-death signal), so a server
killed mid-snapshot leaves no writer behind; the snapshot's transaction is then rolled back by
the database like any other cut connection.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import pickle
import signal
import stat
import sys
from collections.abc import Callable
from typing import Any, NoReturn, Protocol, TypeVar

from replay.sql.errors import SnapshotStoreError

T = TypeVar("T")

DEFAULT_NICENESS = 0
"""How much lower the child's scheduling priority is than the server's (nice(2) steps): none.

At 5, 10 or 19 the child got 25%, 10% or 1.5% of a core shared with other processes (CFS
weights 335, 110 and 15 against 1,024): beside two busy loops, a standalone server's snapshots
lagged so far that `tests/system/test_retention_processes.py` found its log untrimmed, in 5 of
5 runs at each, where it passed at 0 and with the thread. Among its own voters the lower
priority bought little: the quorum bench's round holding the first snapshot gave 4,238 and
4,506 writes/s at 10 and 19 (one run each; 3,510-3,848 on the thread)."""

_CHILD_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})
"""The signals `mlog serve` handles, which a snapshot's child handles as its own."""

_PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when the thread that forked it ends (Linux)."""


class SnapshotRunner(Protocol):
    """Runs a snapshot's work (write, then retention) and returns its result."""

    @property
    def shares_interpreter(self) -> bool:
        """Whether the work runs under this process's interpreter lock (then it is paced)."""
        ...

    def run(self, work: Callable[[], T], *, in_child: Callable[[], None]) -> T:
        """`work()`; `in_child` runs first where the work runs in another process."""
        ...

    def abandon(self) -> bool:
        """Give up the work under way if it can be given up (a child is killed): whether it was."""
        ...


class AbandonedError(SnapshotStoreError):
    """The snapshot under way was given up: the server is stopping (nothing was written)."""


class ThreadRunner:
    """The work on the calling thread (the snapshotter's worker), paced beside the loop."""

    shares_interpreter = True

    def run(self, work: Callable[[], T], *, in_child: Callable[[], None]) -> T:
        """`work()`, here."""
        return work()

    def abandon(self) -> bool:
        """A thread's work cannot be cut short: it ends as it would."""
        return False


class ForkedRunner:
    """The work in a child process forked for it (POSIX)."""

    shares_interpreter = False

    def __init__(self, *, niceness: int = DEFAULT_NICENESS) -> None:
        if not hasattr(os, "fork"):  # pragma: no cover - POSIX has fork
            raise SnapshotStoreError("snapshots in a child process need os.fork (POSIX)")
        if not 0 <= niceness <= 19:
            raise SnapshotStoreError(f"a snapshot child's niceness must be 0..19, got {niceness}")
        self.niceness = niceness
        # Found now, not in the child: a lookup there could take the loader's lock, which
        # another thread of this process may have held when it forked.
        self._set_death_signal = _death_signal_setter()
        self._child: int | None = None
        self._abandoned = False

    def run(self, work: Callable[[], T], *, in_child: Callable[[], None]) -> T:
        """`work()` in a forked child; its result, or `SnapshotStoreError` saying why not."""
        read_fd, write_fd = os.pipe()
        parent = os.getpid()
        # Held back on this thread across the fork, so the child takes them only once it
        # handles them as its own (`_own_signals`); the parent's other threads take them.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _CHILD_SIGNALS)
        try:
            pid = os.fork()
        except OSError as exc:  # EAGAIN, ENOMEM: no child, no snapshot this time
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.close(read_fd)
            os.close(write_fd)
            raise SnapshotStoreError(
                f"could not start the snapshot's child process: {exc}"
            ) from None
        if pid == 0:  # pragma: no cover - the child's lines are not traced by coverage
            os.close(read_fd)
            _child(
                work,
                in_child,
                write_fd,
                parent=parent,
                niceness=self.niceness,
                set_death_signal=self._set_death_signal,
                mask=mask,
            )
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        self._child = pid
        os.close(write_fd)
        try:
            with os.fdopen(read_fd, "rb") as pipe:
                data = pipe.read()
            _, status = os.waitpid(pid, 0)
        finally:
            self._child = None
        if self._abandoned:
            self._abandoned = False
            raise AbandonedError("the snapshot under way was given up: the server is stopping")
        if os.WIFSIGNALED(status):
            name = signal.Signals(os.WTERMSIG(status)).name
            raise SnapshotStoreError(f"the snapshot's child process was killed by {name}")
        try:
            ok, value = pickle.loads(data)
        except Exception:  # any undecodable answer is the same failure
            raise SnapshotStoreError(
                f"the snapshot's child process ended (status {os.waitstatus_to_exitcode(status)}) "
                "without a result"
            ) from None
        if not ok:
            raise SnapshotStoreError(str(value))
        result: T = value
        return result

    def abandon(self) -> bool:
        """Kill the child under way, if any (its transaction is rolled back): whether one was.

        A stopping server does not wait for a background snapshot: on busy cores it could take
        many seconds, and the next start takes one by policy.
        """
        child = self._child
        if child is None:
            return False
        self._abandoned = True
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:  # it had just ended; its result is used
            self._abandoned = False
            return False
        return True


def _child(
    work: Callable[[], Any],
    in_child: Callable[[], None],
    write_fd: int,
    *,
    parent: int,
    niceness: int,
    set_death_signal: Callable[[], None] | None,
    mask: set[int | signal.Signals],
) -> NoReturn:  # pragma: no cover - runs in the forked child
    """The child's whole life: run `work`, send back (ok, result or error), `_exit`."""
    code = 1
    try:
        # A collection would walk (and so copy) every page of the image it shares; the
        # child lives for one snapshot.
        gc.disable()
        if set_death_signal is not None:
            set_death_signal()
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)
        _own_signals()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a signal held back acts now
        _close_inherited_sockets()
        os.nice(niceness)
        try:
            in_child()
            answer: tuple[bool, Any] = (True, work())
        except SnapshotStoreError as exc:
            answer = (False, str(exc))
        except Exception as exc:  # told to the parent, which logs it
            answer = (False, f"{type(exc).__name__}: {exc}")
        data = pickle.dumps(answer)
        view = memoryview(data)
        while view:
            view = view[os.write(write_fd, view) :]
        code = 0
    finally:
        os._exit(code)


def _own_signals() -> None:  # pragma: no cover - runs in the forked child
    """Make a signal sent to the child act on the child alone (called before its work).

    The child inherits the server's handling of SIGTERM and SIGINT: a handler that only
    writes the signal's number to the event loop's wake-up socket, which the parent reads.
    A `kill` of the child (`ps` shows it as a second `mlog serve`) then stopped the parent,
    and the child went on. They get their default action back (the child ends; its snapshot
    is a failed one, retried by policy), and the wake-up descriptor is unset, so no signal's
    number is written to what the child opens under that number after its sockets close.
    """
    # The fork made the forking thread the child's main thread, where both are allowed.
    with contextlib.suppress(ValueError):
        signal.set_wakeup_fd(-1)
        for signum in _CHILD_SIGNALS:
            signal.signal(signum, signal.SIG_DFL)


def _close_inherited_sockets() -> None:  # pragma: no cover - runs in the forked child
    """Close every socket this process holds (called in a forked child, before its work).

    A socket stays open while any process holds it: without this, a connection the server
    closes (a limit, an idle timeout, a stop) would stay open to its client until the
    snapshot's child ended, seconds later at a large image, and a voter's link the same.
    Only sockets: the result pipe, the standard streams and the files the parent has open
    (log segments, an SQLite database) change nothing outside when held a while longer.

    The event loop's signal wake-up descriptor is one of those sockets: `_own_signals`
    unsets it first.
    """
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(listing)
        except OSError:
            continue
        for name in names:
            fd = int(name)
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    os.close(fd)
            except OSError:  # the listing's own descriptor, closed by now
                continue
        return


def _death_signal_setter() -> Callable[[], None] | None:
    """A function arming SIGKILL for when the forking thread ends (Linux), or None."""
    if not sys.platform.startswith("linux"):  # pragma: no cover - Linux here
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - every glibc and musl has it
        return None
    prctl.restype = ctypes.c_int
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong]

    def arm() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)

    return arm
