"""Idempotent writes: the image's table of clients' last writes, and retries in the service."""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest

from api.protocol.codec import RequestHeader
from api.server.write_ids import pending_write
from api.service.client_writes import CURRENT_WRITE, PendingWrite
from api.service.service import MetadataService
from metadata_log.reader import LogReader
from records.model import ClientWriteRecord, TopicRecord
from records.uuids import Uuid
from replay.controller.commands import CreatableTopic, RegisterBroker
from replay.controller.errors import ApiError, ErrorCode
from replay.delta import replay_records
from replay.image import EMPTY_IMAGE, ClientWritesImage, Provenance
from replay.loader import load_image
from replay.sql.store import SnapshotStore
from replay.timetravel import image_at, travel

P = Provenance(offset=0, epoch=1, timestamp=1)


def _write(client: int, sequence: int, answer: bytes = b"") -> ClientWriteRecord:
    return ClientWriteRecord(
        client_id=Uuid(bytes([client]) * 16),
        sequence=sequence,
        principal="User:a",
        api_key=19,
        response=answer,
    )


# ---------------------------------------------------------------------- the table


def test_the_table_keeps_each_clients_last_write_and_evicts_the_oldest() -> None:
    table = ClientWritesImage().with_writes([_write(1, 0), _write(2, 0), _write(3, 0)], limit=3)
    assert [w.client_id for w in table.ordered()] == [_write(c, 0).client_id for c in (1, 2, 3)]
    # Client 1 writes again: it becomes the newest, so client 2 is the next evicted.
    table = table.with_writes([_write(1, 1)], limit=3)
    table = table.with_writes([_write(4, 0)], limit=3)
    assert len(table) == 3
    assert table.get(_write(2, 0).client_id) is None
    assert table.get(_write(1, 0).client_id) == _write(1, 1)
    assert [w.client_id.bytes[0] for w in table.ordered()] == [3, 1, 4]


def test_the_bound_is_deterministic_whatever_the_batching() -> None:
    writes = [_write(c % 7, s) for s, c in enumerate(range(40))]
    one = ClientWritesImage().with_writes(writes, limit=5)
    many = ClientWritesImage()
    for w in writes:
        many = many.with_writes([w], limit=5)
    assert one == many and one.ordered() == many.ordered() and len(one) == 5


def test_replay_of_the_image_bound_and_its_snapshot_give_the_same_table() -> None:
    from replay.image import MAX_CLIENT_WRITES

    records = [
        ClientWriteRecord(
            client_id=Uuid(i.to_bytes(16, "big")),
            sequence=0,
            principal=None,
            api_key=19,
            response=b"",
        )
        for i in range(MAX_CLIENT_WRITES + 10)
    ]
    image = replay_records(EMPTY_IMAGE, records, P)
    assert len(image.client_writes) == MAX_CLIENT_WRITES
    assert image.client_writes.get(records[9].client_id) is None  # the oldest ten evicted
    assert image.client_writes.get(records[10].client_id) is not None
    again = replay_records(EMPTY_IMAGE, list(image.write()), P)
    assert again == image and again.client_writes.ordered() == image.client_writes.ordered()
    # One more client evicts the same one on both.
    extra = _write(200, 0)
    assert (
        replay_records(image, [extra], P).client_writes
        == replay_records(again, [extra], P).client_writes
    )


# ---------------------------------------------------------------------- the service

CLIENT = Uuid(bytes(range(16)))


def _pending(sequence: int, principal: str = "User:a", api_key: int = 19) -> PendingWrite:
    header = RequestHeader(
        api_key=api_key,
        api_version=7,
        correlation_id=1,
        client_id="t",
        write_id=(CLIENT.bytes, sequence),
    )
    found = pending_write(header, principal)
    assert found is not None
    return found


async def _submit(service: MetadataService, command: Any, write: PendingWrite) -> Any:
    token = CURRENT_WRITE.set(write)
    try:
        return await service.submit(command, principal=write.principal)
    finally:
        CURRENT_WRITE.reset(token)


def _create(service: MetadataService, name: str) -> Any:
    topic = CreatableTopic(name=name, num_partitions=1, replication_factor=1)
    return functools.partial(service.controller.create_topics, topics=[topic])


def _service(log_dir: Path, db: str | None = None) -> MetadataService:
    if db is None:
        service = MetadataService.open(log_dir)
    else:
        from api.service.snapshots import Snapshotter

        service = MetadataService.open(log_dir, snapshots=Snapshotter(SnapshotStore(db)))
    if service.image.cluster.get(1) is None:
        service.execute(
            functools.partial(
                service.controller.register_broker, request=RegisterBroker(broker_id=1)
            )
        )
    return service


def _topics(log_dir: Path) -> list[str]:
    with LogReader.open(log_dir) as log:
        return [e.record.name for e in log.read() if isinstance(e.record, TopicRecord)]


def test_the_same_write_twice_is_applied_once_with_the_same_answer(tmp_path: Path) -> None:
    async def run() -> None:
        service = _service(tmp_path / "log")
        first = await _submit(service, _create(service, "t"), _pending(0))
        second = await _submit(service, _create(service, "t"), _pending(0))
        assert first == second
        (result,) = first
        assert result.outcome.ok
        # Without the id, the retry is a new create: TOPIC_ALREADY_EXISTS (today's behaviour).
        (plain,) = await service.submit(_create(service, "t"))
        assert plain.outcome.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        await service.aclose()

    asyncio.run(run())
    assert _topics(tmp_path / "log") == ["t"]


def test_a_stored_answer_is_served_after_a_replay_of_the_log(tmp_path: Path) -> None:
    async def first() -> object:
        service = _service(tmp_path / "log")
        answer = await _submit(service, _create(service, "t"), _pending(5))
        await service.aclose()
        return answer

    async def retry() -> object:
        service = _service(tmp_path / "log")
        answer = await _submit(service, _create(service, "t"), _pending(5))
        await service.aclose()
        return answer

    assert asyncio.run(first()) == asyncio.run(retry())
    assert _topics(tmp_path / "log") == ["t"]


def test_a_stored_answer_is_served_after_a_restart_from_a_snapshot(
    tmp_path: Path, database_url: str
) -> None:
    db = database_url

    async def first() -> object:
        service = _service(tmp_path / "log", db)
        answer = await _submit(service, _create(service, "t"), _pending(5))
        snapshots = service._snapshots
        assert snapshots is not None
        snapshots.store.write(service.image)
        await service.aclose()
        return answer

    async def retry() -> object:
        service = _service(tmp_path / "log", db)
        assert service.image.client_writes.get(CLIENT) is not None
        answer = await _submit(service, _create(service, "t"), _pending(5))
        await service.aclose()
        return answer

    assert asyncio.run(first()) == asyncio.run(retry())
    assert _topics(tmp_path / "log") == ["t"]
    with SnapshotStore(db) as store:
        info = store.newest()
        assert info is not None
        assert store.load(info.id).client_writes.get(CLIENT) is not None


def test_an_older_sequence_another_principal_or_api_is_refused(tmp_path: Path) -> None:
    async def run() -> None:
        service = _service(tmp_path / "log")
        await _submit(service, _create(service, "a"), _pending(3))
        await _submit(service, _create(service, "b"), _pending(4))
        with pytest.raises(ApiError) as older:
            await _submit(service, _create(service, "a"), _pending(3))
        assert older.value.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER
        with pytest.raises(ApiError) as other:
            await _submit(service, _create(service, "b"), _pending(4, principal="User:b"))
        assert other.value.error_code == ErrorCode.INVALID_REQUEST
        with pytest.raises(ApiError) as api:
            await _submit(service, _create(service, "b"), _pending(4, api_key=20))
        assert api.value.error_code == ErrorCode.INVALID_REQUEST
        # A newer sequence is a new write.
        created: Any = await _submit(service, _create(service, "c"), _pending(9))
        assert created[0].outcome.ok
        await service.aclose()

    asyncio.run(run())
    assert _topics(tmp_path / "log") == ["a", "b", "c"]


def test_the_table_travels_in_time_with_the_log(tmp_path: Path) -> None:
    async def run() -> None:
        service = _service(tmp_path / "log")
        await _submit(service, _create(service, "a"), _pending(0))
        await _submit(service, _create(service, "b"), _pending(1))
        await service.aclose()

    asyncio.run(run())
    with LogReader.open(tmp_path / "log") as log:
        notes = [e for e in log.read() if isinstance(e.record, ClientWriteRecord)]
        assert [getattr(n.record, "sequence", None) for n in notes] == [0, 1]
        # The note is in the same block as the write: the entry before it is the topic's.
        # (travel, not image_at: image_at answers whole batches only.)
        before = travel(log, None, at_offset=notes[0].offset - 1).image
        assert before.client_writes.get(CLIENT) is None
        at_first = image_at(log, at_offset=notes[0].offset)
        assert at_first.client_writes.get(CLIENT) == notes[0].record
        assert load_image(log).client_writes.get(CLIENT) == notes[1].record
