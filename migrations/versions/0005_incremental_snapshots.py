"""Incremental snapshots: a snapshot may hold only what changed since a base snapshot.

Adds to `snapshots` the base an increment is written on (`base_id`, NULL for a full
snapshot), its place in the chain (`chain_length`, 0 for a full one), the small tables it
rewrote whole (`replaced_tables`) and the per-table checksum state a later increment starts
from (`content_sums`); and the table `snapshot_changed_topics` (the topics an increment
changed or deleted). Snapshots written before this revision stay full snapshots and load as
before; they lack `content_sums`, so the first snapshot after the upgrade is a full one.
The downgrade deletes the increments (an older metadata-log would read them as full
snapshots missing most of their rows).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CONTENT_TABLES = (
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


def upgrade() -> None:
    """Add the increment columns and the changed topics table."""
    with op.batch_alter_table("snapshots") as batch:
        batch.add_column(sa.Column("base_id", sa.Integer(), nullable=True))
        batch.add_column(
            sa.Column("chain_length", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("replaced_tables", sa.Text(), nullable=True))
        batch.add_column(sa.Column("content_sums", sa.Text(), nullable=True))
    op.create_table(
        "snapshot_changed_topics",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("topic_id", sa.String(length=22), nullable=False),
        sa.Column("partition_count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("snapshot_id", "topic_id", name=op.f("pk_snapshot_changed_topics")),
    )


def downgrade() -> None:
    """Delete the increments, then drop what `upgrade` added."""
    increments = "SELECT id FROM snapshots WHERE base_id IS NOT NULL"
    for table in _CONTENT_TABLES:
        op.execute(f"DELETE FROM {table} WHERE snapshot_id IN ({increments})")
    op.execute("DELETE FROM snapshots WHERE base_id IS NOT NULL")
    op.drop_table("snapshot_changed_topics")
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_column("content_sums")
        batch.drop_column("replaced_tables")
        batch.drop_column("chain_length")
        batch.drop_column("base_id")
