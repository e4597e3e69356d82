"""One segment file: its header, its scan problems, its bookkeeping of blocks and its epochs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metadata_log import LogConfig, LogCorruptionError, MetadataLog
from metadata_log.container import (
    BASE_OFFSET_KEY,
    MAX_HEADER_BYTES,
    SYNC_SIZE,
    BlockDamage,
    encode_block,
    encode_header,
)
from metadata_log.epoch import EPOCH_NAME
from metadata_log.index import OFFSET_MAGIC, TIME_MAGIC, IndexFooter, SparseIndex
from metadata_log.reader import LogReader
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
            epoch=first,
            timestamp=timestamp,
            interval=100,
        )
    # The first block always; then one 100 bytes or more after the last indexed one.
    assert segment.offset_index.keys == [10, 14, 16]
    assert segment.time_index.keys == [0, 7, 7]
    assert (segment.first_timestamp, segment.max_timestamp) == (0, 7)
    assert segment.last_epoch == 16  # the last block's
    assert (segment.next_offset, segment.size) == (18, start + 260)


def test_the_epoch_goes_past_the_entries_even_when_its_file_is_lost(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    for _ in range(3):
        with MetadataLog.open(directory, config=LogConfig()) as log:
            log.append([config("a", 0)])
    with LogReader.open(directory, config=LogConfig()) as log:
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


def entries_body(first: int, n: int) -> bytes:
    """The body of a block of `n` entries from offset `first`, as the writer encodes it."""
    records = tuple(config("c", i) for i in range(n))
    _, body = DEFAULT_CODEC.encode_batches(
        [(records, None)], first_offset=first, epoch=1, timestamp=1_700_000_000_000
    )
    return body


def crafted(tmp_path: Path, *blocks: tuple[int, bytes]) -> tuple[Segment, list[int]]:
    """A segment at 0 holding blocks (count, body), each framed with a valid CRC."""
    created = Segment.create(tmp_path, 0, SCHEMA)
    positions = []
    with open(created.path, "ab") as f:
        for count, body in blocks:
            positions.append(f.tell())
            f.write(encode_block(count, body) + created.header.sync)
    return Segment.open_header(created.path, 0), positions


def scan(segment: Segment) -> ScanProblem | None:
    return segment.recover_scan(segment.path.stat().st_size, 4096, DEFAULT_CODEC)


def test_a_count_the_next_block_contradicts_is_certain_damage(tmp_path: Path) -> None:
    segment, at = crafted(tmp_path, (3, entries_body(0, 2)), (1, entries_body(2, 1)))
    problem = scan(segment)
    assert problem is not None and problem.position == at[0]
    assert (
        problem.reason
        == "block claims 3 entries from offset 0, but the next block starts at offset 2"
    )
    assert problem.certain_damage and not problem.truncated and problem.first_offset == 0


def test_a_first_block_at_the_wrong_offset_is_certain_damage(tmp_path: Path) -> None:
    segment, at = crafted(tmp_path, (2, entries_body(5, 2)))
    problem = scan(segment)
    assert problem is not None and problem.position == at[0]
    assert problem.reason == "block starts at offset 5, expected 0"
    assert problem.certain_damage and not problem.truncated and problem.first_offset == 0


def test_a_block_that_does_not_start_with_an_offset_is_certain_damage(tmp_path: Path) -> None:
    segment, at = crafted(tmp_path, (1, b"\xff" * 11))
    problem = scan(segment)
    assert problem is not None and problem.position == at[0]
    assert problem.reason == "the block's first entry does not start with an offset"
    assert problem.certain_damage and not problem.truncated and problem.first_offset == 0
    segment, at = crafted(tmp_path, (2, entries_body(0, 2)), (1, b"\xff" * 11))
    problem = scan(segment)
    assert problem is not None and problem.position == at[1] and problem.first_offset is None
    assert problem.certain_damage and not problem.truncated


def test_a_last_block_that_does_not_decode_is_certain_damage(tmp_path: Path) -> None:
    segment, at = crafted(tmp_path, (2, entries_body(0, 2)), (3, entries_body(2, 2)))
    problem = scan(segment)
    assert problem is not None and problem.position == at[1] and problem.first_offset == 2
    assert problem.certain_damage and not problem.truncated
    assert segment.next_offset == 2  # the first block was noted


def test_a_block_whose_offsets_skip_is_damage(tmp_path: Path) -> None:
    segment, at = crafted(tmp_path, (2, entries_body(0, 1) + entries_body(7, 1)))
    problem = scan(segment)
    assert problem is not None and problem.position == at[0] and problem.first_offset == 0
    assert problem.reason == "block holds offsets 0..7, expected from 0"
    assert problem.certain_damage


def save(
    segment: Segment,
    offsets: list[tuple[int, int]],
    times: list[tuple[int, int]],
    footer: IndexFooter,
    time_footer: IndexFooter | None = None,
) -> None:
    """Write the segment's two index files from (key, value) pairs."""
    for path, magic, pairs, foot in (
        (segment.index_path, OFFSET_MAGIC, offsets, footer),
        (segment.time_index_path, TIME_MAGIC, times, time_footer or footer),
    ):
        index = SparseIndex()
        for key, value in pairs:
            index.add(key, value)
        index.save(path, magic, foot)


def test_an_index_is_adopted_only_if_every_field_agrees_with_the_file(tmp_path: Path) -> None:
    segment, at = crafted(tmp_path, (2, entries_body(0, 2)), (1, entries_body(2, 1)))
    size = segment.path.stat().st_size
    good = IndexFooter(size, 3, 1_700_000_000_000)
    offsets, times = [(0, at[0]), (2, at[1])], [(1_700_000_000_000, 0), (1_700_000_000_000, 2)]

    def adopted(**kwargs: object) -> bool:
        save(segment, **{"offsets": offsets, "times": times, "footer": good, **kwargs})  # type: ignore[arg-type]
        return Segment.open_header(segment.path, 0).load_indexes(size)

    assert adopted()
    assert not adopted(time_footer=IndexFooter(size, 3, 1))  # the two footers differ
    assert not adopted(footer=IndexFooter(size - 1, 3, 1_700_000_000_000))  # another size
    assert not adopted(footer=IndexFooter(size, -1, 1_700_000_000_000))  # ends before its base
    assert not adopted(times=times[:1])  # one index longer than the other
    assert not adopted(offsets=[(1, at[0]), (2, at[1])])  # does not start at the base
    assert not adopted(offsets=[(0, at[0] - 1), (2, at[1])])  # points into the header
    assert not adopted(offsets=[(0, at[1]), (2, at[0])])  # positions out of order
    assert not adopted(offsets=[(0, at[0]), (2, size)])  # a position at the end of the file
    assert adopted(offsets=[(0, at[0]), (2, size - 1)])


def test_an_empty_segments_indexes_are_adopted(tmp_path: Path) -> None:
    segment = Segment.create(tmp_path, 4, SCHEMA)
    size = segment.path.stat().st_size
    save(segment, [], [], IndexFooter(size, 4, -1))
    loaded = Segment.open_header(segment.path, 4)
    assert loaded.load_indexes(size) and loaded.is_empty and loaded.max_timestamp == -1


def test_a_scan_tells_a_cut_block_from_a_damaged_one(tmp_path: Path) -> None:
    segment, at = crafted(tmp_path, (2, entries_body(0, 2)), (2, entries_body(2, 2)))
    size = segment.path.stat().st_size
    header = segment.header.size

    def problem(end: int) -> ScanProblem:
        with pytest.raises(ScanProblem) as info:
            list(Segment.open_header(segment.path, 0).iter_blocks(header, end))
        return info.value

    cut = problem(size - 5)  # inside the last block: it claims to end past the data
    assert cut.truncated and cut.position == at[1]
    assert cut.reason == (
        f"incomplete block: it claims to end at byte {size}, past the end of the data at "
        f"byte {size - 5}"
    )
    head = problem(at[1] + 1)  # only its count is there
    assert head.truncated and head.position == at[1] and head.reason.startswith("incomplete ")
    data = bytearray(segment.path.read_bytes())
    data[(at[1] + size) // 2] ^= 0x01
    segment.path.write_bytes(bytes(data))
    damaged = problem(size)
    assert not damaged.truncated and damaged.position == at[1]


def test_reading_a_block_whose_offsets_skip_raises(tmp_path: Path) -> None:
    segment, _ = crafted(
        tmp_path, (2, entries_body(0, 2)), (2, entries_body(2, 1) + entries_body(9, 1))
    )
    assert scan(segment) is not None  # the scan stops at it
    with pytest.raises(LogCorruptionError, match=r"block holds offsets 2\.\.9, expected from 2"):
        list(segment.entries(DEFAULT_CODEC, 0, segment.path.stat().st_size))


def test_a_segment_that_cannot_be_written_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("metadata_log.segment.write_all", full_disk)
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError, match="No space left"):
        Segment.create(tmp_path, 0, SCHEMA)
    assert list(tmp_path.iterdir()) == []
    assert len(os.listdir("/proc/self/fd")) == fds
