"""A new database's snapshot schema, made at the head revision without Alembic.

A server's first snapshot into a new database (a new data directory's `snapshots.db`, an
empty PostgreSQL schema) creates the tables. Through Alembic's migrations that imported
Alembic, Mako and Pygments into the serving process for its whole life: 11 MiB of RSS, a
twentieth of a 1M-partition image (issue 58 bounds a start's peak at 1.3x the image), and
about 0.15 s of CPU beside the first snapshot. Alembic's own recipe for a new database gives
the same result without replaying the history: the tables from the models
(`METADATA.create_all`) and the version table stamped with the head revision. The tests keep
the two equal on SQLite and PostgreSQL (every table, column, key, index and check,
reflected), and Alembic reads the result as current with no drift. Migrating an older
database (`mlog db upgrade`) still runs the migrations.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Connection,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    inspect,
    select,
)

from replay.sql.models import METADATA
from replay.sql.revision import HEAD_REVISION, VERSION_TABLE

VERSION = Table(
    VERSION_TABLE,
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name=f"{VERSION_TABLE}_pkc"),
)
"""Alembic's version table, as Alembic creates it."""


def is_new(connection: Connection) -> bool:
    """No snapshot table and no revision: what Alembic calls an empty database."""
    names = set(inspect(connection).get_table_names())
    if names & set(METADATA.tables):
        return False
    if VERSION_TABLE not in names:
        return True
    return connection.execute(select(VERSION.c.version_num).limit(1)).first() is None


def create_if_new(connection: Connection) -> bool:
    """Create the schema at the head if the database is new; False if it is not (any more).

    In the caller's transaction, which on SQLite holds the write lock from its start: another
    process that created the schema meanwhile is seen here, not overwritten.
    """
    if not is_new(connection):
        return False
    create_at_head(connection)
    return True


def create_at_head(connection: Connection) -> None:
    """Create every snapshot table and stamp the head revision, in the caller's transaction."""
    METADATA.create_all(connection)
    VERSION.create(connection, checkfirst=True)
    connection.execute(VERSION.insert().values(version_num=HEAD_REVISION))
