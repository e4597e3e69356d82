"""A serving log's archive: who uploads, the end every node learns, outages and hung stores."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from api.service.archiving import LogArchiving, behind
from metadata_log.archive import ArchiveLocation, read_manifest
from metadata_log.reader import LogReader
from metadata_log.segment import SegmentInfo
from tests.support.archives import CLUSTER, SMALL_SEGMENTS, archive_all, grow

WAIT_S = 60.0
"""A generous deadline for a round on the archive's thread (never a timing assertion)."""


class Clock:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _archiving(
    log_dir: Path,
    location: ArchiveLocation,
    tmp_path: Path,
    *,
    clock: Clock | None = None,
    cluster_id: str = CLUSTER,
    round_timeout_s: float = 300.0,
) -> LogArchiving:
    return LogArchiving(
        location,
        cluster_id=cluster_id,
        log_dir=log_dir,
        log_config=SMALL_SEGMENTS,
        work_dir=tmp_path / "work",
        interval_s=10.0,
        round_timeout_s=round_timeout_s,
        clock=clock or Clock(),
    )


def _segments(log_dir: Path) -> list[SegmentInfo]:
    with LogReader.open(log_dir, config=SMALL_SEGMENTS) as log:
        return log.segments()


def _end(log_dir: Path) -> int:
    with LogReader.open(log_dir, config=SMALL_SEGMENTS) as log:
        return log.end_offset


def _round(archiving: LogArchiving, clock: Clock, log_dir: Path, *, uploads: bool = True) -> None:
    """Poll until one round started and ended (moving the clock past the interval first)."""
    clock.now += archiving.interval_s
    archiving.poll(
        uploads=uploads, committed_end=_end(log_dir), segments=lambda: _segments(log_dir)
    )
    deadline = time.monotonic() + WAIT_S
    while archiving.in_flight:
        assert time.monotonic() < deadline, "the round did not end"
        time.sleep(0.01)
        archiving.poll(
            uploads=uploads, committed_end=_end(log_dir), segments=lambda: _segments(log_dir)
        )


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "log"
    grow(directory, 60)
    return directory


def test_the_active_controller_uploads_every_sealed_committed_segment(
    log_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    location = ArchiveLocation.open(f"file://{tmp_path}/archive")
    clock = Clock()
    archiving = _archiving(log_dir, location, tmp_path, clock=clock)
    archiving.start()
    try:
        with caplog.at_level(logging.INFO, logger="api.server.archive"):
            _round(archiving, clock, log_dir)
            _round(archiving, clock, log_dir)  # nothing new: no upload, no line
    finally:
        archiving.close()
    sealed = _segments(log_dir)[:-1]
    assert len(sealed) > 5
    manifest = read_manifest(location)
    assert archiving.archived_end == manifest.end_offset == sealed[-1].next_offset
    assert manifest.start_offset == 0
    assert archiving.uploaded_segments == len(manifest.run) == len(sealed)
    assert archiving.uploaded_bytes == sum(e.size_bytes for e in manifest.run)
    assert archiving.behind_segments == 0 and not archiving.failing
    uploads = [r for r in caplog.records if r.getMessage().startswith("archived ")]
    assert len(uploads) == 1, "one INFO line per round that uploaded something"
    assert f"offsets 0..{sealed[-1].next_offset - 1}" in uploads[0].getMessage()


def test_only_committed_segments_are_uploaded(log_dir: Path, tmp_path: Path) -> None:
    location = ArchiveLocation.open(f"file://{tmp_path}/archive")
    archiving = _archiving(log_dir, location, tmp_path)
    sealed = _segments(log_dir)[:-1]
    committed = sealed[2].next_offset + 1  # inside the fourth segment
    result = archiving.run_round(upload=True, committed_end=committed)
    assert result.archived_end == sealed[2].next_offset
    assert [e.next_offset for e in result.uploaded] == [s.next_offset for s in sealed[:3]]


def test_a_node_that_does_not_lead_only_reads_where_the_archive_ends(
    log_dir: Path, tmp_path: Path
) -> None:
    url = f"file://{tmp_path}/archive"
    location = ArchiveLocation.open(url)
    clock = Clock()
    follower = _archiving(log_dir, location, tmp_path, clock=clock)
    follower.start()
    try:
        _round(follower, clock, log_dir, uploads=False)
        assert follower.archived_end is None and not follower.failing
        assert read_manifest(location).entries == ()  # it uploaded nothing
        assert follower.behind_segments == len(_segments(log_dir)) - 1
        archive_all(log_dir, url, tmp_path / "leader-work")  # the leader's uploads
        _round(follower, clock, log_dir, uploads=False)
        assert follower.archived_end == read_manifest(location).end_offset
        assert follower.behind_segments == 0 and follower.uploaded_segments == 0
    finally:
        follower.close()


def test_a_new_leader_goes_on_from_the_manifest(log_dir: Path, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/archive"
    location = ArchiveLocation.open(url)
    sealed = _segments(log_dir)[:-1]
    first = _archiving(log_dir, location, tmp_path)
    first.run_round(upload=True, committed_end=sealed[3].next_offset)
    second = _archiving(log_dir, location, tmp_path)
    result = second.run_round(upload=True, committed_end=_end(log_dir))
    assert result.uploaded[0].base_offset == sealed[3].next_offset
    manifest = read_manifest(location)
    assert len(manifest.entries) == len(manifest.run) == len(sealed), "nothing twice"


def test_an_unreachable_archive_is_one_warning_per_outage_and_its_end_stays(
    log_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "archive"
    location = ArchiveLocation.open(f"file://{root}")
    clock = Clock()
    archiving = _archiving(log_dir, location, tmp_path, clock=clock)
    archiving.start()
    try:
        _round(archiving, clock, log_dir)
        end = archiving.archived_end
        assert end is not None
        shutil.move(root, tmp_path / "away")
        root.write_text("not a directory")  # the store fails every request
        grow(log_dir, 20, start=60)
        with caplog.at_level(logging.INFO, logger="api.server.archive"):
            for _ in range(3):
                _round(archiving, clock, log_dir)
            assert archiving.failing and archiving.failures == 3
            assert archiving.archived_end == end, "the last end known stays in force"
            assert archiving.behind_segments > 0  # what the outage leaves unarchived
            warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert len(warnings) == 1
            assert "cannot be used" in warnings[0].getMessage()
            assert "writes go on" in warnings[0].getMessage()
            root.unlink()
            shutil.move(tmp_path / "away", root)
            _round(archiving, clock, log_dir)
    finally:
        archiving.close()
    assert not archiving.failing
    assert archiving.archived_end == _segments(log_dir)[-2].next_offset > end
    assert any("answers again" in r.getMessage() for r in caplog.records)


class HungStore:
    """An fsspec-like local filesystem whose reads hang until `release` (a hung store)."""

    def __init__(self, root: Path) -> None:
        import fsspec

        self.fs = fsspec.filesystem("file")
        self.release = threading.Event()
        self.entered = threading.Event()
        self.root = root

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.fs, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.entered.set()
            self.release.wait(WAIT_S)
            return method(*args, **kwargs)

        return call


def test_a_hung_store_is_reported_once_and_blocks_nothing(
    log_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "archive"
    store = HungStore(root)
    location = ArchiveLocation(f"file://{root}", store, str(root))
    clock = Clock()
    archiving = _archiving(log_dir, location, tmp_path, clock=clock, round_timeout_s=30.0)
    archiving.start()
    polls = {"uploads": True, "committed_end": _end(log_dir), "segments": lambda: []}
    try:
        with caplog.at_level(logging.WARNING, logger="api.server.archive"):
            clock.now += archiving.interval_s
            archiving.poll(**polls)  # type: ignore[arg-type]  # the keywords' types vary
            assert store.entered.wait(WAIT_S)
            for _ in range(5):  # each poll returns at once while the round hangs
                clock.now += 31.0
                archiving.poll(**polls)  # type: ignore[arg-type]
            assert archiving.failing and archiving.failures == 1
            assert archiving.in_flight, "no second round is started beside a hung one"
            assert len(caplog.records) == 1 and "has not ended" in caplog.records[0].getMessage()
        store.release.set()
        deadline = time.monotonic() + WAIT_S
        while archiving.in_flight:
            assert time.monotonic() < deadline
            time.sleep(0.01)
            archiving.poll(**polls)  # type: ignore[arg-type]
    finally:
        store.release.set()
        archiving.close()
    assert not archiving.failing
    assert archiving.archived_end == _segments(log_dir)[-2].next_offset


def test_another_clusters_archive_is_refused_by_every_node(log_dir: Path, tmp_path: Path) -> None:
    url = f"file://{tmp_path}/archive"
    archive_all(log_dir, url, tmp_path / "work-a")
    clock = Clock()
    for uploads in (True, False):
        other = _archiving(
            log_dir, ArchiveLocation.open(url), tmp_path, clock=clock, cluster_id="another"
        )
        other.start()
        try:
            _round(other, clock, log_dir, uploads=uploads)
        finally:
            other.close()
        assert other.failing and other.archived_end is None
        assert other.uploaded_segments == 0


def test_behind_counts_sealed_committed_segments_past_the_archives_end() -> None:
    segs = [
        SegmentInfo(base_offset=b, next_offset=n, size_bytes=1, path=Path(str(b)), max_timestamp=0)
        for b, n in ((0, 10), (10, 20), (20, 30), (30, 35))
    ]
    assert behind(segs, committed_end=35, end=None) == 3
    assert behind(segs, committed_end=35, end=10) == 2
    assert behind(segs, committed_end=25, end=10) == 1
    assert behind(segs, committed_end=35, end=30) == 0


def test_an_archive_that_lost_what_it_held_is_never_written_to(
    log_dir: Path, tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    location = ArchiveLocation.open(f"file://{root}")
    clock = Clock()
    archiving = _archiving(log_dir, location, tmp_path, clock=clock)
    archiving.start()
    try:
        _round(archiving, clock, log_dir)
        end = archiving.archived_end
        shutil.move(root, tmp_path / "unmounted")  # an empty mount point in its place
        grow(log_dir, 20, start=60)
        for uploads in (True, False):
            _round(archiving, clock, log_dir, uploads=uploads)
            assert archiving.failing and archiving.archived_end == end
        assert not root.exists(), "no new history was started in its place"
    finally:
        archiving.close()
