"""`mlog history` after `log trim`: names come from the snapshot the trimmed log starts at."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import as_json, ok


@pytest.fixture
def trimmed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """s1 created, snapshotted and trimmed below; then altered and deleted after the trim."""
    monkeypatch.setenv("MLOG_SEGMENT_MS", "1")  # a segment per command: trim has some to drop
    ok(tmp_path, "brokers", "register", "--id", "1")
    ok(tmp_path, "topics", "create", "--topic", "s1", "--partitions", "2")
    ok(tmp_path, "configs", "alter", "--topic", "s1", "--set", "retention.ms=1000")
    ok(tmp_path, "snapshot", "create")
    ok(tmp_path, "configs", "alter", "--topic", "s1", "--set", "retention.ms=2000")
    assert "removed" in ok(tmp_path, "log", "trim", "--before-snapshot")
    ok(tmp_path, "topics", "delete", "--topic", "s1")
    return tmp_path


def test_history_after_a_trim_names_topics_from_the_snapshot(
    trimmed: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = as_json(trimmed, "history", "--topic", "s1")
    changes = [row["change"] if "change" in row else row["description"] for row in rows]
    assert any("retention.ms=2000" in c for c in changes), changes
    assert any(c.startswith("deleted topic s1") for c in changes), changes
    assert not any("unknown topic" in c for c in changes), changes
    assert "names of what was created before it may not be known" not in caplog.text


def test_history_table_after_a_trim_names_the_topic(trimmed: Path) -> None:
    text = ok(trimmed, "history", "--topic", "s1")
    assert "unknown topic" not in text and "deleted topic s1" in text


@pytest.fixture
def trimmed_below_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The issue's steps: 12 topics, a snapshot, s1 deleted, the log trimmed below it.

    Each `topics create` is one 2-entry batch, so the segment that holds the snapshot's
    offset starts one entry below it: the log starts below every snapshot.
    """
    monkeypatch.setenv("MLOG_SEGMENT_MS", "1")
    ok(tmp_path, "brokers", "register", "--id", "1")
    for i in range(1, 13):
        ok(tmp_path, "topics", "create", "--topic", f"s{i}", "--partitions", "1")
    ok(tmp_path, "snapshot", "create")
    ok(tmp_path, "topics", "delete", "--topic", "s1")
    assert "removed" in ok(tmp_path, "log", "trim", "--before-snapshot")
    snapshot = as_json(tmp_path, "snapshot", "list")[-1]["offset"]
    assert as_json(tmp_path, "log", "segments")[0]["base_offset"] < snapshot
    return tmp_path


def test_history_of_a_log_that_starts_below_its_snapshot_names_its_topics(
    trimmed_below_snapshot: Path,
) -> None:
    rows = as_json(trimmed_below_snapshot, "history", "--topic", "s1")
    assert [r["description"] for r in rows] == [f"deleted topic s1 (id {rows[0]['topic_id']})"], (
        rows
    )
    by_id = ok(trimmed_below_snapshot, "history", "--topic-id", rows[0]["topic_id"])
    assert "deleted topic s1" in by_id and "unknown topic" not in by_id
    # A topic no kept entry touched is known from the snapshot: not "no topic had that name".
    assert ok(trimmed_below_snapshot, "history", "--topic", "s5") == "no entry touched it\n"
