"""Trimming the log's start (`MetadataLog.trim_before`, `mlog log trim --before-snapshot`).

The log is this product's history, so its start moves only when an operator asks, and only
below a snapshot; everything that reads the log then says clearly what is gone.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from metadata_log import MetadataLog
from metadata_log.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from metadata_log.reader import LogReader
from metadata_log.reads import StoredLog
from metadata_log.segment import segment_name
from metadata_log.verify import verify_log
from replay.errors import TrimmedLogError
from replay.loader import load_image
from replay.timetravel import TimeTravelError, image_at
from tests.support.cli import mlog, ok
from tests.support.replica_logs import block_of, opened
from tests.support.trim_logs import CONFIG, build, config


def bases(log: StoredLog) -> list[int]:
    return [s.base_offset for s in log.segments()]


def test_trimming_removes_whole_segments_below_the_offset_and_moves_the_start(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "log"
    build(directory, 4)  # segments at 0, 3, 6, 9
    with MetadataLog.open(directory, config=CONFIG) as log:
        before = list(log.read(gt=5))
        assert [s.base_offset for s in log.trim_before(5)] == [0]  # 0..2 lies below 5
    with MetadataLog.open(directory, config=CONFIG) as log:
        assert bases(log) == [3, 6, 9] and log.log_start_offset == 3
        removed = log.trim_before(9)  # 3..5 and 6..8 lie below 9; 9 is the newest
        assert [s.base_offset for s in removed] == [3, 6]
        assert log.trim_before(100) == []  # the newest segment always stays
        assert bases(log) == [9] and list(log.read(gt=5)) == before[3:]
        assert log.append([config("after", 0)]) == (12, 12)
    checkpoint = read_checkpoint(directory)
    assert checkpoint is not None and checkpoint.log_start_offset == 9
    assert not (directory / segment_name(0)).exists()
    assert not (directory / segment_name(3)).with_suffix(".index").exists()
    assert verify_log(directory).ok
    with LogReader.open(directory, config=CONFIG) as log:
        assert [e.offset for e in log.read()] == [9, 10, 11, 12]
        assert [e.offset for e in log.read(gt=-1, lte=10)] == [9, 10]


def test_a_trim_interrupted_after_its_checkpoint_is_finished_on_the_next_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    build(directory, 3)  # 0, 3, 6
    # What a crash between the durable checkpoint and the deletions leaves.
    write_checkpoint(directory, Checkpoint(log_start_offset=6, recovery_point=9, newest_segment=6))
    assert verify_log(directory).ok  # the leftovers are no part of the log
    with LogReader.open(directory, config=CONFIG) as log:
        assert bases(log) == [6] and [e.offset for e in log.read()] == [6, 7, 8]
    assert (directory / segment_name(0)).exists()  # a reader changes nothing
    with (
        caplog.at_level(logging.INFO, logger="metadata_log"),
        MetadataLog.open(directory, config=CONFIG) as log,
    ):
        assert bases(log) == [6]
    assert not (directory / segment_name(0)).exists()
    assert not (directory / segment_name(3)).exists()
    assert any("interrupted trim" in r.getMessage() for r in caplog.records)


def test_a_start_inside_a_segment_is_still_damage(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory, 3)
    write_checkpoint(directory, Checkpoint(log_start_offset=4, recovery_point=9, newest_segment=6))
    report = verify_log(directory)
    assert not report.ok
    assert "before the log start offset 4" in str(report.errors[0])


def test_a_quorum_log_keeps_its_epoch_cache_in_step_with_the_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    with opened(directory) as log:
        offset = 0
        for n, epoch in enumerate([1, 1, 2, 2, 3, 3, 3, 4] * 4):
            block = block_of(log, offset, 2, epoch + 4 * (n // 8), value_bytes=900)
            offset = log.write_blocks([block], check=True)
        log.flush()
        segments = log.segments()
        assert len(segments) > 3
        cut = segments[2].base_offset
        whole = log.epoch_cache()
        log.trim_before(cut)
        cache = log.epoch_cache()
        assert cache[0][1] == cut and log.log_start_offset == cut
        assert [e for e in whole if e[1] > cut] == cache[1:]
    with caplog.at_level(logging.WARNING, logger="metadata_log"), opened(directory) as log:
        assert log.epoch_cache() == cache
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_replay_from_before_a_trimmed_start_is_refused_not_silently_short(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "log"
    build(directory, 3)
    with MetadataLog.open(directory, config=CONFIG) as log:
        log.trim_before(6)
        with pytest.raises(TrimmedLogError, match="starts at offset 6"):
            load_image(log)
        with pytest.raises(TimeTravelError, match="it starts at offset 6"):
            image_at(log, None, at_offset=2)


# ---------------------------------------------------------------------- the command


def test_mlog_log_trim_keeps_every_answer_from_the_snapshot_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MLOG_SEGMENT_BYTES", "4096")  # about one block per segment
    data = tmp_path / "data"
    code, _ = mlog(data, "log", "trim", "--before-snapshot")
    assert code == 2 and "no log" in capsys.readouterr().err
    ok(data, "brokers", "register", "--id", "1")
    for n in range(6):
        ok(data, "topics", "create", "--topic", f"t{n}", "--partitions", "2")
    code, _ = mlog(data, "log", "trim", "--before-snapshot")
    assert code == 2 and "there is no snapshot" in capsys.readouterr().err
    snapshot = ok(data, "--output", "json", "snapshot", "create")
    ok(data, "topics", "create", "--topic", "later")
    whole = ok(data, "image", "show", "/topics")
    early = ok(data, "image", "show", "--at-offset", "3", "/topics")
    segments = ok(data, "--output", "json", "log", "segments")
    dry = ok(data, "log", "trim", "--before-snapshot", "--dry-run")
    assert "would remove" in dry and ok(data, "--output", "json", "log", "segments") == segments
    result = json.loads(ok(data, "--output", "json", "log", "trim", "--before-snapshot"))
    offset = json.loads(snapshot)["offset"]
    assert result["snapshot_offset"] == offset and result["removed"]
    start = result["log_start_offset"]
    assert 0 < start <= offset
    # The image now, and anywhere from the snapshot on, is the same as before.
    assert ok(data, "image", "show", "/topics") == whole
    assert mlog(data, "log", "verify")[0] == 0
    # Before the start: a clear error naming the snapshots, unless a snapshot is exactly there.
    code, _ = mlog(data, "image", "show", "--at-offset", "3", "/topics")
    err = capsys.readouterr().err
    assert code == 2 and f"it starts at offset {start}" in err and "snapshot" in err
    assert early  # it was answerable before the trim
    # A new service (embedded write) starts from the snapshot.
    ok(data, "topics", "create", "--topic", "after-trim")
    assert "after-trim" in ok(data, "topics", "list")
    assert ok(data, "log", "trim", "--before-snapshot").startswith("nothing to trim")
