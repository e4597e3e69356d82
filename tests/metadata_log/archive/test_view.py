"""metadata_log/archive/view.py: archived segments below the local log read as one log."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from metadata_log.archive import (
    ArchiveCache,
    ArchiveDamage,
    ArchiveError,
    ArchiveLocation,
    SegmentArchiver,
    read_manifest,
)
from metadata_log.archive.view import plan_view
from metadata_log.merkle import prove_inclusion, root_at
from metadata_log.reader import LogReader
from metadata_log.replica_log import ReplicaLog
from tests.support.archives import SMALL_SEGMENTS, archive_all, copy_log, grow, trim_to
from tests.support.replica_logs import CONFIG, block_of


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, int]:
    """(trimmed log, untrimmed twin, archive, local start): most segments only archived."""
    root = tmp_path_factory.mktemp("view")
    log = root / "log"
    grow(log, 160)
    twin = copy_log(log, root / "twin")
    report = archive_all(log, str(root / "archive"), root / "work")
    assert report.archived_end is not None
    start = trim_to(log, report.archived_end)
    assert start > 0
    return log, twin, root / "archive", start


def _trimmed_with_archive(
    built: tuple[Path, Path, Path, int], tmp_path: Path, *, own_archive: bool = False
) -> tuple[Path, Path, ArchiveCache, int]:
    """The built logs and a cache of their archive (a copy of it with `own_archive`)."""
    log, twin, archive, start = built
    if own_archive:
        archive = Path(shutil.copytree(archive, tmp_path / "archive"))
    cache = ArchiveCache(ArchiveLocation.open(str(archive)), tmp_path / "cache")
    return log, twin, cache, start


def test_a_view_reads_as_the_untrimmed_log(
    built: tuple[Path, Path, Path, int], tmp_path: Path
) -> None:
    log, twin, cache, start = _trimmed_with_archive(built, tmp_path)
    with LogReader.open(log, config=SMALL_SEGMENTS) as local:
        assert local.log_start_offset == start
    with (
        cache.open_view(log) as view,
        LogReader.open(view.path, config=SMALL_SEGMENTS) as seen,
        LogReader.open(twin, config=SMALL_SEGMENTS) as whole,
    ):
        assert view.archived_through == start
        assert seen.log_start_offset == 0
        assert list(seen.read()) == list(whole.read())
        assert list(seen.read(gt=5, lte=start + 3)) == list(whole.read(gt=5, lte=start + 3))
        assert seen.verify().ok
        for offset in (3, start - 1, seen.end_offset - 1):
            assert seen.digest(offset, at_or_before=True) == whole.digest(offset, at_or_before=True)
        end = seen.end_offset
        assert root_at(view.path, seen.storage.segments, end) == root_at(
            twin, whole.storage.segments, end
        )
        assert prove_inclusion(view.path, seen.storage.segments, 7, end) == prove_inclusion(
            twin, whole.storage.segments, 7, end
        )
    assert not view.path.exists()  # the links go; the cache stays
    assert any((tmp_path / "cache" / "objects").iterdir())


def test_a_view_of_the_archive_alone(built: tuple[Path, Path, Path, int], tmp_path: Path) -> None:
    _, twin, cache, start = _trimmed_with_archive(built, tmp_path)
    with (
        cache.open_view(None) as view,
        LogReader.open(view.path, config=SMALL_SEGMENTS) as seen,
        LogReader.open(twin, config=SMALL_SEGMENTS) as whole,
    ):
        assert seen.end_offset == start
        assert list(seen.read()) == list(whole.read(lte=start - 1))
        assert seen.verify().ok


def test_a_local_log_that_holds_it_all_is_read_as_it_is(tmp_path: Path) -> None:
    log = tmp_path / "log"
    grow(log, 60)
    archive_all(log, str(tmp_path / "archive"), tmp_path / "work")
    cache = ArchiveCache(ArchiveLocation.open(str(tmp_path / "archive")), tmp_path / "cache")
    with cache.open_view(log) as view:
        assert view.path == log and view.archived_through is None
    assert log.is_dir()  # not removed: it is the local log


def test_a_changed_archived_segment_is_never_served(
    built: tuple[Path, Path, Path, int], tmp_path: Path
) -> None:
    log, _, cache, _ = _trimmed_with_archive(built, tmp_path, own_archive=True)
    entry = read_manifest(cache.location).run[1]
    name = entry.objects["segment"].name
    data = bytearray(cache.location.read(name) or b"")
    data[-40] ^= 1
    cache.location.write(name, bytes(data))
    with pytest.raises(ArchiveDamage, match="differs from what the manifest says"):
        cache.open_view(log)
    assert not any(p.name.startswith("view-") for p in (tmp_path / "cache").iterdir())


def test_a_deleted_archived_chain_file_is_named(
    built: tuple[Path, Path, Path, int], tmp_path: Path
) -> None:
    log, _, cache, _ = _trimmed_with_archive(built, tmp_path, own_archive=True)
    entry = read_manifest(cache.location).run[0]
    cache.location.delete(entry.objects["chain"].name)
    with pytest.raises(ArchiveDamage, match=r"\.chain is missing"):
        cache.open_view(log)


def test_an_archive_that_meets_the_log_inside_a_segment_is_left_out() -> None:
    from metadata_log.archive.manifest import ArchivedObject, ManifestEntry, build_manifest

    def entry(base: int, next_offset: int) -> ManifestEntry:
        obj = ArchivedObject(name="x", size=0, sha256="0" * 64)
        return ManifestEntry(
            base_offset=base,
            next_offset=next_offset,
            max_timestamp=0,
            chain_before="0" * 64,
            chain_after="0" * 64,
            objects={"segment": obj, "chain": obj, "leaves": obj},
        )

    manifest = build_manifest([entry(0, 100), entry(100, 200)])
    assert "at a segment boundary yet" in (plan_view(manifest, [150, 300]).note or "")
    gap = plan_view(manifest, [250, 300]).note or ""
    assert "offsets 200..249 were trimmed before they were archived" in gap
    joined = plan_view(manifest, [100, 300])
    assert [e.base_offset for e in joined.archived] == [0] and joined.local_from == 100
    assert plan_view(manifest, [0, 300]).archived == ()


def test_another_replicas_archived_segments_join_by_their_chain(tmp_path: Path) -> None:
    """Replicas' segments differ in their sync markers; the hash chain joins them."""
    a, b = tmp_path / "a", tmp_path / "b"
    for directory in (a, b):
        with ReplicaLog.open(directory, config=CONFIG, chained=True) as replica:
            for i in range(60):
                replica.write_blocks([block_of(replica, i * 4, 4, 1)], check=False)
            replica.flush()
    url = str(tmp_path / "archive")
    archiver = SegmentArchiver(ArchiveLocation.open(url), cluster_id="c", work_dir=tmp_path / "w")
    with LogReader.open(a, config=CONFIG) as reader:
        end = archiver.archive(reader, committed_end=reader.end_offset).archived_end
    assert end is not None
    with ReplicaLog.open(b, config=CONFIG) as replica:
        replica.trim_before(end)
        start = replica.log_start_offset
    assert 0 < start <= end
    cache = ArchiveCache(ArchiveLocation.open(url), tmp_path / "cache")
    with (
        cache.open_view(b) as view,
        LogReader.open(view.path, config=CONFIG) as seen,
        LogReader.open(a, config=CONFIG) as whole,
    ):
        assert view.archived_through is not None
        assert seen.log_start_offset == 0
        assert list(seen.read()) == list(whole.read())
        assert seen.verify().ok


def test_an_empty_archive_without_a_local_log_is_refused_in_one_line(tmp_path: Path) -> None:
    cache = ArchiveCache(ArchiveLocation.open(str(tmp_path / "archive")), tmp_path / "cache")
    with pytest.raises(ArchiveError, match="holds no segment yet and there is no local log"):
        cache.open_view(None)
    assert not any(p.name.startswith("view-") for p in (tmp_path / "cache").glob("*"))
