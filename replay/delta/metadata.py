"""MetadataDelta: routes each replayed record to its area's delta, and `apply` builds the image.

As in Kafka's `MetadataDelta`, the rules live in one delta per area (`FeaturesDelta`,
`ClusterDelta`, `NamespacesDelta`, `TopicsDelta`, `ConfigsDelta`, `AclsDelta`, `ScramDelta`,
`ClientWritesDelta`), beside the per-area images of `replay.image`; this module only routes
and fans out. Routing is one dict lookup of the record's class giving a bound method of the
area delta, with no layer between for a record of one area (PartitionRecord, most of a log,
among them): replay speed is a product figure.

As there, the area deltas never see each other: a record that rests on or changes another area
(a topic's namespace must exist and counts the topic; a removed topic or namespace takes its
configs; a partition's new leader must be a live broker) goes to `_CrossArea`, which asks the
other areas what the record's own area must know, and makes the other areas' changes from what
its handler returns. Nothing refers back to the `MetadataDelta`, so a dropped delta is freed by
reference counting, never left for the cyclic collector.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final

from records.errors import UnknownRecordTypeError
from records.model import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    CancelTopicPartitionsDeletionRecord,
    ClientWriteRecord,
    ConfigRecord,
    ConfigResourceType,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    KRaftVersionRecord,
    LeaderChangeRecord,
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
    VotersRecord,
)
from records.uuids import Uuid
from replay.delta.acls import AclsDelta
from replay.delta.client_writes import ClientWritesDelta
from replay.delta.cluster import ClusterDelta
from replay.delta.configs import ConfigsDelta
from replay.delta.features import FeaturesDelta
from replay.delta.namespaces import NamespacesDelta
from replay.delta.scram import ScramDelta
from replay.delta.topics import TopicsDelta
from replay.image import ConfigKey, MetadataImage, Provenance, new_image, qualified_name


def _replay_leader_change(record: LeaderChangeRecord | VotersRecord | KRaftVersionRecord) -> None:
    """A quorum control record: no metadata changes, only the provenance moves on.

    A leader took office (LeaderChange), the voters (VotersRecord) or kraft.version
    (KRaftVersionRecord) changed: the quorum reads those from its log, not the image.
    """


class _CrossArea:
    """The handlers of the records that rest on or change more than their own area.

    Each asks the other areas what the record's area must know, calls that area's handler
    (whose checks come first, in the order they always had), and then makes the other areas'
    changes from what the handler returns, as Kafka's `MetadataDelta` fans a RemoveTopicRecord
    out to its topics and configs deltas.
    """

    __slots__ = ("broker", "configs", "namespaces", "topics")

    def __init__(
        self,
        cluster: ClusterDelta,
        namespaces: NamespacesDelta,
        topics: TopicsDelta,
        configs: ConfigsDelta,
    ) -> None:
        self.broker = cluster.broker
        """A broker's registration as of the records replayed so far, bound once: a partition
        change asks it for each new replica and elected leader."""
        self.namespaces = namespaces
        self.topics = topics
        self.configs = configs

    def replay_topic(self, record: TopicRecord) -> None:
        """Create a topic in a namespace that exists, and count it there."""
        namespace = record.namespace
        self.topics.replay_topic(record, self.namespaces.namespace(namespace) is not None)
        self.namespaces.count_topic(namespace, 1)

    def replay_partition_change(self, record: PartitionChangeRecord) -> None:
        """Change a partition, whose new replicas and leader are registered brokers."""
        self.topics.replay_partition_change(record, self.broker)

    def replay_remove_topic(self, record: RemoveTopicRecord) -> None:
        """Remove a topic, its count in its namespace and its configs."""
        namespace, name = self.topics.replay_remove_topic(record)
        self.namespaces.count_topic(namespace, -1)
        # As Kafka does: a topic's configs go with it, so a new topic of the same name starts
        # from the defaults.
        self.configs.clear((ConfigResourceType.TOPIC, qualified_name(namespace, name)))

    def replay_move_topic(self, record: MoveTopicRecord) -> None:
        """Move a topic to a namespace that exists, with its count and its configs."""
        namespace = record.namespace
        exists = self.namespaces.namespace(namespace) is not None
        old_namespace, name = self.topics.replay_move_topic(record, exists)
        self.namespaces.count_topic(old_namespace, -1)
        self.namespaces.count_topic(namespace, 1)
        # Topic configs are keyed by qualified name: they move with the topic.
        self.configs.move(
            (ConfigResourceType.TOPIC, qualified_name(old_namespace, name)),
            (ConfigResourceType.TOPIC, qualified_name(namespace, name)),
        )

    def replay_remove_namespace(self, record: RemoveNamespaceRecord) -> None:
        """Remove an empty namespace and its configs."""
        name = self.namespaces.replay_remove_namespace(record)
        # A namespace's configs go with it, as a topic's do.
        self.configs.clear((ConfigResourceType.NAMESPACE, name))

    def replay_config(self, record: ConfigRecord) -> None:
        """Set or delete a config of a resource that exists."""
        resource_type = record.resource_type
        name = record.resource_name
        if resource_type == ConfigResourceType.TOPIC:
            exists = self.topics.topic_id(name) is not None
        elif resource_type == ConfigResourceType.NAMESPACE:
            exists = bool(name) and self.namespaces.namespace(name) is not None
        else:
            exists = False  # a broker's configs need its id's form only (ConfigsDelta checks)
        self.configs.replay_config(record, exists)


_LEADER_CHANGE = -1
"""The area index of the quorum's control records (their handler is `_replay_leader_change`)."""

_AREAS = (
    "features",
    "cluster",
    "namespaces",
    "topics",
    "configs",
    "acls",
    "scram",
    "client_writes",
    "cross_area",
)
"""The area deltas of a `MetadataDelta` and its `_CrossArea`, in the order `_ROUTES` indexes
them."""

_CROSS_AREA = _AREAS.index("cross_area")
"""The index of the `_CrossArea` in `_AREAS`."""

_ROUTES: Final[Mapping[type[Record], tuple[int, str]]] = MappingProxyType(
    {
        FeatureLevelRecord: (0, "replay_feature_level"),
        RegisterBrokerRecord: (1, "replay_register_broker"),
        UnregisterBrokerRecord: (1, "replay_unregister_broker"),
        BrokerRegistrationChangeRecord: (1, "replay_broker_change"),
        NamespaceRecord: (2, "replay_namespace"),
        RemoveNamespaceRecord: (_CROSS_AREA, "replay_remove_namespace"),
        TopicRecord: (_CROSS_AREA, "replay_topic"),
        PartitionRecord: (3, "replay_partition"),
        PartitionChangeRecord: (_CROSS_AREA, "replay_partition_change"),
        RemoveTopicRecord: (_CROSS_AREA, "replay_remove_topic"),
        DeleteTopicPartitionsRecord: (3, "replay_delete_partitions"),
        MoveTopicRecord: (_CROSS_AREA, "replay_move_topic"),
        PurgeTopicPartitionsRecord: (3, "replay_purge_partitions"),
        CancelTopicPartitionsDeletionRecord: (3, "replay_cancel_partitions_deletion"),
        ConfigRecord: (_CROSS_AREA, "replay_config"),
        AccessControlEntryRecord: (5, "replay_acl"),
        RemoveAccessControlEntryRecord: (5, "replay_remove_acl"),
        UserScramCredentialRecord: (6, "replay_scram"),
        RemoveUserScramCredentialRecord: (6, "replay_remove_scram"),
        ClientWriteRecord: (7, "replay_client_write"),
        LeaderChangeRecord: (_LEADER_CHANGE, ""),
        VotersRecord: (_LEADER_CHANGE, ""),
        KRaftVersionRecord: (_LEADER_CHANGE, ""),
    }
)
"""The one routing table: record class -> (its area in `_AREAS`, the area delta's handler)."""


class _Handlers(dict[type[Record], Callable[[Any], None]]):
    """Record class -> the bound handler of its area delta, bound on first use.

    A miss binds (`__missing__`) instead of raising: a lookup stays one C-level step, and a
    delta's first record of a class costs no exception. It holds the area deltas, not the
    `MetadataDelta`, so no cycle is made.
    """

    __slots__ = ("_areas",)

    def __init__(self, areas: tuple[Any, ...]) -> None:
        super().__init__()
        self._areas = areas

    def __missing__(self, cls: type[Record]) -> Callable[[Any], None]:
        try:
            area, name = _ROUTES[cls]
        except KeyError:
            raise UnknownRecordTypeError(cls.__name__) from None
        handler: Callable[[Any], None] = (
            _replay_leader_change if area == _LEADER_CHANGE else getattr(self._areas[area], name)
        )
        self[cls] = handler
        return handler


class MetadataDelta:
    """Changes to a base image, accumulated by `replay` and turned into an image by `apply`."""

    __slots__ = (
        "_dispatch",
        "acls",
        "client_writes",
        "cluster",
        "configs",
        "features",
        "image",
        "namespaces",
        "records",
        "scram",
        "topics",
    )

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self.features = FeaturesDelta(image.features)
        self.cluster = cluster = ClusterDelta(image.cluster)
        self.namespaces = namespaces = NamespacesDelta(image.namespaces)
        self.topics = topics = TopicsDelta(image.topics)
        self.configs = configs = ConfigsDelta(image.configs)
        self.acls = AclsDelta(image.acls)
        self.scram = ScramDelta(image.scram)
        self.client_writes = ClientWritesDelta(image.client_writes)
        self.records = 0
        """Records replayed so far."""
        # Record class -> the bound handler of its area, bound on the first record of each
        # class: a command replays two or three classes, and binding all of them up front
        # cost more than the rest of a delta's creation (a delta per command). The areas in
        # `_AREAS` order (a wrong order fails every replay of the records routed to them).
        self._dispatch = _Handlers(
            (
                self.features,
                cluster,
                namespaces,
                topics,
                configs,
                self.acls,
                self.scram,
                self.client_writes,
                _CrossArea(cluster, namespaces, topics, configs),
            )
        )

    # ------------------------------------------------------------------ replay

    @staticmethod
    def handled_types() -> frozenset[type[Record]]:
        """The record types this consumer has a handler for (all of them; tested)."""
        return frozenset(_ROUTES)

    def replay(self, record: Record) -> None:
        """Accumulate one record; raises a `ReplayError` if it breaks an invariant."""
        self._dispatch[record.__class__](record)
        self.records += 1

    def replay_all(self, records: Iterable[Record]) -> None:
        """Accumulate records in order."""
        dispatch = self._dispatch
        count = 0
        try:
            # The hot loop: one dict lookup and one call a record, nothing else.
            for record in records:
                dispatch[record.__class__](record)
                count += 1
        finally:
            self.records += count

    def finish_batch(self) -> None:
        """Check the rules that hold between batches (not inside one); the next batch starts.

        See `TopicsDelta.finish_batch`: only topics and partitions have such rules.
        """
        self.topics.finish_batch()

    # ------------------------------------------------------------------ lookups

    def broker(self, broker_id: int) -> RegisterBrokerRecord | None:
        """A broker's registration as of the records replayed so far."""
        return self.cluster.broker(broker_id)

    def namespace(self, name: str) -> NamespaceRecord | None:
        """A namespace as of the records replayed so far (None for "" and unknown names)."""
        return self.namespaces.namespace(name)

    def topic_count(self, namespace: str) -> int:
        """Live topics directly in a non-default namespace, as of the records replayed so far."""
        return self.namespaces.topic_count(namespace)

    def topic_id(self, qualified: str) -> Uuid | None:
        """The id of the live topic with a qualified name, as of the records replayed so far."""
        return self.topics.topic_id(qualified)

    def config_values(self, key: ConfigKey) -> dict[str, str]:
        """The configs of a resource as of the records replayed so far."""
        return self.configs.values(key)

    def acl(self, acl_id: Uuid) -> AccessControlEntryRecord | None:
        """An ACL as of the records replayed so far, or None."""
        return self.acls.acl(acl_id)

    def scram_credential(
        self, name: str, mechanism: ScramMechanism
    ) -> UserScramCredentialRecord | None:
        """A user's SCRAM credential as of the records replayed so far, or None."""
        return self.scram.credential(name, mechanism)

    # ------------------------------------------------------------------ apply

    def apply(self, provenance: Provenance) -> MetadataImage:
        """The image with every replayed record applied, stamped with `provenance`."""
        return new_image(
            provenance=provenance,
            features=self.features.apply(),
            cluster=self.cluster.apply(),
            namespaces=self.namespaces.apply(),
            topics=self.topics.apply(),
            configs=self.configs.apply(),
            acls=self.acls.apply(),
            scram=self.scram.apply(),
            client_writes=self.client_writes.apply(),
        )


def replay_records(
    image: MetadataImage, records: Iterable[Record], provenance: Provenance
) -> MetadataImage:
    """The image after `records`, in one delta."""
    delta = MetadataDelta(image)
    delta.replay_all(records)
    return delta.apply(provenance)
