"""Envelope (KIP-590) on the leader: only controllers send one, and the client's principal decides.

A real `MetadataServer` with a quorum endpoint (so its CONTROLLER listener serves the quorum
APIs and Envelope), `alice` as the controllers' principal (`controller.principals`) and an
authorizer whose super users are `alice` and `bob`. Envelopes are sent over a SCRAM login as a
controller would send them (in process: `mlog serve` requires mTLS there, `api.server.edge`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

from api.client.connection import ClientConnection
from api.protocol import codec
from api.protocol.quorum.apis import (
    QuorumRequest,
    QuorumResponse,
)
from api.raft.transport.links import controller_client_security
from api.server.forwarding import ENVELOPE_KEY, address_bytes
from api.server.server import MetadataServer, ServerListener
from api.service.service import MetadataService
from replay.controller.authorizer import AuthorizerConfig
from replay.controller.commands import RegisterBroker
from replay.controller.errors import ErrorCode
from tests.support.sasl_users import USERS, seed_users


class NoQuorum:
    """A quorum endpoint that is never asked (these tests send Envelopes only)."""

    async def handle(self, sender_id: int, message: QuorumRequest) -> QuorumResponse:
        raise AssertionError(f"unexpected quorum request {message!r}")


def _controller_login(user: str) -> dict[str, str]:
    module = "org.apache.kafka.common.security.scram.ScramLoginModule"
    password = USERS[user].replace("\\", "\\\\").replace('"', '\\"')
    return {
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,CLIENTS:PLAINTEXT",
        "sasl.mechanism.controller.protocol": "SCRAM-SHA-256",
        "listener.name.controller.scram-sha-256.sasl.jaas.config": (
            f'{module} required username="{user}" password="{password}";'
        ),
    }


@asynccontextmanager
async def leader_server(tmp_path: Path) -> AsyncIterator[MetadataServer]:
    """A server with a CONTROLLER (SCRAM) and a CLIENTS (PLAINTEXT) listener, alice super."""
    log_dir = tmp_path / "log"
    seed_users(log_dir)
    service = MetadataService.open(log_dir)
    service.execute(
        partial(service.controller.register_broker, request=RegisterBroker(broker_id=1))
    )
    server = MetadataServer(
        service,
        listeners=[
            ServerListener(
                name="CONTROLLER",
                security_protocol="SASL_PLAINTEXT",
                host="127.0.0.1",
                port=0,
                sasl_mechanisms=("SCRAM-SHA-256",),
            ),
            ServerListener(name="CLIENTS", host="127.0.0.1", port=0),
        ],
        authorizer=AuthorizerConfig(super_users=frozenset({"User:alice", "User:bob"})),
        quorum=NoQuorum(),
        quorum_listeners=["CONTROLLER"],
        controller_principals=["User:alice"],
        run_scheduler=False,
        failed_authentication_delay_ms=1,
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _create_topic_frame(name: str, write_id: bytes | None = None) -> bytes:
    """A client's CreateTopics v7 frame (without its size), as it would reach a follower."""
    body = codec.build(
        codec.request_class(19, 7),
        topics=[
            {
                "name": name,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        timeout=5000,
        validate_only=False,
    )
    frame = codec.encode_request(body, correlation_id=77, client_id="a-client", write_id=write_id)
    return frame[4:]


async def _envelope(
    server: MetadataServer, user: str, frame: bytes, principal: str, listener: str = "CONTROLLER"
) -> Any:
    port = next(item.port for item in server.listeners if item.name == listener)
    security = controller_client_security(_controller_login(user))
    async with await ClientConnection.connect(f"127.0.0.1:{port}", security=security) as conn:
        assert conn.speaks(ENVELOPE_KEY, 0)
        envelope = codec.build(
            codec.request_class(ENVELOPE_KEY, 0),
            request_data=frame,
            request_principal=principal.encode(),
            client_host_address=address_bytes("10.1.2.3"),
        )
        return await conn.send_entity(envelope)


def _inner_topic(answer: Any) -> Any:
    assert int(answer.error_code) == 0
    correlation_id, body = codec.decode_response(19, 7, bytes(answer.response_data))
    assert correlation_id == 77  # the client's own: the follower hands it back as it is
    return body.topics[0]


async def test_the_clients_principal_decides_not_the_controllers(tmp_path: Path) -> None:
    async with leader_server(tmp_path) as server:
        refused = _inner_topic(
            await _envelope(server, "alice", _create_topic_frame("t"), "User:carol")
        )
        assert int(refused.error_code) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        made = _inner_topic(
            await _envelope(server, "alice", _create_topic_frame("t"), "User:alice")
        )
        assert int(made.error_code) == 0
        assert "t" in server.service.image.topics.by_name


async def test_a_write_id_is_kept_across_the_hop(tmp_path: Path) -> None:
    write_id = codec.write_id_bytes(b"\x01" * 16, 0)
    frame = _create_topic_frame("once", write_id)
    async with leader_server(tmp_path) as server:
        first = _inner_topic(await _envelope(server, "alice", frame, "User:alice"))
        again = _inner_topic(await _envelope(server, "alice", frame, "User:alice"))
    assert int(first.error_code) == int(again.error_code) == 0  # not TOPIC_ALREADY_EXISTS
    assert first.topic_id == again.topic_id


async def test_only_a_controller_may_send_an_envelope_not_even_a_super_user(
    tmp_path: Path,
) -> None:
    async with leader_server(tmp_path) as server:
        answer = await _envelope(server, "bob", _create_topic_frame("t"), "User:alice")
        assert int(answer.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert "t" not in server.service.image.topics.by_name


async def test_an_envelope_carries_only_a_write(tmp_path: Path) -> None:
    metadata = codec.encode_request(
        codec.build(
            codec.request_class(3, 12),
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
        correlation_id=5,
    )[4:]
    async with leader_server(tmp_path) as server:
        read = await _envelope(server, "alice", metadata, "User:alice")
        assert int(read.error_code) == ErrorCode.INVALID_REQUEST
        garbage = await _envelope(server, "alice", b"\0\x13", "User:alice")
        assert int(garbage.error_code) == ErrorCode.INVALID_REQUEST
        no_principal = await _envelope(server, "alice", _create_topic_frame("t"), "nobody")
        assert int(no_principal.error_code) == ErrorCode.INVALID_REQUEST


async def test_envelope_is_not_served_on_a_clients_listener(tmp_path: Path) -> None:
    envelope = codec.build(
        codec.request_class(ENVELOPE_KEY, 0),
        request_data=_create_topic_frame("t"),
        request_principal=b"User:alice",
        client_host_address=address_bytes("127.0.0.1"),
    )
    async with leader_server(tmp_path) as server:
        port = next(item.port for item in server.listeners if item.name == "CLIENTS")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(codec.encode_request(envelope, correlation_id=1))
            assert await reader.read(4) == b""  # closed, as for any API it does not serve
        finally:
            writer.close()
        assert "t" not in server.service.image.topics.by_name
