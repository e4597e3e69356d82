"""Fault injection for the log's I/O: ENOSPC, EIO, a short write, a failed fsync, at call k.

`inject_faults(root)` wraps `os.write`, `os.fsync`, `os.fdatasync` and `os.replace` for the
files and paths under `root` (other files, such as pytest's, are left alone). It counts those
calls; armed with a `Fault`, the call with that index and every later one of the same family
fail until `clear()`, as a full or failing disk does until someone fixes it. A fail-point sweep
runs a workload once clean to count the calls, then once per call index and fault kind.
The compiled syncer (metadata_log.syncer) writes and syncs from C, where no wrapper reaches:
inside the block the log's writer takes its Python worker thread instead, whose calls are
counted (the compiled path's own failures: tests/metadata_log/test_writer_syncer.py).

The kinds:
- `enospc` / `eio`: a write (or rename) raises `OSError(ENOSPC)` / `OSError(EIO)`, writing nothing;
- `short`: a write writes the first half of its bytes for real and returns that count; the next
  one raises ENOSPC (what a filling disk does: the file now ends inside a block);
- `fsync`: `fsync`/`fdatasync` raise `OSError(EIO)` without syncing; writes succeed.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from metadata_log import syncer

KINDS = ("enospc", "eio", "short", "fsync")
"""Every fault kind a sweep injects."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    """Fail the counted I/O call number `at` (0-based) and later ones, with `kind`."""

    kind: str
    at: int


class FaultInjector:
    """Counts the I/O calls under a directory and fails them as its armed `Fault` says."""

    def __init__(self, root: Path) -> None:
        self.root = str(root.resolve())
        self.calls = 0
        self.fault: Fault | None = None
        self.fired = 0
        self.calls_seen: list[tuple[str, str]] = []
        """Each counted call's family ("write" or "sync") and file, in order."""
        self._short_done = False

    def arm(self, fault: Fault | None) -> None:
        """Fail from call `fault.at` on (None: fail nothing); the count restarts at 0."""
        self.fault = fault
        self.calls = 0
        self.fired = 0
        self.calls_seen = []
        self._short_done = False

    def clear(self) -> None:
        """The disk is fixed: no call fails any more (the count goes on)."""
        self.fault = None

    def _target(self, fd: int) -> str | None:
        """The file `fd` is open on, if it is under the root."""
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return None
        return target if target.startswith(self.root + os.sep) else None

    def _under_path(self, path: Any) -> bool:
        try:
            absolute = os.path.abspath(os.fspath(path))
        except TypeError:
            return False
        return str(absolute).startswith(self.root + os.sep)

    def _due(self, family: str, target: str) -> str | None:
        """Count one call; the fault kind to inject into it, or None."""
        index = self.calls
        self.calls += 1
        self.calls_seen.append((family, target))
        fault = self.fault
        if fault is None or index < fault.at:
            return None
        if family == "sync":
            return "fsync" if fault.kind == "fsync" else None
        return None if fault.kind == "fsync" else fault.kind

    def write(self, real: Callable[[int, Any], int], fd: int, data: Any) -> int:
        target = self._target(fd)
        if target is None:
            return real(fd, data)
        kind = self._due("write", target)
        if kind is None:
            return real(fd, data)
        self.fired += 1
        if kind == "short" and not self._short_done and len(data) > 1:
            self._short_done = True
            return real(fd, bytes(data)[: len(data) // 2])
        code = errno.EIO if kind == "eio" else errno.ENOSPC
        raise OSError(code, os.strerror(code))

    def sync(self, real: Callable[[int], None], fd: int) -> None:
        target = self._target(fd)
        if target is None:
            real(fd)
            return
        if self._due("sync", target) is not None:
            self.fired += 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)

    def replace(self, real: Callable[..., None], src: Any, dst: Any, **kwargs: Any) -> None:
        if not (self._under_path(src) or self._under_path(dst)):
            real(src, dst, **kwargs)
            return
        kind = self._due("write", os.fspath(dst))
        if kind is None or kind == "short":  # a rename is atomic: it cannot be short
            real(src, dst, **kwargs)
            return
        self.fired += 1
        code = errno.EIO if kind == "eio" else errno.ENOSPC
        raise OSError(code, os.strerror(code))


@contextmanager
def inject_faults(root: Path) -> Iterator[FaultInjector]:
    """Wrap the process's `os` I/O calls for `root` for the duration of the block."""
    injector = FaultInjector(root)
    real_write, real_fsync, real_fdatasync, real_replace = (
        os.write,
        os.fsync,
        os.fdatasync,
        os.replace,
    )

    def write(fd: int, data: Any) -> int:
        return injector.write(real_write, fd, data)

    def fsync(fd: Any) -> None:
        injector.sync(real_fsync, fd if isinstance(fd, int) else fd.fileno())

    def fdatasync(fd: Any) -> None:
        injector.sync(real_fdatasync, fd if isinstance(fd, int) else fd.fileno())

    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        injector.replace(real_replace, src, dst, **kwargs)

    os.write, os.fsync, os.fdatasync, os.replace = write, fsync, fdatasync, replace
    compiled, syncer.AVAILABLE = syncer.AVAILABLE, False
    try:
        yield injector
    finally:
        syncer.AVAILABLE = compiled
        os.write, os.fsync, os.fdatasync, os.replace = (
            real_write,
            real_fsync,
            real_fdatasync,
            real_replace,
        )
