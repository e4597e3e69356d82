"""The snapshot tables: one `snapshots` row per snapshot, normalized tables for its content.

Every content table is keyed by `snapshot_id` first, so a snapshot's rows sit together and
"which partitions were READ_ONLY in snapshot 7" is one plain query. Ids are stored in Kafka's
22-character text form (as `mlog topics describe` shows them); enums by name (`READ_ONLY`,
`TOPIC`); replica lists as JSON array text (`[1,2,3]`), readable by `json_each` (SQLite) or
`::jsonb` (PostgreSQL); a credential's salt and keys as binary (BLOB, bytea).

The content tables have no foreign keys to `snapshots`: a snapshot is written in one transaction
and deleted by `snapshot_id` from every table in one transaction, and per-row foreign key checks
would double the cost of a million-partition COPY for no gain. Alembic's migrations (the
`migrations` package) create these tables; the models are compared with them in the tests.

The tables are SQLAlchemy Core `Table`s: the store reads and writes rows, never objects, and
the ORM's import alone was 6 MiB of every server's memory (a process importing
`replay.sql.store`: 48 MiB of RSS with it, 42 without).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.types import TypeEngine

from records.model import (
    AclOperation,
    AclPermissionType,
    ConfigResourceType,
    Mode,
    PatternType,
    ResourceType,
    ScramMechanism,
)

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Constraint names that are the same on every database, so migrations can name them."""

ID_LENGTH = 22
"""A 128-bit id in Kafka's text form: URL-safe base64 without padding."""

FORMAT_VERSION = 3
"""How content is encoded in the rows (and so what the checksum covers); bumped on any change.

2: ACLs and SCRAM credentials (migration 0003). A version 1 snapshot may lack both, so it is
not read: time travel and startup replay the log instead, and the next snapshot is version 2.
3: the clients' last idempotent writes (migration 0004); an older snapshot lacks them (a retry
of a write it holds would be applied again), so it is not read either.
"""

MODE_NAMES = tuple(m.name for m in Mode)
RESOURCE_TYPE_NAMES = tuple(t.name for t in ConfigResourceType)
ACL_RESOURCE_TYPE_NAMES = tuple(
    t.name for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY)
)
"""The resource types a stored ACL can have (replay's rule acl.resource-type)."""
ACL_PATTERN_TYPE_NAMES = (PatternType.LITERAL.name, PatternType.PREFIXED.name)
ACL_OPERATION_NAMES = tuple(
    o.name for o in AclOperation if o not in (AclOperation.UNKNOWN, AclOperation.ANY)
)
ACL_PERMISSION_NAMES = (AclPermissionType.DENY.name, AclPermissionType.ALLOW.name)
SCRAM_MECHANISM_NAMES = (ScramMechanism.SCRAM_SHA_256.name, ScramMechanism.SCRAM_SHA_512.name)


def _in(column: str, names: tuple[str, ...]) -> str:
    # An OR-chain, not `IN (...)`: SQLite builds an ephemeral table per row for an IN list in a
    # CHECK, which cost ~2 s per million partition rows (migration 0002).
    return " OR ".join(f"{column} = {n!r}" for n in names)


_Type = TypeEngine[Any] | type[TypeEngine[Any]]

METADATA = MetaData(naming_convention=NAMING_CONVENTION)
"""The snapshot tables, with the naming convention (what Alembic compares them with)."""


def _key(name: str, type_: _Type) -> Column[Any]:
    """A primary-key column."""
    return Column(name, type_, primary_key=True)


def _value(
    name: str,
    type_: _Type,
    doc: str | None = None,
    *,
    nullable: bool = False,
) -> Column[Any]:
    """A value column: NOT NULL unless `nullable`."""
    return Column(name, type_, nullable=nullable, doc=doc)


SNAPSHOTS = Table(
    "snapshots",
    METADATA,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("log_offset", BigInteger, nullable=False, index=True, doc="offset of the last entry"),
    _value("epoch", Integer, "leader epoch of that entry"),
    _value("log_timestamp", BigInteger, "append time of that entry, ms"),
    _value("created_at", DateTime(timezone=True)),
    _value("record_count", BigInteger, "records the image writes"),
    _value("checksum", String(64), "SHA-256 of the content rows, hex"),
    _value("format_version", Integer),
    _value(
        "base_id", Integer, "the snapshot an increment is written on; NULL: full", nullable=True
    ),
    Column(
        "chain_length",
        Integer,
        nullable=False,
        server_default="0",
        doc="increments from the full snapshot to this one",
    ),
    _value(
        "replaced_tables",
        Text,
        "an increment's tables written whole, comma-separated",
        nullable=True,
    ),
    _value(
        "content_sums",
        Text,
        "per-table row counts and digest sums (JSON), for increments",
        nullable=True,
    ),
    _value(
        "content_bytes",
        BigInteger,
        "bytes of its own rows' values (text and binary lengths, 8 a number); NULL: not "
        "measured yet (written before revision 0006)",
        nullable=True,
    ),
)
"""One snapshot: the image after the entry at `log_offset`, in full or as an increment.

A full snapshot (`base_id` NULL) holds every row of the image. An increment holds only what
changed since its base (`base_id`, itself full or an increment): the changed topics' rows
(`snapshot_changed_topics` lists them, and the deleted ones) and each small table that
changed, whole (`replaced_tables`). `checksum` is always the whole image's.
"""

CHANGED_TOPICS = Table(
    "snapshot_changed_topics",
    METADATA,
    _key("snapshot_id", Integer),
    _key("topic_id", String(ID_LENGTH)),
    _value("partition_count", Integer, "-1: the topic was deleted"),
)
"""A topic an increment changed: its partition count now, or -1 if it was deleted (not
content: not in the checksum).

The increment's rows of the topic (its topic row, the partitions that changed, its pending
deletion) replace its base's; base partitions at or beyond the count are gone.
"""

FEATURES = Table(
    "snapshot_features",
    METADATA,
    _key("snapshot_id", Integer),
    _key("name", String(255)),
    _value("level", Integer),
)
"""A finalized feature level (`metadata.version`, ...)."""

BROKERS = Table(
    "snapshot_brokers",
    METADATA,
    _key("snapshot_id", Integer),
    _key("broker_id", Integer),
    _value("incarnation_id", String(ID_LENGTH)),
    _value("broker_epoch", BigInteger),
    _value("rack", Text, nullable=True),
    _value("fenced", Boolean),
    _value("in_controlled_shutdown", Boolean),
)
"""A registered broker."""

BROKER_ENDPOINTS = Table(
    "snapshot_broker_endpoints",
    METADATA,
    _key("snapshot_id", Integer),
    _key("broker_id", Integer),
    _key("position", Integer),
    _value("name", Text),
    _value("host", Text),
    _value("port", Integer),
    _value("security_protocol", Integer),
)
"""A listener of a broker, in the broker's order."""

BROKER_FEATURES = Table(
    "snapshot_broker_features",
    METADATA,
    _key("snapshot_id", Integer),
    _key("broker_id", Integer),
    _key("position", Integer),
    _value("name", Text),
    _value("min_supported_version", Integer),
    _value("max_supported_version", Integer),
)
"""A feature range a broker supports, in the broker's order."""

NAMESPACES = Table(
    "snapshot_namespaces",
    METADATA,
    _key("snapshot_id", Integer),
    _key("namespace_id", String(ID_LENGTH)),
    _value("name", Text),
    _value("parent_id", String(ID_LENGTH), nullable=True),
)
"""A namespace; `name` is the full name, tiers separated by ':'."""

TOPICS = Table(
    "snapshot_topics",
    METADATA,
    _key("snapshot_id", Integer),
    _key("topic_id", String(ID_LENGTH)),
    _value("namespace", Text),
    _value("name", Text),
)
"""A live topic; `namespace` is "" for the default namespace."""

PARTITIONS = Table(
    "snapshot_partitions",
    METADATA,
    Column("snapshot_id", Integer, nullable=False, index=True),
    _value("topic_id", String(ID_LENGTH)),
    _value("partition_id", Integer),
    _value("replicas", Text, "JSON array of broker ids"),
    _value("isr", Text, "JSON array of broker ids"),
    _value("removing_replicas", Text, "JSON array of broker ids"),
    _value("adding_replicas", Text, "JSON array of broker ids"),
    _value("leader", Integer, "-1: no leader"),
    _value("leader_epoch", Integer),
    _value("partition_epoch", Integer),
    _value("mode", String(16), "READ_WRITE, READ_ONLY or NONE"),
    CheckConstraint(_in("mode", MODE_NAMES), name="mode"),
)
"""A partition of a topic: replicas, ISR, leader, epochs and read/write mode.

The biggest table by far, so it has no primary key constraint, only an index on
`snapshot_id`: a (snapshot, topic, partition) B-tree costs about 1 s per million partitions on
PostgreSQL (a third of the write budget), and uniqueness is the writer's (an image holds each
partition once) and the checksum's to guarantee.
"""

PENDING_DELETIONS = Table(
    "snapshot_pending_deletions",
    METADATA,
    _key("snapshot_id", Integer),
    _key("topic_id", String(ID_LENGTH)),
    _value("partition_count", Integer),
    _value("delete_after_ms", BigInteger),
    _value("created_ms", BigInteger),
)
"""A partition reduction waiting for its purge time: ids >= `partition_count` go."""

CONFIGS = Table(
    "snapshot_configs",
    METADATA,
    _key("snapshot_id", Integer),
    _key("resource_type", String(16)),
    _key("resource_name", Text),
    _key("name", String(255)),
    _value("value", Text),
    CheckConstraint(_in("resource_type", RESOURCE_TYPE_NAMES), name="type"),
)
"""A config override; BROKER "" is the cluster-wide default, topics by qualified name."""

ACLS = Table(
    "snapshot_acls",
    METADATA,
    _key("snapshot_id", Integer),
    _key("acl_id", String(ID_LENGTH)),
    _value("resource_type", String(32)),
    _value("resource_name", Text),
    _value("pattern_type", String(16), "LITERAL or PREFIXED"),
    _value("principal", Text, "Type:name, e.g. User:alice or User:*"),
    _value("host", Text, "client address, or * for any"),
    _value("operation", String(32)),
    _value("permission_type", String(16), "ALLOW or DENY"),
    CheckConstraint(_in("resource_type", ACL_RESOURCE_TYPE_NAMES), name="resource_type"),
    CheckConstraint(_in("pattern_type", ACL_PATTERN_TYPE_NAMES), name="pattern_type"),
    CheckConstraint(_in("operation", ACL_OPERATION_NAMES), name="operation"),
    CheckConstraint(_in("permission_type", ACL_PERMISSION_NAMES), name="permission_type"),
)
"""An ACL (KRaft's AccessControlEntryRecord), enums by name as `mlog acls list` shows them.

The checks admit only what replay admits in a stored ACL (rules acl.resource-type,
acl.pattern, acl.operation, acl.permission).
"""

SCRAM_CREDENTIALS = Table(
    "snapshot_scram_credentials",
    METADATA,
    _key("snapshot_id", Integer),
    Column("name", Text, primary_key=True, doc="the user name"),
    Column("mechanism", String(16), primary_key=True, doc="SCRAM_SHA_256 or SCRAM_SHA_512"),
    _value("salt", LargeBinary),
    _value("stored_key", LargeBinary),
    _value("server_key", LargeBinary),
    _value("iterations", Integer),
    CheckConstraint(_in("mechanism", SCRAM_MECHANISM_NAMES), name="mechanism"),
)
"""A user's SCRAM credential for one mechanism: salt, StoredKey, ServerKey, iterations.

What RFC 5802 lets a server keep (never a password), the same bytes the log holds; as binary
columns (BLOB on SQLite, bytea on PostgreSQL).
"""

CLIENT_WRITES = Table(
    "snapshot_client_writes",
    METADATA,
    _key("snapshot_id", Integer),
    _key("client_id", String(ID_LENGTH)),
    _value("position", Integer, "eviction order, 0 = oldest"),
    _value("sequence", BigInteger),
    _value("principal", Text, nullable=True),
    _value("api_key", Integer),
    _value("response", LargeBinary, "the stored answer (opaque)"),
)
"""A client's last idempotent write (ClientWriteRecord): what a retry of it is answered.

`position` is the table's eviction order (0 = the oldest last write), so a snapshot read back
evicts the same client next as the image it was written from.
"""

CONTENT_TABLES: tuple[Table, ...] = (
    FEATURES,
    BROKERS,
    BROKER_ENDPOINTS,
    BROKER_FEATURES,
    NAMESPACES,
    TOPICS,
    PARTITIONS,
    PENDING_DELETIONS,
    CONFIGS,
    SCRAM_CREDENTIALS,
    ACLS,
    CLIENT_WRITES,
)
"""The per-snapshot content tables, in the order a snapshot is written."""
