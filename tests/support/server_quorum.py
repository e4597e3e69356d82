"""A dynamic quorum of in-process `MetadataServer`s: what forwarding needs, in one event loop.

The quorum's own messages go over `quorum_harness.LocalNetwork`; each node also has a real
`MetadataServer` on 127.0.0.1, set up as docs/security.md sets up a quorum: a client
listener (CLIENTS, PLAINTEXT) and an mTLS CONTROLLER listener at its voter address (free
ports, picked first; `controller.listener.names`, certificates of `controller_certs.py`).
Clients reach every node over TCP, and a follower forwards to the leader's CONTROLLER
listener with the controllers' certificate, as `mlog serve` does.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from api.raft.core.config import VoterAddress
from api.raft.core.voters import Voter, VoterSet
from api.raft.node import QuorumNode
from api.raft.voter_blocks import write_bootstrap_block
from api.server.server import MetadataServer, ServerListener
from api.service.replicated import ReplicatedService
from metadata_log.replica_log import ReplicaLog
from replay.controller.controller import Controller
from tests.support.controller_certs import CONTROLLER_PRINCIPAL, make_controller_pki
from tests.support.quorum_harness import STEADY, Cluster, directory_of, register
from tests.support.quorum_processes import free_ports


class ServerQuorum:
    """`size` voters of a dynamic quorum, each served by a `MetadataServer`; more may join."""

    def __init__(self, root: Path, size: int = 3, **server_options: Any) -> None:
        # Static at first: the voters' ports come next. Elections 10x slower than the
        # harness's (the rest 2x): a follower of these tests stays one on a busy host.
        self.cluster = Cluster(root, size, **STEADY)
        self.server_options = server_options
        self.pki = make_controller_pki(root / "pki")
        """The controllers' certificates (`pki.controller_client()`: a controller's client)."""
        for node_id, port in zip(self.cluster.ids, free_ports(size), strict=True):
            self.cluster.addresses[node_id] = VoterAddress(host="127.0.0.1", port=port)
        voters = VoterSet.of(
            [
                Voter(id=i, directory_id=directory_of(i), host=a.host, port=a.port)
                for i, a in self.cluster.addresses.items()
            ]
        )
        for node_id in self.cluster.ids:
            log = ReplicaLog.open(root / str(node_id) / "log")
            try:
                write_bootstrap_block(log, voters)
            finally:
                log.close()
        self.cluster.dynamic = True
        self.servers: dict[int, MetadataServer] = {}
        self.added: dict[int, Voter] = {}
        """The nodes `add` made, as AddRaftVoter names them."""

    def add(self, node_id: int) -> Voter:
        """A new node (formatted empty, an observer once started); its voter for AddRaftVoter."""
        (self.cluster.root / str(node_id)).mkdir(parents=True, exist_ok=True)
        (port,) = free_ports(1)
        self.cluster.addresses[node_id] = VoterAddress(host="127.0.0.1", port=port)
        self.cluster.ids.append(node_id)
        voter = Voter(id=node_id, directory_id=directory_of(node_id), host="127.0.0.1", port=port)
        self.added[node_id] = voter
        return voter

    async def start(self, node_id: int) -> MetadataServer:
        """Start a node's server (which starts the node)."""
        cluster = self.cluster
        service = ReplicatedService.open_replicated(
            cluster.root / str(node_id) / "log", controller=Controller(rng=random.Random(node_id))
        )
        node = QuorumNode(
            service,
            cluster.config(node_id),
            state_dir=cluster.root / str(node_id),
            transport=cluster.network.transport(node_id),
            rng=random.Random(node_id),
            dynamic=True,
        )
        cluster.network.nodes[node_id] = node
        server = MetadataServer(
            service,
            listeners=[
                ServerListener(name="CLIENTS", host="127.0.0.1", port=0),
                self.pki.server_listener(port=cluster.addresses[node_id].port),
            ],
            node_id=node_id,
            quorum_node=node,
            quorum_listeners=["CONTROLLER"],
            controller_principals=[CONTROLLER_PRINCIPAL],
            controller_security=self.pki.controller_client(),
            run_scheduler=False,
            **self.server_options,
        )
        await server.start()
        self.servers[node_id] = server
        return server

    async def start_all(self) -> None:
        for node_id in self.cluster.ids:
            await self.start(node_id)

    async def leader(self) -> MetadataServer:
        """The server of the node that leads, once one does."""
        node = await self.cluster.leader()
        return self.servers[node.node_id]

    async def follower(self) -> MetadataServer:
        """The server of a voter that does not lead (the leader is known to it)."""
        leader = await self.leader()
        for server in self.servers.values():
            node = server.quorum_node
            if server is not leader and node is not None and node.core.is_voter:
                return server
        raise AssertionError("no follower")

    def address(self, server: MetadataServer, listener: str = "CLIENTS") -> str:
        """Where `server`'s `listener` (CLIENTS or CONTROLLER) is reached."""
        port = next(item.port for item in server.listeners if item.name == listener)
        return f"127.0.0.1:{port}"

    async def stop_all(self) -> None:
        for node_id in list(self.servers):
            server = self.servers.pop(node_id)
            self.cluster.network.nodes.pop(node_id, None)
            await server.stop()


@asynccontextmanager
async def started_quorum(root: Path, **server_options: Any) -> AsyncIterator[ServerQuorum]:
    """A `ServerQuorum` of three, started, a leader elected, broker 1 registered; stopped after.

    The quorum's network is healed before the stop (a test may have cut a node off).
    """
    quorum = ServerQuorum(root, **server_options)
    await quorum.start_all()
    try:
        leader = await quorum.leader()
        assert leader.quorum_node is not None
        await register(leader.quorum_node, 1)
        yield quorum
    finally:
        quorum.cluster.network.heal()
        await quorum.stop_all()
