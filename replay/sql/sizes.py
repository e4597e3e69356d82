"""Snapshot sizes, and which snapshots retention keeps within a count and a byte bound.

A snapshot's size (`snapshots.content_bytes`) is the bytes of its own rows' values, measured by
the database as the store writes it: text and binary values by their length, numbers 8 each
(an increment counts its own rows, not its base's). It is what the rows hold, not the pages a
database file keeps for them: SQLite reuses the pages of deleted snapshots and does not shrink
its file. Snapshots written before it was counted are measured when retention first needs them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy import Boolean, ColumnElement, Connection, Integer, Table, func, literal, select

from replay.sql.info import SnapshotInfo
from replay.sql.models import CHANGED_TOPICS, CONTENT_TABLES

NUMBER_BYTES = 8
"""What a number column counts for."""


def _value_bytes() -> list[tuple[Table, ColumnElement[int]]]:
    """Per table, the SQL of one row's bytes (its columns but `snapshot_id`)."""
    made: list[tuple[Table, ColumnElement[int]]] = []
    for table in (*CONTENT_TABLES, CHANGED_TOPICS):
        parts: list[ColumnElement[int]] = []
        for column in table.columns:
            if column.name == "snapshot_id":
                continue
            if isinstance(column.type, Integer | Boolean):
                parts.append(literal(NUMBER_BYTES))
            else:
                parts.append(func.coalesce(func.length(column), 0))
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        made.append((table, total))
    return made


def measure(conn: Connection, snapshot_ids: Sequence[int]) -> dict[int, int]:
    """The size of each snapshot in `snapshot_ids`, summed by the database over its rows."""
    sizes = dict.fromkeys(snapshot_ids, 0)
    if not snapshot_ids:
        return sizes
    for table, row_bytes in _value_bytes():
        id_column = table.c.snapshot_id
        query = (
            select(id_column, func.sum(row_bytes))
            .where(id_column.in_(list(snapshot_ids)))
            .group_by(id_column)
        )
        for snapshot_id, total in conn.execute(query):
            sizes[snapshot_id] += int(total or 0)
    return sizes


def beyond_bounds(
    newest_first: Sequence[SnapshotInfo],
    sizes: Mapping[int, int],
    *,
    keep: int,
    max_bytes: int | None,
) -> list[SnapshotInfo]:
    """The snapshots retention deletes: beyond the newest `keep`, or beyond `max_bytes`.

    Of the newest `keep`, the newest whose sizes, with the bases they need, add up to at most
    `max_bytes` are kept. The newest snapshot is always kept, whatever its size. A kept
    increment's bases count once, with the first snapshot kept that needs them
    (`SnapshotStore.prune` keeps them).
    """
    by_id = {s.id: s for s in newest_first}
    kept: set[int] = set()
    total = 0
    for info in newest_first[:keep]:
        needed = [i for i in _chain(info, by_id) if i not in kept]
        adds = sum(sizes.get(i, 0) for i in needed)
        if max_bytes is not None and kept and total + adds > max_bytes:
            break
        kept.update(needed)
        total += adds
    return [s for s in newest_first if s.id not in kept]


def _chain(info: SnapshotInfo, by_id: Mapping[int, SnapshotInfo]) -> Iterable[int]:
    """`info`'s id and its bases' (those still listed), newest first."""
    seen: set[int] = set()
    current: SnapshotInfo | None = info
    while current is not None and current.id not in seen:
        seen.add(current.id)
        yield current.id
        current = None if current.base_id is None else by_id.get(current.base_id)


__all__ = ["NUMBER_BYTES", "beyond_bounds", "measure"]
