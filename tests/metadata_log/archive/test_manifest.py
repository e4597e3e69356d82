"""metadata_log/archive/manifest.py: entries checked strictly, the run, the identity."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from metadata_log.archive import ArchiveDamage, ArchiveError, ArchiveLocation, claim
from metadata_log.archive.manifest import (
    ArchivedObject,
    ManifestEntry,
    build_manifest,
    entry_name,
    object_name,
    read_manifest,
)


def _entry(base: int, next_offset: int) -> ManifestEntry:
    stem = entry_name(base, next_offset)
    return ManifestEntry(
        base_offset=base,
        next_offset=next_offset,
        max_timestamp=1_700_000_000_000,
        chain_before="0" * 64,
        chain_after="a" * 64,
        objects={
            kind: ArchivedObject(name=object_name(stem, kind), size=10, sha256="b" * 64)
            for kind in ("segment", "chain", "leaves")
        },
    )


def test_an_entry_round_trips_and_its_bytes_are_canonical() -> None:
    entry = _entry(0, 100)
    data = entry.encode()
    assert ManifestEntry.decode(entry.manifest_name, data) == entry
    assert data == _entry(0, 100).encode()  # the same segment, the same bytes


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.update(format=2), "not a format-1 entry"),
        (lambda d: d.update(base_offset=-1), "base_offset is not an integer"),
        (lambda d: d.update(base_offset=2**63), "base_offset is not an integer"),
        (lambda d: d.update(base_offset=True), "base_offset is not an integer"),
        (lambda d: d.update(next_offset="100"), "next_offset is not an integer"),
        (lambda d: d.update(chain_after="<script>"), "chain_after is not 64 hex digits"),
        (lambda d: d["objects"].pop("leaves"), "objects.leaves is missing"),
        (lambda d: d["objects"]["chain"].update(name="../../etc/passwd"), "names '../../etc"),
        (lambda d: d["objects"]["segment"].update(sha256="zz"), "no SHA-256"),
        (lambda d: d.update(base_offset=5), "holds offsets its name does not"),
    ],
)
def test_a_bad_entry_is_damage_that_says_what(change: object, says: str) -> None:
    entry = _entry(0, 100)
    document = json.loads(entry.encode())
    change(document)  # type: ignore[operator]
    with pytest.raises(ArchiveDamage, match=says):
        ManifestEntry.decode(entry.manifest_name, json.dumps(document).encode())


def test_garbage_and_bad_names_are_damage() -> None:
    with pytest.raises(ArchiveDamage, match="not JSON"):
        ManifestEntry.decode("manifest/" + entry_name(0, 1) + ".json", b"\xff\x00")
    with pytest.raises(ArchiveDamage, match="not named"):
        ManifestEntry.decode("manifest/evil.json", _entry(0, 1).encode())


def test_the_run_follows_the_longest_entry_and_stops_at_a_gap() -> None:
    manifest = build_manifest(
        [_entry(100, 150), _entry(0, 100), _entry(100, 200), _entry(200, 300), _entry(400, 500)]
    )
    assert [(e.base_offset, e.next_offset) for e in manifest.run] == [
        (0, 100),
        (100, 200),
        (200, 300),
    ]
    assert (manifest.start_offset, manifest.end_offset) == (0, 300)
    assert manifest.gaps == [(300, 400)]
    assert manifest.holding(250) == _entry(200, 300) and manifest.holding(350) is None
    assert build_manifest([]).end_offset is None


def test_unreadable_entries_are_listed_not_taken(tmp_path: Path) -> None:
    location = ArchiveLocation.open(str(tmp_path))
    good = _entry(0, 10)
    location.write(good.manifest_name, good.encode())
    location.write("manifest/" + entry_name(10, 20) + ".json", b"not json")
    manifest = read_manifest(location)
    assert manifest.run == (good,)
    assert len(manifest.damaged) == 1 and "not JSON" in manifest.damaged[0]


def test_an_archive_belongs_to_one_cluster(tmp_path: Path) -> None:
    location = ArchiveLocation.open(str(tmp_path))
    assert claim(location, None) is None  # not written without a cluster id
    assert claim(location, "c1") == "c1"
    assert claim(location, "c1") == "c1"
    assert claim(location, None) == "c1"
    with pytest.raises(ArchiveError, match="holds cluster c1's history, not cluster c2's"):
        claim(location, "c2")
    location.write("archive.json", b"[]")
    with pytest.raises(ArchiveDamage, match="not an archive's identity file"):
        claim(location, "c1")


def test_entries_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        _entry(0, 1).base_offset = 5  # type: ignore[misc]
