"""The topics of a snapshot, built from their partition rows as the rows stream in.

`content.image_from_rows` hands the partition rows here: each topic's run of rows (from the
driver, or built in C by `partition_runs`) becomes its `TopicImage` (records made by
the compiled `_partition_rows.pyx` where it can), is hashed as one checksum item and indexed per
broker, and is let go; so what a load holds beyond the image is one row a topic (the topics
table) and one topic's partition rows.
"""

from __future__ import annotations

import json
import marshal
import operator
import time
from collections.abc import Iterable, Mapping
from itertools import repeat
from typing import Any

from immutables import Map

from records.interning import shared_ints
from records.model import PARTITION_FIELDS, DeleteTopicPartitionsRecord, Mode, PartitionRecord
from records.slots import new_instance, slot_setter
from records.uuids import Uuid
from replay.broker_index import BrokerIndex, BrokerPartitions
from replay.delta.topics import PARTITION_SETTERS
from replay.image import NAMESPACE_SEPARATOR, TopicImage, TopicsImage, qualified_name
from replay.map_nodes import made_out_of_view
from replay.sql.checksum import PARTITIONS, PENDING, TOPICS, ContentChecksum, Row, item_digest
from replay.sql.errors import SnapshotContentError
from replay.sql.ids import parse_id
from replay.sql.partition_runs import PartitionRuns, Run

try:
    from replay.sql import _partition_rows as _compiled  # type: ignore[attr-defined]  # optional C
except ImportError:  # built without a C compiler: the records are built in Python
    _compiled = None
else:
    _compiled.prepare(PartitionRecord, PARTITION_FIELDS)
try:
    from replay.sql import _topic_adder  # type: ignore[attr-defined]  # optional C
except ImportError:  # built without a C compiler: topics are added in Python
    _topic_adder = None


MODES = {m.name: m for m in Mode}
"""A mode's name, as a row holds it -> the Mode."""


class _ArrayValues(dict[str, tuple[int, ...]]):
    """JSON array text -> the shared tuple of broker ids."""

    def __missing__(self, text: str) -> tuple[int, ...]:
        try:
            values = json.loads(text)
        except (TypeError, ValueError):
            values = None
        if not isinstance(values, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in values
        ):
            raise SnapshotContentError(f"{text!r} is not a JSON array of broker ids")
        found = shared_ints(values)
        self[text] = found
        return found


class PartitionRowsUnsorted(Exception):
    """The partition rows did not come grouped by topic in partition order; read them sorted.

    A snapshot's partition rows are written topic by topic, in partition order, and a
    database gives them back in that order when nothing else moved them (SQLite's rowid
    order; PostgreSQL's heap order of one COPY into pages of its own). When it does not
    (PostgreSQL reusing the space of deleted snapshots), `image_from_rows` cannot tell a
    topic whose rows are split from a damaged one; the store reads them again, sorted by the
    database, and anything odd then is damage (`SnapshotContentError`).
    """


def topics_from_rows(
    rows: Mapping[str, Iterable[Row]], checksum: ContentChecksum, *, partitions_sorted: bool
) -> tuple[TopicsImage, dict[str, int]]:
    """The topics of the rows, each built as its partition rows arrive: no table is held.

    The partition rows come topic by topic (`PartitionRowsUnsorted` when they do not, unless
    `partitions_sorted`: then it is damage); each topic's run of rows is built into its
    `TopicImage`, hashed and indexed, and let go, so what a load holds beyond the image is
    the topics' rows (one per topic) and one topic's partition rows.
    """
    # Keyed by id text, which each table's primary key holds once, and which is an id's own
    # text or refused (`parse_id`): two rows are never one topic.
    topic_rows = {row[0]: row for row in checksum.counted(TOPICS, rows[TOPICS])}
    pending_rows = {row[0]: row for row in checksum.counted(PENDING, rows[PENDING])}
    build = _TopicBuilder(topic_rows, pending_rows, partitions_sorted=partitions_sorted)
    source = rows[PARTITIONS]
    if isinstance(source, PartitionRuns):
        _finish_runs(build, source)
    else:
        _finish_rows(build, source)
    for tid in list(topic_rows):  # built topics' rows are gone: these have no partitions
        build.finish(tid, [])
    if pending_rows:
        raise SnapshotContentError(f"pending deletions of unknown topics {sorted(pending_rows)}")
    checksum.add_sum(PARTITIONS, build.digest_sum(), build.partitions())
    return (
        TopicsImage(
            by_id=Map((topic.topic_id, topic) for topic in build.built),
            by_name=Map(zip(build.names, build.name_ids, strict=True)),
            replica_index=BrokerIndex.deferred(build.index.build),
        ),
        build.topic_counts,
    )


def _finish_rows(build: _TopicBuilder, rows: Iterable[Row]) -> None:
    """Build each topic from its run of partition rows as they stream by."""
    run: list[Row] = []
    run_tid: object = None
    finish = build.finish
    append = run.append
    for row in rows:
        tid = row[0]
        if tid != run_tid:
            if run:
                finish(run_tid, run)
                run = []
                append = run.append
            run_tid = tid
        append(row)
    if run:
        finish(run_tid, run)


def _finish_runs(build: _TopicBuilder, source: PartitionRuns) -> None:
    """Build each topic from the compiled reader's runs: records made, or rows (`raw`)."""
    runs = source.runs(build.arrays, MODES, parse_id)
    try:
        if build.adder is not None:
            build.adder.add_runs(runs, build.finish, build.finish_built)
            return
        for run in runs:
            if len(run) == 2:
                build.finish(run[0], run[1])
            else:
                build.finish_built(run)
    finally:
        runs.close()


class _TopicBuilder:
    """Builds each topic from its run of partition rows (`_topics`), hashing them as one item."""

    def __init__(
        self, topic_rows: dict[str, Row], pending_rows: dict[str, Row], *, partitions_sorted: bool
    ) -> None:
        self.topic_rows = topic_rows
        """The topics' rows by id text, each taken out as its topic is built: at the end, the
        topics none of whose partition rows came."""
        self.pending_rows = pending_rows
        """The pending deletions' rows by topic id text, each taken out by its topic."""
        self.partitions_sorted = partitions_sorted
        self.arrays = _ArrayValues()
        self.index = _ReplicaIndex(self.arrays)
        self.built: list[TopicImage] = []
        """The topics' images, in the order the runs came (each topic's row is taken out of
        `topic_rows` as it is built: no map of 100,000s of ids a load holds to its end)."""
        self._digest_sum = 0
        """The sum of each topic's partition digest (`ContentChecksum.add_group`'s, unreduced)."""
        self._partitions = 0
        self.names: list[str] = []
        """Each added topic's qualified name, and its id at the same place in `name_ids`: two
        lists of pointers, not a tuple a topic (1M small tuples freed after a 10M load left
        pymalloc's arenas too holey to give back: 41 MiB more RSS serving)."""
        self.name_ids: list[Uuid] = []
        self.topic_counts: dict[str, int] = {}
        """Each namespace holding an added topic -> its topics."""
        self.adder: Any = None
        """The compiled `_add` (`replay.sql._topic_adder`), where it is built: then every topic
        is added by it, and it holds the digest sum and the partition count."""
        if _topic_adder is not None:
            self.adder = _topic_adder.TopicAdder(
                TopicImage,
                topic_rows,
                pending_rows,
                self.built,
                self.index.layouts,
                self.index.add,
                _pending_record,
                self.names,
                self.name_ids,
                self.topic_counts,
                NAMESPACE_SEPARATOR,
            )

    def digest_sum(self) -> int:
        """The added topics' partition digests, summed (modulo 2**128 where compiled)."""
        return self._digest_sum if self.adder is None else self.adder.digest_sum

    def partitions(self) -> int:
        """The added topics' partitions, counted."""
        return self._partitions if self.adder is None else self.adder.partitions

    def finish(self, tid: Any, run: list[Row]) -> None:
        """Build topic `tid` from its partition rows `run` (all of them, if they are sorted)."""
        if tid not in self.topic_rows:
            self._refuse(tid, run[0][1] if run else "?")
        if run and run[-1][1] != len(run) - 1:
            run.sort(key=_partition_id)
            if run[-1][1] != len(run) - 1 and not self.partitions_sorted:
                raise PartitionRowsUnsorted(tid)  # a gap here may be rows still to come
        data = None if _compiled is None else _compiled.marshal_rows(run)
        if data is None:
            data = _marshal_dumps(run, 0)
        topic_id = parse_id(tid, "topic id")
        partitions = _partitions(topic_id, run, self.arrays)
        key = tuple(map(_replicas_text, run))
        self._add((tid, topic_id, partitions, item_digest(data), key))

    def finish_built(self, run: Run) -> None:
        """Add a topic from a compiled run: `(tid, topic_id, records, digest, key)`."""
        tid = run[0]
        if tid not in self.topic_rows:
            self._refuse(tid, 0)
        self._add(run)

    def _refuse(self, tid: Any, first: object) -> None:
        """Raise for a run of a topic without a row left: built already, or never known."""
        if self._was_built(tid):
            # A second run of one topic: the rows are not grouped (or a row is repeated).
            if self.partitions_sorted:
                raise SnapshotContentError(f"topic id {tid} has a partition twice")
            raise PartitionRowsUnsorted(tid)
        raise SnapshotContentError(f"partition {first} of topic id {tid} without a topic")

    def _was_built(self, tid: Any) -> bool:
        """Whether topic `tid` was built (a walk of the built topics, on a refusal's path only)."""
        try:
            topic_id = parse_id(tid, "topic id")
        except SnapshotContentError:
            return False
        return any(topic.topic_id == topic_id for topic in self.built)

    def _add(self, run: Run) -> None:
        """Add the topic of a built run (`finish_built`'s), its checks passed."""
        if self.adder is not None:
            self.adder.add(run)
            return
        tid, topic_id, partitions, digest, key = run
        topic_row = self.topic_rows.pop(tid)
        self._digest_sum += digest
        self._partitions += len(partitions)
        self.index.add(topic_id, key)
        pending = self.pending_rows.pop(tid, None)
        topic: TopicImage = _new(TopicImage)
        _set_topic_id(topic, topic_id)
        _set_topic_name(topic, topic_row[2])
        _set_topic_namespace(topic, topic_row[1])
        _set_topic_partitions(topic, partitions)
        _set_topic_pending(topic, None if pending is None else _pending_record(topic_id, pending))
        self.built.append(topic)
        namespace = topic_row[1]
        self.names.append(qualified_name(namespace, topic_row[2]))
        self.name_ids.append(topic_id)
        if namespace:
            self.topic_counts[namespace] = self.topic_counts.get(namespace, 0) + 1


def _pending_record(topic_id: Uuid, pending: Row) -> DeleteTopicPartitionsRecord:
    """A topic's pending partition deletion from its row."""
    return DeleteTopicPartitionsRecord(
        topic_id=topic_id,
        partition_count=pending[1],
        delete_after_ms=pending[2],
        created_ms=pending[3],
    )


def _partition_id(row: Row) -> Any:
    return row[1]


_new = new_instance
_set_topic_id = slot_setter(TopicImage, "topic_id")
_set_topic_name = slot_setter(TopicImage, "name")
_set_topic_namespace = slot_setter(TopicImage, "namespace")
_set_topic_partitions = slot_setter(TopicImage, "partitions")
_set_topic_pending = slot_setter(TopicImage, "pending_deletion")
_marshal_dumps = marshal.dumps


_replicas_text = operator.itemgetter(2)
"""A partition row's replica list, as text."""


class _ReplicaIndex:
    """`TopicsImage.by_broker` gathered while the topics are loaded, built when first read.

    What `replay.image.broker_index` computes from the finished topics, from the partition
    rows instead: a topic's partitions per broker depend only on its replica lists, and a
    cluster has few distinct layouts of them (placement repeats), so each layout is worked out
    once, and what is held until the build is each layout's list of topics: a reference a
    topic (a pair per broker and topic held 34 MB at 1M partitions over 6 brokers; a topic id
    and its partition ids per broker and topic, 12 MiB of an in-process load's peak).
    """

    def __init__(self, arrays: _ArrayValues) -> None:
        self._arrays = arrays
        self._layouts: dict[tuple[str, ...], tuple[tuple[int, tuple[int, ...]], ...]] = {}
        self._topics: dict[tuple[str, ...], list[Uuid]] = {}

    @property
    def layouts(self) -> dict[tuple[str, ...], list[Uuid]]:
        """Each layout seen (its replica lists' text) -> its topics so far.

        A topic of a layout seen may be appended to its list directly (what `add` does).
        """
        return self._topics

    def add(self, topic_id: Uuid, key: tuple[str, ...]) -> None:
        """Index one topic by its replica lists' text, in partition id order (checked)."""
        topics = self._topics.get(key)
        if topics is not None:
            topics.append(topic_id)
            return
        per_broker: dict[int, list[int]] = {}
        for partition_id, text in enumerate(key):
            for broker_id in self._arrays[text]:
                per_broker.setdefault(broker_id, []).append(partition_id)
        self._layouts[key] = tuple((b, tuple(ids)) for b, ids in per_broker.items())
        self._topics[key] = [topic_id]

    def build(self) -> Map[int, BrokerPartitions]:
        """The index: per broker, its partition ids by topic id (what it held let go after).

        Called once, by the index's first reader (`BrokerIndex.deferred`), maybe on a thread
        beside a serving loop: the maps grow a slice at a time, the interpreter lock let go
        between two (a slice is milliseconds; a broker's whole map, at 1M partitions, 0.1 s).
        """
        per_broker: dict[int, list[tuple[list[Uuid], tuple[int, ...]]]] = {}
        for key, topic_ids in self._topics.items():
            for broker_id, ids in self._layouts[key]:
                per_broker.setdefault(broker_id, []).append((topic_ids, ids))
        built = {}
        added = 0
        with made_out_of_view():
            for broker_id, layouts in per_broker.items():  # one broker's map grown at a time
                growing = _EMPTY.mutate()
                for topic_ids, ids in layouts:
                    for start in range(0, len(topic_ids), _SLICE):
                        chunk = topic_ids[start : start + _SLICE]
                        growing.update(zip(chunk, repeat(ids)))
                        added += len(chunk)
                        if added >= _SLICE:
                            _let_go()
                            added = 0
                built[broker_id] = growing.finish()
        self._topics.clear()
        self._layouts.clear()
        return Map(built)


_EMPTY: Map[Uuid, tuple[int, ...]] = Map()
_SLICE = 8192
"""Entries added to a broker's map between two lets-go of the interpreter lock."""


def _let_go() -> None:
    """Let another thread take the interpreter lock, if one waits for it (`sleep(0)` does)."""
    time.sleep(0)


def _partitions(
    topic_id: Uuid, rows: list[Row], arrays: _ArrayValues
) -> tuple[PartitionRecord, ...]:
    """The records of one topic's partition rows (ids 0..n-1, in order), compiled if it can."""
    if _compiled is not None:
        built: tuple[PartitionRecord, ...] | None = _compiled.build(rows, topic_id, arrays, MODES)
        if built is not None:
            return built
    return _partitions_in_python(topic_id, rows, arrays)


def _partitions_in_python(
    topic_id: Uuid, rows: list[Row], arrays: _ArrayValues
) -> tuple[PartitionRecord, ...]:
    """`_partitions` in Python: rows that are not right (it names what), or no compiled helper."""
    (
        set_partition_id,
        set_topic_id,
        set_replicas,
        set_isr,
        set_removing,
        set_adding,
        set_leader,
        set_leader_epoch,
        set_partition_epoch,
        set_mode,
    ) = PARTITION_SETTERS
    modes = MODES
    new = new_instance
    out: list[PartitionRecord] = []
    append = out.append
    for expected, row in enumerate(rows):
        (_, partition_id, replicas, isr, removing, adding, leader, epoch, p_epoch, name) = row
        if partition_id != expected:
            raise SnapshotContentError(
                f"topic id {row[0]} has partition {partition_id} where partition {expected} belongs"
            )
        mode = modes.get(name)
        if mode is None:
            raise SnapshotContentError(f"partition {row[0]}-{row[1]} has unknown mode {name!r}")
        p: PartitionRecord = new(PartitionRecord)
        set_partition_id(p, expected)
        set_topic_id(p, topic_id)
        set_replicas(p, arrays[replicas])
        set_isr(p, arrays[isr])
        set_removing(p, arrays[removing])
        set_adding(p, arrays[adding])
        set_leader(p, leader)
        set_leader_epoch(p, epoch)
        set_partition_epoch(p, p_epoch)
        set_mode(p, mode)
        append(p)
    return tuple(out)


__all__ = ["MODES", "PartitionRowsUnsorted", "topics_from_rows"]
