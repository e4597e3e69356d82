"""`mlog serve` in a real process, for tests of its start-up, its signals and its log lines."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.serve_forks import ChildProcess, spawn_serve

START_WAIT = 60.0
"""Seconds `mlog serve` may take to say where it serves (imports are slow on a loaded machine)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeProcess:
    """A running `mlog serve`: its process, where it serves and the file its log lines go to."""

    process: ChildProcess
    address: str
    stderr: Path

    def log(self) -> str:
        """What the server has written to stderr so far."""
        return self.stderr.read_text()

    def stop(self) -> int:
        """Stop the server with SIGTERM, as an operator would; its exit code."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)


@contextmanager
def serve_process(
    data_dir: Path, stderr: Path, *options: str, env: Mapping[str, str] | None = None
) -> Iterator[ServeProcess]:
    """`mlog serve --data-dir DATA_DIR OPTIONS...` on a free port of 127.0.0.1, once it serves.

    Its stderr goes to the file `stderr`. A server still running when the block ends (a test
    failed before it stopped the server) is killed.
    """
    process = spawn_serve(
        ["serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1:0", *options],
        stderr=stderr,
        env=env,
    )
    try:
        yield ServeProcess(process=process, address=serving_address(process, stderr), stderr=stderr)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)


def serving_address(process: ChildProcess, stderr: Path) -> str:
    """The address in the server's "serving on" line, once written; fails if it never is."""
    deadline = time.monotonic() + START_WAIT
    while True:
        # Whether it exited is read before its log: an exit after the line still finds it.
        exited = process.poll() is not None
        text = stderr.read_text()
        found = re.search(r"serving on (\S+)", text)
        if found:
            return found.group(1)
        if exited or time.monotonic() > deadline:
            raise AssertionError(f"mlog serve did not start (exit code {process.poll()}): {text}")
        time.sleep(0.1)
