"""The `metadata_log` PySpark data source: a log directory as a DataFrame, read in parallel.

`spark.read.format("metadata_log").load(log_dir)` after `replay.audit.register(spark)`; an
archive URL (`load("s3://bucket/prefix")`, or the option `archive`) reads an archive instead,
one partition per archived segment, with no mount (`replay.audit.archived`). The driver plans
input partitions from the segments' sparse indexes (one per segment, large segments cut into
ranges of whole blocks of about `splitBytes`), capturing each segment's committed size,
so a log being appended to is read up to the blocks complete at planning time. Executors read
their byte range of the segment file, check each block's CRC, and yield Arrow batches
(`replay.audit.columns`). No jar, no network beyond Spark's own.

A schema given to the reader (`spark.read.format("metadata_log").schema(...)`, some of the
table's columns with their types: `read_log(..., columns=...)`) narrows what each batch carries
to those columns, so Spark converts only the columns a scan uses.

Filters on `offset` (=, <, <=, >, >=) are pushed down and applied exactly; filters on
`timestamp` prune whole blocks (every entry of a block has the block's timestamp) and are
re-checked by Spark. The options `gt` and `lte` give an offset range as the rest of the code
base spells it, for Spark versions or callers without filter pushdown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from metadata_log.archive import ArchiveDamage
from metadata_log.container import RawBlock, body_prefix
from metadata_log.errors import LogCorruptionError
from metadata_log.reader import LogReader
from metadata_log.spans import ReadSpan, read_span
from replay.audit.archived import (
    ArchivedSegment,
    archived_segments,
    is_archive_url,
    open_archive,
    read_archived,
)
from replay.audit.columns import ARROW_SCHEMA, COLUMN_NAMES, SCHEMA_DDL, BlockConverter

SOURCE_NAME = "metadata_log"
DEFAULT_SPLIT_BYTES = 16 << 20
BATCH_ROWS = 32_768
"""Entries per Arrow batch: large enough that per-batch costs vanish, small enough for memory."""

_NO_LIMIT = 1 << 62


@dataclass(frozen=True, slots=True, kw_only=True)
class Bounds:
    """The part of the log a scan wants: offsets `lo..hi` and times `since..until` (ms)."""

    lo: int = 0
    hi: int = _NO_LIMIT
    since: int = -_NO_LIMIT
    until: int = _NO_LIMIT

    def keeps(self, span: ReadSpan | ArchivedSegment) -> bool:
        """Whether any entry of the span can be in bounds."""
        return (
            span.next_offset > self.lo
            and span.first_offset <= self.hi
            and span.max_timestamp >= self.since
            and span.min_timestamp <= self.until
        )


class SpanPartition(InputPartition):
    """One input partition: a span of whole blocks of one segment, and the bounds to apply."""

    def __init__(self, span: ReadSpan, bounds: Bounds, *, payload: bool) -> None:
        super().__init__((str(span.path), span.start, span.end))
        self.span = span
        self.bounds = bounds
        self.payload = payload


class ArchivePartition(InputPartition):
    """One input partition: an archived segment, read whole, and the bounds to apply."""

    def __init__(self, segment: ArchivedSegment, bounds: Bounds, *, payload: bool) -> None:
        super().__init__((segment.url, segment.name))
        self.segment = segment
        self.bounds = bounds
        self.payload = payload


def _millis(value: Any) -> int | None:
    """Milliseconds since the epoch of a pushed-down timestamp literal (naive = local time)."""
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return None


class MetadataLogReader(DataSourceReader):
    """Plans spans on the driver and decodes them in the executors' Python workers."""

    def __init__(self, options: Mapping[str, str], columns: pa.Schema | None = None) -> None:
        # Spark's option map is case-insensitive (`splitBytes` arrives as `splitbytes`).
        path = options.get("path")
        archive = options.get("archive")
        if path and is_archive_url(path):
            path, archive = None, path
        if not path and not archive:
            raise ValueError(
                "metadata_log needs the log directory or an archive URL: spark.read.format("
                '"metadata_log").load(<data-dir>/log) or .load("s3://bucket/prefix")'
            )
        if path and archive:
            raise ValueError("metadata_log reads a log directory or an archive, not both")
        self.path = path
        self.archive = archive
        self.columns = columns
        """The columns each batch carries (None: all of them, `ARROW_SCHEMA`)."""
        self.split_bytes = int(options.get("splitBytes", DEFAULT_SPLIT_BYTES))
        self.payload = options.get("payload", "true").lower() != "false"
        gt = options.get("gt")
        lte = options.get("lte")
        self.bounds = Bounds(
            lo=0 if gt is None else int(gt) + 1, hi=_NO_LIMIT if lte is None else int(lte)
        )

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:  # noqa: N802 - Spark's name
        """Take offset comparisons (applied exactly); prune by time, leaving Spark the check."""
        lo, hi = self.bounds.lo, self.bounds.hi
        since, until = self.bounds.since, self.bounds.until
        for f in filters:
            column = getattr(f, "attribute", None)
            value = getattr(f, "value", None)
            if column == ("offset",) and isinstance(value, int) and not isinstance(value, bool):
                if isinstance(f, EqualTo):
                    lo, hi = max(lo, value), min(hi, value)
                    continue
                if isinstance(f, GreaterThan):
                    lo = max(lo, value + 1)
                    continue
                if isinstance(f, GreaterThanOrEqual):
                    lo = max(lo, value)
                    continue
                if isinstance(f, LessThan):
                    hi = min(hi, value - 1)
                    continue
                if isinstance(f, LessThanOrEqual):
                    hi = min(hi, value)
                    continue
            elif column == ("timestamp",) and (ms := _millis(value)) is not None:
                # Literals are whole microseconds: widen by a millisecond, Spark re-checks.
                if isinstance(f, GreaterThan | GreaterThanOrEqual):
                    since = max(since, ms - 1)
                elif isinstance(f, LessThan | LessThanOrEqual):
                    until = min(until, ms + 1)
                elif isinstance(f, EqualTo):
                    since, until = max(since, ms - 1), min(until, ms + 1)
            yield f
        self.bounds = Bounds(lo=lo, hi=hi, since=since, until=until)

    def partitions(self) -> list[InputPartition]:
        """One partition per span of whole blocks (per archived segment) holding wanted entries."""
        if self.archive is not None:
            location, manifest = open_archive(self.archive)
            return [
                ArchivePartition(split, self.bounds, payload=self.payload)
                for s in archived_segments(location, manifest)
                if self.bounds.keeps(s)
                for split in s.splits(self.split_bytes)
            ]
        assert self.path is not None
        with LogReader.open(self.path) as log:
            spans = log.read_spans(split_bytes=self.split_bytes)
        return [
            SpanPartition(s, self.bounds, payload=self.payload)
            for s in spans
            if self.bounds.keeps(s)
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The partition's entries in bounds, as Arrow batches of up to `BATCH_ROWS` rows."""
        if isinstance(partition, ArchivePartition):
            batches = read_archived_batches(
                partition.segment, partition.bounds, payload=partition.payload
            )
        elif isinstance(partition, SpanPartition):
            batches = read_batches(partition.span, partition.bounds, payload=partition.payload)
        else:
            raise TypeError(f"not a metadata_log partition: {partition!r}")
        wanted = self.columns
        if wanted is None:
            return batches
        return (
            pa.RecordBatch.from_arrays(batch.select(wanted.names).columns, schema=wanted)
            for batch in batches
        )


_CONVERTERS: dict[tuple[str, bool], BlockConverter] = {}


def _converter(schema_json: str, payload: bool) -> BlockConverter:
    found = _CONVERTERS.get((schema_json, payload))
    if found is None:
        found = _CONVERTERS[schema_json, payload] = BlockConverter(schema_json, payload=payload)
    return found


def read_batches(
    span: ReadSpan, bounds: Bounds = Bounds(), *, payload: bool = True
) -> Iterator[pa.RecordBatch]:
    """The entries of a span within `bounds`, as Arrow batches (used by the data source)."""
    schema_json, blocks = read_span(span)

    def damage(position: int, reason: str) -> Exception:
        return LogCorruptionError(span.path, position, reason)

    return _batches(schema_json, blocks, span.first_offset, bounds, payload=payload, damage=damage)


def read_archived_batches(
    segment: ArchivedSegment, bounds: Bounds = Bounds(), *, payload: bool = True
) -> Iterator[pa.RecordBatch]:
    """The entries of an archived segment within `bounds`, as Arrow batches."""
    schema_json, blocks = read_archived(segment)

    def damage(position: int, reason: str) -> Exception:
        return ArchiveDamage(f"{segment.url}/{segment.name}: block at byte {position}: {reason}")

    first = segment.first_offset if segment.split_start == 0 else None
    return _batches(schema_json, blocks, first, bounds, payload=payload, damage=damage)


def _batches(
    schema_json: str,
    blocks: Iterator[RawBlock],
    first_offset: int | None,
    bounds: Bounds,
    *,
    payload: bool,
    damage: Callable[[int, str], Exception],
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the blocks' entries within `bounds`; offsets checked to be dense.

    `first_offset` is the offset the first block must start at (None: wherever it starts, for
    a split of an archived segment, whose start is known only once read).
    """
    builder = _converter(schema_json, payload).builder()
    expected = first_offset
    for block in blocks:
        first, _, timestamp = body_prefix(block.body)
        if expected is None:
            expected = first
        if first != expected:
            raise damage(block.position, f"block starts at offset {first}, expected {expected}")
        expected += block.count
        last = first + block.count - 1
        if first > bounds.hi:
            break
        if last < bounds.lo or not bounds.since <= timestamp <= bounds.until:
            continue
        lo = max(bounds.lo - first, 0)
        hi = min(bounds.hi - first + 1, block.count)
        if (lo or hi < block.count) and builder.rows:
            # A block cut by the bounds goes in a batch of its own, sliced.
            yield builder.finish()
        held = builder.add(block.count, block.body)
        if held != (first, last):
            raise damage(block.position, f"block holds offsets {held[0]}..{held[1]}")
        if lo or hi < block.count:
            yield builder.finish().slice(lo, hi - lo)
        elif builder.rows >= BATCH_ROWS:
            yield builder.finish()
    if builder.rows:
        yield builder.finish()


class MetadataLogDataSource(DataSource):
    """`spark.read.format("metadata_log").load(log_dir)`: the entries of a metadata log."""

    @classmethod
    def name(cls) -> str:
        """The short name Spark knows the source by."""
        return SOURCE_NAME

    def schema(self) -> str:
        """The table's columns (documented in docs/audit.md)."""
        return SCHEMA_DDL

    def reader(self, schema: StructType | None) -> DataSourceReader:
        """A reader of the table's columns, or of those of a schema given to Spark's reader."""
        return MetadataLogReader(self.options, columns=chosen_columns(schema))


def chosen_columns(schema: StructType | None) -> pa.Schema | None:
    """The Arrow schema of a schema given to the reader, checked (None: the whole table).

    Each column must be one of the table's, with its type (`SCHEMA_DDL`); ValueError otherwise.
    """
    if schema is None:
        return None
    names = tuple(schema.fieldNames())
    if names == COLUMN_NAMES:
        return None
    wanted = to_arrow_schema(schema, timezone="UTC")
    for field in wanted:
        if field.name not in COLUMN_NAMES:
            raise ValueError(
                f"metadata_log has no column {field.name!r}; give a schema of its columns "
                "(docs/audit.md lists them)"
            )
        ours = ARROW_SCHEMA.field(field.name)
        if field.type != ours.type:
            raise ValueError(
                f"metadata_log's column {field.name!r} is {ours.type}, not {field.type}"
            )
    return wanted


def timestamp_ms(moment: datetime) -> int:
    """Milliseconds since the epoch of an aware or UTC-naive datetime (Spark's timestamps)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
