"""A server's reads of its log's past below the local log start, from its own archive.

With `metadata.log.archive.url` retention deletes local segments once the archive holds them
(api/service/archiving.py). The private read APIs (FetchLog, ImageAt at a past point, Diff,
History, DescribeLogDigest) then answer below the local log start from the archive, as on a
log that was never trimmed: through a `HistoryView` (metadata_log/archive/view.py) of the
archive's run and the local segments, the same view `mlog ... --archive-url` reads a data
directory through (`api.history_dir.HistoryDir`, which this extends).

The view is the server's, long-lived: its objects are downloaded once into
`<data-dir>/archive-cache/` and checked against the SHA-256 the manifest names (a changed or
missing object is `ArchiveDamage`, an error answer naming it, never served), the indexes
rebuilt for them are kept there, and the view is made again only when the local segments
(the log start moved, a segment was rolled) or the archive's end moved. The manifest is the
one the archive's rounds keep (`LogArchiving.known_manifest`): a read costs no listing of the
archive (until the first round has ended, when it is read from the archive). Reads run on a
worker thread, one at a time (the view is swapped between them); an unreachable archive fails
that read only (`ArchiveUnreachable`), writes never wait for it.

Reads at or above the local log start never come here (`needs_archive`, `point_needs_archive`):
they read the service's own log, as without an archive.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from api.history_dir import ArchiveSource, HistoryDir, default_cache_dir
from api.service.archiving import LogArchiving
from api.service.settings import Settings
from metadata_log.archive import ArchiveUnreachable, read_manifest
from metadata_log.archive.manifest import Manifest
from metadata_log.archive.view import local_bases
from metadata_log.stored_log import StoredLog
from replay.sql.errors import SnapshotStoreError
from replay.sql.store import SnapshotStore
from replay.timetravel.points import point_offset

T = TypeVar("T")

logger = logging.getLogger("api.server.archive")

CLOSE_WAIT_S = 5.0
"""How long a stopping server waits for a read of the archive in progress to end."""

_VIEW_TRIES = 3
"""Views made before a read gives up: retention may remove a local segment while it is linked."""


def needs_archive(
    log: StoredLog, store: SnapshotStore | None, target: int, *, at_time: bool = False
) -> bool:
    """Whether the image at `target` needs entries below the local log start.

    The local log answers from a snapshot at or after the entry before its start (retention
    keeps one) up to `target`; a point before that, or one no such snapshot precedes, reads
    the archive. A time (`at_time`) resolved to just before the start lies before the local
    log's first entry: it may be anywhere below it.
    """
    start = log.log_start_offset
    if start <= 0:
        return False
    if target < (start if at_time else start - 1):
        return True
    if store is None or store.missing():
        return True
    try:
        return not store.snapshots(gt=start - 2, lte=target, limit=1)
    except SnapshotStoreError:
        return True  # the archive's view replays from its start: no snapshot needed


def point_needs_archive(log: StoredLog, store: SnapshotStore | None, point: str) -> bool:
    """`needs_archive` for a Diff's point: an offset, or an ISO-8601 time."""
    stripped = point.strip()
    if stripped.lstrip("-").isdigit():
        return needs_archive(log, store, int(stripped))
    return needs_archive(log, store, point_offset(log, point), at_time=True)


class ArchiveReads(HistoryDir):
    """The server's history view over its archive (see the module's docstring)."""

    def __init__(self, archiving: LogArchiving) -> None:
        settings = Settings(data_dir=archiving.log_dir.parent, log=archiving.log_config)
        source = ArchiveSource(location=archiving.location, cache_dir=default_cache_dir(settings))
        super().__init__(settings, source)
        self.archiving = archiving
        self._lock = threading.Lock()
        self._key: tuple[tuple[int, ...], int | None] | None = None
        self._warned: str | None = None
        removed = source.cache().remove_stale_views()
        if removed:
            logger.info("removed %d view(s) of the archive left by stopped processes", removed)

    def read(self, reading: Callable[[StoredLog], T]) -> T:
        """`reading` run on the whole history (blocking: on a worker thread).

        `ArchiveDamage` names an archived object that is missing or changed; an unreachable
        archive is `ArchiveUnreachable`, saying what it would have answered.
        """
        with self._lock:
            for attempt in range(_VIEW_TRIES):
                try:
                    with self.reader() as log:
                        return reading(log)
                except FileNotFoundError:
                    # A local segment removed by retention while the view linked it.
                    self._drop()
                    if attempt == _VIEW_TRIES - 1:
                        raise
                except ArchiveUnreachable as exc:
                    self._drop()
                    raise ArchiveUnreachable(
                        f"the archive at {self.archiving.location.url} cannot be read ({exc}); "
                        "entries below the local log start are answered from it: try again "
                        "once it is back (writes and reads of the local log go on)"
                    ) from None
            raise AssertionError("unreachable")  # pragma: no cover

    def directory(self) -> Path:
        """The view, made again when the local segments or the archive's end moved."""
        manifest = self._manifest()
        key = (tuple(local_bases(self.local)), manifest.end_offset)
        if self._view is None or key != self._key:
            self._drop()
            assert self.archive is not None
            self._view = self.archive.cache().open_view(self.local, manifest)
            self._key = key
            note = self._view.note
            if note is not None and note != self._warned:
                self._warned = note
                self._warn(note)
        return self._view.path

    def _manifest(self) -> Manifest:
        """The manifest the rounds keep; read from the archive before a round has read it.

        Once a round has ended the rounds hold every entry up to the end it learned (entries
        are never dropped); before that they may hold a part, read while the first round runs.
        """
        if self.archiving.archived_end is None:
            return read_manifest(self.archiving.location)
        return self.archiving.known_manifest()

    def _drop(self) -> None:
        """Remove the view (the next read makes one)."""
        self._key = None
        HistoryDir.close(self)

    def close(self) -> None:
        """Remove the view after the read in progress (the cache stays).

        A read still running after `CLOSE_WAIT_S` (a hung store) keeps it: the view is a
        directory of links, and a stopping server does not wait for the store.
        """
        if self._lock.acquire(timeout=CLOSE_WAIT_S):
            try:
                self._drop()
            finally:
                self._lock.release()

    @staticmethod
    def _warn(note: str) -> None:
        logger.warning("reads below the local log start: %s", note)
