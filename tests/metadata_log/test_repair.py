"""The explicit repair: `truncate_after` cuts a damaged log, keeps what it removes, or refuses."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from metadata_log import (
    LogConfig,
    LogCorruptionError,
    LogError,
    LogLockedError,
    MetadataLog,
    RepairRefusedError,
    truncate_after,
    verify_log,
)
from metadata_log.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from metadata_log.container import RawBlock
from metadata_log.reader import LogReader
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
            f"{segment_name(18)[:-5]}.chain",
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
        LogReader.open(directory, config=CONFIG)
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


def test_the_report_and_note_say_what_was_moved_and_the_checkpoints_match(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    entries = build(directory)
    first = directory / segment_name(0)
    size = first.stat().st_size
    cut_at = blocks(first)[0].end
    with caplog.at_level("WARNING", logger="metadata_log"):
        report = truncate_after(directory, 2, force=True, reason="restored elsewhere")
    assert (report.after_offset, report.end_before) == (2, 27)
    assert report.moved == (
        f"{first.name}.from-byte-{cut_at}: bytes {cut_at}..{size - 1} of {first.name}",
        f"{segment_name(9)}: the whole segment",
        f"{segment_name(18)}: the whole segment",
    )
    note = (report.quarantine / "NOTE.txt").read_text().splitlines()
    assert "kept: offsets up to 2; the sound part of the log ended before offset 27" in note
    assert "reason: restored elsewhere" in note
    assert note[note.index("moved here:") + 1 :] == [f"  {m}" for m in report.moved]
    assert read_checkpoint(directory) == Checkpoint(
        log_start_offset=0, recovery_point=3, newest_segment=0
    )
    # The cut segment's indexes covered its old size: gone, rebuilt on the next open.
    assert not first.with_suffix(".index").exists()
    assert not first.with_suffix(".timeindex").exists()
    assert [r.getMessage() for r in caplog.records if r.name == "metadata_log"] == [
        f"truncated the log in {directory} after offset 2; removed data is in {report.quarantine}"
    ]
    reopen_and_append(directory, entries[:3])


def test_a_cut_at_a_segments_end_copies_nothing_of_it(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    entries = build(directory)
    report = truncate_after(directory, 17, force=True)
    assert report.moved == (f"{segment_name(18)}: the whole segment",)
    assert sorted(p.name for p in report.quarantine.iterdir()) == sorted(
        ["NOTE.txt", segment_name(18), f"{segment_name(18)[:-5]}.chain",
         f"{segment_name(18)[:-5]}.index", f"{segment_name(18)[:-5]}.timeindex"]
    )  # fmt: skip
    assert (directory / segment_name(9)).with_suffix(".index").exists()  # kept whole
    assert read_checkpoint(directory) == Checkpoint(
        log_start_offset=0, recovery_point=18, newest_segment=9
    )
    reopen_and_append(directory, entries[:18])


def test_a_cut_in_a_segment_a_killed_writer_left_without_indexes(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    entries = build(directory)
    newest = directory / segment_name(18)
    for suffix in (".index", ".timeindex"):
        newest.with_suffix(suffix).unlink()
    report = truncate_after(directory, 20, force=True)
    assert len(report.moved) == 1
    reopen_and_append(directory, entries[:21])


def test_cutting_everything_keeps_where_the_log_starts(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    directory.mkdir()
    write_checkpoint(
        directory, Checkpoint(log_start_offset=100, recovery_point=100, newest_segment=100)
    )
    with MetadataLog.open(directory, config=CONFIG) as log:
        for n in range(3):
            log.append([config(f"b{n}", i) for i in range(3)])
    report = truncate_after(directory, 99, force=True)
    assert report.moved == (f"{segment_name(100)}: the whole segment",)
    assert read_checkpoint(directory) == Checkpoint(
        log_start_offset=100, recovery_point=100, newest_segment=100
    )
    with MetadataLog.open(directory, config=CONFIG) as log:
        assert log.append([config("again", 0)]) == (100, 100)


def test_a_segment_whose_first_block_holds_one_entry_is_cut_after_it(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    now = [T0]
    with MetadataLog.open(directory, config=CONFIG, clock_ms=lambda: now[0]) as log:
        log.append([config("a", i) for i in range(3)])
        now[0] += CONFIG.segment_ms
        log.append([config("single", 0)])
        log.append([config("c", i) for i in range(2)])
        entries = list(log.read())
        assert [s.base_offset for s in log.segments()] == [0, 3]
    report = truncate_after(directory, 3, force=True)
    assert len(report.moved) == 1 and report.moved[0].startswith(segment_name(3))
    reopen_and_append(directory, entries[:4])


def test_a_missing_middle_segment_is_cut_before_the_gap(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    entries = build(directory)
    (directory / segment_name(9)).unlink()
    with pytest.raises(RepairRefusedError, match="sound only up to offset 8"):
        truncate_after(directory, 9)
    report = truncate_after(directory, 8)
    assert report.end_before == 9
    assert report.moved == (f"{segment_name(18)}: the whole segment",)
    reopen_and_append(directory, entries[:9])


def test_a_damaged_checkpoint_file_is_rewritten(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    entries = build(directory)
    (directory / "checkpoints").write_bytes(b"garbage\n")
    report = truncate_after(directory, 26)
    assert any("the checkpoint file is damaged" in p for p in report.problems)
    assert read_checkpoint(directory) == Checkpoint(
        log_start_offset=0, recovery_point=27, newest_segment=18
    )
    reopen_and_append(directory, entries)


def test_a_torn_tail_is_named_in_the_note(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    entries = build(directory)
    newest = directory / segment_name(18)
    last = blocks(newest)[-1]
    write_checkpoint(
        directory, Checkpoint(log_start_offset=0, recovery_point=18, newest_segment=18)
    )
    os.truncate(newest, last.position + 5)
    report = truncate_after(directory, 23)  # a torn tail is not a healthy log: no --force
    assert report.problems == ()
    note = (report.quarantine / "NOTE.txt").read_text()
    assert f"torn tail at byte {last.position}" in note
    assert "healthy" not in note  # it said "nothing: the log was healthy (forced)" too
    reopen_and_append(directory, entries[:24])


def test_refusals_say_what_would_work(tmp_path: Path) -> None:
    with pytest.raises(LogError, match=r"there is no log at .*; check --data-dir"):
        truncate_after(tmp_path / "nope", 0)
    directory = tmp_path / "log"
    build(directory)
    with pytest.raises(LogError, match="--after-offset must be -1 or more, got -2"):
        truncate_after(directory, -2, force=True)
    with pytest.raises(
        RepairRefusedError,
        match=r"would remove the acknowledged entries 12\.\.26; add --force",
    ):
        truncate_after(directory, 11)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RepairRefusedError, match="healthy and ends at offset -1: nothing to do"):
        truncate_after(empty, -1)


def test_two_repairs_in_the_same_second_get_their_own_quarantine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "log"
    build(directory)
    fixed = time.gmtime(T0 // 1000)
    monkeypatch.setattr(time, "gmtime", lambda *_: fixed)
    first_id = time.strftime("%Y%m%dT%H%M%SZ", fixed) + "-after-20"
    (directory / "quarantine" / first_id).mkdir(parents=True)
    report = truncate_after(directory, 20, force=True)
    assert report.quarantine == directory / "quarantine" / f"{first_id}.1"
    assert (report.quarantine / "NOTE.txt").exists()
    (directory / "quarantine" / f"{first_id}.2").mkdir()
    report = truncate_after(directory, 20, force=True)
    assert report.quarantine == directory / "quarantine" / f"{first_id}.3"


def test_a_cut_leaks_no_descriptor(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    before = len(os.listdir("/proc/self/fd"))
    truncate_after(directory, 20, force=True)
    assert len(os.listdir("/proc/self/fd")) == before
