"""Returning the memory of closed connections to the system (glibc's heap keeps freed blocks).

A connection's buffers are freed when it closes, but glibc's allocator keeps freed blocks in its
heap for later allocations and gives memory back to the system only from the heap's top: after
a crowd of connections closes, the process stays as large as the crowd made it (2,000 idle TLS
connections took a server from 90 to 660 MB, and it stayed there after they closed). Once
`TRIM_CLOSES` connections have closed, `HeapTrimmer` asks glibc (`malloc_trim`) to return the
free pages of its heap, on a thread (the call walks the heap; ctypes releases the interpreter
lock meanwhile), at most once per `TRIM_DELAY`. Where the C library is not glibc, it does nothing.

A start does the same once its image is loaded and indexed (`return_free_memory`): a load frees
what it built the image from (a snapshot's rows, a log's decoded blocks) among the objects it
keeps, and glibc held those pages for the server's life (a 1M-partition start from SQLite: 19
MiB of its serving RSS; from the log: 7 MiB).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import functools
import logging
from collections.abc import Callable

logger = logging.getLogger("api.server")

TRIM_CLOSES = 64
"""Connections closed since the last trim that make the next one worth doing."""

TRIM_DELAY = 1.0
"""Seconds from the close that makes a trim due to the trim (a crowd closes over a while)."""


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's `malloc_trim` (glibc's), or None where it has none.

    Looked up once per process: `find_library` runs `ldconfig -p` to find the C library.
    """
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        function = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return function


def return_free_memory() -> bool:
    """Ask glibc to return its heap's free pages now; False where the C library cannot.

    Blocking (it walks the heap; the interpreter lock is let go meanwhile): call it on a thread.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


class HeapTrimmer:
    """Counts closed connections and returns the heap's free pages once enough have closed."""

    def __init__(self, *, closes: int = TRIM_CLOSES, delay: float = TRIM_DELAY) -> None:
        self._trim = _malloc_trim()
        self._closes = closes
        self._delay = delay
        self._closed = 0
        self._timer: asyncio.TimerHandle | None = None
        self.trims = 0
        """Trims done since the start."""

    @property
    def available(self) -> bool:
        """Whether the C library can trim its heap (glibc's `malloc_trim`)."""
        return self._trim is not None

    def closed(self) -> None:
        """A connection closed: schedule a trim once `closes` have since the last one."""
        if self._trim is None:
            return
        self._closed += 1
        if self._closed >= self._closes and self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._delay, self._start)

    def cancel(self) -> None:
        """Drop a trim not started yet (the server is stopping)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _start(self) -> None:
        self._timer = None
        self._closed = 0
        trim = self._trim
        if trim is None:  # pragma: no cover - no timer is set without it
            return
        self.trims += 1
        future = asyncio.get_running_loop().run_in_executor(None, trim, 0)
        future.add_done_callback(_log_failure)


def _log_failure(future: asyncio.Future[int]) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.warning("returning freed memory failed: %s", future.exception())
