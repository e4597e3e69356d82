"""Where a reader of a data directory's history reads: its log, or the log over the archive.

Every history reader of a data directory (`history`, time travel, `image diff`, `log dump`,
`log verify`, `log digest`, `log prove`, the Python API's `read`/`history`/`image`) opens the
log through a `HistoryDir`. Without an archive it is `<data-dir>/log` itself; with one
(`--archive-url`, MLOG_ARCHIVE_URL, `Metadata.open(..., archive_url=)`) it is a `HistoryView`
(metadata_log/archive/view.py): a log directory in the archive cache that holds the archive's
run below the local segments, so the entries below the local log start are answered as on a
log that was never trimmed, and a changed or missing archived object is `ArchiveDamage`,
never served. The view is made on the first read and removed when the command ends.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from metadata_log.errors import LogCorruptionError
from metadata_log.reader import LogReader
from metadata_log.segment import segment_name

if TYPE_CHECKING:
    from api.service.settings import Settings
    from metadata_log.archive import ArchiveCache, ArchiveLocation, HistoryView
    from metadata_log.stored_log import StoredLog

KEEP_SECONDS = 10.0
"""How long a reader given back is kept for the next call (`HistoryDir.reader`)."""

ARCHIVE_URL_ENV = "MLOG_ARCHIVE_URL"
"""The environment variable naming the archive when `--archive-url` is not given."""

ARCHIVE_CACHE_NAME = "archive-cache"
"""The archive cache's directory in the data directory, unless `--archive-cache` names one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchiveSource:
    """An archive (its URL checked) and the local directory its objects are cached in."""

    location: ArchiveLocation
    cache_dir: Path

    @classmethod
    def open(cls, url: str, cache_dir: Path) -> ArchiveSource:
        """The archive at `url` cached in `cache_dir`; `ArchiveError` for a bad URL or cache.

        Nothing is contacted yet: the URL and the cache directory are only checked.
        """
        from metadata_log.archive import ArchiveError, ArchiveLocation  # noqa: PLC0415

        location = ArchiveLocation.open(url)
        if cache_dir.exists() and not cache_dir.is_dir():
            raise ArchiveError(
                f"the archive cache {cache_dir} is not a directory; give --archive-cache DIR "
                "(a directory, made if missing)"
            )
        return cls(location=location, cache_dir=cache_dir)

    def cache(self) -> ArchiveCache:
        """The archive's local cache."""
        from metadata_log.archive import ArchiveCache  # noqa: PLC0415

        return ArchiveCache(self.location, self.cache_dir)


def default_cache_dir(settings: Settings) -> Path:
    """`<data-dir>/archive-cache`."""
    return settings.data_dir / ARCHIVE_CACHE_NAME


class HistoryDir:
    """The log directory a data directory's history is read from (see the module docstring).

    `note` receives, once, why the archive could not be joined to the local log. Without
    `with_local` it is the archive's run alone (`mlog archive verify`).
    """

    def __init__(
        self,
        settings: Settings,
        archive: ArchiveSource | None = None,
        *,
        note: Callable[[str], None] | None = None,
        with_local: bool = True,
    ) -> None:
        self.settings = settings
        self.archive = archive
        self._with_local = with_local
        self._note = note
        self._noted = False
        self._view: HistoryView | None = None
        self._kept: tuple[list[tuple[str, int, int, int]], LogReader] | None = None
        """The reader the last call gave back, with the directory's files as it opened."""
        self._kept_lock = threading.Lock()
        self._expiry: threading.Timer | None = None
        """Closes the kept reader `KEEP_SECONDS` after it was last given back."""
        self._given_at = 0.0
        """When the kept reader was last given back (`time.monotonic`)."""

    @property
    def local(self) -> Path:
        """The data directory's own log directory."""
        return self.settings.log_dir

    def directory(self) -> Path:
        """The directory to read: the local log, or the view (made now, once)."""
        if self.archive is None:
            return self.local
        if self._view is None:
            local = self.local if self._with_local and self.local.is_dir() else None
            self._view = self.archive.cache().open_view(local)
            if self._view.note is not None and self._note is not None and not self._noted:
                self._noted = True
                self._note(self._view.note)
        return self._view.path

    @contextlib.contextmanager
    def reader(self) -> Iterator[StoredLog]:
        """The history opened read-only (no lock, no recovery writes).

        An open checks the active segment whole (every block's CRC): 46 ms of a 350 ms
        console page at 100,000 partitions, which reads twice. So the reader is kept for the
        next call while no file of the directory changed since it was opened (name, inode,
        size, modification time: an append, a new segment, a trim all change one); a call while
        another uses it opens its own. Closed with `close`, when replaced, or `KEEP_SECONDS`
        after its last use.
        """
        directory = self.directory()
        seen = log_files(directory)
        with self._kept_lock:
            kept, self._kept = self._kept, None
        if kept is not None and kept[0] != seen:
            kept[1].close()
            kept = None
        try:
            if kept is not None:
                log = kept[1]
            else:
                log = LogReader.open(directory, config=self.settings.log)
                self._keep_indexes(log)
        except LogCorruptionError as exc:
            raise self._named(exc) from None
        try:
            yield log
        except LogCorruptionError as exc:
            log.close()
            raise self._named(exc) from None
        except GeneratorExit:
            # A read left before its end (a page that has its rows): reads are positioned
            # (pread), so the reader is as good as before it.
            self._give_back(seen, log)
            raise
        except BaseException:
            log.close()
            raise
        self._give_back(seen, log)

    def _give_back(self, seen: list[tuple[str, int, int, int]], log: LogReader) -> None:
        """Keep `log` (opened when the directory's files were `seen`) for the next call.

        For `KEEP_SECONDS` after its last use only: a kept reader holds its segments' files
        open, and a segment that retention deletes meanwhile keeps its disk space until they
        are closed. One timer at a time watches the kept reader (`_expire` re-arms it while
        the reader is used again): a page gives a reader back twice, a timer each was a thread
        each.
        """
        timer = None
        with self._kept_lock:
            kept, self._kept = self._kept, (seen, log)
            self._given_at = time.monotonic()
            if self._expiry is None:
                timer = self._expiry = self._timer(KEEP_SECONDS)
        if timer is not None:
            timer.start()
        if kept is not None:
            kept[1].close()  # another call's reader, kept while this one was in use

    def _timer(self, delay: float) -> threading.Timer:
        timer = threading.Timer(delay, self._expire)
        timer.daemon = True
        return timer

    def _expire(self) -> None:
        """Close the kept reader if unused for `KEEP_SECONDS`; else wait out the rest."""
        timer, stale = None, None
        with self._kept_lock:
            if self._expiry is not threading.current_thread():
                return  # cancelled by `close`, which a timer's start may race
            idle = time.monotonic() - self._given_at
            if self._kept is not None and idle < KEEP_SECONDS:
                timer = self._expiry = self._timer(KEEP_SECONDS - idle)
            else:
                self._expiry = None
                stale, self._kept = self._kept, None
        if timer is not None:
            timer.start()
        if stale is not None:
            stale[1].close()

    def _named(self, exc: LogCorruptionError) -> LogCorruptionError:
        """`exc` naming the file a view links to: the local segment, or the cached copy.

        The view is removed when the command ends: its path would name nothing.
        """
        view = self._view
        if view is None or exc.segment.parent != view.path:
            return exc
        name = exc.segment.name
        base = int(name.split(".", 1)[0]) if name.split(".", 1)[0].isdigit() else None
        local_from = view.plan.local_from
        if base is None or (local_from is not None and base >= local_from):
            where = self.local / name
        else:
            entry = next((e for e in view.plan.archived if e.base_offset == base), None)
            if entry is None or self.archive is None:
                return exc
            where = self.archive.cache().objects / f"{entry.stem}{exc.segment.suffix}"
        return LogCorruptionError(
            where,
            exc.position,
            exc.reason,
            first_offset=exc.first_offset,
            repairable=exc.repairable,
        )

    def _keep_indexes(self, log: StoredLog) -> None:
        """Save the indexes the open rebuilt for archived segments, into the cache.

        A reader scans a segment whose indexes are missing (its CRCs, every block): kept,
        the next view of the same archive opens as fast as a local log. Local segments are
        never written to (their files are the data directory's).
        """
        view = self._view
        if view is None or self.archive is None or not view.plan.archived:
            return
        archived = {segment_name(e.base_offset) for e in view.plan.archived}
        made = []
        for segment in log.storage.rebuilt:
            if segment.path.name in archived:
                try:
                    segment.save_indexes()
                except OSError:
                    continue  # rebuilt again by the next reader: slower, not wrong
                made.append(segment.path)
        if made:
            self.archive.cache().keep_indexes(view, made)

    def refresh(self) -> None:
        """Let the next read see local segments made since the view was (a follower's)."""
        self.close()

    def close(self) -> None:
        """Close the kept reader; remove the view, if one was made (the cache stays)."""
        with self._kept_lock:
            kept, self._kept = self._kept, None
            expiry, self._expiry = self._expiry, None
        if expiry is not None:
            expiry.cancel()
        if kept is not None:
            kept[1].close()
        if self._view is not None:
            view, self._view = self._view, None
            view.close()


def log_files(directory: Path, suffix: str = "") -> list[tuple[str, int, int, int]]:
    """(name, inode, size, modification time) of the log directory's files ending in `suffix`.

    Sorted: what changes when entries come or a file is replaced ([] if the directory is
    missing: opening the log says so).
    """
    found = []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name.endswith(suffix):
                    status = entry.stat()
                    found.append((entry.name, status.st_ino, status.st_size, status.st_mtime_ns))
    except FileNotFoundError:
        return []
    return sorted(found)
