"""Snapshot sizes: `snapshots.content_bytes`, what retention by bytes counts.

The bytes of a snapshot's own rows' values (an increment's own rows, not its base's): text and
binary values by their length, numbers 8 each. Snapshots written before this revision have
NULL, and the store measures them the first time retention by bytes needs them.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the column (NULL: not measured yet)."""
    with op.batch_alter_table("snapshots") as batch:
        batch.add_column(sa.Column("content_bytes", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    """Drop it."""
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_column("content_bytes")
