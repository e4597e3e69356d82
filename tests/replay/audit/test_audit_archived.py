"""replay/audit/archived.py: the data source over an archive, driven in-process (no JVM).

The reader's methods are called as Spark's Python workers call them (`partitions` on the
driver's side, `read` per partition), so what is checked here is what a Spark query gets:
the same rows as the log directory, one partition per archived segment (or per split), and
a changed or missing object refused by name. The S3 tests read through moto's endpoint.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest

pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

import pyarrow as pa

from metadata_log.archive import ArchiveDamage, ArchiveError, ArchiveLocation, read_manifest
from replay.audit import archived as archived_module
from replay.audit.archived import (
    ArchivedSegment,
    VerifiedObjects,
    archived_segments,
    is_archive_url,
    open_archive,
    read_archived,
)
from replay.audit.chain import check_archived_segment
from replay.audit.source import ArchivePartition, MetadataLogReader
from tests.support.archives import archive_all, grow
from tests.support.s3_endpoint import S3Endpoint, environment

BATCHES = 120
"""Batches of 4 records: a few dozen segments of the small config."""


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, int]:
    """(log directory, file:// archive URL, one past the archived end)."""
    base = tmp_path_factory.mktemp("archived")
    grow(base / "log", BATCHES)
    url = (base / "archive").as_uri()
    report = archive_all(base / "log", url, base / "work")
    assert report.archived_end is not None and len(report.uploaded) > 10
    return base / "log", url, report.archived_end


def _table(reader: MetadataLogReader) -> pa.Table:
    return pa.Table.from_batches([b for p in reader.partitions() for b in reader.read(p)])


def _directory(log_dir: Path, end: int) -> pa.Table:
    return _table(MetadataLogReader({"path": str(log_dir), "lte": str(end - 1)}))


def test_an_archive_reads_as_the_log_directory_one_partition_per_segment(
    archived: tuple[Path, str, int],
) -> None:
    log_dir, url, end = archived
    reader = MetadataLogReader({"path": url})
    partitions = reader.partitions()
    manifest = read_manifest(ArchiveLocation.open(url))
    assert [p.segment.first_offset for p in partitions if isinstance(p, ArchivePartition)] == [
        e.base_offset for e in manifest.run
    ]
    table = _table(reader)
    assert table.num_rows == end
    assert table.equals(_directory(log_dir, end))
    # The option names the archive as well as a URL path does.
    assert _table(MetadataLogReader({"archive": url})).equals(table)


def test_splits_of_archived_segments_give_the_same_rows(archived: tuple[Path, str, int]) -> None:
    log_dir, url, end = archived
    whole = MetadataLogReader({"path": url})
    split = MetadataLogReader({"path": url, "splitBytes": "4000"})
    assert len(split.partitions()) > len(whole.partitions())
    assert _table(split).equals(_directory(log_dir, end))


def test_offset_and_time_bounds_prune_archived_segments(archived: tuple[Path, str, int]) -> None:
    _, url, end = archived
    reader = MetadataLogReader({"path": url, "gt": str(end - 10)})
    segments = archived_segments(*open_archive(url))
    wanted = [s.first_offset for s in segments if s.next_offset > end - 9]
    assert len(wanted) < len(segments) // 4
    assert [p.segment.first_offset for p in reader.partitions()] == wanted  # type: ignore[attr-defined]
    assert _table(reader)["offset"].to_pylist() == list(range(end - 9, end))
    # Timestamps never decrease: each segment's entries are no older than the previous one's.
    assert all(b.min_timestamp == a.max_timestamp for a, b in itertools.pairwise(segments))
    assert segments[0].min_timestamp < 0


def test_a_changed_or_missing_object_is_named_and_not_read(
    archived: tuple[Path, str, int], tmp_path: Path
) -> None:
    _, url, _ = archived
    location, manifest = open_archive(url)
    segment = archived_segments(location, manifest)[3]
    path = Path(location.path(segment.name))
    original = path.read_bytes()
    try:
        path.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        with pytest.raises(ArchiveDamage, match="differs from what the manifest says"):
            read_archived(segment)
        path.unlink()
        with pytest.raises(ArchiveDamage, match="is missing"):
            read_archived(segment)
    finally:
        path.write_bytes(original)
    read_archived(segment)  # whole again


def test_bad_or_empty_archives_are_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="scheme 'ftp' is not one of"):
        open_archive("ftp://host/archive")
    with pytest.raises(ArchiveError, match="holds no archived segment"):
        open_archive((tmp_path / "empty").as_uri())
    assert is_archive_url("s3://bucket/prefix") and not is_archive_url("/var/lib/mlog/log")


def test_the_chain_of_an_archived_segment_is_checked_from_its_objects(
    archived: tuple[Path, str, int],
) -> None:
    _, url, _ = archived
    _, manifest = open_archive(url)
    entry = manifest.run[2]
    found = check_archived_segment((url, entry))
    assert found.first_break is None and found.has_file
    assert (found.previous.hex(), found.last.hex()) == (entry.chain_before, entry.chain_after)


def test_an_archive_on_s3_reads_as_the_log_directory(
    s3_endpoint: S3Endpoint, tmp_path: Path
) -> None:
    grow(tmp_path / "log", 24)
    with environment(s3_endpoint.env):
        url = s3_endpoint.archive_url("audit-archived")
        report = archive_all(tmp_path / "log", url, tmp_path / "work")
        assert report.archived_end is not None and len(report.uploaded) > 3
        reader = MetadataLogReader({"path": url, "splitBytes": "10000"})
        assert len(reader.partitions()) > len(report.uploaded)
        table = _table(reader)
    assert table.equals(_directory(tmp_path / "log", report.archived_end))


def _segment_kept_afresh(
    archived: tuple[Path, str, int], index: int, monkeypatch: pytest.MonkeyPatch
) -> tuple[ArchiveLocation, ArchivedSegment]:
    """(the archive, its `index`th segment), with an empty store of checked objects."""
    location, manifest = open_archive(archived[1])
    monkeypatch.setattr(archived_module, "_VERIFIED", VerifiedObjects(1 << 30))
    return location, archived_segments(location, manifest)[index]


def test_a_checked_object_is_read_once_while_it_is_unchanged(
    archived: tuple[Path, str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The splits of a segment and the queries of one shell run in the same Python workers:
    # the object is read and hashed once, and again only once it changed (then refused).
    location, segment = _segment_kept_afresh(archived, 5, monkeypatch)
    reads: list[str] = []
    real_read = ArchiveLocation.read

    def counted_read(self: ArchiveLocation, name: str) -> bytes | None:
        reads.append(name)
        return real_read(self, name)

    monkeypatch.setattr(ArchiveLocation, "read", counted_read)
    blocks = [(b.position, b.body) for b in read_archived(segment)[1]]
    for split in segment.splits(max(1, segment.size // 3)):
        read_archived(split)
    assert [(b.position, b.body) for b in read_archived(segment)[1]] == blocks
    assert reads == [segment.name]
    path = Path(location.path(segment.name))
    original = path.read_bytes()
    try:
        path.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
        with pytest.raises(ArchiveDamage, match="differs from what the manifest says"):
            read_archived(segment)
        assert reads == [segment.name] * 2
    finally:
        path.write_bytes(original)
    # Kept within its bound: an object larger than it is read every time.
    monkeypatch.setattr(archived_module, "_VERIFIED", VerifiedObjects(segment.size - 1))
    read_archived(segment)
    read_archived(segment)
    assert reads == [segment.name] * 4


def test_an_object_written_while_it_was_read_is_read_again(
    archived: tuple[Path, str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its version is taken before the read: a write that lands between the two leaves the
    # kept copy under a version the store no longer reports.
    location, segment = _segment_kept_afresh(archived, 6, monkeypatch)
    path = Path(location.path(segment.name))
    reads: list[str] = []
    real_read = ArchiveLocation.read

    def read_then_written(self: ArchiveLocation, name: str) -> bytes | None:
        data = real_read(self, name)
        if not reads:  # the first read: the object is written again right after it
            stat = path.stat()
            os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        reads.append(name)
        return data

    monkeypatch.setattr(ArchiveLocation, "read", read_then_written)
    read_archived(segment)
    read_archived(segment)
    assert reads == [segment.name] * 2
