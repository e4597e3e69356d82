"""Read spans: a log cut into byte ranges of whole blocks for parallel readers, read back whole."""

from __future__ import annotations

import dataclasses
import itertools
import random
from pathlib import Path

import pytest

from metadata_log import LogConfig, LogCorruptionError, LogError, MetadataLog
from metadata_log.errors import LogClosedError
from metadata_log.index import OFFSET_MAGIC, SparseIndex
from metadata_log.reader import LogReader
from metadata_log.spans import ReadSpan, read_span
from records.codec import DEFAULT_CODEC
from records.entry import LogEntry
from records.model import FeatureLevelRecord

CONFIG = LogConfig(segment_bytes=20_000, index_interval_bytes=256)


def _build(directory: Path, batches: int = 150) -> list[LogEntry]:
    rng = random.Random(5)
    now = [1_000]

    def clock() -> int:
        now[0] += 7
        return now[0]

    with MetadataLog.open(directory, config=CONFIG, clock_ms=clock) as log:
        for _ in range(batches):
            names = [rng.randbytes(30).hex() for _ in range(3)]
            log.append([FeatureLevelRecord(name=name, feature_level=1) for name in names])
        assert len(log.segments()) >= 3 or batches < 150
        return list(log.read())


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[LogEntry]]:
    directory = tmp_path_factory.mktemp("spans") / "log"
    return directory, _build(directory)


def _entries(span: ReadSpan) -> list[LogEntry]:
    schema_json, blocks = read_span(span)
    array = DEFAULT_CODEC.reader_array_schema(schema_json)
    return [e for b in blocks for e in DEFAULT_CODEC.decode_entries(b.count, b.body, array)]


@pytest.mark.parametrize("split_bytes", [1, 300, 1000, 5000, 1 << 30])
def test_spans_cover_every_entry_once_in_order(
    built: tuple[Path, list[LogEntry]], split_bytes: int
) -> None:
    directory, entries = built
    with LogReader.open(directory, config=CONFIG) as log:
        spans = log.read_spans(split_bytes=split_bytes)
        segments = log.segments()
    assert [e for s in spans for e in _entries(s)] == entries
    assert spans[0].first_offset == 0 and spans[-1].next_offset == len(entries)
    for before, after in itertools.pairwise(spans):
        assert after.first_offset == before.next_offset
        if after.path == before.path:
            assert after.start == before.end  # no byte of a segment left out or read twice
        else:
            assert after.base_offset == after.first_offset
    for span in spans:
        got = _entries(span)
        assert span.entries == len(got) > 0
        assert [e.offset for e in got] == list(range(span.first_offset, span.next_offset))
        assert span.min_timestamp <= got[0].timestamp
        assert span.max_timestamp >= got[-1].timestamp
        assert span.base_offset == int(span.path.stem)
    per_segment = {s.path for s in spans}
    assert len(per_segment) == len(segments)
    if split_bytes >= 1 << 30:
        assert len(spans) == len(segments)
    elif split_bytes <= 300:
        assert len(spans) > 2 * len(segments)


def test_a_span_ends_at_the_size_planned_even_as_the_log_grows(tmp_path: Path) -> None:
    entries = _build(tmp_path / "log", batches=5)
    with MetadataLog.open(tmp_path / "log", config=CONFIG) as log:
        spans = log.read_spans()
        log.append([FeatureLevelRecord(name="later", feature_level=1)])
        assert [e for s in spans for e in _entries(s)] == entries


def test_an_empty_log_has_no_spans(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path / "log", config=CONFIG) as log:
        assert log.read_spans() == []


def test_split_bytes_must_be_positive_and_the_log_open(tmp_path: Path) -> None:
    _build(tmp_path / "log", batches=2)
    log = LogReader.open(tmp_path / "log", config=CONFIG)
    for bad in (0, -1):
        with pytest.raises(LogError, match="split_bytes must be positive"):
            log.read_spans(split_bytes=bad)
    assert log.read_spans(split_bytes=1)
    log.close()
    with pytest.raises(LogClosedError):
        log.read_spans()


def test_damage_inside_a_span_names_its_place_and_first_offset(tmp_path: Path) -> None:
    _build(tmp_path / "log", batches=20)
    with LogReader.open(tmp_path / "log", config=CONFIG) as log:
        spans = log.read_spans(split_bytes=1)
    span = spans[1]
    data = bytearray(span.path.read_bytes())
    data[span.start + 5] ^= 0xFF
    span.path.write_bytes(bytes(data))
    with pytest.raises(LogCorruptionError) as info:
        _entries(span)
    assert info.value.first_offset == span.first_offset
    assert info.value.segment == span.path
    assert info.value.position >= span.start
    with (
        pytest.raises(LogCorruptionError),
        LogReader.open(tmp_path / "log", config=CONFIG) as log,
    ):
        log.read_spans()


def test_a_damaged_header_is_named_as_such(tmp_path: Path) -> None:
    _build(tmp_path / "log", batches=2)
    with LogReader.open(tmp_path / "log", config=CONFIG) as log:
        (span,) = log.read_spans()
    data = bytearray(span.path.read_bytes())
    data[0] ^= 0xFF  # the magic
    span.path.write_bytes(bytes(data))
    with pytest.raises(LogCorruptionError, match="bad segment header") as info:
        read_span(span)
    assert (info.value.position, info.value.first_offset) == (0, span.base_offset)


def test_a_span_counts_its_entries() -> None:
    span = ReadSpan(
        path=Path("0.avro"),
        base_offset=0,
        start=10,
        end=20,
        first_offset=5,
        next_offset=12,
        min_timestamp=0,
        max_timestamp=0,
    )
    assert span.entries == 7
    assert dataclasses.replace(span, next_offset=5).entries == 0


def test_a_cut_falls_on_the_first_index_point_split_bytes_away(
    built: tuple[Path, list[LogEntry]],
) -> None:
    directory, _ = built
    with LogReader.open(directory, config=CONFIG) as log:
        finest = log.read_spans(split_bytes=1)
        first_segment = [s for s in finest if s.path == finest[0].path]
        assert len(first_segment) >= 3
        # With split_bytes=1 a span starts at each point of the segment's offset index.
        loaded = SparseIndex.load(first_segment[0].path.with_suffix(".index"), OFFSET_MAGIC)
        assert loaded is not None
        assert [s.start for s in first_segment] == loaded[0].values
        assert [s.first_offset for s in first_segment] == loaded[0].keys
        # With split_bytes=1 every index point of the segment starts a span.
        distance = first_segment[1].start - first_segment[0].start
        exact = log.read_spans(split_bytes=distance)
        assert exact[0].end == first_segment[1].start
        assert exact[0].next_offset == first_segment[1].first_offset
        wider = log.read_spans(split_bytes=distance + 1)
        assert wider[0].end > first_segment[1].start


def test_a_segment_whose_index_misses_its_first_block_still_spans_it(tmp_path: Path) -> None:
    sparse = LogConfig(segment_bytes=20_000, index_interval_bytes=1 << 20)
    with MetadataLog.open(tmp_path / "log", config=sparse) as log:
        for i in range(5):
            log.append([FeatureLevelRecord(name=f"f{i}", feature_level=i)])
        entries = list(log.read())
        spans = log.read_spans(split_bytes=1)
    assert [e for s in spans for e in _entries(s)] == entries
    assert spans[0].first_offset == 0 and spans[0].min_timestamp == entries[0].timestamp
