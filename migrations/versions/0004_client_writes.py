"""The clients' last idempotent writes: the table `snapshot_client_writes`.

One row per client id: the last idempotent write the image keeps for it (ClientWriteRecord)
and its place in the eviction order. Snapshots written before this revision (format version 2)
lack it; they stay in the database but are not read (the log is replayed instead) until newer
snapshots replace them. The stored answer is a binary column: BLOB on SQLite, bytea on
PostgreSQL.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the client writes table."""
    op.create_table(
        "snapshot_client_writes",
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.String(length=22), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("principal", sa.Text(), nullable=True),
        sa.Column("api_key", sa.Integer(), nullable=False),
        sa.Column("response", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("snapshot_id", "client_id", name=op.f("pk_snapshot_client_writes")),
    )


def downgrade() -> None:
    """Drop the client writes table (snapshots lose it: they become stale)."""
    op.drop_table("snapshot_client_writes")
