"""MetadataLog behaviour: appends, reads, segments, indexes, time, locks, group commit, failures."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metadata_log import (
    LogClosedError,
    LogConfig,
    LogCorruptionError,
    LogError,
    LogFailedError,
    LogLockedError,
    MetadataLog,
)
from metadata_log.container import SYNC_SIZE, RawBlock, encode_block
from metadata_log.reader import LogReader
from metadata_log.segment import Segment
from metadata_log.stored_log import StoredLog
from records import (
    DEFAULT_CODEC,
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    LogEntry,
    Mode,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RecordError,
    RegisterBrokerRecord,
    TopicRecord,
    Uuid,
)
from tests.support.paths import REPO

SEGMENT_BYTES = 64 * 1024
"""Big enough for the ~9 KB segment header plus a useful number of blocks."""
T0 = 1_700_000_000_000
"""A plausible wall-clock time in ms for fake clocks."""


# ------------------------------------------------------------------------------------ helpers


class FakeClock:
    """A controllable `clock_ms`: returns `now`, which the test sets (forwards or backwards)."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def config(tag: str, i: int, value: str = "v") -> ConfigRecord:
    """A small record that says which batch (`tag`) and position (`i`) it belongs to."""
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name=tag, name=str(i), value=value
    )


def batch(tag: str, size: int, value_bytes: int = 0) -> list[Record]:
    """`size` records of batch `tag`; with `value_bytes`, values are random (incompressible)."""
    return [
        config(tag, i, random.Random(f"{tag}/{i}").randbytes(value_bytes).hex() or "v")
        for i in range(size)
    ]


def scan_blocks(path: Path, base_offset: int) -> list[RawBlock]:
    """Every block of a segment file, each checked (framing, sync marker, CRC32)."""
    segment = Segment.open_header(path, base_offset)
    return list(segment.iter_blocks(segment.header.size, path.stat().st_size))


def fastavro_rows(path: Path) -> list[dict[str, Any]]:
    """The entries of a segment file as stock fastavro reads them (union branches named)."""
    rows: list[dict[str, Any]] = []
    with open(path, "rb") as f:
        for row in fastavro.reader(f, return_record_name=True):
            assert isinstance(row, dict)
            rows.append(row)
    return rows


def segment_files(directory: Path) -> list[str]:
    """Names of the segment files in `directory`, sorted."""
    return sorted(p.name for p in directory.glob("*.avro"))


def flip_byte(path: Path, position: int) -> None:
    """Invert every bit of one byte of a file."""
    with open(path, "r+b") as f:
        f.seek(position)
        (byte,) = f.read(1)
        f.seek(position)
        f.write(bytes([byte ^ 0xFF]))


def expected_slice(
    entries: list[LogEntry], gt: int | None, lte: int | None, limit: int | None
) -> list[LogEntry]:
    """What `read(gt=, lte=, limit=)` means, computed on the full list."""
    chosen = [
        e for e in entries if (gt is None or e.offset > gt) and (lte is None or e.offset <= lte)
    ]
    return chosen if limit is None else chosen[:limit]


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """Where a test's log lives (created by the first writer open)."""
    return tmp_path / "log"


@dataclass(frozen=True, slots=True, repr=False)
class BuiltLog:
    """A closed multi-segment log and what was appended to it."""

    directory: Path
    entries: list[LogEntry]
    batches: list[tuple[int, int]]
    config: LogConfig

    def __repr__(self) -> str:
        return f"BuiltLog({self.directory}, {len(self.entries)} entries)"


def build_multi_segment_log(directory: Path, *, segments: int = 4) -> BuiltLog:
    """Append mixed batches (sizes 1..12, several record kinds) until `segments` segments exist."""
    rng = random.Random(11)
    cfg = LogConfig(segment_bytes=SEGMENT_BYTES, index_interval_bytes=1024)
    topic = Uuid.random()
    batches: list[tuple[int, int]] = []
    with MetadataLog.open(directory, config=cfg) as log:
        n = 0
        while len(log.segments()) < segments:
            records: list[Record] = []
            for i in range(rng.randint(1, 12)):
                kind = rng.randrange(4)
                if kind <= 1:
                    records.append(config(f"b{n}", i, rng.randbytes(rng.randint(0, 900)).hex()))
                elif kind == 2:
                    records.append(TopicRecord(name=f"t{n}.{i}", topic_id=Uuid.random()))
                else:
                    records.append(
                        PartitionRecord(
                            partition_id=i, topic_id=topic, replicas=(1, 2, 3), isr=(1, 2), leader=1
                        )
                    )
            principal = None if n % 4 == 0 else f"User:u{n % 3}"
            batches.append(log.append(records, principal=principal))
            n += 1
        entries = list(log.read())
    return BuiltLog(directory, entries, batches, cfg)


@pytest.fixture(scope="module")
def built_log(tmp_path_factory: pytest.TempPathFactory) -> BuiltLog:
    """A multi-segment log shared (read-only) by the tests of this module."""
    return build_multi_segment_log(tmp_path_factory.mktemp("built") / "log")


@pytest.fixture(scope="module")
def reader(built_log: BuiltLog) -> Iterator[LogReader]:
    """A read-only instance on `built_log`."""
    log = LogReader.open(built_log.directory, config=built_log.config)
    yield log
    log.close()


@pytest.fixture
def log_copy(built_log: BuiltLog, tmp_path: Path) -> Path:
    """A private copy of `built_log`'s directory, free to damage."""
    copy = tmp_path / "copy"
    shutil.copytree(built_log.directory, copy)
    return copy


# -------------------------------------------------------------------------- append and read


def test_offsets_are_dense_from_zero_with_principal_and_epoch_stamped(log_dir: Path) -> None:
    with MetadataLog.open(log_dir) as log:
        assert log.end_offset == 0
        assert list(log.read()) == []
        results = [
            log.append(batch("a", 1), principal="User:alice"),
            log.append(batch("b", 3)),
            log.append(batch("c", 2), principal="User:bob"),
            log.append(iter(batch("d", 5)), principal="User:carol"),  # any iterable
        ]
        assert results == [(0, 0), (1, 3), (4, 5), (6, 10)]
        assert log.end_offset == 11
        entries = list(log.read())
        assert [e.offset for e in entries] == list(range(11))
        assert [e.record for e in entries] == (
            batch("a", 1) + batch("b", 3) + batch("c", 2) + batch("d", 5)
        )
        assert [e.principal for e in entries] == (
            ["User:alice"] + [None] * 3 + ["User:bob"] * 2 + ["User:carol"] * 5
        )
        assert log.epoch == 1
        assert {e.epoch for e in entries} == {1}


@settings(max_examples=150, deadline=None)
@given(
    gt=st.none() | st.integers(-1, 900),
    lte=st.none() | st.integers(-1, 900),
    limit=st.none() | st.integers(0, 60),
)
def test_read_with_any_range_equals_slicing_the_full_log(
    reader: MetadataLog, built_log: BuiltLog, gt: int | None, lte: int | None, limit: int | None
) -> None:
    # The strategy reaches past the end. (Each segment holds the entry schema, which grew with
    # ClientWriteRecord: the four segments now hold 295 entries, not over 300.)
    assert 250 < len(built_log.entries) < 900
    assert list(reader.read(gt=gt, lte=lte, limit=limit)) == expected_slice(
        built_log.entries, gt, lte, limit
    )


def test_reads_starting_anywhere_in_a_multi_segment_log(
    reader: MetadataLog, built_log: BuiltLog
) -> None:
    entries = built_log.entries
    segments = reader.segments()
    assert len(segments) >= 4
    # Every offset near a segment boundary, and a stride through the whole log.
    starts = {s.base_offset + d for s in segments for d in (-2, -1, 0, 1)}
    starts |= set(range(0, len(entries), 7))
    for k in sorted(s for s in starts if 0 <= s < len(entries)):
        assert list(reader.read(gt=k - 1, limit=15)) == entries[k : k + 15], k
        assert list(reader.read(gt=k)) == entries[k + 1 :], k
    # Spanning reads that end inside a later segment.
    first, third = segments[0], segments[2]
    assert (
        list(reader.read(gt=first.next_offset - 3, lte=third.base_offset + 2))
        == (entries[first.next_offset - 2 : third.base_offset + 3])
    )


def test_every_batch_lies_in_one_segment(reader: MetadataLog, built_log: BuiltLog) -> None:
    segments = reader.segments()
    for first, last in built_log.batches:
        (holder,) = [s for s in segments if s.base_offset <= first < s.next_offset]
        assert last < holder.next_offset, (first, last, holder)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gt": -5},
        {"lte": -2},
        {"limit": -1},
        {"gt": 0, "limit": -3},
        {"gt": "3"},
        {"lte": 2.5},
        {"limit": "10"},
        {"gt": [1]},
    ],
    ids=repr,
)
def test_invalid_read_ranges_raise_log_error(log_dir: Path, kwargs: dict[str, Any]) -> None:
    with MetadataLog.open(log_dir) as log:
        log.append(batch("a", 3))
        with pytest.raises(LogError):
            list(log.read(**kwargs))


def test_edge_ranges_are_valid(log_dir: Path) -> None:
    with MetadataLog.open(log_dir) as log:
        log.append(batch("a", 3))
        assert [e.offset for e in log.read(gt=-1)] == [0, 1, 2]
        assert list(log.read(lte=-1)) == []
        assert list(log.read(limit=0)) == []
        assert list(log.read(gt=2)) == []
        assert list(log.read(gt=100)) == []
        assert [e.offset for e in log.read(lte=100)] == [0, 1, 2]
        with pytest.raises(LogError):
            list(log.read_from_time("yesterday"))  # type: ignore[arg-type]


# ---------------------------------------------------------------------- record round trip

TEXT = st.text(st.characters(codec="utf-8"), max_size=12)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
UUIDS = st.binary(min_size=16, max_size=16).map(Uuid)
BROKERS = st.lists(st.integers(0, 2**31 - 1), max_size=5).map(tuple)

RECORDS: st.SearchStrategy[Record] = st.one_of(
    st.builds(TopicRecord, name=TEXT, topic_id=UUIDS, namespace=TEXT),
    st.builds(
        PartitionRecord,
        partition_id=INT32,
        topic_id=UUIDS,
        replicas=BROKERS,
        isr=BROKERS,
        removing_replicas=BROKERS,
        adding_replicas=BROKERS,
        leader=INT32,
        leader_epoch=INT32,
        partition_epoch=INT32,
        mode=st.sampled_from(Mode),
    ),
    st.builds(
        PartitionChangeRecord,
        partition_id=INT32,
        topic_id=UUIDS,
        isr=st.none() | BROKERS,
        leader=INT32,
        replicas=st.none() | BROKERS,
        leader_epoch=st.none() | INT32,
        mode=st.none() | st.sampled_from(Mode),
    ),
    st.builds(
        ConfigRecord,
        resource_type=st.sampled_from(ConfigResourceType),
        resource_name=TEXT,
        name=TEXT,
        value=st.none() | TEXT,
    ),
    st.builds(NamespaceRecord, namespace_id=UUIDS, name=TEXT, parent_id=st.none() | UUIDS),
    st.builds(
        RegisterBrokerRecord,
        broker_id=INT32,
        incarnation_id=UUIDS,
        broker_epoch=INT64,
        end_points=st.lists(
            st.builds(BrokerEndpoint, name=TEXT, host=TEXT, port=INT32), max_size=3
        ).map(tuple),
        rack=st.none() | TEXT,
        fenced=st.booleans(),
    ),
)


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(
        st.tuples(st.lists(RECORDS, min_size=1, max_size=6), st.none() | TEXT),
        min_size=1,
        max_size=6,
    )
)
def test_every_record_reads_back_equal_to_what_was_appended(
    batches: list[tuple[list[Record], str | None]],
) -> None:
    expected = [(record, principal) for records, principal in batches for record in records]
    with tempfile.TemporaryDirectory() as tmp:
        with MetadataLog.open(tmp) as log:
            for records, principal in batches:
                log.append(records, principal=principal)
            assert [(e.record, e.principal) for e in log.read()] == expected
        with LogReader.open(tmp) as log:
            entries = list(log.read())
            assert [(e.record, e.principal) for e in entries] == expected
            assert [e.offset for e in entries] == list(range(len(expected)))


def test_fastavro_reads_every_segment_directly(reader: MetadataLog, built_log: BuiltLog) -> None:
    by_offset = {e.offset: e for e in built_log.entries}
    segments = reader.segments()
    for segment in segments:
        rows = fastavro_rows(segment.path)
        assert [r["offset"] for r in rows] == list(
            range(segment.base_offset, segment.next_offset)
        ), segment.path.name
        for row in rows:
            entry = by_offset[row["offset"]]
            assert (row["epoch"], row["timestamp"], row["principal"]) == (
                entry.epoch,
                entry.timestamp,
                entry.principal,
            )
            branch, value = row["record"]
            assert branch == f"mlog.{type(entry.record).__name__}V0"
            if isinstance(entry.record, ConfigRecord):
                assert (value["resource_name"], value["name"], value["value"]) == (
                    entry.record.resource_name,
                    entry.record.name,
                    entry.record.value,
                )
            elif isinstance(entry.record, TopicRecord):
                assert (value["name"], value["topic_id"]) == (
                    entry.record.name,
                    entry.record.topic_id.bytes,
                )
    assert sum(s.next_offset - s.base_offset for s in segments) == len(built_log.entries)


# ----------------------------------------------------------------------------- segment roll


def test_segments_roll_at_segment_bytes(log_dir: Path) -> None:
    cfg = LogConfig(segment_bytes=SEGMENT_BYTES)
    rng = random.Random(5)
    with MetadataLog.open(log_dir, config=cfg) as log:
        results: list[tuple[int, int]] = []
        while len(log.segments()) < 4:
            size = rng.randint(1, 20)
            records = batch(f"b{len(results)}", size, value_bytes=60)
            results.append(log.append(records))
        segments = log.segments()
        entries = list(log.read())
    assert segment_files(log_dir) == [s.path.name for s in segments]
    assert segments[0].base_offset == 0
    for previous, current in pairwise(segments):
        assert current.base_offset == previous.next_offset
    for segment in segments:
        assert segment.path.name == f"{segment.base_offset:020d}.avro"
        assert len(segment.path.stem) == 20
        assert segment.path.stat().st_size == segment.size_bytes <= SEGMENT_BYTES
        blocks = scan_blocks(segment.path, segment.base_offset)
        # The first entry of each file is its base offset.
        assert fastavro_rows(segment.path)[0]["offset"] == segment.base_offset
        assert sum(b.count for b in blocks) == segment.next_offset - segment.base_offset
    for sealed, following in pairwise(segments):
        # A segment was sealed only because the next block would not have fit in it.
        next_block = scan_blocks(following.path, following.base_offset)[0]
        assert sealed.size_bytes + (next_block.end - next_block.position) > SEGMENT_BYTES
    # Atomic batches: never split across segments.
    bases = [s.base_offset for s in segments]
    for first, last in results:
        assert not any(first < base <= last for base in bases), (first, last)
    assert [e.offset for e in entries] == list(range(results[-1][1] + 1))


def test_a_segment_fills_to_exactly_segment_bytes_and_never_past_it(log_dir: Path) -> None:
    cfg = LogConfig(segment_bytes=SEGMENT_BYTES)
    text = random.Random(4).randbytes(2000).hex()

    def one_record_block_of(log: MetadataLog, length: int) -> list[Record]:
        """A one-record batch whose block (framing and sync marker included) is `length` bytes."""
        for n in range(len(text)):
            record = config("fit", 0, text[:n])
            count, body = DEFAULT_CODEC.encode_entries(
                [(log.end_offset, log.epoch, T0, None, record)]
            )
            if len(encode_block(count, body)) + SYNC_SIZE == length:
                return [record]
        raise AssertionError(f"no record makes a block of {length} bytes")

    def fill(log: MetadataLog) -> int:
        """Append to the active segment until 500..1600 bytes are free; returns the free bytes."""
        while True:
            free = SEGMENT_BYTES - log.segments()[-1].size_bytes
            if free < 1600:
                return free
            log.append(batch(f"f{log.end_offset}", 1, value_bytes=min(500, free // 2 - 150)))

    with MetadataLog.open(log_dir, config=cfg, clock_ms=FakeClock(T0)) as log:
        free = fill(log)
        assert free >= 500
        segments = len(log.segments())
        first, _ = log.append(one_record_block_of(log, free + 1))  # one byte too many
        assert len(log.segments()) == segments + 1
        assert log.segments()[-1].base_offset == first
        assert log.segments()[-2].size_bytes == SEGMENT_BYTES - free

        free = fill(log)
        segments = len(log.segments())
        log.append(one_record_block_of(log, free))  # fits exactly
        assert len(log.segments()) == segments
        assert log.segments()[-1].size_bytes == SEGMENT_BYTES
        assert log.segments()[-1].path.stat().st_size == SEGMENT_BYTES
        first, _ = log.append(batch("next", 1))
        assert len(log.segments()) == segments + 1
        assert log.segments()[-1].base_offset == first
        assert [e.offset for e in log.read()] == list(range(log.end_offset))


def test_a_batch_bigger_than_a_segment_gets_a_segment_of_its_own(log_dir: Path) -> None:
    cfg = LogConfig(segment_bytes=SEGMENT_BYTES)
    huge = batch("huge", 200, value_bytes=300)  # ~120 KB, twice a segment
    with MetadataLog.open(log_dir, config=cfg) as log:
        assert log.append(batch("a", 3)) == (0, 2)
        assert log.append(huge) == (3, 202)
        assert log.append(batch("b", 2)) == (203, 204)
        segments = log.segments()
        assert [(s.base_offset, s.next_offset) for s in segments] == [
            (0, 3),
            (3, 203),
            (203, 205),
        ]
        assert segments[1].size_bytes > SEGMENT_BYTES
        assert [e.record for e in log.read(gt=2, lte=202)] == huge


def test_segments_roll_at_segment_ms_by_the_append_clock(log_dir: Path) -> None:
    cfg = LogConfig(segment_ms=1000)
    clock = FakeClock(T0)

    def append_at(ms: int) -> None:
        clock.now = T0 + ms
        log.append(batch(f"at{ms}", 1))

    log = MetadataLog.open(log_dir, config=cfg, clock_ms=clock)
    with log:
        for ms in (0, 500, 999):
            append_at(ms)
        assert [s.base_offset for s in log.segments()] == [0]
        append_at(1000)  # the active segment's first entry is now segment.ms old
        append_at(1500)
        append_at(800)  # the clock going back never rolls
        assert [s.base_offset for s in log.segments()] == [0, 3]
        append_at(2000)
        assert [s.base_offset for s in log.segments()] == [0, 3, 6]
    # After a restart, the age still counts from the active segment's first entry.
    log = MetadataLog.open(log_dir, config=cfg, clock_ms=clock)
    with log:
        append_at(2999)
        assert [s.base_offset for s in log.segments()] == [0, 3, 6]
        append_at(3000)
        assert [s.base_offset for s in log.segments()] == [0, 3, 6, 8]
        assert [e.offset for e in log.read()] == list(range(9))
    assert segment_files(log_dir) == [f"{b:020d}.avro" for b in (0, 3, 6, 8)]


# --------------------------------------------------------------------------- reopen, epoch


def test_reopen_keeps_entries_and_each_writer_open_takes_the_next_epoch(log_dir: Path) -> None:
    epoch_file = log_dir / "leader-epoch"
    with MetadataLog.open(log_dir) as log:
        assert log.epoch == 1
        log.append(batch("a", 3))
        first_entries = list(log.read())
    assert epoch_file.read_text().strip() == "1"

    with MetadataLog.open(log_dir) as log:
        assert log.epoch == 2
        assert list(log.read()) == first_entries
        assert log.end_offset == 3
        assert log.append(batch("b", 2)) == (3, 4)
        entries = list(log.read())
    assert epoch_file.read_text().strip() == "2"
    assert [e.epoch for e in entries] == [1, 1, 1, 2, 2]

    for _ in range(2):
        with LogReader.open(log_dir) as log:
            assert log.epoch == 2
            assert list(log.read()) == entries
            assert log.end_offset == 5
            assert not hasattr(log, "append")  # a reader is a role without appends
        assert epoch_file.read_text().strip() == "2"

    with MetadataLog.open(log_dir) as log:
        assert log.epoch == 3
        assert list(log.read()) == entries
        log.append(batch("d", 1))
        assert [e.epoch for e in log.read()] == [1, 1, 1, 2, 2, 3]
    assert epoch_file.read_text().strip() == "3"


# -------------------------------------------------------------------------------- indexes

INDEX_DAMAGE = ["delete", "flip-first-byte", "flip-middle-byte", "truncate", "empty", "garbage"]


def damage(path: Path, how: str) -> None:
    """Damage an index file in one of the `INDEX_DAMAGE` ways."""
    size = path.stat().st_size
    if how == "delete":
        path.unlink()
    elif how == "flip-first-byte":
        flip_byte(path, 0)
    elif how == "flip-middle-byte":
        flip_byte(path, size // 2)
    elif how == "truncate":
        os.truncate(path, size - 5)
    elif how == "empty":
        os.truncate(path, 0)
    else:
        path.write_bytes(os.urandom(size))


@pytest.mark.parametrize("suffix", [".index", ".timeindex", "both"])
@pytest.mark.parametrize("how", INDEX_DAMAGE)
def test_damaged_index_of_a_sealed_segment_is_rebuilt(
    built_log: BuiltLog, log_copy: Path, suffix: str, how: str
) -> None:
    segment = sorted(log_copy.glob("*.avro"))[1]  # sealed, starts past offset 0
    paths = [
        segment.with_suffix(s)
        for s in ((".index", ".timeindex") if suffix == "both" else (suffix,))
    ]
    originals = {
        p: p.read_bytes()
        for p in (segment.with_suffix(".index"), segment.with_suffix(".timeindex"))
    }
    for path in paths:
        damage(path, how)
    damaged = {p: p.read_bytes() if p.exists() else None for p in originals}
    entries = built_log.entries
    ks = [0, 1, 57, 200, 333, len(entries) // 2, len(entries) - 2]
    times = sorted({e.timestamp for e in entries})

    def check_reads(log: StoredLog) -> None:
        assert list(log.read()) == entries
        for k in ks:
            assert list(log.read(gt=k)) == entries[k + 1 :], k
        for t in times[:: max(1, len(times) // 10)]:
            assert list(log.read_from_time(t)) == [e for e in entries if e.timestamp >= t], t

    with LogReader.open(log_copy, config=built_log.config) as log:
        check_reads(log)
    # A read-only open changes nothing on disk.
    assert {p: p.read_bytes() if p.exists() else None for p in originals} == damaged

    with MetadataLog.open(log_copy, config=built_log.config) as writer:
        check_reads(writer)
        # Rebuilt at open: the files are whole again, identical to the ones written live.
        assert {p: p.read_bytes() for p in originals} == originals
    with LogReader.open(log_copy, config=built_log.config) as log:
        check_reads(log)


def test_index_of_another_segment_is_not_trusted(built_log: BuiltLog, log_copy: Path) -> None:
    first, second = sorted(log_copy.glob("*.avro"))[:2]
    for suffix in (".index", ".timeindex"):
        shutil.copyfile(first.with_suffix(suffix), second.with_suffix(suffix))
    with LogReader.open(log_copy, config=built_log.config) as log:
        assert list(log.read()) == built_log.entries
        for k in range(0, len(built_log.entries), 13):
            assert list(log.read(gt=k, limit=5)) == built_log.entries[k + 1 : k + 6]


def test_reads_from_the_middle_start_at_an_indexed_block(log_dir: Path) -> None:
    """Damage before the start of a read is never touched: the offset index jumps past it."""
    cfg = LogConfig(segment_bytes=SEGMENT_BYTES, index_interval_bytes=0)  # index every block
    with MetadataLog.open(log_dir, config=cfg) as log:
        while len(log.segments()) < 3:
            log.append(batch(f"b{log.end_offset}", 5, value_bytes=40))
        entries = list(log.read())
        sealed = log.segments()[0]
    blocks = scan_blocks(sealed.path, 0)
    flip_byte(sealed.path, blocks[0].end - 20)  # inside the first block's data or CRC
    with LogReader.open(log_dir, config=cfg) as log:
        with pytest.raises(LogCorruptionError) as info:
            list(log.read())
        assert info.value.segment == sealed.path
        assert info.value.position == blocks[0].position
        for k in range(blocks[0].count - 1, sealed.next_offset + 10, 3):
            assert list(log.read(gt=k, limit=20)) == entries[k + 1 : k + 21], k


# --------------------------------------------------------------------------------- time


def test_timestamps_never_decrease_and_read_from_time_finds_exactly_the_later_entries(
    log_dir: Path,
) -> None:
    cfg = LogConfig(segment_bytes=SEGMENT_BYTES, index_interval_bytes=0)
    clock = FakeClock(T0)
    # (clock offset from T0 when appending, batch size); the clock jumps back twice.
    steps = [(0, 3), (0, 1), (10, 2), (20, 4), (15, 2), (5, 1), (30, 3), (30, 2), (25, 5)]
    steps += [(40 + i, 1 + i % 4) for i in range(0, 200, 2)]
    expected_ts: list[int] = []
    high = -1
    with MetadataLog.open(log_dir, config=cfg, clock_ms=clock) as log:
        for n, (ms, size) in enumerate(steps):
            clock.now = T0 + ms
            log.append(batch(f"b{n}", size, value_bytes=300))
            high = max(high, T0 + ms)
            expected_ts += [high] * size
        assert len(log.segments()) >= 3
        entries = list(log.read())
    assert [e.timestamp for e in entries] == expected_ts

    def check(log: StoredLog, entries: list[LogEntry]) -> None:
        stamps = sorted({e.timestamp for e in entries})
        for t in {T0 - 5, *stamps, *(s + 1 for s in stamps), *(s - 1 for s in stamps)}:
            later = [e for e in entries if e.timestamp >= t]
            assert list(log.read_from_time(t)) == later, t - T0
            assert log.offset_for_time(t) == (later[0].offset if later else None), t - T0
            assert list(log.read_from_time(t, limit=3)) == later[:3], t - T0
            lte = len(entries) // 2
            assert list(log.read_from_time(t, lte=lte)) == [e for e in later if e.offset <= lte]

    with LogReader.open(log_dir, config=cfg) as reader:
        check(reader, entries)
    # A restarted writer whose clock is behind keeps stamping the highest time seen.
    clock.now = T0 - 1000
    with MetadataLog.open(log_dir, config=cfg, clock_ms=clock) as log:
        first, _ = log.append(batch("late", 2))
        assert [e.timestamp for e in log.read(gt=first - 1)] == [high, high]
        entries = list(log.read())
        check(log, entries)


# --------------------------------------------------------------------------------- locking

HOLDER = """
import sys
from metadata_log import MetadataLog
log = MetadataLog.open(sys.argv[1])
print("OPEN", flush=True)
sys.stdin.readline()
log.close()
"""

CONTENDER = """
import sys
from metadata_log import LogLockedError, MetadataLog
try:
    MetadataLog.open(sys.argv[1])
except LogLockedError as exc:
    print("LOCKED", exc)
else:
    print("OPENED")
"""


def test_second_writer_in_the_same_process_is_refused_naming_the_holder(log_dir: Path) -> None:
    writer = MetadataLog.open(log_dir)
    try:
        writer.append(batch("a", 2))
        with pytest.raises(LogLockedError) as info:
            MetadataLog.open(log_dir)
        assert f"pid {os.getpid()}" in str(info.value)
        assert "--bootstrap-server" in str(info.value)  # the way past a running `mlog serve`
        # Readers work alongside the writer.
        with LogReader.open(log_dir) as reader:
            assert [e.record for e in reader.read()] == batch("a", 2)
        assert writer.append(batch("b", 1)) == (2, 2)
    finally:
        writer.close()
    with MetadataLog.open(log_dir) as log:
        assert log.append(batch("c", 1)) == (3, 3)


@pytest.mark.process
def test_writer_in_another_process_is_refused_naming_this_pid(log_dir: Path) -> None:
    def contend() -> str:
        result = subprocess.run(
            [sys.executable, "-c", CONTENDER, str(log_dir)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
            check=True,
        )
        return result.stdout + result.stderr

    with MetadataLog.open(log_dir) as log:
        log.append(batch("a", 1))
        output = contend()
        assert output.startswith("LOCKED"), output
        assert f"pid {os.getpid()}" in output
    output = contend()
    assert output.startswith("OPENED"), output


@pytest.mark.process
@pytest.mark.parametrize("ending", ["close", "sigkill"])
def test_lock_held_by_another_process_until_it_closes_or_dies(log_dir: Path, ending: str) -> None:
    with MetadataLog.open(log_dir) as log:
        log.append(batch("a", 2))
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(log_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == "OPEN\n"
        with pytest.raises(LogLockedError) as info:
            MetadataLog.open(log_dir)
        assert f"pid {proc.pid}" in str(info.value)
        with LogReader.open(log_dir) as reader:
            assert [e.record for e in reader.read()] == batch("a", 2)
        if ending == "close":
            proc.stdin.write("\n")
            proc.stdin.flush()
            assert proc.wait(timeout=60) == 0
        else:
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(timeout=60) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()
    with MetadataLog.open(log_dir) as log:
        assert log.append(batch("b", 1)) == (2, 2)


# ---------------------------------------------------------------------------- group commit


async def test_concurrent_async_appends_share_blocks_and_get_dense_offsets(log_dir: Path) -> None:
    log = MetadataLog.open(log_dir)
    try:
        results = await asyncio.gather(
            *(log.append_async([config("g", i)], principal=f"p{i}") for i in range(64))
        )
        assert sorted(results) == [(i, i) for i in range(64)]
        entries = list(log.read())
        for i, (first, last) in enumerate(results):
            assert first == last
            assert entries[first].record == config("g", i)
            assert entries[first].principal == f"p{i}"
        segment = log.segments()[-1]
    finally:
        await log.aclose()
    blocks = scan_blocks(segment.path, segment.base_offset)
    assert sum(b.count for b in blocks) == 64
    assert len(blocks) < 64, "no group commit: one block per append"
    assert len({e.timestamp for e in entries}) <= len(blocks)


async def test_an_invalid_batch_fails_alone_in_its_group(log_dir: Path) -> None:
    log = MetadataLog.open(log_dir)
    try:
        bad: list[Record] = [TopicRecord(name=123, topic_id=Uuid.random())]  # type: ignore[arg-type]
        batches = [batch(f"g{i}", 2) for i in range(10)]
        batches.insert(4, bad)
        results = await asyncio.gather(
            *(log.append_async(b) for b in batches), return_exceptions=True
        )
        assert isinstance(results[4], RecordError)
        good = [r for r in results if isinstance(r, tuple)]
        assert sorted(good) == [(2 * i, 2 * i + 1) for i in range(10)]
        entries = list(log.read())
        assert [e.offset for e in entries] == list(range(20))
        assert not any(isinstance(e.record, TopicRecord) for e in entries)
        for b, r in zip(batches, results, strict=True):
            if isinstance(r, tuple):
                assert [e.record for e in entries[r[0] : r[1] + 1]] == b
        segment = log.segments()[-1]
        assert len(scan_blocks(segment.path, segment.base_offset)) < 10
        # The log carries on, synchronously and asynchronously.
        with pytest.raises(RecordError):
            log.append(bad)
        assert log.append(batch("after", 1)) == (20, 20)
        assert await log.append_async(batch("after-async", 2)) == (21, 22)
    finally:
        await log.aclose()


# ------------------------------------------------------------------------------ bad calls


async def test_empty_batches_are_refused(log_dir: Path) -> None:
    with MetadataLog.open(log_dir) as log:
        with pytest.raises(LogError):
            log.append([])
        with pytest.raises(LogError):
            log.append(iter(()))
        with pytest.raises(LogError):
            await log.append_async([])
        assert log.end_offset == 0
        assert log.append(batch("a", 1)) == (0, 0)


async def test_read_only_and_closed_logs_refuse_appends(log_dir: Path) -> None:
    with MetadataLog.open(log_dir) as log:
        log.append(batch("a", 1))
    with LogReader.open(log_dir) as reader:
        # A reader is a role without appends: the writing methods are not there at all.
        assert not any(hasattr(reader, name) for name in ("append", "append_async"))
    log = MetadataLog.open(log_dir)
    log.close()
    log.close()  # idempotent
    with pytest.raises(LogClosedError):
        log.append(batch("c", 1))
    with pytest.raises(LogClosedError):
        await log.append_async(batch("c", 1))
    with pytest.raises(LogClosedError):
        list(log.read())
    with LogReader.open(log_dir) as reader:
        assert [e.record for e in reader.read()] == batch("a", 1)


def test_read_only_open_of_a_missing_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LogError):
        LogReader.open(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


# ------------------------------------------------------------------------------- fail-stop


@contextmanager
def broken_writes(log: MetadataLog) -> Iterator[None]:
    """Make the log's writes fail (EBADF: its descriptor is swapped for a read-only one).

    On exit the real descriptor is put back: the storage "recovers", the log must not.
    """
    real = log._active.fd
    assert real is not None
    read_only_fd = os.open(log.segments()[-1].path, os.O_RDONLY)
    log._active.fd = read_only_fd
    try:
        yield
    finally:
        log._active.fd = real
        os.close(read_only_fd)


async def test_io_error_stops_all_appends_and_reopen_recovers(log_dir: Path) -> None:
    log = MetadataLog.open(log_dir)
    try:
        acknowledged = [log.append(batch("a", 3)), await log.append_async(batch("b", 2))]
        assert acknowledged == [(0, 2), (3, 4)]
        entries = list(log.read())
        with broken_writes(log), pytest.raises(LogFailedError):
            log.append(batch("c", 1))
        # Fail-stop: the descriptor works again, yet every later append is refused.
        for _ in range(2):
            with pytest.raises(LogFailedError):
                log.append(batch("d", 1))
            with pytest.raises(LogFailedError):
                await log.append_async(batch("e", 1))
        # What was acknowledged is still readable, and nothing else was added.
        assert list(log.read()) == entries
        assert log.end_offset == 5
    finally:
        await log.aclose()
    with MetadataLog.open(log_dir) as log:
        assert [(e.offset, e.record) for e in log.read()] == [(e.offset, e.record) for e in entries]
        assert log.append(batch("f", 2)) == (5, 6)
        assert log.verify().ok


async def test_io_error_fails_every_batch_of_the_group(log_dir: Path) -> None:
    log = MetadataLog.open(log_dir)
    try:
        log.append(batch("a", 1))
        with broken_writes(log):
            results = await asyncio.gather(
                *(log.append_async(batch(f"g{i}", 1)) for i in range(5)),
                return_exceptions=True,
            )
        assert all(isinstance(r, LogFailedError) for r in results), results
        with pytest.raises(LogFailedError):
            await log.append_async(batch("later", 1))
        with pytest.raises(LogFailedError):
            log.append(batch("later", 1))
    finally:
        await log.aclose()
    with MetadataLog.open(log_dir) as log:
        assert [e.record for e in log.read()] == batch("a", 1)


# --------------------------------------------------------------------------------- verify


def test_verify_a_clean_log(reader: MetadataLog, built_log: BuiltLog) -> None:
    report = reader.verify()
    assert report.ok
    assert report.entries == len(built_log.entries)
    assert len(report.segments) == len(reader.segments())
    assert all(s.error is None for s in report.segments)
    assert report.torn_tail is None


def test_verify_names_the_damaged_sealed_segment(built_log: BuiltLog, log_copy: Path) -> None:
    paths = sorted(log_copy.glob("*.avro"))
    assert len(paths) >= 3
    target = paths[1]
    base = int(target.stem)
    blocks = scan_blocks(target, base)
    damaged_block = blocks[len(blocks) // 2]
    flip_byte(target, (damaged_block.position + damaged_block.end) // 2)

    with LogReader.open(log_copy, config=built_log.config) as log:
        progress: list[int] = []
        report = log.verify(progress=progress.append)
        assert not report.ok
        assert [s.error is not None for s in report.segments] == [p == target for p in paths]
        error = report.segments[1].error
        assert error is not None
        assert error.segment == target
        assert error.position == damaged_block.position
        assert str(target) in str(error)
        undamaged = sum(b.count for b in blocks[: len(blocks) // 2])
        assert report.segments[1].entries == undamaged
        assert sum(progress) == report.entries  # called per block checked
        # Reads stop at the damage, and never serve anything from it; later segments still read.
        with pytest.raises(LogCorruptionError) as info:
            list(log.read())
        assert info.value.segment == target
        end = log.segments()[1].next_offset
        assert list(log.read(gt=end - 1)) == built_log.entries[end:]
