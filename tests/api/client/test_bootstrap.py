"""A bootstrap list with a hung server first: the client leaves it for the next (issue 54, #10).

A hung server here is a socket that accepts and never answers (what a stopped process's
kernel does). Before the fix the client waited its whole request timeout on it; the tests give
it a 10-minute request timeout, so only a setup deadline gets them past the hung server within
their generous 120 s.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from api.client.bootstrap import connect_bootstrap
from api.client.connection import ClientConnection, ClientError, ConnectionSetupTimeout
from api.security.client_config import ClientSecurity
from replay.controller.commands import CreatableTopic
from tests.support.server_quorum import started_quorum
from tests.support.server_thread import running_server

PATIENT_MS = 600_000
"""A request timeout no test waits out."""
WAIT_S = 120.0
"""Generous: the setup deadline is 2 s."""


@dataclass
class Hung:
    """A server that accepts connections and never answers; counts those the client closed."""

    address: str = ""
    accepted: int = 0
    closed_by_client: asyncio.Event = field(default_factory=asyncio.Event)


@asynccontextmanager
async def hung_server() -> AsyncIterator[Hung]:
    hung = Hung()

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hung.accepted += 1
        while await reader.read(65536):
            pass  # requests read and never answered
        hung.closed_by_client.set()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    hung.address = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        yield hung
    finally:
        server.close()


def test_a_hung_first_server_is_abandoned_and_the_write_goes_to_the_next(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path / "log", brokers=1) as server:
        healthy = server.address

        async def run() -> tuple[str | None, Hung]:
            async with hung_server() as hung:
                client = await asyncio.wait_for(
                    connect_bootstrap(f"{hung.address},{healthy}", timeout_ms=PATIENT_MS),
                    WAIT_S,
                )
                try:
                    await asyncio.wait_for(hung.closed_by_client.wait(), WAIT_S)
                    await client.create_namespace("after-the-hung-one")
                    return client.address, hung
                finally:
                    await client.close()

        address, hung = asyncio.run(run())
        assert address == healthy
        assert hung.accepted == 1 and hung.closed_by_client.is_set()
        assert server.service.image.namespaces.exists("after-the-hung-one")


def test_the_setup_deadline_fails_a_hung_server_with_its_key_named() -> None:
    async def run() -> str:
        async with hung_server() as hung:
            with pytest.raises(ConnectionSetupTimeout) as raised:
                await asyncio.wait_for(
                    ClientConnection.connect(
                        hung.address, timeout_ms=PATIENT_MS, setup_timeout_ms=200
                    ),
                    WAIT_S,
                )
            await asyncio.wait_for(hung.closed_by_client.wait(), WAIT_S)
            return str(raised.value)

    message = asyncio.run(run())
    assert "socket.connection.setup.timeout.ms" in message and "200 ms" in message


def test_the_client_configs_setup_timeout_is_used_then_each_is_tried_patiently() -> None:
    async def run() -> tuple[str, int, int]:
        async with hung_server() as first, hung_server() as second:
            with pytest.raises(ClientError) as raised:
                await asyncio.wait_for(
                    connect_bootstrap(
                        f"{first.address},{second.address}",
                        timeout_ms=500,  # the patient pass: each gets the request timeout
                        security=ClientSecurity(setup_timeout_ms=300),
                    ),
                    WAIT_S,
                )
            return str(raised.value), first.accepted, second.accepted

    message, first, second = asyncio.run(run())
    assert "within 300 ms" in message and "no server of the bootstrap list answered" in message
    assert (first, second) == (2, 2)  # in time, then patiently


@pytest.mark.asyncio
async def test_a_reader_is_placed_away_from_the_leader_and_a_writer_at_it(
    tmp_path: Path,
) -> None:
    async with started_quorum(tmp_path) as quorum:
        leader = await quorum.leader()
        assert leader.quorum_node is not None
        leader_id = leader.quorum_node.node_id
        others = [s for s in quorum.servers.values() if s is not leader]
        # The leader listed first, then last: a reader ends elsewhere either way.
        for listed in ([leader, *others], [*others, leader]):
            text = ",".join(quorum.address(s) for s in listed)
            async with await connect_bootstrap(text, reads_only=True) as reader:
                assert int((await reader.metadata([])).controller_id) != leader_id
            async with await connect_bootstrap(text) as writer:
                assert int((await writer.metadata([])).controller_id) == leader_id
        # The leader alone: the reader stays with it (reads work on any node).
        async with await connect_bootstrap(quorum.address(leader), reads_only=True) as alone:
            assert int((await alone.metadata([])).controller_id) == leader_id


@pytest.mark.asyncio
async def test_a_reader_is_not_placed_at_a_follower_left_behind(tmp_path: Path) -> None:
    async with started_quorum(tmp_path) as quorum:
        leader = await quorum.leader()
        behind, current = (s for s in quorum.servers.values() if s is not leader)
        assert behind.quorum_node is not None
        quorum.cluster.network.isolate(behind.quorum_node.node_id)
        async with await connect_bootstrap(quorum.address(leader)) as writer:
            topics = [
                CreatableTopic(name=f"t{n}", num_partitions=20, replication_factor=1)
                for n in range(60)
            ]
            assert all(r.outcome.ok for r in await writer.create_topics(topics))
        text = ",".join(quorum.address(s) for s in (leader, behind, current))
        async with await connect_bootstrap(text, reads_only=True) as reader:
            assert reader.address == quorum.address(current)
