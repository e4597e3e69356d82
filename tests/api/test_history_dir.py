"""api/history_dir.py: a data directory's history, its log or its view over the archive."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api import history_dir
from api.history_dir import ArchiveSource, HistoryDir
from api.service.settings import load_settings
from metadata_log.archive import ArchiveError
from metadata_log.reader import LogReader
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


def test_the_reader_is_kept_until_a_file_of_the_log_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A console reads twice a page: one open (which checks the active segment whole) serves
    # both while nothing is appended; an append, a read left early and a failed read too.
    grow(tmp_path / "log", 3)
    opened: list[LogReader] = []
    open_log = LogReader.open

    def counting(*args: Any, **kwargs: Any) -> LogReader:
        opened.append(open_log(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(LogReader, "open", counting)
    history = HistoryDir(load_settings(data_dir=str(tmp_path), env={}))
    with history.reader() as log:
        assert log.end_offset == 12
    with history.reader() as again:
        assert again is log
        with history.reader() as meanwhile:  # while it is in use: another of its own
            assert meanwhile is not log
    assert len(opened) == 2
    grow(tmp_path / "log", 1, tag="b", start=3)  # an append: a fresh open sees it
    with history.reader() as fresh:
        assert fresh is not log and fresh.end_offset == 16
    entries = (entry for entry in _read_all(history))
    next(entries)
    entries.close()  # a read left before its end keeps the reader
    with history.reader() as same:
        assert same is fresh
    with pytest.raises(RuntimeError), history.reader():
        raise RuntimeError("a failed read")
    with history.reader() as after_failure:
        assert after_failure is not fresh
    history.close()
    assert len(opened) == 4


def _read_all(history: HistoryDir) -> Iterator[object]:
    with history.reader() as log:
        yield from log.read()


def test_a_kept_reader_is_closed_soon_after_its_last_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its files stay open while it is kept: a segment trimmed meanwhile keeps its space.
    monkeypatch.setattr(history_dir, "KEEP_SECONDS", 0.05)
    grow(tmp_path / "log", 3)
    history = HistoryDir(load_settings(data_dir=str(tmp_path), env={}))
    with history.reader() as log:
        assert log.end_offset == 12
    deadline = time.monotonic() + 60
    while not log.storage.closed:
        assert time.monotonic() < deadline, "the kept reader was never closed"
        time.sleep(0.02)
    with history.reader() as fresh:  # the next call opens another
        assert fresh is not log and fresh.end_offset == 12
    history.close()
    assert fresh.storage.closed


def test_one_timer_watches_the_kept_reader_however_often_it_is_given_back(
    tmp_path: Path,
) -> None:
    grow(tmp_path / "log", 3)
    history = HistoryDir(load_settings(data_dir=str(tmp_path), env={}))
    for _ in range(20):
        with history.reader() as log:
            assert log.end_offset == 12
    timers = [
        t
        for t in threading.enumerate()
        if isinstance(t, threading.Timer) and getattr(t, "function", None) == history._expire
    ]
    assert len(timers) == 1 and not log.storage.closed
    history.close()
    timer = timers[0]
    timer.join(timeout=60)
    assert not timer.is_alive() and log.storage.closed
