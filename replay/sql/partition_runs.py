"""A snapshot's partition rows read topic by topic in C, straight into records.

A driver makes a tuple and five strings a partition row (the sqlite3 module: 44% of a
1M-partition snapshot's load, sampled; psycopg: a quarter). The compiled readers read the same
rows on the same connection (so in the same transaction) through the database's C API -- SQLite's
handle under the sqlite3 module's (`replay.sql._sqlite_rows`), psycopg's libpq by COPY
(`replay.sql._pg_copy_rows`) -- and hand `content` each topic's records, checksum bytes and
replica lists built (`replay.sql._row_runs`). `partition_runs` says whether this connection can
be read so (the helper built, a handle it can reach); where it cannot, or where rows are not
what the store writes (`RunsUnusable`), the store reads them through the driver
(`row_io.select_chunks`), whose path names any damage.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import sqlite3
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Table

from replay.sql.checksum import Row
from replay.sql.row_io import Progress, dbapi_connection, reporting, select_sql

try:
    from replay.sql import _row_runs as _compiled  # type: ignore[attr-defined]  # optional C
except ImportError:  # built without a C compiler
    _compiled = None
try:
    from replay.sql import _sqlite_rows as _sqlite  # type: ignore[attr-defined]  # optional C
except ImportError:  # built without SQLite's headers
    _sqlite = None
try:
    from replay.sql import _pg_copy_rows as _postgres  # type: ignore[attr-defined]  # optional C
except ImportError:
    _postgres = None

Run = tuple[Any, ...]
"""One topic's partition rows: `(tid, topic_id, records, digest, key)` built (`digest` the
checksum's `item_digest` of its rows, `key` its replica lists' text), or `(tid, rows)` as row
tuples."""

Overlay = Callable[[Iterator[Run]], Iterator[Run]]
"""What an increment does to the base's runs: the `raw` topics' rows changed, new topics added."""

Opener = Callable[[dict[str, Any], dict[str, Any], Any, object], Iterator[Run]]
"""A compiled reader of the rows, made from `(arrays, modes, parse_id, raw)`."""


class RunsUnusable(Exception):
    """The compiled read met rows that are not what the store writes: read them in Python."""


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionRuns(Iterable[Row]):
    """A snapshot's partition rows, read a topic at a time by `runs` (or as rows, iterated)."""

    opener: Opener
    progress: Progress | None = None
    raw: frozenset[str] = frozenset()
    """Topics given as row tuples (those an increment changes)."""
    overlay: Overlay | None = None

    def overlaid(self, raw: frozenset[str], overlay: Overlay) -> PartitionRuns:
        """These runs with an increment's topics `raw` laid over by `overlay`."""
        return dataclasses.replace(self, raw=raw, overlay=overlay)

    def __iter__(self) -> Iterator[Row]:
        """The rows as tuples (as the driver gives them), an increment's laid over."""
        for run in self._runs({}, {}, None, every_raw=True):
            yield from run[1]

    def runs(
        self, arrays: dict[str, tuple[int, ...]], modes: dict[str, Any], parse_id: Any
    ) -> Generator[Run, None, None]:
        """The runs, in the order the database holds them (`arrays`: text -> shared tuple)."""
        return self._runs(arrays, modes, parse_id, every_raw=False)

    def _runs(
        self,
        arrays: dict[str, tuple[int, ...]],
        modes: dict[str, Any],
        parse_id: Any,
        *,
        every_raw: bool,
    ) -> Generator[Run, None, None]:
        assert _compiled is not None
        raw: object = True if every_raw else self.raw
        try:
            reader: Any = self.opener(arrays, modes, parse_id, raw)
        except _compiled.Unusable as exc:
            raise RunsUnusable(str(exc)) from None
        try:
            runs = reporting(_unwrapped(reader), self.progress, _rows_in)
            yield from runs if self.overlay is None else self.overlay(runs)
        finally:
            reader.close()


def _unwrapped(reader: Iterator[Run]) -> Iterator[Run]:
    try:
        yield from reader
    except _compiled.Unusable as exc:
        raise RunsUnusable(str(exc)) from None


def _rows_in(run: Run) -> int:
    """The partitions of a run: its rows, or its records."""
    return len(run[1]) if len(run) == 2 else len(run[2])


def partition_runs(
    conn: Connection, table: Table, snapshot_id: int, progress: Progress | None
) -> PartitionRuns | None:
    """The compiled read of a snapshot's partition rows on `conn`, or None where there is none."""
    if _compiled is None:
        return None
    if conn.dialect.name == "sqlite":
        return _sqlite_runs(conn, table, snapshot_id, progress)
    if conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg":
        return _postgres_runs(conn, table, snapshot_id, progress)
    return None


def _sqlite_runs(
    conn: Connection, table: Table, snapshot_id: int, progress: Progress | None
) -> PartitionRuns | None:
    if _sqlite is None:
        return None
    raw = dbapi_connection(conn)
    cursor = raw.cursor()
    try:
        files = {row[1]: row[2] for row in cursor.execute("PRAGMA database_list")}
    finally:
        cursor.close()
    version = sqlite3.sqlite_version_info
    number = version[0] * 1_000_000 + version[1] * 1_000 + version[2]
    if _sqlite.handle_reason(raw, files.get("main", ""), sys.version_info[:2], number):
        return None
    opener = functools.partial(_sqlite.TopicRuns, raw, select_sql(conn, table), snapshot_id)
    return PartitionRuns(opener, progress)


def _postgres_runs(
    conn: Connection, table: Table, snapshot_id: int, progress: Progress | None
) -> PartitionRuns | None:
    if _postgres is None or libpq_reason() is not None:
        return None
    copy = f"COPY ({select_sql(conn, table, literal_id=snapshot_id)}) TO STDOUT"
    opener = functools.partial(_postgres.CopyRuns, dbapi_connection(conn), copy)
    return PartitionRuns(opener, progress)


@functools.cache
def libpq_reason() -> str | None:
    """None where the PostgreSQL reader can use psycopg's libpq, else why not (a phrase).

    The library is the one this process loaded for psycopg (`/proc/self/maps`: exactly one
    libpq), checked by its version against psycopg's; a `PGconn` goes to no other library.
    """
    if _postgres is None:
        return "the PostgreSQL reader is not built"
    import psycopg  # noqa: PLC0415 - only where PostgreSQL is used

    paths = loaded_libraries("libpq")
    if len(paths) != 1:
        return f"{len(paths)} libpq libraries are loaded, not one"
    reason: str | None = _postgres.bind(paths[0], psycopg.pq.version())
    return reason


def loaded_libraries(prefix: str, maps: Path = Path("/proc/self/maps")) -> list[str]:
    """The shared libraries this process has mapped whose file names start with `prefix`."""
    try:
        text = maps.read_text(errors="surrogateescape")
    except OSError:  # not Linux: none known
        return []
    found = set()
    for line in text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6:
            name = os.path.basename(fields[5])
            if name.startswith(prefix) and ".so" in name:
                found.add(fields[5])
    return sorted(found)


def available() -> bool:
    """Whether the compiled reader was built here (SQLite's)."""
    return _compiled is not None and _sqlite is not None


__all__ = [
    "Overlay",
    "PartitionRuns",
    "Row",
    "Run",
    "RunsUnusable",
    "available",
    "libpq_reason",
    "loaded_libraries",
    "partition_runs",
]
