"""Snapshot tables: `snapshots` and the normalized per-snapshot content tables.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.String(length=22)


def upgrade() -> None:
    """Create the snapshot tables."""
    op.create_table(
        "snapshots",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("log_offset", sa.BigInteger(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("log_timestamp", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("record_count", sa.BigInteger(), nullable=False),
        sa.Column("checksum", sa.String(length=64), nullable=False),
        sa.Column("format_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_snapshots")),
    )
    op.create_index(op.f("ix_snapshots_log_offset"), "snapshots", ["log_offset"])
    op.create_table(
        "snapshot_features",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("snapshot_id", "name", name=op.f("pk_snapshot_features")),
    )
    op.create_table(
        "snapshot_brokers",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("broker_id", sa.Integer(), nullable=False),
        sa.Column("incarnation_id", _ID, nullable=False),
        sa.Column("broker_epoch", sa.BigInteger(), nullable=False),
        sa.Column("rack", sa.Text(), nullable=True),
        sa.Column("fenced", sa.Boolean(), nullable=False),
        sa.Column("in_controlled_shutdown", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("snapshot_id", "broker_id", name=op.f("pk_snapshot_brokers")),
    )
    op.create_table(
        "snapshot_broker_endpoints",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("broker_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("host", sa.Text(), nullable=False),
        sa.Column("port", sa.Integer(), nullable=False),
        sa.Column("security_protocol", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "snapshot_id", "broker_id", "position", name=op.f("pk_snapshot_broker_endpoints")
        ),
    )
    op.create_table(
        "snapshot_broker_features",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("broker_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("min_supported_version", sa.Integer(), nullable=False),
        sa.Column("max_supported_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "snapshot_id", "broker_id", "position", name=op.f("pk_snapshot_broker_features")
        ),
    )
    op.create_table(
        "snapshot_namespaces",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("namespace_id", _ID, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("parent_id", _ID, nullable=True),
        sa.PrimaryKeyConstraint("snapshot_id", "namespace_id", name=op.f("pk_snapshot_namespaces")),
    )
    op.create_table(
        "snapshot_topics",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("topic_id", _ID, nullable=False),
        sa.Column("namespace", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("snapshot_id", "topic_id", name=op.f("pk_snapshot_topics")),
    )
    op.create_table(
        "snapshot_partitions",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("topic_id", _ID, nullable=False),
        sa.Column("partition_id", sa.Integer(), nullable=False),
        sa.Column("replicas", sa.Text(), nullable=False),
        sa.Column("isr", sa.Text(), nullable=False),
        sa.Column("removing_replicas", sa.Text(), nullable=False),
        sa.Column("adding_replicas", sa.Text(), nullable=False),
        sa.Column("leader", sa.Integer(), nullable=False),
        sa.Column("leader_epoch", sa.Integer(), nullable=False),
        sa.Column("partition_epoch", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.CheckConstraint(
            "mode IN ('READ_WRITE', 'READ_ONLY', 'NONE')",
            name=op.f("ck_snapshot_partitions_mode"),
        ),
    )
    # No primary key: see replay/sql/models.py (PARTITIONS).
    op.create_index(
        op.f("ix_snapshot_partitions_snapshot_id"), "snapshot_partitions", ["snapshot_id"]
    )
    op.create_table(
        "snapshot_pending_deletions",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("topic_id", _ID, nullable=False),
        sa.Column("partition_count", sa.Integer(), nullable=False),
        sa.Column("delete_after_ms", sa.BigInteger(), nullable=False),
        sa.Column("created_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "snapshot_id", "topic_id", name=op.f("pk_snapshot_pending_deletions")
        ),
    )
    op.create_table(
        "snapshot_configs",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("resource_type", sa.String(length=16), nullable=False),
        sa.Column("resource_name", sa.Text(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.CheckConstraint(
            "resource_type IN ('UNKNOWN', 'TOPIC', 'BROKER', 'NAMESPACE')",
            name=op.f("ck_snapshot_configs_type"),
        ),
        sa.PrimaryKeyConstraint(
            "snapshot_id",
            "resource_type",
            "resource_name",
            "name",
            name=op.f("pk_snapshot_configs"),
        ),
    )


def downgrade() -> None:
    """Drop the snapshot tables (and every snapshot with them)."""
    op.drop_index(op.f("ix_snapshot_partitions_snapshot_id"), table_name="snapshot_partitions")
    for table in (
        "snapshot_configs",
        "snapshot_pending_deletions",
        "snapshot_partitions",
        "snapshot_topics",
        "snapshot_namespaces",
        "snapshot_broker_features",
        "snapshot_broker_endpoints",
        "snapshot_brokers",
        "snapshot_features",
    ):
        op.drop_table(table)
    op.drop_index(op.f("ix_snapshots_log_offset"), table_name="snapshots")
    op.drop_table("snapshots")
