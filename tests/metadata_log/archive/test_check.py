"""metadata_log/archive/check.py: every archived object checked against the manifest."""

from __future__ import annotations

from pathlib import Path

from metadata_log.archive import ArchiveCache, ArchiveLocation, check_archive, read_manifest
from tests.support.archives import archive_all, grow


def _archived(tmp_path: Path) -> ArchiveLocation:
    grow(tmp_path / "log", 60)
    archive_all(tmp_path / "log", str(tmp_path / "archive"), tmp_path / "work")
    return ArchiveLocation.open(str(tmp_path / "archive"))


def test_a_fresh_cache_checks_every_object(tmp_path: Path) -> None:
    location = _archived(tmp_path)
    manifest = read_manifest(location)
    # No view was made first: the check fetches into a cache directory that does not exist.
    found = check_archive(ArchiveCache(location, tmp_path / "new" / "cache"), manifest)
    assert found.ok, found.problems
    assert found.entries == len(manifest.run) > 3


def test_a_changed_leaves_object_is_named(tmp_path: Path) -> None:
    location = _archived(tmp_path)
    manifest = read_manifest(location)
    name = manifest.run[2].objects["leaves"].name
    data = bytearray(location.read(name) or b"")
    data[5] ^= 1
    location.write(name, bytes(data))
    found = check_archive(ArchiveCache(location, tmp_path / "cache"), manifest)
    assert len(found.problems) == 1 and name in found.problems[0]
