"""Online retention: which segments go, and a service that trims below its snapshots."""

from __future__ import annotations

import logging
import time
from functools import partial
from pathlib import Path

import pytest

from api.service.retention import LogRetention, RetentionConfig, trim_offset
from api.service.service import MetadataService
from api.service.snapshots import Snapshotter
from metadata_log.config import LogConfig
from metadata_log.log import MetadataLog
from metadata_log.reader import LogReader
from metadata_log.segment import SegmentInfo
from replay.controller.commands import CreatableTopic, RegisterBroker
from replay.sql.store import SnapshotStore, sqlite_url
from tests.support.archives import SMALL_SEGMENTS, grow


def segments(*spans: tuple[int, int, int, int]) -> list[SegmentInfo]:
    """(base, next, size, max timestamp) per segment."""
    return [
        SegmentInfo(base_offset=b, next_offset=n, size_bytes=s, path=Path(f"{b}"), max_timestamp=t)
        for b, n, s, t in spans
    ]


LOG = segments((0, 10, 100, 1_000), (10, 20, 100, 2_000), (20, 30, 100, 3_000), (30, 35, 50, 4_000))


def test_segments_go_oldest_first_until_the_log_is_within_its_bytes() -> None:
    config = RetentionConfig(max_bytes=200)
    assert trim_offset(LOG, below=100, config=config, now_ms=0) == 20
    assert trim_offset(LOG, below=100, config=RetentionConfig(max_bytes=350), now_ms=0) is None


def test_only_segments_wholly_below_the_snapshot_go_and_never_the_newest() -> None:
    config = RetentionConfig(max_bytes=0)
    assert trim_offset(LOG, below=15, config=config, now_ms=0) == 10
    assert trim_offset(LOG, below=9, config=config, now_ms=0) is None
    assert trim_offset(LOG, below=1_000, config=config, now_ms=0) == 30


def test_segments_older_than_max_ms_go() -> None:
    config = RetentionConfig(max_ms=1_500)
    assert trim_offset(LOG, below=100, config=config, now_ms=4_000) == 20
    assert trim_offset(LOG, below=100, config=config, now_ms=3_400) == 10


def test_without_a_bound_nothing_is_trimmed() -> None:
    assert not RetentionConfig().bounded
    assert trim_offset(LOG, below=100, config=RetentionConfig(), now_ms=10**12) is None


SEGMENT = 16384
"""Small segments (each starts with the ~12 KiB schema header), so a trim removes some."""


@pytest.mark.parametrize("max_bytes", [-1, 40_000])
def test_a_service_trims_below_each_snapshot_once_over_its_bound(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, max_bytes: int
) -> None:
    caplog.set_level(logging.INFO, logger="api.server.retention")
    db = tmp_path / "snapshots.db"
    policy = RetentionConfig(max_bytes=max_bytes, snapshot_bytes=4096)
    # Chains of two increments: retention deletes a chain once a newer full one is kept.
    snapshots = Snapshotter(
        lambda: SnapshotStore(sqlite_url(db)), file=db, retention=2, policy=policy, max_chain=2
    )
    log_dir = tmp_path / "log"
    service = MetadataService.open(
        log_dir, config=LogConfig(segment_bytes=SEGMENT), snapshots=snapshots
    )
    with service:
        controller = service.controller
        service.execute(partial(controller.register_broker, request=RegisterBroker(broker_id=1)))
        for batch in range(40):
            topics = [CreatableTopic(name=f"t{batch}-{i}") for i in range(10)]
            service.execute(partial(controller.create_topics, topics=topics))
            snapshots.wait()
        image = service.image
    with LogReader.open(log_dir) as log:
        size = sum(s.size_bytes for s in log.segments())
        start = log.log_start_offset
    if max_bytes < 0:
        assert start == 0
        assert "retention removed" not in caplog.text
    else:
        assert start > 0
        assert size <= max_bytes + 3 * SEGMENT
        assert "retention removed" in caplog.text
    assert "retention deleted" in caplog.text  # two snapshots are kept
    again = Snapshotter(lambda: SnapshotStore(sqlite_url(db)), file=db)
    reopened = MetadataService.open(log_dir, snapshots=again)
    with reopened:
        assert reopened.image == image


def test_log_retention_counts_what_it_removed(tmp_path: Path) -> None:
    class Log:
        def __init__(self) -> None:
            self.cut: int | None = None

        def segments(self) -> list[SegmentInfo]:
            return LOG

        def trim_before(self, offset: int) -> list[SegmentInfo]:
            self.cut = offset
            return [s for s in LOG if s.next_offset <= offset]

    log = Log()
    retention = LogRetention(RetentionConfig(max_bytes=200), clock_ms=lambda: 0)
    assert [s.base_offset for s in retention.trim(log, below=100)] == [0, 10]
    assert log.cut == 20 and retention.trimmed_segments == 2


def test_snapshots_older_than_max_ms_are_deleted_but_the_newest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="api.server.retention")
    db = tmp_path / "snapshots.db"
    now = [time.time_ns() // 1_000_000]
    snapshots = Snapshotter(
        lambda: SnapshotStore(sqlite_url(db)),
        file=db,
        retention=10,
        clock_ms=lambda: now[0],
        policy=RetentionConfig(max_ms=60_000, snapshot_bytes=1),
        max_chain=0,  # full snapshots: an increment's bases would stay (test_increments.py)
    )
    with MetadataService.open(tmp_path / "log", snapshots=snapshots) as service:
        controller = service.controller
        service.execute(partial(controller.register_broker, request=RegisterBroker(broker_id=1)))
        snapshots.wait()
        service.execute(partial(controller.create_topics, topics=[CreatableTopic(name="a")]))
        first = snapshots.wait()
        assert first is not None
        assert len(snapshots.store.snapshots()) == 2  # real creation times: both are young
        now[0] = int(first.created_at.timestamp() * 1000) + 120_000
        service.execute(partial(controller.create_topics, topics=[CreatableTopic(name="b")]))
        newest = snapshots.wait()
        assert newest is not None
        assert [s.id for s in snapshots.store.snapshots()] == [newest.id]
    assert "retention deleted 2 snapshot(s)" in caplog.text


class Archive:
    """Where an archive ends, as a node last learned it."""

    def __init__(self, end: int | None) -> None:
        self.archived_end = end


class Segments:
    """A log that only lists its segments (the cut is all that is asked of it)."""

    def __init__(self, listed: list[SegmentInfo]) -> None:
        self.listed = listed

    def segments(self) -> list[SegmentInfo]:
        return self.listed

    def trim_before(self, offset: int) -> list[SegmentInfo]:
        raise AssertionError("not trimmed here")


def test_with_an_archive_only_segments_it_holds_go(caplog: pytest.LogCaptureFixture) -> None:
    retention = LogRetention(RetentionConfig(max_bytes=0), clock_ms=lambda: 0)
    log = Segments(LOG)
    assert retention.cut(log, below=100) == 30
    retention.archive = Archive(20)
    with caplog.at_level(logging.INFO, logger="api.server.retention"):
        assert retention.cut(log, below=100) == 20  # capped at the archive's end
        assert retention.cut(log, below=100) == 20
    assert retention.archive_held_segments == 1 and retention.archive_held_back == 2
    waits = [r for r in caplog.records if "waits for the archive" in r.getMessage()]
    assert len(waits) == 1, "one line when retention starts waiting"
    retention.archive = Archive(25)  # ends inside a segment: that segment stays
    assert retention.cut(log, below=100) == 20
    retention.archive = Archive(35)
    assert retention.cut(log, below=100) == 30  # the snapshot bounds it again
    assert retention.archive_held_segments == 0 and retention.archive_held_back == 3
    retention.archive = Archive(20)
    assert retention.cut(log, below=15) == 10  # below both
    assert retention.archive_held_segments == 0


def test_an_archive_that_holds_nothing_known_holds_all_retention_back() -> None:
    retention = LogRetention(RetentionConfig(max_bytes=0), clock_ms=lambda: 0)
    retention.archive = Archive(None)  # empty, or unreachable before its first read
    assert retention.cut(Segments(LOG), below=100) is None
    assert retention.archive_held_segments == 3


def test_a_service_with_an_archive_trims_only_what_it_holds(tmp_path: Path) -> None:
    retention = LogRetention(RetentionConfig(max_bytes=0))
    directory = tmp_path / "log"
    grow(directory, 40)
    with MetadataLog.open(directory, config=SMALL_SEGMENTS) as log:
        segs = log.segments()
        end = segs[3].next_offset
        retention.archive = Archive(end)
        removed = retention.trim(log, below=log.end_offset - 1)
        assert [s.next_offset for s in removed] == [s.next_offset for s in segs[:4]]
        assert log.log_start_offset == end
