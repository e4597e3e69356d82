"""The scheduler of pending partition deletions: a check every interval, in a server.

A partition deletion (`delete_partitions` with a delay) waits for its purge time; a check moves
every due one on a step (its partitions to mode NONE, then removed). The check itself is a
command of the service (`MetadataService.purge_due_async`: through a quorum only the leader's
checks write); `PurgeScheduler` runs one now and then one every
`delete.topic.partition.interval.delay.ms`, reading the interval again after each, so a config
change applies from the next check.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from replay.controller.commands import PurgeResult, PurgeStep
from replay.controller.config_defs import cluster_value
from replay.controller.errors import IllegalStateTransitionError, StorageError
from replay.controller.partition_reduction import INTERVAL_KEY
from replay.image import MetadataImage

if TYPE_CHECKING:
    # The scheduler runs in a server; the embedded CLI imports this module without asyncio.
    import asyncio

logger = logging.getLogger(__name__)


class PurgingService(Protocol):
    """What the scheduler needs of its service: the committed image and one check."""

    @property
    def image(self) -> MetadataImage:
        """The committed image (its cluster config holds the interval)."""
        ...

    async def purge_due_async(self, *, now_ms: int | None = None) -> list[PurgeResult]:
        """One check of pending partition deletions, answered once its step is durable."""
        ...


class PurgeScheduler:
    """Checks pending partition deletions every interval, until cancelled."""

    def __init__(self, service: PurgingService) -> None:
        self._service = service
        self._task: asyncio.Task[None] | None = None

    def interval_ms(self) -> int:
        """Time between two checks: the cluster's `delete.topic.partition.interval.delay.ms`."""
        value = cluster_value(self._service.image.configs.cluster(), INTERVAL_KEY)
        return int(value)  # type: ignore[arg-type]  # a LONG key parses to an int

    async def run(
        self,
        *,
        sleep: Callable[[float], Awaitable[object]] | None = None,
        rounds: int | None = None,
    ) -> None:
        """Check pending partition deletions now and then every interval, until cancelled.

        A check that fails on a state-machine error is logged and retried at the next
        interval; so does one refused because the log's storage failed (the service heals by
        itself). `rounds` stops after that many checks and `sleep` replaces `asyncio.sleep`
        (tests).
        """
        import asyncio

        pause = sleep or asyncio.sleep
        done = 0
        while rounds is None or done < rounds:
            try:
                results = await self._service.purge_due_async()
            except IllegalStateTransitionError as exc:
                logger.error("pending partition deletion check failed: %s", exc)
                results = []
            except StorageError:
                results = []  # logged once by the service; the next check runs after healing
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
            await pause(self.interval_ms() / 1000)

    def start(self) -> None:
        """Run the checks in a task of the running loop, until `stop`."""
        import asyncio

        self._task = asyncio.create_task(self._run_logged())

    async def stop(self) -> None:
        """Cancel the checks and wait for the task to end."""
        import asyncio
        import contextlib

        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _run_logged(self) -> None:
        import asyncio

        try:
            await self.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("the pending partition deletion scheduler stopped")
