"""The compiled reader of a SQLite snapshot's partition rows (`replay.sql.partition_runs`).

Whatever the rows hold, a load through it must end as the driver's path ends: the same image
and checksum, or the same error. It hands back to that path (`RunsUnusable`) any row it is
not sure of, rows out of order included (that path sorts them).
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

from replay.image import MetadataImage
from replay.sql import content, increments, partition_runs, row_io
from replay.sql.store import SnapshotStore
from tests.support.sql_backends import LoadWays, execute_sql
from tests.support.sweeps import swept

compiled: Any = pytest.importorskip("replay.sql._sqlite_rows")


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'snapshots.db'}"


def test_a_load_through_it_is_the_drivers_load(
    url: str, image: MetadataImage, reads: LoadWays
) -> None:
    with SnapshotStore(url) as store:
        info = store.write(image)
    compiled_way = reads.outcome(url, info.id, enabled=True)
    assert reads.ways == ["compiled", "compiled"]
    reads.ways.clear()
    driver_way = reads.outcome(url, info.id, enabled=False)
    assert reads.ways == ["driver", "driver"]
    assert compiled_way == driver_way
    computed, error, loaded = compiled_way
    assert error is None and computed == info.checksum and loaded == image
    # The shared values are shared: one tuple per distinct replica list, one id per topic.
    for topic in list(loaded.topics.by_id.values())[:20]:
        assert all(p.topic_id is topic.topic_id for p in topic.partitions)
    lists = {p.replicas for t in loaded.topics.by_id.values() for p in t.partitions}
    ids = {id(p.replicas) for t in loaded.topics.by_id.values() for p in t.partitions}
    assert len(ids) == len(lists)


def test_it_reports_progress_of_every_partition(url: str, image: MetadataImage) -> None:
    counted: list[int] = []
    with SnapshotStore(url) as store:
        info = store.write(image)
        store.load(info.id, progress=counted.append)
    rows = sum(info_rows for info_rows in store.count_rows(info.id).values())
    assert sum(counted) == rows


def test_a_chain_of_increments_loads_the_same_both_ways(
    url: str, generated: tuple[Path, int], reads: LoadWays
) -> None:
    reads.check_chain(url, *generated, seed=5, count=5)


def _one_partition(url: str) -> tuple[str, int]:
    """A topic id with two partitions or more (the row changed is its partition 1)."""
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        found = conn.execute(
            "SELECT topic_id FROM snapshot_partitions GROUP BY topic_id "
            "HAVING count(*) >= 2 ORDER BY topic_id LIMIT 1"
        ).fetchone()
    return found[0], 1


COLUMNS = [
    "topic_id",
    "partition_id",
    "replicas",
    "isr",
    "removing_replicas",
    "adding_replicas",
    "leader",
    "leader_epoch",
    "partition_epoch",
    "mode",
]
VALUES = [
    "NULL",
    "1.5",
    "x'00ff'",
    str(2**31 - 1),
    str(-(2**31)),
    str(2**31),
    str(-(2**31) - 1),
    "0",
    "5",
    "'[5]'",
    "'[1,2,3]'",
    "'[\"a\"]'",
    "'READ_ONLY'",
    "'SOMETIMES'",
    "'caf\u00e9'",
    "'<script>'",
    "'AAAAAAAAAAAAAAAAAAAAAA'",
]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, image: MetadataImage) -> Path:
    path: Path = tmp_path_factory.mktemp("written") / "snapshots.db"
    with SnapshotStore(f"sqlite:///{path}") as store:
        store.write(image)
    return path


@pytest.mark.parametrize("column", COLUMNS)
def test_every_column_changed_to_any_value_ends_as_the_drivers_load(
    tmp_path: Path, written: Path, reads: LoadWays, column: str
) -> None:
    # A sweep: each column of one row set to each value (NULL, a float, a blob, 32-bit
    # bounds and past them, new or malformed lists, modes, non-ASCII): both ways end alike,
    # whether the compiled reader took the row or handed the load back.
    compared = 0
    values = swept(VALUES)
    for value in values:
        path = tmp_path / f"{column}-{VALUES.index(value)}.db"
        path.write_bytes(written.read_bytes())
        url = f"sqlite:///{path}"
        tid, pid = _one_partition(url)
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA ignore_check_constraints = ON")  # a hand-edited file
            try:
                conn.execute(
                    f"UPDATE snapshot_partitions SET {column} = {value} "
                    f"WHERE topic_id = '{tid}' AND partition_id = {pid}"
                )
            except sqlite3.IntegrityError:
                continue  # the schema refuses it (NOT NULL, a unique key)
        conn.close()
        compared += 1
        with SnapshotStore(url) as store:
            snapshot_id = store.newest().id  # type: ignore[union-attr]
        assert reads.outcome(url, snapshot_id, enabled=True) == reads.outcome(
            url, snapshot_id, enabled=False
        ), (column, value)
    assert compared >= len(values) - 2


def test_rows_out_of_partition_order_are_read_by_the_driver_then_sorted(
    url: str, image: MetadataImage, reads: LoadWays
) -> None:
    with SnapshotStore(url) as store:
        info = store.write(image)
    for sql in (
        "CREATE TABLE moved AS SELECT * FROM snapshot_partitions",
        "DELETE FROM snapshot_partitions",
        "INSERT INTO snapshot_partitions SELECT * FROM moved ORDER BY partition_id DESC",
        "DROP TABLE moved",
    ):
        execute_sql(url, sql)
    sorted_reads: list[tuple[str, ...]] = []
    select_chunks = row_io.select_chunks

    def spied(*args: Any, order_by: tuple[str, ...] = ()) -> Any:
        if args[1].name == "snapshot_partitions":
            sorted_reads.append(tuple(order_by))
        return select_chunks(*args, order_by=order_by)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(increments, "select_chunks", spied)
        computed, error, loaded = reads.outcome(url, info.id, enabled=True)
    assert error is None and computed == info.checksum and loaded == image
    # Per load (verify, then load): the compiled read gives up, the driver's plain read
    # finds the rows apart, the sorted read loads them.
    assert sorted_reads == [(), increments.PARTITION_ORDER] * 2


def test_a_handle_is_read_only_where_it_is_known(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "a.db")
    main = conn.execute("PRAGMA database_list").fetchone()[2]
    version = sqlite3.sqlite_version_info
    number = version[0] * 1_000_000 + version[1] * 1_000 + version[2]
    here = sys.version_info[:2]
    assert compiled.handle_reason(conn, main, here, number) is None
    assert "names another database file" in compiled.handle_reason(conn, "/elsewhere", here, number)
    assert "another SQLite library" in compiled.handle_reason(conn, main, here, number + 1)
    assert "not known here" in compiled.handle_reason(conn, main, (3, 99), number)
    assert "not a sqlite3.Connection" in compiled.handle_reason(object(), main, here, number)
    # The reader itself reads no other object's head as a connection's (no crash: a refusal).
    for stranger in (object(), "sqlite", 12345, memoryview(b"x" * 64)):
        with pytest.raises(compiled.Unusable, match=r"not a sqlite3\.Connection"):
            compiled.TopicRuns(stranger, "SELECT 1", 1, {}, {}, None, None)

    class Subclass(sqlite3.Connection):
        pass

    sub = sqlite3.connect(tmp_path / "b.db", factory=Subclass)
    assert "not a sqlite3.Connection" in compiled.handle_reason(sub, main, here, number)
    sub.close()
    conn.close()
    assert compiled.handle_reason(conn, main, here, number) == "the connection is closed"
    memory = sqlite3.connect(":memory:")
    assert compiled.handle_reason(memory, "", here, number) is None
    memory.close()


def test_without_the_helper_the_driver_reads(
    url: str, image: MetadataImage, reads: LoadWays, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(partition_runs, "_compiled", None)
    assert not partition_runs.available()
    with SnapshotStore(url) as store:
        info = store.write(image)
        assert store.load(info.id) == image
    assert reads.ways == ["driver"]


def test_iterated_it_gives_the_drivers_rows(url: str, image: MetadataImage) -> None:
    with SnapshotStore(url) as store:
        info = store.write(image)
        with store.engine.connect() as conn:
            table = increments.TABLES[content.PARTITIONS]
            runs = partition_runs.partition_runs(conn, table, info.id, None)
            assert runs is not None
            rows = [row for chunk in row_io.select_chunks(conn, table, info.id) for row in chunk]
            assert list(runs) == rows and len(rows) == image.topics.partition_count()
