"""A command that writes several batches (`ControllerResult.more`): each batch runs once."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import pytest

from api.service.gc_policy import mass_changes_under_way
from api.service.service import MetadataService
from metadata_log.log import MetadataLog
from records.model import RegisterBrokerRecord
from records.uuids import Uuid
from replay.controller.commands import ControllerResult
from replay.image import MetadataImage

BATCHES = 5


def _batches(calls: list[int]) -> ControllerResult[str]:
    """A command of BATCHES batches, one broker registered a batch; `calls` counts each run."""

    def batch(n: int) -> ControllerResult[None]:
        calls.append(n)
        record = RegisterBrokerRecord(broker_id=n, incarnation_id=Uuid.random(), broker_epoch=n)
        follow = (lambda image: batch(n + 1)) if n + 1 < BATCHES else None
        return ControllerResult(records=(record,), response=None, more=follow)

    first = batch(0)
    return ControllerResult(records=first.records, response="done", more=first.more)


def _registered(log_dir: Path) -> list[int]:
    with MetadataLog.open(log_dir) as log:
        return [
            entry.record.broker_id
            for entry in log.read()
            if isinstance(entry.record, RegisterBrokerRecord)
        ]


def test_embedded_execute_runs_each_further_batch_once(tmp_path: Path) -> None:
    calls: list[int] = []
    service = MetadataService.open(tmp_path)
    try:
        answer = service.execute(lambda image: _batches(calls))
    finally:
        service.close()
    assert answer == "done"
    assert calls == list(range(BATCHES))
    assert _registered(tmp_path) == list(range(BATCHES))


def test_submit_runs_each_further_batch_once(tmp_path: Path) -> None:
    calls: list[int] = []

    async def run() -> str:
        service = MetadataService.open(tmp_path)
        try:
            return await service.submit(lambda image: _batches(calls))
        finally:
            await service.aclose()

    assert asyncio.run(run()) == "done"
    assert calls == list(range(BATCHES))
    assert _registered(tmp_path) == list(range(BATCHES))


def test_the_image_between_batches_holds_the_earlier_ones(tmp_path: Path) -> None:
    seen: list[int] = []

    def command(image: MetadataImage) -> ControllerResult[None]:
        def second(image: MetadataImage) -> ControllerResult[None]:
            seen.append(len(image.cluster.brokers))
            return ControllerResult(records=(), response=None)

        record = RegisterBrokerRecord(broker_id=7, incarnation_id=Uuid.random(), broker_epoch=0)
        return ControllerResult(records=(record,), response=None, more=second)

    service = MetadataService.open(tmp_path)
    try:
        service.execute(command)
    finally:
        service.close()
    assert seen == [1]


# The next batch's write, scheduled and never started, goes with the loop.
@pytest.mark.filterwarnings("ignore:coroutine 'MetadataService.submit' was never awaited")
def test_a_command_dropped_with_its_loop_ends_its_mass_change(tmp_path: Path) -> None:
    # A loop closed with the command's task pending leaves its coroutine to be closed (a
    # GeneratorExit, not a cancellation) whenever it is freed: no await may follow then, and
    # the mass change must end at once, or the collector stays off for the whole process.
    before = mass_changes_under_way()
    loop = asyncio.new_event_loop()
    service = MetadataService.open(tmp_path)
    dropped = service.submit(lambda image: _batches([]))

    async def until_the_mass_change_began() -> None:
        for _ in range(10_000):
            if mass_changes_under_way() > before:
                return
            await asyncio.sleep(0)
        raise AssertionError("the further batches never began")

    task = loop.create_task(dropped)
    try:
        loop.run_until_complete(until_the_mass_change_began())
        dropped.close()
        assert mass_changes_under_way() == before
        assert gc.isenabled()
    finally:
        loop.close()
        service.close()
    assert task.done() is False  # abandoned, as a loop closed under it leaves it
