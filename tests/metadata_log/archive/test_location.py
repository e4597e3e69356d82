"""metadata_log/archive/location.py: archive URLs checked, objects written whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from metadata_log.archive import ArchiveError, ArchiveLocation, ArchiveUnreachable


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("", "is empty or holds control characters"),
        ("file:///tmp/a\nb", "is empty or holds control characters"),
        ("relative/dir", "has no scheme"),
        ("ftp://host/dir", "scheme 'ftp' is not one of"),
        ("file://relative", "needs an absolute path"),
        ("s3://", "names no bucket or path"),
        ("<script>://x", "is not one of"),
    ],
)
def test_a_bad_url_is_one_line_that_says_what_to_give(url: str, says: str) -> None:
    with pytest.raises(ArchiveError, match=says) as caught:
        ArchiveLocation.open(url)
    assert "\n" not in str(caught.value).replace(repr(url), "")
    assert "file:///var/lib/mlog-archive" in str(caught.value)


def test_a_plain_absolute_path_is_a_directory(tmp_path: Path) -> None:
    location = ArchiveLocation.open(str(tmp_path / "a"))
    assert location.url == f"file://{tmp_path / 'a'}"
    location.write("manifest/x.json", b"{}")
    assert location.read("manifest/x.json") == b"{}"
    assert location.names("manifest") == ["manifest/x.json"]
    assert location.names("nothing-here") == []
    assert location.read("manifest/none.json") is None


def test_objects_are_written_whole_and_checked_by_hash(tmp_path: Path) -> None:
    location = ArchiveLocation.open(f"file://{tmp_path}")
    source = tmp_path / "source"
    source.write_bytes(b"x" * 10_000)
    location.upload("segments/s.avro", source)
    size, sha = location.sha256("segments/s.avro") or (0, "")
    assert size == 10_000 and len(sha) == 64
    assert not [p for p in (tmp_path / "segments").iterdir() if p.name.endswith(".tmp")]
    assert location.sha256("segments/missing") is None


def test_an_unusable_archive_is_unreachable_not_a_crash(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_bytes(b"a file where the archive's directory should be")
    location = ArchiveLocation.open(str(blocker / "archive"))
    with pytest.raises(ArchiveUnreachable):
        location.write("manifest/x.json", b"{}")


def test_a_store_without_its_package_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import fsspec.core

    def missing(*_: object, **__: object) -> None:
        raise ImportError("No module named 's3fs'")

    monkeypatch.setattr(fsspec.core, "url_to_fs", missing)
    with pytest.raises(ArchiveError, match=r"needs the package s3fs: pip install s3fs"):
        ArchiveLocation.open("s3://bucket/prefix")


def test_an_object_store_url_is_not_local() -> None:
    location = ArchiveLocation.open("memory://bucket/prefix/")
    assert location.root == "/bucket/prefix" and not location.local
    location.write("manifest/a.json", b"1")
    assert location.names("manifest") == ["manifest/a.json"]
    assert location.read("manifest/a.json") == b"1"
