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
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

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


class Base(DeclarativeBase):
    """The declarative base of the snapshot tables, with the naming convention."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Snapshot(Base):
    """One snapshot: the image after the entry at `log_offset`, in full or as an increment.

    A full snapshot (`base_id` NULL) holds every row of the image. An increment holds only
    what changed since its base (`base_id`, itself full or an increment): the changed topics'
    rows (`snapshot_changed_topics` lists them, and the deleted ones) and each small table
    that changed, whole (`replaced_tables`). `checksum` is always the whole image's.
    """

    __tablename__ = "snapshots"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    log_offset: Mapped[int] = mapped_column(BigInteger, index=True, doc="offset of the last entry")
    epoch: Mapped[int] = mapped_column(Integer, doc="leader epoch of that entry")
    log_timestamp: Mapped[int] = mapped_column(BigInteger, doc="append time of that entry, ms")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    record_count: Mapped[int] = mapped_column(BigInteger, doc="records the image writes")
    checksum: Mapped[str] = mapped_column(String(64), doc="SHA-256 of the content rows, hex")
    format_version: Mapped[int] = mapped_column(Integer)
    base_id: Mapped[int | None] = mapped_column(
        Integer, nullable=True, doc="the snapshot an increment is written on; NULL: full"
    )
    chain_length: Mapped[int] = mapped_column(
        Integer, server_default="0", doc="increments from the full snapshot to this one"
    )
    replaced_tables: Mapped[str | None] = mapped_column(
        Text, nullable=True, doc="an increment's tables written whole, comma-separated"
    )
    content_sums: Mapped[str | None] = mapped_column(
        Text, nullable=True, doc="per-table row counts and digest sums (JSON), for increments"
    )
    content_bytes: Mapped[int | None] = mapped_column(
        BigInteger,
        nullable=True,
        doc="bytes of its own rows' values (text and binary lengths, 8 a number); NULL: not "
        "measured yet (written before revision 0006)",
    )


class SnapshotChangedTopic(Base):
    """A topic an increment changed: its partition count now, or -1 if it was deleted.

    The increment's rows of the topic (its topic row, the partitions that changed, its
    pending deletion) replace its base's; base partitions at or beyond the count are gone.
    """

    __tablename__ = "snapshot_changed_topics"

    snapshot_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    topic_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    partition_count: Mapped[int] = mapped_column(Integer, doc="-1: the topic was deleted")


class SnapshotFeature(Base):
    """A finalized feature level (`metadata.version`, ...)."""

    __tablename__ = "snapshot_features"

    snapshot_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    level: Mapped[int] = mapped_column(Integer)


class SnapshotBroker(Base):
    """A registered broker."""

    __tablename__ = "snapshot_brokers"

    snapshot_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    broker_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    incarnation_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    broker_epoch: Mapped[int] = mapped_column(BigInteger)
    rack: Mapped[str | None] = mapped_column(Text)
    fenced: Mapped[bool] = mapped_column(Boolean)
    in_controlled_shutdown: Mapped[bool] = mapped_column(Boolean)


class SnapshotBrokerEndpoint(Base):
    """A listener of a broker, in the broker's order."""

    __tablename__ = "snapshot_broker_endpoints"

    snapshot_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    broker_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    host: Mapped[str] = mapped_column(Text)
    port: Mapped[int] = mapped_column(Integer)
    security_protocol: Mapped[int] = mapped_column(Integer)


class SnapshotBrokerFeature(Base):
    """A feature range a broker supports, in the broker's order."""

    __tablename__ = "snapshot_broker_features"

    snapshot_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    broker_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    min_supported_version: Mapped[int] = mapped_column(Integer)
    max_supported_version: Mapped[int] = mapped_column(Integer)


class SnapshotNamespace(Base):
    """A namespace; `name` is the full name, tiers separated by ':'."""

    __tablename__ = "snapshot_namespaces"

    snapshot_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    namespace_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    parent_id: Mapped[str | None] = mapped_column(String(ID_LENGTH))


class SnapshotTopic(Base):
    """A live topic; `namespace` is "" for the default namespace."""

    __tablename__ = "snapshot_topics"

    snapshot_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    topic_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    namespace: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)


class SnapshotPartition(Base):
    """A partition of a topic: replicas, ISR, leader, epochs and read/write mode.

    The biggest table by far, so it has no primary key constraint, only an index on
    `snapshot_id`: a (snapshot, topic, partition) B-tree costs about 1 s per million partitions
    on PostgreSQL (a third of the write budget), and uniqueness is the writer's (an image holds
    each partition once) and the checksum's to guarantee. The mapper still knows the key.
    """

    __tablename__ = "snapshot_partitions"
    __table_args__ = (CheckConstraint(_in("mode", MODE_NAMES), name="mode"),)

    snapshot_id: Mapped[int] = mapped_column(Integer, index=True)
    topic_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    partition_id: Mapped[int] = mapped_column(Integer)
    replicas: Mapped[str] = mapped_column(Text, doc="JSON array of broker ids")
    isr: Mapped[str] = mapped_column(Text, doc="JSON array of broker ids")
    removing_replicas: Mapped[str] = mapped_column(Text, doc="JSON array of broker ids")
    adding_replicas: Mapped[str] = mapped_column(Text, doc="JSON array of broker ids")
    leader: Mapped[int] = mapped_column(Integer, doc="-1: no leader")
    leader_epoch: Mapped[int] = mapped_column(Integer)
    partition_epoch: Mapped[int] = mapped_column(Integer)
    mode: Mapped[str] = mapped_column(String(16), doc="READ_WRITE, READ_ONLY or NONE")

    __mapper_args__ = {  # noqa: RUF012 - SQLAlchemy's declarative hook, read once
        "primary_key": [snapshot_id, topic_id, partition_id]
    }


class SnapshotPendingDeletion(Base):
    """A partition reduction waiting for its purge time: ids >= `partition_count` go."""

    __tablename__ = "snapshot_pending_deletions"

    snapshot_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    topic_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    partition_count: Mapped[int] = mapped_column(Integer)
    delete_after_ms: Mapped[int] = mapped_column(BigInteger)
    created_ms: Mapped[int] = mapped_column(BigInteger)


class SnapshotConfig(Base):
    """A config override; BROKER "" is the cluster-wide default, topics by qualified name."""

    __tablename__ = "snapshot_configs"
    __table_args__ = (CheckConstraint(_in("resource_type", RESOURCE_TYPE_NAMES), name="type"),)

    snapshot_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    resource_type: Mapped[str] = mapped_column(String(16), primary_key=True)
    resource_name: Mapped[str] = mapped_column(Text, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class SnapshotAcl(Base):
    """An ACL (KRaft's AccessControlEntryRecord), enums by name as `mlog acls list` shows them.

    The checks admit only what replay admits in a stored ACL (rules acl.resource-type,
    acl.pattern, acl.operation, acl.permission).
    """

    __tablename__ = "snapshot_acls"
    __table_args__ = (
        CheckConstraint(_in("resource_type", ACL_RESOURCE_TYPE_NAMES), name="resource_type"),
        CheckConstraint(_in("pattern_type", ACL_PATTERN_TYPE_NAMES), name="pattern_type"),
        CheckConstraint(_in("operation", ACL_OPERATION_NAMES), name="operation"),
        CheckConstraint(_in("permission_type", ACL_PERMISSION_NAMES), name="permission_type"),
    )

    snapshot_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    acl_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    resource_type: Mapped[str] = mapped_column(String(32))
    resource_name: Mapped[str] = mapped_column(Text)
    pattern_type: Mapped[str] = mapped_column(String(16), doc="LITERAL or PREFIXED")
    principal: Mapped[str] = mapped_column(Text, doc="Type:name, e.g. User:alice or User:*")
    host: Mapped[str] = mapped_column(Text, doc="client address, or * for any")
    operation: Mapped[str] = mapped_column(String(32))
    permission_type: Mapped[str] = mapped_column(String(16), doc="ALLOW or DENY")


class SnapshotScramCredential(Base):
    """A user's SCRAM credential for one mechanism: salt, StoredKey, ServerKey, iterations.

    What RFC 5802 lets a server keep (never a password), the same bytes the log holds; as
    binary columns (BLOB on SQLite, bytea on PostgreSQL).
    """

    __tablename__ = "snapshot_scram_credentials"
    __table_args__ = (CheckConstraint(_in("mechanism", SCRAM_MECHANISM_NAMES), name="mechanism"),)

    snapshot_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(Text, primary_key=True, doc="the user name")
    mechanism: Mapped[str] = mapped_column(
        String(16), primary_key=True, doc="SCRAM_SHA_256 or SCRAM_SHA_512"
    )
    salt: Mapped[bytes] = mapped_column(LargeBinary)
    stored_key: Mapped[bytes] = mapped_column(LargeBinary)
    server_key: Mapped[bytes] = mapped_column(LargeBinary)
    iterations: Mapped[int] = mapped_column(Integer)


class SnapshotClientWrite(Base):
    """A client's last idempotent write (ClientWriteRecord): what a retry of it is answered.

    `position` is the table's eviction order (0 = the oldest last write), so a snapshot read
    back evicts the same client next as the image it was written from.
    """

    __tablename__ = "snapshot_client_writes"

    snapshot_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    client_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, doc="eviction order, 0 = oldest")
    sequence: Mapped[int] = mapped_column(BigInteger)
    principal: Mapped[str | None] = mapped_column(Text, nullable=True)
    api_key: Mapped[int] = mapped_column(Integer)
    response: Mapped[bytes] = mapped_column(LargeBinary, doc="the stored answer (opaque)")


SNAPSHOTS: Table = Base.metadata.tables["snapshots"]
"""The `snapshots` table."""

CONTENT_TABLES: tuple[Table, ...] = tuple(
    Base.metadata.tables[name]
    for name in (
        "snapshot_features",
        "snapshot_brokers",
        "snapshot_broker_endpoints",
        "snapshot_broker_features",
        "snapshot_namespaces",
        "snapshot_topics",
        "snapshot_partitions",
        "snapshot_pending_deletions",
        "snapshot_configs",
        "snapshot_scram_credentials",
        "snapshot_acls",
        "snapshot_client_writes",
    )
)
"""The per-snapshot content tables, in the order a snapshot is written."""

CHANGED_TOPICS: Table = Base.metadata.tables["snapshot_changed_topics"]
"""An increment's changed and deleted topics (not content: not in the checksum)."""
