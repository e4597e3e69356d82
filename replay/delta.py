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
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    CancelTopicPartitionsDeletionRecord,
    ClientWriteRecord,
    ConfigRecord,
    ConfigResourceType,
    ControlledShutdownChange,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    FencingChange,
    LeaderChangeRecord,
    Mode,
    MoveTopicRecord,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    PurgeTopicPartitionsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveNamespaceRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    ScramMechanism,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from records.slots import new_instance, slot_setter
from records.uuids import Uuid
from replay.errors import (
    AclReplayError,
    ConfigReplayError,
    DuplicateTopicError,
    FeatureReplayError,
    InvalidBrokerError,
    InvalidPartitionError,
    InvalidTopicError,
    NamespaceReplayError,
    PendingDeletionError,
    ScramReplayError,
    UnknownBrokerError,
    UnknownPartitionError,
    UnknownTopicError,
)
from replay.image import (
    NAMESPACE_SEPARATOR,
    AclsImage,
    ClusterImage,
    ConfigKey,
    ConfigsImage,
    FeaturesImage,
    MetadataImage,
    NamespacesImage,
    Provenance,
    ScramImage,
    ScramKey,
    TopicImage,
    TopicsImage,
    qualified_name,
)
from replay.rules import (
    MAX_NAME_LENGTH,
    NO_TIER_NAMES,
    acl_problem,
    namespace_name_problem,
    scram_problem,
    topic_name_chars,
    topic_name_problem,
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


_VALID_REPLICAS: set[tuple[int, ...]] = set()
"""Replica lists already found valid (non-empty, distinct, ids >= 0): a memo of a pure check.

A cluster has few distinct replica lists (placement repeats a handful of patterns), and looking
one up costs a fraction of checking it again; replay of a PartitionRecord pays this on every
record. Bounded: cleared when full.
"""
_VALID_REPLICAS_MAX = 65_536

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
        self._acls: dict[Uuid, AccessControlEntryRecord | None] = {}
        self._scram: dict[ScramKey, UserScramCredentialRecord | None] = {}
        self._client_writes: list[ClientWriteRecord] = []
        self._child_counts: dict[str, int] | None = None
        """Live direct child namespaces per namespace, built on the first removal."""
        self._batch_topics: list[tuple[_TopicDraft, TopicRecord]] = []
        """Topics created since the last `finish_batch`: they must have partitions by then."""
        self._batch_modes: list[tuple[_TopicDraft, PartitionRecord]] = []
        """Partitions created since the last `finish_batch` in a mode other than READ_WRITE."""
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

    def _replay_feature(self, record: FeatureLevelRecord) -> None:
        if record.feature_level < 0:
            raise FeatureReplayError(
                "feature.level-nonnegative",
                f"feature {record.name!r} cannot have level {record.feature_level}",
            )
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
            raise UnknownBrokerError(
                "broker.registered", f"{what}: broker {broker_id} is not registered"
            )
        if current.broker_epoch != broker_epoch:
            raise UnknownBrokerError(
                "broker.registered",
                f"{what}: broker {broker_id} is registered with epoch {current.broker_epoch}, "
                f"not {broker_epoch}",
            )
        return current

    def _replay_register_broker(self, record: RegisterBrokerRecord) -> None:
        broker_id = record.broker_id
        if broker_id < 0:
            raise InvalidBrokerError("broker.id-nonnegative", f"broker id {broker_id} is negative")
        if record.rack is not None and not record.rack.strip():
            raise InvalidBrokerError(
                "broker.registration-valid", f"broker {broker_id} has a blank rack name"
            )
        for endpoint in record.end_points:
            if not endpoint.host or not 0 < endpoint.port < 65536:
                raise InvalidBrokerError(
                    "broker.registration-valid",
                    f"broker {broker_id} endpoint {endpoint.name!r} is "
                    f"{endpoint.host!r}:{endpoint.port}, not a host and a port in 1..65535",
                )
        current = self.broker(broker_id)
        if current is not None and record.broker_epoch <= current.broker_epoch:
            raise InvalidBrokerError(
                "broker.epoch-increases",
                f"broker {broker_id} registered again with epoch {record.broker_epoch}, not "
                f"above its current epoch {current.broker_epoch}",
            )
        self._brokers[broker_id] = record

    def _replay_unregister_broker(self, record: UnregisterBrokerRecord) -> None:
        self._registered(record.broker_id, record.broker_epoch, "unregister")
        self._brokers[record.broker_id] = None

    def _replay_broker_change(self, record: BrokerRegistrationChangeRecord) -> None:
        current = self._registered(record.broker_id, record.broker_epoch, "registration change")
        fenced = current.fenced
        shutdown = current.in_controlled_shutdown
        if record.in_controlled_shutdown == ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN:
            shutdown = True
        if record.fenced == FencingChange.FENCE:
            fenced = True
        elif record.fenced == FencingChange.UNFENCE:
            if shutdown:
                raise InvalidBrokerError(
                    "broker.unfence-after-shutdown",
                    f"broker {record.broker_id} is in controlled shutdown and cannot be "
                    "unfenced; it registers again instead",
                )
            fenced = False
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
        problem = namespace_name_problem(name)
        if problem is not None:
            raise NamespaceReplayError("namespace.name-legal", problem)
        if self.namespace(name) is not None:
            raise NamespaceReplayError(
                "namespace.name-unique", f"namespace {name!r} already exists"
            )
        if record.namespace_id in Uuid.RESERVED:
            raise NamespaceReplayError(
                "namespace.id-unique", f"namespace id {record.namespace_id} is reserved"
            )
        if self._namespace_name(record.namespace_id) is not None:
            raise NamespaceReplayError(
                "namespace.id-unique", f"namespace id {record.namespace_id} is already in use"
            )
        parent_name = name.rpartition(NAMESPACE_SEPARATOR)[0]
        parent = self.namespace(parent_name) if parent_name else None
        if parent_name and parent is None:
            raise NamespaceReplayError(
                "namespace.parent",
                f"namespace {name!r} needs its parent {parent_name!r} to exist first",
            )
        expected_parent = None if parent is None else parent.namespace_id
        if record.parent_id != expected_parent:
            raise NamespaceReplayError(
                "namespace.parent",
                f"namespace {name!r} names parent id {record.parent_id}, but its parent is "
                f"{expected_parent}",
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
            raise NamespaceReplayError(
                "namespace.exists", f"no namespace has id {record.namespace_id}"
            )
        children_of = self._namespace_children()
        if children_of.get(name):
            prefix = name + NAMESPACE_SEPARATOR
            children = sorted(n for n in self._live_namespaces() if n.startswith(prefix))
            raise NamespaceReplayError(
                "namespace.empty-before-removal",
                f"namespace {name!r} still has child namespaces {children}; remove them first",
            )
        if self.topic_count(name):
            raise NamespaceReplayError(
                "namespace.empty-before-removal",
                f"namespace {name!r} still holds {self.topic_count(name)} topics; remove them "
                "first",
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
                raise UnknownTopicError("topic.exists", f"{what}: no live topic has id {topic_id}")
            draft = _TopicDraft(
                topic.topic_id,
                topic.name,
                topic.namespace,
                list(topic.partitions),
                topic.pending_deletion,
            )
            self._topics[topic_id] = draft
        elif draft is None:
            raise UnknownTopicError("topic.exists", f"{what}: topic id {topic_id} was deleted")
        return draft  # type: ignore[return-value]  # _MISSING and None ruled out above

    def _topic_live(self, topic_id: Uuid) -> bool:
        draft = self._topics.get(topic_id, _MISSING)
        if draft is _MISSING:
            return topic_id in self.image.topics.by_id
        return draft is not None

    def _replay_topic(self, record: TopicRecord) -> None:
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
        if record.namespace and self.namespace(record.namespace) is None:
            raise NamespaceReplayError(
                "topic.namespace-exists",
                f"topic {qualified!r} is in namespace {record.namespace!r}, which does not exist",
            )
        draft = _TopicDraft(record.topic_id, record.name, record.namespace, [], None)
        self._topics[record.topic_id] = draft
        self._names[qualified] = record.topic_id
        self._count_topic(record.namespace, 1)
        self._batch_topics.append((draft, record))

    def _replay_partition(self, record: PartitionRecord) -> None:
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
        if record.mode:  # not READ_WRITE (0); `!= Mode.READ_WRITE` costs an enum lookup
            self._batch_modes.append((draft, record))

    def _replay_partition_change(self, record: PartitionChangeRecord) -> None:
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
        where = draft.where(partition_id)
        _check_partition(merged, where)
        self._check_change(draft, before, merged, record.leader, where)
        draft.partitions[partition_id] = merged

    def _check_change(
        self,
        draft: _TopicDraft,
        before: PartitionRecord,
        after: PartitionRecord,
        elected: int,
        where: str,
    ) -> None:
        """Raise unless `before` -> `after` is a change the controller can make."""
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
                if broker_id not in before.replicas and self.broker(broker_id) is None:
                    raise InvalidPartitionError(
                        "partition.added-replicas-registered",
                        f"{where}: new replica {broker_id} is not a registered broker",
                    )
        if elected not in (LEADER_UNCHANGED, NO_LEADER):
            broker = self.broker(elected)
            if broker is None or broker.fenced or broker.in_controlled_shutdown:
                state = (
                    "not registered"
                    if broker is None
                    else "fenced"
                    if broker.fenced
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
                "topic.move-changes-namespace",
                f"{draft.where()} is already in namespace {record.namespace!r}",
            )
        if record.namespace and self.namespace(record.namespace) is None:
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

    def _replay_purge_partitions(self, record: PurgeTopicPartitionsRecord) -> None:
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
        del draft.partitions[count:]
        draft.pending_deletion = None

    def _replay_cancel_partitions_deletion(
        self, record: CancelTopicPartitionsDeletionRecord
    ) -> None:
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
        resource_type = record.resource_type
        name = record.resource_name
        if resource_type == ConfigResourceType.TOPIC:
            exists = self.topic_id(name) is not None
        elif resource_type == ConfigResourceType.NAMESPACE:
            exists = bool(name) and self.namespace(name) is not None
        elif resource_type == ConfigResourceType.BROKER:
            # The form only: a broker's configs outlive its registration (as in Kafka), so a
            # snapshot holds configs of brokers that are gone.
            exists = not name or (name.isascii() and name.isdigit())
        else:
            raise ConfigReplayError(
                "config.resource-valid",
                f"config {record.name!r} is for a {resource_type.name} resource, which has none",
            )
        if not exists:
            raise ConfigReplayError(
                "config.resource-exists",
                f"config {record.name!r} is for {resource_type.name} {name!r}, which does not "
                "exist",
            )
        key = (resource_type, name)
        changes = self._configs.get(key)
        if changes is None:
            changes = self._configs[key] = {}
        changes[record.name] = record.value

    # ------------------------------------------------------------------ security

    def acl(self, acl_id: Uuid) -> AccessControlEntryRecord | None:
        """An ACL as of the records replayed so far, or None."""
        if acl_id in self._acls:
            return self._acls[acl_id]
        return self.image.acls.get(acl_id)

    def _replay_acl(self, record: AccessControlEntryRecord) -> None:
        problem = acl_problem(record)
        if problem is not None:
            raise AclReplayError(*problem, record=record)
        if self.acl(record.id) is not None:
            raise AclReplayError(
                "acl.id-unique",
                f"ACL id {record.id} is already in use; an ACL is created once and removed by id",
                record=record,
            )
        self._acls[record.id] = record

    def _replay_remove_acl(self, record: RemoveAccessControlEntryRecord) -> None:
        if self.acl(record.id) is None:
            raise AclReplayError(
                "acl.exists",
                f"ACL {record.id} does not exist, so it cannot be removed",
                record=record,
            )
        self._acls[record.id] = None

    def _replay_leader_change(self, record: LeaderChangeRecord) -> None:
        """A quorum leader took office: no metadata changes, only the provenance moves on."""

    def _replay_client_write(self, record: ClientWriteRecord) -> None:
        """A client's idempotent write was applied: it becomes that client's last write.

        Kept in order; `apply` adds them to the table one by one (with the eviction), so
        replaying them in one delta or in many gives the same table.
        """
        self._client_writes.append(record)

    def scram_credential(
        self, name: str, mechanism: ScramMechanism
    ) -> UserScramCredentialRecord | None:
        """A user's SCRAM credential as of the records replayed so far, or None."""
        key = (name, mechanism)
        if key in self._scram:
            return self._scram[key]
        return self.image.scram.get(name, mechanism)

    def _replay_scram(self, record: UserScramCredentialRecord) -> None:
        problem = scram_problem(record)
        if problem is not None:
            raise ScramReplayError(*problem, record=record)
        self._scram[(record.name, record.mechanism)] = record

    def _replay_remove_scram(self, record: RemoveUserScramCredentialRecord) -> None:
        if self.scram_credential(record.name, record.mechanism) is None:
            raise ScramReplayError(
                "scram.exists",
                f"user {record.name!r} has no {record.mechanism.mechanism_name} credential to "
                "remove",
                record=record,
            )
        self._scram[(record.name, record.mechanism)] = None

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
            acls=AclsImage(by_id=_updated(base.acls.by_id, self._acls))
            if self._acls
            else base.acls,
            scram=ScramImage(credentials=_updated(base.scram.credentials, self._scram))
            if self._scram
            else base.scram,
            client_writes=base.client_writes.with_writes(self._client_writes)
            if self._client_writes
            else base.client_writes,
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
    UserScramCredentialRecord: MetadataDelta._replay_scram,
    RemoveUserScramCredentialRecord: MetadataDelta._replay_remove_scram,
    AccessControlEntryRecord: MetadataDelta._replay_acl,
    RemoveAccessControlEntryRecord: MetadataDelta._replay_remove_acl,
    LeaderChangeRecord: MetadataDelta._replay_leader_change,
    ClientWriteRecord: MetadataDelta._replay_client_write,
}
"""The handler of each record type: a class-level table, so a delta holds no bound methods
(which made every delta a reference cycle, left for the cyclic collector to free)."""


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
