"""The compiled reader of a PostgreSQL snapshot's partition rows (`replay.sql._pg_copy_rows`).

As for SQLite's (test_partition_runs.py): whatever the rows hold, a load through it ends as the
driver's path ends, the same image and checksum or the same error; and whatever stops it (a
row it does not take, an error of the server, a reader closed half-way) leaves the store's
transaction as it was, for the driver's path to read in.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine
from sqlalchemy.exc import DataError, IntegrityError

from replay.image import MetadataImage
from replay.sql import content, increments, partition_runs, row_io
from replay.sql.store import SnapshotStore
from tests.support.sql_backends import LoadWays, execute_sql, libpq
from tests.support.sweeps import swept

compiled: Any = pytest.importorskip("replay.sql._pg_copy_rows")
row_runs: Any = pytest.importorskip("replay.sql._row_runs")

pytestmark = pytest.mark.postgres

TABLE = "snapshot_partitions"


@pytest.fixture
def written(postgres_url: str, image: MetadataImage) -> tuple[str, int]:
    """A PostgreSQL schema holding one full snapshot of `image`, and its id."""
    with SnapshotStore(postgres_url) as store:
        return postgres_url, store.write(image).id


def test_libpq_is_psycopgs_own() -> None:
    assert partition_runs.libpq_reason() is None
    (path,) = partition_runs.loaded_libraries("libpq")
    assert compiled.bind(path, psycopg.pq.version()) is None  # bound already: the same path
    assert "bound to" in compiled.bind("/elsewhere/libpq.so.5", psycopg.pq.version())


def test_libraries_are_found_in_a_maps_file(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/libpq-abc.so.5.18\n"
        "7f01-7f02 r--p 00001000 08:01 1 /usr/lib/libpq-abc.so.5.18\n"
        "7f02-7f03 rw-p 00000000 00:00 0 \n"
        "7f03-7f04 r-xp 00000000 08:01 2 /opt/my libs/libpq.so.5\n"
        "7f04-7f05 r-xp 00000000 08:01 3 /usr/lib/libpqwalreceiver.a\n"
    )
    found = partition_runs.loaded_libraries("libpq", maps)
    assert found == ["/opt/my libs/libpq.so.5", "/usr/lib/libpq-abc.so.5.18"]
    assert partition_runs.loaded_libraries("libpq", tmp_path / "absent") == []


def test_a_load_through_it_is_the_drivers_load(
    written: tuple[str, int], image: MetadataImage, reads: LoadWays
) -> None:
    url, snapshot_id = written
    compiled_way = reads.outcome(url, snapshot_id, enabled=True)
    assert reads.ways == ["compiled", "compiled"]
    driver_way = reads.outcome(url, snapshot_id, enabled=False)
    assert compiled_way == driver_way
    _, error, loaded = compiled_way
    assert error is None and loaded == image
    lists = {p.replicas for t in loaded.topics.by_id.values() for p in t.partitions}
    ids = {id(p.replicas) for t in loaded.topics.by_id.values() for p in t.partitions}
    assert len(ids) == len(lists)  # one tuple per distinct replica list


def test_a_chain_of_increments_loads_the_same_both_ways(
    postgres_url: str, generated: tuple[Path, int], reads: LoadWays
) -> None:
    reads.check_chain(postgres_url, *generated, seed=7, count=4)


TEXT_COLUMNS = ["topic_id", "replicas", "isr", "removing_replicas", "adding_replicas", "mode"]
INT_COLUMNS = ["partition_id", "leader", "leader_epoch", "partition_epoch"]
TEXT_VALUES = [
    "NULL",
    "''",
    "'[5]'",
    "'[1,2,3]'",
    "'[\"a\"]'",
    "'READ_ONLY'",
    "'SOMETIMES'",
    "'caf\u00e9'",
    "'<script>'",
    "E'a\\\\b'",
    "E'[1,\\t2]'",
    "E'READ_WRITE\\n'",
    "E'\\\\N'",
    "'AAAAAAAAAAAAAAAAAAAAAA'",
]
INT_VALUES = ["NULL", "0", "5", "-1", str(2**31 - 1), str(-(2**31))]


def _target(url: str) -> tuple[str, int]:
    """A topic id with two partitions or more (the row changed is its partition 1)."""
    with psycopg.connect(libpq(url)) as conn:
        found = conn.execute(
            f"SELECT topic_id FROM {TABLE} GROUP BY topic_id HAVING count(*) >= 2 "
            "ORDER BY topic_id LIMIT 1"
        ).fetchone()
    assert found is not None
    return found[0], 1


@pytest.mark.parametrize("column", TEXT_COLUMNS + INT_COLUMNS)
def test_every_column_changed_to_any_value_ends_as_the_drivers_load(
    written: tuple[str, int], reads: LoadWays, column: str
) -> None:
    # A sweep: each column of one row set to each value its type takes (NULL, escapes, tabs
    # and newlines, 32-bit bounds, malformed lists, unknown modes, non-ASCII, HTML), then put
    # back: both ways end alike, whether the compiled reader took the row or handed it back.
    url, snapshot_id = written
    tid, pid = _target(url)
    where = f"topic_id = '{tid}' AND partition_id = {pid}"
    with psycopg.connect(libpq(url)) as conn:
        row = conn.execute(f"SELECT {column} FROM {TABLE} WHERE {where}").fetchone()
    assert row is not None
    original = row[0]
    compared = 0
    for value in swept(TEXT_VALUES if column in TEXT_COLUMNS else INT_VALUES):
        try:
            execute_sql(url, f"UPDATE {TABLE} SET {column} = {value} WHERE {where}")
        except (IntegrityError, DataError):  # the schema refuses it (NOT NULL, a key, a size)
            continue
        changed = where if column != "topic_id" else f"topic_id = {value} AND partition_id = {pid}"
        try:
            compared += 1
            assert reads.outcome(url, snapshot_id, enabled=True) == reads.outcome(
                url, snapshot_id, enabled=False
            ), (column, value)
        finally:
            execute_sql(url, f"UPDATE {TABLE} SET {column} = :v WHERE {changed}", v=original)
    assert compared >= 1


def test_rows_out_of_partition_order_are_read_by_the_driver_then_sorted(
    written: tuple[str, int], image: MetadataImage, reads: LoadWays
) -> None:
    url, snapshot_id = written
    for sql in (
        f"CREATE TABLE moved AS SELECT * FROM {TABLE}",
        f"DELETE FROM {TABLE}",
        f"INSERT INTO {TABLE} SELECT * FROM moved ORDER BY partition_id DESC",
        "DROP TABLE moved",
    ):
        execute_sql(url, sql)
    _, error, loaded = reads.outcome(url, snapshot_id, enabled=True)
    assert error is None and loaded == image
    assert reads.ways == ["compiled", "compiled"]


def _open_runs(conn: Any, sql: str) -> Any:
    from replay.sql.ids import parse_id
    from replay.sql.topic_builder import MODES

    return compiled.CopyRuns(conn, sql, {}, MODES, parse_id, True)


def test_a_failed_copy_leaves_the_transaction_usable(postgres_url: str) -> None:
    with psycopg.connect(libpq(postgres_url)) as conn:
        conn.execute("SELECT 1")  # a transaction begins (psycopg's default)
        with pytest.raises(row_runs.Unusable, match="division by zero"):
            _open_runs(conn, "COPY (SELECT 1 / 0) TO STDOUT")
        assert conn.execute("SELECT 2").fetchone() == (2,)
        with pytest.raises(row_runs.Unusable, match="does not exist"):
            _open_runs(conn, "COPY (SELECT * FROM no_such_table) TO STDOUT")
        assert conn.execute("SELECT 3").fetchone() == (3,)


def test_a_reader_closed_half_way_leaves_the_transaction_usable(
    written: tuple[str, int],
) -> None:
    url, snapshot_id = written
    engine = create_engine(url)
    try:
        with engine.connect() as conn, conn.begin():
            table = increments.TABLES[content.PARTITIONS]
            runs = partition_runs.partition_runs(conn, table, snapshot_id, None)
            assert runs is not None
            reading: Any = iter(runs)
            first = next(reading)
            reading.close()  # the reader stops half-way: its COPY read to the end, let go
            chunks = row_io.select_chunks(conn, table, snapshot_id)
            rows = [row for chunk in chunks for row in chunk]
            assert first == rows[0]  # read after the reader let its COPY go, same transaction
            assert list(runs) == rows
    finally:
        engine.dispose()


def test_it_reads_no_stranger_nor_a_failed_transaction(postgres_url: str) -> None:
    for stranger in (object(), "postgresql", 12345, memoryview(b"x" * 64)):
        with pytest.raises(row_runs.Unusable, match="not a psycopg connection"):
            _open_runs(stranger, "COPY (SELECT 1) TO STDOUT")
    sql = "COPY (SELECT 'AAAAAAAAAAAAAAAAAAAAAA', 0, '[1]', '[1]', '[]', '[]', 1, 0, 0, "
    sql += "'READ_WRITE') TO STDOUT"
    with psycopg.connect(libpq(postgres_url), autocommit=True) as conn:
        # Outside a transaction the COPY is a statement of its own (no savepoint).
        runs = _open_runs(conn, sql)
        ((_, rows),) = list(runs)
        assert rows == [("A" * 22, 0, "[1]", "[1]", "[]", "[]", 1, 0, 0, "READ_WRITE")]
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with psycopg.connect(libpq(postgres_url)) as conn:
        with pytest.raises(psycopg.errors.DivisionByZero):
            conn.execute("SELECT 1 / 0")
        with pytest.raises(row_runs.Unusable, match="transaction failed"):
            _open_runs(conn, sql)
    conn = psycopg.connect(libpq(postgres_url))
    conn.close()
    with pytest.raises(row_runs.Unusable, match="closed"):
        _open_runs(conn, "COPY (SELECT 1) TO STDOUT")


def test_a_ctrl_c_mid_copy_is_an_interrupt_and_the_store_reads_on(
    written: tuple[str, int], image: MetadataImage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The interrupt comes while the COPY is half read (from the load's progress report, after
    # the first topic's run): it is what the caller gets (the rows' rest read, the savepoint
    # rolled back), and the next load on the same store reads the snapshot whole.
    url, snapshot_id = written
    monkeypatch.setattr(row_io, "PROGRESS_EVERY", 1)
    reported: list[int] = []

    def interrupted(rows: int) -> None:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code is not partition_runs.PartitionRuns._runs.__code__:
            frame = frame.f_back  # type: ignore[assignment]  # the end of the stack is None
        if frame is None:
            return  # another table's rows: the interrupt comes during the partitions' COPY
        reported.append(rows)
        raise KeyboardInterrupt

    with SnapshotStore(url) as store:
        with pytest.raises(KeyboardInterrupt):
            store.load(snapshot_id, progress=interrupted)
        assert reported and reported[0] < image.topics.partition_count()  # mid-COPY
        assert store.load(snapshot_id) == image


def test_an_interrupt_behind_a_refused_rollback_is_the_interrupt() -> None:
    from replay.sql.store import _interrupt_behind

    def raised_during(first: BaseException, then: BaseException) -> BaseException:
        try:
            try:
                raise first
            except BaseException:
                raise then from None
        except BaseException as exc:
            return exc

    refused = raised_during(KeyboardInterrupt(), psycopg.OperationalError("in progress"))
    wrapped = raised_during(refused, RuntimeError("wrapped"))
    assert isinstance(_interrupt_behind(wrapped), KeyboardInterrupt)
    assert _interrupt_behind(raised_during(ValueError(), RuntimeError())) is None
    assert _interrupt_behind(RuntimeError()) is None
