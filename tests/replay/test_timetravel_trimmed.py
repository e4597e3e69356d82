"""Time travel in a trimmed log: which points before its start a snapshot still answers.

A log of single-entry segments at 0..4 (then 10), snapshots at 0, 1, 2, 4 and 6 in SQLite, the
log trimmed to start at 3. `tests/metadata_log/test_log_trim.py` checks one refusal through
`mlog`; these pin the boundaries (a snapshot exactly at the offset, the start, times) and the
refusals' text.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from metadata_log import MetadataLog
from metadata_log.replica_log import ReplicaLog
from metadata_log.start_snapshot import StartSnapshot
from records.errors import MetadataLogError
from records.model import ClientWriteRecord
from records.uuids import Uuid
from replay.errors import TrimmedLogError
from replay.loader import load_image
from replay.sql.store import SnapshotStore
from replay.timetravel import (
    Entity,
    Names,
    TimeTravelError,
    describe,
    history,
    snapshot_matches_log,
    travel,
)
from tests.support.record_gen import LogGenerator
from tests.support.timetravel_logs import START, timed_log
from tests.support.trim_logs import CONFIG


def _append_generated(log: MetadataLog, *, seed: int, batches: int) -> None:
    """`batches` generated batches, one append each (one a second in a `timed_log`)."""
    for batch in LogGenerator(seed=seed).batches(batches):
        log.append(batch, principal="User:g")


@pytest.fixture(scope="module")
def trimmed(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[MetadataLog, SnapshotStore]]:
    directory = tmp_path_factory.mktemp("trimmed")
    with timed_log(directory / "log", config=CONFIG) as log:
        _append_generated(log, seed=3, batches=6)
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
    at = START + 1000 * second
    with pytest.raises(TimeTravelError) as caught:
        travel(log, store, at_time=at)
    text = str(caught.value)
    assert text.startswith(f"time {at!r} falls among the entries trimmed from this log")
    # the snapshots at least two below the start: the one at start - 1 is a base, reached as such
    assert text.endswith("the database holds snapshots at offsets 0, 1 (newest five) there")


@pytest.mark.parametrize(("offset", "snapshot", "replayed"), [(4, 4, 0), (5, 4, 1), (7, 6, 1)])
def test_from_the_start_on_the_newest_matching_snapshot_is_used(
    trimmed: tuple[MetadataLog, SnapshotStore], offset: int, snapshot: int, replayed: int
) -> None:
    log, store = trimmed
    answer = travel(log, store, at_offset=offset)
    assert answer.snapshot is not None and answer.snapshot.offset == snapshot
    assert answer.replayed == replayed and answer.image.provenance.offset == offset


def test_history_in_a_trimmed_log_warns_that_its_start_is_gone(
    trimmed: tuple[MetadataLog, SnapshotStore], caplog: pytest.LogCaptureFixture
) -> None:
    log, _ = trimmed
    with caplog.at_level(logging.WARNING):
        list(history(log, Entity(broker=1)))
    assert "the log starts at offset 3 (trimmed with `mlog log trim`)" in caplog.text


def test_history_of_an_untrimmed_log_does_not_warn(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with MetadataLog.open(tmp_path / "log", config=CONFIG) as log:
        for batch in LogGenerator(seed=3).batches(2):
            log.append(batch, principal="User:g")
        with caplog.at_level(logging.WARNING):
            list(history(log, Entity(broker=1)))
    assert "trimmed" not in caplog.text


def test_a_client_write_is_described_by_its_client_sequence_and_answer() -> None:
    record = ClientWriteRecord(
        client_id=Uuid(bytes([7]) * 16),
        sequence=4,
        principal="User:a",
        api_key=19,
        response=b"12345",
    )
    assert describe(record, Names()) == (
        f"client {record.client_id} write 4 applied (API 19, answer of 5 bytes kept)"
    )


def test_a_quorum_log_reset_to_a_snapshot_answers_its_offset_from_it(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path / "single", config=CONFIG) as log:
        for batch in LogGenerator(seed=3).batches(6):
            log.append(batch, principal="User:g")
        image = load_image(log, lte=4)
    with SnapshotStore(f"sqlite:///{tmp_path / 'snapshots.db'}") as store:
        info = store.write(image)
        assert info.offset == 4
        named = StartSnapshot(
            offset=4, epoch=info.epoch, timestamp=info.timestamp, checksum=info.checksum
        )
        for start, used in ((named, True), (replace(named, checksum="other"), False)):
            directory = tmp_path / f"quorum-{used}"
            with ReplicaLog.open(directory, config=CONFIG) as log:
                log.reset_to_snapshot(start)
                assert (log.log_start_offset, log.end_offset) == (5, 5)
                assert snapshot_matches_log(log, info) is used
                if used:  # offset 4 = the start - 1: not refused, answered by the snapshot
                    answer = travel(log, store, at_offset=4)
                    assert answer.snapshot is not None and answer.snapshot.id == info.id
                    assert answer.replayed == 0
                    assert answer.image.provenance.offset == 4
                else:
                    with pytest.raises(MetadataLogError):
                        travel(log, store, at_offset=4)


def test_loading_across_the_trimmed_start_names_the_start_and_the_offset_needed(
    trimmed: tuple[MetadataLog, SnapshotStore],
) -> None:
    log, store = trimmed
    with pytest.raises(TrimmedLogError) as caught:
        load_image(log)
    assert (caught.value.log_start, caught.value.needed) == (3, 0)
    assert "the log starts at offset 3" in str(caught.value)
    assert "this needs offset 0 on" in str(caught.value)
    at_1 = travel(log, store, at_offset=1).image
    for lte in (None, 2, 5):
        with pytest.raises(TrimmedLogError) as caught:
            load_image(log, lte=lte, base=at_1)
        assert (caught.value.log_start, caught.value.needed) == (3, 2)
    assert load_image(log, lte=1, base=at_1) is at_1  # nothing to replay: no refusal
    assert load_image(log, lte=0, base=at_1) is at_1


def test_a_time_before_the_first_entry_of_an_untrimmed_log_is_refused_saying_so(
    tmp_path: Path,
) -> None:
    with timed_log(tmp_path / "log", config=CONFIG) as log:
        _append_generated(log, seed=3, batches=2)
        with pytest.raises(TimeTravelError, match=r"before the log's first entry .*--at-offset -1"):
            travel(log, None, at_time=START - 1)
        assert travel(log, None, at_offset=-1).image.provenance.offset == -1


def test_a_log_that_starts_at_1_refuses_a_time_before_it_and_warns_in_history(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with timed_log(tmp_path / "log", config=CONFIG) as log:
        _append_generated(log, seed=3, batches=3)
        assert [s.base_offset for s in log.segments()][:2] == [0, 1]
        log.trim_before(1)
        assert log.log_start_offset == 1
        with pytest.raises(TimeTravelError, match="time 1700000000000 falls among"):
            travel(log, None, at_time=START)
        with caplog.at_level(logging.WARNING):
            list(history(log, Entity(broker=1)))
    assert "the log starts at offset 1 (trimmed" in caplog.text


def test_a_log_trimmed_to_just_after_a_snapshot_travels_from_it(tmp_path: Path) -> None:
    """`trim_before(offset + 1)` (the API; the CLI keeps the snapshot's own entry) leaves no
    entry to check the snapshot at start - 1 against: it is the base all the same, for its own
    offset and every later one, unless the log's epochs go down from it (another log's)."""
    with timed_log(tmp_path / "log", config=CONFIG) as log:
        _append_generated(log, seed=5, batches=6)
        assert [s.base_offset for s in log.segments()][:4] == [0, 1, 2, 3]
        wanted = {offset: load_image(log, lte=offset) for offset in (2, 3, 4)}
        with SnapshotStore(f"sqlite:///{tmp_path / 'snapshots.db'}") as store:
            info = store.write(wanted[2])
            log.trim_before(3)
            assert log.log_start_offset == 3 and log.start_snapshot is None
            assert snapshot_matches_log(log, info)
            for offset, replayed in ((2, 0), (3, 1), (4, 2)):
                answer = travel(log, store, at_offset=offset)
                assert answer.snapshot is not None and answer.snapshot.id == info.id
                assert answer.replayed == replayed and answer.skipped == ()
                assert answer.image.same_state(wanted[offset])
                assert answer.image.provenance.offset == offset
            first = next(iter(log.read(gt=2, lte=3)))
            assert not snapshot_matches_log(log, replace(info, epoch=first.epoch + 1))
            assert not snapshot_matches_log(log, replace(info, offset=1))


def test_a_time_of_the_first_kept_entry_is_answered(
    trimmed: tuple[MetadataLog, SnapshotStore],
) -> None:
    """The entry at the start is kept: its own time is a point of the log, not before it."""
    log, store = trimmed
    first = next(iter(log.read(gt=2, lte=3)))
    answer = travel(log, store, at_time=first.timestamp)
    assert answer.image.provenance.offset == 3
    assert answer.snapshot is not None and answer.snapshot.offset == 2
    with pytest.raises(TimeTravelError, match="falls among the entries trimmed"):
        travel(log, store, at_time=first.timestamp - 1)
