"""Voter changes sent to a follower are forwarded to the leader: issue #54, finding 9.

Bootstrapped at a follower, `mlog quorum add-controller` / `remove-controller` were answered
NOT_LEADER_OR_FOLLOWER ("the leader is node 5") try after try: writes were forwarded, voter
changes were not. Now a follower sends AddRaftVoter and RemoveRaftVoter to the leader in an
Envelope, as writes go, and the leader authorizes the client's principal for them as its own
edge would (`api.server.edge`). They are served on the CONTROLLER listener only, to the
controllers' certificate or, with an authorizer, to an operator allowed ALTER on the cluster.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from api.client.admin import AdminClient
from api.client.connection import ClientConnection, RemoteError
from api.protocol import codec
from api.protocol.quorum.apis import (
    REMOVE_RAFT_VOTER_KEY,
    RemoveRaftVoterRequest,
    send_version,
)
from api.protocol.quorum.errors import CLUSTER_AUTHORIZATION_FAILED, RaftWireRefusal
from api.protocol.quorum.requests import (
    encode_request,
)
from api.protocol.quorum.responses import (
    decode_response,
)
from api.security.client_config import ClientSecurity
from api.server.forwarding import ENVELOPE_KEY, LEADER_WAIT_S, address_bytes
from api.server.server import MetadataServer
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.authorizer import CLUSTER_NAME, AuthorizerConfig
from replay.controller.commands import ControllerResult
from tests.support.server_quorum import ServerQuorum

pytestmark = pytest.mark.asyncio

NOT_CAUGHT_UP = "REQUEST_TIMED_OUT"
"""What the leader answers an AddRaftVoter for a node that has not caught up yet."""


async def _voters(quorum: ServerQuorum) -> set[int]:
    node = (await quorum.leader()).quorum_node
    assert node is not None
    return set(node.core.voters)


def _operator(quorum: ServerQuorum) -> ClientSecurity:
    """An operator's client: a certificate of the controllers' CA, as `User:mallory`."""
    return quorum.pki.client(quorum.pki.other_name_cert)


async def _at_controller_listener(
    quorum: ServerQuorum, server: MetadataServer, security: ClientSecurity | None = None
) -> AdminClient:
    """A client of `server`'s CONTROLLER listener (the controllers' certificate by default)."""
    return await AdminClient.connect(
        quorum.address(server, "CONTROLLER"),
        security=security or quorum.pki.controller_client(),
    )


async def _until_added(quorum: ServerQuorum, server: MetadataServer, node_id: int) -> None:
    """AddRaftVoter at `server` until the new node has caught up (generous deadline)."""
    voter = quorum.added[node_id]
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        async with await _at_controller_listener(quorum, server) as client:
            try:
                await client.add_raft_voter(
                    node_id,
                    directory_id=voter.directory_id,
                    host=voter.host,
                    port=voter.port,
                    timeout_ms=10_000,
                )
                return
            except RemoteError as exc:
                # Only "not caught up yet": never NOT_LEADER_OR_FOLLOWER from a follower.
                assert NOT_CAUGHT_UP in str(exc), exc
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.1)


async def test_add_and_remove_controller_through_a_follower(tmp_path: Path) -> None:
    quorum = ServerQuorum(tmp_path)
    await quorum.start_all()
    try:
        follower = await quorum.follower()
        quorum.add(4)
        await quorum.start(4)
        await _until_added(quorum, follower, 4)
        assert await _voters(quorum) == {1, 2, 3, 4}
        assert follower.forwarder is not None and follower.forwarder.forwarded >= 1
        async with await _at_controller_listener(quorum, follower) as client:
            await client.remove_raft_voter(4, directory_id=quorum.added[4].directory_id)
        assert await _voters(quorum) == {1, 2, 3}
    finally:
        await quorum.stop_all()


def _allow_alter(principal: str) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=Uuid.random(),
        resource_type=ResourceType.CLUSTER,
        resource_name=CLUSTER_NAME,
        pattern_type=PatternType.LITERAL,
        principal=principal,
        host="*",
        operation=AclOperation.ALTER,
        permission_type=AclPermissionType.ALLOW,
    )


async def test_an_operator_allowed_alter_changes_the_voters_through_a_follower(
    tmp_path: Path,
) -> None:
    quorum = ServerQuorum(tmp_path, authorizer=AuthorizerConfig())
    await quorum.start_all()
    try:
        follower = await quorum.follower()
        leader = await quorum.leader()
        (third,) = set(quorum.servers) - {follower.node_id, leader.node_id}
        # Without ALTER, the follower's edge refuses it: nothing is forwarded.
        async with await _at_controller_listener(quorum, follower, _operator(quorum)) as client:
            with pytest.raises(RemoteError, match="CLUSTER_AUTHORIZATION_FAILED"):
                await client.remove_raft_voter(third)
        assert follower.forwarder is not None and follower.forwarder.forwarded == 0
        await leader.service.submit(
            lambda image: ControllerResult(records=(_allow_alter("User:mallory"),), response=None),
            principal="User:test",
        )
        await quorum.cluster.converged(leader.service.image.provenance.offset)
        async with await _at_controller_listener(quorum, follower, _operator(quorum)) as client:
            await client.remove_raft_voter(third)
        assert follower.forwarder.forwarded == 1
        assert await _voters(quorum) == {leader.node_id, follower.node_id}
    finally:
        await quorum.stop_all()


async def _forwarded_removal(
    quorum: ServerQuorum, leader: MetadataServer, voter: int, principal: str
) -> int:
    """A RemoveRaftVoter of `voter` in an Envelope naming `principal`, as a follower sends one
    to the leader (the controllers' certificate): the inner answer's error code."""
    version = send_version(REMOVE_RAFT_VOTER_KEY)
    inner = encode_request(
        RemoveRaftVoterRequest(correlation_id=7, voter_id=voter, voter_directory_id=""),
        destination=-1,
        cluster_id=None,
        version=version,
    )
    envelope = codec.build(
        codec.request_class(ENVELOPE_KEY, 0),
        request_data=inner[4:],
        request_principal=principal.encode(),
        client_host_address=address_bytes("127.0.0.1"),
    )
    address = quorum.address(leader, "CONTROLLER")
    security = quorum.pki.controller_client()
    async with await ClientConnection.connect(address, security=security) as conn:
        answer = await conn.send_entity(envelope)
    assert int(answer.error_code) == 0
    try:
        inner_answer = decode_response(
            bytes(answer.response_data), api_key=REMOVE_RAFT_VOTER_KEY, version=version
        )
    except RaftWireRefusal as refusal:
        return refusal.error_code
    return int(inner_answer.error_code)


async def test_the_leader_authorizes_a_forwarded_voter_change_for_the_client(
    tmp_path: Path,
) -> None:
    # A controller forwards for its clients: the client's principal decides at the leader,
    # not the controller's, whose own voter changes the leader would take.
    quorum = ServerQuorum(tmp_path, authorizer=AuthorizerConfig())
    await quorum.start_all()
    try:
        leader = await quorum.leader()
        victim = min(set(quorum.servers) - {leader.node_id})
        code = await _forwarded_removal(quorum, leader, victim, "User:carol")
        assert code == CLUSTER_AUTHORIZATION_FAILED
        assert await _voters(quorum) == {1, 2, 3}
        await leader.service.submit(
            lambda image: ControllerResult(records=(_allow_alter("User:carol"),), response=None),
            principal="User:test",
        )
        assert await _forwarded_removal(quorum, leader, victim, "User:carol") == 0
        assert await _voters(quorum) == {1, 2, 3} - {victim}
    finally:
        await quorum.stop_all()


async def test_a_voter_change_waits_out_an_election(tmp_path: Path) -> None:
    # Node 1 alone has no leader: after `LEADER_WAIT_S` it answers NOT_LEADER_OR_FOLLOWER
    # (nothing applied); the client sends the change again until node 2 makes a majority.
    quorum = ServerQuorum(tmp_path)
    alone = await quorum.start(1)

    async def second_node() -> None:
        await asyncio.sleep(LEADER_WAIT_S + 1)
        await quorum.start(2)

    joining = asyncio.ensure_future(second_node())
    try:
        async with await _at_controller_listener(quorum, alone) as client:
            await client.remove_raft_voter(3)
        await joining
        assert await _voters(quorum) == {1, 2}
    finally:
        await joining
        await quorum.stop_all()
