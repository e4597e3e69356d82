"""api/client/writes.py: which refusals a write is sent again for, with its id."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from api.client import AdminClient, RemoteError, writes
from replay.controller.errors import ErrorCode
from tests.support.server_thread import running_server


@pytest.mark.parametrize(
    ("code", "sent"),
    [
        (ErrorCode.REQUEST_TIMED_OUT, 2),  # a follower's leader stopped before it answered
        (ErrorCode.NOT_CONTROLLER, 2),
        (ErrorCode.INVALID_REQUEST, 1),  # the same request would fail the same way
    ],
)
def test_a_private_write_refused_as_retriable_is_sent_again_with_its_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: ErrorCode, sent: int
) -> None:
    ids: list[bytes] = []

    async def send(write_id: bytes) -> Answer:
        ids.append(write_id)
        if len(ids) == 1:
            raise RemoteError(int(code), "refused once")
        return Answer()

    async def run(address: str) -> Answer:
        client = await AdminClient.connect(address)
        try:
            monkeypatch.setattr(client, "bootstrap", [])  # no other voter to ask
            monkeypatch.setattr(client, "_reconnect", _no_reconnect)
            return await client._idempotent(send)
        finally:
            await client.close()

    with running_server(tmp_path / "log", brokers=0) as server:
        if sent == 1:
            with pytest.raises(RemoteError, match="refused once"):
                asyncio.run(run(server.address))
        else:
            assert asyncio.run(run(server.address)) == Answer()
    assert len(ids) == sent and len(set(ids)) == 1  # the same id each time


@dataclasses.dataclass(frozen=True)
class Answer:
    """A private API's answer: no error."""

    error_code: int = 0


async def _no_reconnect(*_: object) -> None:
    return None


@pytest.mark.parametrize(
    ("code", "wait_s", "sent"),
    [
        (ErrorCode.NOT_CONTROLLER, 60.0, 20),  # an election of many rounds: sent until answered
        (ErrorCode.NOT_CONTROLLER, 0.0, 12),  # the election wait over: WRITE_ATTEMPTS only
    ],
)
def test_a_write_refused_while_the_quorum_elects_is_sent_for_the_election_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: ErrorCode, wait_s: float, sent: int
) -> None:
    ids: list[bytes] = []

    async def send(write_id: bytes) -> Answer:
        ids.append(write_id)
        if len(ids) < 20:
            raise RemoteError(int(code), "no leader yet: an election is under way")
        return Answer()

    async def run(address: str) -> Answer:
        client = await AdminClient.connect(address)
        try:
            monkeypatch.setattr(client, "bootstrap", [])
            monkeypatch.setattr(client, "_reconnect", _no_reconnect)
            monkeypatch.setattr(writes, "RETRY_BACKOFF_MAX_S", 0.01)  # no need to wait here
            client.election_wait_s = wait_s
            return await client._idempotent(send)
        finally:
            await client.close()

    with running_server(tmp_path / "log", brokers=0) as server:
        if sent < 20:
            with pytest.raises(RemoteError, match="election is under way"):
                asyncio.run(run(server.address))
        else:
            assert asyncio.run(run(server.address)) == Answer()
    assert len(ids) == sent and len(set(ids)) == 1
