"""Attacks of issue #31 on what outlives one request: finding 7's write ids and long-polls.

Before the fix another principal's write with a higher sequence took over a client id's slot
(its answer replaced the first principal's, whose retries then failed), and a FetchLog
long-poll authorized at its start delivered a batch committed after the reader's ACL was
removed, the removal itself included. Now a client id belongs to the principal that first used
it, and a long-poll is authorized again before it answers.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest

from api.protocol import private
from api.protocol.codec import RequestHeader
from api.server.kafka.base import Session
from api.server.private_apis import PrivateApis
from api.server.write_ids import pending_write
from api.service.client_writes import CURRENT_WRITE, PendingWrite
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    RemoveAccessControlEntryRecord,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.authorizer import CLUSTER_NAME, Authorizer, AuthorizerConfig
from replay.controller.commands import ControllerResult, CreatableTopic, RegisterBroker
from replay.controller.errors import ApiError, ErrorCode

CLIENT = Uuid(bytes(range(16)))


def _pending(sequence: int, principal: str) -> PendingWrite:
    header = RequestHeader(
        api_key=19,
        api_version=7,
        correlation_id=1,
        client_id="t",
        write_id=(CLIENT.bytes, sequence),
    )
    found = pending_write(header, principal)
    assert found is not None
    return found


async def _create(service: MetadataService, name: str, write: PendingWrite) -> Any:
    topic = CreatableTopic(name=name, num_partitions=1, replication_factor=1)
    token = CURRENT_WRITE.set(write)
    try:
        command = functools.partial(service.controller.create_topics, topics=[topic])
        return await service.submit(command, principal=write.principal)
    finally:
        CURRENT_WRITE.reset(token)


def test_a_write_id_belongs_to_its_first_principal(tmp_path: Path) -> None:
    async def run() -> None:
        service = MetadataService.open(tmp_path / "log")
        service.execute(
            functools.partial(
                service.controller.register_broker, request=RegisterBroker(broker_id=1)
            )
        )
        first = await _create(service, "alices", _pending(3, "User:alice"))
        assert first[0].outcome.ok
        for sequence in (3, 4, 1_000):  # the same, a newer, a much newer sequence
            with pytest.raises(ApiError) as refused:
                await _create(service, f"mallorys-{sequence}", _pending(sequence, "User:mallory"))
            assert refused.value.error_code == ErrorCode.INVALID_REQUEST
            assert "belongs to another principal" in refused.value.message
        # the slot is still alice's: her retry gets her own answer, nothing new is written
        end = service.log.end_offset
        again = await _create(service, "alices", _pending(3, "User:alice"))
        assert again == first and service.log.end_offset == end
        assert [t.name for t in service.image.topics.by_id.values()] == ["alices"]
        await service.aclose()

    asyncio.run(run())


def test_a_long_poll_is_authorized_again_before_it_answers(tmp_path: Path) -> None:
    # DESCRIBE too: the code before the fix asked for it (a replay there fails as it should)
    readers = tuple(
        AccessControlEntryRecord(
            id=Uuid.random(),
            resource_type=ResourceType.CLUSTER,
            resource_name=CLUSTER_NAME,
            pattern_type=PatternType.LITERAL,
            principal="User:reader",
            host="*",
            operation=operation,
            permission_type=AclPermissionType.ALLOW,
        )
        for operation in (AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE)
    )
    service = MetadataService.open(tmp_path / "log")
    service.execute(lambda image: ControllerResult(records=readers, response=None))
    apis = PrivateApis(service, Authorizer(AuthorizerConfig()))
    session = Session(principal="User:reader", host="10.0.0.1")

    async def run() -> None:
        end = service.log.end_offset
        poll = asyncio.create_task(
            apis.fetch_log(private.FetchLog(offset=end, max_wait_ms=10_000), session)
        )
        await asyncio.sleep(0.1)  # the poll is waiting, authorized
        assert not poll.done()
        revoke = tuple(RemoveAccessControlEntryRecord(id=r.id) for r in readers)
        await service.submit(lambda image: ControllerResult(records=revoke, response=None))
        with pytest.raises(ApiError) as refused:
            await asyncio.wait_for(poll, 30)  # the poll itself would wait 10 s, then answer
        assert refused.value.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED

    try:
        asyncio.run(run())
    finally:
        service.close()
