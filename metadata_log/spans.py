"""Byte ranges of whole, verified blocks, for bulk readers that split a log across workers.

`MetadataLog.read_spans` plans them from the segments' sparse indexes (no block is decoded);
`read_span` reads one of them, in any process that can see the segment file, without opening
the log: each block is CRC-checked as it is read, and nothing past the span's end (the
committed size when the span was planned) is looked at, so a log being appended to is read
consistently.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from metadata_log.container import BlockDamage, RawBlock
from metadata_log.errors import LogCorruptionError
from metadata_log.segment import ScanProblem, Segment


@dataclass(frozen=True, slots=True, kw_only=True)
class ReadSpan:
    """Whole blocks `start..end` (bytes) of one segment, holding offsets `first..next - 1`."""

    path: Path
    base_offset: int
    """Base offset of the segment (its file name)."""
    start: int
    end: int
    first_offset: int
    next_offset: int
    min_timestamp: int
    """No entry of the span is older than this (ms); timestamps never decrease along the log."""
    max_timestamp: int
    """No entry of the span is newer than this (ms)."""

    @property
    def entries(self) -> int:
        """Entries in the span."""
        return self.next_offset - self.first_offset


def spans_of(segment: Segment, split_bytes: int) -> list[ReadSpan]:
    """The committed blocks of `segment` cut at index points about `split_bytes` apart."""
    if segment.is_empty:
        return []
    size = segment.size
    points = list(zip(segment.offset_index.keys, segment.offset_index.values, strict=True))
    times = list(segment.time_index.keys)
    if not points or points[0][1] != segment.header.size:
        points.insert(0, (segment.base_offset, segment.header.size))
        times.insert(0, segment.first_timestamp)
    cuts = [0]
    for i in range(1, len(points)):
        if points[i][1] - points[cuts[-1]][1] >= split_bytes and size - points[i][1] > 0:
            cuts.append(i)
    spans = []
    for n, i in enumerate(cuts):
        last = n == len(cuts) - 1
        j = None if last else cuts[n + 1]
        spans.append(
            ReadSpan(
                path=segment.path,
                base_offset=segment.base_offset,
                start=points[i][1],
                end=size if j is None else points[j][1],
                first_offset=points[i][0],
                next_offset=segment.next_offset if j is None else points[j][0],
                min_timestamp=times[i],
                max_timestamp=segment.max_timestamp if j is None else times[j],
            )
        )
    return spans


def read_span(span: ReadSpan) -> tuple[str, Iterator[RawBlock]]:
    """(writer schema JSON, verified blocks) of a span; damage raises `LogCorruptionError`."""
    try:
        segment = Segment.open_header(span.path, span.base_offset)
    except BlockDamage as exc:
        raise LogCorruptionError(
            span.path, 0, f"bad segment header: {exc}", first_offset=span.base_offset
        ) from None

    def blocks() -> Iterator[RawBlock]:
        try:
            yield from segment.iter_blocks(span.start, span.end)
        except ScanProblem as problem:
            raise LogCorruptionError(
                span.path, problem.position, problem.reason, first_offset=span.first_offset
            ) from None

    return segment.header.schema_json, blocks()
