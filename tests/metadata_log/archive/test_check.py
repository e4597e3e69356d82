"""metadata_log/archive/check.py: every object against the manifest, the leaves recomputed."""

from __future__ import annotations

from pathlib import Path

import pytest

from metadata_log.archive import ArchiveCache, ArchiveLocation, check_archive, read_manifest
from tests.support.archives import archive_all, grow


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log of a dozen segments archived (copied per test: the tests damage it)."""
    root = tmp_path_factory.mktemp("archived")
    grow(root / "log", 120)
    archive_all(root / "log", str(root / "archive"), root / "work")
    return root / "archive"


def _cache(archived: Path, tmp_path: Path) -> ArchiveCache:
    import shutil

    shutil.copytree(archived, tmp_path / "archive")
    return ArchiveCache(ArchiveLocation.open(str(tmp_path / "archive")), tmp_path / "cache")


def test_a_sound_archive_checks_clean(archived: Path, tmp_path: Path) -> None:
    cache = _cache(archived, tmp_path)
    manifest = read_manifest(cache.location)
    seen: list[int] = []
    report = check_archive(cache, manifest, progress=seen.append)
    assert report.ok, report.problems
    assert report.entries == len(manifest.run) >= 8
    assert seen[-1] == manifest.end_offset


@pytest.mark.parametrize("kind", ["segment", "chain", "leaves"])
@pytest.mark.parametrize("how", ["changed", "deleted"])
def test_a_changed_or_deleted_object_is_named(
    archived: Path, tmp_path: Path, kind: str, how: str
) -> None:
    cache = _cache(archived, tmp_path)
    entry = read_manifest(cache.location).run[2]
    name = entry.objects[kind].name
    if how == "deleted":
        cache.location.delete(name)
    else:
        data = bytearray(cache.location.read(name) or b"")
        data[len(data) // 2] ^= 0x10
        cache.location.write(name, bytes(data))
    report = check_archive(cache, read_manifest(cache.location))
    assert len(report.problems) == 1, report.problems
    assert name in report.problems[0] or f"{entry.base_offset}.." in report.problems[0]


def test_leaves_rewritten_with_a_matching_manifest_are_caught(
    archived: Path, tmp_path: Path
) -> None:
    """An attacker who rewrites a leaf file and its entry's hash: the recomputation names it."""
    import dataclasses
    import hashlib

    cache = _cache(archived, tmp_path)
    entry = read_manifest(cache.location).run[1]
    leaves = bytearray(cache.location.read(entry.objects["leaves"].name) or b"")
    leaves[32 * 3] ^= 1
    cache.location.write(entry.objects["leaves"].name, bytes(leaves))
    forged = dataclasses.replace(
        entry,
        objects={
            **entry.objects,
            "leaves": dataclasses.replace(
                entry.objects["leaves"], sha256=hashlib.sha256(leaves).hexdigest()
            ),
        },
    )
    cache.location.write(entry.manifest_name, forged.encode())
    (problem,) = check_archive(cache, read_manifest(cache.location)).problems
    assert f"differ from the entries from offset {entry.base_offset + 3}" in problem


def test_a_gap_and_a_broken_chain_are_named(archived: Path, tmp_path: Path) -> None:
    cache = _cache(archived, tmp_path)
    run = read_manifest(cache.location).run
    cache.location.delete(run[3].manifest_name)
    problems = check_archive(cache, read_manifest(cache.location)).problems
    assert any(
        f"offsets {run[3].base_offset}..{run[3].next_offset - 1} are missing" in p for p in problems
    )
