"""The explicit repair: `truncate_after` cuts a damaged log, keeps what it removes, or refuses."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metadata_log import (
    LogConfig,
    LogCorruptionError,
    LogLockedError,
    MetadataLog,
    RepairRefusedError,
    truncate_after,
    verify_log,
)
from metadata_log.container import RawBlock
from metadata_log.segment import Segment, segment_name
from records import ConfigRecord, ConfigResourceType, LogEntry

CONFIG = LogConfig(segment_ms=1000)
T0 = 1_700_000_000_000


def config(tag: str, i: int) -> ConfigRecord:
    """A small record naming its batch and position."""
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name=tag, name=str(i), value="v"
    )


def build(directory: Path) -> list[LogEntry]:
    """Three segments (0, 9, 18) of three batches of three records each."""
    now = [T0]
    with MetadataLog.open(directory, config=CONFIG, clock_ms=lambda: now[0]) as log:
        for n in range(9):
            if n in (3, 6):
                now[0] += CONFIG.segment_ms
            log.append([config(f"b{n}", i) for i in range(3)], principal=f"User:{n}")
        assert [s.base_offset for s in log.segments()] == [0, 9, 18]
        return list(log.read())


def blocks(path: Path) -> list[RawBlock]:
    """The blocks of a segment file."""
    segment = Segment.open_header(path, int(path.stem))
    return list(segment.iter_blocks(segment.header.size, path.stat().st_size))


def flip(path: Path, position: int) -> None:
    """Flip one bit at `position`."""
    data = bytearray(path.read_bytes())
    data[position] ^= 0x10
    path.write_bytes(bytes(data))


def reopen_and_append(directory: Path, expected: list[LogEntry]) -> None:
    """The repaired log opens, holds `expected` exactly, verifies and takes appends after it."""
    assert verify_log(directory).ok
    with MetadataLog.open(directory, config=CONFIG) as log:
        assert list(log.read()) == expected
        assert log.append([config("after", 0)]) == (len(expected), len(expected))
    assert verify_log(directory).ok


def test_a_healthy_log_is_cut_only_when_forced(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    entries = build(directory)
    with pytest.raises(RepairRefusedError, match="add --force"):
        truncate_after(directory, 11)
    with pytest.raises(RepairRefusedError, match="nothing to do"):
        truncate_after(directory, 26)
    assert not (directory / "quarantine").exists()
    newest = directory / segment_name(18)
    removed_bytes = newest.read_bytes()
    report = truncate_after(directory, 11, force=True)
    assert report.problems == ()
    # Segment 9 is cut after its first block; 18 goes whole.
    assert sorted(p.name for p in report.quarantine.iterdir()) == sorted(
        [
            "NOTE.txt",
            f"{segment_name(9)}.from-byte-{blocks(directory / segment_name(9))[0].end}",
            segment_name(18),
            f"{segment_name(18)[:-5]}.index",
            f"{segment_name(18)[:-5]}.timeindex",
        ]
    )
    assert (report.quarantine / segment_name(18)).read_bytes() == removed_bytes
    note = (report.quarantine / "NOTE.txt").read_text()
    assert "mlog log truncate --after-offset 11 --force" in note
    assert "nothing: the log was healthy (forced)" in note
    assert "when: " in note and "by: pid" in note
    reopen_and_append(directory, entries[:12])


def test_an_offset_inside_a_block_is_refused_naming_the_boundaries(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    with pytest.raises(RepairRefusedError, match=r"use --after-offset 11 or 14"):
        truncate_after(directory, 13, force=True)


def test_damage_in_the_newest_segment_is_cut_away_and_kept(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    entries = build(directory)
    newest = directory / segment_name(18)
    second = blocks(newest)[1]
    original = newest.read_bytes()
    flip(newest, (second.position + second.end) // 2)
    with pytest.raises(LogCorruptionError) as info:
        MetadataLog.open(directory, config=CONFIG)
    assert "--after-offset 20" in str(info.value)
    with pytest.raises(RepairRefusedError, match="sound only up to offset 20"):
        truncate_after(directory, 23)
    report = truncate_after(directory, 20)
    assert len(report.problems) == 1 and "damaged at byte" in report.problems[0]
    kept = report.quarantine / f"{newest.name}.from-byte-{second.position}"
    damaged = bytearray(original)
    damaged[(second.position + second.end) // 2] ^= 0x10
    assert kept.read_bytes() == bytes(damaged[second.position :])
    assert newest.read_bytes() == original[: second.position]
    reopen_and_append(directory, entries[:21])


@pytest.mark.parametrize("how", ["deleted", "empty", "bad-header"])
def test_a_lost_newest_segment_is_accepted_by_cutting_before_it(tmp_path: Path, how: str) -> None:
    directory = tmp_path / "log"
    entries = build(directory)
    newest = directory / segment_name(18)
    if how == "deleted":
        newest.unlink()
    elif how == "empty":
        os.truncate(newest, 0)
    else:
        flip(newest, 30)
    with pytest.raises(LogCorruptionError) as info:
        MetadataLog.open(directory, config=CONFIG, read_only=True)
    assert "--after-offset 17" in str(info.value)
    report = truncate_after(directory, 17)
    assert report.problems
    assert not newest.exists()
    reopen_and_append(directory, entries[:18])


def test_a_missing_first_segment_cannot_be_cut_away(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    (directory / segment_name(0)).unlink()
    with pytest.raises(RepairRefusedError, match="restore the missing segments"):
        truncate_after(directory, 20)


def test_a_missing_checkpoint_file_is_rewritten_by_a_cut_at_the_end(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    entries = build(directory)
    (directory / "checkpoints").unlink()
    report = truncate_after(directory, 26)
    assert report.moved == ()
    reopen_and_append(directory, entries)


def test_cutting_everything_leaves_an_empty_log(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    truncate_after(directory, -1, force=True)
    assert not list(directory.glob("*.avro"))
    reopen_and_append(directory, [])


def test_the_repair_takes_the_writer_lock(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    with MetadataLog.open(directory, config=CONFIG), pytest.raises(LogLockedError):
        truncate_after(directory, 5, force=True)
