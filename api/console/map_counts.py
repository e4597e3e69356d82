"""The partition map's counts: a topic's partitions per broker, summed by namespace.

`tally` counts one topic (leaders, followers, offline and under-replicated partitions per
broker; the modes); `NamespaceCounts` keeps the namespaces' sums of the last image it counted
and carries them to the next: images share every topic that did not change (`TopicImage`s are
immutable and a delta copies only what it touched), so the topics that differ are found by
walking the two topic maps side by side (`replay.sql.increments.map_changes`, in proportion to
the changes) and only theirs are taken out and counted again. A map of a 1M-partition image
drawn after a few commits costs those commits' topics, not a pass over 100,000 topics.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from itertools import chain
from operator import attrgetter

from immutables import Map

from records.model import NO_LEADER, Mode
from records.uuids import Uuid
from replay.image import MetadataImage, TopicImage
from replay.sql.increments import map_changes


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

    def copy(self) -> Row:
        """A row with the same counts that can be changed without changing this one."""
        return dataclasses.replace(
            self, cells={b: dataclasses.replace(c) for b, c in self.cells.items()}
        )


_LEADER, _REPLICAS = attrgetter("leader"), attrgetter("replicas")


def tally(topic: TopicImage) -> Row:
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


def merge(into: Row, row: Row, sign: int = 1) -> None:
    """Add `row`'s counts to `into` (`sign` -1: take them out; cells left empty go)."""
    into.topics += sign * row.topics
    into.partitions += sign * row.partitions
    into.offline += sign * row.offline
    into.under_replicated += sign * row.under_replicated
    into.read_only += sign * row.read_only
    into.no_mode += sign * row.no_mode
    for broker, cell in row.cells.items():
        mine = into.cells.get(broker)
        if mine is None:
            mine = into.cells[broker] = Cell()
        mine.leaders += sign * cell.leaders
        mine.followers += sign * cell.followers
        mine.offline += sign * cell.offline
        mine.under_replicated += sign * cell.under_replicated
        if sign < 0 and not (mine.leaders or mine.followers):
            del into.cells[broker]  # a replica count of 0: the row holds nothing there


RECOUNT_SHARE = 4
"""Changes past a quarter of the topics are counted from scratch (walking both maps and
counting twice would cost more than one pass)."""


class NamespaceCounts:
    """The namespaces' counts of the newest image asked for, carried from image to image.

    One per console handle, used by one call at a time (`HistorySource` runs its calls in
    turn). The counts it hands out are never changed afterwards (a namespace whose topics
    changed gets new `Row`s), so a page may render them while the next image is counted.
    """

    def __init__(self) -> None:
        self._topics: Map[Uuid, TopicImage] | None = None
        self._rows: dict[str, Row] = {}
        self.recounts = 0
        """Times every topic was counted (the first image, or one too far from the last)."""

    def of(self, image: MetadataImage) -> dict[str, Row]:
        """Each namespace holding a topic in `image`: its topics' counts (do not change them)."""
        topics = image.topics.by_id
        held = self._topics
        if held is topics:
            return self._rows
        if held is not None:
            changed, deleted = map_changes(held, topics)
            if (len(changed) + len(deleted)) * RECOUNT_SHARE <= max(len(topics), len(held)):
                self._rows = _carried(self._rows, held, changed, deleted)
                self._topics = topics
                return self._rows
        self._rows = count_namespaces(image)
        self._topics = topics
        self.recounts += 1
        return self._rows


def count_namespaces(image: MetadataImage) -> dict[str, Row]:
    """Each namespace holding a topic in `image`: its topics' counts, every topic counted."""
    rows: dict[str, Row] = {}
    for topic in image.topics.by_id.values():
        held = rows.get(topic.namespace)
        if held is None:
            held = rows[topic.namespace] = Row(name=topic.namespace)
        merge(held, tally(topic))
    return rows


def _carried(
    rows: dict[str, Row],
    old: Map[Uuid, TopicImage],
    changed: dict[Uuid, TopicImage],
    deleted: list[Uuid],
) -> dict[str, Row]:
    """`rows` of the topics `old`, with `changed` (new or replaced) and `deleted` applied."""
    rows = dict(rows)
    copied: set[str] = set()

    def row_of(namespace: str) -> Row:
        if namespace not in copied:
            copied.add(namespace)
            held = rows.get(namespace)
            rows[namespace] = Row(name=namespace) if held is None else held.copy()
        return rows[namespace]

    for topic_id in chain(changed, deleted):
        before = old.get(topic_id)
        if before is not None:
            merge(row_of(before.namespace), tally(before), -1)
    for topic in changed.values():
        merge(row_of(topic.namespace), tally(topic))
    for namespace in copied:
        if rows[namespace].topics == 0:
            del rows[namespace]  # its last topic went
    return rows
