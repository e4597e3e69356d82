"""A snapshot's rows read back into an image as they stream in, whatever order they come in.

The partition rows are written topic by topic; each topic is built as its rows arrive, and
none is held after. A database may give them back in another order (PostgreSQL reusing the
space of deleted snapshots): the load then reads them again sorted by the database, and only
what is still wrong in that order is damage.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from metadata_log.reader import LogReader
from replay.image import MetadataImage, broker_index
from replay.loader import load_image
from replay.sql import content, increments, row_io, topic_builder
from replay.sql.content import ContentChecksum, PartitionRowsUnsorted, Row, image_from_rows
from replay.sql.errors import SnapshotContentError
from replay.sql.partition_runs import available, libpq_reason, partition_runs
from replay.sql.store import SnapshotStore
from tests.support.sql_backends import execute_sql, write_generated_log


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> MetadataImage:
    directory: Path = tmp_path_factory.mktemp("content") / "log"
    write_generated_log(directory, seed=21, batches=400, cancels=True, security=True)
    with LogReader.open(directory) as log:
        loaded = load_image(log)
    assert loaded.topics.partition_count() > 100
    return loaded


def _tables(image: MetadataImage) -> tuple[dict[str, list[Row]], str]:
    written = ContentChecksum()
    tables = {name: list(rows) for name, rows in content.image_rows(image, written).items()}
    return tables, written.hexdigest()


def _read(image: MetadataImage, tables: dict[str, Any], *, partitions_sorted: bool) -> str:
    read = ContentChecksum()
    loaded = image_from_rows(image.provenance, tables, read, partitions_sorted=partitions_sorted)
    assert loaded == image
    # The per-broker index, gathered as the rows stream in and left to its first reader, is
    # the one the topics give.
    assert not loaded.topics.replica_index.is_built
    assert loaded.topics.by_broker == broker_index(image.topics.by_id)
    assert loaded.topics.replica_index.is_built
    return read.hexdigest()


def test_rows_in_written_order_stream_in_with_the_written_checksum(image: MetadataImage) -> None:
    tables, checksum = _tables(image)
    consumed = 0

    def partitions() -> Any:
        nonlocal consumed
        for row in tables[content.PARTITIONS]:
            consumed += 1
            yield row

    streamed = {**tables, content.PARTITIONS: partitions()}
    assert _read(image, streamed, partitions_sorted=False) == checksum
    assert consumed == len(tables[content.PARTITIONS])


def test_a_topic_whose_rows_are_split_is_read_again_sorted(image: MetadataImage) -> None:
    tables, checksum = _tables(image)
    shuffled = list(tables[content.PARTITIONS])
    random.Random(4).shuffle(shuffled)
    with pytest.raises(PartitionRowsUnsorted):
        _read(image, {**tables, content.PARTITIONS: shuffled}, partitions_sorted=False)
    ordered = sorted(shuffled, key=lambda row: (row[0], row[1]))
    assert _read(image, {**tables, content.PARTITIONS: ordered}, partitions_sorted=True) == checksum


def test_a_topic_whose_rows_come_out_of_partition_order_in_one_run_is_sorted(
    image: MetadataImage,
) -> None:
    tables, checksum = _tables(image)
    rows = tables[content.PARTITIONS]
    by_topic: dict[str, list[Row]] = {}
    for row in rows:
        by_topic.setdefault(row[0], []).append(row)
    reversed_runs = [row for run in by_topic.values() for row in reversed(run)]
    tables[content.PARTITIONS] = reversed_runs
    assert _read(image, tables, partitions_sorted=False) == checksum


def test_a_missing_partition_is_damage_once_the_rows_are_sorted(image: MetadataImage) -> None:
    tables, _ = _tables(image)
    rows = tables[content.PARTITIONS]
    victim = next(i for i, row in enumerate(rows) if row[1] == 1 and rows[i + 1][:2] == (row[0], 2))
    del rows[victim]
    with pytest.raises(PartitionRowsUnsorted):  # maybe still to come, in another order
        image_from_rows(image.provenance, tables, ContentChecksum())
    with pytest.raises(SnapshotContentError, match=r"has partition 2 where partition 1 belongs"):
        image_from_rows(image.provenance, tables, ContentChecksum(), partitions_sorted=True)


def test_a_repeated_run_of_sorted_rows_is_damage(image: MetadataImage) -> None:
    tables, _ = _tables(image)
    rows = tables[content.PARTITIONS]
    tables[content.PARTITIONS] = [*rows, rows[0]]
    with pytest.raises(SnapshotContentError, match="has a partition twice"):
        image_from_rows(image.provenance, tables, ContentChecksum(), partitions_sorted=True)


def test_a_partition_of_a_missing_topic_is_damage(image: MetadataImage) -> None:
    tables, _ = _tables(image)
    gone = tables[content.TOPICS].pop(0)[0]
    tables[content.PENDING] = [r for r in tables[content.PENDING] if r[0] != gone]
    with pytest.raises(SnapshotContentError, match=f"of topic id {gone} without a topic"):
        image_from_rows(image.provenance, tables, ContentChecksum())


def test_a_snapshot_whose_rows_the_database_moved_loads_the_same(
    image: MetadataImage, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The partition rows put back interleaved (every topic's partition 0, then every 1, ...):
    # the order a database may give them in after reusing space. The load reads them again,
    # sorted by the database, and gives the image written, its checksum intact.
    orders: list[tuple[str, ...]] = []
    select_chunks = row_io.select_chunks

    def spied(*args: Any, order_by: tuple[str, ...] = ()) -> Any:
        if args[1].name == content.PARTITIONS:
            orders.append(tuple(order_by))
        return select_chunks(*args, order_by=order_by)

    compiled_runs = partition_runs

    def spied_runs(*args: Any) -> Any:
        runs = compiled_runs(*args)
        if runs is not None:
            orders.append(("compiled",))
        return runs

    monkeypatch.setattr(increments, "select_chunks", spied)
    monkeypatch.setattr(increments, "partition_runs", spied_runs)
    readable = database_url.startswith("sqlite") or libpq_reason() is None
    first = ("compiled",) if available() and readable else ()
    with SnapshotStore(database_url) as store:
        info = store.write(image)
        assert store.load(info.id) == image
        assert orders == [first]  # in written order: one read
        for sql in (
            "CREATE TABLE moved AS SELECT * FROM snapshot_partitions",
            "DELETE FROM snapshot_partitions",
            "INSERT INTO snapshot_partitions SELECT * FROM moved ORDER BY partition_id, topic_id",
            "DROP TABLE moved",
        ):
            execute_sql(database_url, sql)
        orders.clear()
        assert store.load(info.id) == image
        assert orders == [*filter(None, [first]), (), increments.PARTITION_ORDER]
        assert store.verify(info.id).ok


@pytest.fixture(scope="module")
def every_area(tmp_path_factory: pytest.TempPathFactory) -> MetadataImage:
    """An image with topics in namespaces and pending partition deletions too."""
    directory: Path = tmp_path_factory.mktemp("every-area") / "log"
    write_generated_log(directory, seed=7, batches=900, cancels=True, security=True)
    with LogReader.open(directory) as log:
        return load_image(log)


@pytest.mark.parametrize(
    "left_out", [(), ("_compiled",), ("_topic_adder",), ("_compiled", "_topic_adder")]
)
def test_without_the_compiled_builders_the_same_image_and_checksum(
    every_area: MetadataImage, monkeypatch: pytest.MonkeyPatch, left_out: tuple[str, ...]
) -> None:
    image = every_area
    tables, checksum = _tables(image)
    topics = image.topics.by_id.values()
    assert any(t.pending_deletion for t in topics) and any(t.namespace for t in topics)
    for name in left_out:
        monkeypatch.setattr(topic_builder, name, None)
    assert _read(image, tables, partitions_sorted=False) == checksum


def test_the_broker_index_grown_a_slice_at_a_time_is_the_whole_one(
    image: MetadataImage, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The deferred build lets the interpreter lock go between slices of a broker's map.
    lets_go: list[int] = []
    monkeypatch.setattr(topic_builder, "_SLICE", 3)
    monkeypatch.setattr(topic_builder, "_let_go", lambda: lets_go.append(1))
    tables, _ = _tables(image)
    _read(image, tables, partitions_sorted=False)
    assert len(lets_go) > len(image.topics.by_broker)  # more than one slice a broker
