"""The SQLite file of a snapshot store: created private, and its connections' settings.

`replay.sql.store` binds these to its engine: a new database file is made 0600 before SQLite
opens it, every connection leaves transactions to SQLAlchemy's `BEGIN` and uses WAL.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from metadata_log.private_files import FILE_MODE


def create_private_database(path: Path) -> None:
    """Create `path` empty (an empty file is an empty database) with mode 0600, if missing.

    Created here, not by SQLite, which would apply the umask (0644 under 022, 0666 under
    000). SQLite gives the -wal, -shm and -journal files it makes beside a database the
    database's own mode (unix `robust_open`), umask or not, so they are 0600 too. O_EXCL:
    another process's new database is never truncated.
    """
    if not path.parent.is_dir():
        return  # SQLite's own error names the missing directory
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, FILE_MODE)  # a umask such as 0o277 would leave 0400
    finally:
        os.close(fd)


def connect(dbapi_connection: Any, _record: Any) -> None:
    """A new connection of a writer: transactions by SQLAlchemy, WAL, synchronous=NORMAL."""
    # Let SQLAlchemy's "begin" event issue BEGIN (pysqlite's own implicit transactions skip
    # SELECTs, so a load would not read one consistent state); WAL lets readers go on while a
    # snapshot is written, and synchronous=NORMAL is durable enough for derived data.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def connect_read_only(dbapi_connection: Any, _record: Any) -> None:
    """A new connection of a reader of a file it cannot write: transactions by SQLAlchemy."""
    # As `_sqlite_connect`, without the pragmas that would write to the file.
    dbapi_connection.isolation_level = None


WRITE_FIRST = "mlog_sqlite_write_first"
"""An execution option: the connection's next transaction takes the write lock as it begins.

A transaction that reads before it writes (is the schema there? then create it) and begins
with a plain BEGIN fails with "database is locked" if another writer committed meanwhile: its
read is stale, and SQLite does not wait. `BEGIN IMMEDIATE` waits for the other writer
instead (the busy timeout), and what it then reads is current. PostgreSQL ignores it."""


def begin(conn: Connection) -> None:
    """A transaction begins: BEGIN, so that a load reads one consistent state."""
    immediate = conn.get_execution_options().get(WRITE_FIRST, False)
    conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")
