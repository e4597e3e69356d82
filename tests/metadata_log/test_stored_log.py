"""What the log serves besides entries: record byte counts, stored block bodies, record blocks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from metadata_log import LogConfig, LogCorruptionError, MetadataLog
from metadata_log.container import RawBlock
from metadata_log.reader import LogReader
from metadata_log.segment import Segment
from records import ConfigRecord, ConfigResourceType, LogEntry
from records.codec import DEFAULT_CODEC

CONFIG = LogConfig(segment_ms=1000)
T0 = 1_700_000_000_000


def config(tag: str, i: int) -> ConfigRecord:
    """A small record naming its batch and position."""
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name=tag, name=str(i), value="v" * i
    )


@dataclass(frozen=True, slots=True)
class Block:
    """A stored block: its segment's base offset, first offset and raw block."""

    base: int
    first: int
    raw: RawBlock


@dataclass(frozen=True, slots=True)
class Built:
    directory: Path
    entries: list[LogEntry]
    blocks: list[Block]


@pytest.fixture
def built(tmp_path: Path) -> Built:
    """Two segments (0 and 9) of three blocks each: 2, 3 and 4 entries."""
    directory = tmp_path / "log"
    now = [T0]
    with MetadataLog.open(directory, config=CONFIG, clock_ms=lambda: now[0]) as log:
        for n in range(6):
            if n == 3:
                now[0] += CONFIG.segment_ms
            log.append([config(f"b{n}", i) for i in range(2 + n % 3)])
        entries = list(log.read())
        infos = log.segments()
    assert [s.base_offset for s in infos] == [0, 9]
    found = []
    for info in infos:
        segment = Segment.open_header(info.path, info.base_offset)
        first = info.base_offset
        for raw in segment.iter_blocks(segment.header.size, info.path.stat().st_size):
            found.append(Block(info.base_offset, first, raw))
            first += raw.count
    assert [b.raw.count for b in found] == [2, 3, 4, 2, 3, 4]
    return Built(directory, entries, found)


def test_record_bytes_count_whole_uncompressed_blocks(built: Built) -> None:
    sizes = [len(b.raw.body) for b in built.blocks]
    with LogReader.open(built.directory, config=CONFIG) as log:
        assert log.record_bytes_appended == 0  # none appended by this open
        assert log.record_bytes_after(-1) == sum(sizes)
        for i, block in enumerate(built.blocks):
            rest = sum(sizes[i:])
            assert log.record_bytes_after(block.first - 1) == rest  # from its first entry
            assert log.record_bytes_after(block.first) == (
                rest if block.raw.count > 1 else rest - sizes[i]
            )  # from inside it: it counts whole
        assert log.record_bytes_after(7) == sum(sizes[2:])  # a segment's last but one entry
        assert log.record_bytes_after(17) == 0 and log.record_bytes_after(40) == 0
        # A limit stops the count at the first whole block that reaches it.
        assert log.record_bytes_after(-1, limit=1) == sizes[0]
        assert log.record_bytes_after(-1, limit=sizes[0]) == sizes[0]
        assert log.record_bytes_after(-1, limit=sizes[0] + 1) == sizes[0] + sizes[1]
        assert log.record_bytes_after(8, limit=1) == sizes[3]


def test_record_bytes_appended_counts_this_opens_appends(built: Built) -> None:
    with MetadataLog.open(built.directory, config=CONFIG) as log:
        before = log.record_bytes_after(-1)
        log.append([config("x", i) for i in range(3)])
        log.append([config("y", 1)])
        assert log.record_bytes_appended == log.record_bytes_after(-1) - before
        assert log.record_bytes_appended == log.record_bytes_after(17)


def test_block_bodies_are_the_stored_blocks_of_one_segment(built: Built) -> None:
    blocks = built.blocks
    schema = DEFAULT_CODEC.entry_schema_json
    with LogReader.open(built.directory, config=CONFIG) as log:
        # From the block holding `start`, within its segment, up to `last` or `max_entries`.
        assert log.block_bodies(start=0, last=17, max_entries=100) == (
            schema,
            9,
            b"".join(b.raw.body for b in blocks[:3]),
        )
        assert log.block_bodies(start=3, last=17, max_entries=100) == (
            schema,
            7,
            blocks[1].raw.body + blocks[2].raw.body,
        )
        assert log.block_bodies(start=3, last=4, max_entries=100) == (schema, 3, blocks[1].raw.body)
        assert log.block_bodies(start=2, last=4, max_entries=100) == (schema, 3, blocks[1].raw.body)
        assert log.block_bodies(start=3, last=5, max_entries=100)[1] == 7
        assert log.block_bodies(start=0, last=17, max_entries=2) == (schema, 2, blocks[0].raw.body)
        assert log.block_bodies(start=0, last=17, max_entries=3)[1] == 5
        assert log.block_bodies(start=9, last=17, max_entries=5) == (
            schema,
            5,
            blocks[3].raw.body + blocks[4].raw.body,
        )
        assert log.block_bodies(start=17, last=17, max_entries=1) == (
            schema,
            4,
            blocks[5].raw.body,
        )
        assert log.block_bodies(start=18, last=30, max_entries=10) == (schema, 0, b"")


def test_block_bodies_and_record_blocks_stop_at_damage(built: Built) -> None:
    newest = built.directory / f"{9:020d}.avro"
    second = built.blocks[4].raw
    data = bytearray(newest.read_bytes())
    data[(second.position + second.end) // 2] ^= 0x10
    newest.write_bytes(bytes(data))
    with LogReader.open_up_to_damage(built.directory, config=CONFIG) as log:
        assert log.block_bodies(start=9, last=20, max_entries=100)[1] == 2
        assert log.block_bodies(start=0, last=8, max_entries=100)[1] == 9
        # From the damage on there is nothing to serve: the damage is raised, as `read`
        # raises it, not an empty answer a reader would take for "caught up".
        with pytest.raises(LogCorruptionError):
            log.block_bodies(start=11, last=20, max_entries=100)
        with pytest.raises(LogCorruptionError):
            list(log.read(gt=10))
        assert [b.first_offset for b in log.read_records(lte=10)] == [0, 2, 5, 9]
        with pytest.raises(LogCorruptionError):
            list(log.read_records(gt=8))


def test_record_blocks_are_trimmed_to_the_range(built: Built) -> None:
    with LogReader.open(built.directory, config=CONFIG) as log:
        blocks = list(log.read_records(gt=2, lte=10))
        assert [(b.first_offset, b.last_offset) for b in blocks] == [(3, 4), (5, 8), (9, 10)]
        records = [r for b in blocks for r in b.records]
        assert records == [e.record for e in built.entries[3:11]]
        ending_at_a_block = [(b.first_offset, b.last_offset) for b in log.read_records(lte=9)]
        assert ending_at_a_block == [(0, 1), (2, 4), (5, 8), (9, 9)]
        assert [b.first_offset for b in log.read_records()] == [0, 2, 5, 9, 11, 14]
        assert list(log.read_records(gt=17)) == []
