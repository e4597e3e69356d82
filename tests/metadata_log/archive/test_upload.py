"""metadata_log/archive/upload.py: sealed segments archived once, checked, resumable."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from metadata_log.archive import (
    ArchiveDamage,
    ArchiveError,
    ArchiveLocation,
    SegmentArchiver,
    read_manifest,
)
from metadata_log.archive.manifest import entry_name, object_name
from metadata_log.reader import LogReader
from tests.support.archives import CLUSTER, SMALL_SEGMENTS, archive_all, grow


def _sealed(directory: Path) -> list[tuple[int, int]]:
    with LogReader.open(directory, config=SMALL_SEGMENTS) as log:
        return [(s.base_offset, s.next_offset) for s in log.segments()[:-1]]


def test_every_sealed_segment_is_archived_once_with_its_proofs(tmp_path: Path) -> None:
    log = tmp_path / "log"
    grow(log, 120)
    url = f"file://{tmp_path / 'archive'}"
    first = archive_all(log, url, tmp_path / "work")
    sealed = _sealed(log)
    assert len(sealed) >= 10
    assert [(e.base_offset, e.next_offset) for e in first.uploaded] == sealed
    assert first.archived_end == sealed[-1][1]
    again = archive_all(log, url, tmp_path / "work")
    assert again.uploaded == [] and again.archived_end == first.archived_end
    manifest = read_manifest(ArchiveLocation.open(url))
    assert [(e.base_offset, e.next_offset) for e in manifest.run] == sealed
    for entry in manifest.run:
        assert entry.objects["leaves"].size == 32 * entry.entries
    # Writes go on: the next round archives only what was sealed since.
    grow(log, 60, start=120)
    later = archive_all(log, url, tmp_path / "work")
    assert later.uploaded and later.uploaded[0].base_offset == first.archived_end


def test_objects_without_an_entry_are_uploaded_again(tmp_path: Path) -> None:
    log = tmp_path / "log"
    grow(log, 60)
    location = ArchiveLocation.open(str(tmp_path / "archive"))
    report = archive_all(log, location.url, tmp_path / "work")
    last = report.uploaded[-1]
    # As if killed after the segment's upload, before the entry: a half-written object too.
    location.delete(last.manifest_name)
    location.write(object_name(last.stem, "segment"), b"half an upload")
    again = archive_all(log, location.url, tmp_path / "work")
    assert [e.stem for e in again.uploaded] == [last.stem]
    assert again.uploaded[0].encode() == last.encode()


def test_an_entry_another_controller_wrote_the_same_is_taken(tmp_path: Path) -> None:
    log = tmp_path / "log"
    grow(log, 60)
    url = str(tmp_path / "archive")
    report = archive_all(log, url, tmp_path / "work")
    location = ArchiveLocation.open(url)
    last = report.uploaded[-1]
    location.delete(last.manifest_name)
    archiver = SegmentArchiver(location, cluster_id=CLUSTER, work_dir=tmp_path / "w")
    archiver._put_entry(last)  # the other controller's, identical bytes: not an error
    archiver._put_entry(last)
    assert location.read(last.manifest_name) == last.encode()


def test_an_entry_naming_other_objects_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "log"
    grow(log, 60)
    url = str(tmp_path / "archive")
    last = archive_all(log, url, tmp_path / "work").uploaded[-1]
    location = ArchiveLocation.open(url)
    location.write(
        last.manifest_name, last.encode().replace(b'"max_timestamp":', b'"max_timestamp":1')
    )
    archiver = SegmentArchiver(location, cluster_id=CLUSTER, work_dir=tmp_path / "w")
    with pytest.raises(ArchiveDamage, match="already names other objects"):
        archiver._put_entry(last)


def test_another_clusters_archive_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "log"
    grow(log, 40)
    url = str(tmp_path / "archive")
    archive_all(log, url, tmp_path / "work")
    other = SegmentArchiver(ArchiveLocation.open(url), cluster_id="other", work_dir=tmp_path)
    with (
        LogReader.open(log, config=SMALL_SEGMENTS) as reader,
        pytest.raises(ArchiveError, match="holds cluster archive-test-cluster's history"),
    ):
        other.archive(reader, committed_end=reader.end_offset)


def test_uncommitted_segments_wait(tmp_path: Path) -> None:
    log = tmp_path / "log"
    grow(log, 80)
    sealed = _sealed(log)
    archiver = SegmentArchiver(
        ArchiveLocation.open(str(tmp_path / "archive")), cluster_id=CLUSTER, work_dir=tmp_path
    )
    with LogReader.open(log, config=SMALL_SEGMENTS) as reader:
        report = archiver.archive(reader, committed_end=sealed[2][1] + 1)
    assert report.archived_end == sealed[2][1]


def test_a_segment_that_straddles_the_archives_end_is_cut_there(tmp_path: Path) -> None:
    log = tmp_path / "log"
    grow(log, 120)
    sealed = _sealed(log)
    url = str(tmp_path / "archive")
    location = ArchiveLocation.open(url)
    whole = archive_all(log, url, tmp_path / "work").uploaded
    base, next_offset = sealed[3]
    with LogReader.open(log, config=SMALL_SEGMENTS) as reader:
        inside = reader.replica_blocks(start=base, max_bytes=0, max_blocks=1)[0].last_offset + 1
    assert base < inside < next_offset
    # Another replica cut its segment at `inside`: the archive's run ends there.
    for entry in whole[3:]:
        location.delete(entry.manifest_name)
    stem = entry_name(base, inside)
    theirs = dataclasses.replace(
        whole[3],
        next_offset=inside,
        objects={
            k: dataclasses.replace(o, name=object_name(stem, k))
            for k, o in whole[3].objects.items()
        },
    )
    location.write(theirs.manifest_name, theirs.encode())
    report = archive_all(log, url, tmp_path / "work")
    assert (report.uploaded[0].base_offset, report.uploaded[0].next_offset) == (inside, next_offset)
    assert report.uploaded[0].chain_after == whole[3].chain_after
    leaves = location.read(report.uploaded[0].objects["leaves"].name)
    full = location.read(whole[3].objects["leaves"].name)
    assert leaves is not None and full is not None and full.endswith(leaves)
    assert [e.stem for e in report.uploaded[1:]] == [e.stem for e in whole[4:]]
    assert read_manifest(location).end_offset == whole[-1].next_offset
    assert not list((tmp_path / "work").iterdir())  # the cut's work directory is removed
