"""A command that writes several batches (`ControllerResult.more`): each batch runs once."""

from __future__ import annotations

import asyncio
from pathlib import Path

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
