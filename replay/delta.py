"""MetadataDelta: records are replayed into it, and `apply` turns it into the next image.

Replay checks the invariants a record relies on and raises a typed `ReplayError` when one does
not hold; it never changes the base image. A delta keeps its changes in plain dicts and lists
(cheap to update record by record) and builds the persistent maps of the next image only once,
in `apply`. Replaying many records in one delta or in many gives the same image (tested).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from immutables import Map

from records.errors import UnknownRecordTypeError
from records.model import (
    LEADER_UNCHANGED,
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    CancelTopicPartitionsDeletionRecord,
    ConfigRecord,
    ConfigResourceType,
    ControlledShutdownChange,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    FencingChange,
    Mode,
    MoveTopicRecord,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    PurgeTopicPartitionsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveNamespaceRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from records.slots import new_instance, slot_setter
from records.uuids import Uuid
from replay.errors import (
    DuplicateTopicError,
    InvalidPartitionError,
    NamespaceReplayError,
    PendingDeletionError,
    UnknownBrokerError,
    UnknownPartitionError,
    UnknownTopicError,
)
from replay.image import (
    NAMESPACE_SEPARATOR,
    ClusterImage,
    ConfigKey,
    ConfigsImage,
    FeaturesImage,
    MetadataImage,
    NamespacesImage,
    Provenance,
    TopicImage,
    TopicsImage,
    qualified_name,
)

_MISSING: Final = object()

_PARTITION_FIELDS = (
    "partition_id",
    "topic_id",
    "replicas",
    "isr",
    "removing_replicas",
    "adding_replicas",
    "leader",
    "leader_epoch",
    "partition_epoch",
    "mode",
)
_partition_setters = tuple(slot_setter(PartitionRecord, name) for name in _PARTITION_FIELDS)


def _partition(*values: Any) -> PartitionRecord:
    """A PartitionRecord from values in `_PARTITION_FIELDS` order that replay has checked."""
    record: PartitionRecord = new_instance(PartitionRecord)
    for setter, value in zip(_partition_setters, values, strict=True):
        setter(record, value)
    return record


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


def _check_partition(record: PartitionRecord, where: str) -> None:
    if not record.replicas:
        raise InvalidPartitionError(f"{where}: a partition needs at least one replica")
    if len(set(record.replicas)) != len(record.replicas):
        raise InvalidPartitionError(f"{where}: replicas {list(record.replicas)} repeat a broker")
    if record.leader != NO_LEADER and record.leader not in record.replicas:
        raise InvalidPartitionError(
            f"{where}: leader {record.leader} is not one of the replicas {list(record.replicas)}"
        )
    if not set(record.isr) <= set(record.replicas):
        raise InvalidPartitionError(
            f"{where}: ISR {list(record.isr)} is not a subset of the replicas "
            f"{list(record.replicas)}"
        )


class _TopicDraft:
    """A topic being changed by a delta: mutable copies of the parts that change."""

    __slots__ = ("name", "namespace", "partitions", "pending_deletion", "topic_id")

    def __init__(
        self,
        topic_id: Uuid,
        name: str,
        namespace: str,
        partitions: list[PartitionRecord],
        pending_deletion: DeleteTopicPartitionsRecord | None,
    ) -> None:
        self.topic_id = topic_id
        self.name = name
        self.namespace = namespace
        self.partitions = partitions
        self.pending_deletion = pending_deletion

    def image(self) -> TopicImage:
        return TopicImage(
            topic_id=self.topic_id,
            name=self.name,
            namespace=self.namespace,
            partitions=tuple(self.partitions),
            pending_deletion=self.pending_deletion,
        )

    def where(self, partition_id: int | None = None) -> str:
        topic = f"topic {qualified_name(self.namespace, self.name)!r} ({self.topic_id})"
        return topic if partition_id is None else f"{topic} partition {partition_id}"


class MetadataDelta:
    """Changes to a base image, accumulated by `replay` and turned into an image by `apply`."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._features: dict[str, int] = {}
        self._brokers: dict[int, RegisterBrokerRecord | None] = {}
        self._namespaces: dict[str, NamespaceRecord | None] = {}
        self._namespace_ids: dict[Uuid, str | None] = {}
        self._topic_counts: dict[str, int] = {}
        self._topics: dict[Uuid, _TopicDraft | None] = {}
        self._names: dict[str, Uuid | None] = {}
        self._configs: dict[ConfigKey, dict[str, str | None]] = {}
        self._cleared_configs: set[ConfigKey] = set()
        self._child_counts: dict[str, int] | None = None
        """Live direct child namespaces per namespace, built on the first removal."""
        self.records = 0
        """Records replayed so far."""

    # ------------------------------------------------------------------ replay

    def handled_types(self) -> frozenset[type[Record]]:
        """The record types this consumer has a handler for (all of them; tested)."""
        return frozenset(_DISPATCH)

    def replay(self, record: Record) -> None:
        """Accumulate one record; raises a `ReplayError` if it breaks an invariant."""
        try:
            handler = _DISPATCH[record.__class__]
        except KeyError:
            raise UnknownRecordTypeError(type(record).__name__) from None
        handler(self, record)
        self.records += 1

    def replay_all(self, records: Iterable[Record]) -> None:
        """Accumulate records in order."""
        dispatch = _DISPATCH
        count = 0
        try:
            for record in records:
                dispatch[record.__class__](self, record)
                count += 1
        except KeyError as exc:
            if isinstance(exc.args[0], type):
                raise UnknownRecordTypeError(exc.args[0].__name__) from None
            raise
        finally:
            self.records += count

    def _replay_feature(self, record: FeatureLevelRecord) -> None:
        self._features[record.name] = record.feature_level

    # brokers

    def broker(self, broker_id: int) -> RegisterBrokerRecord | None:
        """A broker's registration as of the records replayed so far."""
        found = self._brokers.get(broker_id, _MISSING)
        if found is _MISSING:
            return self.image.cluster.get(broker_id)
        return found  # type: ignore[return-value]  # _MISSING ruled out above

    def _registered(self, broker_id: int, broker_epoch: int, what: str) -> RegisterBrokerRecord:
        current = self.broker(broker_id)
        if current is None:
            raise UnknownBrokerError(f"{what}: broker {broker_id} is not registered")
        if current.broker_epoch != broker_epoch:
            raise UnknownBrokerError(
                f"{what}: broker {broker_id} is registered with epoch {current.broker_epoch}, "
                f"not {broker_epoch}"
            )
        return current

    def _replay_register_broker(self, record: RegisterBrokerRecord) -> None:
        self._brokers[record.broker_id] = record

    def _replay_unregister_broker(self, record: UnregisterBrokerRecord) -> None:
        self._registered(record.broker_id, record.broker_epoch, "unregister")
        self._brokers[record.broker_id] = None

    def _replay_broker_change(self, record: BrokerRegistrationChangeRecord) -> None:
        current = self._registered(record.broker_id, record.broker_epoch, "registration change")
        fenced = current.fenced
        if record.fenced == FencingChange.FENCE:
            fenced = True
        elif record.fenced == FencingChange.UNFENCE:
            fenced = False
        shutdown = current.in_controlled_shutdown
        if record.in_controlled_shutdown == ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN:
            shutdown = True
        self._brokers[record.broker_id] = RegisterBrokerRecord(
            broker_id=current.broker_id,
            incarnation_id=current.incarnation_id,
            broker_epoch=current.broker_epoch,
            end_points=current.end_points,
            features=current.features,
            rack=current.rack,
            fenced=fenced,
            in_controlled_shutdown=shutdown,
        )

    # namespaces

    def namespace(self, name: str) -> NamespaceRecord | None:
        """A namespace as of the records replayed so far (None for "" and unknown names)."""
        found = self._namespaces.get(name, _MISSING)
        if found is _MISSING:
            return self.image.namespaces.get(name)
        return found  # type: ignore[return-value]  # _MISSING ruled out above

    def _namespace_name(self, namespace_id: Uuid) -> str | None:
        found = self._namespace_ids.get(namespace_id, _MISSING)
        if found is _MISSING:
            return self.image.namespaces.by_id.get(namespace_id)
        return found  # type: ignore[return-value]  # _MISSING ruled out above

    def topic_count(self, namespace: str) -> int:
        """Live topics directly in a non-default namespace, as of the records replayed so far."""
        found = self._topic_counts.get(namespace)
        return self.image.namespaces.topic_counts.get(namespace, 0) if found is None else found

    def _count_topic(self, namespace: str, change: int) -> None:
        if namespace:
            self._topic_counts[namespace] = self.topic_count(namespace) + change

    def _replay_namespace(self, record: NamespaceRecord) -> None:
        name = record.name
        tiers = name.split(NAMESPACE_SEPARATOR)
        if not all(tiers):
            raise NamespaceReplayError(f"namespace {name!r} has an empty tier")
        if self.namespace(name) is not None:
            raise NamespaceReplayError(f"namespace {name!r} already exists")
        if self._namespace_name(record.namespace_id) is not None:
            raise NamespaceReplayError(f"namespace id {record.namespace_id} is already in use")
        parent_name = NAMESPACE_SEPARATOR.join(tiers[:-1])
        parent = self.namespace(parent_name) if parent_name else None
        if parent_name and parent is None:
            raise NamespaceReplayError(
                f"namespace {name!r} needs its parent {parent_name!r} to exist first"
            )
        expected_parent = None if parent is None else parent.namespace_id
        if record.parent_id != expected_parent:
            raise NamespaceReplayError(
                f"namespace {name!r} names parent id {record.parent_id}, but its parent is "
                f"{expected_parent}"
            )
        self._namespaces[name] = record
        self._namespace_ids[record.namespace_id] = name
        if self._child_counts is not None and parent_name:
            self._child_counts[parent_name] = self._child_counts.get(parent_name, 0) + 1

    def _live_namespaces(self) -> list[str]:
        names = set(self.image.namespaces.by_name) | set(self._namespaces)
        return [n for n in names if self.namespace(n) is not None]

    def _namespace_children(self) -> dict[str, int]:
        """Live namespaces directly below each namespace, as of the records replayed so far.

        The first call counts them all once (children exist only below a live parent, so a
        namespace has descendants exactly when it has children); replay keeps the counts from
        then on, so removing a tree of n namespaces in one delta is linear in n, not n².
        """
        if self._child_counts is None:
            counts: dict[str, int] = {}
            for live in self._live_namespaces():
                parent = live.rpartition(NAMESPACE_SEPARATOR)[0]
                if parent:
                    counts[parent] = counts.get(parent, 0) + 1
            self._child_counts = counts
        return self._child_counts

    def _replay_remove_namespace(self, record: RemoveNamespaceRecord) -> None:
        name = self._namespace_name(record.namespace_id)
        if name is None:
            raise NamespaceReplayError(f"no namespace has id {record.namespace_id}")
        children_of = self._namespace_children()
        if children_of.get(name):
            prefix = name + NAMESPACE_SEPARATOR
            children = sorted(n for n in self._live_namespaces() if n.startswith(prefix))
            raise NamespaceReplayError(
                f"namespace {name!r} still has child namespaces {children}; remove them first"
            )
        if self.topic_count(name):
            raise NamespaceReplayError(
                f"namespace {name!r} still holds {self.topic_count(name)} topics; remove them first"
            )
        self._namespaces[name] = None
        self._namespace_ids[record.namespace_id] = None
        parent_name = name.rpartition(NAMESPACE_SEPARATOR)[0]
        if parent_name:
            children_of[parent_name] -= 1
        # A namespace's configs go with it, as a topic's do.
        self._clear_config((ConfigResourceType.NAMESPACE, name))

    # topics

    def topic_id(self, qualified: str) -> Uuid | None:
        """The id of the live topic with a qualified name, as of the records replayed so far."""
        found = self._names.get(qualified, _MISSING)
        if found is _MISSING:
            return self.image.topics.by_name.get(qualified)
        return found  # type: ignore[return-value]  # _MISSING ruled out above

    def _draft(self, topic_id: Uuid, what: str) -> _TopicDraft:
        draft = self._topics.get(topic_id, _MISSING)
        if draft is _MISSING:
            topic = self.image.topics.by_id.get(topic_id)
            if topic is None:
                raise UnknownTopicError(f"{what}: no live topic has id {topic_id}")
            draft = _TopicDraft(
                topic.topic_id,
                topic.name,
                topic.namespace,
                list(topic.partitions),
                topic.pending_deletion,
            )
            self._topics[topic_id] = draft
        elif draft is None:
            raise UnknownTopicError(f"{what}: topic id {topic_id} was deleted")
        return draft  # type: ignore[return-value]  # _MISSING and None ruled out above

    def _topic_live(self, topic_id: Uuid) -> bool:
        draft = self._topics.get(topic_id, _MISSING)
        if draft is _MISSING:
            return topic_id in self.image.topics.by_id
        return draft is not None

    def _replay_topic(self, record: TopicRecord) -> None:
        qualified = qualified_name(record.namespace, record.name)
        if self.topic_id(qualified) is not None:
            raise DuplicateTopicError(f"topic {qualified!r} already exists")
        if record.topic_id in Uuid.RESERVED:
            raise DuplicateTopicError(f"topic id {record.topic_id} is reserved")
        if self._topic_live(record.topic_id):
            raise DuplicateTopicError(f"topic id {record.topic_id} is already in use")
        if record.namespace and self.namespace(record.namespace) is None:
            raise NamespaceReplayError(
                f"topic {qualified!r} is in namespace {record.namespace!r}, which does not exist"
            )
        self._topics[record.topic_id] = _TopicDraft(
            record.topic_id, record.name, record.namespace, [], None
        )
        self._names[qualified] = record.topic_id
        self._count_topic(record.namespace, 1)

    def _replay_partition(self, record: PartitionRecord) -> None:
        draft = self._topics.get(record.topic_id)
        if draft is None:
            draft = self._draft(record.topic_id, "partition")
        partitions = draft.partitions
        partition_id = record.partition_id
        leader = record.leader
        if leader != NO_LEADER and leader not in record.replicas:
            _check_partition(record, draft.where(partition_id))
        if partition_id == len(partitions):
            partitions.append(record)
        elif 0 <= partition_id < len(partitions):
            partitions[partition_id] = record
        else:
            raise UnknownPartitionError(
                f"{draft.where(partition_id)}: partition ids must be contiguous; the topic has "
                f"{len(partitions)} partitions"
            )

    def _replay_partition_change(self, record: PartitionChangeRecord) -> None:
        draft = self._draft(record.topic_id, "partition change")
        partition_id = record.partition_id
        if not 0 <= partition_id < len(draft.partitions):
            raise UnknownPartitionError(
                f"{draft.where(partition_id)} does not exist (the topic has "
                f"{len(draft.partitions)} partitions)"
            )
        merged = merge_partition_change(draft.partitions[partition_id], record)
        _check_partition(merged, draft.where(partition_id))
        draft.partitions[partition_id] = merged

    def _replay_remove_topic(self, record: RemoveTopicRecord) -> None:
        draft = self._draft(record.topic_id, "remove topic")
        qualified = qualified_name(draft.namespace, draft.name)
        self._topics[record.topic_id] = None
        self._names[qualified] = None
        self._count_topic(draft.namespace, -1)
        # As Kafka does: a topic's configs go with it, so a new topic of the same name starts
        # from the defaults.
        self._clear_config((ConfigResourceType.TOPIC, qualified))

    def _replay_move_topic(self, record: MoveTopicRecord) -> None:
        draft = self._draft(record.topic_id, "move topic")
        old = qualified_name(draft.namespace, draft.name)
        new = qualified_name(record.namespace, draft.name)
        if record.namespace == draft.namespace:
            raise NamespaceReplayError(
                f"{draft.where()} is already in namespace {record.namespace!r}"
            )
        if record.namespace and self.namespace(record.namespace) is None:
            raise NamespaceReplayError(
                f"{draft.where()} cannot move to namespace {record.namespace!r}, which does not "
                "exist"
            )
        if self.topic_id(new) is not None:
            raise DuplicateTopicError(f"{draft.where()} cannot move: topic {new!r} already exists")
        self._names[old] = None
        self._names[new] = record.topic_id
        self._count_topic(draft.namespace, -1)
        self._count_topic(record.namespace, 1)
        draft.namespace = record.namespace
        # Topic configs are keyed by qualified name: they move with the topic.
        old_key = (ConfigResourceType.TOPIC, old)
        values = self.config_values(old_key)
        self._clear_config(old_key)
        new_key = (ConfigResourceType.TOPIC, new)
        self._clear_config(new_key)
        if values:
            self._configs[new_key] = dict(values)

    def _replay_delete_partitions(self, record: DeleteTopicPartitionsRecord) -> None:
        draft = self._draft(record.topic_id, "delete partitions")
        where = draft.where()
        if draft.pending_deletion is not None:
            raise PendingDeletionError(f"{where} already has a partition deletion pending")
        if not 1 <= record.partition_count < len(draft.partitions):
            raise PendingDeletionError(
                f"{where}: cannot reduce {len(draft.partitions)} partitions to "
                f"{record.partition_count}"
            )
        draft.pending_deletion = record

    def _replay_purge_partitions(self, record: PurgeTopicPartitionsRecord) -> None:
        draft = self._draft(record.topic_id, "purge partitions")
        where = draft.where()
        pending = draft.pending_deletion
        if pending is None:
            raise PendingDeletionError(f"{where} has no partition deletion pending")
        if record.partition_count != pending.partition_count:
            raise PendingDeletionError(
                f"{where}: the pending deletion keeps {pending.partition_count} partitions, "
                f"not {record.partition_count}"
            )
        removed = draft.partitions[record.partition_count :]
        live = [p.partition_id for p in removed if p.mode != Mode.NONE]
        if live:
            raise PendingDeletionError(
                f"{where}: partitions {live} are still readable (mode is not NONE)"
            )
        del draft.partitions[record.partition_count :]
        draft.pending_deletion = None

    def _replay_cancel_partitions_deletion(
        self, record: CancelTopicPartitionsDeletionRecord
    ) -> None:
        draft = self._draft(record.topic_id, "cancel a partition deletion")
        where = draft.where()
        pending = draft.pending_deletion
        if pending is None:
            raise PendingDeletionError(f"{where} has no partition deletion pending")
        if record.partition_count != pending.partition_count:
            raise PendingDeletionError(
                f"{where}: the pending deletion keeps {pending.partition_count} partitions, "
                f"not {record.partition_count}"
            )
        kept = draft.partitions[record.partition_count :]
        not_back = [p.partition_id for p in kept if p.mode != Mode.READ_WRITE]
        if not_back:
            # The cancel follows the changes that make them READ_WRITE again; a partition in
            # mode NONE is past its purge time and cannot come back.
            raise PendingDeletionError(f"{where}: partitions {not_back} are not READ_WRITE again")
        draft.pending_deletion = None

    # configs

    def config_values(self, key: ConfigKey) -> dict[str, str]:
        """The configs of a resource as of the records replayed so far."""
        values = (
            {} if key in self._cleared_configs else dict(self.image.configs.resources.get(key, {}))
        )
        for name, value in self._configs.get(key, {}).items():
            if value is None:
                values.pop(name, None)
            else:
                values[name] = value
        return values

    def _clear_config(self, key: ConfigKey) -> None:
        self._cleared_configs.add(key)
        self._configs.pop(key, None)

    def _replay_config(self, record: ConfigRecord) -> None:
        key = (record.resource_type, record.resource_name)
        changes = self._configs.get(key)
        if changes is None:
            changes = self._configs[key] = {}
        changes[record.name] = record.value

    # ------------------------------------------------------------------ apply

    def apply(self, provenance: Provenance) -> MetadataImage:
        """The image with every replayed record applied, stamped with `provenance`."""
        base = self.image
        return MetadataImage(
            provenance=provenance,
            features=self._apply_features(base.features),
            cluster=self._apply_cluster(base.cluster),
            namespaces=self._apply_namespaces(base.namespaces),
            topics=self._apply_topics(base.topics),
            configs=self._apply_configs(base.configs),
        )

    def _apply_features(self, base: FeaturesImage) -> FeaturesImage:
        if not self._features:
            return base
        with base.levels.mutate() as levels:
            for name, level in self._features.items():
                if level == 0:
                    levels.pop(name, None)
                else:
                    levels[name] = level
            finished = levels.finish()
        return FeaturesImage(levels=finished)

    def _apply_cluster(self, base: ClusterImage) -> ClusterImage:
        if not self._brokers:
            return base
        return ClusterImage(brokers=_updated(base.brokers, self._brokers))

    def _apply_namespaces(self, base: NamespacesImage) -> NamespacesImage:
        if not (self._namespaces or self._topic_counts):
            return base
        with base.topic_counts.mutate() as counts:
            for name, count in self._topic_counts.items():
                if count:
                    counts[name] = count
                else:
                    counts.pop(name, None)
            topic_counts = counts.finish()
        return NamespacesImage(
            by_name=_updated(base.by_name, self._namespaces),
            by_id=_updated(base.by_id, self._namespace_ids),
            topic_counts=topic_counts,
        )

    def _apply_topics(self, base: TopicsImage) -> TopicsImage:
        if not self._topics:
            return base
        with base.by_id.mutate() as by_id:
            for topic_id, draft in self._topics.items():
                if draft is None:
                    by_id.pop(topic_id, None)
                else:
                    by_id[topic_id] = draft.image()
            topics_by_id = by_id.finish()
        return TopicsImage(by_id=topics_by_id, by_name=_updated(base.by_name, self._names))

    def _apply_configs(self, base: ConfigsImage) -> ConfigsImage:
        if not (self._configs or self._cleared_configs):
            return base
        with base.resources.mutate() as resources:
            for key in self._cleared_configs - self._configs.keys():
                resources.pop(key, None)
            for key, changes in self._configs.items():
                start = Map() if key in self._cleared_configs else resources.get(key, Map())
                with start.mutate() as values:
                    for name, value in changes.items():
                        if value is None:
                            values.pop(name, None)
                        else:
                            values[name] = value
                    updated = values.finish()
                if updated:
                    resources[key] = updated
                else:
                    resources.pop(key, None)
            finished_resources = resources.finish()
        return ConfigsImage(resources=finished_resources)


_DISPATCH: dict[type[Record], Callable[[MetadataDelta, Any], None]] = {
    FeatureLevelRecord: MetadataDelta._replay_feature,
    RegisterBrokerRecord: MetadataDelta._replay_register_broker,
    UnregisterBrokerRecord: MetadataDelta._replay_unregister_broker,
    BrokerRegistrationChangeRecord: MetadataDelta._replay_broker_change,
    NamespaceRecord: MetadataDelta._replay_namespace,
    RemoveNamespaceRecord: MetadataDelta._replay_remove_namespace,
    TopicRecord: MetadataDelta._replay_topic,
    PartitionRecord: MetadataDelta._replay_partition,
    PartitionChangeRecord: MetadataDelta._replay_partition_change,
    RemoveTopicRecord: MetadataDelta._replay_remove_topic,
    DeleteTopicPartitionsRecord: MetadataDelta._replay_delete_partitions,
    ConfigRecord: MetadataDelta._replay_config,
    MoveTopicRecord: MetadataDelta._replay_move_topic,
    PurgeTopicPartitionsRecord: MetadataDelta._replay_purge_partitions,
    CancelTopicPartitionsDeletionRecord: MetadataDelta._replay_cancel_partitions_deletion,
}
"""The handler of each record type: a class-level table, so a delta holds no bound methods
(which made every delta a reference cycle, left for the cyclic collector to free)."""


def _updated(base: Map[Any, Any], changes: dict[Any, Any]) -> Map[Any, Any]:
    """`base` with `changes` applied; a value of None removes the key."""
    with base.mutate() as mutable:
        for key, value in changes.items():
            if value is None:
                mutable.pop(key, None)
            else:
                mutable[key] = value
        finished: Map[Any, Any] = mutable.finish()
    return finished


def replay_records(
    image: MetadataImage, records: Iterable[Record], provenance: Provenance
) -> MetadataImage:
    """The image after `records`, in one delta."""
    delta = MetadataDelta(image)
    delta.replay_all(records)
    return delta.apply(provenance)
