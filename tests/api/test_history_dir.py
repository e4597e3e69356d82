"""api/history_dir.py: a data directory's history, its log or its view over the archive."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.history_dir import ArchiveSource, HistoryDir
from api.service.settings import load_settings
from metadata_log.archive import ArchiveError
from tests.support.archives import archive_all, grow, trim_to


def _trimmed(tmp_path: Path) -> tuple[HistoryDir, Path]:
    data = tmp_path / "data"
    grow(data / "log", 120)
    report = archive_all(data / "log", str(tmp_path / "archive"), tmp_path / "work")
    assert report.archived_end is not None
    trim_to(data / "log", report.archived_end)
    settings = load_settings(data_dir=str(data), env={})
    archive = ArchiveSource.open(str(tmp_path / "archive"), tmp_path / "cache")
    return HistoryDir(settings, archive), tmp_path / "cache"


def test_without_an_archive_it_is_the_log_itself(tmp_path: Path) -> None:
    settings = load_settings(data_dir=str(tmp_path), env={})
    history = HistoryDir(settings)
    assert history.directory() == tmp_path / "log"
    history.close()
    assert history.directory() == tmp_path / "log"


def test_a_view_is_made_once_and_removed_on_close(tmp_path: Path) -> None:
    history, _ = _trimmed(tmp_path)
    view = history.directory()
    assert view != history.local and history.directory() == view
    with history.reader() as log:
        assert log.log_start_offset == 0
    history.close()
    assert not view.exists()


def test_indexes_rebuilt_for_archived_segments_are_kept_in_the_cache(tmp_path: Path) -> None:
    history, cache = _trimmed(tmp_path)
    with history.reader() as log:
        rebuilt = [s.path.name for s in log.storage.rebuilt]
    history.close()
    assert rebuilt  # the archived segments came without indexes
    kept = sorted(p.name for p in (cache / "objects").glob("*.index"))
    assert len(kept) == len(rebuilt)
    # The next view links them: nothing is scanned again.
    with history.reader() as log:
        assert log.storage.rebuilt == []
    history.close()
    local = list(history.local.glob("*.index"))
    assert all(p.stat().st_nlink == 1 for p in local)  # the view linked them, and is gone


def test_a_bad_cache_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(ArchiveError, match="is not a directory"):
        ArchiveSource.open(str(tmp_path / "archive"), tmp_path / "file")
