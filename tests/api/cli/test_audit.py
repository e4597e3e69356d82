"""`mlog audit`'s Ctrl-C: once interrupted, another SIGINT ends the process with 130, never -2."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from api.cli import audit
from tests.support.paths import REPO


@pytest.fixture
def sigint_handler_put_back() -> Iterator[None]:
    before = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, before)


def _interrupted(*_: Any) -> int:
    raise KeyboardInterrupt


@pytest.mark.usefixtures("sigint_handler_put_back")
def test_an_interrupted_audit_exits_at_the_next_ctrl_c(capsys: pytest.CaptureFixture[str]) -> None:
    run = audit.interruptible(_interrupted)
    settings = argparse.Namespace(debug=False)
    assert run(argparse.Namespace(), settings, sys.stdout) == audit.EXIT_INTERRUPTED  # type: ignore[arg-type]
    assert "mlog: interrupted: the audit was stopped (Ctrl-C)" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is audit._exit_interrupted


def test_a_sigint_after_the_audit_returned_still_exits_130() -> None:
    # The audit returns 130; a SIGINT whose handler runs after that (the JVM's teardown, a
    # busy machine) ends the process with 130, not by the signal (-2).
    child = textwrap.dedent(
        """
        import argparse, os, signal, sys, time
        from api.cli import audit

        def interrupted(*_):
            raise KeyboardInterrupt

        code = audit.interruptible(interrupted)(
            argparse.Namespace(), argparse.Namespace(debug=False), sys.stdout
        )
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)
        sys.exit(code)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == audit.EXIT_INTERRUPTED, done.stderr
    assert done.stderr.count("mlog: interrupted: the audit was stopped (Ctrl-C)") == 1
    assert "Traceback" not in done.stderr
