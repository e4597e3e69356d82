"""Voter changes sent to a follower are forwarded to the leader: issue #54, finding 9.

Bootstrapped at a follower, `mlog quorum add-controller` / `remove-controller` were answered
NOT_LEADER_OR_FOLLOWER ("the leader is node 5") try after try: writes were forwarded, voter
changes were not. Now a follower sends AddRaftVoter and RemoveRaftVoter to the leader in an
Envelope, as writes go, and the leader authorizes the client's principal for them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from api.client.admin import AdminClient
from api.client.connection import RemoteError
from api.server.forwarding import LEADER_WAIT_S
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


async def _until_added(address: str, quorum: ServerQuorum, node_id: int) -> None:
    """AddRaftVoter at `address` until the new node has caught up (generous deadline)."""
    voter = quorum.added[node_id]
    deadline = asyncio.get_running_loop().time() + 60
    while True:
        async with await AdminClient.connect(address) as client:
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
        await _until_added(quorum.address(follower), quorum, 4)
        assert await _voters(quorum) == {1, 2, 3, 4}
        assert follower.forwarder is not None and follower.forwarder.forwarded >= 1
        async with await AdminClient.connect(quorum.address(follower)) as client:
            await client.remove_raft_voter(4, directory_id=quorum.added[4].directory_id)
        assert await _voters(quorum) == {1, 2, 3}
    finally:
        await quorum.stop_all()


async def test_a_forwarded_voter_change_is_authorized_for_the_client(tmp_path: Path) -> None:
    # Anonymous may send Envelopes (CLUSTER_ACTION, the controllers' links here), not ALTER.
    quorum = ServerQuorum(tmp_path, authorizer=AuthorizerConfig())
    await quorum.start_all()
    try:
        leader = await quorum.leader()
        acl = AccessControlEntryRecord(
            id=Uuid.random(),
            resource_type=ResourceType.CLUSTER,
            resource_name=CLUSTER_NAME,
            pattern_type=PatternType.LITERAL,
            principal="User:ANONYMOUS",
            host="*",
            operation=AclOperation.CLUSTER_ACTION,
            permission_type=AclPermissionType.ALLOW,
        )
        await leader.service.submit(
            lambda image: ControllerResult(records=(acl,), response=None), principal="User:test"
        )
        await quorum.cluster.converged(leader.service.image.provenance.offset)
        follower = await quorum.follower()
        async with await AdminClient.connect(quorum.address(follower)) as client:
            with pytest.raises(RemoteError, match="CLUSTER_AUTHORIZATION_FAILED") as refused:
                await client.remove_raft_voter(1)
        assert "may not Alter the cluster" in str(refused.value)
        # Refused by the leader, for the client's principal: the follower forwarded it.
        assert follower.forwarder is not None and follower.forwarder.forwarded == 1
        assert await _voters(quorum) == {1, 2, 3}
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
        async with await AdminClient.connect(quorum.address(alone)) as client:
            await client.remove_raft_voter(3)
        await joining
        assert await _voters(quorum) == {1, 2}
    finally:
        await joining
        await quorum.stop_all()
