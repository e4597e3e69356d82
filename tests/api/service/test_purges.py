"""The purge scheduler a server holds: checks until stopped, and a failed one is logged."""

from __future__ import annotations

import asyncio
import logging

import pytest

from api.service.purges import PurgeScheduler
from replay.controller.commands import PurgeResult
from replay.controller.errors import StorageError
from replay.image import EMPTY_IMAGE, MetadataImage


class _Service:
    """A service whose checks are counted, failing with `error` when set."""

    def __init__(self, error: BaseException | None = None) -> None:
        self.checks = 0
        self.error = error
        self.checked = asyncio.Event()

    @property
    def image(self) -> MetadataImage:
        return EMPTY_IMAGE

    async def purge_due_async(self, *, now_ms: int | None = None) -> list[PurgeResult]:
        self.checks += 1
        self.checked.set()
        if self.error is not None:
            raise self.error
        return []


async def test_a_started_scheduler_checks_at_once_and_stops_when_asked() -> None:
    service = _Service()
    scheduler = PurgeScheduler(service)
    assert scheduler.interval_ms() > 0  # the cluster default
    scheduler.start()
    await asyncio.wait_for(service.checked.wait(), 30)
    await scheduler.stop()
    checks = service.checks
    await asyncio.sleep(0)
    assert checks == service.checks == 1  # the interval is long: one check, then stopped
    await scheduler.stop()  # a second stop is a no-op


async def test_a_storage_failure_is_retried_and_an_unexpected_error_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    failing = _Service(StorageError("disk full"))
    await PurgeScheduler(failing).run(sleep=sleep, rounds=3)
    assert failing.checks == 3 and len(slept) == 2

    caplog.set_level(logging.ERROR, logger="api.service.purges")
    broken = _Service(RuntimeError("a bug"))
    scheduler = PurgeScheduler(broken)
    scheduler.start()
    await asyncio.wait_for(broken.checked.wait(), 30)
    await scheduler.stop()
    stopped = [r for r in caplog.records if "scheduler stopped" in r.getMessage()]
    assert len(stopped) == 1 and stopped[0].exc_info is not None
