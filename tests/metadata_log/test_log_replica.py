"""The log's quorum mode: ReplicaBlock, write_blocks, flush, truncate_to, epochs, replica_blocks."""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import shutil
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.raft.core.log_view import LogView
from metadata_log import LogError, MetadataLog
from metadata_log.epoch import EPOCH_CHECKPOINT_NAME, EPOCH_NAME
from metadata_log.errors import ReplicaBlockError
from metadata_log.reader import LogReader
from metadata_log.replica import HEADER_SIZE, ReplicaBlock
from metadata_log.replica_log import ReplicaLog
from metadata_log.segment import Segment
from records import (
    ConfigRecord,
    ConfigResourceType,
    LogEntry,
    RecordCodec,
    RecordError,
    TopicRecord,
)
from records.schemas import CURRENT_SCHEMAS
from records.uuids import Uuid
from tests.support.replica_logs import (
    CONFIG,
    SHAPE,
    T0,
    block_of,
    build,
    metadata_log_warnings,
    opened,
    opened_reader,
    record,
)
from tests.support.sweeps import swept

# ------------------------------------------------------------------------------------ helpers


def expected_cache(entries: list[LogEntry]) -> list[tuple[int, int]]:
    """The epoch cache the entries call for: the first offset of each higher epoch."""
    cache: list[tuple[int, int]] = []
    for entry in entries:
        if not cache or entry.epoch > cache[-1][0]:
            cache.append((entry.epoch, entry.offset))
    return cache


def active_state(log: ReplicaLog) -> tuple[object, ...]:
    """What the log keeps in memory of its newest segment: a scan on open builds the same."""
    s = log.storage.segments[-1]
    return (
        s.base_offset,
        s.size,
        s.next_offset,
        s.first_timestamp,
        s.max_timestamp,
        s.last_epoch,
        s._last_indexed,
        (list(s.offset_index.keys), list(s.offset_index.values)),
        (list(s.time_index.keys), list(s.time_index.values)),
    )


def state(log: ReplicaLog) -> tuple[object, ...]:
    """What a reader can see of a log, for "nothing changed" checks."""
    return (
        log.end_offset,
        log.flushed_offset,
        log.epoch_cache(),
        list(log.read()),
        [(s.base_offset, s.next_offset, s.size_bytes) for s in log.segments()],
    )


def file_sizes(directory: Path) -> dict[str, int]:
    """Size of each segment and of the epoch cache file."""
    return {
        p.name: p.stat().st_size
        for p in directory.iterdir()
        if p.suffix == ".avro" or p.name == EPOCH_CHECKPOINT_NAME
    }


# ------------------------------------------------------------------------ ReplicaBlock format


blocks_st = st.builds(
    ReplicaBlock,
    first_offset=st.integers(0, (1 << 63) - 1),
    count=st.integers(1, 64),
    epoch=st.integers(0, (1 << 31) - 1),
    timestamp=st.integers(0, (1 << 63) - 1),
    body=st.binary(min_size=64, max_size=300),
    crc32=st.integers(0, 0xFFFFFFFF),
)


@given(blocks_st)
@settings(max_examples=200, deadline=None)
def test_a_replica_block_round_trips_through_its_byte_form(block: ReplicaBlock) -> None:
    data = block.encode()
    assert ReplicaBlock.decode(data) == block
    assert len(data) == HEADER_SIZE + len(block.body)
    # Self-delimiting: blocks laid end to end are read back one by one.
    both = data + data
    first, end = ReplicaBlock.decode_from(both, 0)
    second, end2 = ReplicaBlock.decode_from(both, end)
    assert first == second == block and end2 == len(both)


def test_every_truncation_of_a_replica_block_is_a_one_line_error() -> None:
    block = ReplicaBlock(
        first_offset=5, count=2, epoch=3, timestamp=T0, body=b"x" * 40, crc32=zlib.crc32(b"x" * 40)
    )
    data = block.encode()
    for cut in range(len(data)):
        with pytest.raises(ReplicaBlockError, match="truncated") as info:
            ReplicaBlock.decode(data[:cut])
        assert "\n" not in str(info.value)
    with pytest.raises(ReplicaBlockError, match="bytes after its body"):
        ReplicaBlock.decode(data + b"\0")


def _with_header(data: bytes, at: int, value: bytes) -> bytes:
    return data[:at] + value + data[at + len(value) :]


@pytest.mark.parametrize(
    ("at", "value", "message"),
    [
        (0, b"XXXX", "not a replica block"),
        (4, b"\x01", "version 1 is not known"),
        (5, b"\x80" + b"\0" * 7, "first offset -9223372036854775808 is not an offset"),
        (13, b"\0\0\0\0", "claims 0 entries"),
        (13, b"\0\0\x01\0", "claims 256 entries in a body of 40 bytes"),
        (17, b"\xff\xff\xff\xff", "epoch -1 is not an int32 epoch"),
        (21, b"\xff" * 8, "timestamp -1 is not a time"),
        (33, b"\x7f\xff\xff\xff", "larger than a block can be"),
        (33, b"\0\0\x10\0", "body claims 4096 bytes, 40 follow"),
    ],
)
def test_a_damaged_replica_block_header_is_a_one_line_error(
    at: int, value: bytes, message: str
) -> None:
    block = ReplicaBlock(
        first_offset=5, count=2, epoch=3, timestamp=T0, body=b"x" * 40, crc32=zlib.crc32(b"x" * 40)
    )
    with pytest.raises(ReplicaBlockError, match=message) as info:
        ReplicaBlock.decode(_with_header(block.encode(), at, value))
    assert "\n" not in str(info.value)


def test_random_bytes_never_decode_to_anything_but_a_block_or_a_replica_block_error() -> None:
    rng = random.Random(4)
    good = ReplicaBlock(
        first_offset=1, count=1, epoch=1, timestamp=1, body=b"abc", crc32=zlib.crc32(b"abc")
    ).encode()
    for n in range(3000):
        data = bytearray(good if n % 2 else rng.randbytes(rng.randrange(0, 80)))
        for _ in range(rng.randrange(1, 4)):
            if data:
                data[rng.randrange(len(data))] = rng.randrange(256)
        try:
            ReplicaBlock.decode(bytes(data))
        except ReplicaBlockError as exc:
            assert "\n" not in str(exc)


def test_encoding_refuses_fields_out_of_range() -> None:
    block = ReplicaBlock(first_offset=0, count=1, epoch=1, timestamp=1, body=b"a", crc32=0)
    for change in ({"count": 0}, {"epoch": 1 << 31}, {"first_offset": -1}, {"crc32": 1 << 32}):
        with pytest.raises(ReplicaBlockError):
            dataclasses.replace(block, **change).encode()  # type: ignore[arg-type]


# --------------------------------------------------------------------- writing and flushing


def test_written_blocks_are_read_back_with_their_epochs_and_flushed_on_demand(
    tmp_path: Path,
) -> None:
    with opened(tmp_path / "log") as log:
        assert (log.end_offset, log.flushed_offset, log.epoch_cache(), log.epoch) == (0, 0, [], 0)
        first = block_of(log, 0, 3, 2, principal="User:alice")
        second = log.encode_block(
            [([record("x", 3)], "User:bob"), ([record("x", 4), record("x", 5)], None)],
            first_offset=3,
            epoch=2,
            timestamp=T0 + 5,
        )
        third = block_of(log, 6, 2, 5)
        assert log.write_blocks([first, second], check=True) == 6
        assert log.write_blocks([third], check=False) == 8
        # Visible to readers before the flush; not yet durable.
        assert (log.end_offset, log.flushed_offset) == (8, 0)
        entries = list(log.read())
        assert [(e.offset, e.epoch, e.timestamp, e.principal) for e in entries] == [
            (0, 2, T0, "User:alice"),
            (1, 2, T0, "User:alice"),
            (2, 2, T0, "User:alice"),
            (3, 2, T0 + 5, "User:bob"),
            (4, 2, T0 + 5, None),
            (5, 2, T0 + 5, None),
            (6, 5, T0 + 6, "p"),
            (7, 5, T0 + 6, "p"),
        ]
        assert [e.record for e in entries[3:6]] == [record("x", 3), record("x", 4), record("x", 5)]
        assert log.flush() == 8 and log.flushed_offset == 8
        assert log.flush() == 8
        assert log.epoch_cache() == [(2, 0), (5, 6)] and log.epoch == 5
        assert (log.directory / EPOCH_CHECKPOINT_NAME).read_text() == "0\n2\n2 0\n5 6\n"
        LogView.from_log(end_offset=log.end_offset, epochs=log.epoch_cache())
    # Quorum mode never takes a writer epoch of its own.
    assert not (tmp_path / "log" / EPOCH_NAME).exists()
    with opened(tmp_path / "log") as log:
        assert list(log.read()) == entries
        assert log.epoch_cache() == [(2, 0), (5, 6)]
        assert log.write_blocks([], check=True) == 8


def test_quorum_and_single_node_operations_do_not_mix(tmp_path: Path) -> None:
    # The roles are separate classes: a quorum node's log has no append, the user's log no
    # replica writes.
    with opened(tmp_path / "q") as log:
        assert not hasattr(log, "append") and not hasattr(log, "append_batches")
    with MetadataLog.open(tmp_path / "s", config=CONFIG) as single:
        single.append([record("a", 0)])
        for name in ("write_blocks", "truncate_to", "epoch_cache", "encode_block"):
            assert not hasattr(single, name)
        assert single.flush() == single.end_offset == 1
        assert single.epoch == 1
    assert (tmp_path / "s" / EPOCH_NAME).read_text() == "1\n"


def test_encode_block_refuses_what_cannot_be_a_block(tmp_path: Path) -> None:
    with opened(tmp_path / "log") as log:
        with pytest.raises(LogError, match="at least one"):
            log.encode_block([], first_offset=0, epoch=1, timestamp=T0)
        with pytest.raises(LogError, match="at least one record"):
            log.encode_block([([], None)], first_offset=0, epoch=1, timestamp=T0)
        with pytest.raises(LogError, match="epoch"):
            log.encode_block([([record("a", 0)], None)], first_offset=0, epoch=-1, timestamp=T0)
        with pytest.raises(RecordError, match="not a metadata record"):
            log.encode_block([(["nope"], None)], first_offset=0, epoch=1, timestamp=T0)  # type: ignore[list-item]
        too_big = ConfigRecord(
            resource_type=ConfigResourceType.TOPIC, resource_name="t", name="n", value="v"
        )
        object.__setattr__(too_big, "resource_type", 1 << 40)
        with pytest.raises(RecordError):
            log.encode_block([([too_big], None)], first_offset=0, epoch=1, timestamp=T0)
        assert log.end_offset == 0


# ------------------------------------------------------------------- refusing bad blocks


def _bad_blocks(log: ReplicaLog) -> dict[str, list[ReplicaBlock]]:
    """Each kind of bad block, after a good one, at the end of a log that ends at 4 (epoch 3)."""
    good = block_of(log, 4, 2, 3)
    body_epoch4 = block_of(log, 6, 2, 4)
    garbage = random.Random(1).randbytes(len(good.body))
    cases = {
        "crc": dataclasses.replace(good, crc32=good.crc32 ^ 1),
        "gap": block_of(log, 5, 2, 3),
        "overlap": block_of(log, 3, 2, 3),
        "epoch going down": block_of(log, 4, 2, 2),
        "entry epoch mismatch": dataclasses.replace(body_epoch4, first_offset=4, epoch=5),
        "entry offsets": dataclasses.replace(block_of(log, 6, 2, 3), first_offset=4),
        "count mismatch": dataclasses.replace(good, count=1),
        "timestamp mismatch": dataclasses.replace(good, timestamp=good.timestamp + 1),
        "timestamp going down": dataclasses.replace(
            log.encode_block([([record("b", 4)], "p")], first_offset=4, epoch=3, timestamp=1),
        ),
        "garbage body": dataclasses.replace(good, body=garbage, crc32=zlib.crc32(garbage)),
        "trailing bytes": dataclasses.replace(
            good, body=good.body + b"\0", crc32=zlib.crc32(good.body + b"\0")
        ),
        "empty body": dataclasses.replace(good, body=b"", crc32=0),
    }
    return {name: [good, bad] for name, bad in cases.items()} | {
        name: [bad] for name, bad in cases.items()
    }


def test_write_blocks_refuses_each_kind_of_bad_block_and_writes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with opened(directory) as log:
        log.write_blocks([block_of(log, 0, 4, 3)], check=True)
        log.flush()
        before = state(log)
        files = file_sizes(directory)
        cases = _bad_blocks(log)
        for name, blocks in cases.items():
            with pytest.raises(ReplicaBlockError) as info:
                log.write_blocks(blocks, check=True)
            assert "\n" not in str(info.value), name
            assert state(log) == before, name
            assert file_sizes(directory) == files, name
        # Placement (offsets, epochs, timestamps) is checked even for trusted blocks.
        for name in ("gap", "overlap", "epoch going down", "timestamp going down"):
            with pytest.raises(ReplicaBlockError):
                log.write_blocks(cases[name], check=False)
            assert state(log) == before, name
        # The log is still writable: the good block goes in.
        assert log.write_blocks([block_of(log, 4, 2, 3)], check=True) == 6
    with opened(directory) as log:
        assert log.end_offset == 6 and log.epoch_cache() == [(3, 0)]


def test_bodies_of_random_bytes_are_refused_without_crashing_the_decoder(tmp_path: Path) -> None:
    rng = random.Random(11)
    with opened(tmp_path / "log") as log:
        good = block_of(log, 0, 3, 1)
        for n in range(400):
            body = bytearray(good.body)
            if n % 3 == 0:
                body = bytearray(rng.randbytes(rng.randrange(1, 200)))
            else:
                for _ in range(rng.randrange(1, 5)):
                    body[rng.randrange(len(body))] = rng.randrange(256)
            block = dataclasses.replace(good, body=bytes(body), crc32=zlib.crc32(body))
            try:
                log.write_blocks([block], check=True)
            except ReplicaBlockError:
                continue
            # A change that still decodes to valid entries of this block is a valid block.
            assert log.end_offset == 3
            log.truncate_to(0)
        assert log.end_offset == 0


# ---------------------------------------------------------------------------- crash sweep


def test_a_crash_anywhere_in_unflushed_blocks_recovers_with_a_consistent_epoch_cache(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Written, not flushed: the file may end anywhere in those blocks after a crash."""
    source = tmp_path / "source"
    blocks = build(source, SHAPE[:10])
    flushed = blocks[-1].end_offset
    log = ReplicaLog.open(source, config=CONFIG)
    try:
        segment = Path(log.segments()[-1].path)
        sweep_from = segment.stat().st_size
        # Unflushed: the first block of a new epoch, then another of that epoch.
        new_epoch = block_of(log, flushed, 2, 9, value_bytes=4)
        more = block_of(log, flushed + 2, 1, 9, value_bytes=4)
        log.write_blocks([new_epoch, more], check=True)
        assert log.flushed_offset == flushed
        assert Path(log.segments()[-1].path) == segment
        end = segment.stat().st_size
        everything = list(log.read())
        shutil.copytree(source, tmp_path / "image")  # what the page cache holds at the crash
    finally:
        log.close()
    image = tmp_path / "image"
    assert end - sweep_from > 2 * 40
    for cut in swept(range(sweep_from, end + 1)):  # `make test`: every byte
        copy = tmp_path / f"cut{cut}"
        shutil.copytree(image, copy)
        os.truncate(copy / segment.name, cut)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="metadata_log"), opened(copy) as log:
            entries = list(log.read())
            assert entries == everything[: len(entries)], cut
            assert len(entries) in (flushed, flushed + 2, flushed + 3), cut
            cache = log.epoch_cache()
            assert cache == expected_cache(entries), cut
            LogView.from_log(end_offset=log.end_offset, epochs=cache)
            cache_warnings = [
                w for w in metadata_log_warnings(caplog) if EPOCH_CHECKPOINT_NAME in w
            ]
            assert len(cache_warnings) == (len(entries) == flushed), (cut, cache_warnings)
            # Writing goes on, in the next epoch.
            after = block_of(log, log.end_offset, 1, 11, tag="after")
            log.write_blocks([after], check=True)
            log.flush()
            assert log.epoch_cache() == [*cache, (11, len(entries))]
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="metadata_log"), opened(copy) as log:
            assert metadata_log_warnings(caplog) == [], cut
            assert list(log.read())[: len(entries)] == entries
            assert log.epoch_cache() == [*cache, (11, len(entries))]
            assert log.verify().ok
        shutil.rmtree(copy)


def test_a_roll_makes_the_sealed_segment_durable(tmp_path: Path) -> None:
    with opened(tmp_path / "log") as log:
        offset = 0
        while len(log.segments()) < 3:
            offset = log.write_blocks([block_of(log, offset, 4, 1)], check=True)
        # Everything before the newest segment was fsynced when it was sealed.
        assert log.flushed_offset == log.segments()[-1].base_offset
        assert log.flush() == offset


# ------------------------------------------------------------------------ truncate_to sweep


def test_truncating_at_every_offset_of_a_multi_segment_log_keeps_everything_consistent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = tmp_path / "source"
    blocks = build(source)
    with opened(source) as log:
        everything = list(log.read())
        segments = log.segments()
        end = log.end_offset
    assert len(segments) >= 3, segments
    starts = {b.first_offset for b in blocks}
    assert any(o not in starts for o in range(end)), "mid-block offsets are swept too"
    for offset in swept(range(end + 1)):  # `make test`: every offset
        copy = tmp_path / f"t{offset}"
        shutil.copytree(source, copy)
        kept = everything[:offset]
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="metadata_log"), opened(copy) as log:
            assert log.truncate_to(offset) == end - offset
            assert log.end_offset == log.flushed_offset == offset
            assert list(log.read()) == kept, offset
            assert [r for b in log.read_records() for r in b.records] == [e.record for e in kept]
            # The offset index serves reads from any point.
            for gt in range(-1, offset, max(1, offset // 7)):
                assert list(log.read(gt=gt, limit=3)) == kept[gt + 1 : gt + 4], (offset, gt)
            assert log.epoch_cache() == expected_cache(kept), offset
            assert log.epoch == (kept[-1].epoch if kept else 0)
            if offset < end:
                lines = [r.getMessage() for r in caplog.records if "truncated" in r.getMessage()]
                assert len(lines) == 1 and f"removed {end - offset} entries" in lines[0]
            assert log.verify().ok
            cut_state = active_state(log)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="metadata_log"), opened(copy) as log:
            assert metadata_log_warnings(caplog) == [], offset
            # What the cut left in memory (timestamps, epoch, index spacing of the segment cut
            # into) is what a scan of the file finds.
            assert active_state(log) == cut_state, offset
            assert list(log.read()) == kept
            assert log.epoch_cache() == expected_cache(kept)
            LogView.from_log(end_offset=offset, epochs=log.epoch_cache())
            # Appending continues, in a later epoch, and whole blocks are served from the cut.
            epoch = 100 + offset
            log.write_blocks([block_of(log, offset, 2, epoch, tag="new")], check=True)
            log.flush()
            assert log.epoch_cache() == [*expected_cache(kept), (epoch, offset)]
            served = log.replica_blocks(start=offset, max_bytes=1 << 20)
            assert [(b.first_offset, b.count, b.epoch) for b in served] == [(offset, 2, epoch)]
            appended_state = active_state(log)
        with opened(copy) as log:
            assert active_state(log) == appended_state, offset
            assert list(log.read())[:offset] == kept
            assert log.end_offset == offset + 2
            assert log.verify().ok
        shutil.rmtree(copy)


def test_truncate_to_refuses_offsets_before_the_log_and_ignores_those_past_it(
    tmp_path: Path,
) -> None:
    build(tmp_path / "log", SHAPE[:3])
    with opened(tmp_path / "log") as log:
        with pytest.raises(LogError, match="starts at offset 0"):
            log.truncate_to(-1)
        assert log.truncate_to(log.end_offset) == 0
        assert log.truncate_to(log.end_offset + 5) == 0
        assert log.end_offset == 8


def test_truncating_unflushed_blocks_leaves_a_durable_log(tmp_path: Path) -> None:
    with opened(tmp_path / "log") as log:
        log.write_blocks([block_of(log, 0, 3, 1), block_of(log, 3, 3, 2)], check=True)
        assert log.flushed_offset == 0
        assert log.truncate_to(4) == 2
        assert (log.end_offset, log.flushed_offset) == (4, 4)
        assert log.epoch_cache() == [(1, 0), (2, 3)]


# ------------------------------------------------------------------------------ epoch cache


def _damage_missing(path: Path) -> None:
    path.unlink()


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("missing", None),
        ("garbage", b"\x00\xffnot a cache"),
        ("wrong version", b"1\n1\n1 0\n"),
        ("count disagrees", b"0\n3\n1 0\n"),
        ("not increasing", b"0\n2\n8 0\n4 3\n"),
        ("a number too long to be one", b"0\n1\n1 " + b"9" * 5000 + b"\n"),
        ("empty for a non-empty log", b"0\n0\n"),
        ("first epoch not at the log start", b"0\n1\n1 4\n"),
        ("stale: an epoch is missing", None),
        ("stale: past the end", None),
        ("stale: last epoch starts later", None),
        ("stale: last epoch starts earlier", None),
    ],
)
def test_a_missing_damaged_or_stale_epoch_cache_is_rebuilt_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, content: bytes | None
) -> None:
    directory = tmp_path / "log"
    build(directory, [*SHAPE[:10], (2, 7)])  # the last epoch spans two blocks (25, 26..27)
    path = directory / EPOCH_CHECKPOINT_NAME
    with opened(directory) as log:
        right = log.epoch_cache()
        end = log.end_offset
    assert right == [(1, 0), (2, 8), (4, 15), (5, 21), (7, 25)]
    stale = {
        "stale: an epoch is missing": right[:-1],
        "stale: past the end": [*right, (9, end)],
        "stale: last epoch starts later": [*right[:-1], (7, 26)],
        "stale: last epoch starts earlier": [*right[:-1], (7, 24)],
    }
    if name == "missing":
        path.unlink()
    elif name in stale:
        lines = [f"{e} {o}" for e, o in stale[name]]
        path.write_text("\n".join(["0", str(len(lines)), *lines]) + "\n")
    else:
        assert content is not None
        path.write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="metadata_log"), opened(directory) as log:
        assert log.epoch_cache() == right
        warnings = metadata_log_warnings(caplog)
        assert len(warnings) == 1 and EPOCH_CHECKPOINT_NAME in warnings[0], warnings
        assert "rebuilt" in warnings[0] and "\n" not in warnings[0]
    assert path.read_text() == "0\n5\n1 0\n2 8\n4 15\n5 21\n7 25\n"
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="metadata_log"), opened(directory) as log:
        assert metadata_log_warnings(caplog) == []
        assert log.epoch_cache() == right


def test_a_read_only_open_rebuilds_the_cache_in_memory_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "log"
    build(directory, SHAPE[:4])
    (directory / EPOCH_CHECKPOINT_NAME).unlink()
    with (
        caplog.at_level(logging.WARNING, logger="metadata_log"),
        opened_reader(directory) as log,
    ):
        assert log.epoch_cache() == [(1, 0), (2, 8)]
        assert len(metadata_log_warnings(caplog)) == 1
    assert not (directory / EPOCH_CHECKPOINT_NAME).exists()


def test_opening_a_single_node_log_in_quorum_mode_builds_its_cache(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    for n in range(3):  # three writer incarnations: epochs 1, 2, 3
        with MetadataLog.open(directory, config=CONFIG) as single:
            single.append([record("s", n), record("s", n + 10)])
    with opened(directory) as log:
        assert log.epoch_cache() == [(1, 0), (2, 2), (3, 4)]
        assert log.epoch == 3
        block = log.encode_block(
            [([record("q", 6)], None)], first_offset=6, epoch=3, timestamp=log.last_timestamp
        )
        assert log.write_blocks([block], check=True) == 7


# ---------------------------------------------------------------------------- replica_blocks


def test_replica_blocks_from_every_block_boundary(tmp_path: Path) -> None:
    blocks = build(tmp_path / "log")
    with opened(tmp_path / "log") as log:
        end = log.end_offset
        assert log.replica_blocks(start=0, max_bytes=1 << 30) == blocks
        for i, block in enumerate(blocks):
            served = log.replica_blocks(start=block.first_offset, max_bytes=1 << 30)
            assert served == blocks[i:]
            # At least one block, however small the budget.
            assert log.replica_blocks(start=block.first_offset, max_bytes=0) == [block]
            budget = sum(len(b.body) for b in blocks[i : i + 3])
            assert (
                log.replica_blocks(start=block.first_offset, max_bytes=budget) == blocks[i : i + 3]
            )
            fewer = blocks[i : i + 3][:-1] or [block]
            assert log.replica_blocks(start=block.first_offset, max_bytes=budget - 1) == fewer
            for inside in range(block.first_offset + 1, block.end_offset):
                with pytest.raises(LogError, match="inside the block holding offsets"):
                    log.replica_blocks(start=inside, max_bytes=1 << 20)
        assert log.replica_blocks(start=end, max_bytes=1 << 20) == []
        for outside in (-1, end + 1):
            with pytest.raises(LogError, match="the log holds offsets"):
                log.replica_blocks(start=outside, max_bytes=1 << 20)
        for block in blocks:
            assert block.crc_ok()


def test_copying_a_log_block_by_block_gives_identical_entries_and_bodies(tmp_path: Path) -> None:
    source = tmp_path / "source"
    # A single-node log: three writer incarnations, several segments, mixed principals.
    for incarnation in range(3):
        with MetadataLog.open(source, config=CONFIG) as single:
            for n in range(40):
                batch = [record(f"i{incarnation}", n * 5 + k) for k in range(n % 4 + 1)]
                single.append(batch, principal=None if n % 5 == 0 else f"User:u{n % 3}")
    with LogReader.open(source, config=CONFIG) as reader:
        assert len(reader.segments()) >= 3
        entries = list(reader.read())
        with opened(tmp_path / "copy") as copy:
            while copy.end_offset < reader.end_offset:
                blocks = reader.replica_blocks(start=copy.end_offset, max_bytes=700)
                copy.write_blocks(blocks, check=True)
                copy.flush()
            assert list(copy.read()) == entries
            assert copy.replica_blocks(start=0, max_bytes=1 << 30) == reader.replica_blocks(
                start=0, max_bytes=1 << 30
            )
            assert copy.epoch_cache() == expected_cache(entries) == [(1, 0), (2, 100), (3, 200)]
    with opened(tmp_path / "copy") as copy:
        assert list(copy.read()) == entries
        assert copy.verify().ok


def test_blocks_of_a_segment_with_an_older_entry_schema_are_served_in_todays(
    tmp_path: Path,
) -> None:
    older = RecordCodec([s for s in CURRENT_SCHEMAS if s.name != "TopicRecord"])
    directory = tmp_path / "log"
    with MetadataLog.open(directory, config=CONFIG, codec=older, clock_ms=lambda: T0) as single:
        single.append([record("old", 0), record("old", 1)], principal="p")
    with opened(directory) as log:
        # The new code writes a new segment with its own schema; the old one is re-encoded.
        log.write_blocks([block_of(log, 2, 1, 2)], check=True)
        served = log.replica_blocks(start=0, max_bytes=1 << 20)
        assert [(b.first_offset, b.count, b.epoch) for b in served] == [(0, 2, 1), (2, 1, 2)]
        with opened(tmp_path / "copy") as copy:
            copy.write_blocks(served, check=True)
            assert list(copy.read()) == list(log.read())
        # Cutting inside the old segment's block keeps its exact bytes, in its own schema.
        assert log.truncate_to(1) == 2
        assert [e.record for e in log.read()] == [record("old", 0)]
        log.write_blocks([block_of(log, 1, 1, 3)], check=True)
        assert [e.offset for e in log.read()] == [0, 1]
        assert log.verify().ok


def test_a_cut_to_an_empty_segment_of_an_older_schema_starts_it_over_in_todays(
    tmp_path: Path,
) -> None:
    """The segment a cut leaves empty is created again in this code's schema, chained to the
    one before it, so the next block (of a type the older schema lacks) goes into it."""
    older = RecordCodec([s for s in CURRENT_SCHEMAS if s.name != "TopicRecord"])
    directory = tmp_path / "log"
    with MetadataLog.open(directory, config=CONFIG, codec=older, clock_ms=lambda: T0) as single:
        for i in range(6):
            single.append([record("old", i, 3000)], principal="p")
    with opened(directory) as log:
        old_bases = [s.base_offset for s in log.segments()]
        assert len(old_bases) >= 3  # the last one is today's, started by the open
        cut = old_bases[1]
        assert log.truncate_to(cut) == 6 - cut
        assert [s.base_offset for s in log.segments()] == old_bases[:2]
        assert log.storage.segments[-1].header.schema_json == log.codec.entry_schema_json
        new = TopicRecord(name="t", topic_id=Uuid.random())
        block = log.encode_block([([new], "p")], first_offset=cut, epoch=2, timestamp=T0 + 9)
        log.write_blocks([block], check=True)
        log.flush()
        assert [s.base_offset for s in log.segments()] == old_bases[:2]
        kept = [record("old", i, 3000) for i in range(cut)]
        assert [e.record for e in log.read()] == [*kept, new]
    with opened_reader(directory) as log:
        assert [e.record for e in log.read()] == [*kept, new]
        assert log.verify().ok  # the segment started over is chained to the one before
    with opened(directory) as log:  # and the first segment, with none before it
        assert log.truncate_to(0) == cut + 1
        assert [s.base_offset for s in log.segments()] == [0]
        assert log.storage.segments[0].header.schema_json == log.codec.entry_schema_json
        assert log.verify().ok


# --------------------------------------------------------- failures during a truncation


_SYSCALLS = ("fsync", "fdatasync", "replace", "ftruncate", "unlink", "write", "rename")


class FailPoint:
    """Wraps file system calls of `os`; the call numbered `fail_at` (from 0) raises EIO."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.calls = 0
        self.real = {name: getattr(os, name) for name in _SYSCALLS}

    def wrap(self, name: str) -> Callable[..., object]:
        """The failing stand-in for `os.<name>`."""

        def call(*args: object, **kwargs: object) -> object:
            self.calls += 1
            if self.calls == self.fail_at + 1:
                raise OSError(5, f"injected failure of os.{name}")
            return self.real[name](*args, **kwargs)

        return call


@pytest.mark.parametrize("where", ["mid-block", "block boundary"])
def test_an_io_error_at_any_step_of_a_truncation_never_loses_an_entry_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Every file operation of a truncation fails in turn, as a crash there would stop it."""
    source = tmp_path / "source"
    blocks = build(source)
    with opened(source) as log:
        everything = list(log.read())
        first_segment_end = log.segments()[0].next_offset
    block = next(b for b in blocks if b.count > 2 and b.first_offset < first_segment_end - 3)
    offset = block.first_offset + (1 if where == "mid-block" else 0)
    point = 0
    while True:
        copy = tmp_path / f"f{point}"
        shutil.copytree(source, copy)
        log = ReplicaLog.open(copy, config=CONFIG)
        fail = FailPoint(point)
        for name in _SYSCALLS:
            monkeypatch.setattr(os, name, fail.wrap(name))
        try:
            log.truncate_to(offset)
            failed = False
        except LogError:
            failed = True
        finally:
            for name in _SYSCALLS:
                monkeypatch.setattr(os, name, fail.real[name])
            log.close()
        with opened(copy) as log:
            entries = list(log.read())
            assert entries == everything[: len(entries)], point
            assert len(entries) >= offset, (point, len(entries))
            assert log.epoch_cache() == expected_cache(entries), point
            assert log.verify().ok, point
            assert log.truncate_to(offset) == len(entries) - offset
            assert list(log.read()) == everything[:offset]
            assert log.epoch_cache() == expected_cache(everything[:offset])
        shutil.rmtree(copy)
        if not failed:
            break
        point += 1
    assert point > 5, "the truncation went through several file operations"


# ------------------------------------------------------------------ random operations


@pytest.mark.parametrize("seed", range(12))
def test_random_writes_flushes_truncations_reopens_and_crashes_match_a_model(
    tmp_path: Path, seed: int
) -> None:
    """A follower's life in random steps, checked against a list of the entries it must hold."""
    rng = random.Random(seed)
    directory = tmp_path / "log"
    model: list[LogEntry] = []
    flushed = 0
    epoch = 1
    log = ReplicaLog.open(directory, config=CONFIG)
    try:
        for step in range(60):
            action = rng.choices(
                ["write", "flush", "truncate", "reopen", "crash"], [10, 3, 3, 1, 1]
            )[0]
            if action == "write":
                if rng.random() < 0.2:
                    epoch += rng.randrange(1, 3)
                blocks = []
                offset = log.end_offset
                for _ in range(rng.randrange(1, 4)):
                    count = rng.randrange(1, 6)
                    blocks.append(
                        block_of(log, offset, count, epoch, tag=f"s{seed}", value_bytes=60)
                    )
                    offset += count
                log.write_blocks(blocks, check=rng.random() < 0.5)
                added = [e for b in blocks for e in _entries_of(log, b)]
                model.extend(added)
            elif action == "flush":
                flushed = log.flush()
            elif action == "truncate" and model:
                cut = rng.randrange(0, len(model) + 1)
                log.truncate_to(cut)
                del model[cut:]
                flushed = log.flushed_offset
            elif action in ("reopen", "crash"):
                if action == "crash":
                    # Copy what is on disk, cut the newest segment anywhere past its durable
                    # part (written-not-flushed blocks may be lost or torn), open the copy.
                    image = tmp_path / f"crash{step}"
                    shutil.copytree(directory, image)
                    newest = Path(log.segments()[-1].path)
                    durable = _durable_size(log, flushed)
                    size = newest.stat().st_size
                    log.close()
                    os.truncate(image / newest.name, rng.randrange(durable, size + 1))
                    shutil.rmtree(directory)
                    os.replace(image, directory)
                else:
                    log.close()
                log = ReplicaLog.open(directory, config=CONFIG)
                kept = list(log.read())
                assert kept == model[: len(kept)] and len(kept) >= flushed, (seed, step)
                model = kept
                flushed = log.flushed_offset
                assert flushed == len(model)
            assert list(log.read()) == model, (seed, step, action)
            assert log.end_offset == len(model)
            assert log.epoch_cache() == expected_cache(model), (seed, step, action)
            epoch = max(epoch, log.epoch)
        assert log.verify().ok
    finally:
        log.close()


def _entries_of(log: ReplicaLog, block: ReplicaBlock) -> list[LogEntry]:
    """The entries a block holds, as the log will read them back."""
    array = log.codec.reader_array_schema(log.codec.entry_schema_json)
    return log.codec.decode_entries(block.count, block.body, array)


def _durable_size(log: ReplicaLog, flushed: int) -> int:
    """The newest segment's size up to the end of its durable blocks (`flushed` and below)."""
    newest = log.segments()[-1]
    if flushed >= newest.next_offset:
        return newest.size_bytes
    segment = Segment.open_header(newest.path, newest.base_offset)
    segment.recover_scan(newest.size_bytes, 0, log.codec)
    position = segment.header.size
    for raw, first in segment.blocks_with_offsets(newest.base_offset):
        if first >= flushed:
            break
        position = raw.end
    return position


# ------------------------------------------------------------------ kill -9 of a follower

_FOLLOWER = """
import sys
from metadata_log import LogConfig, ReplicaLog
from records import ConfigRecord, ConfigResourceType

log = ReplicaLog.open(sys.argv[1], config=LogConfig(segment_bytes=16 * 1024))
offset = log.end_offset
for n in range(100_000):
    epoch = 1 + n // 40
    records = [
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC, resource_name="k", name=str(offset + i),
            value="v" * 40,
        )
        for i in range(n % 4 + 1)
    ]
    block = log.encode_block(
        [(records, "p")], first_offset=offset, epoch=epoch, timestamp=1_700_000_000_000 + n
    )
    offset = log.write_blocks([block], check=n % 2 == 0)
    if n % 3 == 0:
        print(log.flush(), flush=True)
"""


@pytest.mark.process
@pytest.mark.parametrize("seed", range(4))
def test_a_follower_killed_at_any_moment_keeps_what_it_flushed(tmp_path: Path, seed: int) -> None:
    import signal
    import subprocess
    import sys
    import time

    directory = tmp_path / "log"
    child = subprocess.Popen(
        [sys.executable, "-c", _FOLLOWER, str(directory)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    flushed = 0
    target = (30, 150, 400, 900)[seed]
    while flushed < target:  # several segments and epochs for the later seeds
        line = child.stdout.readline()
        assert line, "the follower stopped early"
        flushed = int(line)
    time.sleep(0.002 * seed)  # the kill lands anywhere in the writes that follow
    child.send_signal(signal.SIGKILL)
    child.wait()
    for line in child.stdout:
        flushed = max(flushed, int(line))
    with opened(directory) as log:
        entries = list(log.read())
        assert len(entries) >= flushed
        assert [e.offset for e in entries] == list(range(len(entries)))
        assert log.epoch_cache() == expected_cache(entries)
        assert log.verify().ok
        LogView.from_log(end_offset=log.end_offset, epochs=log.epoch_cache())


def _fields(**changes: object) -> ReplicaBlock:
    values: dict[str, object] = {
        "first_offset": 5,
        "count": 3,
        "epoch": 2,
        "timestamp": 1_800_000_000_000,
        "body": b"abcdef",
        "crc32": zlib.crc32(b"abcdef"),
    }
    values.update(changes)
    return ReplicaBlock(**values)  # type: ignore[arg-type]


def test_a_blocks_offsets_are_its_first_and_count() -> None:
    block = _fields()
    assert (block.first_offset, block.last_offset, block.end_offset) == (5, 7, 8)
    assert _fields(count=1).last_offset == 5


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"first_offset": 1 << 63}, "first offset"),
        ({"first_offset": -1}, "first offset"),
        ({"timestamp": 1 << 63}, "timestamp"),
        ({"timestamp": -1}, "timestamp"),
        ({"crc32": 1 << 32}, "CRC32"),
        ({"count": 7}, "claims 7 entries in a body of 6 bytes"),
        ({"count": 0}, "claims 0 entries"),
        ({"epoch": 1 << 31}, "epoch"),
    ],
)
def test_encode_refuses_each_field_one_past_its_range(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ReplicaBlockError, match=message):
        _fields(**changes).encode()


def test_encode_keeps_each_field_at_its_bound() -> None:
    for changes in (
        {"first_offset": (1 << 63) - 1},
        {"timestamp": (1 << 63) - 1},
        {"crc32": 0xFFFFFFFF},
        {"count": 6},  # one byte per entry at most
        {"epoch": (1 << 31) - 1},
        {"first_offset": 0, "timestamp": 0, "crc32": 0, "epoch": 0},
    ):
        block = _fields(**changes)
        assert ReplicaBlock.decode(block.encode()) == block


def test_the_body_size_bound_is_inclusive() -> None:
    from metadata_log.container import MAX_BLOCK_BODY

    # 1 GiB of zeros: bytes(n) maps zeroed pages lazily, where b"\0" * n writes every one; the
    # CRC of one more zero byte follows from the CRC of the rest.
    at_bound = bytes(MAX_BLOCK_BODY)
    crc = zlib.crc32(at_bound)
    encoded = _fields(body=at_bound, crc32=crc).encode()
    assert len(encoded) == HEADER_SIZE + MAX_BLOCK_BODY
    # Decoding checks the length its header claims before it copies the body out: a header
    # claiming the bound passes (and finds no body after it), one claiming a byte more does
    # not. Decoding the whole 1 GiB would add two more copies of it and a compare.
    header = encoded[:HEADER_SIZE]
    del encoded
    with pytest.raises(ReplicaBlockError, match=f"body claims {MAX_BLOCK_BODY} bytes, 0 follow"):
        ReplicaBlock.decode(header)
    over_header = header[:-4] + (MAX_BLOCK_BODY + 1).to_bytes(4, "big")  # the length comes last
    with pytest.raises(ReplicaBlockError, match="larger than a block can be"):
        ReplicaBlock.decode(over_header)
    over = bytes(MAX_BLOCK_BODY + 1)
    with pytest.raises(ReplicaBlockError, match="larger than a block can be"):
        _fields(body=over, crc32=zlib.crc32(b"\0", crc)).encode()


def test_decode_from_a_position_near_the_end_is_truncated_not_a_struct_error() -> None:
    data = _fields().encode()
    tail = data + b"x" * 10
    with pytest.raises(ReplicaBlockError, match=r"truncated: 10 bytes, a header alone"):
        ReplicaBlock.decode_from(tail, len(data))
    with pytest.raises(ReplicaBlockError, match=r"holds 3 bytes after its body"):
        ReplicaBlock.decode(data + b"xyz")
    header_only = data[:HEADER_SIZE]
    with pytest.raises(ReplicaBlockError, match="its body claims 6 bytes, 0 follow"):
        ReplicaBlock.decode(header_only)
