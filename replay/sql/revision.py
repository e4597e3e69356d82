"""The snapshot schema's revision as this code knows it, without importing Alembic.

`schema_status` (in `replay.sql.schema`) asks Alembic how a database compares with the packaged
migrations: that imports Alembic and reads every revision file, about as long as the rest of a
command's start-up. A database at the head revision, the common case, is recognised from its
`alembic_version` row and `HEAD_REVISION` alone; Alembic is asked only when they differ.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

VERSION_TABLE = "alembic_version"

HEAD_REVISION = "0006"
"""The newest revision in `migrations/versions` (a test checks it against Alembic's head)."""


class SchemaState(enum.Enum):
    """How a database's schema compares with this code's migrations."""

    EMPTY = "empty"
    """No snapshot tables and no revision: a new database, created on first use."""
    CURRENT = "current"
    BEHIND = "behind"
    AHEAD = "ahead"
    UNMANAGED = "unmanaged"
    """Snapshot tables without an Alembic revision: not created by these migrations."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SchemaStatus:
    """A database's revision, this code's head revision, and how they compare."""

    state: SchemaState
    revision: str | None
    head: str

    def describe(self) -> str:
        """One line for `mlog db current`."""
        shown = self.revision or "none"
        if self.state is SchemaState.CURRENT:
            return f"revision {shown} (head): up to date"
        if self.state is SchemaState.EMPTY:
            return f"no schema yet (head is {self.head}); `mlog db upgrade` creates it"
        if self.state is SchemaState.BEHIND:
            return f"revision {shown}, behind head {self.head}; run `mlog db upgrade`"
        if self.state is SchemaState.AHEAD:
            return (
                f"revision {shown} is unknown to this metadata-log (head {self.head}): a newer "
                "version wrote it; upgrade metadata-log or use another database"
            )
        return (
            "snapshot tables exist but carry no Alembic revision; they were not created by "
            "`mlog db upgrade`: drop them or point --db at another database"
        )
