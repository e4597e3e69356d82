"""The partition map: brokers by partitions at a point, aggregated, then drilled down.

Three levels, each a table with one column per broker (grouped by rack, fenced ones marked):

- namespaces (`/map`): a row per namespace, each cell the partitions of its topics the broker
  leads and follows, with those offline and under-replicated;
- topics (`/map?namespace=NAME`, the default namespace `namespace=`): a row per topic of the
  namespace, cells as above;
- partitions (`/map?topic=NAME`): a row per partition, each cell the broker's role in it:
  leader, follower in the ISR, replica out of the ISR, being added or removed.

Each row also counts offline and under-replicated partitions and the READ_ONLY and NONE modes.
A page never holds more than `MAX_ROWS` rows and `MAX_COLUMNS` broker columns (`page` and
`bpage` page through the rest), so at most `MAX_ROWS * MAX_COLUMNS` cells whatever the
cluster's size. The image is the one of `/cluster` at the same point (`travel.image_at`, so
through a server it is what the server lets the principal DESCRIBE); counting it reads each
partition of the shown scope once.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from itertools import chain
from operator import attrgetter

from api.console.errors import BadInput
from api.console.timeline import MAX_FILTER, optional_int_param
from api.console.travel import Point
from records.model import NO_LEADER, Mode, mode_name
from replay.image import MetadataImage, TopicImage

MAX_ROWS = 100
"""Rows (namespaces, topics or partitions) on one page."""

MAX_COLUMNS = 40
"""Broker columns on one page."""

MAX_PAGE = 2**31 - 1


@dataclasses.dataclass(slots=True)
class Cell:
    """One broker's share of a row's partitions."""

    leaders: int = 0
    followers: int = 0
    offline: int = 0
    """Partitions of the row the broker is a replica of and that have no leader."""
    under_replicated: int = 0
    """Partitions of the row the broker is a replica of whose ISR is short of the replicas."""

    @property
    def text(self) -> str:
        """The cell as the page shows it: `L3 F5`, with `O1` and `U2` when not zero."""
        if not (self.leaders or self.followers or self.offline or self.under_replicated):
            return ""
        parts = [f"L{self.leaders}", f"F{self.followers}"]
        if self.offline:
            parts.append(f"O{self.offline}")
        if self.under_replicated:
            parts.append(f"U{self.under_replicated}")
        return " ".join(parts)

    @property
    def title(self) -> str:
        """The cell in words (its tooltip)."""
        return (
            f"leads {self.leaders}, follows {self.followers}, offline {self.offline}, "
            f"under-replicated {self.under_replicated}"
        )

    @property
    def state(self) -> str:
        """The cell's class: its worst condition."""
        if self.offline:
            return "offline"
        if self.under_replicated:
            return "urp"
        return "held" if self.leaders or self.followers else "empty"


@dataclasses.dataclass(slots=True)
class Row:
    """A namespace's or topic's partitions, counted per broker and in all."""

    name: str
    topics: int = 0
    partitions: int = 0
    offline: int = 0
    under_replicated: int = 0
    read_only: int = 0
    no_mode: int = 0
    """Partitions in mode NONE (neither read nor written)."""
    cells: dict[int, Cell] = dataclasses.field(default_factory=dict)

    def cell(self, broker: int) -> Cell:
        """The row's cell of `broker` (empty if it holds nothing of the row)."""
        return self.cells.get(broker) or Cell()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRow:
    """One partition of the drilled-down topic and each broker's role in it."""

    partition: int
    leader: str
    isr: str
    mode: str
    offline: bool
    under_replicated: bool
    roles: dict[int, str]
    """Broker -> `leader`, `follower` (in the ISR), `lagging` (a replica out of the ISR),
    `adding` or `removing`."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Broker:
    """A broker column's heading."""

    id: int
    rack: str
    state: str
    """`unfenced`, `fenced`, `shutting down`, or `unregistered` (named by replicas only)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class MapQuery:
    """What the map shows: every field is a URL parameter."""

    point: Point
    namespace: str | None = None
    """The namespace whose topics are rows ("" the default one); None: namespaces are rows."""
    topic: str = ""
    """The topic whose partitions are rows."""
    q: str = ""
    """Only topics whose name holds this (at the topics level)."""
    page: int = 0
    bpage: int = 0

    @property
    def level(self) -> str:
        """`partitions`, `topics` or `namespaces`."""
        if self.topic:
            return "partitions"
        return "namespaces" if self.namespace is None else "topics"

    def params(self, **changed: object) -> dict[str, str]:
        """The URL parameters of this view (with `changed` ones replaced), defaults left out."""
        values = dataclasses.replace(self, **changed)  # type: ignore[arg-type]  # known fields
        shown = {"at": values.point.text, "topic": values.topic, "q": values.q}
        shown = {k: v for k, v in shown.items() if v}
        if values.namespace is not None and not values.topic:
            shown["namespace"] = values.namespace
        if values.page:
            shown["page"] = str(values.page)
        if values.bpage:
            shown["bpage"] = str(values.bpage)
        return shown


def parse_query(params: Mapping[str, str], point: Point) -> MapQuery:
    """The map's parameters (the point parsed by `travel.parse_point`); `BadInput` if wrong."""
    texts = {}
    for name in ("namespace", "topic", "q"):
        text = params.get(name, "").strip()
        if len(text) > MAX_FILTER:
            raise BadInput(f"{name} is {len(text)} characters long: at most {MAX_FILTER}")
        texts[name] = text
    if texts["topic"] and texts["namespace"]:
        raise BadInput("give topic (its qualified name) or namespace, not both")
    return MapQuery(
        point=point,
        namespace=texts["namespace"] if "namespace" in params else None,
        topic=texts["topic"],
        q=texts["q"],
        page=optional_int_param(params, "page", low=0, high=MAX_PAGE) or 0,
        bpage=optional_int_param(params, "bpage", low=0, high=MAX_PAGE) or 0,
    )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMap:
    """One page of the map."""

    offset: int
    timestamp: int
    level: str
    scope: str
    """What the rows belong to: the cluster, a namespace or a topic, in words."""
    brokers: list[Broker]
    """This page's broker columns."""
    broker_count: int
    totals: Row
    """The scope's partitions per broker (the columns of this page) and in all."""
    rows: list[Row]
    partitions: list[PartitionRow]
    row_count: int
    """Rows in the scope (across pages)."""
    pages: int
    bpages: int

    @property
    def cells(self) -> int:
        """Cells this page holds (rows times broker columns)."""
        return (len(self.rows) + len(self.partitions) + 1) * len(self.brokers)


_LEADER, _REPLICAS = attrgetter("leader"), attrgetter("replicas")


def _tally(topic: TopicImage) -> Row:
    """A topic's counts, read from its partitions.

    Leaders and replicas are counted by `Counter`s (in C); the partitions that are offline,
    under-replicated or not READ_WRITE, usually few, are then looked at one by one.
    """
    parts = topic.partitions
    row = Row(name=topic.qualified_name, topics=1, partitions=len(parts))
    leaders = Counter(map(_LEADER, parts))
    for broker, held in Counter(chain.from_iterable(map(_REPLICAS, parts))).items():
        led = leaders.get(broker, 0)
        row.cells[broker] = Cell(leaders=led, followers=held - led)
    odd = [p for p in parts if p.leader == NO_LEADER or p.mode or len(p.isr) < len(p.replicas)]
    for p in odd:
        offline = p.leader == NO_LEADER
        short = len(p.isr) < len(p.replicas)
        row.offline += offline
        row.under_replicated += short
        if p.mode == Mode.READ_ONLY:
            row.read_only += 1
        elif p.mode == Mode.NONE:
            row.no_mode += 1
        for broker in p.replicas:
            cell = row.cells[broker]
            cell.offline += offline
            cell.under_replicated += short
    return row


def _merge(into: Row, row: Row) -> None:
    into.topics += row.topics
    into.partitions += row.partitions
    into.offline += row.offline
    into.under_replicated += row.under_replicated
    into.read_only += row.read_only
    into.no_mode += row.no_mode
    for broker, cell in row.cells.items():
        mine = into.cells.get(broker)
        if mine is None:
            mine = into.cells[broker] = Cell()
        mine.leaders += cell.leaders
        mine.followers += cell.followers
        mine.offline += cell.offline
        mine.under_replicated += cell.under_replicated


def _brokers(image: MetadataImage, named: Iterable[int]) -> list[Broker]:
    """Every registered broker and every broker a replica names, by rack then id."""
    columns = {
        b.broker_id: Broker(
            id=b.broker_id,
            rack=b.rack or "-",
            state=(
                "shutting down"
                if b.in_controlled_shutdown
                else ("fenced" if b.fenced else "unfenced")
            ),
        )
        for b in image.cluster.sorted()
    }
    for broker in named:
        if broker not in columns:
            columns[broker] = Broker(id=broker, rack="-", state="unregistered")
    return sorted(columns.values(), key=lambda b: (b.rack, b.id))


def _pages(count: int, size: int) -> int:
    return max(1, -(-count // size))


def _page_of(page: int, pages: int, name: str) -> int:
    if page >= pages:
        raise BadInput(f"{name}={page} is past the last page: give 0..{pages - 1}")
    return page


def _topic_rows(image: MetadataImage, query: MapQuery) -> tuple[list[TopicImage], str]:
    namespace = query.namespace or ""
    if namespace and not image.namespaces.exists(namespace):
        raise BadInput(
            f"namespace={namespace[:80]!r} does not exist at offset {image.provenance.offset}"
        )
    needle = query.q.casefold()
    names = sorted(
        t.qualified_name
        for t in image.topics.by_id.values()
        if t.namespace == namespace and needle in t.qualified_name.casefold()
    )
    topics = [image.topics.by_id[image.topics.by_name[n]] for n in names]
    return topics, f"namespace {namespace or '(default)'}"


def _roles(topic: TopicImage) -> list[PartitionRow]:
    rows = []
    for p in topic.partitions:
        roles: dict[int, str] = {}
        for broker in p.replicas:
            if broker == p.leader:
                roles[broker] = "leader"
            elif broker in p.isr:
                roles[broker] = "follower"
            else:
                roles[broker] = "lagging"
        for broker in p.adding_replicas:
            roles[broker] = "adding"
        for broker in p.removing_replicas:
            roles[broker] = "removing"
        rows.append(
            PartitionRow(
                partition=p.partition_id,
                leader="none" if p.leader == NO_LEADER else str(p.leader),
                isr=",".join(str(b) for b in p.isr) or "-",
                mode=mode_name(p.mode),
                offline=p.leader == NO_LEADER,
                under_replicated=len(p.isr) < len(p.replicas),
                roles=roles,
            )
        )
    return rows


def partition_map(image: MetadataImage, query: MapQuery) -> PartitionMap:
    """The page of the map `query` asks for, of `image`."""
    totals = Row(name="all")
    rows: list[Row] = []
    partitions: list[PartitionRow] = []
    if query.level == "partitions":
        topic = image.topics.get_by_name(query.topic)
        if topic is None:
            raise BadInput(
                f"topic={query.topic[:80]!r} does not exist at offset {image.provenance.offset}"
            )
        _merge(totals, _tally(topic))
        every = _roles(topic)
        count, scope = len(every), f"topic {topic.qualified_name}"
        pages = _pages(count, MAX_ROWS)
        page = _page_of(query.page, pages, "page")
        partitions = every[page * MAX_ROWS : (page + 1) * MAX_ROWS]
    elif query.level == "topics":
        topics, scope = _topic_rows(image, query)
        count = len(topics)
        pages = _pages(count, MAX_ROWS)
        page = _page_of(query.page, pages, "page")
        every_row = []
        for topic in topics:
            row = _tally(topic)
            _merge(totals, row)
            every_row.append(row)
        rows = every_row[page * MAX_ROWS : (page + 1) * MAX_ROWS]
    else:
        by_namespace: dict[str, Row] = {}
        for topic in image.topics.by_id.values():
            held = by_namespace.get(topic.namespace)
            if held is None:
                held = by_namespace[topic.namespace] = Row(name=topic.namespace)
            _merge(held, _tally(topic))
        for name in image.namespaces.by_name:
            by_namespace.setdefault(name, Row(name=name))
        every_row = [by_namespace[n] for n in sorted(by_namespace)]
        for row in every_row:
            _merge(totals, row)
        count, scope = len(every_row), "the cluster"
        pages = _pages(count, MAX_ROWS)
        page = _page_of(query.page, pages, "page")
        rows = every_row[page * MAX_ROWS : (page + 1) * MAX_ROWS]
    brokers = _brokers(image, totals.cells)
    bpages = _pages(len(brokers), MAX_COLUMNS)
    bpage = _page_of(query.bpage, bpages, "bpage")
    return PartitionMap(
        offset=image.provenance.offset,
        timestamp=image.provenance.timestamp,
        level=query.level,
        scope=scope,
        brokers=brokers[bpage * MAX_COLUMNS : (bpage + 1) * MAX_COLUMNS],
        broker_count=len(brokers),
        totals=totals,
        rows=rows,
        partitions=partitions,
        row_count=count,
        pages=pages,
        bpages=bpages,
    )
