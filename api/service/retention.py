"""Online log retention: whole segments below the newest snapshot go once the log is over its bound.

KRaft's keys, read from `mlog serve`'s server.properties (api/server/config.py):
`metadata.max.retention.bytes` (the log's size it trims down towards) and
`metadata.max.retention.ms` (a segment whose newest entry is older goes), both -1 (off) by
default here: this log is the product's history (time travel, audit), so nothing is removed
unless the operator bounds it. Only whole segments whose entries all lie below the newest
snapshot go, oldest first, never the newest segment; the trim itself (`trim_before` of the
log) is durable, crash-safe and logged in one line. A standalone service trims after each
snapshot it writes; a quorum node trims in its loop, below the snapshot its consensus core
offers to fetchers, so a follower below the new start is sent that snapshot (FetchSnapshot).

With an archive (`metadata.log.archive.url`, archiving.py) a segment goes only once the
archive holds it: the trim offset is capped at the archive's end as this node last learned it
(`ArchiveEnd`), on every node; with no end known (an empty or unreachable archive) nothing
goes. Retention held back so is counted (`archive_held_back`, `archive_held_segments`) and
logged once each time it starts waiting; writes never wait for the archive.

The Merkle index (metadata_log.merkle) is kept current below each new snapshot, off the write
path, and every trim extends it over the entries it removes first: v2 digests and proofs
survive the trims. A trim whose index cannot be extended (an I/O error) is held back, with a
WARNING and `held_back` counted, until it can.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from metadata_log.log import MetadataLog
from metadata_log.merkle import IndexHeldBack
from metadata_log.segment import SegmentInfo
from records.errors import MetadataLogError

logger = logging.getLogger("api.server.retention")
"""Under the server's logger: `mlog serve` shows each trim and snapshot deletion in one line."""

MAX_RETENTION_BYTES_KEY = "metadata.max.retention.bytes"
MAX_RETENTION_MS_KEY = "metadata.max.retention.ms"


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionConfig:
    """How large and how old the log may grow before segments below a snapshot go."""

    max_bytes: int = -1
    """`metadata.max.retention.bytes`: trim while the log is larger (-1: no size bound)."""
    max_ms: int = -1
    """`metadata.max.retention.ms`: trim segments whose newest entry is older (-1: no age)."""
    snapshot_bytes: int | None = None
    """`metadata.log.max.record.bytes.between.snapshots` from the server's file (None: the
    cluster config's value)."""
    snapshot_interval_ms: int | None = None
    """`metadata.log.max.snapshot.interval.ms` from the server's file (None: the cluster
    config's value)."""

    @property
    def bounded(self) -> bool:
        """Whether any bound is set (else the log is never trimmed while serving)."""
        return self.max_bytes >= 0 or self.max_ms >= 0


class TrimmableLog(Protocol):
    """A log whose oldest whole segments can be removed (`MetadataLog`, `ReplicaLog`)."""

    def segments(self) -> list[SegmentInfo]:
        """The segments, oldest first."""

    def trim_before(self, offset: int) -> list[SegmentInfo]:
        """Remove the whole segments whose entries all lie below `offset`."""


class ArchiveEnd(Protocol):
    """Where the archive's run ends, as this node last learned it (`LogArchiving`)."""

    @property
    def archived_end(self) -> int | None:
        """One past the archive's last offset (None: nothing archived, or not known yet)."""


class IndexedLog(Protocol):
    """A log that keeps a Merkle index (`MetadataLog`, `ReplicaLog`)."""

    def keep_merkle_index(self, end: int) -> bool:
        """Extend the Merkle index over the durable entries below `end`."""


def trim_offset(
    segments: Sequence[SegmentInfo], *, below: int, config: RetentionConfig, now_ms: int
) -> int | None:
    """The offset to trim before so the log meets `config`, or None when nothing must go.

    Segments go oldest first while the log is over `max_bytes` or the segment is older than
    `max_ms`; only segments whose entries all lie below offset `below` (a snapshot's), never
    the newest.
    """
    total = sum(s.size_bytes for s in segments)
    cut: int | None = None
    for segment in segments[:-1]:
        if segment.next_offset > below:
            break
        over = 0 <= config.max_bytes < total
        old = (
            config.max_ms >= 0
            and segment.max_timestamp >= 0
            and now_ms - segment.max_timestamp > config.max_ms
        )
        if not (over or old):
            break
        total -= segment.size_bytes
        cut = segment.next_offset
    return cut


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LogRetention:
    """Applies a `RetentionConfig` to a log below a snapshot's offset."""

    def __init__(
        self, config: RetentionConfig, *, clock_ms: Callable[[], int] = _wall_clock_ms
    ) -> None:
        self.config = config
        self._clock_ms = clock_ms
        self.trimmed_segments = 0
        """Segments removed while serving (a metric)."""
        self.held_back = 0
        """Trims held back because the Merkle index could not be extended (a metric)."""
        self.index_failures = 0
        """Failed extensions of the Merkle index below a snapshot (a metric)."""
        self.archive: ArchiveEnd | None = None
        """The archive retention waits for (None: no archive, the snapshot alone bounds it)."""
        self.archive_held_back = 0
        """Checks where the archive held back segments retention would remove (a metric)."""
        self.archive_held_segments = 0
        """Segments the last check would have removed but the archive does not hold (a metric)."""

    def cut(self, log: TrimmableLog, *, below: int) -> int | None:
        """The offset to trim `log` before, below offset `below`; None when nothing must go.

        With an archive, never past the archive's end: only segments it holds go.
        """
        if not self.config.bounded:
            return None
        segments = log.segments()
        now = self._clock_ms()
        cut = trim_offset(segments, below=below, config=self.config, now_ms=now)
        if self.archive is None:
            return cut
        end = self.archive.archived_end
        held = cut
        if cut is not None and end is None:
            held = None
        elif cut is not None and end is not None:
            held = trim_offset(segments, below=min(below, end), config=self.config, now_ms=now)
        low = -1 if held is None else held
        high = -1 if cut is None else cut
        waiting = sum(1 for s in segments if low < s.next_offset <= high)
        if waiting and not self.archive_held_segments:
            logger.info(
                "retention waits for the archive: %d segment(s) below offset %d it would remove "
                "are not archived yet (the archive ends at %s)",
                waiting,
                cut,
                "no offset yet" if end is None else f"offset {end}",
            )
        if waiting:
            self.archive_held_back += 1
        self.archive_held_segments = waiting
        return held

    def trim(self, log: TrimmableLog, *, below: int) -> list[SegmentInfo]:
        """Trim `log` as the config asks, below offset `below`; the segments removed.

        The log's trim logs one line (segments, offsets, new start).
        """
        return self.trim_at(log, self.cut(log, below=below), below=below)

    def trim_at(self, log: TrimmableLog, cut: int | None, *, below: int) -> list[SegmentInfo]:
        """Trim `log` before `cut` (what `cut` gave; None: nothing), below snapshot `below`."""
        if cut is None:
            return []
        try:
            removed = log.trim_before(cut)
        except IndexHeldBack as exc:
            self.held_back += 1
            logger.warning(
                "retention held back the trim below offset %d: %s; nothing was removed, the "
                "next check tries again",
                cut,
                exc,
            )
            return []
        self.trimmed_segments += len(removed)
        if removed:
            logger.info(
                "retention removed %d segment(s), offsets %d..%d (%d bytes), below the snapshot "
                "at offset %d; the log starts at offset %d",
                len(removed),
                removed[0].base_offset,
                removed[-1].next_offset - 1,
                sum(s.size_bytes for s in removed),
                below,
                removed[-1].next_offset,
            )
        return removed

    def keep_index(self, log: IndexedLog, *, below: int) -> None:
        """Extend `log`'s Merkle index through offset `below` (a snapshot's), on a worker thread.

        A failure is one WARNING and counted: the next snapshot, or the trim, tries again.
        """
        try:
            log.keep_merkle_index(below + 1)
        except (MetadataLogError, OSError) as exc:
            self.index_failures += 1
            logger.warning("the Merkle index was not extended to offset %d: %s", below, exc)

    def trim_after_snapshot(self, log: object, *, below: int, snapshot_id: int) -> None:
        """After snapshot `snapshot_id` at offset `below` (its worker thread): trim `log` below it.

        The log's Merkle index is extended to the snapshot first (the trim then only checks
        it). Only the user's `MetadataLog` is trimmed here, its write lock ordering the trim
        with appends; a log that failed or is a reader after a storage failure is left alone
        (the next snapshot tries again).
        """
        if not isinstance(log, MetadataLog):
            return
        self.keep_index(log, below=below)
        try:
            self.trim(log, below=below)
        except (MetadataLogError, OSError) as exc:
            logger.warning("the log was not trimmed below snapshot %d: %s", snapshot_id, exc)


def log_snapshots_deleted(offsets: Sequence[int], kept: int, max_bytes: int | None) -> None:
    """One line for the snapshots retention deleted (their offsets) and what it keeps."""
    if offsets:
        logger.info(
            "retention deleted %d snapshot(s) at offset(s) %s; it keeps the newest %d%s",
            len(offsets),
            ", ".join(str(o) for o in offsets),
            kept,
            "" if max_bytes is None else f" within {max_bytes} bytes",
        )
