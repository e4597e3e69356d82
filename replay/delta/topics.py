"""TopicsDelta: topics, their partitions and their pending partition deletions.

The largest area: partitions are most of the records of a log, so the checks of a
PartitionRecord are shaped for speed (a memo of replica lists already found valid). Topic
records also change other areas (a topic counts in its namespace, and its configs go with it
when it is removed or moved) and rest on them (its namespace exists, its new replicas and
leaders are registered brokers): the router (`MetadataDelta`) passes what this delta must know
of them to the handlers and makes the changes there from what the handlers return, so this
delta holds no other area's delta.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NoReturn

from immutables import Map

from records.model import (
    LEADER_UNCHANGED,
    NO_LEADER,
    PARTITION_FIELDS,
    CancelTopicPartitionsDeletionRecord,
    DeleteTopicPartitionsRecord,
    Mode,
    MoveTopicRecord,
    PartitionChangeRecord,
    PartitionRecord,
    PurgeTopicPartitionsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from records.slots import preset_constructor, slot_setter
from records.uuids import Uuid
from replay.broker_index import IndexStep
from replay.delta.maps import MISSING, updated
from replay.errors import (
    DuplicateTopicError,
    InvalidPartitionError,
    InvalidTopicError,
    NamespaceReplayError,
    PendingDeletionError,
    UnknownPartitionError,
    UnknownTopicError,
)
from replay.image import (
    TopicImage,
    TopicsImage,
    new_topic_image,
    new_topics_image,
    qualified_name,
)
from replay.rules import MAX_NAME_LENGTH, NO_TIER_NAMES, topic_name_chars, topic_name_problem

BrokerLookup = Callable[[int], RegisterBrokerRecord | None]
"""A broker's registration as of the records replayed so far (None: not registered)."""

PARTITION_SETTERS = tuple(slot_setter(PartitionRecord, name) for name in PARTITION_FIELDS)
"""Setters of a new PartitionRecord's slots, in `PARTITION_FIELDS` order (replay and snapshots
build records of checked values without `__init__`'s checks)."""


_partition: Callable[..., PartitionRecord] = preset_constructor(PartitionRecord, PARTITION_FIELDS)
"""A PartitionRecord from values in `PARTITION_FIELDS` order that replay has checked: one
generated function storing each slot, no loop (a partition change makes one per move)."""


def merge_partition_change(
    current: PartitionRecord, change: PartitionChangeRecord
) -> PartitionRecord:
    """The partition after a sparse change, as Kafka's `PartitionRegistration.merge` computes it.

    Absent fields keep their value; a leader change (leader other than -2) bumps the leader
    epoch, and every change bumps the partition epoch, unless the record states the epochs.
    """
    replicas = current.replicas if change.replicas is None else change.replicas
    isr = current.isr if change.isr is None else change.isr
    leader = current.leader if change.leader == LEADER_UNCHANGED else change.leader
    if change.leader_epoch is not None:
        leader_epoch = change.leader_epoch
    elif change.leader != LEADER_UNCHANGED:
        leader_epoch = current.leader_epoch + 1
    else:
        leader_epoch = current.leader_epoch
    return _partition(
        current.partition_id,
        current.topic_id,
        replicas,
        isr,
        current.removing_replicas if change.removing_replicas is None else change.removing_replicas,
        current.adding_replicas if change.adding_replicas is None else change.adding_replicas,
        leader,
        leader_epoch,
        current.partition_epoch + 1 if change.partition_epoch is None else change.partition_epoch,
        current.mode if change.mode is None else change.mode,
    )


_VALID_REPLICAS: set[tuple[int, ...]] = set()
"""Replica lists already found valid (non-empty, distinct, ids >= 0): a memo of a pure check.

A cluster has few distinct replica lists (placement repeats a handful of patterns), and looking
one up costs a fraction of checking it again; replay of a PartitionRecord pays this on every
record. Bounded: cleared when full.
"""
_VALID_REPLICAS_MAX = 65_536

_VALID_ISRS: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()
"""(replicas, ISR) pairs already found valid (as `_VALID_REPLICAS`): a partition change that
moves a leader or an ISR is recognised by one lookup. Bounded the same way."""

_MODE_ORDER = {Mode.READ_WRITE: 0, Mode.READ_ONLY: 1, Mode.NONE: 2}
"""The order in which a partition's mode may move (a partition being deleted never returns)."""


def _check_partition(record: PartitionRecord, where: str) -> None:
    """Raise `InvalidPartitionError` unless the partition state holds every state rule."""
    replicas = record.replicas
    if not replicas or len(set(replicas)) != len(replicas) or min(replicas) < 0:
        raise InvalidPartitionError(
            "partition.replicas-valid",
            f"{where}: replicas {list(replicas)} are not one or more distinct broker ids >= 0",
        )
    isr = record.isr
    if not isr or len(set(isr)) != len(isr) or not set(isr) <= set(replicas):
        raise InvalidPartitionError(
            "partition.isr-valid",
            f"{where}: ISR {list(isr)} is not one or more distinct replicas of {list(replicas)}",
        )
    if record.leader != NO_LEADER and record.leader not in isr:
        raise InvalidPartitionError(
            "partition.leader-in-isr",
            f"{where}: leader {record.leader} is not -1 and not in the ISR {list(isr)}",
        )
    adding = record.adding_replicas
    removing = record.removing_replicas
    if adding or removing:
        moving = set(adding) | set(removing)
        if (
            len(set(adding)) != len(adding)
            or len(set(removing)) != len(removing)
            or len(moving) != len(adding) + len(removing)
            or not moving <= set(replicas)
            or set(removing) >= set(replicas)
        ):
            raise InvalidPartitionError(
                "partition.reassignment-valid",
                f"{where}: adding {list(adding)} and removing {list(removing)} are not "
                f"distinct, disjoint replicas of {list(replicas)} leaving one in place",
            )
    if record.leader_epoch < 0 or record.partition_epoch < 0:
        raise InvalidPartitionError(
            "partition.epochs-valid",
            f"{where}: leader epoch {record.leader_epoch} and partition epoch "
            f"{record.partition_epoch} must be >= 0",
        )
    if len(_VALID_REPLICAS) >= _VALID_REPLICAS_MAX:
        _VALID_REPLICAS.clear()
    _VALID_REPLICAS.add(replicas)
    if len(_VALID_ISRS) >= _VALID_REPLICAS_MAX:
        _VALID_ISRS.clear()
    _VALID_ISRS.add((replicas, isr))


class _Where:
    """A partition's name in a message, made only if the message is (the usual case is none)."""

    __slots__ = ("draft", "partition_id")

    def __init__(self, draft: _TopicDraft, partition_id: int) -> None:
        self.draft = draft
        self.partition_id = partition_id

    def __str__(self) -> str:
        return self.draft.where(self.partition_id)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


class _TopicDraft:
    """A topic being changed by a delta: mutable copies of the parts that change."""

    __slots__ = ("fresh", "name", "namespace", "partitions", "pending_deletion", "topic_id")

    def __init__(
        self,
        topic_id: Uuid,
        name: str,
        namespace: str,
        partitions: list[PartitionRecord],
        pending_deletion: DeleteTopicPartitionsRecord | None,
        *,
        fresh: bool,
    ) -> None:
        self.topic_id = topic_id
        self.name = name
        self.namespace = namespace
        self.partitions = partitions
        self.pending_deletion = pending_deletion
        self.fresh = fresh
        """Created by this delta (a TopicRecord): its partitions go into `by_broker` whole,
        so changes of them are not noted one by one. A topic of the base removed and created
        again with the same id is fresh too: the index drops the old one and adds the new."""

    def image(self) -> TopicImage:
        return new_topic_image(
            topic_id=self.topic_id,
            name=self.name,
            namespace=self.namespace,
            partitions=tuple(self.partitions),
            pending_deletion=self.pending_deletion,
        )

    def where(self, partition_id: int | None = None) -> str:
        topic = f"topic {qualified_name(self.namespace, self.name)!r} ({self.topic_id})"
        return topic if partition_id is None else f"{topic} partition {partition_id}"


class _Applied(dict[Uuid, "_TopicDraft | None"]):
    """The drafts of a delta already applied: any use of them is a bug, and says so."""

    def _refuse(self, *_: object, **__: object) -> NoReturn:
        raise RuntimeError(
            "this topics delta was applied already: replay into a new delta on its image"
        )

    get = __getitem__ = __setitem__ = __contains__ = __len__ = __iter__ = _refuse
    items = keys = values = pop = setdefault = _refuse


_APPLIED = _Applied()


class TopicsDelta:
    """Topics created, changed and removed since the base image."""

    __slots__ = (
        "_batch_modes",
        "_batch_topics",
        "_moved",
        "_names",
        "_topics",
        "image",
    )

    def __init__(self, image: TopicsImage) -> None:
        self.image = image
        self._topics: dict[Uuid, _TopicDraft | None] = {}
        self._names: dict[str, Uuid | None] = {}
        self._moved: dict[Uuid, set[int]] = {}
        """Partitions of topics in the base image whose replicas changed (for `by_broker`)."""
        self._batch_topics: list[tuple[_TopicDraft, TopicRecord]] = []
        """Topics created since the last `finish_batch`: they must have partitions by then."""
        self._batch_modes: list[tuple[_TopicDraft, PartitionRecord]] = []
        """Partitions created since the last `finish_batch` in a mode other than READ_WRITE."""

    def finish_batch(self) -> None:
        """Check the rules that hold between batches (not inside one); the next batch starts.

        A batch is replayed whole before its end is checked: the controller writes a topic
        and its partitions in one batch, and a snapshot writes a partition's mode before the
        pending deletion that explains it. Raises a `ReplayError` whose `record` is the record
        that created the offending topic or partition.
        """
        topics, self._batch_topics = self._batch_topics, []
        modes, self._batch_modes = self._batch_modes, []
        for draft, topic_record in topics:
            if not draft.partitions and self._topics.get(draft.topic_id) is draft:
                raise InvalidTopicError(
                    "topic.has-partitions",
                    f"{draft.where()} has no partitions at the end of the batch that created "
                    "it; a topic is created with its partitions in one batch",
                    record=topic_record,
                )
        for draft, partition_record in modes:
            partition_id = partition_record.partition_id
            if self._topics.get(draft.topic_id) is not draft or partition_id >= len(
                draft.partitions
            ):
                continue  # the topic or the partition is gone again
            mode = draft.partitions[partition_id].mode
            pending = draft.pending_deletion
            if (
                mode == Mode.READ_WRITE
                and pending is not None
                and partition_id >= pending.partition_count
            ):
                raise InvalidPartitionError(
                    "partition.mode-by-deletion",
                    f"{draft.where(partition_id)} is READ_WRITE again at the end of its batch, "
                    "but its deletion is still pending (a cancel must end that batch)",
                    record=partition_record,
                )
            if mode != Mode.READ_WRITE and (
                pending is None or partition_id < pending.partition_count
            ):
                raise InvalidPartitionError(
                    "partition.mode-by-deletion",
                    f"{draft.where(partition_id)} is in mode {mode.name} at the end of its "
                    "batch, but no pending deletion removes it",
                    record=partition_record,
                )

    def topic_id(self, qualified: str) -> Uuid | None:
        """The id of the live topic with a qualified name, as of the records replayed so far."""
        found = self._names.get(qualified, MISSING)
        if found is MISSING:
            return self.image.by_name.get(qualified)
        return found  # type: ignore[return-value]  # MISSING ruled out above

    def _draft(self, topic_id: Uuid, what: str) -> _TopicDraft:
        draft = self._topics.get(topic_id, MISSING)
        if draft is MISSING:
            topic = self.image.by_id.get(topic_id)
            if topic is None:
                raise UnknownTopicError("topic.exists", f"{what}: no live topic has id {topic_id}")
            draft = _TopicDraft(
                topic.topic_id,
                topic.name,
                topic.namespace,
                list(topic.partitions),
                topic.pending_deletion,
                fresh=False,
            )
            self._topics[topic_id] = draft
        elif draft is None:
            raise UnknownTopicError("topic.exists", f"{what}: topic id {topic_id} was deleted")
        return draft  # type: ignore[return-value]  # MISSING and None ruled out above

    def _topic_live(self, topic_id: Uuid) -> bool:
        draft = self._topics.get(topic_id, MISSING)
        if draft is MISSING:
            return topic_id in self.image.by_id
        return draft is not None

    def replay_topic(self, record: TopicRecord, namespace_exists: bool) -> None:
        """Create a topic (its partitions follow in the same batch).

        `namespace_exists`: whether the record's namespace exists (the router asks; it then
        counts the topic in its namespace).
        """
        qualified = qualified_name(record.namespace, record.name)
        name = record.name
        if topic_name_chars(name) is None or len(name) > MAX_NAME_LENGTH or name in NO_TIER_NAMES:
            raise InvalidTopicError("topic.name-legal", str(topic_name_problem(name)))
        if self.topic_id(qualified) is not None:
            raise DuplicateTopicError("topic.name-unique", f"topic {qualified!r} already exists")
        if record.topic_id in Uuid.RESERVED:
            raise DuplicateTopicError("topic.id-unique", f"topic id {record.topic_id} is reserved")
        if self._topic_live(record.topic_id):
            raise DuplicateTopicError(
                "topic.id-unique", f"topic id {record.topic_id} is already in use"
            )
        if record.namespace and not namespace_exists:
            raise NamespaceReplayError(
                "topic.namespace-exists",
                f"topic {qualified!r} is in namespace {record.namespace!r}, which does not exist",
            )
        draft = _TopicDraft(
            record.topic_id,
            record.name,
            record.namespace,
            [],
            None,
            fresh=True,
        )
        self._topics[record.topic_id] = draft
        self._names[qualified] = record.topic_id
        self._batch_topics.append((draft, record))

    def replay_partition(self, record: PartitionRecord) -> None:
        """Create a topic's next partition."""
        draft = self._topics.get(record.topic_id)
        if draft is None:
            draft = self._draft(record.topic_id, "partition")
        partitions = draft.partitions
        if record.partition_id != len(partitions) or draft.pending_deletion is not None:
            _refuse_new_partition(draft, record)
        replicas = record.replicas
        isr = record.isr
        leader = record.leader
        # The usual partition (valid replicas seen before, ISR = replicas, leader among them,
        # no reassignment) is recognised in a few C-level steps; anything else is checked in
        # full, and refused if it breaks a rule.
        if (
            replicas not in _VALID_REPLICAS
            or isr != replicas
            or (leader not in isr and leader != NO_LEADER)
            or record.adding_replicas
            or record.removing_replicas
            or record.leader_epoch < 0
            or record.partition_epoch < 0
        ):
            _check_partition(record, draft.where(record.partition_id))
        partitions.append(record)
        if not draft.fresh:  # a new topic's partitions are all indexed
            self._moved.setdefault(record.topic_id, set()).add(record.partition_id)
        if record.mode:  # not READ_WRITE (0); `!= Mode.READ_WRITE` costs an enum lookup
            self._batch_modes.append((draft, record))

    def replay_partition_change(self, record: PartitionChangeRecord, broker: BrokerLookup) -> None:
        """Change a partition by a sparse diff the controller could have made.

        `broker` looks up the registrations a new replica or an elected leader needs.
        """
        draft = self._draft(record.topic_id, "partition change")
        partition_id = record.partition_id
        if not 0 <= partition_id < len(draft.partitions):
            raise UnknownPartitionError(
                "partition.exists",
                f"{draft.where(partition_id)} does not exist (the topic has "
                f"{len(draft.partitions)} partitions)",
            )
        before = draft.partitions[partition_id]
        merged = merge_partition_change(before, record)
        # As in `replay_partition`: the usual change (a leader or an ISR moved, replicas and
        # ISR a pair seen valid before) is recognised in a few steps, anything else in full.
        if (
            (merged.replicas, merged.isr) not in _VALID_ISRS
            or (merged.leader not in merged.isr and merged.leader != NO_LEADER)
            or merged.adding_replicas
            or merged.removing_replicas
            or merged.leader_epoch < 0
        ):
            _check_partition(merged, draft.where(partition_id))
        self._check_change(draft, before, merged, record.leader, partition_id, broker=broker)
        draft.partitions[partition_id] = merged
        if merged.replicas is not before.replicas and merged.replicas != before.replicas:
            self._moved.setdefault(record.topic_id, set()).add(partition_id)

    def _check_change(
        self,
        draft: _TopicDraft,
        before: PartitionRecord,
        after: PartitionRecord,
        elected: int,
        partition_id: int,
        *,
        broker: BrokerLookup,
    ) -> None:
        """Raise unless `before` -> `after` is a change the controller can make."""
        where = _Where(draft, partition_id)
        if after.partition_epoch <= before.partition_epoch or after.leader_epoch < (
            before.leader_epoch + (after.leader != before.leader)
        ):
            raise InvalidPartitionError(
                "partition.epochs-valid",
                f"{where}: a change from partition epoch {before.partition_epoch} and leader "
                f"epoch {before.leader_epoch} (leader {before.leader}) to "
                f"{after.partition_epoch} and {after.leader_epoch} (leader {after.leader}) "
                "does not raise them as it must",
            )
        if (
            after.replicas != before.replicas
            or after.adding_replicas != before.adding_replicas
            or after.removing_replicas != before.removing_replicas
        ):
            if draft.pending_deletion is not None:
                raise InvalidPartitionError(
                    "partition.stable-while-deleting",
                    f"{where}: replicas cannot change while a partition deletion of the topic "
                    "is pending",
                )
            for broker_id in after.replicas:
                if broker_id not in before.replicas and broker(broker_id) is None:
                    raise InvalidPartitionError(
                        "partition.added-replicas-registered",
                        f"{where}: new replica {broker_id} is not a registered broker",
                    )
        if elected not in (LEADER_UNCHANGED, NO_LEADER):
            leader = broker(elected)
            if leader is None or leader.fenced or leader.in_controlled_shutdown:
                state = (
                    "not registered"
                    if leader is None
                    else "fenced"
                    if leader.fenced
                    else "in controlled shutdown"
                )
                raise InvalidPartitionError(
                    "partition.elected-leader-live",
                    f"{where}: new leader {elected} is {state}",
                )
        if after.mode != before.mode:
            pending = draft.pending_deletion
            # READ_ONLY -> READ_WRITE is a cancel's step; the batch must end with the cancel
            # (checked by `finish_batch`).
            back = before.mode == Mode.READ_ONLY and after.mode == Mode.READ_WRITE
            if (
                pending is None
                or after.partition_id < pending.partition_count
                or (_MODE_ORDER[after.mode] < _MODE_ORDER[before.mode] and not back)
            ):
                raise InvalidPartitionError(
                    "partition.mode-by-deletion",
                    f"{where}: mode {before.mode.name} -> {after.mode.name} is not a step of a "
                    "pending deletion that removes the partition",
                )
            if back:
                self._batch_modes.append((draft, after))

    def replay_remove_topic(self, record: RemoveTopicRecord) -> tuple[str, str]:
        """Remove a topic; returns the namespace and the name it had.

        The router takes its count out of the namespace and its configs with it.
        """
        draft = self._draft(record.topic_id, "remove topic")
        self._topics[record.topic_id] = None
        self._names[qualified_name(draft.namespace, draft.name)] = None
        return draft.namespace, draft.name

    def replay_move_topic(self, record: MoveTopicRecord, namespace_exists: bool) -> tuple[str, str]:
        """Move a topic to another namespace; returns the namespace and the name it had.

        `namespace_exists`: whether the record's namespace exists (the router asks; it then
        moves the topic's count and its configs).
        """
        draft = self._draft(record.topic_id, "move topic")
        old = qualified_name(draft.namespace, draft.name)
        new = qualified_name(record.namespace, draft.name)
        if record.namespace == draft.namespace:
            raise NamespaceReplayError(
                "topic.move-changes-namespace",
                f"{draft.where()} is already in namespace {record.namespace!r}",
            )
        if record.namespace and not namespace_exists:
            raise NamespaceReplayError(
                "topic.namespace-exists",
                f"{draft.where()} cannot move to namespace {record.namespace!r}, which does not "
                "exist",
            )
        if self.topic_id(new) is not None:
            raise DuplicateTopicError(
                "topic.name-unique", f"{draft.where()} cannot move: topic {new!r} already exists"
            )
        self._names[old] = None
        self._names[new] = record.topic_id
        moved_from = draft.namespace
        draft.namespace = record.namespace
        return moved_from, draft.name

    def replay_delete_partitions(self, record: DeleteTopicPartitionsRecord) -> None:
        """Start a deletion of a topic's last partitions."""
        draft = self._draft(record.topic_id, "delete partitions")
        where = draft.where()
        if draft.pending_deletion is not None:
            raise PendingDeletionError(
                "deletion.one-pending", f"{where} already has a partition deletion pending"
            )
        if not 1 <= record.partition_count < len(draft.partitions):
            raise PendingDeletionError(
                "deletion.count-valid",
                f"{where}: cannot reduce {len(draft.partitions)} partitions to "
                f"{record.partition_count}",
            )
        if record.delete_after_ms < record.created_ms:
            raise PendingDeletionError(
                "deletion.times-valid",
                f"{where}: purge time {record.delete_after_ms} is before the deletion's "
                f"creation time {record.created_ms}",
            )
        moving = [
            p.partition_id for p in draft.partitions if p.adding_replicas or p.removing_replicas
        ]
        if moving:
            raise PendingDeletionError(
                "deletion.no-reassignment",
                f"{where}: partitions {moving} are being reassigned",
            )
        draft.pending_deletion = record

    def _ending_deletion(self, topic_id: Uuid, count: int, what: str, rule: str) -> _TopicDraft:
        """The draft of a topic whose pending deletion, to `count` partitions, a record ends.

        Raises `PendingDeletionError` (`rule`) unless that deletion is pending.
        """
        draft = self._draft(topic_id, what)
        pending = draft.pending_deletion
        if pending is None:
            raise PendingDeletionError(rule, f"{draft.where()} has no partition deletion pending")
        if count != pending.partition_count:
            raise PendingDeletionError(
                rule,
                f"{draft.where()}: the pending deletion keeps {pending.partition_count} "
                f"partitions, not {count}",
            )
        return draft

    def replay_purge_partitions(self, record: PurgeTopicPartitionsRecord) -> None:
        """End a pending deletion: the deleted partitions go."""
        count = record.partition_count
        draft = self._ending_deletion(
            record.topic_id, count, "purge partitions", "deletion.purge-matches"
        )
        live = [p.partition_id for p in draft.partitions[count:] if p.mode != Mode.NONE]
        if live:
            raise PendingDeletionError(
                "deletion.purged-mode-none",
                f"{draft.where()}: partitions {live} are still readable (mode is not NONE)",
            )
        self._moved.setdefault(record.topic_id, set()).update(range(count, len(draft.partitions)))
        del draft.partitions[count:]
        draft.pending_deletion = None

    def replay_cancel_partitions_deletion(
        self, record: CancelTopicPartitionsDeletionRecord
    ) -> None:
        """Cancel a pending deletion: the partitions are READ_WRITE again."""
        count = record.partition_count
        draft = self._ending_deletion(
            record.topic_id, count, "cancel a partition deletion", "deletion.cancel-matches"
        )
        not_back = [p.partition_id for p in draft.partitions[count:] if p.mode != Mode.READ_WRITE]
        if not_back:
            # The cancel follows the changes that make them READ_WRITE again; a partition in
            # mode NONE is past its purge time and cannot come back.
            raise PendingDeletionError(
                "deletion.cancel-read-write",
                f"{draft.where()}: partitions {not_back} are not READ_WRITE again",
            )
        draft.pending_deletion = None

    def apply(self) -> TopicsImage:
        """The topics image with the changes applied (the base itself if none).

        A delta is applied once: each draft's partition list is let go as its topic's tuple
        is made, so a load of the whole log does not hold every list beside the image it
        builds (a 1M-partition log's load: peak RSS 28 MiB lower, 24 MiB less held after, as
        the tuples reuse the lists' memory); replay more into a new delta on the image this
        returns (any use of this one after raises `RuntimeError`).
        """
        base = self.image
        if not self._topics:
            return base
        with base.by_id.mutate() as by_id:
            for topic_id, draft in self._topics.items():
                if draft is None:
                    by_id.pop(topic_id, None)
                else:
                    by_id[topic_id] = draft.image()
                    draft.partitions.clear()
            topics_by_id = by_id.finish()
        step = self._index_step(topics_by_id)
        self._topics = _APPLIED
        return new_topics_image(
            by_id=topics_by_id,
            by_name=updated(base.by_name, self._names),
            replica_index=base.replica_index if step is None else base.replica_index.after(step),
        )

    def _index_step(self, topics_by_id: Map[Uuid, TopicImage]) -> IndexStep | None:
        """The changes to `by_broker` this delta makes (None if none).

        A new topic adds all its partitions and a removed one drops them, without a look at
        the others; a changed topic costs only the partitions whose replicas moved. Which
        brokers a new or removed topic touches is left to `replay.broker_index`, which works
        it out when the index is read (for many deltas at once).
        """
        base = self.image.by_id
        gained: list[tuple[Uuid, Sequence[PartitionRecord]]] = []
        lost: list[tuple[Uuid, Sequence[PartitionRecord]]] = []
        touched: dict[int, dict[Uuid, tuple[set[int], set[int]]]] = {}
        """Changed entries: partition ids (added, removed)."""
        moved_topics = self._moved
        entries = 0
        for topic_id, draft in self._topics.items():
            before = base.get(topic_id)
            if before is None:
                if draft is not None:
                    partitions = topics_by_id[topic_id].partitions
                    gained.append((topic_id, partitions))
                    entries += len(partitions)
                continue
            if draft is None or draft.fresh:
                lost.append((topic_id, before.partitions))
                entries += len(before.partitions)
                if draft is not None:  # removed and created again: the new one goes in whole
                    partitions = topics_by_id[topic_id].partitions
                    gained.append((topic_id, partitions))
                    entries += len(partitions)
                continue
            moved = moved_topics.get(topic_id)
            if not moved:
                continue
            old_parts = before.partitions
            new_parts = topics_by_id[topic_id].partitions  # the draft's list is let go
            for partition_id in moved:
                old = old_parts[partition_id].replicas if partition_id < len(old_parts) else ()
                new = new_parts[partition_id].replicas if partition_id < len(new_parts) else ()
                for broker_id in old:
                    if broker_id not in new:
                        entry = touched.setdefault(broker_id, {})
                        entry.setdefault(topic_id, (set(), set()))[1].add(partition_id)
                for broker_id in new:
                    if broker_id not in old:
                        entry = touched.setdefault(broker_id, {})
                        entry.setdefault(topic_id, (set(), set()))[0].add(partition_id)
        if not (gained or touched or lost):
            return None
        entries += sum(len(topics) for topics in touched.values())
        return IndexStep(gained, lost, touched, entries)


def _refuse_new_partition(draft: _TopicDraft, record: PartitionRecord) -> None:
    """Raise the error for a PartitionRecord that does not create the topic's next partition."""
    count = len(draft.partitions)
    where = draft.where(record.partition_id)
    if draft.pending_deletion is not None:
        raise InvalidPartitionError(
            "partition.stable-while-deleting",
            f"{where} cannot be added while a partition deletion of the topic is pending",
        )
    if 0 <= record.partition_id < count:
        raise UnknownPartitionError(
            "partition.next-id",
            f"{where} already exists; a partition is created once and changed with "
            "PartitionChangeRecords",
        )
    raise UnknownPartitionError(
        "partition.next-id",
        f"{where}: partition ids must be contiguous; the topic has {count} partitions, so the "
        f"next one is {count}",
    )
