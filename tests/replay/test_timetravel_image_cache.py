"""Images kept between time-travel points (`replay/timetravel/image_cache.py`): the same answers
as without them, a log written again never answered from its old images, and the bounds.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from metadata_log.reader import LogReader
from replay.loader import load_image
from replay.sql.store import SnapshotStore
from replay.timetravel import ImageCache, batch_end, image_at, rebuild, travel
from tests.support.timetravel_logs import BATCHES, broker_of, known_log, timed_log


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LogReader]:
    with known_log(tmp_path_factory.mktemp("timetravel") / "log") as reader:
        yield reader


@pytest.mark.parametrize("with_snapshot", [False, True])
def test_every_point_in_any_order_answers_as_without_a_cache(
    log: LogReader, tmp_path: Path, with_snapshot: bool
) -> None:
    """Random points, back and forth, each equal to a replay from the start; kept ones used."""
    with SnapshotStore(f"sqlite:///{tmp_path / 'snapshots.db'}") as store:
        if with_snapshot:
            store.write(load_image(log, lte=batch_end(log, 6)))
        cache = ImageCache()
        points = list(range(-1, log.end_offset)) * 2
        random.Random(3).shuffle(points)
        for point in points:
            assert image_at(log, store, at_offset=point, cache=cache) == image_at(
                log, at_offset=point
            ), point
        assert cache.hits > 0 and 0 < len(cache) <= cache.max_images


def test_a_kept_image_is_replayed_from_and_said_so(log: LogReader) -> None:
    cache = ImageCache()
    last = log.end_offset - 1
    first = travel(log, None, at_offset=last, cache=cache)
    assert first.kept_from is None and len(cache) > 0
    again = travel(log, None, at_offset=last, cache=cache)
    assert again.kept_from is not None and again.replayed == last - again.kept_from
    assert again.replayed < first.replayed and again.image == first.image
    assert travel(log, None, at_offset=last).kept_from is None  # no cache, nothing kept


@pytest.mark.parametrize("spacing", [1, 3, 5, 10**9])
def test_a_long_replay_keeps_checkpoints_that_later_points_replay_from(
    log: LogReader, monkeypatch: pytest.MonkeyPatch, spacing: int
) -> None:
    # Every `spacing` entries (at a batch's end) the replay to the last point keeps an image,
    # beside the one before its last batch; a point it crossed then replays from the nearest.
    monkeypatch.setattr(rebuild, "CHECKPOINT_ENTRIES", spacing)
    cache = ImageCache()
    last = log.end_offset - 1
    travel(log, None, at_offset=last, cache=cache)
    assert (len(cache) > 2) if spacing < 10**9 else (len(cache) == 1)
    for point in range(last):
        target = batch_end(log, point)
        nearest = cache.nearest(log, target)
        found = travel(log, None, at_offset=target, cache=cache)
        assert found.replayed == target - (-1 if nearest is None else nearest.provenance.offset)
        assert found.image == image_at(log, at_offset=target), point


def test_a_newer_snapshot_is_loaded_rather_than_a_long_replay(
    log: LogReader, tmp_path: Path
) -> None:
    """A kept image far behind (more entries than the image has partitions) loses to a load."""
    with SnapshotStore(f"sqlite:///{tmp_path / 'snapshots.db'}") as store:
        cache = ImageCache()
        cache.add(log, image_at(log, at_offset=batch_end(log, 0)))
        near = store.write(load_image(log, lte=log.end_offset - 2))
        result = travel(log, store, at_offset=log.end_offset - 1, cache=cache)
        assert result.kept_from is None and result.snapshot == near


def test_a_log_written_again_is_not_answered_from_its_old_images(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    with timed_log(directory) as writer:
        for batch in BATCHES[:3]:
            writer.append(batch, principal="User:alice")
    cache = ImageCache()
    with LogReader.open(directory) as reader:
        end = reader.end_offset - 1
        image_at(reader, at_offset=end, cache=cache)
        assert cache.nearest(reader, end) is not None
    shutil.rmtree(directory)
    with timed_log(directory) as writer:  # the same offsets, other entries
        for broker_id in range(7, 20):
            writer.append([broker_of(broker_id)], principal="User:bob")
    with LogReader.open(directory) as reader:
        end = reader.end_offset - 1
        assert image_at(reader, at_offset=end, cache=cache) == load_image(reader, lte=end)


def test_another_log_forgets_the_kept_images(log: LogReader, tmp_path: Path) -> None:
    cache = ImageCache()
    image_at(log, cache=cache)
    assert len(cache) > 0
    with known_log(tmp_path / "other") as other:
        assert cache.nearest(other, other.end_offset) is None
        assert len(cache) == 0


def test_the_least_recently_used_go_first_within_the_bounds(log: LogReader) -> None:
    cache = ImageCache(max_images=2)
    images = [image_at(log, at_offset=batch_end(log, o)) for o in (0, 6, 9)]
    for image in images:
        cache.add(log, image)
    assert len(cache) == 2 and cache.nearest(log, images[0].provenance.offset) is None
    assert cache.nearest(log, images[1].provenance.offset) == images[1]  # now the newest used
    cache.add(log, images[0])
    # 9's is the least recently used, but the newest is never the one to go: 6's went.
    assert cache.nearest(log, images[2].provenance.offset) == images[2]
    assert cache.nearest(log, images[1].provenance.offset) == images[0]
    small = ImageCache(max_partitions=images[2].topics.partition_count())
    small.add(log, images[2])
    small.add(log, images[2])  # the same offset again is counted once
    assert len(small) == 1 and small.partitions == images[2].topics.partition_count()


def test_the_newest_stays_when_older_points_fill_the_bound(log: LogReader) -> None:
    end = image_at(log)
    cache = ImageCache(max_images=2, max_partitions=2 * max(1, end.topics.partition_count()))
    cache.add(log, end)
    for point in (0, 3, 6, 9, 0, 6):
        cache.add(log, image_at(log, at_offset=batch_end(log, point)))
        assert cache.nearest(log, end.provenance.offset) is end
        assert len(cache) <= 2 and cache.partitions <= cache.max_partitions


@pytest.mark.parametrize("field", ["max_images", "max_partitions"])
def test_bounds_below_one_are_refused(field: str) -> None:
    with pytest.raises(ValueError, match="must be 1 or more"):
        ImageCache(**{field: 0})
