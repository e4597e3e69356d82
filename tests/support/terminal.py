"""Run `mlog` on a pseudo-terminal, as a person at a keyboard does (Ctrl-C, the shell)."""

from __future__ import annotations

import os
import pty
import select
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The checkout whose `mlog` the terminal runs."""


class Terminal:
    """`mlog ARGS` in a child process whose stdin, stdout and stderr are a pseudo-terminal."""

    def __init__(self, args: Sequence[str]) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="200")
        pid, fd = pty.fork()
        if pid == 0:  # the child: becomes mlog, the terminal its controlling one
            os.execve(sys.executable, [sys.executable, "-m", "api.cli", *args], env)
        self.pid, self.fd = pid, fd
        self.seen = b""

    def read_until(self, text: str, timeout_s: float = 60.0) -> str:
        """What the terminal shows until `text` appears (AssertionError if it never does)."""
        wanted = text.encode()
        while wanted not in self.seen:
            ready, _, _ = select.select([self.fd], [], [], timeout_s)
            assert ready, f"{text!r} did not appear; the terminal shows {self.seen!r}"
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:  # EIO: the child closed the terminal
                chunk = b""
            assert chunk, f"{text!r} did not appear before the end; shown {self.seen!r}"
            self.seen += chunk
        return self.seen.decode(errors="replace")

    def wait_reading_input(self, timeout_s: float = 60.0) -> None:
        """Wait until the command blocks reading its standard input (the terminal).

        Linux shows a process's current system call in /proc/PID/syscall: `0 0x0 ...` is
        read(0, ...) on x86-64, 23 and 270 are select and pselect6 (`wait_for_input`'s wait
        for a line). Elsewhere the output so far is all there is to go by, so it waits a
        moment instead.
        """
        import platform
        import time

        path = Path(f"/proc/{self.pid}/syscall")
        if platform.machine() != "x86_64" or not path.exists():
            time.sleep(3)
            return
        deadline = time.monotonic() + timeout_s
        while not path.read_text().startswith(("0 0x0 ", "23 ", "270 ")):
            assert time.monotonic() < deadline, "the command never read its input"
            time.sleep(0.05)

    def type(self, keys: str) -> None:
        """Type `keys` (a "\\x03" is Ctrl-C: the terminal sends SIGINT to the command)."""
        os.write(self.fd, keys.encode())

    def finish(self, timeout_s: float = 60.0) -> tuple[int, str]:
        """Wait for the command to end: (exit code, everything the terminal showed)."""
        while True:
            ready, _, _ = select.select([self.fd], [], [], timeout_s)
            assert ready, f"the command did not end; the terminal shows {self.seen!r}"
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            self.seen += chunk
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status), self.seen.decode(errors="replace")
