"""Rows between the snapshot tables and Python: PostgreSQL's reads streamed in chunks."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine

from records.model import PartitionRecord, Record, RegisterBrokerRecord, TopicRecord
from records.uuids import Uuid
from replay.delta import replay_records
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance
from replay.sql import row_io
from replay.sql.models import CONTENT_TABLES
from replay.sql.store import SnapshotStore
from tests.support.sql_backends import execute_sql

TOPICS = 4
PARTITIONS = 5


def _image() -> MetadataImage:
    records: list[Record] = [
        RegisterBrokerRecord(broker_id=1, incarnation_id=Uuid(bytes(15) + b"\x09"), broker_epoch=1)
    ]
    for t in range(TOPICS):
        topic_id = Uuid(bytes([t + 1]) * 16)
        records.append(TopicRecord(name=f"t{t}", topic_id=topic_id))
        records.extend(
            PartitionRecord(partition_id=p, topic_id=topic_id, replicas=(1,), isr=(1,), leader=1)
            for p in range(PARTITIONS)
        )
    return replay_records(EMPTY_IMAGE, records, Provenance(offset=9, epoch=1, timestamp=1))


IMAGE = _image()
PARTITION_TABLE = next(t for t in CONTENT_TABLES if t.name == "snapshot_partitions")


def _interleave_the_partitions(url: str) -> None:
    """The topics' partition rows stored interleaved, as a database may hand them back (its
    pages reused): each topic's rows come in runs, which the store reads again sorted."""
    for sql in (
        "CREATE TABLE interleaved AS SELECT * FROM snapshot_partitions"
        " ORDER BY partition_id, topic_id",
        "DELETE FROM snapshot_partitions",
        "INSERT INTO snapshot_partitions SELECT * FROM interleaved",
        "DROP TABLE interleaved",
    ):
        execute_sql(url, sql)


def test_postgresql_reads_stream_in_chunks_of_the_chunk_size(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(row_io, "CHUNK", 3)
    with SnapshotStore(postgres_url) as store:
        info = store.write(IMAGE)
    engine = create_engine(postgres_url)
    try:
        with engine.connect() as conn, conn.begin():
            assert row_io._streams(conn)  # psycopg 3.2+ over libpq 17+, as installed
            chunks = list(row_io.select_chunks(conn, PARTITION_TABLE, info.id))
    finally:
        engine.dispose()
    assert [len(chunk) for chunk in chunks] == [3] * 6 + [2]
    assert all(type(row) is tuple for chunk in chunks for row in chunk)


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "named-cursor"])
def test_a_read_given_up_half_way_leaves_the_transaction_to_read_again(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    # Rows out of their written order are found in the first chunk, while the rest of the
    # partitions are still on their way; the store reads them again, sorted, in the same
    # transaction. A stream psycopg cancelled would have aborted it.
    monkeypatch.setattr(row_io, "CHUNK", 2)
    if not streamed:  # psycopg before 3.2 or libpq before 17: a server-side cursor
        monkeypatch.setattr(row_io, "_psycopg_streams_in_chunks", lambda: False)
    with SnapshotStore(postgres_url) as store:
        info = store.write(IMAGE)
        _interleave_the_partitions(postgres_url)
        assert store.load(info.id) == IMAGE
        assert store.verify(info.id).ok


def test_a_stream_given_up_half_way_is_read_to_its_end_not_cancelled(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # psycopg cancels a stream closed half-way, and a cancelled query aborts the transaction
    # (every later statement in it: InFailedSqlTransaction), where the store reads again.
    monkeypatch.setattr(row_io, "CHUNK", 2)
    ended: list[bool] = []
    stream = psycopg.Cursor.stream

    @functools.wraps(stream)  # its signature too, which `row_io` reads (and caches)
    def watched(self: psycopg.Cursor[Any], *args: Any, **kwargs: Any) -> Iterator[Any]:
        ended.append(False)
        yield from stream(self, *args, **kwargs)
        ended[-1] = True

    monkeypatch.setattr(psycopg.Cursor, "stream", watched)
    with SnapshotStore(postgres_url) as store:
        info = store.write(IMAGE)
    engine = create_engine(postgres_url)
    try:
        with engine.connect() as conn, conn.begin():
            chunks = row_io.select_chunks(conn, PARTITION_TABLE, info.id)
            assert len(next(chunks)) == 2
            chunks.close()  # given up after its first chunk
            assert ended == [True]
            assert conn.exec_driver_sql("SELECT 1").scalar() == 1  # the transaction goes on
    finally:
        engine.dispose()


def test_sqlite_reads_through_its_own_cursor(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/snapshots.db"
    with SnapshotStore(url) as store:
        info = store.write(IMAGE)
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            assert not row_io._streams(conn)
            chunks = list(row_io.select_chunks(conn, PARTITION_TABLE, info.id))
    finally:
        engine.dispose()
    assert sum(map(len, chunks)) == TOPICS * PARTITIONS
