"""Incremental snapshots: what changed between two images as rows, and rows overlaid on a base.

An increment at offset N is written on a base snapshot (full, or an increment itself) whose
image the writer still holds: the image is immutable and every delta copies only the path to
what it changed (Kafka's `MetadataDelta`/`MetadataImage`), so a topic, a partition or an area
(brokers, configs, ACLs, ...) that is the very same object in both images did not change. What
differs is written:

- each changed or created topic: its topic row, the partition rows that are not the base's
  objects, its pending deletion, and its partition count in `snapshot_changed_topics`;
  a deleted topic: count -1 there and no rows;
- each small area that changed (features, brokers with their endpoints and features,
  namespaces, configs, SCRAM credentials, ACLs, clients' writes): all its rows, the table
  named in `replaced_tables`.

The increment's checksum is the whole image's, as a full snapshot of it would have: its base's
per-table sums (`content_sums`) with the changed rows' old digests taken out and their new
ones added. Loading one reads its chain's rows, collapses them (`Overlay`), and streams the full
snapshot's rows through it into the image, so the loaded image is checked against that checksum
exactly as a full snapshot's is.
"""

from __future__ import annotations

import functools
import gc
import itertools
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from immutables import Map
from sqlalchemy import select

from replay.image import MetadataImage
from replay.map_nodes import NODE_TYPES
from replay.sql.checksum import (
    ACLS,
    BROKER_FEATURES,
    BROKERS,
    CLIENT_WRITES,
    CONFIGS,
    ENDPOINTS,
    FEATURES,
    NAMESPACES,
    PARTITIONS,
    PENDING,
    SCRAM,
    TOPICS,
    ContentChecksum,
    Row,
)
from replay.sql.content import TopicRows, image_from_rows, image_rows
from replay.sql.errors import SnapshotContentError
from replay.sql.info import SnapshotInfo, check_format, info_of_row
from replay.sql.models import CHANGED_TOPICS, CONTENT_TABLES, FORMAT_VERSION, SNAPSHOTS
from replay.sql.partition_runs import PartitionRuns, Run, partition_runs
from replay.sql.row_io import Progress, counting, materialized, select_chunks

if TYPE_CHECKING:
    from sqlalchemy import Connection

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

INCREMENT_SHARE = 0.05
"""An increment with more rows than this share of the image's partitions is written in full
instead: every load of its chain holds the chain's rows beside the image it builds, so a chain
of `MAX_CHAIN` (api/service/snapshots.py, 8) holds at most 40% of a full snapshot's rows."""
PARTITION_ORDER = ("topic_id", "partition_id")
"""The order the partition rows are written in, asked of the database when it lost it."""
TABLES = {t.name: t for t in CONTENT_TABLES}
"""The content tables by name."""
INCREMENT_MIN_ROWS = 4096
"""Below this many rows an increment is always worth it (however small the image)."""

AREA_TABLES: dict[str, tuple[str, ...]] = {
    "features": (FEATURES,),
    "cluster": (BROKERS, ENDPOINTS, BROKER_FEATURES),
    "namespaces": (NAMESPACES,),
    "configs": (CONFIGS,),
    "scram": (SCRAM,),
    "acls": (ACLS,),
    "client_writes": (CLIENT_WRITES,),
}
"""The small areas of the image, each written whole by an increment when it changed."""
SMALL_TABLES = frozenset(t for tables in AREA_TABLES.values() for t in tables)
TOPIC_TABLES = (TOPICS, PARTITIONS, PENDING)
"""The tables keyed by topic: an increment holds the changed topics' rows."""
DELETED = -1
"""`snapshot_changed_topics.partition_count` of a deleted topic."""


def _area(image: MetadataImage, name: str) -> object:
    if name == "namespaces":
        # The namespaces image also counts topics per namespace, which a topic's creation
        # changes; the rows are the namespaces alone.
        return image.namespaces.by_name
    area: object = getattr(image, name)
    return area


@dataclass(slots=True, kw_only=True)
class Increment:
    """An increment's rows, what they replace, and the whole image's checksum."""

    rows: dict[str, list[Row]]
    """Rows per content table (a table left out has none in the increment)."""
    replaced: tuple[str, ...]
    """Small tables written whole (the base's rows of them do not count)."""
    changed_topics: list[Row]
    """(topic id, partition count or DELETED) of every topic the increment changes."""
    checksum: ContentChecksum
    """The whole image's: equal to a full snapshot's of the same image."""

    @property
    def row_count(self) -> int:
        """Rows written, the changed topics' included."""
        return sum(map(len, self.rows.values())) + len(self.changed_topics)


def increment(
    base: MetadataImage, base_checksum: ContentChecksum, image: MetadataImage
) -> Increment:
    """The rows that make `base`'s snapshot (whose checksum is `base_checksum`) into `image`'s."""
    checksum = ContentChecksum()
    rows: dict[str, list[Row]] = {}
    replaced: list[str] = []
    scratch = ContentChecksum()
    made = image_rows(image, scratch)  # lazy: only the areas that changed are made
    for name, tables in AREA_TABLES.items():
        same = _area(base, name) is _area(image, name)
        for table in tables:
            if same:
                checksum.take_table(table, base_checksum)
            else:
                rows[table] = list(made[table])
                checksum.take_table(table, scratch)
                replaced.append(table)
    for table in TOPIC_TABLES:
        checksum.take_table(table, base_checksum)
    changed = _changed_topics(base, image, checksum, rows)
    return Increment(rows=rows, replaced=tuple(replaced), changed_topics=changed, checksum=checksum)


# ---------------------------------------------------------------------------- what changed


def _leaf_order() -> int | None:
    """Where a key sits in a map node's referents pair: 0 (key first), 1 (value first), None.

    `gc.get_referents` of a node gives its array as the C code visits it (immutables 0.21:
    backwards, so each value before its key). Found out once, on a map of one entry; with an
    order not understood, `map_changes` looks every entry up instead.
    """
    probe_key, probe_value = 7, "seven"
    try:
        (root,) = gc.get_referents(Map({probe_key: probe_value}))
        found = gc.get_referents(root)
    except ValueError:
        return None
    if found == [probe_key, probe_value]:
        return 0
    if found == [probe_value, probe_key]:
        return 1
    return None


_KEY_AT = _leaf_order()
_NODE_TYPES = frozenset(NODE_TYPES)


class _NotUnderstood(Exception):
    """A map node's referents are not key/value pairs and nodes: look every entry up instead."""


def map_changes(old: Map[K, V], new: Map[K, V]) -> tuple[dict[K, V], list[K]]:
    """The entries of `new` that are not `old`'s very objects, and the keys only `old` has.

    An image's maps are persistent (`immutables.Map`, a hash array mapped trie): a change
    copies the path of nodes from the root to its key and shares every other node with the
    map before it. The two tries are walked side by side, level by level (their nodes through
    `gc.get_referents`, as `replay.map_nodes` finds them), and a node found on both sides (the
    same object) is skipped with everything under it: the work is in proportion to the
    changes' paths, not to the map. A key's place in a trie depends only on its hash, so what
    a shared node holds is in no other node of either map; a node met at different depths (a
    collision node moved) is walked on both sides, which is only slower.
    """
    if old is new:
        return {}, []
    if _KEY_AT is not None:
        try:
            before, after = _unshared_entries(old, new, _KEY_AT)
        except _NotUnderstood:
            pass
        else:
            return _compared(old, new, before, after)
    get = old.get
    changed = {k: v for k, v in new.items() if get(k) is not v}
    return changed, [k for k in old if k not in new]


_Entries = dict[int, tuple[Any, Any]]
"""A map's entries by the identity of their key object: (key, value)."""


def _compared(
    old: Map[K, V], new: Map[K, V], before: _Entries, after: _Entries
) -> tuple[dict[K, V], list[K]]:
    """`map_changes` from the unshared entries of both maps.

    The entries are keyed by their key object's identity (an int hashes in C; a key's own
    hash may be Python code, as `Uuid`'s is): a copied node holds the very key objects it was
    copied from. A key object found on one side only may still be an equal key of the other
    (set again with a new but equal object): those few are looked up in the other map.
    """
    changed: dict[K, V] = {}
    missing = object()
    for key_id, (key, value) in after.items():
        found = before.get(key_id)
        if found is None:
            if old.get(key, missing) is not value:
                changed[key] = value
        elif found[1] is not value:
            changed[key] = value
    deleted = [key for key_id, (key, _) in before.items() if key_id not in after and key not in new]
    return changed, deleted


def _unshared_entries(old: Map[K, V], new: Map[K, V], key_at: int) -> tuple[_Entries, _Entries]:
    """The entries in the nodes of each map that the other does not share.

    Level by level: the referents of the unshared nodes (a node's own entries as key/value
    pairs, in order, and its child nodes), the children both sides have dropped.
    """
    old_front: list[object] = [old]
    new_front: list[object] = [new]
    before: _Entries = {}
    after: _Entries = {}
    while old_front or new_front:
        old_refs = list(itertools.chain.from_iterable(map(gc.get_referents, old_front)))
        new_refs = list(itertools.chain.from_iterable(map(gc.get_referents, new_front)))
        old_nodes = [x for x in old_refs if type(x) in _NODE_TYPES]
        new_nodes = [x for x in new_refs if type(x) in _NODE_TYPES]
        _add_leaves(before, old_refs, len(old_nodes), key_at)
        _add_leaves(after, new_refs, len(new_nodes), key_at)
        shared = set(map(id, old_nodes)).intersection(map(id, new_nodes))
        old_front = [n for n in old_nodes if id(n) not in shared]
        new_front = [n for n in new_nodes if id(n) not in shared]
    return before, after


def _add_leaves(entries: _Entries, refs: list[object], nodes: int, key_at: int) -> None:
    if nodes == len(refs):
        return
    leaves = [x for x in refs if type(x) not in _NODE_TYPES]
    if len(leaves) % 2:
        raise _NotUnderstood("an odd number of keys and values")
    keys = leaves[key_at::2]
    entries.update(zip(map(id, keys), zip(keys, leaves[1 - key_at :: 2], strict=True), strict=True))


def _changed_topics(
    base: MetadataImage,
    image: MetadataImage,
    checksum: ContentChecksum,
    rows: dict[str, list[Row]],
) -> list[Row]:
    """The topics that are not the base's objects: their rows into `rows`, digests swapped."""
    old_topics = base.topics.by_id
    new_topics = image.topics.by_id
    if old_topics is new_topics:
        return []
    made = TopicRows()
    topic_rows = rows.setdefault(TOPICS, [])
    partition_rows = rows.setdefault(PARTITIONS, [])
    pending_rows = rows.setdefault(PENDING, [])
    changed: list[Row] = []
    updated, deleted = map_changes(old_topics, new_topics)
    old_get = old_topics.get
    for topic_id, topic in updated.items():
        old = old_get(topic_id)
        tid = str(topic_id)
        topic_row, partitions, pending = made.of(tid, topic)
        checksum.add(TOPICS, topic_row)
        checksum.add_group(PARTITIONS, partitions)
        if pending is not None:
            checksum.add(PENDING, pending)
            pending_rows.append(pending)
        topic_rows.append(topic_row)
        if old is None:
            partition_rows.extend(partitions)
        else:
            _take_out(checksum, made.of(tid, old))
            kept = old.partitions
            partition_rows.extend(
                row
                for p, row in zip(topic.partitions, partitions, strict=True)
                if p.partition_id >= len(kept) or kept[p.partition_id] is not p
            )
        changed.append((tid, len(partitions)))
    for topic_id in deleted:
        tid = str(topic_id)
        _take_out(checksum, made.of(tid, old_topics[topic_id]))
        changed.append((tid, DELETED))
    return changed


def _take_out(checksum: ContentChecksum, old: tuple[Row, list[Row], Row | None]) -> None:
    topic_row, partitions, pending = old
    checksum.remove(TOPICS, topic_row)
    checksum.remove_group(PARTITIONS, partitions)
    if pending is not None:
        checksum.remove(PENDING, pending)


def needed_bases(base_of: Mapping[int, int | None], kept: Iterable[int]) -> set[int]:
    """The snapshots the `kept` ones need to load: every base down each one's chain."""
    needed: set[int] = set()
    for snapshot_id in kept:
        base = base_of.get(snapshot_id)
        while base is not None and base not in needed:
            needed.add(base)
            base = base_of.get(base)
    return needed


# ---------------------------------------------------------------------------- loading


@dataclass(slots=True)
class _TopicChange:
    count: int
    topic_row: Row | None
    partitions: dict[int, Row]
    pending: Row | None


@dataclass(slots=True, kw_only=True)
class IncrementRows:
    """One increment's own rows, as read back (`Overlay.add` takes them oldest first)."""

    snapshot_id: int
    replaced: tuple[str, ...]
    changed_topics: list[Row]
    topics: list[Row]
    partitions: list[Row]
    pending: list[Row]


@dataclass(slots=True)
class Overlay:
    """A chain of increments collapsed: the newest state of every topic and table they touch."""

    topics: dict[str, _TopicChange] = field(default_factory=dict)
    table_owner: dict[str, int] = field(default_factory=dict)
    """Small table -> the id of the newest snapshot of the chain that holds it whole."""

    def add(self, rows: IncrementRows) -> None:
        """Lay one increment over the ones added before it (they are older)."""
        for table in rows.replaced:
            if table not in SMALL_TABLES:
                raise SnapshotContentError(
                    f"snapshot {rows.snapshot_id} says it replaces unknown table {table!r}"
                )
            self.table_owner[table] = rows.snapshot_id
        topic_rows = {r[0]: r for r in rows.topics}
        pending_rows = {r[0]: r for r in rows.pending}
        by_topic: dict[str, list[Row]] = {}
        for row in rows.partitions:
            by_topic.setdefault(row[0], []).append(row)
        known = set()
        for tid, count in rows.changed_topics:
            known.add(tid)
            if count < 0:
                self.topics[tid] = _TopicChange(DELETED, None, {}, None)
                continue
            topic_row = topic_rows.get(tid)
            if topic_row is None:
                raise SnapshotContentError(
                    f"increment {rows.snapshot_id} changes topic id {tid} but has no row of it"
                )
            previous = self.topics.get(tid)
            partitions = (
                {}
                if previous is None
                else {pid: r for pid, r in previous.partitions.items() if pid < count}
            )
            for row in by_topic.get(tid, ()):
                partitions[row[1]] = row
            self.topics[tid] = _TopicChange(count, topic_row, partitions, pending_rows.get(tid))
        stray = (topic_rows.keys() | by_topic.keys() | pending_rows.keys()) - known
        if stray:
            raise SnapshotContentError(
                f"increment {rows.snapshot_id} has rows of topics it does not list as "
                f"changed: {sorted(stray)[:3]}"
            )

    def rows(
        self, base: Mapping[str, Iterable[Row]], chain: Mapping[int, Mapping[str, list[Row]]]
    ) -> dict[str, Iterable[Row]]:
        """The image's rows: `base`'s (the full snapshot's) with the increments laid over.

        `chain` holds, per increment id, the small tables it replaced (`base` need not hold
        the tables an increment replaced).
        """
        out: dict[str, Iterable[Row]] = dict(base)
        for table, owner in self.table_owner.items():
            out[table] = chain[owner][table]
        topics = self.topics
        out[TOPICS] = _kept_and_new(base[TOPICS], topics, [c.topic_row for c in topics.values()])
        out[PENDING] = _kept_and_new(base[PENDING], topics, [c.pending for c in topics.values()])
        partitions = base[PARTITIONS]
        if isinstance(partitions, PartitionRuns):
            out[PARTITIONS] = partitions.overlaid(
                frozenset(topics), functools.partial(_overlaid_runs, topics=topics)
            )
        else:
            out[PARTITIONS] = _overlaid_partitions(partitions, topics)
        return out


def read_increment(
    conn: Connection, snapshot_id: int, replaced: tuple[str, ...]
) -> tuple[IncrementRows, dict[str, list[Row]]]:
    """An increment's rows as stored: its changed topics' rows, and the tables it replaced."""
    tables = {**TABLES, CHANGED_TOPICS.name: CHANGED_TOPICS}

    def read(name: str) -> list[Row]:
        if name not in tables:
            raise SnapshotContentError(
                f"snapshot {snapshot_id} says it replaces unknown table {name!r}"
            )
        return [row for chunk in select_chunks(conn, tables[name], snapshot_id) for row in chunk]

    rows = IncrementRows(
        snapshot_id=snapshot_id,
        replaced=replaced,
        changed_topics=read(CHANGED_TOPICS.name),
        topics=read(TOPICS),
        partitions=read(PARTITIONS),
        pending=read(PENDING),
    )
    return rows, {name: read(name) for name in replaced}


def _kept_and_new(
    base: Iterable[Row], topics: dict[str, _TopicChange], new: list[Row | None]
) -> Iterator[Row]:
    for row in base:
        if row[0] not in topics:
            yield row
    for made in new:
        if made is not None:
            yield made


def _overlaid_partitions(base: Iterable[Row], topics: dict[str, _TopicChange]) -> Iterator[Row]:
    """The base's partition rows (grouped by topic) with the changed topics' laid over.

    A changed topic's run keeps its grouping: its rows are replaced as they pass, those at or
    beyond its count dropped, and its new partitions follow at the end of its run; the
    created topics come last. Rows out of their grouping are for the reader to notice
    (`PartitionRowsUnsorted`), as in a full snapshot.
    """
    seen: set[str] = set()
    run_tid: object = None
    change: _TopicChange | None = None
    emitted: set[int] = set()
    for row in base:
        tid = row[0]
        if tid != run_tid:
            if change is not None:
                yield from _rest(change, emitted)
            run_tid = tid
            change = topics.get(tid)
            if change is not None:
                seen.add(tid)
                emitted = set()
        if change is None:
            yield row
            continue
        pid = row[1]
        if pid < change.count:
            emitted.add(pid)
            yield change.partitions.get(pid, row)
    if change is not None:
        yield from _rest(change, emitted)
    for tid, change in topics.items():
        if tid not in seen and change.count >= 0:
            yield from _rest(change, set())


def _overlaid_runs(runs: Iterator[Run], topics: dict[str, _TopicChange]) -> Iterator[Run]:
    """`_overlaid_partitions` over the compiled reader's runs: the changed topics come raw."""
    seen: set[str] = set()
    for run in runs:
        if len(run) != 2:
            yield run
            continue
        tid, rows = run
        seen.add(tid)
        changed = list(_overlaid_partitions(rows, {tid: topics[tid]}))
        if changed:
            yield tid, changed
    for tid, change in topics.items():
        if tid not in seen and change.count >= 0:
            created = list(_rest(change, set()))
            if created:
                yield tid, created


def _rest(change: _TopicChange, emitted: set[int]) -> Iterator[Row]:
    for pid in sorted(change.partitions):
        if pid not in emitted and pid < change.count:
            yield change.partitions[pid]


def image_of_chain(
    conn: Connection,
    chain: list[tuple[SnapshotInfo, tuple[str, ...]]],
    checksum: ContentChecksum,
    progress: Progress | None,
    *,
    sort: bool,
    compiled: bool = True,
) -> MetadataImage:
    """The image a chain of snapshots holds, the partitions streamed in (sorted by the database).

    `chain`: the full snapshot first, then the increments up to the one asked for (each
    with the tables it replaced); their rows are laid over the full one's as they stream.
    With `compiled` (and not `sort`), the full snapshot's partition rows are read by the
    compiled reader where this connection has one (`partition_runs`; `RunsUnusable` if its
    rows are not what the store writes).
    """
    overlay = Overlay()
    replaced: dict[int, dict[str, list[Row]]] = {}
    for link, tables in chain[1:]:
        own, replaced[link.id] = read_increment(conn, link.id, tables)
        overlay.add(own)
    full = chain[0][0]
    runs = None
    if compiled and not sort:
        runs = partition_runs(conn, TABLES[PARTITIONS], full.id, progress)
    reads = {
        name: select_chunks(
            conn,
            table,
            full.id,
            order_by=PARTITION_ORDER if sort and name == PARTITIONS else (),
        )
        for name, table in TABLES.items()
        if name not in overlay.table_owner  # a later increment holds it whole
        and not (runs is not None and name == PARTITIONS)
    }
    rows: dict[str, Iterable[Row]] = {
        name: itertools.chain.from_iterable(counting(chunks, progress))
        for name, chunks in reads.items()
    }
    if runs is not None:
        rows[PARTITIONS] = runs
    try:
        # Every table but the big one is read whole first: image_from_rows reads them in
        # its own order, and each iterator holds its own cursor. The partitions stream in
        # last.
        rows = materialized(rows)
        if len(chain) > 1:
            rows = overlay.rows(rows, replaced)
        return image_from_rows(chain[-1][0].provenance, rows, checksum, partitions_sorted=sort)
    finally:
        for chunks in reads.values():
            chunks.close()  # its cursor, now: a read given up half-way is read again


# ---------------------------------------------------------------------------- chains


def chain_of(conn: Connection, info: SnapshotInfo) -> list[tuple[SnapshotInfo, tuple[str, ...]]]:
    """The snapshots `info` loads from: its full snapshot first, then each increment to it."""
    chain: list[tuple[SnapshotInfo, tuple[str, ...]]] = []
    link: SnapshotInfo | None = info
    replaced: tuple[str, ...] = ()
    while link is not None:
        check_format(link)
        if len(chain) > info.chain_length:
            raise SnapshotContentError(
                f"snapshot {info.id}'s chain of increments is longer than it says "
                f"({info.chain_length}); delete it (`mlog snapshot delete {info.id}`)"
            )
        chain.append((link, replaced))
        if link.base_id is None:
            break
        row = conn.execute(select(SNAPSHOTS).where(SNAPSHOTS.c.id == link.base_id)).first()
        if row is None:
            raise SnapshotContentError(
                f"snapshot {link.id} is an increment on snapshot {link.base_id}, which is gone; "
                f"delete it (`mlog snapshot delete {link.id}`): the log is replayed instead"
            )
        chain[-1] = (link, replaced_tables(conn, link.id))
        link = info_of_row(row._mapping)
    chain.reverse()
    return chain


def replaced_tables(conn: Connection, snapshot_id: int) -> tuple[str, ...]:
    """The small tables an increment wrote whole."""
    text_value = conn.execute(
        select(SNAPSHOTS.c.replaced_tables).where(SNAPSHOTS.c.id == snapshot_id)
    ).scalar()
    return tuple(t for t in (text_value or "").split(",") if t)


def increment_on(
    conn: Connection, base: tuple[SnapshotInfo, MetadataImage], image: MetadataImage
) -> tuple[SnapshotInfo, Increment] | None:
    """The increment that makes `base` into `image`, or None when a full snapshot is due.

    The base's row is locked (PostgreSQL) so that no one deletes it before this commits.
    """
    info, base_image = base
    if base_image.provenance != info.provenance or info.offset >= image.provenance.offset:
        return None
    row = conn.execute(select(SNAPSHOTS).where(SNAPSHOTS.c.id == info.id).with_for_update()).first()
    if row is None or row.content_sums is None or row.format_version != FORMAT_VERSION:
        return None  # deleted meanwhile, or written before increments existed
    if (row.log_offset, row.checksum) != (info.offset, info.checksum):
        return None  # another snapshot under that id (the database was replaced)
    try:
        base_checksum = ContentChecksum.from_text(row.content_sums)
    except SnapshotContentError as exc:
        logger.warning("snapshot %d: %s", info.id, exc)
        return None
    if base_checksum.hexdigest() != row.checksum:
        return None  # its sums do not match its checksum: not a base to build on
    made = increment(base_image, base_checksum, image)
    limit = max(INCREMENT_MIN_ROWS, int(base_checksum.count(PARTITIONS) * INCREMENT_SHARE))
    if made.row_count > limit:
        return None
    return info_of_row(row._mapping), made


__all__ = [
    "AREA_TABLES",
    "DELETED",
    "INCREMENT_MIN_ROWS",
    "INCREMENT_SHARE",
    "SMALL_TABLES",
    "TOPIC_TABLES",
    "Increment",
    "IncrementRows",
    "Overlay",
    "chain_of",
    "image_of_chain",
    "increment",
    "increment_on",
    "map_changes",
    "needed_bases",
    "read_increment",
    "replaced_tables",
]
