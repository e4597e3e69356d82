"""An image rebuilt at a point from a snapshot and the log: the snapshots skipped, warned about
and refused, and the log alone when the database cannot be read (`replay/timetravel/rebuild.py`).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from metadata_log import LogConfig, MetadataLog
from metadata_log.reader import LogReader
from records.model import (
    FeatureLevelRecord,
)
from replay.errors import TrimmedLogError
from replay.loader import load_image
from replay.sql.store import SnapshotStore
from replay.timetravel import (
    TimeTravelError,
    snapshot_matches_log,
    travel,
)
from tests.support.timetravel_logs import (
    START,
    broker_of,
    known_log,
    timed_log,
)

TRIM_CONFIG = LogConfig(segment_ms=1000)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LogReader]:
    with known_log(tmp_path_factory.mktemp("timetravel") / "log") as reader:
        yield reader


def test_a_snapshot_of_another_log_is_skipped_with_a_warning_and_timed(
    log: MetadataLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A snapshot whose entry does not match is skipped and said so; a good one is timed."""
    with SnapshotStore(f"sqlite:///{tmp_path / 'snapshots.db'}") as store:
        bad = store.write(load_image(log, lte=12).with_timestamp(START - 5))  # another log's
        assert snapshot_matches_log(log, bad) is False
        assert snapshot_matches_log(log, replace(bad, offset=log.end_offset)) is False
        reason = f"snapshot {bad.id} (offset 12) was not taken from this log"
        with caplog.at_level(logging.WARNING):
            alone = travel(log, store, at_offset=13)
        assert alone.snapshot is None and alone.replayed == 14
        assert alone.skipped == (reason,) and reason in caplog.text
        assert alone.load_seconds >= 0
        good = store.write(load_image(log, lte=6))
        assert snapshot_matches_log(log, good) is True
        answer = travel(log, store, at_offset=13)
        assert answer.snapshot is not None and answer.snapshot.id == good.id
        assert answer.replayed == 7 and answer.load_seconds > 0
        assert answer.skipped == (reason,)


@pytest.fixture
def start_8(tmp_path: Path) -> Iterator[tuple[MetadataLog, SnapshotStore, Path]]:
    """Single-entry segments 0..10, snapshots at 0-4 and 6, the log trimmed to start at 8."""
    with timed_log(tmp_path / "log", config=TRIM_CONFIG) as writer:
        writer.append([FeatureLevelRecord(name="metadata.version", feature_level=1)])
        for broker_id in range(1, 11):
            writer.append([broker_of(broker_id)])
    database = tmp_path / "snapshots.db"
    with (
        MetadataLog.open(tmp_path / "log", config=TRIM_CONFIG) as log,
        SnapshotStore(f"sqlite:///{database}") as store,
    ):
        for offset in (0, 1, 2, 3, 4, 6):
            store.write(load_image(log, lte=offset))
        log.trim_before(8)
        assert log.log_start_offset == 8
        yield log, store, database


def test_a_refusal_before_the_start_lists_the_newest_five_snapshots(
    start_8: tuple[MetadataLog, SnapshotStore, Path],
) -> None:
    log, store, _ = start_8
    # 5 has no snapshot of its own: refused, not answered by the one at 4 before it.
    with pytest.raises(TimeTravelError) as caught:
        travel(log, store, at_offset=5)
    assert str(caught.value).endswith(
        "the database holds snapshots at offsets 1, 2, 3, 4, 6 (newest five) there"
    )


def test_snapshots_older_than_the_start_are_not_checked_or_warned_about(
    start_8: tuple[MetadataLog, SnapshotStore, Path], caplog: pytest.LogCaptureFixture
) -> None:
    log, store, _ = start_8
    with caplog.at_level(logging.WARNING), pytest.raises(TrimmedLogError):
        travel(log, store, at_offset=9)
    assert "not taken from this log" not in caplog.text
    # start - 1 has no entry and no snapshot: what it needs is gone, said as replay says it.
    with pytest.raises(TrimmedLogError):
        travel(log, None, at_offset=7)


def test_a_damaged_snapshot_at_a_trimmed_offset_is_a_warning_and_a_refusal(
    start_8: tuple[MetadataLog, SnapshotStore, Path], caplog: pytest.LogCaptureFixture
) -> None:
    log, store, database = start_8
    assert travel(log, store, at_offset=3).snapshot is not None
    with sqlite3.connect(database) as conn:
        conn.execute("UPDATE snapshot_brokers SET rack = 'changed' WHERE broker_id = 1")
    conn.close()
    with caplog.at_level(logging.WARNING), pytest.raises(TimeTravelError, match="offset 3 is"):
        travel(log, store, at_offset=3)
    assert "checksum" in caplog.text


def test_an_unreadable_database_is_a_warning_and_the_log_alone(
    start_8: tuple[MetadataLog, SnapshotStore, Path], caplog: pytest.LogCaptureFixture
) -> None:
    log, store, database = start_8
    with sqlite3.connect(database) as conn:
        conn.execute("DROP TABLE snapshots")
    conn.close()
    with caplog.at_level(logging.WARNING), pytest.raises(TimeTravelError, match="offset 3 is"):
        travel(log, store, at_offset=3)
    assert "snapshots" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING), pytest.raises(TrimmedLogError):
        travel(log, store, at_offset=9)
    assert "replaying the log from the start" in caplog.text
