"""Torn or damaged: `judge_tail`'s verdict on the bytes from a bad block to the end of the file.

Each case is made on a real segment file, as a crash or a flipped bit leaves it; the sweeps of
`test_integrity.py` and the crash tests of `test_crash.py` check the same verdicts through the
log's open, these check each verdict and the words it gives directly.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from string import ascii_letters

import pytest

from metadata_log import LogConfig, MetadataLog
from metadata_log.container import SYNC_SIZE, RawBlock
from metadata_log.segment import Segment
from metadata_log.tail import MIN_ZERO_RUN, TailVerdict, judge_tail
from records import ConfigRecord, ConfigResourceType
from records.varint import encode_long


@dataclass(frozen=True, slots=True)
class Built:
    """A one-segment log: a small block, a big one (several sectors), a small one."""

    path: Path
    sync: bytes
    blocks: list[RawBlock]


def build(directory: Path) -> Built:
    """Three blocks: 2 records, 20 records of about 3 KB in all, 1 record."""
    rng = random.Random(7)  # values snappy cannot shrink
    batches = [
        [("a", i, "v") for i in range(2)],
        [("big", i, "".join(rng.choice(ascii_letters) for _ in range(150))) for i in range(20)],
        [("c", 0, "v")],
    ]
    with MetadataLog.open(directory, config=LogConfig()) as log:
        for batch in batches:
            log.append(
                [
                    ConfigRecord(
                        resource_type=ConfigResourceType.TOPIC,
                        resource_name=tag,
                        name=str(i),
                        value=value,
                    )
                    for tag, i, value in batch
                ]
            )
        (info,) = log.segments()
    segment = Segment.open_header(info.path, 0)
    found = list(segment.iter_blocks(segment.header.size, info.path.stat().st_size))
    assert [b.count for b in found] == [2, 20, 1]
    assert found[1].end - found[1].position > 4 * 512
    return Built(info.path, segment.header.sync, found)


@pytest.fixture
def built(tmp_path: Path) -> Built:
    return build(tmp_path / "log")


def edit(path: Path, position: int, data: bytes) -> None:
    """Overwrite bytes of `path` at `position`."""
    content = bytearray(path.read_bytes())
    content[position : position + len(data)] = data
    path.write_bytes(bytes(content))


def judge(built: Built, block: RawBlock) -> TailVerdict:
    return judge_tail(built.path, built.sync, block.position, built.path.stat().st_size)


def test_a_file_ending_inside_the_last_block_is_torn(built: Built) -> None:
    last = built.blocks[1]
    os.truncate(built.path, last.position + 40)
    verdict = judge(built, last)
    assert verdict == TailVerdict(torn=True, why="the file ends inside the block", entries=20)
    assert verdict.dropped() == "20 entries, never acknowledged"


def test_one_entry_is_one_entry() -> None:
    assert TailVerdict(torn=True, why="", entries=1).dropped() == "1 entry, never acknowledged"
    assert TailVerdict(torn=True, why="", entries=None).dropped() == (
        "an incomplete block whose entry count was never written"
    )


def test_a_zeroed_sector_inside_a_block_that_ends_with_its_marker_is_torn(built: Built) -> None:
    big = built.blocks[1]
    os.truncate(built.path, big.end)  # the big block is the last one
    sector = (big.position // 512 + 2) * 512
    edit(built.path, sector, bytes(512))
    verdict = judge(built, big)
    assert verdict.torn and verdict.entries == 20
    assert verdict.why == f"the sector at byte {sector} was never written (all zeros)"


def test_a_block_never_written_at_all_has_no_count(built: Built) -> None:
    last = built.blocks[2]
    size = built.path.stat().st_size
    edit(built.path, last.position, bytes(size - last.position))
    verdict = judge(built, last)
    assert verdict.torn and verdict.entries is None
    # The first chunk of zeros long enough to count: from the block's start, or from the next
    # sector when fewer than MIN_ZERO_RUN bytes of its own sector are left.
    zero_at = last.position
    if -last.position % 512 < MIN_ZERO_RUN:
        zero_at += -last.position % 512
    assert verdict.why == f"the sector at byte {zero_at} was never written (all zeros)"


@pytest.mark.parametrize(("zeros", "torn"), [(SYNC_SIZE, True), (SYNC_SIZE - 1, False)])
def test_a_zero_chunk_counts_from_16_bytes(built: Built, zeros: int, torn: bool) -> None:
    # The file ends 16 (or 15) bytes into a sector, and those bytes are zeros: a sector edge
    # that short may be one set bit away from a written one.
    big = built.blocks[1]
    boundary = (big.end // 512 - 1) * 512
    os.truncate(built.path, boundary + zeros)
    edit(built.path, boundary, bytes(zeros))
    verdict = judge(built, big)
    assert verdict.torn
    assert ("was never written" in verdict.why) is torn
    if not torn:
        assert verdict.why == "the file ends inside the block"


def test_a_complete_block_with_a_flipped_bit_is_damage(built: Built) -> None:
    big = built.blocks[1]
    os.truncate(built.path, big.end)
    middle = (big.position + big.end) // 2
    edit(built.path, middle, bytes([built.path.read_bytes()[middle] ^ 0x04]))
    verdict = judge(built, big)
    assert verdict == TailVerdict(
        torn=False, why="the block is complete, so it was not torn by a crash", entries=20
    )


def test_a_size_claiming_past_the_end_of_a_file_ending_with_its_marker_is_damage(
    built: Built,
) -> None:
    last = built.blocks[2]
    count = encode_long(1)
    edit(built.path, last.position + len(count), encode_long(1 << 20))
    verdict = judge(built, last)
    assert verdict == TailVerdict(
        torn=False,
        why="the file ends with a sync marker, so the block was written whole",
        entries=1,
    )


def test_a_zeroed_sector_followed_by_a_valid_block_is_damage(built: Built) -> None:
    big, last = built.blocks[1], built.blocks[2]
    edit(built.path, (big.position // 512 + 2) * 512, bytes(512))
    verdict = judge(built, big)
    assert verdict == TailVerdict(
        torn=False, why=f"a valid block follows at byte {last.position}", entries=20
    )


def test_a_valid_block_is_found_even_when_the_bad_blocks_size_and_marker_are_hit(
    built: Built,
) -> None:
    # The bad block's claimed end and its marker both lie: only trying every position of the
    # next 64 KiB finds the valid block 3 KB after it.
    big, last = built.blocks[1], built.blocks[2]
    edit(built.path, (big.position // 512 + 2) * 512, bytes(512))
    edit(built.path, big.position + len(encode_long(big.count)), encode_long(5))
    edit(built.path, big.end - SYNC_SIZE, bytes(SYNC_SIZE))
    verdict = judge(built, big)
    assert verdict == TailVerdict(
        torn=False, why=f"a valid block follows at byte {last.position}", entries=20
    )


def test_a_tail_shorter_than_any_block_is_incomplete(built: Built) -> None:
    last = built.blocks[2]
    os.truncate(built.path, last.position + 3)
    assert judge(built, last) == TailVerdict(
        torn=True, why="the file ends inside the block", entries=1
    )


def test_an_unreadable_count_is_none(built: Built) -> None:
    last = built.blocks[2]
    os.truncate(built.path, last.position + 40)
    edit(built.path, last.position, b"\xff" * 40)  # a varint that never ends
    verdict = judge(built, last)
    assert verdict.entries is None and not verdict.torn


def test_a_damaged_block_after_a_torn_one_does_not_refute_it(built: Built) -> None:
    # Only a block that verifies (framing, marker and CRC) shows the bad one was not the last
    # write; the bytes after a torn write can be anything.
    big, last = built.blocks[1], built.blocks[2]
    sector = (big.position // 512 + 2) * 512
    edit(built.path, sector, bytes(512))
    middle = (last.position + last.end) // 2
    edit(built.path, middle, bytes([built.path.read_bytes()[middle] ^ 0x01]))
    fds = len(os.listdir("/proc/self/fd"))
    verdict = judge(built, big)
    assert verdict.torn and verdict.why.startswith(f"the sector at byte {sector} ")
    assert len(os.listdir("/proc/self/fd")) == fds  # the file is closed again


@pytest.mark.parametrize("hit", ["size", "marker"])
def test_a_valid_block_more_than_64_kib_after_a_bad_one_is_found(tmp_path: Path, hit: str) -> None:
    # Past the brute force's 64 KiB, the next block is found where the bad block's size says it
    # ends (its marker hit) or after the bad block's own marker (its size hit).
    rng = random.Random(11)
    with MetadataLog.open(tmp_path / "log", config=LogConfig()) as log:
        for tag, count, size in (("a", 1, 10), ("huge", 40, 2000), ("c", 1, 10)):
            log.append(
                [
                    ConfigRecord(
                        resource_type=ConfigResourceType.TOPIC,
                        resource_name=tag,
                        name=str(i),
                        value="".join(rng.choice(ascii_letters) for _ in range(size)),
                    )
                    for i in range(count)
                ]
            )
        (info,) = log.segments()
    segment = Segment.open_header(info.path, 0)
    huge, last = list(segment.iter_blocks(segment.header.size, info.path.stat().st_size))[1:]
    assert huge.end - huge.position > 70 * 1024
    edit(info.path, (huge.position // 512 + 4) * 512, bytes(512))
    if hit == "size":
        edit(info.path, huge.position + len(encode_long(huge.count)), encode_long(5))
    else:
        edit(info.path, huge.end - SYNC_SIZE, bytes(SYNC_SIZE))
    verdict = judge_tail(info.path, segment.header.sync, huge.position, info.path.stat().st_size)
    assert verdict == TailVerdict(
        torn=False, why=f"a valid block follows at byte {last.position}", entries=40
    )
