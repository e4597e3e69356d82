"""A single server answers DescribeQuorum as a quorum of one voter, itself the leader.

Requests are kio-encoded frames on a real connection (and the `AdminClient` as the CLI uses
it); kafka-python's `describe_metadata_quorum` is in tests/interop/test_kafka_clients.py.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from api.client.admin import AdminClient
from api.client.connection import ClientError, RemoteError
from api.protocol import codec
from api.protocol.quorum.apis import (
    DESCRIBE_QUORUM_KEY,
    QUORUM_VERSIONS,
    VOTE_KEY,
    QuorumRequest,
    QuorumResponse,
)
from api.protocol.quorum.errors import CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST
from api.protocol.quorum.messages import DescribeQuorumResponse, ErrorCode
from api.protocol.quorum.responses import (
    decode_response,
)
from api.server.server import MetadataServer
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.authorizer import CLUSTER_NAME, AuthorizerConfig
from replay.controller.commands import ControllerResult, CreatableTopic, RegisterBroker
from tests.support.protocol_frames import exchange_frames

NODE_ID = 3
METADATA_PARTITION = [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}]


@asynccontextmanager
async def single_server(
    log_dir: Path,
    *,
    authorizer: AuthorizerConfig | None = None,
    acls: Sequence[AccessControlEntryRecord] = (),
    quorum: Any = None,
) -> AsyncIterator[MetadataServer]:
    """`mlog serve` of one node (no quorum unless `quorum`) over a log with one topic."""
    service = MetadataService.open(log_dir)
    request = RegisterBroker(broker_id=1)
    service.execute(partial(service.controller.register_broker, request=request))
    (created,) = service.execute(
        lambda image: service.controller.create_topics(
            image, [CreatableTopic(name="t", num_partitions=2, replication_factor=1)]
        )
    )
    assert created.outcome.ok
    if acls:
        service.execute(lambda image: ControllerResult(records=tuple(acls), response=None))
    server = MetadataServer(
        service,
        host="127.0.0.1",
        port=0,
        node_id=NODE_ID,
        cluster_id="test-cluster",
        authorizer=authorizer,
        quorum=quorum,
        quorum_listeners=None if quorum is None else ["PLAINTEXT"],
        controller_principals=None if quorum is None else ["User:controller"],
        run_scheduler=False,
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _describe_frame(version: int, topics: list[dict[str, Any]] | None = None) -> bytes:
    body = codec.build(
        codec.request_class(DESCRIBE_QUORUM_KEY, version),
        topics=METADATA_PARTITION if topics is None else topics,
    )
    return codec.encode_request(body, correlation_id=version + 10, client_id="test")


def _served(frame: bytes | None) -> dict[int, tuple[int, int]]:
    assert frame is not None
    _, body = codec.decode_response(18, 3, frame)
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}


API_VERSIONS = codec.encode_request(
    codec.build(codec.request_class(18, 3), client_software_name="t", client_software_version="1"),
    correlation_id=1,
)


async def test_a_single_server_describes_itself_as_the_leader_of_one_voter(
    tmp_path: Path,
) -> None:
    async with single_server(tmp_path / "log") as server:
        log = server.service.log
        low, high = QUORUM_VERSIONS[DESCRIBE_QUORUM_KEY]
        before = int(time.time() * 1000)
        versions, *answers = await exchange_frames(
            server.port, [API_VERSIONS, *(_describe_frame(v) for v in range(low, high + 1))]
        )
        after = int(time.time() * 1000)
        served = _served(versions)
        assert served[DESCRIBE_QUORUM_KEY] == (0, 2)
        # Nothing a voter speaks to another: a client tells a single server by their absence.
        assert not (set(QUORUM_VERSIONS) - {DESCRIBE_QUORUM_KEY}) & set(served)
        for version, frame in zip(range(low, high + 1), answers, strict=True):
            assert frame is not None
            described = decode_response(frame, api_key=DESCRIBE_QUORUM_KEY, version=version)
            assert isinstance(described, DescribeQuorumResponse)
            assert described.error_code is ErrorCode.NONE
            assert (described.leader_id, described.leader_epoch) == (NODE_ID, log.epoch)
            assert described.high_watermark == log.end_offset > 0
            assert described.observers == ()
            (voter,) = described.current_voters
            assert (voter.replica_id, voter.log_end_offset) == (NODE_ID, log.end_offset)
            if version == 0:  # v0 has no timestamps
                assert voter.last_fetch_timestamp == voter.last_caught_up_timestamp == -1
            else:
                assert before <= voter.last_fetch_timestamp <= after
                assert voter.last_caught_up_timestamp == voter.last_fetch_timestamp


async def test_the_high_watermark_follows_the_log(tmp_path: Path) -> None:
    async with single_server(tmp_path / "log") as server:
        async with await AdminClient.connect(f"127.0.0.1:{server.port}") as client:
            first = await client.describe_quorum()
            (created,) = await client.create_topics([CreatableTopic(name="u", num_partitions=3)])
            assert created.outcome.ok
            second = await client.describe_quorum()
        assert second.high_watermark > first.high_watermark
        assert second.high_watermark == server.service.log.end_offset
        assert second.current_voters[0].log_end_offset == second.high_watermark


async def test_another_partition_is_refused_and_the_others_quorum_apis_stay_unknown(
    tmp_path: Path,
) -> None:
    other = [{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 1}]}]
    vote = codec.encode_request(
        codec.build(codec.request_class(VOTE_KEY, 2), cluster_id=None, voter_id=1, topics=[]),
        correlation_id=5,
    )
    async with single_server(tmp_path / "log") as server:
        wrong, good, closed = await exchange_frames(
            server.port, [_describe_frame(2, other), _describe_frame(2), vote]
        )
    assert wrong is not None
    _, body = codec.decode_response(DESCRIBE_QUORUM_KEY, 2, wrong)
    assert int(body.error_code) == INVALID_REQUEST
    assert "__cluster_metadata-1" in body.error_message
    assert good is not None  # the refusal kept the connection open
    assert closed is None  # Vote: an API this server does not serve closes it


def _cluster_acl(operation: AclOperation) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=Uuid.random(),
        resource_type=ResourceType.CLUSTER,
        resource_name=CLUSTER_NAME,
        pattern_type=PatternType.LITERAL,
        principal="User:ANONYMOUS",
        host="*",
        operation=operation,
        permission_type=AclPermissionType.ALLOW,
    )


async def test_with_an_authorizer_describe_on_the_cluster_is_needed(tmp_path: Path) -> None:
    config = AuthorizerConfig(super_users=frozenset({"User:admin"}))
    # Allowed to create topics on the cluster, not to describe it: refused.
    barely = [_cluster_acl(AclOperation.CREATE)]
    async with single_server(tmp_path / "a", authorizer=config, acls=barely) as server:
        (refused,) = await exchange_frames(server.port, [_describe_frame(2)])
    assert refused is not None
    _, body = codec.decode_response(DESCRIBE_QUORUM_KEY, 2, refused)
    assert int(body.error_code) == CLUSTER_AUTHORIZATION_FAILED
    assert "User:ANONYMOUS may not Describe the cluster" in body.error_message
    assert list(body.topics) == []
    # DESCRIBE on the cluster (as Kafka asks of DescribeQuorum): answered.
    allowed = [_cluster_acl(AclOperation.DESCRIBE)]
    async with single_server(tmp_path / "b", authorizer=config, acls=allowed) as server:
        (answer,) = await exchange_frames(server.port, [_describe_frame(2)])
    assert answer is not None
    described = decode_response(answer, api_key=DESCRIBE_QUORUM_KEY, version=2)
    assert isinstance(described, DescribeQuorumResponse)
    assert described.leader_id == NODE_ID


async def test_the_admin_client_refuses_without_describe(tmp_path: Path) -> None:
    config = AuthorizerConfig(super_users=frozenset({"User:admin"}))
    async with (
        single_server(tmp_path / "log", authorizer=config) as server,
        await AdminClient.connect(f"127.0.0.1:{server.port}") as client,
    ):
        with pytest.raises(RemoteError) as refused:
            await client.describe_quorum()
    assert refused.value.error_code == CLUSTER_AUTHORIZATION_FAILED


class _OtherVoters:
    """A quorum endpoint (the server then serves every quorum API); nothing is sent to it."""

    async def handle(self, sender_id: int, message: QuorumRequest) -> QuorumResponse:
        raise AssertionError(f"unexpected {message!r}")


async def test_connect_controller_asks_for_the_leader_only_on_a_quorums_node(
    tmp_path: Path,
) -> None:
    async with single_server(tmp_path / "single") as server:
        address = f"127.0.0.1:{server.port}"
        client = await AdminClient.connect_controller(address)
        async with client:
            # A single server is its own controller: no voters to learn, nobody else asked.
            assert client.address == address and client.bootstrap == []
            described = await client.describe_quorum()
            assert [v.replica_id for v in described.current_voters] == [NODE_ID]
    async with single_server(tmp_path / "node", quorum=_OtherVoters()) as server:
        address = f"127.0.0.1:{server.port}"
        client = await AdminClient.connect_controller(address)
        async with client:
            # Vote is served: a quorum's node, whose Metadata names the leader (itself here)
            # and the voters, kept for retries.
            assert client.address == address and client.bootstrap[0] == address


async def test_connect_controller_leaves_a_node_that_closed_the_connection_and_is_gone(
    tmp_path: Path,
) -> None:
    # A stopping leader answers ApiVersions, closes the connection before the Metadata that
    # names the next leader, and exits. The client used to ask the dead connection until its
    # wait ended and then kept it; now it reconnects, is refused, and says so (its caller
    # tries the next server).
    async with single_server(tmp_path / "node", quorum=_OtherVoters()) as server:

        async def stopping_node(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            node_reader, node_writer = await asyncio.open_connection("127.0.0.1", server.port)
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            node_writer.write(struct.pack(">i", size) + await reader.readexactly(size))
            (size,) = struct.unpack(">i", await node_reader.readexactly(4))
            writer.write(struct.pack(">i", size) + await node_reader.readexactly(size))
            await writer.drain()
            listener.close()  # gone: the next connection is refused
            writer.close()
            node_writer.close()

        listener = await asyncio.start_server(stopping_node, "127.0.0.1", 0)
        address = f"127.0.0.1:{listener.sockets[0].getsockname()[1]}"
        with pytest.raises(ClientError, match="cannot connect"):
            await AdminClient.connect_controller(address)
        await listener.wait_closed()
