"""ACLs and SCRAM credentials: the tables `snapshot_acls` and `snapshot_scram_credentials`.

Snapshots written before this revision (format version 1) hold neither; they stay in the
database but are not read (the log is replayed instead) until newer snapshots replace them.
Salts and keys are binary columns: BLOB on SQLite, bytea on PostgreSQL.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.String(length=22)

# The values a stored ACL or credential can have, frozen as of this revision (the models'
# tuples may grow in a later one, with its own migration).
_RESOURCE_TYPES = (
    "TOPIC",
    "GROUP",
    "CLUSTER",
    "TRANSACTIONAL_ID",
    "DELEGATION_TOKEN",
    "USER",
    "NAMESPACE",
)
_PATTERN_TYPES = ("LITERAL", "PREFIXED")
_OPERATIONS = (
    "ALL",
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "CLUSTER_ACTION",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "CREATE_TOKENS",
    "DESCRIBE_TOKENS",
)
_PERMISSIONS = ("DENY", "ALLOW")
_MECHANISMS = ("SCRAM_SHA_256", "SCRAM_SHA_512")


def _any_of(column: str, values: Sequence[str]) -> str:
    # OR-chains, not IN lists: see 0002.
    return " OR ".join(f"{column} = '{v}'" for v in values)


def upgrade() -> None:
    """Create the ACL and SCRAM credential tables."""
    op.create_table(
        "snapshot_scram_credentials",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("mechanism", sa.String(length=16), nullable=False),
        sa.Column("salt", sa.LargeBinary(), nullable=False),
        sa.Column("stored_key", sa.LargeBinary(), nullable=False),
        sa.Column("server_key", sa.LargeBinary(), nullable=False),
        sa.Column("iterations", sa.Integer(), nullable=False),
        sa.CheckConstraint(
            _any_of("mechanism", _MECHANISMS),
            name=op.f("ck_snapshot_scram_credentials_mechanism"),
        ),
        sa.PrimaryKeyConstraint(
            "snapshot_id", "name", "mechanism", name=op.f("pk_snapshot_scram_credentials")
        ),
    )
    op.create_table(
        "snapshot_acls",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("acl_id", _ID, nullable=False),
        sa.Column("resource_type", sa.String(length=32), nullable=False),
        sa.Column("resource_name", sa.Text(), nullable=False),
        sa.Column("pattern_type", sa.String(length=16), nullable=False),
        sa.Column("principal", sa.Text(), nullable=False),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("operation", sa.String(length=32), nullable=False),
        sa.Column("permission_type", sa.String(length=16), nullable=False),
        sa.CheckConstraint(
            _any_of("resource_type", _RESOURCE_TYPES),
            name=op.f("ck_snapshot_acls_resource_type"),
        ),
        sa.CheckConstraint(
            _any_of("pattern_type", _PATTERN_TYPES), name=op.f("ck_snapshot_acls_pattern_type")
        ),
        sa.CheckConstraint(
            _any_of("operation", _OPERATIONS), name=op.f("ck_snapshot_acls_operation")
        ),
        sa.CheckConstraint(
            _any_of("permission_type", _PERMISSIONS),
            name=op.f("ck_snapshot_acls_permission_type"),
        ),
        sa.PrimaryKeyConstraint("snapshot_id", "acl_id", name=op.f("pk_snapshot_acls")),
    )


def downgrade() -> None:
    """Drop the ACL and SCRAM credential tables (snapshots lose them: they become stale)."""
    op.drop_table("snapshot_acls")
    op.drop_table("snapshot_scram_credentials")
