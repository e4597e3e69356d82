"""The image at a point: the newest valid snapshot at or before it plus the log after it.

A snapshot is used only if it belongs to this log (the log's entry at its offset has the
snapshot's epoch and timestamp) and its rows match their checksum; otherwise the next older one
is tried, and with none (or no database) the log is replayed from the start. The answer is the
same either way; snapshots only make it faster.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from metadata_log.stored_log import StoredLog
from records.codec import RecordBlock
from replay.image import EMPTY_IMAGE, MetadataImage
from replay.loader import load_image, replay_blocks
from replay.sql.errors import SnapshotContentError, SnapshotStoreError
from replay.timetravel.errors import TimeTravelError
from replay.timetravel.image_cache import ImageCache
from replay.timetravel.points import batch_end, resolve_offset

if TYPE_CHECKING:
    # Only the caller's store is used: importing SQLAlchemy is left to whoever opens one.
    from replay.sql.store import SnapshotInfo, SnapshotStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Travel:
    """An image at a point in time and how it was built."""

    image: MetadataImage
    snapshot: SnapshotInfo | None
    """The snapshot it started from (None: replayed from the start of the log)."""
    replayed: int
    """Log entries replayed after the snapshot."""
    load_seconds: float
    replay_seconds: float
    skipped: tuple[str, ...] = field(default=())
    """Why newer snapshots were not used (not of this log, damaged, database down)."""
    kept_from: int | None = None
    """The offset of the kept image (`ImageCache`) it was replayed from, if one was used."""


def snapshot_matches_log(log: StoredLog, info: SnapshotInfo) -> bool:
    """Whether the log's entry at the snapshot's offset is the one the snapshot was taken at.

    A quorum log that starts just after an installed snapshot no longer has that entry: its
    `log-start-snapshot` names the snapshot by offset, epoch, timestamp and checksum instead.
    """
    start = log.start_snapshot
    if start is not None and info.offset == start.offset:
        return (info.epoch, info.timestamp, info.checksum) == (
            start.epoch,
            start.timestamp,
            start.checksum,
        )
    if info.offset >= log.end_offset or info.offset < log.log_start_offset - 1:
        return False
    if info.offset == log.log_start_offset - 1:
        # Trimmed to start just after it (`MetadataLog.trim_before(offset + 1)`) with no
        # `log-start-snapshot` naming it: its entry is gone. What is left to check is that
        # the log goes on from it (epochs never go down); its checksum is checked as it loads.
        for entry in log.read(gt=info.offset, lte=info.offset + 1):
            return entry.epoch >= info.epoch
        return True
    for entry in log.read(gt=info.offset - 1, lte=info.offset):
        return entry.epoch == info.epoch and entry.timestamp == info.timestamp
    return False


def travel(
    log: StoredLog,
    store: SnapshotStore | None,
    *,
    at_offset: int | None = None,
    at_time: int | str | None = None,
    progress: Callable[[int], None] | None = None,
    cache: ImageCache | None = None,
) -> Travel:
    """The image at a point in time (see the module docstring), with how it was built.

    With `cache`, a kept image of this log before the point is replayed from instead of a
    snapshot when that is the shorter way (`_kept_is_nearer`), and the image at the end of
    the replay's last batch but one is kept for the next point.
    """
    target = resolve_offset(log, at_offset=at_offset, at_time=at_time)
    log_start = log.log_start_offset
    if log_start > 0 and (target < log_start - 1 or (at_time is not None and target < log_start)):
        if at_time is None:
            kept = _snapshot_exactly_at(store, target)
            if kept is not None:
                return kept
        raise TimeTravelError(_before_start(log, store, target, at_time))
    if target < 0:
        return Travel(
            image=EMPTY_IMAGE, snapshot=None, replayed=0, load_seconds=0, replay_seconds=0
        )
    skipped: list[str] = []
    near = None if cache is None else cache.nearest(log, target)
    if near is not None and cache is not None and _kept_is_nearer(store, near, target):
        cache.hits += 1
        base, used, load_seconds = near, None, 0.0
    else:
        near = None
        base, used, load_seconds = _newest_snapshot(log, store, target, skipped)
    start = time.perf_counter()
    if cache is None:
        image = load_image(log, lte=target, base=base, progress=progress)
    else:
        image = _replay_keeping(log, base, target, cache, progress)
    replay_seconds = time.perf_counter() - start
    return Travel(
        image=image,
        snapshot=used,
        replayed=target - base.provenance.offset,
        load_seconds=load_seconds,
        replay_seconds=replay_seconds,
        skipped=tuple(skipped),
        kept_from=None if near is None else near.provenance.offset,
    )


def _kept_is_nearer(store: SnapshotStore | None, kept: MetadataImage, target: int) -> bool:
    """Whether replaying from `kept` beats loading a newer snapshot and replaying after it.

    A load builds about one object per partition of the image, a replay about one per entry,
    at similar rates: a snapshot is worth loading when it saves more entries than the image
    has partitions.
    """
    offset = kept.provenance.offset
    if offset == target or store is None or store.missing():
        return True
    try:
        newer = store.snapshots(gt=offset, lte=target, desc=True, limit=1)
    except SnapshotStoreError:
        return True
    if not newer:
        return True
    return target - offset <= target - newer[0].offset + kept.topics.partition_count()


def _replay_keeping(
    log: StoredLog,
    base: MetadataImage,
    target: int,
    cache: ImageCache,
    progress: Callable[[int], None] | None,
) -> MetadataImage:
    """`load_image(log, lte=target, base=base)`, keeping the image before its last batch.

    That image ends a batch whose rules were checked, as every batch before the last of a
    replay is; the image at `target` itself is not kept (its last batch is not checked, as
    `load_image` does not check a last one). One more delta is applied, of one batch; a long
    replay keeps checkpoints too, one delta each (`CHECKPOINT_ENTRIES`).
    """
    gt = base.provenance.offset
    if gt + 1 < log.log_start_offset or target <= gt:
        return load_image(log, lte=target, base=base, progress=progress)
    last: list[RecordBlock] = []

    def all_but_last(blocks: Iterator[RecordBlock]) -> Iterator[RecordBlock]:
        held = None
        for block in blocks:
            if held is not None:
                yield held
            held = block
        last.extend(() if held is None else (held,))

    blocks = all_but_last(iter(log.read_records(gt=gt if gt >= 0 else None, lte=target)))
    # Checkpoints on the way: the image every `spacing` entries is kept too, so the next
    # point in the region this replay crossed replays from the nearest of them, not again
    # from where this one began. Spaced by the image's size (a kept image costs about that).
    spacing = max(CHECKPOINT_ENTRIES, base.topics.partition_count())
    image = base
    while True:
        reached = replay_blocks(image, _up_to(blocks, spacing), progress=progress)
        if reached is image:
            break
        image = reached
        cache.add(log, image)
        spacing = max(CHECKPOINT_ENTRIES, image.topics.partition_count())
    return replay_blocks(image, last, lte=target, progress=progress)


CHECKPOINT_ENTRIES = 100_000
"""The fewest entries between two images a long replay keeps on its way (`_replay_keeping`)."""


def _up_to(blocks: Iterator[RecordBlock], entries: int) -> Iterator[RecordBlock]:
    """The next blocks of `blocks` until they hold at least `entries` entries (or it ends)."""
    held = 0
    for block in blocks:
        yield block
        held += len(block.records)
        if held >= entries:
            return


def _snapshot_exactly_at(store: SnapshotStore | None, target: int) -> Travel | None:
    """Before a trimmed log's start, only a snapshot taken at that very offset is an answer.

    It cannot be checked against the log (the entry is gone), only against its checksum.
    """
    if store is None or store.missing():
        return None
    start = time.perf_counter()
    try:
        for info in store.snapshots(gt=target - 1, lte=target, desc=True):
            try:
                image = store.load(info.id)
            except SnapshotContentError as exc:
                logger.warning("%s", exc)
                continue
            return Travel(
                image=image,
                snapshot=info,
                replayed=0,
                load_seconds=time.perf_counter() - start,
                replay_seconds=0.0,
            )
    except SnapshotStoreError as exc:
        logger.warning("%s", exc)
    return None


def _before_start(
    log: StoredLog, store: SnapshotStore | None, target: int, at_time: int | str | None
) -> str:
    """Why a point before a trimmed log's start cannot be reached, and what can be."""
    start = log.log_start_offset
    point = f"offset {target}" if at_time is None else f"time {at_time!r}"
    where = "is among" if at_time is None else "falls among"
    older: list[int] = []
    try:
        if store is not None and not store.missing():
            older = [i.offset for i in store.snapshots(lte=start - 2, desc=True, limit=5)]
    except SnapshotStoreError:
        pass
    kept = (
        "snapshots at offsets " + ", ".join(str(o) for o in sorted(older)) + " (newest five)"
        if older
        else "no snapshot"
    )
    return (
        f"{point} {where} the entries trimmed from this log: it starts at offset {start} "
        f"(`mlog log trim`). Before that only the snapshots' own offsets can be shown "
        f"(`--at-offset` of one; `mlog snapshot list`), and the database holds {kept} there"
    )


def image_at(
    log: StoredLog,
    store: SnapshotStore | None = None,
    *,
    at_offset: int | None = None,
    at_time: int | str | None = None,
    progress: Callable[[int], None] | None = None,
    cache: ImageCache | None = None,
) -> MetadataImage:
    """The image after the entry at `at_offset`, or after the last entry at or before `at_time`.

    `at_time` is milliseconds since the epoch or ISO-8601 text. Without either, the image of
    the whole log. Only committed states are answered: an offset inside an atomic batch
    answers the image at the batch's end (its `provenance.offset` says which). A process
    answering many points of one log gives them one `cache` (`ImageCache`).
    """
    if at_offset is not None:
        at_offset = batch_end(log, at_offset)
    return travel(
        log, store, at_offset=at_offset, at_time=at_time, progress=progress, cache=cache
    ).image


def _newest_snapshot(
    log: StoredLog, store: SnapshotStore | None, target: int, skipped: list[str]
) -> tuple[MetadataImage, SnapshotInfo | None, float]:
    if store is None or store.missing():
        return EMPTY_IMAGE, None, 0.0
    start = time.perf_counter()
    try:
        candidates = store.snapshots(lte=target, desc=True)
        for info in candidates:
            if info.offset < log.log_start_offset - 1:
                break  # older than the log: nothing to check it against, nor to replay after
            if not snapshot_matches_log(log, info):
                skipped.append(
                    f"snapshot {info.id} (offset {info.offset}) was not taken from this log"
                )
                continue
            try:
                image = store.load(info.id)
            except SnapshotContentError as exc:
                skipped.append(str(exc))
                continue
            return image, info, time.perf_counter() - start
    except SnapshotStoreError as exc:
        skipped.append(f"{exc}; replaying the log from the start")
    for reason in skipped:
        logger.warning("%s", reason)
    return EMPTY_IMAGE, None, time.perf_counter() - start
