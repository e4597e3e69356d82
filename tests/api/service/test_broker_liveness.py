"""The session checker's loop: a refusal that lasts is logged once, not every check."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from api.service.broker_liveness import BrokerLiveness
from api.service.service import MetadataService
from replay.controller.errors import ApiError, ErrorCode


class _Refusing(BrokerLiveness):
    """Checks that fail with `refusals` in turn, then pass."""

    def __init__(self, service: MetadataService, refusals: Sequence[str | None]) -> None:
        super().__init__(service)
        self.refusals = list(refusals)

    async def check_sessions(self) -> list[int]:
        refusal = self.refusals.pop(0) if self.refusals else None
        if refusal is not None:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, refusal)
        return []


async def _rounds(liveness: BrokerLiveness, rounds: int) -> None:
    done = 0

    async def pause(_: float) -> None:
        nonlocal done
        done += 1
        if done >= rounds:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        await liveness.run(interval_s=0, sleep=pause)


def test_a_lasting_refusal_is_logged_once_and_again_after_it_passed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with MetadataService.open(tmp_path / "log") as service:
        storage = "the log's storage failed"
        said = f"KAFKA_STORAGE_ERROR (56): {storage}"
        liveness = _Refusing(service, [storage] * 5 + ["not the controller", None, storage])
        with caplog.at_level(logging.INFO, logger="api.service.broker_liveness"):
            asyncio.run(_rounds(liveness, 8))
    lines = [r.getMessage() for r in caplog.records if r.name == "api.service.broker_liveness"]
    assert lines == [
        f"broker session check: {said} (retried until it passes)",
        "broker session check: KAFKA_STORAGE_ERROR (56): not the controller "
        "(retried until it passes)",
        f"broker session check: {said} (retried until it passes)",
    ]
