"""The metadata image: the immutable state of the cluster metadata at one point of the log.

Built by replaying records into a `MetadataDelta` and applying it. Every area is a persistent map
(`immutables.Map`, a hash array mapped trie), so the next image shares everything unchanged with
this one and applying k records costs O(k log n), not O(n).

Partitions and brokers are kept as the very records that recreate them (`PartitionRecord`,
`RegisterBrokerRecord`): they are frozen and hold exactly the state Kafka's
`PartitionRegistration` and `BrokerRegistration` hold, so replaying a full-state record costs no
copy and `write()` (which turns the image back into records, i.e. a snapshot) yields them as
they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields

from immutables import Map

from records.model import (
    AccessControlEntryRecord,
    ClientWriteRecord,
    ConfigRecord,
    ConfigResourceType,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    NamespaceRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    ScramMechanism,
    TopicRecord,
    UserScramCredentialRecord,
)
from records.slots import preset_constructor
from records.uuids import Uuid
from replay.broker_index import EMPTY_INDEX, BrokerIndex, BrokerPartitions, replica_partitions

METADATA_VERSION = "metadata.version"
"""The feature whose level comes first in every log and snapshot."""

NAMESPACE_SEPARATOR = ":"
"""Separates namespace tiers, and the namespace from the topic in a qualified name."""

ConfigKey = tuple[ConfigResourceType, str]
"""A config resource: its type and name ("" names the cluster-wide default broker resource)."""


def qualified_name(namespace: str, name: str) -> str:
    """`<namespace>:<topic>`, or just the topic name in the default namespace ("")."""
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}" if namespace else name


def split_qualified_name(qualified: str) -> tuple[str, str]:
    """(namespace, topic) of a qualified name; topic names cannot contain ':'."""
    namespace, _, name = qualified.rpartition(NAMESPACE_SEPARATOR)
    return namespace, name


def enclosing_namespaces(namespace: str) -> list[str]:
    """A namespace and the ones enclosing it, nearest first ("org:a" -> ["org:a", "org"]).

    The default namespace "" encloses every namespace and is left out: its configs are the
    cluster's.
    """
    tiers = namespace.split(NAMESPACE_SEPARATOR) if namespace else []
    return [NAMESPACE_SEPARATOR.join(tiers[:n]) for n in range(len(tiers), 0, -1)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """Where an image comes from: the last entry it contains."""

    offset: int
    """Offset of the last entry replayed; -1 for the empty image."""
    epoch: int
    timestamp: int
    """Append time of that entry, milliseconds since the Unix epoch; -1 for the empty image."""


EMPTY_PROVENANCE = Provenance(offset=-1, epoch=-1, timestamp=-1)


@dataclass(frozen=True, slots=True, kw_only=True)
class FeaturesImage:
    """Finalized feature levels (`metadata.version`, ...)."""

    levels: Map[str, int] = field(default_factory=Map)

    def write(self) -> Iterator[Record]:
        """FeatureLevelRecords, `metadata.version` first."""
        names = sorted(self.levels, key=lambda n: (n != METADATA_VERSION, n))
        for name in names:
            yield FeatureLevelRecord(name=name, feature_level=self.levels[name])


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterImage:
    """Registered brokers, each as its current registration."""

    brokers: Map[int, RegisterBrokerRecord] = field(default_factory=Map)

    def get(self, broker_id: int) -> RegisterBrokerRecord | None:
        """The registration of a broker, or None."""
        return self.brokers.get(broker_id)

    def sorted(self) -> list[RegisterBrokerRecord]:
        """Every registration, by broker id."""
        return [self.brokers[i] for i in sorted(self.brokers)]

    def usable(self) -> list[RegisterBrokerRecord]:
        """Brokers that may take new replicas and leadership: unfenced, not shutting down."""
        return [b for b in self.sorted() if not b.fenced and not b.in_controlled_shutdown]

    def write(self) -> Iterator[Record]:
        """One RegisterBrokerRecord per broker, by id."""
        yield from self.sorted()


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespacesImage:
    """The namespace tree (the default namespace "" is implicit) and topic counts per namespace."""

    by_name: Map[str, NamespaceRecord] = field(default_factory=Map)
    by_id: Map[Uuid, str] = field(default_factory=Map)
    topic_counts: Map[str, int] = field(default_factory=Map)
    """Live topics directly in each non-default namespace that has any."""

    def get(self, name: str) -> NamespaceRecord | None:
        """A namespace by full name, or None."""
        return self.by_name.get(name)

    def exists(self, name: str) -> bool:
        """Whether a namespace exists; the default namespace "" always does."""
        return name == "" or name in self.by_name

    def children(self, name: str) -> list[str]:
        """Full names of the namespaces directly below `name` ("" = the top level), sorted."""
        prefix = f"{name}{NAMESPACE_SEPARATOR}" if name else ""
        return sorted(
            n
            for n in self.by_name
            if n.startswith(prefix) and NAMESPACE_SEPARATOR not in n[len(prefix) :]
        )

    def descendants(self, name: str) -> list[str]:
        """Full names of every namespace below `name` ("" = all of them), sorted."""
        if not name:
            return sorted(self.by_name)
        prefix = name + NAMESPACE_SEPARATOR
        return sorted(n for n in self.by_name if n.startswith(prefix))

    def ordered(self) -> list[NamespaceRecord]:
        """Every NamespaceRecord, parents before children (then by name)."""
        names = sorted(self.by_name, key=lambda n: (n.count(NAMESPACE_SEPARATOR), n))
        return [self.by_name[name] for name in names]

    def write(self) -> Iterator[Record]:
        """NamespaceRecords, parents before children."""
        yield from self.ordered()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicImage:
    """One topic: its id, name, namespace and partitions (ids 0..n-1, in order)."""

    topic_id: Uuid
    name: str
    namespace: str = ""
    partitions: tuple[PartitionRecord, ...] = ()
    pending_deletion: DeleteTopicPartitionsRecord | None = None
    """A partition reduction waiting for its purge time, if any."""

    @property
    def qualified_name(self) -> str:
        """`<namespace>:<topic>` (just the name in the default namespace)."""
        return qualified_name(self.namespace, self.name)

    @property
    def replication_factor(self) -> int:
        """The replication factor Kafka's `kafka-topics --describe` shows (0 without partitions).

        The first partition's replica count; during a reassignment its replicas minus those
        being added (TopicCommand's `getReplicationFactor`), so a move 1,2,3 -> 2,3,4 shows 3
        while the replicas are 2,3,4,1.
        """
        if not self.partitions:
            return 0
        first = self.partitions[0]
        return len(first.replicas) - len(first.adding_replicas)

    def write(self) -> Iterator[Record]:
        """The TopicRecord, the PartitionRecords and any pending deletion."""
        yield TopicRecord(name=self.name, topic_id=self.topic_id, namespace=self.namespace)
        yield from self.partitions
        if self.pending_deletion is not None:
            yield self.pending_deletion


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicsImage:
    """Live topics by id and by qualified name, and the partitions each broker holds.

    `by_broker` is derived from `by_id` (replay records its changes delta by delta and
    builds it when read, `replay.broker_index`): it is what makes fencing a broker cost what
    the broker holds, not what the cluster holds. A broker leads and is in the ISR only of
    partitions it is a replica of, so this one index serves all three questions.
    """

    by_id: Map[Uuid, TopicImage] = field(default_factory=Map)
    by_name: Map[str, Uuid] = field(default_factory=Map)
    replica_index: BrokerIndex = field(default=EMPTY_INDEX, compare=False, repr=False)
    """`by_broker`, built or still a chain of changes (`replay.broker_index`); derived from
    `by_id`, so two images equal in their topics are equal whatever its state."""

    @property
    def by_broker(self) -> Map[int, BrokerPartitions]:
        """Every broker id that is a replica of some partition: its partitions, by topic."""
        return self.replica_index.map()

    def __len__(self) -> int:
        return len(self.by_id)

    def get(self, topic_id: Uuid) -> TopicImage | None:
        """A topic by id, or None."""
        return self.by_id.get(topic_id)

    def get_by_name(self, qualified: str) -> TopicImage | None:
        """A topic by qualified name, or None."""
        topic_id = self.by_name.get(qualified)
        return None if topic_id is None else self.by_id[topic_id]

    def sorted(self) -> list[TopicImage]:
        """Every topic, by qualified name."""
        return [self.by_id[self.by_name[n]] for n in sorted(self.by_name)]

    def partition_count(self) -> int:
        """Partitions of all topics together."""
        return sum(len(t.partitions) for t in self.by_id.values())

    def partitions_of(self, broker_id: int) -> list[tuple[TopicImage, PartitionRecord]]:
        """Every partition a broker is a replica of, by topic id then partition id.

        Costs O(the broker's partitions), whatever the size of the cluster.
        """
        held = self.by_broker.get(broker_id)
        if held is None:
            return []
        by_id = self.by_id
        found: list[tuple[TopicImage, PartitionRecord]] = []
        for topic_id in sorted(held, key=_uuid_bytes):
            topic = by_id[topic_id]
            partitions = topic.partitions
            found.extend((topic, partitions[p]) for p in held[topic_id])
        return found

    def write(self) -> Iterator[Record]:
        """Each topic's records, topics by qualified name."""
        for topic in self.sorted():
            yield from topic.write()


def _uuid_bytes(topic_id: Uuid) -> bytes:
    return topic_id.bytes


def broker_index(by_id: Map[Uuid, TopicImage]) -> Map[int, BrokerPartitions]:
    """`TopicsImage.by_broker` built from the topics, from scratch (tests compare with it)."""
    held: dict[int, dict[Uuid, tuple[int, ...]]] = {}
    for topic_id, topic in by_id.items():
        for broker_id, ids in replica_partitions(topic.partitions).items():
            found = held.get(broker_id)
            if found is None:
                held[broker_id] = found = {}
            found[topic_id] = tuple(ids)
    return Map({broker_id: Map(topics) for broker_id, topics in held.items()})


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigsImage:
    """Config overrides per resource (topics by qualified name, "" broker = cluster default)."""

    resources: Map[ConfigKey, Map[str, str]] = field(default_factory=Map)

    def get(self, resource_type: ConfigResourceType, name: str) -> Map[str, str]:
        """The overrides of one resource (empty if none)."""
        return self.resources.get((resource_type, name), _EMPTY_CONFIG)

    def cluster(self) -> Map[str, str]:
        """Cluster-wide defaults: the configs of the broker resource named ""."""
        return self.get(ConfigResourceType.BROKER, "")

    def write(self) -> Iterator[Record]:
        """One ConfigRecord per key, resources and keys sorted."""
        for key in sorted(self.resources):
            yield from self.write_resource(key[0], key[1], self.resources[key])

    @staticmethod
    def write_resource(
        resource_type: ConfigResourceType, resource_name: str, values: Map[str, str]
    ) -> Iterator[Record]:
        """One resource's ConfigRecords, keys sorted."""
        for name in sorted(values):
            yield ConfigRecord(
                resource_type=resource_type,
                resource_name=resource_name,
                name=name,
                value=values[name],
            )


_EMPTY_CONFIG: Map[str, str] = Map()


@dataclass(frozen=True, slots=True, kw_only=True)
class AclsImage:
    """Every ACL, by id, as the record that created it."""

    by_id: Map[Uuid, AccessControlEntryRecord] = field(default_factory=Map)

    def get(self, acl_id: Uuid) -> AccessControlEntryRecord | None:
        """An ACL by id, or None."""
        return self.by_id.get(acl_id)

    def sorted(self) -> list[AccessControlEntryRecord]:
        """Every ACL, in a deterministic order (resource, principal, operation, id)."""
        return sorted(
            self.by_id.values(),
            key=lambda a: (
                a.resource_type,
                a.resource_name,
                a.pattern_type,
                a.principal,
                a.host,
                a.operation,
                a.permission_type,
                a.id.bytes,
            ),
        )

    def write(self) -> Iterator[Record]:
        """One AccessControlEntryRecord per ACL."""
        yield from self.sorted()


ScramKey = tuple[str, ScramMechanism]
"""A SCRAM credential's key: the user name and the mechanism."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramImage:
    """Every user's SCRAM credentials, one per (user, mechanism)."""

    credentials: Map[ScramKey, UserScramCredentialRecord] = field(default_factory=Map)

    def get(self, name: str, mechanism: ScramMechanism) -> UserScramCredentialRecord | None:
        """A user's credential for a mechanism, or None."""
        return self.credentials.get((name, mechanism))

    def users(self) -> list[str]:
        """Names of the users with at least one credential, sorted."""
        return sorted({name for name, _ in self.credentials})

    def write(self) -> Iterator[Record]:
        """One UserScramCredentialRecord per credential, by user then mechanism."""
        for key in sorted(self.credentials):
            yield self.credentials[key]


MAX_CLIENT_WRITES = 1000
"""The most client ids whose last idempotent write the image keeps (docs/replication.md).

A new client id beyond it evicts the client whose last write is the oldest. It is a constant,
not a setting: every node must replay the same log into the same table, so the bound is part
of what the log means (a change of it is a change of replay, like a new record version)."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ClientWritesImage:
    """The last idempotent write of each recent client: a retry of it is answered from here.

    `by_client` maps a client id to (serial, its last `ClientWriteRecord`); `serials` maps
    serials back to client ids, oldest first, so eviction of the oldest costs O(log n). The
    serials themselves are bookkeeping: two images with the same clients in the same order
    are equal whatever their serials (a snapshot replays them renumbered).
    """

    by_client: Map[Uuid, tuple[int, ClientWriteRecord]] = field(default_factory=Map)
    serials: Map[int, Uuid] = field(default_factory=Map)
    oldest: int = 0
    """No serial below it is live (where the eviction scan starts)."""
    next_serial: int = 0

    def get(self, client_id: Uuid) -> ClientWriteRecord | None:
        """A client's last write, or None (never seen, or evicted)."""
        found = self.by_client.get(client_id)
        return None if found is None else found[1]

    def __len__(self) -> int:
        return len(self.by_client)

    def ordered(self) -> list[ClientWriteRecord]:
        """Every client's last write, oldest first (the eviction order)."""
        return [self.by_client[self.serials[s]][1] for s in sorted(self.serials)]

    def with_writes(
        self, writes: list[ClientWriteRecord], limit: int = MAX_CLIENT_WRITES
    ) -> ClientWritesImage:
        """The table after `writes`, applied in order.

        Each replaces its client's entry and becomes the newest; beyond `limit` clients, the
        oldest are evicted.
        """
        oldest, serial = self.oldest, self.next_serial
        with self.by_client.mutate() as by_client, self.serials.mutate() as serials:
            for write in writes:
                known = by_client.get(write.client_id)
                if known is not None:
                    del serials[known[0]]
                by_client[write.client_id] = (serial, write)
                serials[serial] = write.client_id
                serial += 1
                while len(by_client) > limit:
                    evicted = serials.pop(oldest, None)
                    if evicted is not None:
                        del by_client[evicted]
                    oldest += 1
            finished = by_client.finish(), serials.finish()
        return ClientWritesImage(
            by_client=finished[0], serials=finished[1], oldest=oldest, next_serial=serial
        )

    def write(self) -> Iterator[Record]:
        """Every client's last write, oldest first: replayed, they rebuild the same order."""
        yield from self.ordered()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ClientWritesImage):
            return NotImplemented
        return self is other or (
            len(self.by_client) == len(other.by_client) and self.ordered() == other.ordered()
        )

    __hash__ = None  # type: ignore[assignment]  # equal by content, and mutable-looking


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataImage:
    """The whole metadata state after the entry named by `provenance`."""

    provenance: Provenance = EMPTY_PROVENANCE
    features: FeaturesImage = field(default_factory=FeaturesImage)
    cluster: ClusterImage = field(default_factory=ClusterImage)
    namespaces: NamespacesImage = field(default_factory=NamespacesImage)
    topics: TopicsImage = field(default_factory=TopicsImage)
    configs: ConfigsImage = field(default_factory=ConfigsImage)
    acls: AclsImage = field(default_factory=AclsImage)
    scram: ScramImage = field(default_factory=ScramImage)
    client_writes: ClientWritesImage = field(default_factory=ClientWritesImage)
    """The last idempotent write of recent clients (a retried write is answered from it)."""

    def with_timestamp(self, timestamp: int) -> MetadataImage:
        """The same image with its provenance's timestamp set (a new field belongs here too).

        What `dataclasses.replace` does, in half its time: the service calls it on every commit.
        """
        provenance = self.provenance
        return new_image(
            provenance=new_provenance(provenance.offset, provenance.epoch, timestamp),
            features=self.features,
            cluster=self.cluster,
            namespaces=self.namespaces,
            topics=self.topics,
            configs=self.configs,
            acls=self.acls,
            scram=self.scram,
            client_writes=self.client_writes,
        )

    @property
    def is_empty(self) -> bool:
        """Whether the image holds nothing at all."""
        return not (
            self.features.levels
            or self.cluster.brokers
            or self.namespaces.by_name
            or self.topics.by_id
            or self.configs.resources
            or self.acls.by_id
            or self.scram.credentials
            or self.client_writes.by_client
        )

    def write(self) -> Iterator[Record]:
        """The records that rebuild this image from empty (a snapshot's content).

        Features come first (`metadata.version` leads), then brokers, namespaces (parents
        first), topics with their partitions, configs, SCRAM credentials, ACLs and the
        clients' last idempotent writes (oldest first). The order is deterministic, so two
        equal images write identical record sequences.
        """
        yield from self.features.write()
        yield from self.cluster.write()
        yield from self.namespaces.write()
        yield from self.topics.write()
        yield from self.configs.write()
        yield from self.scram.write()
        yield from self.acls.write()
        yield from self.client_writes.write()

    def same_state(self, other: MetadataImage) -> bool:
        """Whether two images hold the same state, wherever they come from in the log."""
        return (
            self.features == other.features
            and self.cluster == other.cluster
            and self.namespaces == other.namespaces
            and self.topics == other.topics
            and self.configs == other.configs
            and self.acls == other.acls
            and self.scram == other.scram
            and self.client_writes == other.client_writes
        )


EMPTY_IMAGE = MetadataImage()
"""The image before the first entry."""

# Images are built on every command (the working image) and commit (its timestamp): these
# constructors store through the slots, skipping the frozen dataclass's `__setattr__` per
# field. Every field is passed; callers pass checked values, as to `__init__`.
new_image: Callable[..., MetadataImage] = preset_constructor(
    MetadataImage, tuple(f.name for f in fields(MetadataImage))
)
"""`MetadataImage(...)` with every field given (by keyword), at about half the cost."""
new_provenance: Callable[[int, int, int], Provenance] = preset_constructor(
    Provenance, ("offset", "epoch", "timestamp")
)
"""`Provenance(offset=, epoch=, timestamp=)`, positionally."""
new_topics_image: Callable[..., TopicsImage] = preset_constructor(
    TopicsImage, ("by_id", "by_name", "replica_index")
)
"""`TopicsImage(by_id=, by_name=, replica_index=)`."""
new_topic_image: Callable[..., TopicImage] = preset_constructor(
    TopicImage, ("topic_id", "name", "namespace", "partitions", "pending_deletion")
)
"""`TopicImage(topic_id=, name=, namespace=, partitions=, pending_deletion=)`."""
