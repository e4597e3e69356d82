"""Avro schemas of the record types: one `RecordSchema` per (record type, version).

Each field is declared once, with its Avro type, its documentation and, where the Python value
differs from the Avro value, a `FieldCodec`. The codec, the JSON form and the log entry schema are
all derived from these declarations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from records import model
from records.interning import INTS, UUIDS, shared_uuid
from records.uuids import Uuid

AVRO_NAMESPACE = "mlog"

UUID_TYPE = "mlog.Uuid"
"""Reference to the named fixed(16) type of every id; defined on first use in a schema."""

ENDPOINT_TYPE = "mlog.BrokerEndpoint"
FEATURE_TYPE = "mlog.BrokerFeature"

NAMED_TYPES: Mapping[str, dict[str, Any]] = {
    UUID_TYPE: {
        "type": "fixed",
        "name": "Uuid",
        "namespace": AVRO_NAMESPACE,
        "size": 16,
        "doc": "A 128-bit id (topic, namespace, incarnation); shown as 22-char URL-safe base64.",
    },
    ENDPOINT_TYPE: {
        "type": "record",
        "name": "BrokerEndpoint",
        "namespace": AVRO_NAMESPACE,
        "doc": "One listener of a broker.",
        "fields": [
            {"name": "name", "type": "string", "doc": "Listener name, e.g. PLAINTEXT."},
            {"name": "host", "type": "string", "doc": "Host name or address clients connect to."},
            {"name": "port", "type": "int", "doc": "TCP port of the listener."},
            {
                "name": "security_protocol",
                "type": "int",
                "default": 0,
                "doc": "Kafka SecurityProtocol id (0 = PLAINTEXT).",
            },
        ],
    },
    FEATURE_TYPE: {
        "type": "record",
        "name": "BrokerFeature",
        "namespace": AVRO_NAMESPACE,
        "doc": "A feature version range a broker supports.",
        "fields": [
            {"name": "name", "type": "string", "doc": "Feature name, e.g. metadata.version."},
            {"name": "min_supported_version", "type": "int", "doc": "Lowest supported level."},
            {"name": "max_supported_version", "type": "int", "doc": "Highest supported level."},
        ],
    },
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldCodec:
    """How a field's Python value differs from its Avro value, as expressions over `{v}`.

    The compiled encoders and decoders (`records.codec`) inline these expressions: a function
    call per field would cost more than most conversions themselves.
    """

    to_avro: str | None
    """Python value -> Avro value; None when fastavro writes the value as it is."""
    from_avro: str
    """Avro value -> Python value."""
    helpers: Mapping[str, Any] = field(default_factory=dict)
    """Names the expressions use, with their values."""

    def to_avro_function(self) -> Callable[[Any], Any]:
        """`to_avro` as a function, for one-off conversions outside the compiled codecs."""
        namespace = dict(self.helpers)
        source = "lambda v: " + (self.to_avro or "{v}").format(v="v")
        function: Callable[[Any], Any] = eval(source, namespace)
        return function


_NO_DEFAULT: Any = object()


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldSpec:
    """One field of a record schema."""

    name: str
    type: Any
    doc: str
    default: Any = _NO_DEFAULT
    codec: FieldCodec | None = None
    enum: type[IntEnum] | None = None
    """The Python enum of an int field, for JSON forms and validation."""

    @property
    def required(self) -> bool:
        """True if the field has no default: a record must always give it."""
        return self.default is _NO_DEFAULT


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordSchema:
    """The schema of one version of one record type."""

    name: str
    """Avro record name without version, e.g. "TopicRecord"; never changes."""
    record_type: int
    version: int
    doc: str
    fields: tuple[FieldSpec, ...]
    python_class: type[model.Record] | None = field(default=None)
    """The class values decode to; None for an old version that is upcast first."""

    @property
    def branch_name(self) -> str:
        """Full Avro name of this version's branch in the entry union, e.g. mlog.TopicRecordV0."""
        return f"{AVRO_NAMESPACE}.{self.name}V{self.version}"

    def to_avro(self) -> dict[str, Any]:
        """The Avro record schema (with named types as references)."""
        fields: list[dict[str, Any]] = []
        for f in self.fields:
            entry: dict[str, Any] = {"name": f.name, "type": f.type, "doc": f.doc}
            if f.default is not _NO_DEFAULT:
                entry["default"] = f.default
            fields.append(entry)
        return {
            "type": "record",
            "name": f"{self.name}V{self.version}",
            "namespace": AVRO_NAMESPACE,
            "doc": self.doc,
            "fields": fields,
        }


def _enum_codec(enum: type[IntEnum], *, optional: bool) -> FieldCodec:
    """Enums are written as ints; the compiled encoder checks membership (`FieldSpec.enum`)."""
    name = f"_{enum.__name__}_by_value"
    expr = f"{name}[{{v}}]"
    return FieldCodec(
        to_avro=None,
        from_avro=f"None if {{v}} is None else {expr}" if optional else expr,
        helpers={name: {int(member): member for member in enum}},
    )


def _optional_uuid_from_avro(value: bytes | tuple[str, bytes] | None) -> Uuid | None:
    if value is None:
        return None
    if isinstance(value, tuple):  # return_record_name tags a named fixed chosen in a union
        value = value[1]
    return shared_uuid(value)


def _endpoints_to_avro(endpoints: tuple[model.BrokerEndpoint, ...]) -> list[dict[str, Any]]:
    return [
        {"name": e.name, "host": e.host, "port": e.port, "security_protocol": e.security_protocol}
        for e in endpoints
    ]


def _features_to_avro(features: tuple[model.BrokerFeature, ...]) -> list[dict[str, Any]]:
    return [
        {
            "name": f.name,
            "min_supported_version": f.min_supported_version,
            "max_supported_version": f.max_supported_version,
        }
        for f in features
    ]


UUID_CODEC = FieldCodec(
    to_avro="{v}.bytes",
    from_avro="_UUIDS[{v}]",
    helpers={"_UUIDS": UUIDS},
)
OPTIONAL_UUID_CODEC = FieldCodec(
    to_avro="None if {v} is None else {v}.bytes",
    from_avro="_optional_uuid_from_avro({v})",
    helpers={"_optional_uuid_from_avro": _optional_uuid_from_avro},
)
INTS_CODEC = FieldCodec(to_avro=None, from_avro="_INTS[tuple({v})]", helpers={"_INTS": INTS})
# Inside a union fastavro reads a 2-tuple as its (branch name, value) notation: write a list.
OPTIONAL_INTS_CODEC = FieldCodec(
    to_avro="None if {v} is None else list({v})",
    from_avro="None if {v} is None else _INTS[tuple({v})]",
    helpers={"_INTS": INTS},
)
ENDPOINTS_CODEC = FieldCodec(
    to_avro="_endpoints_to_avro({v})",
    from_avro="tuple(_BrokerEndpoint(**e) for e in {v})",
    helpers={"_endpoints_to_avro": _endpoints_to_avro, "_BrokerEndpoint": model.BrokerEndpoint},
)
FEATURES_CODEC = FieldCodec(
    to_avro="_features_to_avro({v})",
    from_avro="tuple(_BrokerFeature(**f) for f in {v})",
    helpers={"_features_to_avro": _features_to_avro, "_BrokerFeature": model.BrokerFeature},
)

INT_ARRAY = {"type": "array", "items": "int"}
OPTIONAL_STRING = ["null", "string"]
OPTIONAL_INT = ["null", "int"]


def _uuid(name: str, doc: str) -> FieldSpec:
    return FieldSpec(name=name, type=UUID_TYPE, doc=doc, codec=UUID_CODEC)


def _ints(name: str, doc: str, *, default: Any = _NO_DEFAULT) -> FieldSpec:
    return FieldSpec(name=name, type=INT_ARRAY, doc=doc, codec=INTS_CODEC, default=default)


def _optional_ints(name: str, doc: str) -> FieldSpec:
    return FieldSpec(
        name=name,
        type=["null", INT_ARRAY],
        doc=doc + " Null means unchanged.",
        default=None,
        codec=OPTIONAL_INTS_CODEC,
    )


def _enum(name: str, enum: type[IntEnum], doc: str, *, default: IntEnum | None) -> FieldSpec:
    if default is None:
        return FieldSpec(
            name=name, type="int", doc=doc, codec=_enum_codec(enum, optional=False), enum=enum
        )
    return FieldSpec(
        name=name,
        type="int",
        doc=doc,
        default=int(default),
        codec=_enum_codec(enum, optional=False),
        enum=enum,
    )


_TOPIC_ID_DOC = "Topic id (KIP-516), unique over the life of the cluster."

CURRENT_SCHEMAS: tuple[RecordSchema, ...] = (
    RecordSchema(
        name="FeatureLevelRecord",
        record_type=model.FeatureLevelRecord.RECORD_TYPE,
        version=model.FeatureLevelRecord.VERSION,
        python_class=model.FeatureLevelRecord,
        doc="Sets a cluster-wide feature level.",
        fields=(
            FieldSpec(name="name", type="string", doc="Feature name, e.g. metadata.version."),
            FieldSpec(name="feature_level", type="int", doc="The level now in force."),
        ),
    ),
    RecordSchema(
        name="RegisterBrokerRecord",
        record_type=model.RegisterBrokerRecord.RECORD_TYPE,
        version=model.RegisterBrokerRecord.VERSION,
        python_class=model.RegisterBrokerRecord,
        doc="A broker registered, or re-registered with a new incarnation.",
        fields=(
            FieldSpec(name="broker_id", type="int", doc="The broker id."),
            _uuid("incarnation_id", "Changes every time the broker process restarts."),
            FieldSpec(
                name="broker_epoch", type="long", doc="Epoch of this registration (its offset)."
            ),
            FieldSpec(
                name="end_points",
                type={"type": "array", "items": ENDPOINT_TYPE},
                doc="The broker's listeners.",
                default=[],
                codec=ENDPOINTS_CODEC,
            ),
            FieldSpec(
                name="features",
                type={"type": "array", "items": FEATURE_TYPE},
                doc="Feature ranges the broker supports.",
                default=[],
                codec=FEATURES_CODEC,
            ),
            FieldSpec(
                name="rack", type=OPTIONAL_STRING, doc="Rack of the broker, or null.", default=None
            ),
            FieldSpec(
                name="fenced",
                type="boolean",
                doc="True if the broker starts fenced (cannot lead).",
                default=True,
            ),
            FieldSpec(
                name="in_controlled_shutdown",
                type="boolean",
                doc="True if the broker registers while shutting down.",
                default=False,
            ),
        ),
    ),
    RecordSchema(
        name="UnregisterBrokerRecord",
        record_type=model.UnregisterBrokerRecord.RECORD_TYPE,
        version=model.UnregisterBrokerRecord.VERSION,
        python_class=model.UnregisterBrokerRecord,
        doc="A broker was removed from the cluster.",
        fields=(
            FieldSpec(name="broker_id", type="int", doc="The broker id."),
            FieldSpec(name="broker_epoch", type="long", doc="Epoch of the removed registration."),
        ),
    ),
    RecordSchema(
        name="BrokerRegistrationChangeRecord",
        record_type=model.BrokerRegistrationChangeRecord.RECORD_TYPE,
        version=model.BrokerRegistrationChangeRecord.VERSION,
        python_class=model.BrokerRegistrationChangeRecord,
        doc="A broker was fenced, unfenced, or entered controlled shutdown.",
        fields=(
            FieldSpec(name="broker_id", type="int", doc="The broker id."),
            FieldSpec(name="broker_epoch", type="long", doc="Epoch of the registration changed."),
            _enum(
                "fenced",
                model.FencingChange,
                "-1 unfence, 0 no change, 1 fence.",
                default=model.FencingChange.NONE,
            ),
            _enum(
                "in_controlled_shutdown",
                model.ControlledShutdownChange,
                "0 no change, 1 the broker entered controlled shutdown.",
                default=model.ControlledShutdownChange.NONE,
            ),
        ),
    ),
    RecordSchema(
        name="NamespaceRecord",
        record_type=model.NamespaceRecord.RECORD_TYPE,
        version=model.NamespaceRecord.VERSION,
        python_class=model.NamespaceRecord,
        doc="A namespace was created.",
        fields=(
            _uuid("namespace_id", "Namespace id, unique over the life of the cluster."),
            FieldSpec(name="name", type="string", doc="Full name, tiers separated by ':'."),
            FieldSpec(
                name="parent_id",
                type=["null", UUID_TYPE],
                doc="Id of the parent namespace; null for a child of the default namespace.",
                default=None,
                codec=OPTIONAL_UUID_CODEC,
            ),
        ),
    ),
    RecordSchema(
        name="RemoveNamespaceRecord",
        record_type=model.RemoveNamespaceRecord.RECORD_TYPE,
        version=model.RemoveNamespaceRecord.VERSION,
        python_class=model.RemoveNamespaceRecord,
        doc="A namespace was deleted.",
        fields=(_uuid("namespace_id", "Id of the deleted namespace."),),
    ),
    RecordSchema(
        name="TopicRecord",
        record_type=model.TopicRecord.RECORD_TYPE,
        version=model.TopicRecord.VERSION,
        python_class=model.TopicRecord,
        doc="A topic was created.",
        fields=(
            FieldSpec(name="name", type="string", doc="Topic name, without namespace."),
            _uuid("topic_id", _TOPIC_ID_DOC),
            FieldSpec(
                name="namespace",
                type="string",
                doc="Full name of the topic's namespace; empty for the default namespace.",
                default="",
            ),
        ),
    ),
    RecordSchema(
        name="PartitionRecord",
        record_type=model.PartitionRecord.RECORD_TYPE,
        version=model.PartitionRecord.VERSION,
        python_class=model.PartitionRecord,
        doc="The full state of one partition.",
        fields=(
            FieldSpec(name="partition_id", type="int", doc="Partition index within the topic."),
            _uuid("topic_id", _TOPIC_ID_DOC),
            _ints("replicas", "Replica broker ids, preferred leader first."),
            _ints("isr", "In-sync replica broker ids."),
            _ints("removing_replicas", "Replicas being removed by a reassignment.", default=[]),
            _ints("adding_replicas", "Replicas being added by a reassignment.", default=[]),
            FieldSpec(name="leader", type="int", doc="Leader broker id; -1 if none.", default=-1),
            FieldSpec(name="leader_epoch", type="int", doc="Epoch of the leader.", default=0),
            FieldSpec(
                name="partition_epoch",
                type="int",
                doc="Bumped on every change of the partition.",
                default=0,
            ),
            _enum(
                "mode",
                model.Mode,
                "0 READ_WRITE, 1 READ_ONLY, -1 NONE (being deleted).",
                default=model.Mode.READ_WRITE,
            ),
        ),
    ),
    RecordSchema(
        name="PartitionChangeRecord",
        record_type=model.PartitionChangeRecord.RECORD_TYPE,
        version=model.PartitionChangeRecord.VERSION,
        python_class=model.PartitionChangeRecord,
        doc="A sparse change to a partition; absent (null) fields are unchanged.",
        fields=(
            FieldSpec(name="partition_id", type="int", doc="Partition index within the topic."),
            _uuid("topic_id", _TOPIC_ID_DOC),
            _optional_ints("isr", "New in-sync replicas."),
            FieldSpec(
                name="leader",
                type="int",
                doc="New leader; -1 no leader, -2 unchanged.",
                default=model.LEADER_UNCHANGED,
            ),
            _optional_ints("replicas", "New replicas."),
            _optional_ints("removing_replicas", "New removing replicas."),
            _optional_ints("adding_replicas", "New adding replicas."),
            FieldSpec(
                name="leader_epoch",
                type=OPTIONAL_INT,
                doc="New leader epoch; null derives it (+1 when the leader changes).",
                default=None,
            ),
            FieldSpec(
                name="partition_epoch",
                type=OPTIONAL_INT,
                doc="New partition epoch; null derives it (+1 on every change).",
                default=None,
            ),
            FieldSpec(
                name="mode",
                type=OPTIONAL_INT,
                doc="New mode (0 READ_WRITE, 1 READ_ONLY, -1 NONE); null means unchanged.",
                default=None,
                codec=_enum_codec(model.Mode, optional=True),
                enum=model.Mode,
            ),
        ),
    ),
    RecordSchema(
        name="RemoveTopicRecord",
        record_type=model.RemoveTopicRecord.RECORD_TYPE,
        version=model.RemoveTopicRecord.VERSION,
        python_class=model.RemoveTopicRecord,
        doc="A topic and all its partitions were deleted.",
        fields=(_uuid("topic_id", "Id of the deleted topic."),),
    ),
    RecordSchema(
        name="DeleteTopicPartitionsRecord",
        record_type=model.DeleteTopicPartitionsRecord.RECORD_TYPE,
        version=model.DeleteTopicPartitionsRecord.VERSION,
        python_class=model.DeleteTopicPartitionsRecord,
        doc="A topic's partition count was reduced; partitions with id >= partition_count go.",
        fields=(
            _uuid("topic_id", _TOPIC_ID_DOC),
            FieldSpec(name="partition_count", type="int", doc="The new partition count."),
            FieldSpec(
                name="delete_after_ms",
                type="long",
                doc="Epoch ms after which the data may be purged; 0 = immediately.",
            ),
            FieldSpec(name="created_ms", type="long", doc="Epoch ms when the reduction began."),
        ),
    ),
    RecordSchema(
        name="ConfigRecord",
        record_type=model.ConfigRecord.RECORD_TYPE,
        version=model.ConfigRecord.VERSION,
        python_class=model.ConfigRecord,
        doc="A config key was set on a resource; a null value deletes the key.",
        fields=(
            _enum(
                "resource_type",
                model.ConfigResourceType,
                "2 topic, 4 broker (name '' = cluster default), 64 namespace.",
                default=None,
            ),
            FieldSpec(name="resource_name", type="string", doc="Name of the resource."),
            FieldSpec(name="name", type="string", doc="Config key, e.g. retention.ms."),
            FieldSpec(name="value", type=OPTIONAL_STRING, doc="New value; null deletes the key."),
        ),
    ),
    RecordSchema(
        name="MoveTopicRecord",
        record_type=model.MoveTopicRecord.RECORD_TYPE,
        version=model.MoveTopicRecord.VERSION,
        python_class=model.MoveTopicRecord,
        doc="A topic moved to another namespace, keeping its id, partitions and configs.",
        fields=(
            _uuid("topic_id", _TOPIC_ID_DOC),
            FieldSpec(
                name="namespace",
                type="string",
                doc="Full name of the namespace the topic moves to; empty for the default one.",
            ),
        ),
    ),
    RecordSchema(
        name="PurgeTopicPartitionsRecord",
        record_type=model.PurgeTopicPartitionsRecord.RECORD_TYPE,
        version=model.PurgeTopicPartitionsRecord.VERSION,
        python_class=model.PurgeTopicPartitionsRecord,
        doc="A pending partition deletion completed: partitions with id >= partition_count are "
        "removed from the topic.",
        fields=(
            _uuid("topic_id", _TOPIC_ID_DOC),
            FieldSpec(
                name="partition_count",
                type="int",
                doc="The topic's partition count from now on (that of its pending deletion).",
            ),
        ),
    ),
    RecordSchema(
        name="CancelTopicPartitionsDeletionRecord",
        record_type=model.CancelTopicPartitionsDeletionRecord.RECORD_TYPE,
        version=model.CancelTopicPartitionsDeletionRecord.VERSION,
        python_class=model.CancelTopicPartitionsDeletionRecord,
        doc="A pending partition deletion was cancelled: the topic keeps all its partitions.",
        fields=(
            _uuid("topic_id", _TOPIC_ID_DOC),
            FieldSpec(
                name="partition_count",
                type="int",
                doc="The partition count of the pending deletion this cancels.",
            ),
        ),
    ),
    RecordSchema(
        name="UserScramCredentialRecord",
        record_type=model.UserScramCredentialRecord.RECORD_TYPE,
        version=model.UserScramCredentialRecord.VERSION,
        python_class=model.UserScramCredentialRecord,
        doc="A user's SCRAM credential for one mechanism was set (RFC 5802; never a password).",
        fields=(
            FieldSpec(name="name", type="string", doc="User name; the principal is User:<name>."),
            _enum(
                "mechanism",
                model.ScramMechanism,
                "1 SCRAM-SHA-256, 2 SCRAM-SHA-512.",
                default=None,
            ),
            FieldSpec(name="salt", type="bytes", doc="The salt of the salted password."),
            FieldSpec(name="stored_key", type="bytes", doc="StoredKey = H(ClientKey)."),
            FieldSpec(
                name="server_key", type="bytes", doc="ServerKey = HMAC(SaltedPassword, ...)."
            ),
            FieldSpec(name="iterations", type="int", doc="PBKDF2 iterations (at least 4096)."),
        ),
    ),
    RecordSchema(
        name="RemoveUserScramCredentialRecord",
        record_type=model.RemoveUserScramCredentialRecord.RECORD_TYPE,
        version=model.RemoveUserScramCredentialRecord.VERSION,
        python_class=model.RemoveUserScramCredentialRecord,
        doc="A user's SCRAM credential for one mechanism was removed.",
        fields=(
            FieldSpec(name="name", type="string", doc="User name."),
            _enum(
                "mechanism",
                model.ScramMechanism,
                "1 SCRAM-SHA-256, 2 SCRAM-SHA-512.",
                default=None,
            ),
        ),
    ),
    RecordSchema(
        name="AccessControlEntryRecord",
        record_type=model.AccessControlEntryRecord.RECORD_TYPE,
        version=model.AccessControlEntryRecord.VERSION,
        python_class=model.AccessControlEntryRecord,
        doc="An ACL was created: a principal from a host is allowed or denied an operation on "
        "resources.",
        fields=(
            _uuid("id", "ACL id, unique over the life of the cluster; names it for removal."),
            _enum(
                "resource_type",
                model.ResourceType,
                "2 topic, 3 group, 4 cluster, 5 transactional id, 6 delegation token, 7 user, "
                "64 namespace.",
                default=None,
            ),
            FieldSpec(name="resource_name", type="string", doc="Resource name, or '*' for all."),
            _enum("pattern_type", model.PatternType, "3 LITERAL, 4 PREFIXED.", default=None),
            FieldSpec(name="principal", type="string", doc="User:<name>, or User:* for all."),
            FieldSpec(name="host", type="string", doc="Client address, or '*' for any."),
            _enum(
                "operation",
                model.AclOperation,
                "Kafka's AclOperation id (2 ALL, 3 READ, ... 8 DESCRIBE, ...).",
                default=None,
            ),
            _enum("permission_type", model.AclPermissionType, "2 DENY, 3 ALLOW.", default=None),
        ),
    ),
    RecordSchema(
        name="RemoveAccessControlEntryRecord",
        record_type=model.RemoveAccessControlEntryRecord.RECORD_TYPE,
        version=model.RemoveAccessControlEntryRecord.VERSION,
        python_class=model.RemoveAccessControlEntryRecord,
        doc="An ACL was removed.",
        fields=(_uuid("id", "Id of the removed ACL."),),
    ),
    RecordSchema(
        name="LeaderChangeRecord",
        record_type=model.LeaderChangeRecord.RECORD_TYPE,
        version=model.LeaderChangeRecord.VERSION,
        python_class=model.LeaderChangeRecord,
        doc="A controller quorum leader took office (KRaft's LeaderChangeMessage); the first "
        "entry of its epoch. Changes no metadata.",
        fields=(
            FieldSpec(name="leader_id", type="int", doc="Node id of the new leader."),
            _ints("voters", "Node ids of the voters of the quorum."),
            _ints("granting_voters", "Node ids of the voters that voted for the new leader."),
        ),
    ),
    RecordSchema(
        name="ClientWriteRecord",
        record_type=model.ClientWriteRecord.RECORD_TYPE,
        version=model.ClientWriteRecord.VERSION,
        python_class=model.ClientWriteRecord,
        doc="A client's idempotent write was applied, in the same batch as its records: the "
        "answer a retry of it (same client id and sequence) gets instead of applying it again.",
        fields=(
            _uuid("client_id", "The client instance's random id."),
            FieldSpec(name="sequence", type="long", doc="The write's sequence number (0 and up)."),
            FieldSpec(
                name="principal",
                type=["null", "string"],
                doc="Who made the write; only the same principal is answered from it.",
            ),
            FieldSpec(
                name="api_key", type="int", doc="The API of the write (Kafka's or a private key)."
            ),
            FieldSpec(name="response", type="bytes", doc="The answer, in the API's stored form."),
        ),
    ),
)
"""The schema every record type is written with today, in `model.RECORD_CLASSES` order."""


def inline_named_types(schema: Any, defined: set[str]) -> Any:
    """Replace references to `NAMED_TYPES` by their definition at first use (Avro requires it)."""
    if isinstance(schema, str):
        if schema in NAMED_TYPES and schema not in defined:
            defined.add(schema)
            return inline_named_types(NAMED_TYPES[schema], defined)
        return schema
    if isinstance(schema, list):
        return [inline_named_types(s, defined) for s in schema]
    if isinstance(schema, dict):
        return {k: inline_named_types(v, defined) for k, v in schema.items()}
    return schema


def entry_schema(record_schemas: tuple[RecordSchema, ...]) -> dict[str, Any]:
    """The self-contained Avro schema of one log entry carrying any of `record_schemas`."""
    raw = {
        "type": "record",
        "name": "LogEntry",
        "namespace": AVRO_NAMESPACE,
        "doc": "One entry of the metadata log.",
        "fields": [
            {"name": "offset", "type": "long", "doc": "Dense position in the log, from 0."},
            {"name": "epoch", "type": "int", "doc": "Leader epoch of the writer that appended it."},
            {"name": "timestamp", "type": "long", "doc": "Append time, ms since the Unix epoch."},
            {
                "name": "principal",
                "type": ["null", "string"],
                "doc": "Who asked for the change; null if unknown.",
            },
            {
                "name": "record",
                "type": [s.to_avro() for s in record_schemas],
                "doc": "The metadata record; the union branch names type and version.",
            },
        ],
    }
    result: dict[str, Any] = inline_named_types(raw, set())
    return result
