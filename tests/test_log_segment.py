"""One segment file: its header, its scan problems, its bookkeeping of blocks and its epochs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metadata_log import LogConfig, MetadataLog
from metadata_log.container import (
    BASE_OFFSET_KEY,
    MAX_HEADER_BYTES,
    SYNC_SIZE,
    BlockDamage,
    encode_header,
)
from metadata_log.epoch import EPOCH_NAME
from metadata_log.segment import ScanProblem, Segment, decoder_failure, segment_name
from records import ConfigRecord, ConfigResourceType
from records.codec import DEFAULT_CODEC

SCHEMA = DEFAULT_CODEC.entry_schema_json


def config(tag: str, i: int) -> ConfigRecord:
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name=tag, name=str(i), value="v"
    )


def test_a_decoder_failure_is_its_type_and_the_start_of_its_message() -> None:
    assert decoder_failure(KeyError()) == "KeyError"
    assert decoder_failure(ValueError("bad\nvalue")) == "ValueError: bad value"
    assert decoder_failure(ValueError("x" * 160)) == "ValueError: " + "x" * 160
    assert decoder_failure(ValueError("x" * 161)) == "ValueError: " + "x" * 157 + "..."


def test_a_scan_problem_carries_what_the_scan_knew() -> None:
    problem = ScanProblem(12, "why", truncated=True, first_offset=4)
    assert str(problem) == "why" and problem.position == 12 and problem.reason == "why"
    assert problem.truncated and not problem.certain_damage and problem.first_offset == 4
    assert ScanProblem(0, "x", truncated=False).first_offset is None


def write_header(path: Path, base: int, extra: dict[str, bytes] | None = None) -> None:
    meta = {BASE_OFFSET_KEY: str(base).encode(), **(extra or {})}
    path.write_bytes(encode_header(SCHEMA, os.urandom(SYNC_SIZE), meta))


def test_a_header_larger_than_the_first_read_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / segment_name(0)
    write_header(path, 0, {"x.padding": b"p" * 100_000})  # past the first 64 KiB read
    segment = Segment.open_header(path, 0)
    assert segment.header.size == path.stat().st_size
    assert segment.info().max_timestamp == -1 and segment.is_empty


def test_a_header_past_its_bound_or_cut_is_damage(tmp_path: Path) -> None:
    path = tmp_path / segment_name(0)
    write_header(path, 0, {"x.padding": b"p" * MAX_HEADER_BYTES})
    with pytest.raises(BlockDamage, match=f"claims to be larger than {MAX_HEADER_BYTES} bytes"):
        Segment.open_header(path, 0)
    write_header(path, 0, {"x.padding": b"p" * 100_000})
    os.truncate(path, 90_000)
    with pytest.raises(BlockDamage, match="the file ends at byte 90000, inside it"):
        Segment.open_header(path, 0)


def test_a_segment_under_another_name_is_damage(tmp_path: Path) -> None:
    path = tmp_path / segment_name(7)
    write_header(path, 5)
    with pytest.raises(BlockDamage, match="header says base offset b'5', file name 7"):
        Segment.open_header(path, 7)


def test_blocks_are_indexed_every_interval_bytes(tmp_path: Path) -> None:
    segment = Segment.create(tmp_path, 10, SCHEMA)
    assert segment.info().max_timestamp == -1
    start = segment.header.size
    for position, first, timestamp in ((0, 10, 0), (99, 12, 5), (100, 14, 7), (250, 16, 7)):
        segment.note_block(
            position=start + position,
            end=start + position + 10,
            first_offset=first,
            count=2,
            timestamp=timestamp,
            interval=100,
        )
    # The first block always; then one 100 bytes or more after the last indexed one.
    assert segment.offset_index.keys == [10, 14, 16]
    assert segment.time_index.keys == [0, 7, 7]
    assert (segment.first_timestamp, segment.max_timestamp) == (0, 7)
    assert (segment.next_offset, segment.size) == (18, start + 260)


def test_the_epoch_goes_past_the_entries_even_when_its_file_is_lost(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    for _ in range(3):
        with MetadataLog.open(directory, config=LogConfig()) as log:
            log.append([config("a", 0)])
    with MetadataLog.open(directory, config=LogConfig(), read_only=True) as log:
        newest = max(e.epoch for e in log.read())
    assert newest == 3
    (directory / EPOCH_NAME).unlink()
    with MetadataLog.open(directory, config=LogConfig()) as log:
        assert log.epoch == 4


def test_reading_a_segment_leaks_no_descriptor(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with MetadataLog.open(directory, config=LogConfig()) as log:
        for n in range(3):
            log.append([config(f"b{n}", i) for i in range(2)])
    path = directory / segment_name(0)
    fds = len(os.listdir("/proc/self/fd"))
    segment = Segment.open_header(path, 0)
    assert len(list(segment.iter_blocks(segment.header.size, path.stat().st_size))) == 3
    created = Segment.create(tmp_path, 50, SCHEMA)
    assert created.is_empty
    assert len(os.listdir("/proc/self/fd")) == fds
