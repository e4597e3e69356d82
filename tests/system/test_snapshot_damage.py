"""Snapshots are a cache, never a single point of failure: a damaged database means a replay.

SQLite damage (a page, a cut file, a header) and PostgreSQL errors on a snapshot's tables: the
commands that need the image warn and replay the whole log, `mlog serve` starts, and
`mlog snapshot verify` exits 1 naming the database.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from tests.support.cli import mlog, ok
from tests.support.server_process import serve_process


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    """A data directory with topics and a snapshot of them in snapshots.db."""
    ok(tmp_path, "brokers", "register", "--id", "1")
    for n in range(12):
        ok(tmp_path, "topics", "create", "--topic", f"t{n}", "--partitions", "4")
    ok(tmp_path, "snapshot", "create")
    return tmp_path


def damage_sqlite(path: Path, how: str) -> None:
    """Damage a SQLite file: a table's page, the file's end, or its header."""
    if how == "page":
        with sqlite3.connect(path) as conn:
            (root,) = conn.execute(
                "SELECT rootpage FROM sqlite_master WHERE name = 'snapshot_partitions'"
            ).fetchone()
            (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        conn.close()
        data = bytearray(path.read_bytes())
        end = root * page_size  # cells sit at the end of the page
        data[end - 600 : end] = bytes(b ^ 0x5A for b in data[end - 600 : end])
        path.write_bytes(bytes(data))
    elif how == "cut":
        os.truncate(path, path.stat().st_size // 3)
    else:
        with open(path, "r+b") as f:
            f.write(b"this is no database header")


def serve_starts(data_dir: Path, tmp_path: Path) -> str:
    """Start `mlog serve`, wait until it serves, stop it; its stderr."""
    with serve_process(data_dir, tmp_path / "serve.log") as served:
        assert served.stop() == 0
    return served.log()


@pytest.mark.parametrize("how", ["page", "cut", "header"])
def test_a_damaged_sqlite_database_is_a_warning_and_a_full_replay(
    cluster: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    how: str,
) -> None:
    listed = ok(cluster, "topics", "list")
    database = cluster / "snapshots.db"
    damage_sqlite(database, how)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert ok(cluster, "topics", "list") == listed
    warnings = caplog.text
    assert "is damaged" in warnings and "replay" in warnings, warnings
    ok(cluster, "topics", "create", "--topic", "after", "--partitions", "1")
    assert "after" in ok(cluster, "topics", "list")
    capsys.readouterr()
    code, text = mlog(cluster, "snapshot", "verify")
    assert code == 1, text
    shown = text + capsys.readouterr().err
    assert str(database) in shown and "is damaged" in shown, shown
    if how != "cut":
        log = serve_starts(cluster, tmp_path)
        assert "is damaged" in log


def test_postgresql_errors_on_a_snapshots_tables_are_a_warning_and_a_full_replay(
    cluster: Path, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    db = ["--db", postgres_url]
    ok(cluster, *db, "snapshot", "create")
    listed = ok(cluster, *db, "topics", "list")
    libpq = make_url(postgres_url).set(drivername="postgresql")
    options = libpq.query["options"]
    assert isinstance(options, str)
    schema = options.removeprefix("-csearch_path=")
    with psycopg.connect(
        libpq.difference_update_query(["options"]).render_as_string(hide_password=False),
        autocommit=True,
    ) as conn:
        conn.execute(f'DROP TABLE "{schema}".snapshot_partitions')
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert ok(cluster, *db, "topics", "list") == listed
    assert "snapshot_partitions" in caplog.text and "replay" in caplog.text, caplog.text
    ok(cluster, *db, "topics", "create", "--topic", "after", "--partitions", "1")
    code, text = mlog(cluster, *db, "snapshot", "verify")
    assert code == 1 and "DAMAGED" in text, text
