"""The metadata record types: one frozen dataclass per type, named and numbered as in KRaft.

`RECORD_TYPE` values follow Kafka's `MetadataRecordType` ids where Kafka has the record, and
start at 100 for records Kafka does not have. They are never reused or renumbered: stored data is
keyed by them (and by `VERSION`), never by a Python class path.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

from records.uuids import Uuid


class Mode(IntEnum):
    """Read/write mode of a partition; partitions being deleted leave READ_WRITE."""

    READ_WRITE = 0
    READ_ONLY = 1
    NONE = -1


class ConfigResourceType(IntEnum):
    """What a config applies to; values are Kafka's `ConfigResource.Type` ids."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    NAMESPACE = 64


class FencingChange(IntEnum):
    """Kafka's `BrokerRegistrationFencingChange`: how a change record alters fencing."""

    UNFENCE = -1
    NONE = 0
    FENCE = 1


class ControlledShutdownChange(IntEnum):
    """Kafka's `BrokerRegistrationInControlledShutdownChange`."""

    NONE = 0
    IN_CONTROLLED_SHUTDOWN = 1


class ResourceType(IntEnum):
    """What an ACL applies to; values are Kafka's `ResourceType` ids, plus NAMESPACE (ours).

    NAMESPACE uses 64, the code this product already gives namespaces as config resources
    (`ConfigResourceType.NAMESPACE`); Kafka has no namespaces and does not use it. UNKNOWN and
    ANY occur only in filters, never in a stored ACL.
    """

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7
    NAMESPACE = 64


class PatternType(IntEnum):
    """How an ACL's resource name matches; Kafka's `PatternType` ids.

    A stored ACL is LITERAL or PREFIXED; UNKNOWN, ANY and MATCH occur only in filters.
    """

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    """An operation an ACL allows or denies; Kafka's `AclOperation` ids.

    UNKNOWN and ANY occur only in filters, never in a stored ACL.
    """

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    """Whether an ACL allows or denies; Kafka's `AclPermissionType` ids.

    UNKNOWN and ANY occur only in filters, never in a stored ACL.
    """

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class ScramMechanism(IntEnum):
    """A SCRAM mechanism; Kafka's `ScramMechanism` ids (UNKNOWN never in a stored credential)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL mechanism name: SCRAM-SHA-256 or SCRAM-SHA-512."""
        return self.name.replace("_", "-")


LEADER_UNCHANGED = -2
"""`PartitionChangeRecord.leader` value meaning "the leader does not change" (Kafka's -2)."""

NO_LEADER = -1
"""Leader value meaning "the partition has no leader" (Kafka's -1)."""


class Record:
    """Base of every metadata record type."""

    __slots__ = ()
    RECORD_TYPE: ClassVar[int]
    VERSION: ClassVar[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerEndpoint:
    """One listener of a broker."""

    name: str
    host: str
    port: int
    security_protocol: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerFeature:
    """A feature range a broker supports."""

    name: str
    min_supported_version: int
    max_supported_version: int


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureLevelRecord(Record):
    """Sets a cluster-wide feature level; `metadata.version` is first in every log and snapshot."""

    RECORD_TYPE: ClassVar[int] = 12
    VERSION: ClassVar[int] = 0
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRecord(Record):
    """A broker registered (or re-registered with a new incarnation)."""

    RECORD_TYPE: ClassVar[int] = 0
    VERSION: ClassVar[int] = 0
    broker_id: int
    incarnation_id: Uuid
    broker_epoch: int
    end_points: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerRecord(Record):
    """A broker was removed from the cluster."""

    RECORD_TYPE: ClassVar[int] = 1
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationChangeRecord(Record):
    """A broker was fenced, unfenced, or entered controlled shutdown."""

    RECORD_TYPE: ClassVar[int] = 17
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int
    fenced: FencingChange = FencingChange.NONE
    in_controlled_shutdown: ControlledShutdownChange = ControlledShutdownChange.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceRecord(Record):
    """A namespace was created; `name` is its full name, tiers separated by ':'."""

    RECORD_TYPE: ClassVar[int] = 100
    VERSION: ClassVar[int] = 0
    namespace_id: Uuid
    name: str
    parent_id: Uuid | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveNamespaceRecord(Record):
    """A namespace was deleted."""

    RECORD_TYPE: ClassVar[int] = 101
    VERSION: ClassVar[int] = 0
    namespace_id: Uuid


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord(Record):
    """A topic was created with a new topic id (KIP-516) in a namespace ("" = default)."""

    RECORD_TYPE: ClassVar[int] = 2
    VERSION: ClassVar[int] = 0
    name: str
    topic_id: Uuid
    namespace: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRecord(Record):
    """The full state of one partition of a topic."""

    RECORD_TYPE: ClassVar[int] = 3
    VERSION: ClassVar[int] = 0
    partition_id: int
    topic_id: Uuid
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    leader: int = NO_LEADER
    leader_epoch: int = 0
    partition_epoch: int = 0
    mode: Mode = Mode.READ_WRITE


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionChangeRecord(Record):
    """A sparse change to a partition: None (and leader -2) mean "unchanged".

    `leader_epoch` and `partition_epoch` left as None are derived on replay as Kafka does
    (leader epoch + 1 when the leader changes, partition epoch + 1 on every change).
    """

    RECORD_TYPE: ClassVar[int] = 5
    VERSION: ClassVar[int] = 0
    partition_id: int
    topic_id: Uuid
    isr: tuple[int, ...] | None = None
    leader: int = LEADER_UNCHANGED
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    leader_epoch: int | None = None
    partition_epoch: int | None = None
    mode: Mode | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveTopicRecord(Record):
    """A topic (and all its partitions) was deleted."""

    RECORD_TYPE: ClassVar[int] = 9
    VERSION: ClassVar[int] = 0
    topic_id: Uuid


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicPartitionsRecord(Record):
    """A topic's partition count was reduced; partitions with id >= `partition_count` go."""

    RECORD_TYPE: ClassVar[int] = 102
    VERSION: ClassVar[int] = 0
    topic_id: Uuid
    partition_count: int
    delete_after_ms: int
    created_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRecord(Record):
    """A config key was set on a resource; `value` None deletes the key."""

    RECORD_TYPE: ClassVar[int] = 4
    VERSION: ClassVar[int] = 0
    resource_type: ConfigResourceType
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveTopicRecord(Record):
    """A topic moved to another namespace; it keeps its topic id, partitions and configs."""

    RECORD_TYPE: ClassVar[int] = 103
    VERSION: ClassVar[int] = 0
    topic_id: Uuid
    namespace: str
    """Full name of the namespace the topic moves to ("" = the default namespace)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeTopicPartitionsRecord(Record):
    """A pending partition deletion completed: partitions with id >= `partition_count` are gone.

    Follows the topic's `DeleteTopicPartitionsRecord` (same count) once every partition it
    removes is in mode NONE; replay then drops them and clears the pending deletion.
    """

    RECORD_TYPE: ClassVar[int] = 104
    VERSION: ClassVar[int] = 0
    topic_id: Uuid
    partition_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelTopicPartitionsDeletionRecord(Record):
    """A pending partition deletion was cancelled: the topic keeps all its partitions.

    Follows the topic's `DeleteTopicPartitionsRecord` (same count) while none of the partitions
    it would remove is in mode NONE, after the changes that make them READ_WRITE again; replay
    clears the pending deletion.
    """

    RECORD_TYPE: ClassVar[int] = 105
    VERSION: ClassVar[int] = 0
    topic_id: Uuid
    partition_count: int
    """The count of the pending deletion this cancels (a check that it is the one meant)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UserScramCredentialRecord(Record):
    """A user's SCRAM credential for one mechanism was set (KRaft's record of the same name).

    Holds what RFC 5802 lets a server keep, never the password: salt, StoredKey =
    H(ClientKey), ServerKey and the iteration count. A later record for the same user and
    mechanism replaces it.
    """

    RECORD_TYPE: ClassVar[int] = 11
    VERSION: ClassVar[int] = 0
    name: str
    """The user name (the principal is `User:<name>`)."""
    mechanism: ScramMechanism
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveUserScramCredentialRecord(Record):
    """A user's SCRAM credential for one mechanism was removed."""

    RECORD_TYPE: ClassVar[int] = 22
    VERSION: ClassVar[int] = 0
    name: str
    mechanism: ScramMechanism


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessControlEntryRecord(Record):
    """An ACL was created (KRaft's record of the same name): who may or may not do what where.

    `id` names the ACL for its removal; the other fields are Kafka's `AclBinding`, with
    resource type NAMESPACE (ours) for namespace ACLs.
    """

    RECORD_TYPE: ClassVar[int] = 23
    VERSION: ClassVar[int] = 0
    id: Uuid
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    """`User:<name>` or `User:*`."""
    host: str
    """The client's address, or `*` for any."""
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveAccessControlEntryRecord(Record):
    """An ACL was removed."""

    RECORD_TYPE: ClassVar[int] = 24
    VERSION: ClassVar[int] = 0
    id: Uuid


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderChangeRecord(Record):
    """A controller quorum leader took office: KRaft's LeaderChangeMessage control record.

    The new leader writes it as the first entry of its epoch (the entry's epoch is the new
    one). It changes no metadata: replay only moves the image's provenance past it.
    """

    RECORD_TYPE: ClassVar[int] = 106
    VERSION: ClassVar[int] = 0
    leader_id: int
    """Node id of the new leader."""
    voters: tuple[int, ...]
    """Node ids of the voters of the quorum (KRaft's `Voters`)."""
    granting_voters: tuple[int, ...]
    """Node ids of the voters that granted the leader their vote (KRaft's `GrantingVoters`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientWriteRecord(Record):
    """A client's idempotent write was applied: its (client id, sequence) and its answer.

    Written in the same atomic batch as the write's own records, so a retry of the write (the
    same client id and sequence, after its answer was lost) finds it in the image on any node
    and is answered with `response` instead of being applied again (docs/replication.md).
    """

    RECORD_TYPE: ClassVar[int] = 107
    VERSION: ClassVar[int] = 0
    client_id: Uuid
    """The client instance's random id (one per AdminClient)."""
    sequence: int
    """The write's sequence number within that client (0 and up, one per write)."""
    principal: str | None
    """Who made the write: only the same principal is answered from it."""
    api_key: int
    """The API the write came through (Kafka's key, or a private one): how `response` reads."""
    response: bytes
    """The write's answer as the API stores it (opaque to replay)."""


RECORD_CLASSES: tuple[type[Record], ...] = (
    FeatureLevelRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
    BrokerRegistrationChangeRecord,
    NamespaceRecord,
    RemoveNamespaceRecord,
    TopicRecord,
    PartitionRecord,
    PartitionChangeRecord,
    RemoveTopicRecord,
    DeleteTopicPartitionsRecord,
    ConfigRecord,
    MoveTopicRecord,
    PurgeTopicPartitionsRecord,
    CancelTopicPartitionsDeletionRecord,
    UserScramCredentialRecord,
    RemoveUserScramCredentialRecord,
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    LeaderChangeRecord,
    ClientWriteRecord,
)
"""Every record type this code writes, in a fixed order (the order of the Avro union).

New types go at the end, so the union branches of the older types keep their positions."""
