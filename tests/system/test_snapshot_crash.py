"""Killing the service (kill -9) while it writes a snapshot leaves no partial snapshot visible."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

from sqlalchemy import create_engine, text

from metadata_log.reader import LogReader
from replay.loader import load_image
from replay.sql.models import CONTENT_TABLES
from replay.sql.store import SnapshotStore
from tests.support.paths import REPO

WRITER = [sys.executable, "-m", "tests.support.snapshot_crash_writer"]


def _rows_per_table(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {
                t.name: conn.execute(text(f"SELECT count(*) FROM {t.name}")).scalar_one()
                for t in CONTENT_TABLES
            }
    finally:
        engine.dispose()


def test_kill_during_a_snapshot_write_leaves_nothing_partial(
    tmp_path: Path, database_url: str
) -> None:
    log_dir = tmp_path / "log"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.snapshot_crash_writer",
            str(log_dir),
            database_url,
            "300",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert child.stdout is not None
        ready, _, _ = select.select([child.stdout], [], [], 120)
        assert ready, "the writer did not start its snapshot in time"
        line = child.stdout.readline()
        assert line.startswith("WRITING"), (line, child.stderr.read() if child.stderr else "")
        _, offset, rows = line.split()
        assert int(rows) >= 1000
        # Mid-transaction: the rows are written but nothing is visible to other connections.
        with SnapshotStore(database_url, create=False) as store:
            assert store.snapshots() == []
        assert set(_rows_per_table(database_url).values()) == {0}
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL

    # After the crash: no snapshot row, no orphaned content rows, and a new snapshot works.
    with SnapshotStore(database_url) as store:
        assert store.snapshots() == []
        assert set(_rows_per_table(database_url).values()) == {0}
        with LogReader.open(log_dir) as log:
            assert log.end_offset == int(offset) + 1
            image = load_image(log)
        info = store.write(image)
        assert store.load(info.id) == image
        assert store.verify(info.id).ok
