"""A serving log archived as it grows: sealed segments uploaded, the archive's end followed.

`metadata.log.archive.url` (docs/archive.md) turns it on. Every `metadata.log.archive.interval.ms`
each node runs one **round** on a thread of its own (`ARCHIVE_THREAD`), never on the event
loop nor on the thread that writes the log:

- the **active controller** (a standalone `mlog serve`, or the quorum's leader) uploads
  every sealed segment below the committed end (the quorum's high watermark) that the
  archive does not hold yet (`SegmentArchiver`, reading the log through a `LogReader` opened
  on its directory, which is safe beside the writer). A new leader goes on from the
  manifest: uploads are idempotent, an entry is written once.
- every other node reads the manifest only: it learns where the archive ends.

What a round learns is `archived_end`, the end of the archive's run, which retention reads
(`LogRetention.archive`): with an archive configured no node deletes a segment the archive
does not hold. An archive that cannot be reached leaves the last end known in force (entries
are never removed) and holds retention there; writes never wait for it.

A round is bounded without blocking anything: the event loop only polls it (`poll`). A round
still running after `round_timeout_s` (a hung store) is counted as failed and reported once;
the next starts when it returns. The thread is a daemon: a hung upload never holds the
process's exit.

Manifest entries are never changed or removed, so a node keeps the ones it has read and
fetches only new names at each round (one listing and the new entries, not the whole
manifest, per interval). An archive whose listing lacks entries the node has seen was moved,
replaced or unmounted: the round fails (`ArchiveDamage`), nothing is uploaded to it (the
active controller would otherwise start a new history there from its own log's start) and
retention keeps the end known before.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from api.service.retention import LogRetention
from api.service.settings import Settings
from metadata_log.archive import (
    ArchiveDamage,
    ArchiveError,
    ArchiveLocation,
    ManifestEntry,
    SegmentArchiver,
    claim,
)
from metadata_log.archive.manifest import MANIFEST_DIR, Manifest, build_manifest
from metadata_log.config import LogConfig
from metadata_log.reader import LogReader
from metadata_log.segment import SegmentInfo
from records.errors import MetadataLogError

logger = logging.getLogger("api.server.archive")
"""Under the server's logger: `mlog serve` writes the archive's lines beside its own."""

ARCHIVE_URL_KEY = "metadata.log.archive.url"
ARCHIVE_INTERVAL_KEY = "metadata.log.archive.interval.ms"

DEFAULT_INTERVAL_MS = 60_000
"""One minute between rounds. A segment is sealed rarely (at `metadata.log.segment.bytes` or
`metadata.log.segment.ms`), so a minute adds at most that to the time a sealed segment waits
for the archive (and retention for it), small beside retention's bounds (hours, hundreds of
MB); a round that finds nothing new costs one listing of the manifest per node, about 44,000
requests a month on an object store."""

DEFAULT_ROUND_TIMEOUT_S = 300.0
"""How long a round may run before it is counted as failed (a hung store): five minutes, the
upload of a large segment to a slow store with room to spare."""

ARCHIVE_THREAD = "mlog-archive"
"""The name of the thread the rounds run on."""

_OPEN_TRIES = 5
"""Opens of the log a round tries while retention removes a segment it listed."""

WORK_DIR = "archive-work"
"""Under the data directory: where a segment that straddles the archive's end is cut."""

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class ArchiveConfig:
    """`metadata.log.archive.url` and `metadata.log.archive.interval.ms`, checked."""

    url: str
    interval_ms: int = DEFAULT_INTERVAL_MS


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundResult:
    """What one round did: the archive's end after it, and what it uploaded."""

    archived_end: int | None
    uploaded: tuple[ManifestEntry, ...] = ()
    waiting: str | None = None
    """Why a sealed segment could not be archived (a gap the archive can never fill)."""


class RoundThread:
    """One daemon thread that runs the rounds, one at a time, in the order submitted."""

    def __init__(self, name: str = ARCHIVE_THREAD) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], T]) -> Future[T]:
        """Run `job` on the thread; its future."""
        future: Future[T] = Future()
        self._jobs.put((job, future))
        return future

    def close(self) -> None:
        """End the thread after the job it runs (never waits for it: it may hang)."""
        self._jobs.put(None)

    def _run(self) -> None:
        while (item := self._jobs.get()) is not None:
            job, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(job())
            except BaseException as exc:  # handed to whoever polls the round
                future.set_exception(exc)


class LogArchiving:
    """A serving node's archive: its rounds, the archive's end they learn, and their counts."""

    def __init__(
        self,
        location: ArchiveLocation,
        *,
        cluster_id: str,
        log_dir: Path,
        log_config: LogConfig,
        work_dir: Path,
        interval_s: float = DEFAULT_INTERVAL_MS / 1000,
        round_timeout_s: float = DEFAULT_ROUND_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.location = location
        self.cluster_id = cluster_id
        self.log_dir = log_dir
        self.log_config = log_config
        self.interval_s = interval_s
        self.round_timeout_s = round_timeout_s
        self._clock = clock
        self._archiver = SegmentArchiver(location, cluster_id=cluster_id, work_dir=work_dir)
        self._entries: dict[str, ManifestEntry] = {}
        """The manifest entries read so far, by name (entries never change)."""
        self._damaged: set[str] = set()
        """Manifest entries that could not be read (each named once)."""
        self._identity_checked = False
        self._thread: RoundThread | None = None
        self._round: tuple[Future[RoundResult], float, int] | None = None
        """The round in flight: its future, when it started, the committed end it was given."""
        self._hung_reported = False
        self._next_round = 0.0
        self._waiting: str | None = None
        self.archived_end: int | None = None
        """One past the archive's last offset as last learned (None: empty or not read yet)."""
        self.failing = False
        """Whether the last round failed (or one runs past its timeout)."""
        self.uploaded_segments = 0
        self.uploaded_bytes = 0
        self.failures = 0
        """Rounds that failed: an upload, or a read of the manifest (metrics)."""
        self.behind_segments = 0
        """Sealed, committed local segments the archive did not hold after the last round."""

    @classmethod
    def open(
        cls,
        config: ArchiveConfig,
        *,
        cluster_id: str,
        data_dir: Path,
        log_dir: Path,
        log_config: LogConfig,
        retention: LogRetention | None,
    ) -> LogArchiving:
        """The archiving of the log in `log_dir` to `config.url` (not contacted yet).

        `retention` (the service's) waits for the archive from now on.
        """
        archiving = cls(
            ArchiveLocation.open(config.url),
            cluster_id=cluster_id,
            log_dir=log_dir,
            log_config=log_config,
            work_dir=data_dir / WORK_DIR,
            interval_s=config.interval_ms / 1000,
        )
        if retention is not None:
            retention.archive = archiving
        return archiving

    # ---------------------------------------------------------------- the loop's side

    @property
    def in_flight(self) -> bool:
        """Whether a round was started and not yet collected by `poll`."""
        return self._round is not None

    def start(self) -> None:
        """Start the rounds' thread (the first round at the first `poll`)."""
        if self._thread is None:
            self._thread = RoundThread()
            logger.info(
                "archiving sealed segments to %s every %.0f ms (the active controller "
                "uploads; retention keeps what the archive does not hold)",
                self.location.url,
                self.interval_s * 1000,
            )

    def close(self) -> None:
        """Stop starting rounds; a round in flight ends on its own (its thread is a daemon)."""
        if self._thread is not None:
            self._thread.close()
            self._thread = None

    def poll(
        self, *, uploads: bool, committed_end: int, segments: Callable[[], Sequence[SegmentInfo]]
    ) -> None:
        """On the event loop: collect a finished round, report a hung one, start one when due.

        `uploads`: whether this node is the active controller now; `committed_end`: one past
        the last committed offset; `segments`: the local log's segments (for `behind`).
        """
        now = self._clock()
        if self._round is not None:
            future, started, committed = self._round
            if not future.done():
                if now - started > self.round_timeout_s and not self._hung_reported:
                    self._hung_reported = True
                    self._failed(
                        f"a round has not ended after {self.round_timeout_s:.0f} s (a hung "
                        "store?); the next starts when it returns"
                    )
                return
            self._round = None
            self._finished(future, committed, segments())
        if self._thread is None or now < self._next_round:
            return
        self._next_round = now + self.interval_s
        self._hung_reported = False
        # The active controller uploads when a sealed committed segment lies past the end
        # known (or none is known yet); any other round reads the manifest only.
        upload = uploads and (
            self.archived_end is None
            or behind(segments(), committed_end=committed_end, end=self.archived_end) > 0
        )
        committed = committed_end
        self._round = (
            self._thread.submit(lambda: self.run_round(upload=upload, committed_end=committed)),
            now,
            committed,
        )

    def _finished(
        self, future: Future[RoundResult], committed_end: int, segments: Sequence[SegmentInfo]
    ) -> None:
        try:
            result = future.result()
        except (MetadataLogError, OSError) as exc:
            result = None
            self._failed(str(exc))
        except Exception as exc:  # a round's bug must not end the rounds: named, retried
            result = None
            self._failed(f"{type(exc).__name__}: {exc}")
        if result is not None:
            if self.failing:
                logger.info("the archive at %s answers again", self.location.url)
            self.failing = False
            self.archived_end = result.archived_end
        # Behind the end last known (a failed round keeps it): what an outage leaves unarchived.
        self.behind_segments = behind(segments, committed_end=committed_end, end=self.archived_end)
        if result is None:
            return
        if result.uploaded:
            size = sum(e.size_bytes for e in result.uploaded)
            self.uploaded_segments += len(result.uploaded)
            self.uploaded_bytes += size
            logger.info(
                "archived %d segment(s), offsets %d..%d (%d bytes) to %s; the archive ends at "
                "offset %s",
                len(result.uploaded),
                result.uploaded[0].base_offset,
                result.uploaded[-1].next_offset - 1,
                size,
                self.location.url,
                self.archived_end,
            )
        if result.waiting != self._waiting and result.waiting is not None:
            logger.warning(
                "the archive cannot follow the log: %s; retention keeps the log from there "
                "(give the cluster a new archive URL to archive it from its start)",
                result.waiting,
            )
        self._waiting = result.waiting

    def _failed(self, reason: str) -> None:
        """One failed round: counted; one WARNING per outage."""
        self.failures += 1
        if not self.failing:
            logger.warning(
                "the archive at %s cannot be used: %s; writes go on, retention keeps every "
                "segment it does not hold (it holds offsets below %s), retrying every %.0f ms",
                self.location.url,
                reason,
                self.archived_end if self.archived_end is not None else "none yet",
                self.interval_s * 1000,
            )
        self.failing = True

    def known_manifest(self) -> Manifest:
        """The archive's manifest as the rounds last read it (its entries never change).

        For the server's reads below the local log start (api/server/archive_reads.py): no
        listing of the archive per read. Safe from any thread (a copy of the entries).
        """
        return build_manifest(self._entries.copy().values())

    # ---------------------------------------------------------------- the round's thread

    def run_round(self, *, upload: bool, committed_end: int) -> RoundResult:
        """One round (blocking, on the rounds' thread): upload, or read the archive's end."""
        if upload:
            self.read_end()  # an archive that lost what it held is never written to
            with self._open_log() as log:
                report = self._archiver.archive(log, committed_end=committed_end)
            for entry in report.uploaded:
                self._entries[entry.manifest_name] = entry
            return RoundResult(
                archived_end=report.archived_end,
                uploaded=tuple(report.uploaded),
                waiting=report.waiting,
            )
        return RoundResult(archived_end=self.read_end())

    def _open_log(self) -> LogReader:
        """A reader of the log beside its writer; a trim racing the open is tried again."""
        for _ in range(_OPEN_TRIES - 1):
            try:
                return LogReader.open(self.log_dir, config=self.log_config)
            except FileNotFoundError:
                continue  # a segment listed, then removed by retention before it was opened
        return LogReader.open(self.log_dir, config=self.log_config)

    def read_end(self) -> int | None:
        """The end of the archive's run, reading only the manifest entries not read before."""
        if not self._identity_checked:
            held = claim(self.location, None)
            if held is not None and held != self.cluster_id:
                raise ArchiveError(
                    f"the archive at {self.location.url} holds cluster {held}'s history, not "
                    f"cluster {self.cluster_id}'s; give each cluster its own archive URL"
                )
            self._identity_checked = held is not None
        listed = self.location.names(MANIFEST_DIR)
        lost = sorted(set(self._entries) - set(listed))
        if lost:
            raise ArchiveDamage(
                f"the archive at {self.location.url} no longer holds {len(lost)} manifest "
                f"entr{'y' if len(lost) == 1 else 'ies'} it held (the first {lost[0]}): it was "
                "moved, replaced or unmounted; nothing is uploaded to it and retention keeps "
                "the end known before, until it is back"
            )
        for name in listed:
            if not name.endswith(".json") or name in self._entries or name in self._damaged:
                continue
            data = self.location.read(name)
            if data is None:
                continue
            try:
                self._entries[name] = ManifestEntry.decode(name, data)
            except ArchiveError as exc:
                if name not in self._damaged:
                    self._damaged.add(name)
                    logger.warning("%s; the entry is left out of the archive's run", exc)
        return build_manifest(self._entries.values()).end_offset


def serving_archive(
    config: ArchiveConfig | None,
    settings: Settings,
    cluster_id: str,
    retention: LogRetention | None,
) -> LogArchiving | None:
    """`mlog serve`'s archiving of its data directory's log (None without an archive URL)."""
    if config is None:
        return None
    return LogArchiving.open(
        config,
        cluster_id=cluster_id,
        data_dir=settings.data_dir,
        log_dir=settings.log_dir,
        log_config=settings.log,
        retention=retention,
    )


POLL_S = 1.0
"""How often the event loop polls the round in flight (a round starts every interval)."""


async def run_rounds(
    archiving: LogArchiving,
    *,
    uploads: Callable[[], bool],
    committed_end: Callable[[], int],
    segments: Callable[[], Sequence[SegmentInfo]],
) -> None:
    """The rounds of `archiving` until cancelled (a task of the server's event loop).

    `uploads`: whether this node is the active controller now (a standalone server, or the
    quorum's leader); `committed_end`: one past its last committed offset (a quorum's high
    watermark); `segments`: its log's segments. Each is read on the loop, between rounds.
    """
    archiving.start()
    try:
        while True:
            archiving.poll(uploads=uploads(), committed_end=committed_end(), segments=segments)
            await asyncio.sleep(min(POLL_S, archiving.interval_s))
    finally:
        archiving.close()


def behind(segments: Sequence[SegmentInfo], *, committed_end: int, end: int | None) -> int:
    """Sealed segments wholly below `committed_end` that the archive (ending at `end`) lacks."""
    return sum(
        1
        for s in segments[:-1]
        if s.next_offset > s.base_offset
        and s.next_offset <= committed_end
        and (end is None or s.next_offset > end)
    )
