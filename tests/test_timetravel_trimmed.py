"""Time travel in a trimmed log: which points before its start a snapshot still answers.

A log of single-entry segments at 0..4 (then 10), snapshots at 0, 1, 2, 4 and 6 in SQLite, the
log trimmed to start at 3. `tests/test_log_trim.py` checks one refusal through `mlog`; these
pin the boundaries (a snapshot exactly at the offset, the start, times) and the refusals' text.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count

import pytest
from record_gen import LogGenerator
from test_log_trim import CONFIG

from metadata_log import MetadataLog
from replay.loader import load_image
from replay.sql.store import SnapshotStore
from replay.timetravel import TimeTravelError, travel

T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def trimmed(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[MetadataLog, SnapshotStore]]:
    directory = tmp_path_factory.mktemp("trimmed")
    ticks = count(T0, 1000)
    with MetadataLog.open(directory / "log", config=CONFIG, clock_ms=lambda: next(ticks)) as log:
        for batch in LogGenerator(seed=3).batches(6):
            log.append(batch, principal="User:g")
    with (
        MetadataLog.open(directory / "log", config=CONFIG) as log,
        SnapshotStore(f"sqlite:///{directory / 'snapshots.db'}") as store,
    ):
        assert [s.base_offset for s in log.segments()] == [0, 1, 2, 3, 4, 10]
        for offset in (0, 1, 2, 4, 6):
            store.write(load_image(log, lte=offset))
        log.trim_before(3)
        assert log.log_start_offset == 3
        yield log, store


@pytest.mark.parametrize("offset", [0, 1])
def test_a_snapshot_exactly_at_a_trimmed_offset_answers_it(
    trimmed: tuple[MetadataLog, SnapshotStore], offset: int
) -> None:
    log, store = trimmed
    answer = travel(log, store, at_offset=offset)
    assert answer.snapshot is not None and answer.snapshot.offset == offset
    assert answer.replayed == 0 and answer.replay_seconds == 0.0
    assert answer.image.provenance.offset == offset
    assert answer.load_seconds > 0


@pytest.mark.parametrize("offset", [0, 1])
def test_without_the_database_a_trimmed_offset_is_refused_by_name(
    trimmed: tuple[MetadataLog, SnapshotStore], offset: int
) -> None:
    log, _ = trimmed
    with pytest.raises(TimeTravelError) as caught:
        travel(log, None, at_offset=offset)
    assert str(caught.value).startswith(
        f"offset {offset} is among the entries trimmed from this log: it starts at offset 3 "
    )
    assert str(caught.value).endswith("and the database holds no snapshot there")


@pytest.mark.parametrize("second", [0, 1, 2])
def test_a_time_before_the_start_is_refused_with_the_snapshots_before_it(
    trimmed: tuple[MetadataLog, SnapshotStore], second: int
) -> None:
    log, store = trimmed
    at = T0 + 1000 * second
    with pytest.raises(TimeTravelError) as caught:
        travel(log, store, at_time=at)
    text = str(caught.value)
    assert text.startswith(f"time {at!r} falls among the entries trimmed from this log")
    # the snapshots at least two below the start: the one at start - 1 has no entry to match
    assert text.endswith("the database holds snapshots at offsets 0, 1 (newest five) there")


@pytest.mark.parametrize(("offset", "snapshot", "replayed"), [(4, 4, 0), (5, 4, 1), (7, 6, 1)])
def test_from_the_start_on_the_newest_matching_snapshot_is_used(
    trimmed: tuple[MetadataLog, SnapshotStore], offset: int, snapshot: int, replayed: int
) -> None:
    log, store = trimmed
    answer = travel(log, store, at_offset=offset)
    assert answer.snapshot is not None and answer.snapshot.offset == snapshot
    assert answer.replayed == replayed and answer.image.provenance.offset == offset
