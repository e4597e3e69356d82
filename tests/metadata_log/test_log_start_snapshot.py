"""A quorum log reset to start after an installed snapshot, and its `log-start-snapshot`."""

from __future__ import annotations

from pathlib import Path

import pytest

from metadata_log import LogError
from metadata_log.start_snapshot import (
    START_SNAPSHOT_NAME,
    StartSnapshot,
    read_start_snapshot,
    write_start_snapshot,
)
from tests.support.replica_logs import T0, block_of, opened, opened_reader
from tests.support.trim_logs import fill, segment_bases

SNAP = StartSnapshot(offset=499, epoch=4, timestamp=T0 + 499, checksum="ab" * 32)


def test_a_reset_leaves_an_empty_log_after_the_snapshot_and_survives_a_reopen(
    tmp_path: Path,
) -> None:
    fill(tmp_path)
    with opened(tmp_path) as log:
        log.reset_to_snapshot(SNAP)
        assert (log.log_start_offset, log.end_offset, log.epoch_cache()) == (500, 500, [])
        assert log.start_snapshot == SNAP
        log.write_blocks([block_of(log, 500, 3, 5)], check=False)
        log.flush()
    assert segment_bases(tmp_path) == [500]
    with opened(tmp_path) as log:
        assert (log.log_start_offset, log.end_offset, log.epoch_cache()) == (500, 503, [(5, 500)])
        assert log.start_snapshot == SNAP
        assert [e.offset for e in log.read()] == [500, 501, 502]
    with opened_reader(tmp_path) as log:
        assert log.start_snapshot == SNAP and log.verify().ok


def test_a_reset_behind_the_log_end_drops_the_divergent_tail_too(tmp_path: Path) -> None:
    fill(tmp_path)
    with opened(tmp_path) as log:
        log.reset_to_snapshot(StartSnapshot(offset=52, epoch=1, timestamp=T0, checksum="c"))
        assert (log.log_start_offset, log.end_offset) == (53, 53)
    assert segment_bases(tmp_path) == [53]


@pytest.mark.parametrize("stage", ["intent only", "tail deleted", "new segment"])
def test_an_interrupted_reset_is_finished_by_the_next_writer(tmp_path: Path, stage: str) -> None:
    fill(tmp_path)
    write_start_snapshot(tmp_path, SNAP)
    if stage != "intent only":
        for base in segment_bases(tmp_path)[-1:]:
            (tmp_path / f"{base:020d}.avro").unlink()
    if stage == "new segment":
        from metadata_log.segment import Segment
        from records.codec import DEFAULT_CODEC

        Segment.create(tmp_path, 500, DEFAULT_CODEC.entry_schema_json)
    with pytest.raises(LogError, match="interrupted"), opened_reader(tmp_path):
        pass
    with opened(tmp_path) as log:
        assert (log.log_start_offset, log.end_offset, log.start_snapshot) == (500, 500, SNAP)
    assert segment_bases(tmp_path) == [500]


def test_the_file_is_checked(tmp_path: Path) -> None:
    write_start_snapshot(tmp_path, SNAP)
    assert read_start_snapshot(tmp_path) == SNAP
    path = tmp_path / START_SNAPSHOT_NAME
    path.write_bytes(path.read_bytes().replace(b"epoch 4", b"epoch 5"))
    fill(tmp_path / "log")
    (tmp_path / "log" / START_SNAPSHOT_NAME).write_bytes(path.read_bytes())
    with pytest.raises(LogError, match="damaged"), opened(tmp_path / "log"):
        pass
