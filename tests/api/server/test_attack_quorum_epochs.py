"""Issue 54, finding 1: no quorum request stops a node or takes its epoch out of range.

Three real `QuorumNode`s over real logs (tests/support/quorum_harness.py), each served by a
real `MetadataServer` on 127.0.0.1 as docs/security.md sets a quorum up: a client listener
(OPEN, PLAINTEXT) and an mTLS CONTROLLER listener serving the Raft APIs to the controllers'
certificate only (`api.server.edge`). The attacker holds that certificate (a controller's
credentials stolen): the Raft core itself must refuse what the edge lets through. Vote and
BeginQuorumEpoch at epochs 2^31-1 and 10^9, in a non-voter's name and in each voter's name,
sent to every node's CONTROLLER listener while a writer keeps writing: every request is
answered on an open connection, no node stops, the leader and its epoch stay, the writes go
on and every node holds the same log afterwards. Before the fix, 2^31-1 was stored and the
node stopped on its next election; 10^9 in a voter's name deposed the leader. Sent to the
client listener, the same requests are refused by the edge (the connection closes).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from api.protocol.quorum.apis import (
    BEGIN_QUORUM_EPOCH_KEY,
    VOTE_KEY,
    send_version,
)
from api.protocol.quorum.errors import CLUSTER_AUTHORIZATION_FAILED, RaftWireRefusal
from api.protocol.quorum.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    VoteRequest,
    VoteResponse,
)
from api.protocol.quorum.requests import (
    encode_request,
)
from api.protocol.quorum.responses import (
    decode_response,
)
from api.raft.node import QuorumNode
from api.raft.transport.endpoint import NodeEndpoint
from api.server.server import MetadataServer, ServerListener
from tests.support.controller_certs import CONTROLLER_PRINCIPAL, ControllerPki, make_controller_pki
from tests.support.protocol_frames import exchange_frames
from tests.support.quorum_attacks import tls_context
from tests.support.quorum_harness import (
    STEADY,
    Cluster,
    Timers,
    create_topic_at_leader,
    register,
)

ATTACK_EPOCHS = (2**31 - 1, 10**9)
NON_VOTER = 99


@dataclass(frozen=True, slots=True, kw_only=True)
class Ports:
    """A node's server's ports: its client listener's and its CONTROLLER listener's."""

    client: int
    controller: int


@asynccontextmanager
async def served(
    cluster: Cluster, nodes: list[QuorumNode], pki: ControllerPki
) -> AsyncIterator[dict[int, Ports]]:
    """A server on 127.0.0.1 for each node, its quorum APIs answered by the node: id -> ports.

    On exit the nodes stop, then their servers (which close the nodes' services).
    """
    async with AsyncExitStack() as stack:
        ports: dict[int, Ports] = {}
        for node in nodes:
            server = MetadataServer(
                node.service,
                listeners=[
                    ServerListener(name="OPEN", host="127.0.0.1", port=0),
                    pki.server_listener(),
                ],
                node_id=node.config.node_id,
                quorum=NodeEndpoint(node, listener_name="CONTROLLER"),
                quorum_listeners=["CONTROLLER"],
                controller_principals=[CONTROLLER_PRINCIPAL],
                run_scheduler=False,
            )
            await server.start()
            stack.push_async_callback(server.stop)
            port = {item.name: item.port for item in server.listeners}
            ports[node.config.node_id] = Ports(client=port["OPEN"], controller=port["CONTROLLER"])
        try:
            yield ports
        finally:
            for node in nodes:
                cluster.network.nodes.pop(node.config.node_id, None)
                await node.aclose()


def _attacks(target: int, voters: list[int]) -> list[tuple[int, bytes]]:
    """(api key, frame): Vote (real, pre-) and BeginQuorumEpoch in every name but the target's."""
    frames: list[tuple[int, bytes]] = []
    correlation = 100
    for epoch in ATTACK_EPOCHS:
        for sender in [NON_VOTER, *(v for v in voters if v != target)]:
            for pre_vote in (False, True):
                correlation += 1
                vote = VoteRequest(
                    correlation_id=correlation,
                    replica_epoch=epoch,
                    replica_id=sender,
                    last_offset_epoch=min(epoch, 2**31 - 2),
                    last_offset=2**40,
                    pre_vote=pre_vote,
                )
                frames.append((VOTE_KEY, encode_request(vote, destination=target, cluster_id=None)))
            correlation += 1
            begin = BeginQuorumEpochRequest(
                correlation_id=correlation, leader_id=sender, leader_epoch=epoch
            )
            frames.append(
                (BEGIN_QUORUM_EPOCH_KEY, encode_request(begin, destination=target, cluster_id=None))
            )
    return frames


def _check_answer(api_key: int, frame: bytes | None) -> None:
    """Answered, on an open connection: a refusal, or an answer granting nothing."""
    assert frame is not None, "the connection was closed"
    try:
        answer = decode_response(frame, api_key=api_key, version=send_version(api_key))
    except RaftWireRefusal as refusal:
        # Refused past the edge (it admits the controllers' certificate): by the core's checks.
        assert refusal.error_code not in (0, CLUSTER_AUTHORIZATION_FAILED), refusal
        return
    if isinstance(answer, VoteResponse):
        assert not answer.vote_granted and answer.leader_epoch < 10**9
    else:
        assert isinstance(answer, BeginQuorumEpochResponse)
        assert answer.error_code != 0 and answer.leader_epoch < 10**9


async def test_forged_epochs_stop_no_node_and_depose_no_leader(tmp_path: Path) -> None:
    pki = make_controller_pki(tmp_path / "pki")
    stolen = tls_context(str(pki.ca), str(pki.controller))
    # The test asserts the leader and its epoch stay: no election may come from a loaded host
    # (`FAST`'s 300 ms fetch timeout passed beside another suite and a follower stood). A
    # forged epoch acts at once, whatever the timers.
    timers: Timers = {**STEADY, "fetch_timeout_ms": 60_000}
    cluster = Cluster(tmp_path / "quorum", **timers)
    nodes = await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        await create_topic_at_leader(cluster, "before")
        epoch = leader.core.epoch
        async with served(cluster, nodes, pki) as ports:
            for round_ in range(3):
                for node in nodes:
                    node_id = node.config.node_id
                    attacks = _attacks(node_id, cluster.ids)
                    frames = [f for _, f in attacks]
                    # On the client listener the edge refuses each: the connection closes.
                    for frame in frames:
                        assert await exchange_frames(ports[node_id].client, [frame]) == [None]
                    answers = await exchange_frames(ports[node_id].controller, frames, stolen)
                    for (api_key, _), answer in zip(attacks, answers, strict=True):
                        _check_answer(api_key, answer)
                    await create_topic_at_leader(cluster, f"during-{round_}-{node_id}")
                # Let elections fire if any attack got through (a stopped node shows then).
                await asyncio.sleep(1.0)
            for node in nodes:
                assert node.failed is None, node.failed
                assert node.core.epoch < 10**9
            assert (await cluster.leader()) is leader and leader.core.epoch == epoch
            await create_topic_at_leader(cluster, "after")
            await cluster.agreed()
            ends = {node.core.log.end_offset for node in nodes}
            images = {node.service.image.provenance.offset for node in nodes}
            assert len(ends) == 1 and len(images) == 1
            assert all(n.service.image.topics.get_by_name("after") is not None for n in nodes)
    finally:
        await cluster.stop_all()
