"""A snapshot's child process dies with the server that forked it (kill -9 mid-snapshot)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

PARENT = textwrap.dedent(
    """
    import os, sys, time
    from api.service.snapshot_runners import ForkedRunner

    marker = sys.argv[1]

    def work():
        with open(marker, "w") as out:
            out.write(str(os.getpid()))
        time.sleep(120)  # a snapshot that takes long

    ForkedRunner().run(work, in_child=lambda: None)
    """
)


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its new parent, does not)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    state = next(line for line in status.splitlines() if line.startswith("State:"))
    return "zombie" not in state and "dead" not in state


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's"
)
def test_a_snapshot_child_dies_when_its_server_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(marker)])
    try:
        deadline = time.monotonic() + 30
        while not (marker.exists() and marker.read_text()):
            assert time.monotonic() < deadline, "the child never started"
            assert parent.poll() is None, "the parent ended first"
            time.sleep(0.02)
        child = int(marker.read_text())
        assert _alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(30)
        deadline = time.monotonic() + 10
        while _alive(child):
            assert time.monotonic() < deadline, "the snapshot's child outlived its server"
            time.sleep(0.02)
    finally:
        if parent.poll() is None:
            parent.kill()
        if marker.exists() and marker.read_text():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(marker.read_text()), signal.SIGKILL)
