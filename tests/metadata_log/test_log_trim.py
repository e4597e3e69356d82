"""Trimming the log's start (`MetadataLog.trim_before`, `mlog log trim --before-snapshot`).

The log is this product's history, so its start moves only when an operator asks, and only
below a snapshot; everything that reads the log then says clearly what is gone. The rules of
`trim_before` and `reset_to_snapshot` one at a time follow: the refusals, the log lines, the
epoch cache a new start clips, a reset to the base of a segment the log already has.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest

from metadata_log import LogError, MetadataLog
from metadata_log import storage as storage_module
from metadata_log.checkpoint import CHECKPOINT_NAME, Checkpoint, read_checkpoint, write_checkpoint
from metadata_log.epoch import read_epoch_checkpoint
from metadata_log.epoch_cache import epochs_from as _epochs_from
from metadata_log.errors import LogCorruptionError
from metadata_log.extent import trimmed_leftovers
from metadata_log.reader import LogReader
from metadata_log.segment import Segment, segment_name
from metadata_log.start_snapshot import StartSnapshot, write_start_snapshot
from metadata_log.stored_log import StoredLog
from metadata_log.verify import verify_log
from replay.errors import TrimmedLogError
from replay.loader import load_image
from replay.timetravel import TimeTravelError, image_at
from tests.support.cli import mlog, ok
from tests.support.replica_logs import T0, block_of, opened, opened_reader
from tests.support.trim_logs import CONFIG, build, config, fill, segment_bases


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


def test_a_new_start_drops_the_epochs_before_it_and_clips_the_one_it_falls_in() -> None:
    epochs = [(1, 0), (2, 5), (3, 8)]
    assert _epochs_from(epochs, 0) == epochs
    assert _epochs_from(epochs, 5) == [(2, 5), (3, 8)]
    assert _epochs_from(epochs, 6) == [(2, 6), (3, 8)]
    assert _epochs_from(epochs, 8) == [(3, 8)]
    assert _epochs_from(epochs, 20) == [(3, 20)]
    assert _epochs_from([], 4) == []


@pytest.mark.parametrize("offset", [-1, 2.0, "3", None])
def test_a_trim_needs_an_offset_of_zero_or_more(tmp_path: Path, offset: object) -> None:
    build(tmp_path, 3)
    with MetadataLog.open(tmp_path, config=CONFIG) as log:
        with pytest.raises(LogError, match=r"cannot trim before offset .*: give an offset >= 0"):
            log.trim_before(offset)  # type: ignore[arg-type] # what a caller may pass
        assert log.trim_before(0) == []  # zero is an offset: nothing lies below it
        assert log.log_start_offset == 0


def test_a_read_only_log_is_neither_trimmed_nor_reset(tmp_path: Path) -> None:
    fill(tmp_path)
    with opened_reader(tmp_path) as log:
        # A reader is its own role: it has neither operation.
        assert not hasattr(log, "trim_before") and not hasattr(log, "reset_to_snapshot")
    assert segment_bases(tmp_path)[0] == 0


def test_a_single_node_log_is_not_reset_to_a_snapshot(tmp_path: Path) -> None:
    build(tmp_path, 2)
    with MetadataLog.open(tmp_path, config=CONFIG) as log:
        assert not hasattr(log, "reset_to_snapshot")  # a quorum node's role only
        assert log.end_offset == 6


def test_a_trim_and_a_reset_say_what_they_did(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    build(tmp_path / "single", 4)  # segments at 0, 3, 6, 9
    with (
        caplog.at_level(logging.INFO, logger="metadata_log"),
        MetadataLog.open(tmp_path / "single", config=CONFIG) as log,
    ):
        log.trim_before(6)
    assert "removed 2 segment(s), offsets 0..5; it starts at 6" in caplog.text
    caplog.clear()
    fill(tmp_path / "quorum")
    with caplog.at_level(logging.INFO, logger="metadata_log"), opened(tmp_path / "quorum") as log:
        log.reset_to_snapshot(StartSnapshot(offset=499, epoch=4, timestamp=T0, checksum="a"))
    assert "to start at offset 500 after snapshot (offset 499, epoch 4)" in caplog.text


def test_a_reset_to_the_base_of_a_segment_it_has_leaves_it_empty_there(tmp_path: Path) -> None:
    fill(tmp_path)
    base = segment_bases(tmp_path)[1]
    snapshot = StartSnapshot(offset=base - 1, epoch=1, timestamp=T0 + base, checksum="a")
    with opened(tmp_path) as log:
        log.reset_to_snapshot(snapshot)
        assert (log.log_start_offset, log.end_offset) == (base, base)
        assert log.last_timestamp == T0 + base  # the snapshot's: later entries follow it
        log.write_blocks([block_of(log, base, 5, 3)], check=False)
        log.flush()
    assert segment_bases(tmp_path) == [base]
    with opened(tmp_path) as log:
        assert (log.log_start_offset, log.end_offset) == (base, base + 5)
        assert log.start_snapshot == snapshot
        assert log.epoch_cache() == [(3, base)]


def test_the_segments_left_below_a_start_never_include_the_newest() -> None:
    assert trimmed_leftovers([0, 3, 6], 0) == 0
    assert trimmed_leftovers([0, 3, 6], 3) == 1
    assert trimmed_leftovers([0, 3, 6], 5) == 1
    assert trimmed_leftovers([0, 3, 6], 6) == 2  # a start at the newest base: all but it
    assert trimmed_leftovers([0, 3, 6], 100) == 2
    assert trimmed_leftovers([6], 6) == 0
    assert trimmed_leftovers([], 6) == 0


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_a_trim_and_a_reset_write_their_checkpoints_at_once_and_leak_no_descriptor(
    tmp_path: Path,
) -> None:
    fill(tmp_path)
    with opened(tmp_path) as log:
        bases = segment_bases(tmp_path)
        log.trim_before(bases[2])
        checkpoint = read_checkpoint(tmp_path)
        assert checkpoint is not None and checkpoint.log_start_offset == bases[2]
        assert checkpoint.newest_segment == bases[-1]
        assert read_epoch_checkpoint(tmp_path) == log.epoch_cache()
        before = open_descriptors()
        log.reset_to_snapshot(StartSnapshot(offset=499, epoch=4, timestamp=T0, checksum="a"))
        assert open_descriptors() == before  # the old active segment's descriptor is closed
        checkpoint = read_checkpoint(tmp_path)
        assert checkpoint is not None
        assert (checkpoint.log_start_offset, checkpoint.newest_segment) == (500, 500)
        assert read_epoch_checkpoint(tmp_path) == []


def test_an_interrupted_reset_says_it_finished_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fill(tmp_path)
    write_start_snapshot(tmp_path, StartSnapshot(offset=499, epoch=4, timestamp=T0, checksum="a"))
    with caplog.at_level(logging.INFO, logger="metadata_log"), opened(tmp_path) as log:
        assert (log.log_start_offset, log.end_offset) == (500, 500)
    assert "finishing the log reset to offset 500 that a crash interrupted" in caplog.text


def test_a_log_without_a_readable_checkpoint_starts_at_its_first_segment(tmp_path: Path) -> None:
    """No checkpoint to read (damaged, or removed) means a start of 0: a second segment at offset
    1 does not make the first one a trim's leftover, for `verify` or an open up to the damage."""
    now = [T0]
    for n in range(3):
        with MetadataLog.open(tmp_path, config=CONFIG, clock_ms=lambda: now[0]) as log:
            log.append([config(f"s{n}", 0)])
        now[0] += CONFIG.segment_ms
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"garbage")
    report = verify_log(tmp_path)
    assert [s.info.base_offset for s in report.segments] == [0, 1, 2]
    assert report.entries == 3 and not report.ok
    assert "the checkpoint file is damaged" in str(report.problems[0])
    (tmp_path / CHECKPOINT_NAME).unlink()
    with LogReader.open_up_to_damage(tmp_path, config=CONFIG) as log:
        assert log.damage is not None and "checkpoint file is missing" in str(log.damage)
        assert log.log_start_offset == 0
        assert [s.base_offset for s in log.segments()] == [0, 1, 2]
        assert [e.offset for e in log.read()] == [0, 1, 2]
    assert segment_bases(tmp_path) == [0, 1, 2]


def test_a_reader_opened_while_a_trim_removes_its_first_segment_lists_the_log_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A reader beside a serving writer (online retention trims as it serves): the segment it
    # listed is gone when it opens it; it opens the log as it now is, never fails for it.
    directory = tmp_path / "log"
    build(directory, 4)  # segments at 0, 3, 6, 9
    real = Segment.open_header.__func__  # type: ignore[attr-defined]
    with MetadataLog.open(directory, config=CONFIG) as writer:
        trimmed: list[object] = []

        def open_header(cls: type[Segment], path: Path, base: int) -> Segment:
            if not trimmed:  # the reader listed the segments: the trim runs now
                trimmed.append(writer.trim_before(5))
            return real(cls, path, base)  # type: ignore[no-any-return]

        monkeypatch.setattr(Segment, "open_header", classmethod(open_header))
        with LogReader.open(directory, config=CONFIG) as log:
            assert log.log_start_offset == 3
            assert [e.offset for e in log.read()] == list(range(3, 12))


@pytest.mark.parametrize("up_to_damage", [False, True])
def test_a_reader_that_read_the_old_start_before_a_trim_opens_the_log_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, up_to_damage: bool
) -> None:
    # The other order: the reader read the checkpoints, then the trim named the new start and
    # deleted the segments below it before the reader listed them. The log looks as if its
    # first segments were missing; the start moved meanwhile, so the reader opens it again.
    directory = tmp_path / "log"
    build(directory, 4)  # segments at 0, 3, 6, 9
    real = read_checkpoint  # the name the storage module reads them with
    with MetadataLog.open(directory, config=CONFIG) as writer:
        trimmed: list[object] = []

        def read_then_trim(path: Path) -> Checkpoint | None:
            read = real(path)
            if not trimmed:  # the reader has the old start: the trim runs now
                trimmed.append(writer.trim_before(5))
            return read

        monkeypatch.setattr(storage_module, "read_checkpoint", read_then_trim)
        opener = LogReader.open_up_to_damage if up_to_damage else LogReader.open
        with opener(directory, config=CONFIG) as log:
            assert len(trimmed) == 1 and log.damage is None
            assert log.log_start_offset == 3
            assert [e.offset for e in log.read()] == list(range(3, 12))


def test_a_reader_still_reports_segments_missing_when_no_trim_moved_the_start(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "log"
    build(directory, 4)
    (directory / segment_name(0)).unlink()  # gone, and the checkpoints still say 0
    with pytest.raises(LogCorruptionError, match="segments before it are missing"):
        LogReader.open(directory, config=CONFIG)
