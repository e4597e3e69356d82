"""The metadata service: owns the log, the image and the controller.

Commands run one at a time against the working image (which includes records accepted but not
yet durable), so each sees the effect of the ones before it. Their records are appended with
group commit, and the answer is given only after the fsync. Readers see the committed image
only. A command that appends nothing still waits until everything accepted before it is
durable (as Kafka's controller does), because its answer was computed from that state.

If an append fails, the service stops taking writes (fail-stop): the working image may hold
records the log does not, and only a restart, which replays the log, is safe.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from api.commands import ControllerResult
from api.controller import Controller
from api.errors import ServiceStoppedError
from metadata_log.config import LogConfig
from metadata_log.log import MetadataLog
from records.model import FeatureLevelRecord, Record
from replay.delta import MetadataDelta
from replay.image import METADATA_VERSION, MetadataImage, Provenance
from replay.loader import load_image

if TYPE_CHECKING:
    from api.snapshots import Snapshotter

logger = logging.getLogger(__name__)

T = TypeVar("T")

Command = Callable[[MetadataImage], ControllerResult[T]]
"""A controller call bound to its request: image in, records and answer out."""

METADATA_VERSION_LEVEL = 1
"""The `metadata.version` this code writes into a new log."""


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
        self.controller = controller or Controller()
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._committed = image
        self._working = image
        self._next_offset = log.end_offset
        self._last_append: asyncio.Future[None] | None = None
        self._failure: BaseException | None = None

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
            service.execute(_bootstrap, principal="metadata-log")
        return service

    # ------------------------------------------------------------------ state

    @property
    def image(self) -> MetadataImage:
        """The committed image: every record in it is durable."""
        return self._committed

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

    def _commit(self, image: MetadataImage) -> None:
        if image.provenance.offset > self._committed.provenance.offset:
            self._committed = image
            if self._snapshots is not None:
                self._snapshots.committed(image, self.log)

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
            self.log.append(result.records, principal=principal)
        except Exception as exc:
            self._fail(exc)
            raise
        self._commit(image)
        return result.response

    async def submit(self, command: Command[T], *, principal: str | None = None) -> T:
        """Run a command; answer after its records (and all before them) are durable.

        The command and the working-image update run without yielding to the event loop, so
        concurrent callers are serialised in the order they are scheduled.
        """
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
            await self.log.append_async(result.records, principal=principal)
        except Exception as exc:
            self._fail(exc)
            done.set_exception(ServiceStoppedError(str(exc)))
            done.exception()  # retrieved here; waiters see the service stopped
            raise
        self._commit(image)
        done.set_result(None)
        return result.response

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close the log (release the writer lock), after a snapshot in flight."""
        if self._snapshots is not None:
            self._snapshots.close()
        self.log.close()

    async def aclose(self) -> None:
        """Wait for appends in flight, then close the log (and finish a snapshot in flight)."""
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
