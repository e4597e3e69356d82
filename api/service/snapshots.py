"""The service's snapshots: start from the newest one, take new ones by policy, keep the newest N.

Startup loads the newest valid snapshot and replays the log after it. A database that is down or
behind in schema does not stop the service: it replays the whole log, warns, and tries again
later. A schema ahead of this code is refused (SchemaAheadError): a newer metadata-log wrote it.

Policy (Kafka's keys, cluster configs, or the server's file when it sets them): a snapshot once
`metadata.log.max.record.bytes.between.snapshots` bytes of records (uncompressed, as Kafka counts
them; the segments hold them snappy-compressed) were appended since the last one, or sooner
once the records appended are as many bytes as the image's own (`cadence_bytes`: a point in
time is then never more than about an image's load of replay from a snapshot),
or once `metadata.log.max.snapshot.interval.ms` passed with new entries, whichever comes first.
The committed image is immutable, so a worker thread writes it while appends go on; one write
at a time, and a policy check while one is in flight does nothing. Each snapshot but the first
of a process is written as an increment on the one before it (what changed since: the
snapshotter keeps the image it last wrote, which shares all that did not change with the
newest), up to `max_chain` increments in a row; then, or when the increment would be large, a
full one (`replay.sql.increments`). The writer works in slices
(`DutyCycle`, snapshot_pacing.py) so that the event loop beside it keeps answering. After each
snapshot only the newest `retention` are kept (never fewer than one), and with
`metadata.max.retention.ms` in the server's file none older than that but the newest.

The default database, the SQLite file `<data-dir>/snapshots.db`, is created with the first
snapshot: while it does not exist there is no snapshot to start from, which a stat tells without
opening a database (SQLAlchemy is imported only when a database is really used).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from api.service.retention import RetentionConfig, log_snapshots_deleted
from api.service.settings import SNAPSHOT_MAX_CHAIN, Settings
from api.service.snapshot_pacing import DutyCycle
from api.service.snapshot_runners import AbandonedError, SnapshotRunner, ThreadRunner
from metadata_log.reader import LogReader
from metadata_log.stored_log import StoredLog
from replay.controller.config_defs import SNAPSHOT_BYTES_KEY, SNAPSHOT_INTERVAL_KEY
from replay.loader import load_image
from replay.sql.errors import SchemaAheadError, SnapshotStoreError

if TYPE_CHECKING:
    from replay.image import MetadataImage
    from replay.sql.store import Progress, SnapshotInfo, SnapshotStore
    from replay.timetravel.image_cache import ImageCache

logger = logging.getLogger(__name__)

RETRY_MS = 60_000
"""How long after a failed snapshot (database down, schema behind) the next one is tried."""
MAX_CHAIN = SNAPSHOT_MAX_CHAIN
"""Increments written on one another before a full snapshot: a load reads the full snapshot
and at most this many increments."""
DEFAULT_DUTY_CYCLE = DutyCycle()
"""The slices of a background snapshot: 2 ms of work, then 0.5-8 ms for the event loop."""
RECORD_BYTES = 64
"""About what one of an image's records takes in the log, uncompressed (a partition record
with three replicas: 45-70 bytes): an image of R records is about R x 64 bytes of replay."""
MIN_CADENCE_BYTES = 1 << 20
"""The image-sized cadence's floor: below 1 MiB of records, a replay takes milliseconds."""


def cadence_bytes(max_bytes: int, image_records: int) -> int:
    """Bytes of records appended after which a snapshot is due.

    `max_bytes` (Kafka's key, a maximum), or sooner: once the records appended are as many bytes
    as the image's `image_records` would take (`RECORD_BYTES` each), at least 1 MiB. A point in
    time is answered by the newest snapshot at or before it plus the log up to it, and loading
    a snapshot costs about what replaying as many records does: a snapshot every image's worth
    of records bounds a cold point by about two loads. 20 MiB alone left a 100,000-partition
    image up to 450,000 entries (0.85 s) of replay beside its 0.2 s load; a 1M-partition image
    (~64 MiB of records) keeps the maximum.
    """
    return min(max_bytes, max(MIN_CADENCE_BYTES, image_records * RECORD_BYTES))


def image_records(image: MetadataImage) -> int:
    """The records that make most of `image`: its topics and partitions (O(topics))."""
    topics = image.topics
    return len(topics) + topics.partition_count()


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _long_config(cluster: Mapping[str, str], key: str) -> int:
    # The config definitions only where the policy runs: a read-only command skips them.
    from replay.controller.config_defs import cluster_value

    value = cluster_value(cluster, key)
    if isinstance(value, bool) or not isinstance(value, int):  # pragma: no cover - LONG keys
        raise SnapshotStoreError(f"{key} must be a whole number, got {value!r}")
    return value


class Snapshotter:
    """Snapshots of the service's image: startup from the newest, new ones by policy."""

    def __init__(
        self,
        store: SnapshotStore | Callable[[], SnapshotStore],
        *,
        file: Path | None = None,
        retention: int = 10,
        retention_bytes: int | None = None,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        retry_ms: int = RETRY_MS,
        progress: Progress | None = None,
        policy: RetentionConfig | None = None,
        duty_cycle: DutyCycle | None = DEFAULT_DUTY_CYCLE,
        runner: SnapshotRunner | None = None,
        max_chain: int = MAX_CHAIN,
    ) -> None:
        """Snapshots in `store`, or in the store `store()` opens when one is first needed.

        `file` is the SQLite file of a store opened on demand: while it does not exist, the
        store holds no snapshot, and is not opened (nor created) until one is written.
        `retention` snapshots are kept, and of them only the newest within `retention_bytes`
        (None: no byte bound; `SnapshotStore.retain`).
        `policy`'s snapshot keys, when set, replace the cluster configs' (server.properties).
        `duty_cycle`: the slices a snapshot is written in, beside the event loop (None: in one
        go, as fast as the thread can). `runner`: where a snapshot's work runs (default: on the
        worker thread; `ForkedRunner`: in a child process, unpaced, for stores another process
        can write). `max_chain`: increments in a row before a full snapshot (0: always full).
        """
        if retention < 1:
            raise SnapshotStoreError(
                f"snapshot retention must keep at least 1 snapshot, got {retention}"
            )
        self._store: SnapshotStore | None = None
        self._open_store: Callable[[], SnapshotStore] | None = None
        if callable(store):
            self._open_store = store
        else:
            self._store = store
        if max_chain < 0:
            raise SnapshotStoreError(f"max_chain must be 0 or more, got {max_chain}")
        self._file = file
        self.max_chain = max_chain
        self._base: tuple[SnapshotInfo, MetadataImage] | None = None
        """The newest snapshot this snapshotter wrote and its image: the next one's base."""
        self.retention = retention
        self.retention_bytes = retention_bytes
        self._clock_ms = clock_ms
        self._retry_ms = retry_ms
        self._progress = progress
        self.duty_cycle = duty_cycle
        self.runner: SnapshotRunner = runner or ThreadRunner()
        self.policy = policy or RetentionConfig()
        """The server's snapshot and retention keys (none set: the cluster configs rule)."""
        self._lock = threading.Lock()
        self._store_lock = threading.Lock()
        """Held while the store is opened on demand (`store`); never taken under `_lock`."""
        self._executor: ThreadPoolExecutor | None = None
        self._inflight: Future[SnapshotInfo | None] | None = None
        self._last_offset = -1
        self._last_time = clock_ms()
        self._bytes_at_last = 0
        """`log.record_bytes_appended` when the newest snapshot was taken."""
        self.measured_records = 0
        """The records of the newest snapshot's image (or of the image started from): the
        image-sized cadence's measure (`cadence_bytes`)."""
        self._backlog = 0
        """Record bytes after the newest snapshot that were in the log when it was opened."""
        self._retry_at = 0
        self._limits_of: tuple[object, int, int] | None = None
        """(configs image, byte threshold, interval) of the last `due` (`_limits`)."""
        self.last_error: str | None = None
        """Why the last attempt failed (None after a success)."""
        self.started_from: SnapshotInfo | None = None
        """The snapshot the service started from (None: the whole log was replayed)."""
        self.written: SnapshotInfo | None = None
        """The newest snapshot this snapshotter wrote (a quorum node offers it to others)."""
        self.on_written: Callable[[SnapshotInfo], None] | None = None
        """Called on the worker thread after each snapshot (a standalone service trims)."""
        self.deleted_total = 0
        """Snapshots deleted by retention since the start (a metric)."""

    @property
    def store(self) -> SnapshotStore:
        """The snapshot store (opened now if it is opened on demand).

        Opened under a lock of its own, not `_lock`: the first snapshot opens it on the worker
        thread (creating the database, running its migrations: up to seconds), and the event
        loop takes `_lock` after every commit (`committed`), so it would wait that long.
        """
        with self._store_lock:
            if self._store is None:
                if self._open_store is None:  # pragma: no cover - the constructor sets one
                    raise SnapshotStoreError("the snapshotter has no store")
                self._store = self._open_store()
            return self._store

    def _holds_nothing(self) -> bool:
        """Whether the store is known to hold no snapshot without opening it (no file yet)."""
        return self._store is None and self._file is not None and not self._file.exists()

    def may_hold_snapshots(self) -> bool:
        """Whether the store may hold a snapshot (False: known empty, without opening it)."""
        return not self._holds_nothing()

    # ------------------------------------------------------------------ startup

    def start_image(
        self,
        log: StoredLog,
        progress: Callable[[int], None] | None = None,
        *,
        lte: int | None = None,
    ) -> MetadataImage:
        """The newest valid snapshot plus the log after it (the whole log without one).

        Up to offset `lte` if given (a quorum node: its committed offset), else the log's end.
        """
        usable = not self._holds_nothing()
        if usable:
            try:
                self.store.ensure_schema()
            except SchemaAheadError:
                raise
            except SnapshotStoreError as exc:
                self._failed(f"{exc}; replaying the whole log instead")
                usable = False
        if usable:
            # Time travel's machinery is needed only with snapshots to choose from.
            from replay.timetravel import travel

            result = travel(log, self.store, at_offset=lte, progress=progress)
            image = result.image
            for reason in result.skipped:
                self.last_error = reason
            self.started_from = result.snapshot
            if result.snapshot is not None:
                self._last_offset = result.snapshot.offset
                self._last_time = int(result.snapshot.created_at.timestamp() * 1000)
        else:
            image = load_image(log, lte=lte, progress=progress)
        started = self.started_from
        self.measured_records = image_records(image) if started is None else started.record_count
        # Only whether the threshold is reached matters, so the count stops there.
        max_bytes = cadence_bytes(self._max_bytes(image.configs.cluster()), self.measured_records)
        self._backlog = log.record_bytes_after(self._last_offset, limit=max_bytes)
        self._bytes_at_last = log.record_bytes_appended
        return image

    # ------------------------------------------------------------------ policy

    def due(self, image: MetadataImage, log: StoredLog) -> bool:
        """Whether the policy asks for a snapshot of `image` now."""
        if image.provenance.offset <= self._last_offset:
            return False
        now = self._clock_ms()
        if now < self._retry_at:
            return False
        max_bytes, interval = self._limits(image)
        threshold = cadence_bytes(max_bytes, self.measured_records)
        if self._backlog + log.record_bytes_appended - self._bytes_at_last >= threshold:
            return True
        return interval > 0 and now - self._last_time >= interval

    def _limits(self, image: MetadataImage) -> tuple[int, int]:
        """The policy's byte threshold and interval for `image`'s configs.

        Asked after every commit (a follower's every fetch): the values are kept for the
        configs image they were read from, which a commit that changes no config shares.
        """
        configs = image.configs
        known = self._limits_of
        if known is not None and known[0] is configs:
            return known[1], known[2]
        cluster = configs.cluster()
        max_bytes = self._max_bytes(cluster)
        interval = self.policy.snapshot_interval_ms
        if interval is None:
            interval = _long_config(cluster, SNAPSHOT_INTERVAL_KEY)
        self._limits_of = (configs, max_bytes, interval)
        return max_bytes, interval

    def _max_bytes(self, cluster: Mapping[str, str]) -> int:
        given = self.policy.snapshot_bytes
        return _long_config(cluster, SNAPSHOT_BYTES_KEY) if given is None else given

    def committed(self, image: MetadataImage, log: StoredLog) -> None:
        """After each commit: start a background snapshot if the policy asks for one."""
        with self._lock:
            if self._inflight is not None and not self._inflight.done():
                return
        if self.due(image, log):
            self.request(image, log)

    def request(self, image: MetadataImage, log: StoredLog) -> Future[SnapshotInfo | None]:
        """Write a snapshot of `image` on the worker thread (on demand, or by policy)."""
        with self._lock:
            if self._inflight is not None and not self._inflight.done():
                return self._inflight
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="mlog-snapshot")
            bytes_now = log.record_bytes_appended
            self._inflight = self._executor.submit(self._write, image, bytes_now)
            return self._inflight

    def warm_up(self) -> Future[None]:
        """Import the store's modules now, not with the first snapshot, on the worker thread.

        A server's first snapshot comes under load, and every voter of a quorum takes it at
        the same offset: importing SQLAlchemy and Alembic then (~0.4 s of CPU, not sliced: an
        import holds the interpreter lock in long stretches) cut a leader's event loop to a
        tenth of its answers for that long. `mlog serve` calls this once it serves (they
        were half of a small start's CPU before `/readyz` answered) and waits for it before
        it freezes what it loaded (`gc.freeze`): imported after that freeze, the modules'
        objects stayed in the collector's view and every full collection walked them
        (server_bench: p99 24 ms against 9 ms, 10% more CPU a request). On the worker
        thread, a snapshot asked for meanwhile waits behind it: no fork (a forked
        snapshot's child) happens in the middle of an import. Nothing is opened or created:
        the database still is when the first snapshot is written. Alembic is not among
        them: a database at this code's revision is known by one query
        (`replay.sql.revision`) and a new one is created at the head revision without it
        (`replay.sql.new_schema`), so a server imports Alembic only to report a schema it
        cannot use (11 MiB of RSS, ~0.15 s of CPU). Commands run once (the CLI) do not call
        it.
        """
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="mlog-snapshot")
            return self._executor.submit(_import_store_modules)

    def _write(self, image: MetadataImage, bytes_now: int) -> SnapshotInfo | None:
        try:
            store = self.store
            runner = self.runner if store.shared_between_processes else ThreadRunner()
            paced = runner.shares_interpreter and self.duty_cycle is not None
            pace = self.duty_cycle.pacer() if paced and self.duty_cycle is not None else None

            base = self._base
            if base is not None and base[0].chain_length >= self.max_chain:
                base = None

            def work() -> tuple[SnapshotInfo, list[SnapshotInfo]]:
                info = store.write(image, progress=self._progress, pace=pace, base=base)
                kept = store.retain(self.retention, max_bytes=self.retention_bytes)
                return info, kept + self._expire()

            info, deleted = runner.run(work, in_child=store.forget_connections)
        except AbandonedError:
            return None  # the server is stopping; `close` said so
        except SnapshotStoreError as exc:
            self._failed(f"snapshot at offset {image.provenance.offset} failed: {exc}")
            return None
        with self._lock:
            self.written = info
            self._base = (info, image)
            self._last_offset = info.offset
            self._last_time = self._clock_ms()
            self._bytes_at_last = bytes_now
            self.measured_records = info.record_count
            self._backlog = 0
            self.last_error = None
            self.deleted_total += len(deleted)
        logger.info(
            "snapshot %d at offset %d written (%d records); %d old snapshot(s) deleted",
            info.id,
            info.offset,
            info.record_count,
            len(deleted),
        )
        log_snapshots_deleted([d.offset for d in deleted], self.retention, self.retention_bytes)
        if self.on_written is not None:
            self.on_written(info)
        return info

    def _expire(self) -> list[SnapshotInfo]:
        """Delete the snapshots older than `metadata.max.retention.ms` but the newest.

        A base a kept increment needs stays (`SnapshotStore.prune`).
        """
        max_ms = self.policy.max_ms
        if max_ms < 0:
            return []
        cutoff = self._clock_ms() - max_ms
        older = self.store.snapshots(desc=True)[1:]
        doomed = [s for s in older if s.created_at.timestamp() * 1000 < cutoff]
        return self.store.prune(doomed) if doomed else []

    def _failed(self, reason: str) -> None:
        with self._lock:
            self.last_error = reason
            self._retry_at = self._clock_ms() + self._retry_ms
        logger.warning("%s (snapshots are retried in %d s)", reason, self._retry_ms // 1000)

    def wait(self) -> SnapshotInfo | None:
        """Wait for the snapshot in flight, if any; returns it (None if it failed)."""
        with self._lock:
            inflight = self._inflight
        return None if inflight is None else inflight.result()

    def close(self) -> None:
        """Give up a snapshot in a child (or let one on the thread finish); release the database."""
        if self.runner.abandon():
            logger.info("the snapshot under way was given up: the server is stopping")
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        if self._store is not None:
            self._store.close()


def _import_store_modules() -> None:
    """Import the store: SQLAlchemy's Core, not Alembic (only to report or migrate a schema)."""
    importlib.import_module("replay.sql.store")


# ---------------------------------------------------------------------- CLI plumbing


def open_store(settings: Settings, *, create: bool = True) -> SnapshotStore:
    """The snapshot store of the settings (`--db`, MLOG_DATABASE_URL, or the data dir's file)."""
    from replay.sql.store import SnapshotStore  # SQLAlchemy: only when a database is used

    return SnapshotStore(settings.snapshot_database_url, create=create)


def existing_store(settings: Settings) -> SnapshotStore | None:
    """The store to read snapshots from; None while the default SQLite file does not exist.

    No file means no snapshot: a stat says so, with no database opened (or created).
    """
    file = settings.snapshot_file
    if file is not None and not file.exists():
        return None
    return open_store(settings, create=False)


def open_snapshotter(settings: Settings, *, runner: SnapshotRunner | None = None) -> Snapshotter:
    """The service's snapshotter for the settings' database and retention.

    The store is opened when first needed: at start-up if the database may hold a snapshot,
    else when the policy first asks for one (the default SQLite file is created then).
    `runner`: where snapshots are written (default: the snapshotter's thread).
    """
    return Snapshotter(
        lambda: open_store(settings),
        file=settings.snapshot_file,
        retention=settings.snapshot_retention,
        retention_bytes=settings.snapshot_retention_bytes,
        max_chain=settings.snapshot_max_chain,
        policy=settings.retention,
        runner=runner,
    )


def read_image(
    settings: Settings,
    *,
    at_offset: int | None = None,
    at_time: str | None = None,
    progress: Callable[[int], None] | None = None,
    cache: ImageCache | None = None,
    log: StoredLog | None = None,
) -> MetadataImage:
    """The image of the data directory at a point in time, read-only (no lock, no writes).

    Starts from the newest usable snapshot at or before the point (a missing database file is
    not created), or an image of `cache` kept from an earlier point when that is nearer (with no
    snapshot too: a handle asking for the end again replays only what was appended since), and
    replays the log after it. `log`: the data directory's log already open (else opened here).
    """
    with contextlib.ExitStack() as opened:
        if log is None:
            log = opened.enter_context(LogReader.open(settings.log_dir, config=settings.log))
        store = existing_store(settings)
        if store is None and at_offset is None and at_time is None and cache is None:
            return load_image(log, progress=progress)  # no snapshot, no past point: the log
        from replay.timetravel import image_at

        try:
            # image_at, not travel: a point inside an atomic batch answers the batch's end.
            return image_at(
                log, store, at_offset=at_offset, at_time=at_time, progress=progress, cache=cache
            )
        finally:
            if store is not None:
                store.close()
