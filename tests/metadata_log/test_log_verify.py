"""`verify_log`: what it reports of torn tails, sealed segments, headers, checkpoints and bounds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metadata_log import LogConfig, MetadataLog, verify_log
from metadata_log.checkpoint import Checkpoint, write_checkpoint
from metadata_log.container import RawBlock
from metadata_log.segment import Segment, segment_name
from records import ConfigRecord, ConfigResourceType

CONFIG = LogConfig(segment_ms=1000)
T0 = 1_700_000_000_000


def config(tag: str, i: int) -> ConfigRecord:
    """A small record naming its batch and position."""
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name=tag, name=str(i), value="v"
    )


def build(directory: Path, segments: int = 3) -> None:
    """`segments` segments (0, 9, 18, ...) of three batches of three records each."""
    now = [T0]
    with MetadataLog.open(directory, config=CONFIG, clock_ms=lambda: now[0]) as log:
        for n in range(3 * segments):
            if n and n % 3 == 0:
                now[0] += CONFIG.segment_ms
            log.append([config(f"b{n}", i) for i in range(3)])


def blocks(path: Path) -> list[RawBlock]:
    """The blocks of a segment file."""
    segment = Segment.open_header(path, int(path.stem))
    return list(segment.iter_blocks(segment.header.size, path.stat().st_size))


def tear(directory: Path, base: int, *, recovery_point: int) -> RawBlock:
    """Cut segment `base` inside its last block, as a crash before its fsync leaves it."""
    path = directory / segment_name(base)
    last = blocks(path)[-1]
    write_checkpoint(
        directory,
        Checkpoint(log_start_offset=0, recovery_point=recovery_point, newest_segment=base),
    )
    os.truncate(path, last.position + 7)
    return last


def test_a_torn_tail_past_the_recovery_point_is_reported_not_damage(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    # The torn block's first offset is exactly the recovery point: still past the durable part.
    last = tear(directory, 18, recovery_point=24)
    report = verify_log(directory)
    assert report.ok and report.errors == []
    assert report.entries == 24
    assert report.torn_tail is not None
    newest = directory / segment_name(18)
    assert report.torn_tail.startswith(f"segment {newest}: torn tail at byte {last.position} (")
    assert "the file ends inside the block" in report.torn_tail
    assert report.torn_tail.endswith("; 3 entries, never acknowledged would be dropped")


def test_a_torn_tail_below_the_recovery_point_is_damage(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    last = tear(directory, 18, recovery_point=25)
    report = verify_log(directory)
    assert not report.ok and report.torn_tail is None
    (error,) = report.errors
    assert error.position == last.position and error.first_offset == 24
    assert "it looks torn (the file ends inside the block), but the checkpoints say " in str(error)
    assert "offsets up to 24 were durable" in str(error)


def test_without_checkpoints_a_torn_first_block_is_a_torn_tail(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with MetadataLog.open(directory, config=CONFIG) as log:
        log.append([config("a", i) for i in range(2)])
    (directory / "checkpoints").unlink()  # a log from before checkpoints: recovery point 0
    os.truncate(directory / segment_name(0), blocks(directory / segment_name(0))[0].position + 3)
    report = verify_log(directory)
    assert report.torn_tail is not None and report.entries == 0
    assert "2 entries, never acknowledged" in report.torn_tail


def test_a_cut_sealed_segment_is_damage_never_a_torn_tail(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    sealed = directory / segment_name(9)
    last = blocks(sealed)[-1]
    os.truncate(sealed, last.position + 7)
    report = verify_log(directory)
    assert report.torn_tail is None
    errors = [e for e in report.errors if e.segment == sealed]
    assert len(errors) == 1 and "a sealed segment is never torn" in str(errors[0])
    assert errors[0].position == last.position


def test_a_damaged_header_is_reported_once_at_byte_0(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory)
    middle = directory / segment_name(9)
    data = bytearray(middle.read_bytes())
    data[30] ^= 0x10
    middle.write_bytes(bytes(data))
    report = verify_log(directory)
    # One problem: the header. The segments around it are not compared with each other.
    (error,) = report.errors
    assert error.segment == middle and error.position == 0 and error.first_offset == 9
    assert "bad segment header" in str(error)
    damaged = report.segments[1]
    assert damaged.entries == 0 and damaged.info.max_timestamp == -1
    assert damaged.info.next_offset == 9 and damaged.info.size_bytes == len(data)
    assert [s.entries for s in report.segments] == [9, 0, 9]


def test_a_damaged_checkpoint_file_is_reported(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    build(directory, segments=1)
    (directory / "checkpoints").write_bytes(b"mlog-checkpoints 1\n")
    report = verify_log(directory)
    assert not report.ok
    error = report.errors[0]
    assert error.segment == directory / "checkpoints" and error.position == 0
    assert "the checkpoint file is damaged: it has no crc32 line" in str(error)


@pytest.mark.parametrize("cut", [0, 1, 2])
def test_sizes_bound_the_bytes_checked(tmp_path: Path, cut: int) -> None:
    directory = tmp_path / "log"
    build(directory)
    newest = blocks(directory / segment_name(18))
    write_checkpoint(
        directory, Checkpoint(log_start_offset=0, recovery_point=18, newest_segment=18)
    )
    report = verify_log(directory, sizes={18: newest[cut].end, 4: 0})
    assert report.ok and report.torn_tail is None
    assert report.entries == 18 + 3 * (cut + 1)
    # A bound past the file's end is the file's size.
    assert verify_log(directory, sizes={18: 1 << 40}).entries == 27
