"""The snapshot database's schema revision: check it against this code, upgrade, downgrade.

The Alembic environment ships in the `migrations` package and is located with
`importlib.resources`, so it works from an installed wheel and from any working directory. The
config is built in code and handed the caller's connection, so a check and the migration after
it share one connection.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, inspect

from replay.sql.models import METADATA
from replay.sql.revision import VERSION_TABLE, SchemaState, SchemaStatus

__all__ = [
    "VERSION_TABLE",
    "SchemaState",
    "SchemaStatus",
    "alembic_config",
    "downgrade",
    "drift",
    "head_revision",
    "migrations_location",
    "schema_status",
    "script_directory",
    "upgrade",
]


def migrations_location() -> str:
    """The directory of the Alembic environment inside the installed `migrations` package."""
    return str(files("migrations"))


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic config for the packaged migrations, bound to `connection` if given."""
    config = Config()
    config.set_main_option("script_location", migrations_location())
    config.attributes["connection"] = connection
    return config


@cache
def script_directory() -> ScriptDirectory:
    """The packaged revisions (read once per process)."""
    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    """The newest revision this code knows (the history is linear: one head)."""
    head = script_directory().get_current_head()
    if head is None:  # pragma: no cover - the package always ships revisions
        raise RuntimeError("the migrations package holds no revision")
    return head


def schema_status(connection: Connection) -> SchemaStatus:
    """Compare the database behind `connection` with this code's head revision."""
    head = head_revision()
    revisions = MigrationContext.configure(connection).get_current_heads()
    if not revisions:
        names = set(inspect(connection).get_table_names())
        if names & set(METADATA.tables):
            return SchemaStatus(state=SchemaState.UNMANAGED, revision=None, head=head)
        return SchemaStatus(state=SchemaState.EMPTY, revision=None, head=head)
    revision = revisions[0]
    known = {script.revision for script in script_directory().walk_revisions()}
    if len(revisions) > 1 or revision not in known:
        return SchemaStatus(state=SchemaState.AHEAD, revision=",".join(revisions), head=head)
    if revision == head:
        return SchemaStatus(state=SchemaState.CURRENT, revision=revision, head=head)
    return SchemaStatus(state=SchemaState.BEHIND, revision=revision, head=head)


def drift(connection: Connection) -> list[str]:
    """Differences between the tables in the database and the models (empty = none).

    Alembic's autogenerate comparison: tables, columns, types, nullability, indexes and keys.
    Other tables in the database (it may be shared) are not ours and are left out.
    """
    ours = set(METADATA.tables)

    def include_name(name: str | None, type_: str, parent_names: object) -> bool:
        return type_ != "table" or name in ours

    context = MigrationContext.configure(
        connection, opts={"compare_type": True, "include_name": include_name}
    )
    return [repr(item) for item in compare_metadata(context, METADATA)]


def upgrade(connection: Connection, revision: str = "head") -> None:
    """Migrate the database up to `revision`, inside the caller's transaction."""
    command.upgrade(alembic_config(connection), revision)


def downgrade(connection: Connection, revision: str) -> None:
    """Migrate the database down to `revision` ("base" removes every snapshot table)."""
    command.downgrade(alembic_config(connection), revision)
