"""The metadata service: owns the log, the image and the controller.

Commands run one at a time against the working image (which includes records accepted but not
yet durable), so each sees the effect of the ones before it. Their records are appended with
group commit, and the answer is given only after the fsync. Readers see the committed image
only. A command that appends nothing still waits until everything accepted before it is
durable (as Kafka's controller does), because its answer was computed from that state.

If an append fails, the service stops taking writes (fail-stop): the working image may hold
records the log does not, and only a restart, which replays the log, is safe.

Pending partition deletions are moved on by checks driven by the service's clock: `purge_due`
runs one check (the embedded CLI runs one whenever it opens the service for writing), and
`run_scheduler` runs one every `delete.topic.partition.interval.delay.ms` in a server.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from api.controller.commands import ControllerResult, PurgeResult, PurgeStep
from api.controller.config_defs import cluster_value
from api.controller.controller import Controller
from api.controller.errors import IllegalStateTransitionError, ServiceStoppedError
from api.controller.partition_reduction import INTERVAL_KEY
from metadata_log.config import LogConfig
from metadata_log.log import AppendResult, MetadataLog
from records.model import FeatureLevelRecord, Record
from replay.delta import MetadataDelta
from replay.image import METADATA_VERSION, MetadataImage, Provenance
from replay.loader import load_image

if TYPE_CHECKING:
    # The async methods import asyncio when called: the embedded CLI starts without it.
    import asyncio

    from api.service.snapshots import Snapshotter
    from replay.sql.store import SnapshotStore

logger = logging.getLogger(__name__)

T = TypeVar("T")

Command = Callable[[MetadataImage], ControllerResult[T]]
"""A controller call bound to its request: image in, records and answer out."""

METADATA_VERSION_LEVEL = 1
"""The `metadata.version` this code writes into a new log."""

SERVICE_PRINCIPAL = "metadata-log"
"""The principal of records the service writes on its own (bootstrap, scheduled purges)."""


class MetadataService:
    """Serialises commands, appends their records, and publishes the committed image."""

    def __init__(
        self,
        log: MetadataLog,
        image: MetadataImage,
        controller: Controller | None = None,
        *,
        clock_ms: Callable[[], int] | None = None,
        snapshots: Snapshotter | None = None,
    ) -> None:
        self.log = log
        self._snapshots = snapshots
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        # One clock for both: a reduction's purge time and the checks must agree on "now".
        self.controller = controller or Controller(clock_ms=self._clock_ms)
        self._committed = image
        self._working = image
        self._next_offset = log.end_offset
        self._last_append: asyncio.Future[None] | None = None
        self._failure: BaseException | None = None
        self._commit_waiters: list[asyncio.Future[None]] = []

    @classmethod
    def open(
        cls,
        log_dir: Path,
        *,
        config: LogConfig | None = None,
        controller: Controller | None = None,
        progress: Callable[[int], None] | None = None,
        clock_ms: Callable[[], int] | None = None,
        snapshots: Snapshotter | None = None,
    ) -> MetadataService:
        """Open the log for writing and replay it into the image.

        With `snapshots`, start from the newest valid snapshot and replay only the log after
        it, and take snapshots by policy after commits.
        """
        if clock_ms is None:
            log = MetadataLog.open(log_dir, config=config)
        else:
            log = MetadataLog.open(log_dir, config=config, clock_ms=clock_ms)
        try:
            if snapshots is None:
                image = load_image(log, progress=progress)
            else:
                image = snapshots.start_image(log, progress=progress)
        except BaseException:
            log.close()
            if snapshots is not None:
                snapshots.close()
            raise
        service = cls(log, image, controller, clock_ms=clock_ms, snapshots=snapshots)
        if log.end_offset == 0:
            # metadata.version leads every log, as in KRaft.
            service.execute(_bootstrap, principal=SERVICE_PRINCIPAL)
        return service

    # ------------------------------------------------------------------ state

    @property
    def image(self) -> MetadataImage:
        """The committed image: every record in it is durable."""
        return self._committed

    @property
    def snapshot_store(self) -> SnapshotStore | None:
        """The store snapshots are written to (None without snapshots): for time travel."""
        return None if self._snapshots is None else self._snapshots.store

    async def wait_committed(self, offset: int, timeout: float) -> None:
        """Return once the committed image reaches `offset` (or on timeout or release).

        `release_waiters` (a server shutting down) wakes every waiter at once.
        """
        import asyncio

        if self._committed.provenance.offset >= offset or timeout <= 0:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            pass
        finally:
            if waiter in self._commit_waiters:
                self._commit_waiters.remove(waiter)

    def release_waiters(self) -> None:
        """Wake every `wait_committed` caller now."""
        waiters, self._commit_waiters = self._commit_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    @property
    def stopped(self) -> bool:
        """Whether the service stopped taking writes after an append failed."""
        return self._failure is not None

    def _check_running(self) -> None:
        if self._failure is not None:
            raise ServiceStoppedError(
                f"the service stopped taking writes after an append failed ({self._failure}); "
                "restart it to recover from the log"
            ) from self._failure

    def _accept(self, records: tuple[Record, ...]) -> MetadataImage:
        """Replay accepted records into the working image, with the offsets they will get."""
        delta = MetadataDelta(self._working)
        delta.replay_all(records)
        last = self._next_offset + len(records) - 1
        timestamp = max(self._clock_ms(), self._working.provenance.timestamp)
        image = delta.apply(Provenance(offset=last, epoch=self.log.epoch, timestamp=timestamp))
        self._working = image
        self._next_offset = last + 1
        return image

    def _commit(self, image: MetadataImage, appended: AppendResult) -> None:
        if image.provenance.timestamp != appended.timestamp:
            # The log stamps a block when it writes it; the image carries that time, as the
            # same image replayed from the log would (after a restart, or by time travel).
            stamped = image.with_timestamp(appended.timestamp)
            if self._working is image:
                self._working = stamped
            image = stamped
        if image.provenance.offset > self._committed.provenance.offset:
            self._committed = image
            if self._snapshots is not None:
                self._snapshots.committed(image, self.log)
            if self._commit_waiters:
                self.release_waiters()

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:
            logger.error("append failed, the service stops taking writes: %s", exc)
            self._failure = exc

    # ------------------------------------------------------------------ commands

    def execute(self, command: Command[T], *, principal: str | None = None) -> T:
        """Run a command and append its records synchronously (embedded mode, one caller)."""
        self._check_running()
        result = command(self._working)
        if not result.records:
            return result.response
        image = self._accept(result.records)
        try:
            appended = self.log.append(result.records, principal=principal)
        except Exception as exc:
            self._fail(exc)
            raise
        self._commit(image, appended)
        return result.response

    async def submit(self, command: Command[T], *, principal: str | None = None) -> T:
        """Run a command; answer after its records (and all before them) are durable.

        The command and the working-image update run without yielding to the event loop, so
        concurrent callers are serialised in the order they are scheduled.
        """
        import asyncio

        self._check_running()
        result = command(self._working)
        if not result.records:
            if self._last_append is not None and not self._last_append.done():
                await asyncio.shield(self._last_append)
            self._check_running()
            return result.response
        image = self._accept(result.records)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._last_append = done
        try:
            appended = await self.log.append_async(result.records, principal=principal)
        except Exception as exc:
            self._fail(exc)
            done.set_exception(ServiceStoppedError(str(exc)))
            done.exception()  # retrieved here; waiters see the service stopped
            raise
        self._commit(image, appended)
        done.set_result(None)
        return result.response

    # ------------------------------------------------------------------ scheduler

    def purge_due(self, *, now_ms: int | None = None) -> list[PurgeResult]:
        """Run one check of pending partition deletions, synchronously (embedded mode).

        Each deletion whose purge time has passed (by the service's clock, or `now_ms`) takes
        its next step: its partitions go to mode NONE, or, if they already are, are removed.
        Returns what was done, one result per topic; an empty list when nothing was due.
        """
        now = self._clock_ms() if now_ms is None else now_ms
        return self.execute(
            lambda image: self.controller.purge_partitions(image, now),
            principal=SERVICE_PRINCIPAL,
        )

    async def purge_due_async(self, *, now_ms: int | None = None) -> list[PurgeResult]:
        """`purge_due` through `submit`, for a server: answers once the step is durable."""
        now = self._clock_ms() if now_ms is None else now_ms
        return await self.submit(
            lambda image: self.controller.purge_partitions(image, now),
            principal=SERVICE_PRINCIPAL,
        )

    def scheduler_interval_ms(self) -> int:
        """Time between two checks: the cluster's `delete.topic.partition.interval.delay.ms`."""
        value = cluster_value(self._committed.configs.cluster(), INTERVAL_KEY)
        return int(value)  # type: ignore[arg-type]  # a LONG key parses to an int

    async def run_scheduler(
        self,
        *,
        sleep: Callable[[float], Awaitable[object]] | None = None,
        rounds: int | None = None,
    ) -> None:
        """Check pending partition deletions now and then every interval, until cancelled.

        The interval is read again after every check, so a config change applies from the
        next one. A check that fails on a state-machine error is logged and retried at the
        next interval; a stopped service (fail-stop) ends the loop with `ServiceStoppedError`.
        `rounds` stops after that many checks and `sleep` replaces `asyncio.sleep` (tests).
        """
        import asyncio

        pause = sleep or asyncio.sleep
        done = 0
        while rounds is None or done < rounds:
            try:
                results = await self.purge_due_async()
            except IllegalStateTransitionError as exc:
                logger.error("pending partition deletion check failed: %s", exc)
                results = []
            for result in results:
                logger.info(
                    "pending partition deletion of %s: partitions %s %s",
                    result.name,
                    list(result.partitions),
                    "removed" if result.step == PurgeStep.REMOVED else "set to mode NONE",
                )
            done += 1
            if rounds is not None and done >= rounds:
                break
            await pause(self.scheduler_interval_ms() / 1000)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close the log (release the writer lock), after a snapshot in flight."""
        if self._snapshots is not None:
            self._snapshots.close()
        self.log.close()

    async def aclose(self) -> None:
        """Wait for appends in flight, then close the log (and finish a snapshot in flight)."""
        import asyncio

        await self.log.aclose()
        if self._snapshots is not None:
            await asyncio.to_thread(self._snapshots.close)

    def __enter__(self) -> MetadataService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _bootstrap(image: MetadataImage) -> ControllerResult[None]:
    return ControllerResult(
        records=(FeatureLevelRecord(name=METADATA_VERSION, feature_level=METADATA_VERSION_LEVEL),),
        response=None,
    )
