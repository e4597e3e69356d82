"""A SQLite snapshot's partition rows read topic by topic in C, straight into records.

The sqlite3 module makes a tuple and five strings a partition row (44% of a 1M-partition
snapshot's load, sampled); `replay.sql._sqlite_rows` steps the same query on the same connection
(the handle under the sqlite3 module's, so the same transaction) and hands `content` each
topic's records, checksum bytes and replica lists built. `partition_runs` says whether this
connection can be read so (the helper built, a SQLite handle it can reach); where it cannot,
or where rows are not what the store writes (`RunsUnusable`), the store reads them through
the driver (`row_io.select_chunks`), whose path names any damage.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import sys
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any

from sqlalchemy import Connection, Table

from replay.sql.checksum import Row
from replay.sql.row_io import Progress, dbapi_connection, reporting, select_sql

try:
    from replay.sql import _sqlite_rows as _compiled  # type: ignore[attr-defined]  # optional C
except ImportError:  # built without a C compiler or SQLite's headers
    _compiled = None

Run = tuple[Any, ...]
"""One topic's partition rows: `(tid, topic_id, records, data, key)` built (`data` the marshal
bytes of its rows, `key` its replica lists' text), or `(tid, rows)` as row tuples."""

Overlay = Callable[[Iterator[Run]], Iterator[Run]]
"""What an increment does to the base's runs: the `raw` topics' rows changed, new topics added."""


class RunsUnusable(Exception):
    """The compiled read met rows that are not what the store writes: read them in Python."""


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionRuns(Iterable[Row]):
    """A snapshot's partition rows, read a topic at a time by `runs` (or as rows, iterated)."""

    connection: sqlite3.Connection
    sql: str
    snapshot_id: int
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
            reader = _compiled.TopicRuns(
                self.connection, self.sql, self.snapshot_id, arrays, modes, parse_id, raw
            )
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
    if _compiled is None or conn.dialect.name != "sqlite":
        return None
    raw = dbapi_connection(conn)
    cursor = raw.cursor()
    try:
        files = {row[1]: row[2] for row in cursor.execute("PRAGMA database_list")}
    finally:
        cursor.close()
    version = sqlite3.sqlite_version_info
    number = version[0] * 1_000_000 + version[1] * 1_000 + version[2]
    if _compiled.handle_reason(raw, files.get("main", ""), sys.version_info[:2], number):
        return None
    return PartitionRuns(raw, select_sql(conn, table), snapshot_id, progress)


def available() -> bool:
    """Whether the compiled reader was built here."""
    return _compiled is not None


__all__ = [
    "Overlay",
    "PartitionRuns",
    "Row",
    "Run",
    "RunsUnusable",
    "available",
    "partition_runs",
]
