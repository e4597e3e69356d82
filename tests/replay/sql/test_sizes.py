"""Snapshot sizes and retention by bytes (`replay.sql.sizes`, `SnapshotStore.retain`)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from metadata_log.reader import LogReader
from records.model import PartitionChangeRecord
from replay.delta import replay_records
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance
from replay.loader import load_image
from replay.sql import content, sizes
from replay.sql.errors import SnapshotStoreError
from replay.sql.info import SnapshotInfo
from replay.sql.store import SnapshotStore
from tests.support.sql_backends import execute_sql, write_generated_log
from tests.support.sweeps import swept


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    directory: Path = tmp_path_factory.mktemp("sizes") / "log"
    end = write_generated_log(directory, seed=41, batches=300, security=True)
    return directory, end


def _python_size(image: MetadataImage) -> int:
    """The size `measure` gives a full snapshot of `image`, summed in Python."""
    total = 0
    for rows in content.image_rows(image, content.ContentChecksum()).values():
        for row in rows:
            for value in row:
                if isinstance(value, str | bytes):
                    total += len(value)
                elif value is not None:
                    total += sizes.NUMBER_BYTES
    return total


def test_a_snapshot_is_measured_as_its_values_add_up(
    database_url: str, generated: tuple[Path, int]
) -> None:
    with LogReader.open(generated[0]) as log:
        base_image = load_image(log)
    topic = next(t for t in base_image.topics.by_id.values() if t.partitions)
    partition = topic.partitions[0]
    image = replay_records(
        base_image,
        [
            PartitionChangeRecord(
                partition_id=0, topic_id=topic.topic_id, leader_epoch=partition.leader_epoch + 1
            )
        ],
        provenance=Provenance(offset=generated[1], epoch=1, timestamp=1_800_000_000_000),
    )
    with SnapshotStore(database_url) as store:
        base = store.write(base_image)
        assert base.content_bytes == _python_size(base_image)
        increment = store.write(image, base=(base, base_image))
        full = store.write(image)
        assert full.content_bytes == _python_size(image)
        assert [s.content_bytes for s in store.snapshots()] == [
            base.content_bytes,
            increment.content_bytes,
            full.content_bytes,
        ]
    # An increment counts its own rows only: one topic's.
    assert increment.base_id == base.id
    assert 0 < (increment.content_bytes or 0) < (full.content_bytes or 0) // 4


def test_retention_keeps_the_newest_within_the_bound(
    database_url: str, generated: tuple[Path, int]
) -> None:
    directory, end = generated
    with LogReader.open(directory) as log, SnapshotStore(database_url) as store:
        written = [store.write(load_image(log, lte=end * k // 5)) for k in range(2, 6)]
        two = sum(s.content_bytes or 0 for s in written[-2:])
        deleted = store.retain(10, max_bytes=two)
        assert sorted(s.id for s in deleted) == [s.id for s in written[:2]]
        assert [s.id for s in store.snapshots()] == [s.id for s in written[2:]]
        # The newest is kept whatever its size; a bound of 0 keeps it alone.
        assert [s.id for s in store.retain(10, max_bytes=0)] == [written[2].id]
        assert [s.id for s in store.snapshots()] == [written[3].id]
        with pytest.raises(SnapshotStoreError, match="byte bound must be 0 or more"):
            store.retain(10, max_bytes=-1)


def test_snapshots_written_before_sizes_are_measured_once(
    database_url: str, generated: tuple[Path, int]
) -> None:
    directory, end = generated
    with LogReader.open(directory) as log, SnapshotStore(database_url) as store:
        written = [store.write(load_image(log, lte=end * k // 3)) for k in (1, 2)]
        execute_sql(database_url, "UPDATE snapshots SET content_bytes = NULL")
        assert [s.content_bytes for s in store.snapshots()] == [None, None]
        assert store.retain(10, max_bytes=10**30) == []
        assert [s.content_bytes for s in store.snapshots()] == [s.content_bytes for s in written]
        # A size edited into no size (negative) is measured again, not summed.
        execute_sql(database_url, "UPDATE snapshots SET content_bytes = -5")
        assert store.retain(10, max_bytes=10**30) == []
        assert [s.content_bytes for s in store.snapshots()] == [s.content_bytes for s in written]


def test_a_kept_increment_keeps_its_chain_and_counts_it(
    database_url: str, generated: tuple[Path, int]
) -> None:
    directory, end = generated
    with LogReader.open(directory) as log, SnapshotStore(database_url) as store:
        image = EMPTY_IMAGE
        chain: list[tuple[SnapshotInfo, MetadataImage]] = []
        for k in range(1, 5):
            image = load_image(log, lte=end * k // 5, base=image)
            chain.append((store.write(image, base=chain[-1] if chain else None), image))
        ids = [info.id for info, _ in chain]
        assert chain[-1][0].chain_length == 3
        # Only the newest fits: it stays, and so does every base it needs.
        assert store.retain(10, max_bytes=0) == []
        assert [s.id for s in store.snapshots()] == ids
        assert store.load(ids[-1]) == chain[-1][1]


def _infos(rng: random.Random, count: int) -> list[SnapshotInfo]:
    """`count` snapshots newest first, each an increment on an older one or full."""
    made: list[SnapshotInfo] = []
    for snapshot_id in range(1, count + 1):
        base = rng.choice([None, None, *(i.id for i in made)]) if made else None
        made.append(
            SnapshotInfo(
                id=snapshot_id,
                offset=snapshot_id * 10,
                epoch=1,
                timestamp=snapshot_id,
                created_at=datetime.now(UTC),
                record_count=1,
                checksum="0" * 64,
                format_version=3,
                base_id=base,
            )
        )
    return made[::-1]


def _needs(info: SnapshotInfo, by_id: dict[int, SnapshotInfo]) -> set[int]:
    found = {info.id}
    while info.base_id is not None:
        info = by_id[info.base_id]
        found.add(info.id)
    return found


@pytest.mark.parametrize("seed", swept(range(200)))
def test_beyond_bounds_keeps_a_closed_set_within_the_bounds(seed: int) -> None:
    rng = random.Random(seed)
    newest_first = _infos(rng, rng.randint(1, 12))
    by_id = {i.id: i for i in newest_first}
    weights = {i.id: rng.randint(0, 100) for i in newest_first}
    keep = rng.randint(1, 12)
    max_bytes = rng.choice([None, 0, rng.randint(0, 600)])
    doomed = sizes.beyond_bounds(newest_first, weights, keep=keep, max_bytes=max_bytes)
    kept = {i.id for i in newest_first} - {i.id for i in doomed}
    newest = newest_first[0]
    assert _needs(newest, by_id) <= kept  # the newest always, with its chain
    for snapshot_id in kept:
        assert _needs(by_id[snapshot_id], by_id) <= kept  # closed under bases
    # The kept are the chains of the newest n of the first `keep`, for some n >= 1.
    n = 0
    while n < min(keep, len(newest_first)) and _needs(newest_first[n], by_id) <= kept:
        n += 1
    assert kept == set().union(*(_needs(i, by_id) for i in newest_first[:n]))
    if max_bytes is not None and kept != _needs(newest, by_id):
        assert sum(weights[i] for i in kept) <= max_bytes
    # And no more: the next one of the first `keep`, with its chain, would not fit.
    if n < min(keep, len(newest_first)):
        assert max_bytes is not None
        grown = kept | _needs(newest_first[n], by_id)
        assert sum(weights[i] for i in grown) > max_bytes
