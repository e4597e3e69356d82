"""`trim_before` and `reset_to_snapshot`'s rules one at a time (what a mutation run found unpinned).

`tests/metadata_log/test_log_trim.py` and `tests/metadata_log/test_log_start_snapshot.py` trim
and reset logs end to end; these pin the refusals, the log lines, the epoch cache a new start
clips, and a reset to the base of a segment the log already has.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from metadata_log import LogError, MetadataLog
from metadata_log.checkpoint import CHECKPOINT_NAME, read_checkpoint
from metadata_log.epoch import read_epoch_checkpoint
from metadata_log.epoch_cache import epochs_from as _epochs_from
from metadata_log.extent import trimmed_leftovers
from metadata_log.reader import LogReader
from metadata_log.start_snapshot import StartSnapshot, write_start_snapshot
from metadata_log.verify import verify_log
from tests.support.replica_logs import T0, block_of, opened, opened_reader
from tests.support.trim_logs import CONFIG, build, config, fill, segment_bases


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
