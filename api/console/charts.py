"""Charts of the log: changes per hour or day by principal and by kind, topics and partitions.

What `mlog audit churn` answers, from the log directly (no Spark): the console reads a window
of entries through the session's `Metadata` handle, as the timeline does (`Metadata.read`, a
data directory's segments or the server's FetchLog), and counts them per period. The window
starts after a cursor (`after`), at a time (`since`), or without either at the last
`SCAN_BUDGET` entries of the log; it ends at `until`, at the log's end, after `SCAN_BUDGET`
entries or at the `MAX_PERIODS`-th period, whichever comes first, and the page links the
window after it. The timeline's filters (principal, entity, kind, internal) narrow what is
counted; bookkeeping records are left out unless `internal=1`.

The topic and partition counts over time come from the image at the window's start
(`Metadata.image`, one snapshot plus the log after it) and the window's own entries replayed
onto it (`MetadataDelta`, the image's own replay), sampled at the end of each period: one
image per page, whatever the number of periods. An entity's charts (`entity_series`) sample
a bounded number of images instead (`ENTITY_SAMPLES`), one per chosen entry of its history.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from api.console import svg
from api.console.changes import entity_kind, kind_of
from api.console.errors import BadInput
from api.console.timeline import (
    Filters,
    batches,
    kept,
    parse_filters,
    time_ms,
)
from api.python_api import Metadata
from records.entry import LogEntry
from records.model import NO_LEADER
from records.uuids import Uuid
from replay.delta.metadata import MetadataDelta
from replay.image import MetadataImage, Provenance, TopicImage
from replay.timetravel import HistoryEntry, TimeTravelError

SCAN_BUDGET = 50_000
"""The most entries one page counts (the next page continues after them), as the timeline."""

MAX_PERIODS = 240
"""The most periods one page charts (ten days by hour, eight months by day)."""

TOP_SERIES = svg.MAX_SERIES - 1
"""Principals or kinds drawn each as a series; the rest are summed as "other"."""

ENTITY_SAMPLES = 12
"""The most images an entity's charts sample (one per chosen entry of its history)."""

PERIODS = {"hour": 3_600_000, "day": 86_400_000}
"""The periods changes are counted by, in milliseconds."""

_ACCEPTED = ("after", "since", "until", "principal", "entity", "kind", "internal")
"""The timeline's filters that the charts take too."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ChartQuery:
    """What the charts page counts: every field is a URL parameter."""

    by: str
    filters: Filters
    newest: bool = False
    """Neither `after` nor `since` given: the window is the log's last entries."""

    def params(self, **changed: str) -> dict[str, str]:
        """The URL parameters of this query (with `changed` ones replaced)."""
        shown = {"by": self.by, **self.filters.query()}
        if not self.newest and "since" not in shown:
            shown["after"] = str(self.filters.after)  # -1 too: from the log's first entry
        return {k: v for k, v in {**shown, **changed}.items() if v}


def parse_query(params: Mapping[str, str]) -> ChartQuery:
    """The charts' parameters; `BadInput` names the one that is wrong."""
    by = params.get("by", "").strip() or "hour"
    if by not in PERIODS:
        raise BadInput(f"by={by[:40]!r} is not a period: give hour or day")
    if params.get("q", "").strip():
        raise BadInput("the charts count changes and take no text search (q): filter by kind")
    filters = parse_filters({k: v for k, v in params.items() if k in _ACCEPTED})
    given = {k for k in ("after", "since") if params.get(k, "").strip()}
    return ChartQuery(by=by, filters=filters, newest=not given)


def period_label(start_ms: int, by: str) -> str:
    """A period's start as text: `2026-11-22T08` for an hour, `2026-11-22` for a day."""
    moment = datetime.fromtimestamp(start_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%dT%H" if by == "hour" else "%Y-%m-%d")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Period:
    """One period's counts."""

    start: int
    """Its first millisecond."""
    label: str
    changes: int
    by_principal: dict[str, int]
    by_kind: dict[str, int]
    topics: int
    """Topics at the period's last entry (the window's)."""
    partitions: int
    last_offset: int


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Charts:
    """A page of charts: the periods of a window of the log, and where the window is."""

    by: str
    periods: list[Period]
    principals: list[str]
    """The principals drawn as series, most changes first (the rest are "other")."""
    kinds: list[str]
    after: int
    """The cursor the window started after."""
    last_read: int
    next_after: int | None
    """The cursor of the next window; None when this one reached the log's end (or `until`)."""
    scanned: int
    start_topics: int
    start_partitions: int


def _top(counts: Counter[str]) -> list[str]:
    return [name for name, _ in counts.most_common(TOP_SERIES)]


def _counts(image: MetadataImage) -> tuple[int, int]:
    return len(image.topics), image.topics.partition_count()


class _Tally:
    """The periods counted so far, and the image replayed up to the last one closed."""

    def __init__(self, image: MetadataImage, by: str) -> None:
        self.by = by
        self.image = image
        self.delta = MetadataDelta(image)
        self.periods: list[Period] = []
        self.principals: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self._changes = 0
        self._by_principal: Counter[str] = Counter()
        self._by_kind: Counter[str] = Counter()

    def add(self, entry: LogEntry, filters: Filters, since: int | None, until: int | None) -> None:
        """Replay `entry`, and count it if the filters keep it."""
        record = entry.record
        self.delta.replay(record)
        kind = kind_of(record)
        # The filters need the kinds only: the entity's name ("") is never built.
        if kept(entry, (entity_kind(record), "", kind), filters, since, until):
            who = entry.principal or "-"
            self._changes += 1
            self._by_principal[who] += 1
            self._by_kind[kind] += 1
            self.principals[who] += 1
            self.kinds[kind] += 1

    def close(self, start: int, provenance: Provenance) -> None:
        """End the period that started at `start`, its last batch ending at `provenance`."""
        self.image = self.delta.apply(provenance)
        self.delta = MetadataDelta(self.image)
        topics, partitions = _counts(self.image)
        self.periods.append(
            Period(
                start=start,
                label=period_label(start, self.by),
                changes=self._changes,
                by_principal=dict(self._by_principal),
                by_kind=dict(self._by_kind),
                topics=topics,
                partitions=partitions,
                last_offset=provenance.offset,
            )
        )
        self._changes, self._by_principal, self._by_kind = 0, Counter(), Counter()


def _start_image(metadata: Metadata, query: ChartQuery, since: int | None) -> MetadataImage:
    """The image the window starts after.

    At `after`, just before `since`, or without either `SCAN_BUDGET` entries before the end.
    """
    after = query.filters.after
    if after == -1 and since is not None:
        try:
            return metadata.image(at_time=str(since - 1))
        except TimeTravelError:
            return metadata.image(at_offset=-1)  # `since` is before the first entry
    if query.newest:
        after = max(-1, metadata.image().provenance.offset - SCAN_BUDGET)
    try:
        return metadata.image(at_offset=after)
    except TimeTravelError as exc:
        raise BadInput(f"after={after}: {exc}") from None


def read_charts(metadata: Metadata, query: ChartQuery) -> Charts:
    """The charts of `query`'s window (blocking: the console runs it on a worker thread)."""
    filters, width = query.filters, PERIODS[query.by]
    since, until = time_ms(filters.since), time_ms(filters.until)
    start_image = _start_image(metadata, query, since)
    # An offset inside an atomic batch has the image of the batch's end: count from there.
    after = start_image.provenance.offset
    tally = _Tally(start_image, query.by)
    cursor, scanned = after, 0
    last: Provenance | None = None
    open_start: int | None = None
    ended = full = False
    entries = metadata.read(gt=after if after >= 0 else None, limit=SCAN_BUDGET)
    groups = list(batches(iter(entries)))  # at most SCAN_BUDGET entries
    cut = sum(len(g) for g in groups) >= SCAN_BUDGET
    if cut and len(groups) > 1:
        # The budget may end inside the last batch: the next window starts with it whole.
        groups.pop()
    elif cut and groups:
        # One run over the budget: read it to its end, so that the next window starts at a
        # batch's end (an offset inside an atomic batch has the image of the batch's end: the
        # entries between would be counted by neither window).
        run = groups[0]
        while True:
            more = list(metadata.read(gt=run[-1].offset, limit=SCAN_BUDGET))
            extra = next(batches(iter([run[0], *more])))[1:]
            run.extend(extra)
            if len(extra) < len(more) or len(more) < SCAN_BUDGET:
                break
    for batch in groups:
        head = batch[0]
        if until is not None and head.timestamp > until:
            ended = True  # appended after the range: so is everything after it
            break
        start = head.timestamp - head.timestamp % width
        if open_start is not None and last is not None and start != open_start:
            tally.close(open_start, last)
            if len(tally.periods) >= MAX_PERIODS:
                full = True  # this batch starts the next window
                break
        open_start = start
        for entry in batch:
            tally.add(entry, filters, since, until)
        scanned += len(batch)
        cursor = batch[-1].offset
        last = Provenance(offset=cursor, epoch=batch[-1].epoch, timestamp=batch[-1].timestamp)
    if not full and open_start is not None and last is not None:
        tally.close(open_start, last)
    start_topics, start_partitions = _counts(start_image)
    return Charts(
        by=query.by,
        periods=tally.periods,
        principals=_top(tally.principals),
        kinds=_top(tally.kinds),
        after=after,
        last_read=cursor,
        next_after=None if ended or not (cut or full) else cursor,
        scanned=scanned,
        start_topics=start_topics,
        start_partitions=start_partitions,
    )


def _series(periods: Sequence[Period], names: list[str], field: str) -> list[svg.Series]:
    series = [
        svg.Series(name=name, values=[getattr(p, field).get(name, 0) for p in periods])
        for name in names
    ]
    other = [p.changes - sum(getattr(p, field).get(n, 0) for n in names) for p in periods]
    if any(other):
        series.append(svg.Series(name="other", values=other))
    return series


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Drawn:
    """A chart ready for a page: its SVG, its legend, and the numbers as a table."""

    title: str
    svg: str
    legend: str
    columns: list[str]
    rows: list[tuple[str, list[int | float]]]


def drawn(title: str, labels: list[str], series: list[svg.Series], *, bars: bool) -> Drawn:
    """A chart of `series` over `labels`, with its table (one row per label)."""
    draw = svg.stacked_bars if bars else svg.lines
    return Drawn(
        title=title,
        svg=draw(title, labels, series),
        legend=svg.legend(series),
        columns=[one.name for one in series],
        rows=[(label, [one.values[i] for one in series]) for i, label in enumerate(labels)],
    )


def charts_of(page: Charts) -> list[Drawn]:
    """The charts page's charts: changes by principal, by kind; topics and partitions."""
    labels = [p.label for p in page.periods]
    return [
        drawn(
            f"Changes per {page.by} by principal",
            labels,
            _series(page.periods, page.principals, "by_principal"),
            bars=True,
        ),
        drawn(
            f"Changes per {page.by} by kind",
            labels,
            _series(page.periods, page.kinds, "by_kind"),
            bars=True,
        ),
        drawn(
            "Topics at the end of each period",
            labels,
            [svg.Series(name="topics", values=[p.topics for p in page.periods])],
            bars=False,
        ),
        drawn(
            "Partitions at the end of each period",
            labels,
            [svg.Series(name="partitions", values=[p.partitions for p in page.periods])],
            bars=False,
        ),
    ]


# ------------------------------------------------------------------------ an entity's charts


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TopicSample:
    """A topic's state at one offset (zeros where it did not exist)."""

    offset: int
    partitions: int
    under_replicated: int
    offline: int
    min_isr: int
    max_isr: int


def _sample(topic: TopicImage | None, offset: int) -> TopicSample:
    if topic is None or not topic.partitions:
        return TopicSample(
            offset=offset, partitions=0, under_replicated=0, offline=0, min_isr=0, max_isr=0
        )
    sizes = [len(p.isr) for p in topic.partitions]
    return TopicSample(
        offset=offset,
        partitions=len(topic.partitions),
        under_replicated=sum(1 for p in topic.partitions if len(p.isr) < len(p.replicas)),
        offline=sum(1 for p in topic.partitions if p.leader == NO_LEADER),
        min_isr=min(sizes),
        max_isr=max(sizes),
    )


def chosen(entries: Sequence[HistoryEntry], count: int = ENTITY_SAMPLES) -> list[int]:
    """At most `count` offsets of `entries`, spread evenly, the first and last included."""
    offsets = sorted({e.offset for e in entries})
    if len(offsets) <= count:
        return offsets
    step = (len(offsets) - 1) / (count - 1)
    return sorted({offsets[round(i * step)] for i in range(count)})


def entity_series(
    metadata: Metadata, name: str, topic_id: Uuid | None, entries: Sequence[HistoryEntry]
) -> list[TopicSample]:
    """A topic's samples at offsets of its history (blocking; `ENTITY_SAMPLES` images at most).

    By `name` each sample finds the incarnation of then; by `topic_id`, that incarnation.
    """
    samples: list[TopicSample] = []
    for offset in chosen(entries):
        image = metadata.image(at_offset=offset)
        if samples and samples[-1].offset == image.provenance.offset:
            continue  # an entry inside an atomic batch: the image is of the batch's end
        topic = image.topics.get_by_name(name) if topic_id is None else image.topics.get(topic_id)
        samples.append(_sample(topic, image.provenance.offset))
    return samples


def entity_charts(samples: Sequence[TopicSample]) -> list[Drawn]:
    """The entity page's charts: partitions, under-replicated and offline, ISR sizes."""
    labels = [str(s.offset) for s in samples]
    return [
        drawn(
            "Partitions",
            labels,
            [svg.Series(name="partitions", values=[s.partitions for s in samples])],
            bars=False,
        ),
        drawn(
            "Under-replicated and offline partitions",
            labels,
            [
                svg.Series(name="under-replicated", values=[s.under_replicated for s in samples]),
                svg.Series(name="offline", values=[s.offline for s in samples]),
            ],
            bars=False,
        ),
        drawn(
            "ISR size (smallest and largest of its partitions)",
            labels,
            [
                svg.Series(name="smallest ISR", values=[s.min_isr for s in samples]),
                svg.Series(name="largest ISR", values=[s.max_isr for s in samples]),
            ],
            bars=False,
        ),
    ]
