"""Incremental snapshots on SQLite and PostgreSQL: a chain of increments loads as replay does."""

from __future__ import annotations

import dataclasses
import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from immutables import Map
from sqlalchemy import create_engine, text

from metadata_log.reader import LogReader
from records.model import ConfigRecord, ConfigResourceType, PartitionChangeRecord, RemoveTopicRecord
from replay.delta import replay_records
from replay.image import MetadataImage, Provenance, qualified_name
from replay.loader import load_image
from replay.sql import content
from replay.sql.errors import SnapshotChecksumError, SnapshotContentError, SnapshotStoreError
from replay.sql.increments import DELETED, map_changes
from replay.sql.revision import HEAD_REVISION
from replay.sql.store import SnapshotInfo, SnapshotStore
from replay.timetravel import travel
from tests.support.sql_backends import execute_sql, write_generated_log

DATA = Path(__file__).parents[2] / "data"
FIXTURE_SEED, FIXTURE_BATCHES = 58, 120
"""The log `tests/data/snapshots-0004.db` was written from (by the code before increments)."""


@pytest.fixture
def store(database_url: str) -> Iterator[SnapshotStore]:
    with SnapshotStore(database_url) as opened:
        yield opened


def _full_checksum(image: MetadataImage) -> str:
    checksum = content.ContentChecksum()
    for rows in content.image_rows(image, checksum).values():
        for _ in rows:
            pass
    return checksum.hexdigest()


def _scalar(url: str, sql: str) -> object:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text(sql)).scalar()
    finally:
        engine.dispose()


def _chain(
    store: SnapshotStore, log: LogReader, offsets: list[int]
) -> list[tuple[SnapshotInfo, MetadataImage]]:
    """Snapshots at `offsets`, each an increment on the one before (images built one on another)."""
    written: list[tuple[SnapshotInfo, MetadataImage]] = []
    image: MetadataImage | None = None
    for offset in offsets:
        image = load_image(log, lte=offset, base=image) if image else load_image(log, lte=offset)
        info = store.write(image, base=written[-1] if written else None)
        written.append((info, image))
    return written


@pytest.mark.parametrize("seed", [21, 22])
def test_a_chain_of_increments_loads_as_replay_and_checksums_as_a_full_one(
    tmp_path: Path, database_url: str, store: SnapshotStore, seed: int
) -> None:
    end = write_generated_log(
        tmp_path / "log", seed=seed, batches=600, cancels=True, security=True, client_writes=True
    )
    rng = random.Random(seed)
    offsets = sorted(rng.sample(range(end), 8))
    with LogReader.open(tmp_path / "log") as log:
        written = _chain(store, log, offsets)
        assert [info.chain_length for info, _ in written] == list(range(8))
        assert all(
            info.base_id == prev.id
            for (info, _), (prev, _) in zip(written[1:], written, strict=False)
        )
        for info, image in written:
            assert store.load(info.id) == load_image(log, lte=info.offset) == image
            assert info.checksum == _full_checksum(image)
            result = store.verify(info.id)
            assert result.ok and result.image == image
        # Time travel starts from an increment as from a full snapshot.
        target = offsets[-1] + (end - 1 - offsets[-1]) // 2
        travelled = travel(log, store, at_offset=target)
        assert travelled.snapshot is not None and travelled.snapshot.id == written[-1][0].id
        assert travelled.image == load_image(log, lte=target)
    # The newest increment holds a fraction of the rows a full snapshot of its image holds.
    full_rows = sum(
        len(list(rows)) for rows in content.image_rows(image, content.ContentChecksum()).values()
    )
    own = store.count_rows(written[-1][0].id)
    assert 0 < sum(n for table, n in own.items() if table in content.COLUMNS) < full_rows


def _topic_change(image: MetadataImage, records: list[object], offset: int) -> MetadataImage:
    provenance = Provenance(offset=offset, epoch=1, timestamp=1_700_000_000_000 + offset)
    return replay_records(image, records, provenance=provenance)  # type: ignore[arg-type]


def test_changes_deletions_and_small_areas_are_overlaid(
    tmp_path: Path, database_url: str, store: SnapshotStore
) -> None:
    end = write_generated_log(tmp_path / "log", seed=5, batches=300, security=True)
    with LogReader.open(tmp_path / "log") as log:
        base = load_image(log)
    topics = sorted(base.topics.by_id.values(), key=lambda t: str(t.topic_id))
    changed = next(t for t in topics if any(len(p.isr) > 1 for p in t.partitions))
    gone = next(t for t in topics if t is not changed)
    partition = next(p for p in changed.partitions if len(p.isr) > 1)
    leader = next(r for r in partition.isr if r != partition.leader)
    image = _topic_change(
        base,
        [
            PartitionChangeRecord(
                partition_id=partition.partition_id, topic_id=changed.topic_id, leader=leader
            ),
            RemoveTopicRecord(topic_id=gone.topic_id),
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC,
                resource_name=qualified_name(changed.namespace, changed.name),
                name="retention.ms",
                value="1234",
            ),
        ],
        end,
    )
    first = store.write(base)
    second = store.write(image, base=(first, base))
    assert second.base_id == first.id and second.chain_length == 1
    rows = store.count_rows(second.id)
    assert rows[content.PARTITIONS] == 1 and rows[content.TOPICS] == 1
    assert rows[content.CONFIGS] == len(
        list(content.image_rows(image, content.ContentChecksum())[content.CONFIGS])
    )
    assert rows[content.BROKERS] == 0
    assert (
        _scalar(
            database_url,
            f"SELECT count(*) FROM snapshot_changed_topics WHERE snapshot_id = {second.id} "
            f"AND partition_count = {DELETED}",
        )
        == 1
    )
    assert store.load(second.id) == image
    assert second.checksum == _full_checksum(image)


def test_a_damaged_increment_or_a_missing_base_is_not_loaded(
    tmp_path: Path, database_url: str, store: SnapshotStore
) -> None:
    end = write_generated_log(tmp_path / "log", seed=9, batches=300)
    with LogReader.open(tmp_path / "log") as log:
        written = _chain(store, log, [end // 3, end // 2, end - 1])
    increment = written[2][0]
    execute_sql(
        database_url,
        "UPDATE snapshot_partitions SET leader_epoch = leader_epoch + 1 WHERE snapshot_id = :id",
        id=increment.id,
    )
    if store.count_rows(increment.id)[content.PARTITIONS]:
        with pytest.raises(SnapshotChecksumError, match=f"snapshot {increment.id} "):
            store.load(increment.id)
        assert not store.verify(increment.id).ok
    execute_sql(database_url, "DELETE FROM snapshots WHERE id = :id", id=written[1][0].id)
    with pytest.raises(SnapshotContentError, match="which is gone; delete it"):
        store.load(increment.id)
    assert "which is gone" in (store.verify(increment.id).error or "")


def test_retention_and_delete_keep_every_base_a_kept_increment_needs(
    tmp_path: Path, store: SnapshotStore
) -> None:
    end = write_generated_log(tmp_path / "log", seed=10, batches=200)
    with LogReader.open(tmp_path / "log") as log:
        written = _chain(store, log, [end // 4, end // 2, end - 2])
        full = store.write(load_image(log))
    first, middle, last = (info for info, _ in written)
    with pytest.raises(SnapshotStoreError, match=f"snapshot {middle.id} is the base of increment"):
        store.delete(middle.id)
    # Keeping the newest two keeps the chain the second newest needs, down to its full base.
    assert store.retain(2) == []
    assert [s.id for s in store.retain(1)] == [last.id, middle.id, first.id]
    assert [s.id for s in store.snapshots()] == [full.id]
    assert store.delete(full.id).id == full.id


def test_a_base_without_content_sums_gets_a_full_snapshot(
    tmp_path: Path, database_url: str, store: SnapshotStore
) -> None:
    end = write_generated_log(tmp_path / "log", seed=4, batches=100)
    with LogReader.open(tmp_path / "log") as log:
        before = load_image(log, lte=end // 2)
        after = load_image(log, base=before)
    base = store.write(before)
    execute_sql(database_url, "UPDATE snapshots SET content_sums = NULL WHERE id = :id", id=base.id)
    written = store.write(after, base=(base, before))
    assert written.base_id is None and store.load(written.id) == after
    # A base whose id now names another snapshot (the database was replaced) is not used.
    other = store.write(before)
    moved = dataclasses.replace(other, id=written.id)
    again = store.write(after, base=(moved, before))
    assert again.base_id is None and store.load(again.id) == after
    assert store.write(after, base=(other, before)).base_id == other.id


def _write_at_0004(url: str, image: MetadataImage) -> None:
    """A snapshot as the code before increments wrote one: every row, no chain columns."""
    from replay.sql.models import CONTENT_TABLES
    from replay.sql.row_io import writer_for

    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            p = image.provenance
            conn.execute(
                text(
                    "INSERT INTO snapshots (log_offset, epoch, log_timestamp, created_at, "
                    "record_count, checksum, format_version) VALUES "
                    "(:o, :e, :t, CURRENT_TIMESTAMP, 0, '', 3)"
                ),
                {"o": p.offset, "e": p.epoch, "t": p.timestamp},
            )
            snapshot_id = conn.execute(text("SELECT max(id) FROM snapshots")).scalar_one()
            checksum = content.ContentChecksum()
            tables = {t.name: t for t in CONTENT_TABLES}
            write = writer_for(conn)
            for name, rows in content.image_rows(image, checksum).items():
                write(conn, tables[name], snapshot_id, rows)
            conn.execute(
                text("UPDATE snapshots SET checksum = :c, record_count = :n WHERE id = :id"),
                {"c": checksum.hexdigest(), "n": content.record_count(checksum), "id": snapshot_id},
            )
    finally:
        engine.dispose()


def test_a_snapshot_written_before_increments_loads_after_the_upgrade(
    tmp_path: Path, database_url: str
) -> None:
    end = write_generated_log(tmp_path / "log", seed=3, batches=200, security=True)
    with LogReader.open(tmp_path / "log") as log:
        image = load_image(log, lte=end // 2)
        later = load_image(log, base=image)
    with SnapshotStore(database_url) as old:
        old.upgrade("0004")
    _write_at_0004(database_url, image)
    with SnapshotStore(database_url) as store:
        before, after = store.upgrade()
        assert (before.revision, after.revision) == ("0004", HEAD_REVISION)
        assert store.drift() == []
        (info,) = store.snapshots()
        assert info.base_id is None and info.chain_length == 0 and info.content_bytes is None
        assert store.load(info.id) == image and store.verify(info.id).ok
        # It has no content sums: the next snapshot on it is a full one, and can be a base.
        full = store.write(later, base=(info, image))
        assert full.base_id is None and store.load(full.id) == later


def test_the_fixture_written_by_the_code_before_loads_after_the_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "snapshots.db"
    shutil.copyfile(DATA / "snapshots-0004.db", path)
    end = write_generated_log(
        tmp_path / "log",
        seed=FIXTURE_SEED,
        batches=FIXTURE_BATCHES,
        cancels=True,
        security=True,
        client_writes=True,
    )
    with SnapshotStore(f"sqlite:///{path}") as store:
        assert store.status().revision == "0004"
        store.upgrade()
        (info,) = store.snapshots()
        with LogReader.open(tmp_path / "log") as log:
            assert info.offset == end - 1
            assert store.load(info.id) == load_image(log)


def test_the_downgrade_deletes_increments_and_keeps_full_snapshots(
    tmp_path: Path, store: SnapshotStore
) -> None:
    end = write_generated_log(tmp_path / "log", seed=6, batches=120)
    with LogReader.open(tmp_path / "log") as log:
        written = _chain(store, log, [end // 2, end - 1])
        full = written[0][0]
        store.downgrade("0004")
        store.upgrade()
        assert [s.id for s in store.snapshots()] == [full.id]
        assert store.load(full.id) == load_image(log, lte=full.offset)


@pytest.mark.parametrize("seed", range(6))
def test_map_changes_finds_what_a_lookup_of_every_entry_finds(seed: int) -> None:
    rng = random.Random(seed)
    # Colliding keys (hash(-1) == hash(-2)) and sizes around the trie's node splits.
    keys = list(range(-3, rng.choice((10, 40, 3000))))
    old = Map({k: object() for k in keys})
    new = old
    for _ in range(rng.choice((0, 1, 5, 200))):
        key = rng.randrange(-3, 4000)
        action = rng.random()
        if action < 0.4 and key in new:
            new = new.delete(key)
        elif action < 0.7 and key in new:
            new = new.set(key, new[key])  # the very same value: no change
        else:
            new = new.set(key, object())
    changed, deleted = map_changes(old, new)
    assert changed == {k: v for k, v in new.items() if old.get(k) is not v}
    assert sorted(deleted) == sorted(k for k in old if k not in new)
