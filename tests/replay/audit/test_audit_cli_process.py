"""`mlog audit` as a user runs it in a terminal: Ctrl-C, and a SQL error before Spark is up.

Each test runs the CLI in a child process (a JVM each: slow). Ctrl-C is sent as a terminal
sends it: SIGINT to the command's whole process group (the JVM included), with stderr on a
pseudo-terminal.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import REPO

pytest.importorskip("pyspark")

from metadata_log import MetadataLog
from records.model import FeatureLevelRecord, TopicRecord
from records.uuids import Uuid

pytestmark = [pytest.mark.process, pytest.mark.spark]

WAIT = 300.0
"""Seconds a child may take to reach a point (a JVM start on a busy machine)."""

SLOW_QUERY = (
    "SELECT count(*) FROM metadata_log a CROSS JOIN metadata_log b CROSS JOIN metadata_log c "
    "CROSS JOIN metadata_log d WHERE a.offset + b.offset + c.offset + d.offset >= 0"
)
"""A query that runs for minutes on a log of a few hundred entries: Ctrl-C lands in it."""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("audit-cli")
    with MetadataLog.open(path / "log") as log:
        log.append([FeatureLevelRecord(name="metadata.version", feature_level=1)])
        for n in range(300):
            log.append([TopicRecord(name=f"t{n}", topic_id=Uuid.random())], principal="alice")
    return path


class _Terminal:
    """A child `mlog` with stdout and stderr on a pseudo-terminal, in its own process group."""

    def __init__(self, *argv: str) -> None:
        master, slave = pty.openpty()
        self.master = master
        self.output = b""
        self.child = subprocess.Popen(
            [sys.executable, "-m", "api.cli", *argv],
            stdin=subprocess.DEVNULL,
            stdout=slave,
            stderr=slave,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            start_new_session=True,
        )
        os.close(slave)

    def read_until(self, text: bytes) -> None:
        deadline = time.monotonic() + WAIT
        while text not in self.output:
            assert time.monotonic() < deadline, self.output.decode(errors="replace")
            self._read(1.0)

    def ctrl_c(self) -> None:
        os.killpg(self.child.pid, signal.SIGINT)

    def finish(self) -> int:
        deadline = time.monotonic() + WAIT
        while self._read(1.0) or self.child.poll() is None:
            assert time.monotonic() < deadline, self.output.decode(errors="replace")
        os.close(self.master)
        return self.child.wait()

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # the child closed the terminal
            return False
        self.output += chunk
        return bool(chunk)


def test_ctrl_c_while_spark_starts_is_one_line_and_exit_130(data_dir: Path) -> None:
    terminal = _Terminal("audit", "churn", "--data-dir", str(data_dir), "--master", "local[1]")
    terminal.read_until(b"mlog: starting Spark (local[1]) ...")
    terminal.ctrl_c()
    code = terminal.finish()
    text = terminal.output.decode(errors="replace")
    assert code == 130, text
    assert "mlog: interrupted: the audit was stopped (Ctrl-C)" in text
    assert "Traceback" not in text and "Exception" not in text, text


def test_ctrl_c_in_a_running_query_stops_it_with_one_line(data_dir: Path) -> None:
    terminal = _Terminal(
        "audit", "sql", SLOW_QUERY, "--data-dir", str(data_dir), "--master", "local[1]"
    )
    terminal.read_until(b"mlog: running: stage ")  # Spark's progress, while the query runs
    terminal.ctrl_c()
    code = terminal.finish()
    text = terminal.output.decode(errors="replace")
    assert code == 130, text
    assert "mlog: interrupted: the audit was stopped (Ctrl-C)" in text
    assert "Traceback" not in text and "Exception" not in text and "ERROR" not in text, text
    # Nothing of a result was written.
    assert "count(1)" not in text


def test_a_syntax_error_is_reported_before_spark_is_up(data_dir: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "api.cli", "audit", "sql"),
            "SELECT principal count(*) FROM metadata_log",
            *("--data-dir", str(data_dir)),
        ],
        capture_output=True,
        text=True,
        timeout=WAIT,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "mlog: starting Spark (local[*]) ...",
        "mlog: error: SQL error: [PARSE_SYNTAX_ERROR] Syntax error at or near '('. "
        "SQLSTATE: 42601 (line 1, pos 22)",
    ]
    assert done.stdout == ""
