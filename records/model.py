"""The metadata record types: one frozen dataclass per type, named and numbered as in KRaft.

Each class is the one declaration of its record type: `records.schemas` derives its Avro
schema (record doc from `AVRO_DOC`, field types and docs from the annotations, see
`records.fields`, defaults from the dataclass defaults), and from that schema the codec and
the JSON form. Docs and types once written are never edited (`tests/data/record-schemas.txt`
pins them): a new field gets a default, a changed meaning a new `VERSION` and an upcaster.

`RECORD_TYPE` values follow Kafka's `MetadataRecordType` ids where Kafka has the record, and
start at 100 for records Kafka does not have. They are never reused or renumbered: stored data is
keyed by them (and by `VERSION`), never by a Python class path.
"""

# No `from __future__ import annotations`: the field annotations are the declarations that
# records.schemas reads, and evaluated here with the class they cost less than compiled later
# from strings (every type they name is defined above its first use).
from dataclasses import dataclass, fields
from enum import IntEnum
from typing import Annotated, ClassVar

from records.fields import Doc, Int32, Int64
from records.uuids import Uuid


class Mode(IntEnum):
    """Read/write mode of a partition; partitions being deleted leave READ_WRITE."""

    READ_WRITE = 0
    READ_ONLY = 1
    NONE = -1


_MODE_NAMES: dict[int, str] = {mode: mode.name for mode in Mode}


def mode_name(mode: int) -> str:
    """A partition mode's name, `Mode(mode).name` in one dict lookup (ValueError as `Mode`).

    Views, diffs and timelines name the mode of every partition they show, and Enum's call
    is most of what that cost.
    """
    name = _MODE_NAMES.get(mode)
    return name if name is not None else Mode(mode).name


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
    AVRO_DOC: ClassVar[str]
    """The doc of the record's Avro schema (written in every segment header, so never edited)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerEndpoint:
    """One listener of a broker."""

    AVRO_DOC: ClassVar[str] = "One listener of a broker."
    name: Annotated[str, Doc("Listener name, e.g. PLAINTEXT.")]
    host: Annotated[str, Doc("Host name or address clients connect to.")]
    port: Annotated[Int32, Doc("TCP port of the listener.")]
    security_protocol: Annotated[Int32, Doc("Kafka SecurityProtocol id (0 = PLAINTEXT).")] = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerFeature:
    """A feature range a broker supports."""

    AVRO_DOC: ClassVar[str] = "A feature version range a broker supports."
    name: Annotated[str, Doc("Feature name, e.g. metadata.version.")]
    min_supported_version: Annotated[Int32, Doc("Lowest supported level.")]
    max_supported_version: Annotated[Int32, Doc("Highest supported level.")]


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureLevelRecord(Record):
    """Sets a cluster-wide feature level; `metadata.version` is first in every log and snapshot."""

    RECORD_TYPE: ClassVar[int] = 12
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "Sets a cluster-wide feature level."
    name: Annotated[str, Doc("Feature name, e.g. metadata.version.")]
    feature_level: Annotated[Int32, Doc("The level now in force.")]


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBrokerRecord(Record):
    """A broker registered (or re-registered with a new incarnation)."""

    RECORD_TYPE: ClassVar[int] = 0
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "A broker registered, or re-registered with a new incarnation."
    broker_id: Annotated[Int32, Doc("The broker id.")]
    incarnation_id: Annotated[Uuid, Doc("Changes every time the broker process restarts.")]
    broker_epoch: Annotated[Int64, Doc("Epoch of this registration (its offset).")]
    end_points: Annotated[tuple[BrokerEndpoint, ...], Doc("The broker's listeners.")] = ()
    features: Annotated[tuple[BrokerFeature, ...], Doc("Feature ranges the broker supports.")] = ()
    rack: Annotated[str | None, Doc("Rack of the broker, or null.")] = None
    fenced: Annotated[bool, Doc("True if the broker starts fenced (cannot lead).")] = True
    in_controlled_shutdown: Annotated[
        bool, Doc("True if the broker registers while shutting down.")
    ] = False


@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBrokerRecord(Record):
    """A broker was removed from the cluster."""

    RECORD_TYPE: ClassVar[int] = 1
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "A broker was removed from the cluster."
    broker_id: Annotated[Int32, Doc("The broker id.")]
    broker_epoch: Annotated[Int64, Doc("Epoch of the removed registration.")]


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistrationChangeRecord(Record):
    """A broker was fenced, unfenced, or entered controlled shutdown."""

    RECORD_TYPE: ClassVar[int] = 17
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "A broker was fenced, unfenced, or entered controlled shutdown."
    broker_id: Annotated[Int32, Doc("The broker id.")]
    broker_epoch: Annotated[Int64, Doc("Epoch of the registration changed.")]
    fenced: Annotated[FencingChange, Doc("-1 unfence, 0 no change, 1 fence.")] = FencingChange.NONE
    in_controlled_shutdown: Annotated[
        ControlledShutdownChange, Doc("0 no change, 1 the broker entered controlled shutdown.")
    ] = ControlledShutdownChange.NONE


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceRecord(Record):
    """A namespace was created; `name` is its full name, tiers separated by ':'."""

    RECORD_TYPE: ClassVar[int] = 100
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "A namespace was created."
    namespace_id: Annotated[Uuid, Doc("Namespace id, unique over the life of the cluster.")]
    name: Annotated[str, Doc("Full name, tiers separated by ':'.")]
    parent_id: Annotated[
        Uuid | None,
        Doc("Id of the parent namespace; null for a child of the default namespace."),
    ] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveNamespaceRecord(Record):
    """A namespace was deleted."""

    RECORD_TYPE: ClassVar[int] = 101
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "A namespace was deleted."
    namespace_id: Annotated[Uuid, Doc("Id of the deleted namespace.")]


_TOPIC_ID = Doc("Topic id (KIP-516), unique over the life of the cluster.")


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord(Record):
    """A topic was created with a new topic id (KIP-516) in a namespace ("" = default)."""

    RECORD_TYPE: ClassVar[int] = 2
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "A topic was created."
    name: Annotated[str, Doc("Topic name, without namespace.")]
    topic_id: Annotated[Uuid, _TOPIC_ID]
    namespace: Annotated[
        str, Doc("Full name of the topic's namespace; empty for the default namespace.")
    ] = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRecord(Record):
    """The full state of one partition of a topic."""

    RECORD_TYPE: ClassVar[int] = 3
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "The full state of one partition."
    partition_id: Annotated[Int32, Doc("Partition index within the topic.")]
    topic_id: Annotated[Uuid, _TOPIC_ID]
    replicas: Annotated[tuple[Int32, ...], Doc("Replica broker ids, preferred leader first.")]
    isr: Annotated[tuple[Int32, ...], Doc("In-sync replica broker ids.")]
    removing_replicas: Annotated[
        tuple[Int32, ...], Doc("Replicas being removed by a reassignment.")
    ] = ()
    adding_replicas: Annotated[
        tuple[Int32, ...], Doc("Replicas being added by a reassignment.")
    ] = ()
    leader: Annotated[Int32, Doc("Leader broker id; -1 if none.")] = NO_LEADER
    leader_epoch: Annotated[Int32, Doc("Epoch of the leader.")] = 0
    partition_epoch: Annotated[Int32, Doc("Bumped on every change of the partition.")] = 0
    mode: Annotated[Mode, Doc("0 READ_WRITE, 1 READ_ONLY, -1 NONE (being deleted).")] = (
        Mode.READ_WRITE
    )


PARTITION_FIELDS = tuple(field.name for field in fields(PartitionRecord))
"""A PartitionRecord's fields in declaration order, the one list of them: what replay builds a
partition from, the snapshot tables and the audit's partition columns follow it."""

PARTITION_STATE_FIELDS = tuple(
    name for name in PARTITION_FIELDS if name not in {"partition_id", "topic_id"}
)
"""A PartitionRecord's fields past its key (the topic id and the partition id), in order."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionChangeRecord(Record):
    """A sparse change to a partition: None (and leader -2) mean "unchanged".

    `leader_epoch` and `partition_epoch` left as None are derived on replay as Kafka does
    (leader epoch + 1 when the leader changes, partition epoch + 1 on every change).
    """

    RECORD_TYPE: ClassVar[int] = 5
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "A sparse change to a partition; absent (null) fields are unchanged."
    partition_id: Annotated[Int32, Doc("Partition index within the topic.")]
    topic_id: Annotated[Uuid, _TOPIC_ID]
    isr: Annotated[tuple[Int32, ...] | None, Doc("New in-sync replicas. Null means unchanged.")] = (
        None
    )
    leader: Annotated[Int32, Doc("New leader; -1 no leader, -2 unchanged.")] = LEADER_UNCHANGED
    replicas: Annotated[tuple[Int32, ...] | None, Doc("New replicas. Null means unchanged.")] = None
    removing_replicas: Annotated[
        tuple[Int32, ...] | None, Doc("New removing replicas. Null means unchanged.")
    ] = None
    adding_replicas: Annotated[
        tuple[Int32, ...] | None, Doc("New adding replicas. Null means unchanged.")
    ] = None
    leader_epoch: Annotated[
        Int32 | None, Doc("New leader epoch; null derives it (+1 when the leader changes).")
    ] = None
    partition_epoch: Annotated[
        Int32 | None, Doc("New partition epoch; null derives it (+1 on every change).")
    ] = None
    mode: Annotated[
        Mode | None, Doc("New mode (0 READ_WRITE, 1 READ_ONLY, -1 NONE); null means unchanged.")
    ] = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveTopicRecord(Record):
    """A topic (and all its partitions) was deleted."""

    RECORD_TYPE: ClassVar[int] = 9
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "A topic and all its partitions were deleted."
    topic_id: Annotated[Uuid, Doc("Id of the deleted topic.")]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicPartitionsRecord(Record):
    """A topic's partition count was reduced; partitions with id >= `partition_count` go."""

    RECORD_TYPE: ClassVar[int] = 102
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = (
        "A topic's partition count was reduced; partitions with id >= partition_count go."
    )
    topic_id: Annotated[Uuid, _TOPIC_ID]
    partition_count: Annotated[Int32, Doc("The new partition count.")]
    delete_after_ms: Annotated[
        Int64, Doc("Epoch ms after which the data may be purged; 0 = immediately.")
    ]
    created_ms: Annotated[Int64, Doc("Epoch ms when the reduction began.")]


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRecord(Record):
    """A config key was set on a resource; `value` None deletes the key."""

    RECORD_TYPE: ClassVar[int] = 4
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "A config key was set on a resource; a null value deletes the key."
    resource_type: Annotated[
        ConfigResourceType, Doc("2 topic, 4 broker (name '' = cluster default), 64 namespace.")
    ]
    resource_name: Annotated[str, Doc("Name of the resource.")]
    name: Annotated[str, Doc("Config key, e.g. retention.ms.")]
    value: Annotated[str | None, Doc("New value; null deletes the key.")]


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveTopicRecord(Record):
    """A topic moved to another namespace; it keeps its topic id, partitions and configs."""

    RECORD_TYPE: ClassVar[int] = 103
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = (
        "A topic moved to another namespace, keeping its id, partitions and configs."
    )
    topic_id: Annotated[Uuid, _TOPIC_ID]
    namespace: Annotated[
        str, Doc("Full name of the namespace the topic moves to; empty for the default one.")
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeTopicPartitionsRecord(Record):
    """A pending partition deletion completed: partitions with id >= `partition_count` are gone.

    Follows the topic's `DeleteTopicPartitionsRecord` (same count) once every partition it
    removes is in mode NONE; replay then drops them and clears the pending deletion.
    """

    RECORD_TYPE: ClassVar[int] = 104
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = (
        "A pending partition deletion completed: partitions with id >= partition_count are "
        "removed from the topic."
    )
    topic_id: Annotated[Uuid, _TOPIC_ID]
    partition_count: Annotated[
        Int32, Doc("The topic's partition count from now on (that of its pending deletion).")
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelTopicPartitionsDeletionRecord(Record):
    """A pending partition deletion was cancelled: the topic keeps all its partitions.

    Follows the topic's `DeleteTopicPartitionsRecord` (same count) while none of the partitions
    it would remove is in mode NONE, after the changes that make them READ_WRITE again; replay
    clears the pending deletion. `partition_count` checks that it cancels the deletion meant.
    """

    RECORD_TYPE: ClassVar[int] = 105
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = (
        "A pending partition deletion was cancelled: the topic keeps all its partitions."
    )
    topic_id: Annotated[Uuid, _TOPIC_ID]
    partition_count: Annotated[
        Int32, Doc("The partition count of the pending deletion this cancels.")
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class UserScramCredentialRecord(Record):
    """A user's SCRAM credential for one mechanism was set (KRaft's record of the same name).

    Holds what RFC 5802 lets a server keep, never the password: salt, StoredKey =
    H(ClientKey), ServerKey and the iteration count. A later record for the same user and
    mechanism replaces it.
    """

    RECORD_TYPE: ClassVar[int] = 11
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = (
        "A user's SCRAM credential for one mechanism was set (RFC 5802; never a password)."
    )
    name: Annotated[str, Doc("User name; the principal is User:<name>.")]
    mechanism: Annotated[ScramMechanism, Doc("1 SCRAM-SHA-256, 2 SCRAM-SHA-512.")]
    salt: Annotated[bytes, Doc("The salt of the salted password.")]
    stored_key: Annotated[bytes, Doc("StoredKey = H(ClientKey).")]
    server_key: Annotated[bytes, Doc("ServerKey = HMAC(SaltedPassword, ...).")]
    iterations: Annotated[Int32, Doc("PBKDF2 iterations (at least 4096).")]


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveUserScramCredentialRecord(Record):
    """A user's SCRAM credential for one mechanism was removed."""

    RECORD_TYPE: ClassVar[int] = 22
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "A user's SCRAM credential for one mechanism was removed."
    name: Annotated[str, Doc("User name.")]
    mechanism: Annotated[ScramMechanism, Doc("1 SCRAM-SHA-256, 2 SCRAM-SHA-512.")]


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessControlEntryRecord(Record):
    """An ACL was created (KRaft's record of the same name): who may or may not do what where.

    `id` names the ACL for its removal; the other fields are Kafka's `AclBinding`, with
    resource type NAMESPACE (ours) for namespace ACLs.
    """

    RECORD_TYPE: ClassVar[int] = 23
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = (
        "An ACL was created: a principal from a host is allowed or denied an operation on "
        "resources."
    )
    id: Annotated[Uuid, Doc("ACL id, unique over the life of the cluster; names it for removal.")]
    resource_type: Annotated[
        ResourceType,
        Doc(
            "2 topic, 3 group, 4 cluster, 5 transactional id, 6 delegation token, 7 user, "
            "64 namespace."
        ),
    ]
    resource_name: Annotated[str, Doc("Resource name, or '*' for all.")]
    pattern_type: Annotated[PatternType, Doc("3 LITERAL, 4 PREFIXED.")]
    principal: Annotated[str, Doc("User:<name>, or User:* for all.")]
    host: Annotated[str, Doc("Client address, or '*' for any.")]
    operation: Annotated[
        AclOperation, Doc("Kafka's AclOperation id (2 ALL, 3 READ, ... 8 DESCRIBE, ...).")
    ]
    permission_type: Annotated[AclPermissionType, Doc("2 DENY, 3 ALLOW.")]


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveAccessControlEntryRecord(Record):
    """An ACL was removed."""

    RECORD_TYPE: ClassVar[int] = 24
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = "An ACL was removed."
    id: Annotated[Uuid, Doc("Id of the removed ACL.")]


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderChangeRecord(Record):
    """A controller quorum leader took office: KRaft's LeaderChangeMessage control record.

    The new leader writes it as the first entry of its epoch (the entry's epoch is the new
    one). It changes no metadata: replay only moves the image's provenance past it. The
    voters are KRaft's `Voters`, the granting voters its `GrantingVoters`.
    """

    RECORD_TYPE: ClassVar[int] = 106
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = (
        "A controller quorum leader took office (KRaft's LeaderChangeMessage); the first "
        "entry of its epoch. Changes no metadata."
    )
    leader_id: Annotated[Int32, Doc("Node id of the new leader.")]
    voters: Annotated[tuple[Int32, ...], Doc("Node ids of the voters of the quorum.")]
    granting_voters: Annotated[
        tuple[Int32, ...], Doc("Node ids of the voters that voted for the new leader.")
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientWriteRecord(Record):
    """A client's idempotent write was applied: its (client id, sequence) and its answer.

    Written in the same atomic batch as the write's own records, so a retry of the write (the
    same client id and sequence, after its answer was lost) finds it in the image on any node
    and is answered with `response` instead of being applied again (docs/replication.md).
    The client id is one per AdminClient; `api_key` says how `response` reads, which replay
    never does.
    """

    RECORD_TYPE: ClassVar[int] = 107
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = (
        "A client's idempotent write was applied, in the same batch as its records: the "
        "answer a retry of it (same client id and sequence) gets instead of applying it again."
    )
    client_id: Annotated[Uuid, Doc("The client instance's random id.")]
    sequence: Annotated[Int64, Doc("The write's sequence number (0 and up).")]
    principal: Annotated[
        str | None, Doc("Who made the write; only the same principal is answered from it.")
    ]
    api_key: Annotated[Int32, Doc("The API of the write (Kafka's or a private key).")]
    response: Annotated[bytes, Doc("The answer, in the API's stored form.")]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumVoter:
    """One voter of the controller quorum (KRaft's `VotersRecord.Voters`, one endpoint)."""

    AVRO_DOC: ClassVar[str] = "A voter of the controller quorum and where it listens."
    voter_id: Annotated[Int32, Doc("Node id of the voter.")]
    voter_directory_id: Annotated[
        str, Doc("Id of the voter's data directory (a UUID as text; empty if unknown).")
    ]
    listener: Annotated[str, Doc("Name of the controller listener, e.g. CONTROLLER.")] = ""
    host: Annotated[str, Doc("Host name or address of that listener.")] = ""
    port: Annotated[Int32, Doc("TCP port of that listener (0 if unknown).")] = 0
    min_kraft_version: Annotated[Int32, Doc("Lowest kraft.version the voter supports.")] = 0
    max_kraft_version: Annotated[Int32, Doc("Highest kraft.version the voter supports.")] = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class VotersRecord(Record):
    """The controller quorum's whole voter set from here on: KRaft's VotersRecord (KIP-853).

    A control record: the quorum uses the latest one in its log, committed or not, and a
    leader appends a new one to add or remove one voter at a time. Replay changes no
    metadata. Written only once `kraft.version` is 1 or more.
    """

    RECORD_TYPE: ClassVar[int] = 108
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = (
        "The controller quorum's voter set from here on (KRaft's VotersRecord, KIP-853). "
        "Changes no metadata."
    )
    voters: Annotated[tuple[QuorumVoter, ...], Doc("Every voter of the quorum.")]


@dataclass(frozen=True, slots=True, kw_only=True)
class KRaftVersionRecord(Record):
    """The quorum's `kraft.version` from here on: KRaft's KRaftVersionRecord (KIP-853).

    A control record written with the first VotersRecord: 1 means the voters are in the log.
    Replay changes no metadata.
    """

    RECORD_TYPE: ClassVar[int] = 109
    VERSION: ClassVar[int] = 0
    AVRO_DOC: ClassVar[str] = (
        "The controller quorum's kraft.version from here on (KRaft's KRaftVersionRecord); "
        "1: the voters are in the log. Changes no metadata."
    )
    kraft_version: Annotated[Int32, Doc("The kraft.version level (0 or 1).")]


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
    VotersRecord,
    KRaftVersionRecord,
)
"""Every record type this code writes, in a fixed order (the order of the Avro union).

New types go at the end, so the union branches of the older types keep their positions."""
