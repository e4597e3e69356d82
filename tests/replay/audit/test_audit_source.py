"""The `metadata_log` data source's reader, driven in-process as Spark's Python workers drive it.

Spark runs the reader (options, `pushFilters`, `partitions`, `read`) in Python worker processes
that import it from disk; these tests call the same methods directly (pyarrow only, no JVM), so
what they check is what a Spark query gets, and a change to the reader shows here.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

import pyarrow as pa
from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from metadata_log import LogConfig, MetadataLog
from metadata_log.container import RawBlock
from metadata_log.errors import LogCorruptionError
from metadata_log.reader import LogReader
from metadata_log.spans import ReadSpan
from records.codec import DEFAULT_CODEC
from records.model import ConfigRecord, ConfigResourceType, FeatureLevelRecord
from replay.audit import source
from replay.audit.columns import ARROW_SCHEMA, SCHEMA_DDL
from replay.audit.source import (
    Bounds,
    MetadataLogDataSource,
    MetadataLogReader,
    SpanPartition,
    chosen_columns,
    read_batches,
    timestamp_ms,
)

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
HOUR = 3_600_000
BLOCK = 4
"""Entries per append: each append is one block of the log, at its own hour."""
BLOCKS = 6


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log of BLOCKS blocks of BLOCK entries; block b is written at T0 + b hours."""
    path = tmp_path_factory.mktemp("source") / "log"
    now = [T0]
    with MetadataLog.open(path, clock_ms=lambda: now[0]) as log:
        for b in range(BLOCKS):
            now[0] = T0 + b * HOUR
            # Blocks of over 4 KiB (compressed): a point of the sparse index at each, so spans
            # can be cut between any two blocks.
            records = [
                ConfigRecord(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name=f"t{b}",
                    name=f"c{b}-{i}",
                    value=random.Random(b * BLOCK + i).randbytes(800).hex(),
                )
                for i in range(BLOCK)
            ]
            log.append(records, principal=f"User:p{b}")
    return path


def _at(block: int) -> datetime:
    return datetime.fromtimestamp((T0 + block * HOUR) / 1000, tz=UTC)


def _reader(log_dir: Path, **options: str) -> MetadataLogReader:
    reader = MetadataLogDataSource({"path": str(log_dir), **options}).reader(None)
    assert isinstance(reader, MetadataLogReader)
    return reader


def _scan(
    reader: MetadataLogReader, filters: Sequence[Filter] = ()
) -> tuple[list[Filter], list[pa.RecordBatch]]:
    """(filters handed back to Spark, every batch of every partition) as a query gets them."""
    left = list(reader.pushFilters(list(filters)))
    batches = [b for p in reader.partitions() for b in reader.read(p)]
    for batch in batches:
        assert batch.schema == ARROW_SCHEMA
    return left, batches


def _offsets(batches: list[pa.RecordBatch]) -> list[int]:
    return [o for b in batches for o in b.column("offset").to_pylist()]


def test_the_source_names_itself_and_its_table() -> None:
    assert MetadataLogDataSource.name() == "metadata_log"
    assert MetadataLogDataSource({"path": "x"}).schema() == SCHEMA_DDL


def test_a_scan_without_filters_reads_every_entry_once_in_order(log_dir: Path) -> None:
    left, batches = _scan(_reader(log_dir))
    assert left == []
    assert _offsets(batches) == list(range(BLOCKS * BLOCK))
    rows = [r for b in batches for r in b.to_pylist()]
    assert [r["principal"] for r in rows[::BLOCK]] == [f"User:p{b}" for b in range(BLOCKS)]
    assert [r["timestamp"] for r in rows[::BLOCK]] == [_at(b) for b in range(BLOCKS)]
    assert rows[5]["config_name"] == "c1-1" and rows[5]["record_type"] == "ConfigRecord"
    assert all(r["payload"] is not None for r in rows)
    # Whole blocks go in one batch until it is full: a small log is one batch.
    assert len(batches) == 1


@pytest.mark.parametrize("value", ["false", "FALSE", "False"])
def test_payload_false_leaves_the_payload_null(log_dir: Path, value: str) -> None:
    _, batches = _scan(_reader(log_dir, payload=value))
    assert _offsets(batches) == list(range(BLOCKS * BLOCK))
    assert all(b.column("payload").null_count == b.num_rows for b in batches)
    assert batches[0].column("config_name")[0].as_py() == "c0-0"


def test_payload_anything_else_keeps_it(log_dir: Path) -> None:
    _, batches = _scan(_reader(log_dir, payload="true"))
    assert all(b.column("payload").null_count == 0 for b in batches)


# Offsets: block b holds 4b..4b+3. Each case cuts inside a block, or at a block's edge.
OFFSET_CASES = [
    ([GreaterThan(("offset",), 5)], range(6, 24)),
    ([GreaterThan(("offset",), 3)], range(4, 24)),
    ([GreaterThanOrEqual(("offset",), 5)], range(5, 24)),
    ([GreaterThanOrEqual(("offset",), 7)], range(7, 24)),
    ([GreaterThanOrEqual(("offset",), 4)], range(4, 24)),
    ([LessThan(("offset",), 10)], range(0, 10)),
    ([LessThan(("offset",), 8)], range(0, 8)),
    ([LessThanOrEqual(("offset",), 10)], range(0, 11)),
    ([LessThanOrEqual(("offset",), 8)], range(0, 9)),
    ([EqualTo(("offset",), 9)], range(9, 10)),
    ([EqualTo(("offset",), 12)], range(12, 13)),
    ([GreaterThan(("offset",), 2), LessThanOrEqual(("offset",), 13)], range(3, 14)),
    # Several bounds on one side: the tightest wins, whatever their order.
    ([GreaterThan(("offset",), 9), GreaterThanOrEqual(("offset",), 2)], range(10, 24)),
    ([GreaterThanOrEqual(("offset",), 2), GreaterThan(("offset",), 9)], range(10, 24)),
    ([LessThan(("offset",), 20), LessThanOrEqual(("offset",), 6)], range(0, 7)),
    ([LessThanOrEqual(("offset",), 6), LessThan(("offset",), 20)], range(0, 7)),
    ([EqualTo(("offset",), 9), GreaterThan(("offset",), 9)], range(0)),
    ([GreaterThan(("offset",), 30)], range(0)),
    ([LessThan(("offset",), 0)], range(0)),
]


@pytest.mark.parametrize(("filters", "expected"), OFFSET_CASES, ids=repr)
def test_offset_filters_are_taken_and_applied_exactly(
    log_dir: Path, filters: list[Filter], expected: range
) -> None:
    left, batches = _scan(_reader(log_dir), filters)
    assert left == []  # Spark need not check them again
    assert _offsets(batches) == list(expected)


@pytest.mark.parametrize("split", ["1", "9000"])
def test_offset_filters_on_split_spans(log_dir: Path, split: str) -> None:
    reader = _reader(log_dir, splitBytes=split)
    assert len(reader.partitions()) > 1
    left, batches = _scan(reader, [GreaterThan(("offset",), 6), LessThan(("offset",), 17)])
    assert left == [] and _offsets(batches) == list(range(7, 17))


def test_spans_outside_the_bounds_are_not_planned(log_dir: Path) -> None:
    everything = _reader(log_dir, splitBytes="1").partitions()
    reader = _reader(log_dir, splitBytes="1")
    list(reader.pushFilters([GreaterThanOrEqual(("offset",), 20)]))
    kept = reader.partitions()
    assert 0 < len(kept) < len(everything)
    assert all(isinstance(p, SpanPartition) and p.span.next_offset > 20 for p in kept)
    # What Spark shows of a partition: its segment file and byte range.
    spans = [p.span for p in kept if isinstance(p, SpanPartition)]
    assert [p.value for p in kept] == [(str(s.path), s.start, s.end) for s in spans]
    assert _offsets([b for p in kept for b in reader.read(p)]) == list(range(20, 24))


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"gt": "5"}, range(6, 24)),
        ({"lte": "9"}, range(0, 10)),
        ({"gt": "3", "lte": "7"}, range(4, 8)),
    ],
)
def test_gt_and_lte_options(log_dir: Path, options: dict[str, str], expected: range) -> None:
    _, batches = _scan(_reader(log_dir, **options))
    assert _offsets(batches) == list(expected)


def test_options_and_filters_combine(log_dir: Path) -> None:
    _, batches = _scan(_reader(log_dir, gt="3", lte="17"), [GreaterThan(("offset",), 1)])
    assert _offsets(batches) == list(range(4, 18))
    _, batches = _scan(_reader(log_dir, gt="3", lte="17"), [LessThan(("offset",), 30)])
    assert _offsets(batches) == list(range(4, 18))


def test_other_filters_are_handed_back_and_change_nothing(log_dir: Path) -> None:
    others: list[Filter] = [
        EqualTo(("offset",), True),  # a boolean is not an offset
        GreaterThan(("offset",), 2.5),
        EqualTo(("principal",), "User:p1"),
        IsNotNull(("offset",)),
        GreaterThan(("timestamp",), "2026-01-01"),  # not a datetime: no pruning
    ]
    left, batches = _scan(_reader(log_dir), others)
    assert left == others
    assert _offsets(batches) == list(range(BLOCKS * BLOCK))


# Timestamps: block b is at T0 + b hours, and every entry of a block has its time.
TIME_CASES = [
    ([GreaterThanOrEqual(("timestamp",), _at(2))], range(2, BLOCKS)),
    ([GreaterThan(("timestamp",), _at(2))], range(2, BLOCKS)),  # Spark drops block 2's rows
    ([LessThanOrEqual(("timestamp",), _at(3))], range(0, 4)),
    ([LessThan(("timestamp",), _at(3))], range(0, 4)),  # Spark drops block 3's rows
    ([EqualTo(("timestamp",), _at(4))], range(4, 5)),
    ([GreaterThan(("timestamp",), _at(1)), LessThan(("timestamp",), _at(3))], range(1, 4)),
    ([GreaterThanOrEqual(("timestamp",), _at(9))], range(0)),
]


@pytest.mark.parametrize(("filters", "blocks"), TIME_CASES, ids=repr)
def test_timestamp_filters_prune_whole_blocks_and_go_back_to_spark(
    log_dir: Path, filters: list[Filter], blocks: range
) -> None:
    for split in ("1", str(16 << 20)):
        left, batches = _scan(_reader(log_dir, splitBytes=split), filters)
        assert left == filters
        assert _offsets(batches) == [o for b in blocks for o in range(b * BLOCK, (b + 1) * BLOCK)]


def test_the_bounds_of_a_reader_are_its_own(log_dir: Path) -> None:
    narrowed = _reader(log_dir)
    list(narrowed.pushFilters([EqualTo(("offset",), 3)]))
    assert _offsets(_scan(_reader(log_dir))[1]) == list(range(BLOCKS * BLOCK))
    assert _offsets(_scan(narrowed)[1]) == [3]


def test_a_reader_needs_a_path() -> None:
    for options in ({}, {"path": ""}):
        with pytest.raises(ValueError, match="needs the log directory"):
            MetadataLogReader(options)


def test_a_partition_of_another_source_is_refused(log_dir: Path) -> None:
    with pytest.raises(TypeError, match="not a metadata_log partition"):
        list(_reader(log_dir).read(InputPartition(0)))


def _span(**changes: Any) -> ReadSpan:
    values: dict[str, Any] = {
        "path": Path("x"),
        "base_offset": 0,
        "start": 0,
        "end": 1,
        "first_offset": 10,
        "next_offset": 20,
        "min_timestamp": 100,
        "max_timestamp": 200,
        **changes,
    }
    return ReadSpan(**values)


def test_bounds_keep_a_span_with_any_entry_inside() -> None:
    span = _span()  # offsets 10..19, times 100..200
    assert Bounds().keeps(span)
    assert Bounds(lo=19).keeps(span) and not Bounds(lo=20).keeps(span)
    assert Bounds(hi=10).keeps(span) and not Bounds(hi=9).keeps(span)
    assert Bounds(since=200).keeps(span) and not Bounds(since=201).keeps(span)
    assert Bounds(until=100).keeps(span) and not Bounds(until=99).keeps(span)
    assert Bounds(lo=10, hi=19, since=100, until=200).keeps(span)


def test_read_batches_slices_blocks_cut_by_the_bounds(log_dir: Path) -> None:
    with LogReader.open(log_dir) as log:
        (span,) = log.read_spans()
    whole = list(read_batches(span))
    assert len(whole) == 1 and _offsets(whole) == list(range(BLOCKS * BLOCK))
    assert whole[0].column("payload").null_count == 0  # payload by default
    # Blocks before a cut block go out first, the cut block alone, sliced; then the rest.
    cut = list(read_batches(span, Bounds(lo=2, hi=13)))
    assert [b.column("offset").to_pylist() for b in cut] == [
        [2, 3],
        [4, 5, 6, 7, 8, 9, 10, 11],
        [12, 13],
    ]
    inner = list(read_batches(span, Bounds(lo=8, hi=15)))
    assert [b.num_rows for b in inner] == [8]
    assert _offsets(list(read_batches(span, Bounds(lo=5, hi=5)))) == [5]
    assert _offsets(list(read_batches(span, Bounds(since=T0 + HOUR, until=T0 + HOUR)))) == list(
        range(4, 8)
    )
    unpaid = list(read_batches(span, payload=False))
    assert unpaid[0].column("payload").null_count == BLOCKS * BLOCK


def test_a_span_whose_blocks_do_not_start_where_planned_is_corrupt(log_dir: Path) -> None:
    with LogReader.open(log_dir) as log:
        (span,) = log.read_spans()
    for first in (span.first_offset + 1, span.first_offset - 1):
        shifted = ReadSpan(
            path=span.path,
            base_offset=span.base_offset,
            start=span.start,
            end=span.end,
            first_offset=first,
            next_offset=span.next_offset,
            min_timestamp=span.min_timestamp,
            max_timestamp=span.max_timestamp,
        )
        with pytest.raises(LogCorruptionError, match="expected"):
            list(read_batches(shifted))


def test_a_log_of_several_segments_reads_whole(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path / "log", config=LogConfig(segment_bytes=4096)) as log:
        for i in range(40):
            log.append([FeatureLevelRecord(name=f"f{i}", feature_level=i)] * 2)
        assert len(log.read_spans()) > 1
    _, batches = _scan(_reader(tmp_path / "log"))
    assert _offsets(batches) == list(range(80))
    _, batches = _scan(_reader(tmp_path / "log"), [GreaterThanOrEqual(("offset",), 51)])
    assert _offsets(batches) == list(range(51, 80))


def test_timestamp_ms_reads_naive_times_as_utc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")  # local time is not UTC here
    time.tzset()
    try:
        assert timestamp_ms(datetime(2026, 1, 1, 0, 0, 1, 500_000)) == T0 + 1500
        assert timestamp_ms(_at(2)) == T0 + 2 * HOUR
        paris = timezone(timedelta(hours=1))
        assert timestamp_ms(datetime(2026, 1, 1, 1, tzinfo=paris)) == T0
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_block_whose_entries_skip_an_offset_is_corrupt(
    log_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A block's CRC holds, its prefix says offsets 0..1, its entries are 0 and 2.
    record = FeatureLevelRecord(name="f", feature_level=1)
    count, body = DEFAULT_CODEC.encode_entries([(0, 1, T0, None, record), (2, 1, T0, None, record)])
    block = RawBlock(position=77, end=99, count=count, body=body)
    monkeypatch.setattr(
        source, "read_span", lambda span: (DEFAULT_CODEC.entry_schema_json, iter([block]))
    )
    with pytest.raises(LogCorruptionError, match=r"block holds offsets 0\.\.2") as caught:
        list(read_batches(_span(first_offset=0, next_offset=2)))
    assert caught.value.position == 77


def test_a_full_batch_is_cut_at_32768_rows(tmp_path: Path) -> None:
    record = FeatureLevelRecord(name="f", feature_level=1)
    with MetadataLog.open(tmp_path / "log") as log:
        for _ in range(33):  # a block each
            log.append([record] * 1024)
        (span,) = log.read_spans()
    batches = list(read_batches(span))
    assert [b.num_rows for b in batches] == [32_768, 1024]
    assert _offsets(batches) == list(range(33 * 1024))


def test_a_log_being_written_is_planned_and_read(log_dir: Path, tmp_path: Path) -> None:
    record = FeatureLevelRecord(name="f", feature_level=1)
    with MetadataLog.open(tmp_path / "log") as writer:
        writer.append([record] * 3)
        _, batches = _scan(_reader(tmp_path / "log"))
        assert _offsets(batches) == [0, 1, 2]


def test_the_default_split_is_16_mib(log_dir: Path) -> None:
    assert _reader(log_dir).split_bytes == 16 << 20
    assert _reader(log_dir, splitBytes="4096").split_bytes == 4096


def _schema(*fields: tuple[str, Any, bool]) -> StructType:
    return StructType([StructField(name, kind, nullable) for name, kind, nullable in fields])


def test_a_given_schema_narrows_the_batches_to_its_columns(log_dir: Path) -> None:
    wanted = _schema(
        ("record_type", StringType(), False),
        ("offset", LongType(), False),
        ("config_name", StringType(), True),
    )
    reader = MetadataLogDataSource({"path": str(log_dir)}).reader(wanted)
    assert isinstance(reader, MetadataLogReader)
    narrow = [b for p in reader.partitions() for b in reader.read(p)]
    _, whole = _scan(_reader(log_dir))
    assert all(b.schema.names == ["record_type", "offset", "config_name"] for b in narrow)
    assert pa.Table.from_batches(narrow).to_pylist() == (
        pa.Table.from_batches(whole).select(["record_type", "offset", "config_name"]).to_pylist()
    )


def test_the_whole_table_as_a_given_schema_reads_every_column(log_dir: Path) -> None:
    assert chosen_columns(None) is None
    every = _schema(*((f.name, LongType(), True) for f in ARROW_SCHEMA))
    assert chosen_columns(every) is None  # the table's own schema: nothing to narrow


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (("offsets", LongType(), False), "metadata_log has no column 'offsets'"),
        (("offset", StringType(), False), "metadata_log's column 'offset' is int64, not string"),
        (
            ("isr", ArrayType(LongType()), True),
            "metadata_log's column 'isr' is list<element: int32>",
        ),
    ],
    ids=["unknown", "type", "element type"],
)
def test_a_schema_of_other_columns_or_types_is_refused(field: Any, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        chosen_columns(_schema(field))
