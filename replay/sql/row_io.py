"""Rows between the snapshot tables and Python, each driver its fastest way.

PostgreSQL through psycopg's COPY, SQLite through the driver's executemany over a generator,
any other database through SQLAlchemy Core in chunks; reads as plain tuples in chunks straight
from the driver's cursor. `replay.sql.store` decides what to read and write.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection, Table

from replay.sql.checksum import COLUMNS, PARTITIONS, Row
from replay.sql.errors import SnapshotStoreError

T = TypeVar("T")

Progress = Callable[[int], None]
"""Called with the number of rows written or read since the last call."""

PROGRESS_EVERY = 65_536
PACE_ROWS = 64
"""Rows written between two calls of a write's `pace` (~0.1 ms of work: the clock is read
there, so not after every row)."""
CHUNK = 10_000
"""Rows per chunk read from a cursor or written through SQLAlchemy Core."""


def table_columns(table: Table) -> tuple[str, ...]:
    """A per-snapshot table's columns after `snapshot_id`: the content's, or the table's own."""
    known = COLUMNS.get(table.name)
    if known is not None:
        return known
    return tuple(c.name for c in table.columns if c.name != "snapshot_id")


def _columns(conn: Connection, table: Table) -> list[str]:
    quote = conn.dialect.identifier_preparer.quote
    return [quote(c) for c in ("snapshot_id", *table_columns(table))]


def _cursor(conn: Connection) -> Any:
    """The driver's own cursor on the connection's current transaction.

    Typed Any: each driver's cursor has its own extras (COPY for psycopg, executemany over an
    iterator for sqlite3).
    """
    return dbapi_connection(conn).cursor()


def _reading_cursor(conn: Connection, name: str) -> Any:
    """A cursor that steps through a query's rows (SQLite's; PostgreSQL's on the server).

    psycopg's client-side cursor receives a whole result into libpq's memory before the first
    row is read (the partition table of a 1M-partition snapshot: ~150 MB beside the image it
    makes); a named cursor is a server-side one (DECLARE), and each `fetchmany` a FETCH. Where
    libpq streams in chunks, `_streamed_chunks` is used instead (`_streams`).
    """
    if conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg":
        return dbapi_connection(conn).cursor(name=f"mlog_read_{name}")
    return _cursor(conn)


def dbapi_connection(conn: Connection) -> Any:
    """The driver's own connection under `conn` (typed Any: each driver's has its own API)."""
    driver_connection = conn.connection.dbapi_connection
    if driver_connection is None:  # pragma: no cover - the connection is open here
        raise SnapshotStoreError("the database connection was closed")
    return driver_connection


LIBPQ_CHUNKED_ROWS = 170000
"""The first libpq (17) with the chunked rows mode `cursor.stream(size=...)` needs."""


@functools.cache
def _psycopg_streams_in_chunks() -> bool:
    """Whether psycopg streams a result `CHUNK` rows at a time.

    That takes psycopg 3.2+ (`stream`'s `size`) over libpq 17+ (its chunked rows mode).
    """
    import psycopg  # noqa: PLC0415 - only where PostgreSQL is used

    stream = getattr(psycopg.Cursor, "stream", None)
    return (
        stream is not None
        and "size" in inspect.signature(stream).parameters
        and psycopg.pq.version() >= LIBPQ_CHUNKED_ROWS
    )


def _streams(conn: Connection) -> bool:
    """Whether this connection's reads stream in chunks (`_streamed_chunks`)."""
    return (
        conn.dialect.name == "postgresql"
        and conn.dialect.driver == "psycopg"
        and _psycopg_streams_in_chunks()
    )


def _streamed_chunks(conn: Connection, sql: str, params: tuple[Any, ...]) -> Iterator[list[Row]]:
    """A query's rows in chunks of `CHUNK`, libpq receiving them a chunk at a time.

    One plain query, no DECLARE and no FETCH round trip a chunk: a 1M-partition snapshot's
    partition rows arrive in about 0.35 s against 0.85 s through a named cursor, and its
    start is 0.85x (`bench/start_bench.py --against`). A stream given up half-way (damage found,
    partitions out of their written order) is read to its end: psycopg would cancel the query,
    and a cancelled query aborts the transaction the store then reads again in.
    """
    cursor = dbapi_connection(conn).cursor()
    rows = cursor.stream(sql, params, size=CHUNK)
    ended = False
    try:
        while True:
            chunk = list(itertools.islice(rows, CHUNK))
            if not chunk:
                ended = True
                return
            yield chunk
    finally:
        if not ended:
            with contextlib.suppress(Exception):  # the read's own error is the one to raise
                for _ in rows:
                    pass
        rows.close()
        cursor.close()


def _placeholder(conn: Connection) -> str:
    style = conn.dialect.paramstyle
    if style == "qmark":
        return "?"
    if style in ("format", "pyformat"):
        return "%s"
    raise SnapshotStoreError(f"driver paramstyle {style!r} is not supported for fast reads")


def select_sql(
    conn: Connection, table: Table, order_by: Sequence[str] = (), *, literal_id: int | None = None
) -> str:
    """The query of one snapshot's content rows of `table` (the snapshot id its one parameter).

    With `literal_id` the id is written in the query instead (a COPY takes no parameters).
    """
    names = _columns(conn, table)[1:]
    quote = conn.dialect.identifier_preparer.quote
    snapshot = _placeholder(conn) if literal_id is None else str(int(literal_id))
    where = f"snapshot_id = {snapshot}"
    sql = f"SELECT {', '.join(names)} FROM {quote(table.name)} WHERE {where}"
    if order_by:
        sql += f" ORDER BY {', '.join(quote(name) for name in order_by)}"
    return sql


def select_chunks(
    conn: Connection, table: Table, snapshot_id: int, *, order_by: Sequence[str] = ()
) -> Generator[list[Row], None, None]:
    """Content rows of one snapshot as plain tuples, in chunks straight from the cursor.

    `order_by`: columns the database sorts them by (none: the order it finds them in).
    """
    sql = select_sql(conn, table, order_by)
    if _streams(conn):
        yield from _streamed_chunks(conn, sql, (snapshot_id,))
        return
    cursor = _reading_cursor(conn, table.name)
    try:
        cursor.execute(sql, (snapshot_id,))
        while True:
            chunk = cursor.fetchmany(CHUNK)
            if not chunk:
                return
            yield chunk
    finally:
        cursor.close()


Writer = Callable[[Connection, Table, int, Iterator[Row]], None]
"""Writes one snapshot's rows of one table: (connection, table, snapshot id, rows)."""


def writer_for(conn: Connection) -> Writer:
    """The fastest way this connection's driver has to write a table's rows."""
    if conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg":
        return _copy_rows
    if conn.dialect.name == "sqlite":
        return _executemany_rows
    return core_rows


def _copy_rows(conn: Connection, table: Table, snapshot_id: int, rows: Iterator[Row]) -> None:
    """PostgreSQL: COPY FROM STDIN through psycopg 3."""
    from psycopg.copy import QueuedLibpqWriter  # noqa: PLC0415 - only PostgreSQL needs psycopg

    quoted = conn.dialect.identifier_preparer.quote(table.name)
    sql = f"COPY {quoted} ({', '.join(_columns(conn, table))}) FROM STDIN"
    cursor = _cursor(conn)
    try:
        # The queued writer sends on a worker thread (libpq releases the GIL), so building the
        # next rows overlaps with the network and the server.
        with cursor.copy(sql, writer=QueuedLibpqWriter(cursor)) as copy:
            write_row = copy.write_row
            for row in rows:
                write_row((snapshot_id, *row))
    finally:
        cursor.close()


def _executemany_rows(
    conn: Connection, table: Table, snapshot_id: int, rows: Iterator[Row]
) -> None:
    """SQLite: the driver's executemany over a generator (no per-row Python in SQLAlchemy)."""
    names = _columns(conn, table)
    sql = (
        f"INSERT INTO {conn.dialect.identifier_preparer.quote(table.name)} ({', '.join(names)}) "
        f"VALUES ({', '.join('?' for _ in names)})"
    )
    cursor = _cursor(conn)
    try:
        cursor.executemany(sql, ((snapshot_id, *row) for row in rows))
    finally:
        cursor.close()


def core_rows(conn: Connection, table: Table, snapshot_id: int, rows: Iterator[Row]) -> None:
    """Any other database: SQLAlchemy Core executemany in chunks."""
    names = ("snapshot_id", *table_columns(table))
    while True:
        chunk = [
            dict(zip(names, (snapshot_id, *row), strict=True))
            for row in itertools.islice(rows, CHUNK)
        ]
        if not chunk:
            return
        conn.execute(table.insert(), chunk)


def reporting(
    rows: Iterable[T], progress: Progress | None, rows_in: Callable[[T], int] | None = None
) -> Iterator[T]:
    """`rows`, telling `progress` how many passed every `PROGRESS_EVERY` (and at the end).

    `rows_in`: how many rows an item stands for (one, if None: each item is a row).
    """
    if progress is None:
        yield from rows
        return
    pending = 0
    for row in rows:
        yield row
        pending += 1 if rows_in is None else rows_in(row)
        if pending >= PROGRESS_EVERY:
            progress(pending)
            pending = 0
    if pending:
        progress(pending)


def paced(rows: Iterable[Row], pace: Callable[[], None]) -> Iterator[Row]:
    """`rows`, calling `pace` after every `PACE_ROWS` of them."""
    rows = iter(rows)
    while chunk := list(itertools.islice(rows, PACE_ROWS)):
        yield from chunk
        pace()


def counting(chunks: Iterator[list[Row]], progress: Progress | None) -> Iterator[list[Row]]:
    """`chunks`, telling `progress` each one's size."""
    for chunk in chunks:
        if progress is not None:
            progress(len(chunk))
        yield chunk


def materialized(rows: Mapping[str, Iterable[Row]]) -> dict[str, Iterable[Row]]:
    """Every table's rows read whole (a list), but the partitions', which stay a stream."""
    return {name: list(it) if name != PARTITIONS else it for name, it in rows.items()}
