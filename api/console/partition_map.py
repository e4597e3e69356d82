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
through a server it is what the server lets the principal DESCRIBE). The namespaces' counts
are carried from the last image the handle drew (`map_counts.NamespaceCounts`: only the topics
that changed are counted again); a namespace's topics page counts the topics it shows (and
every topic a search `q` keeps); a topic's page reads its partitions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from api.console.errors import BadInput
from api.console.map_counts import NamespaceCounts, Row, count_namespaces, merge, tally
from api.console.timeline import MAX_FILTER, optional_int_param
from api.console.travel import Point
from records.model import NO_LEADER, mode_name
from replay.image import MetadataImage, TopicImage

MAX_ROWS = 100
"""Rows (namespaces, topics or partitions) on one page."""

MAX_COLUMNS = 40
"""Broker columns on one page."""

MAX_PAGE = 2**31 - 1


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


def partition_map(
    image: MetadataImage, query: MapQuery, counts: NamespaceCounts | None = None
) -> PartitionMap:
    """The page of the map `query` asks for, of `image`.

    `counts`: the namespaces' counts carried from the last image drawn (the console keeps one
    per data directory's handle); without it every topic of the scope is counted.
    """
    totals = Row(name="all")
    rows: list[Row] = []
    partitions: list[PartitionRow] = []
    if query.level == "partitions":
        topic = image.topics.get_by_name(query.topic)
        if topic is None:
            raise BadInput(
                f"topic={query.topic[:80]!r} does not exist at offset {image.provenance.offset}"
            )
        merge(totals, tally(topic))
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
        first, end = page * MAX_ROWS, (page + 1) * MAX_ROWS
        if counts is not None and not query.q:
            # The namespace's sums are the totals: only the page's topics are counted.
            held = counts.of(image).get(query.namespace or "")
            if held is not None:
                merge(totals, held)
            rows = [tally(topic) for topic in topics[first:end]]
        else:
            for i, topic in enumerate(topics):
                row = tally(topic)
                merge(totals, row)
                if first <= i < end:
                    rows.append(row)
    else:
        by_namespace = dict(counts.of(image) if counts is not None else count_namespaces(image))
        for name in image.namespaces.by_name:
            by_namespace.setdefault(name, Row(name=name))
        every_row = [by_namespace[n] for n in sorted(by_namespace)]
        for row in every_row:
            merge(totals, row)
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
