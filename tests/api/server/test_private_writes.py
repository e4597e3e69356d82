"""Idempotent private writes: a flexible version of each write API carries the write id.

Our write APIs (namespaces, partition reduction, purges, brokers) have a v1 whose request
header is v2 (tagged fields: the write id, `codec.WRITE_ID_TAG`) and whose response header is
v1, the same Avro bodies as v0; the server still answers v0, and the client sends v0, once
and without an id, to a server that speaks only v0.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from api.cli.main import main
from api.client import AdminClient
from api.client.connection import ClientError
from api.protocol import codec, private
from api.protocol.connection import Close, Connection, PrivateRequest
from metadata_log.reader import LogReader
from records.model import ClientWriteRecord, ConfigResourceType, NamespaceRecord
from replay.controller.commands import (
    BrokerAction,
    CancelPartitionDeletion,
    ConfigResource,
    CreatableTopic,
    CreateNamespace,
    DeleteNamespace,
    DeletePartitionsTopic,
    MoveTopic,
    PurgeStep,
    RegisterBroker,
    TopicRef,
)
from tests.support.server_thread import running_server
from tests.support.tcp_proxy import proxy_loop

WRITE_APIS = [api for api in private.PRIVATE_APIS.values() if api.writes]
CLIENT = bytes(range(16))


def _notes(log_dir: Path) -> list[ClientWriteRecord]:
    with LogReader.open(log_dir) as log:
        return [e.record for e in log.read() if isinstance(e.record, ClientWriteRecord)]


def _end(log_dir: Path) -> int:
    with LogReader.open(log_dir) as log:
        return log.end_offset


def _namespaces(log_dir: Path) -> list[str]:
    with LogReader.open(log_dir) as log:
        return [e.record.name for e in log.read() if isinstance(e.record, NamespaceRecord)]


# ---------------------------------------------------------------------- frames


def test_every_write_api_has_a_flexible_version_and_the_reads_none() -> None:
    assert {api.name for api in WRITE_APIS} == {
        "CreateNamespace",
        "DeleteNamespace",
        "MoveTopic",
        "DeletePartitions",
        "PurgePending",
        "RegisterBroker",
        "ChangeBroker",
        "CancelPartitionDeletions",
    }
    for api in WRITE_APIS:
        assert private.PRIVATE_VERSIONS[api.key] == (0, 1), api.name
        assert api.flexible(1) and not api.flexible(0), api.name
    for api in private.PRIVATE_APIS.values():
        if not api.writes:
            assert api.flexible_from is None, api.name


def test_a_flexible_request_carries_its_write_id_and_v0_cannot() -> None:
    request = CreateNamespace(name="team")
    write_id = codec.write_id_bytes(CLIENT, 7)
    frame = private.encode_request(
        private.CREATE_NAMESPACE, request, correlation_id=3, write_id=write_id
    )
    (event,) = Connection().receive(frame)
    assert isinstance(event, PrivateRequest)
    assert event.header.api_version == 1 and event.header.write_id == (CLIENT, 7)
    assert private.decode_request_body(private.CREATE_NAMESPACE, event.body, 1) == request
    # Without an id v1 is header v1 plus an empty tagged-field section: one byte more than v0.
    plain = private.encode_request(private.CREATE_NAMESPACE, request, correlation_id=3)
    old = private.encode_request(private.CREATE_NAMESPACE, request, correlation_id=3, version=0)
    assert len(plain) == len(old) + 1
    (event,) = Connection().receive(old)
    assert isinstance(event, PrivateRequest) and event.header.write_id is None
    assert private.decode_request_body(private.CREATE_NAMESPACE, event.body, 0) == request
    with pytest.raises(private.OlderVersionError, match="no tagged fields"):
        private.encode_request(
            private.CREATE_NAMESPACE, request, correlation_id=3, version=0, write_id=write_id
        )


def _v1_frame(tags: bytes, body: bytes) -> bytes:
    header = struct.pack(">hhih", private.CREATE_NAMESPACE.key, 1, 9, 1) + b"c"
    payload = header + tags + body
    return struct.pack(">i", len(payload)) + payload


def test_unknown_tags_are_skipped_and_a_bad_write_id_closes_the_connection() -> None:
    body = private.encode_request(
        private.CREATE_NAMESPACE, CreateNamespace(name="x"), correlation_id=1, version=0
    )[4 + 10 + 4 :]  # after the size and header v1 with client id "mlog"
    write_id = codec.write_id_bytes(CLIENT, 2)
    tags = private._tags({5: b"future", codec.WRITE_ID_TAG: write_id, 20000: b""})
    (event,) = Connection().receive(_v1_frame(tags, body))
    assert isinstance(event, PrivateRequest) and event.header.write_id == (CLIENT, 2)
    assert private.decode_request_body(private.CREATE_NAMESPACE, event.body, 1).name == "x"
    (bad,) = Connection().receive(_v1_frame(private._tags({codec.WRITE_ID_TAG: b"short"}), body))
    assert isinstance(bad, Close) and "write id of 5 bytes" in bad.reason
    (cut,) = Connection().receive(_v1_frame(b"\x01\xff", b""))
    assert isinstance(cut, Close) and "tagged fields" in cut.reason


def test_answers_to_a_flexible_version_have_response_header_v1() -> None:
    result = private.PurgePendingResponse(results=())
    new = private.encode_response(4, private.PURGE_PENDING, result, version=1)
    old = private.encode_response(4, private.PURGE_PENDING, result, version=0)
    # After the correlation id, an empty tagged-field section; the size grows by it.
    assert new == struct.pack(">i", len(old) - 3) + old[4:8] + b"\0" + old[8:]
    assert private.decode_response(private.PURGE_PENDING, new[4:], 1)[2] == result
    assert private.decode_response(private.PURGE_PENDING, old[4:], 0)[2] == result


# ---------------------------------------------------------------------- through a server


def test_the_server_advertises_the_flexible_versions(tmp_path: Path) -> None:
    async def run(address: str) -> None:
        async with await AdminClient.connect(address) as client:
            versions = await client.api_versions()
            for api in WRITE_APIS:
                assert versions[api.key] == (0, 1), api.name
                assert client.version(api.key) == 1

    with running_server(tmp_path / "log", run_scheduler=False) as server:
        asyncio.run(run(server.address))


Step = Callable[[AdminClient, bytes | None], Awaitable[Any]]


def _call(api: private.PrivateApi, request: Any) -> Step:
    async def step(client: AdminClient, write_id: bytes | None) -> Any:
        return await client.call(api, request, write_id=write_id)

    return step


async def _each_write_twice(address: str, log_dir: Path) -> list[tuple[str, Any]]:
    """Every private write API, each sent twice with one write id: (API, answer) per write."""
    answers: list[tuple[str, Any]] = []
    sequence = 100
    async with await AdminClient.connect(address) as client:

        async def twice(api: private.PrivateApi, request: Any) -> Any:
            nonlocal sequence
            sequence += 1
            write_id = codec.write_id_bytes(CLIENT, sequence)
            first = await client.call(api, request, write_id=write_id)
            end = _end(log_dir)
            again = await client.call(api, request, write_id=write_id)
            assert again == first, api.name
            assert _end(log_dir) == end, f"{api.name}'s retry appended entries"
            answers.append((api.name, first))
            return first

        def pending(topic: str, count: int, delay_ms: int) -> private.DeletePartitions:
            reduction = DeletePartitionsTopic(
                topic=TopicRef(name=topic), count=count, delay_ms=delay_ms
            )
            return private.DeletePartitions(topics=(reduction,))

        await twice(private.REGISTER_BROKER, RegisterBroker(broker_id=5))
        await twice(
            private.CHANGE_BROKER, private.ChangeBroker(broker_id=5, action=BrokerAction.FENCE)
        )
        await twice(private.CREATE_NAMESPACE, CreateNamespace(name="team"))
        await client.create_topics([CreatableTopic(name="t", num_partitions=4)])
        cluster = ConfigResource(type=ConfigResourceType.BROKER, name="")
        await client.alter_configs(cluster, {"delete.topic.partition.enable": "true"})
        await twice(private.MOVE_TOPIC, MoveTopic(topic=TopicRef(name="t"), to_namespace="team"))
        await twice(private.DELETE_PARTITIONS, pending("team:t", 3, 3_600_000))
        cancel = private.CancelPartitionDeletions(
            topics=(CancelPartitionDeletion(topic=TopicRef(name="team:t")),)
        )
        await twice(private.CANCEL_PARTITION_DELETIONS, cancel)
        await client.call(private.DELETE_PARTITIONS, pending("team:t", 2, 1))
        time.sleep(0.01)  # the purge time (1 ms after) has passed
        # The retried check is answered with the first step (mode NONE), not run again: run
        # again it would take the next step at once (the removal) without waiting a check.
        (purged,) = (await twice(private.PURGE_PENDING, private.PurgePending())).results
        assert purged.step == PurgeStep.MODE_NONE
        deleted = await twice(
            private.DELETE_NAMESPACE, DeleteNamespace(name="team", recursive=True)
        )
        assert deleted.topics == ("team:t",)
    return answers


def test_each_private_write_sent_twice_with_its_id_is_applied_once(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    with running_server(log_dir, run_scheduler=False) as server:
        answers = asyncio.run(_each_write_twice(server.address, log_dir))
    assert sorted(name for name, _ in answers) == sorted(api.name for api in WRITE_APIS)
    # One note per write, in its own batch: the API and the answer the retry got.
    notes = {n.sequence: n for n in _notes(log_dir) if n.client_id.bytes == CLIENT}
    assert [private.PRIVATE_APIS[n.api_key].name for n in notes.values()] == [
        name for name, _ in answers
    ]


async def _create_through(proxy_address: str, lose: Callable[[], None]) -> Any:
    async with await AdminClient.connect(proxy_address, timeout_ms=10_000) as client:
        lose()
        return await client.create_namespace("team")


def test_a_private_write_whose_answer_is_lost_is_retried_and_applied_once(
    tmp_path: Path,
) -> None:
    log_dir = tmp_path / "log"
    with running_server(log_dir, run_scheduler=False) as server, proxy_loop() as proxies:
        port = int(server.address.rsplit(":", 1)[1])
        proxy = proxies.proxy(port)
        result = asyncio.run(_create_through(f"127.0.0.1:{proxy.port}", proxy.lose_next_answer))
        assert proxy.answer_lost.is_set()
    # The first attempt's answer: run again, the creation would have been refused (it exists).
    assert result.created == ("team",)
    assert _namespaces(log_dir) == ["team"]
    assert [n.api_key for n in _notes(log_dir)] == [private.CREATE_NAMESPACE.key]


def test_a_server_that_speaks_only_v0_gets_v0_once_without_an_id(tmp_path: Path) -> None:
    async def run(address: str) -> None:
        async with await AdminClient.connect(address) as client:
            # What ApiVersions negotiates with an older server: v0 of our write APIs only.
            for api in WRITE_APIS:
                client._versions[api.key] = (0, 0)
            assert (await client.create_namespace("old")).created == ("old",)
            with pytest.raises(ClientError, match="no tagged fields"):
                await client.call(
                    private.CREATE_NAMESPACE,
                    CreateNamespace(name="x"),
                    write_id=codec.write_id_bytes(CLIENT, 1),
                )

    log_dir = tmp_path / "log"
    with running_server(log_dir, run_scheduler=False) as server:
        asyncio.run(run(server.address))
    assert _namespaces(log_dir) == ["old"]
    assert _notes(log_dir) == []  # v0 carried no id: the server noted nothing


def test_the_cli_through_a_server_notes_its_private_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_dir = tmp_path / "log"
    with running_server(log_dir, run_scheduler=False) as server:
        code = main(
            ["--bootstrap-server", server.address, "namespaces", "create", "--namespace", "n"]
        )
    assert code == 0, capsys.readouterr().err
    assert [n.api_key for n in _notes(log_dir)] == [private.CREATE_NAMESPACE.key]
