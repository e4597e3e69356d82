"""KIP-853 voter changes through the real shell: nodes over real logs, an in-process network.

The consensus rules are the simulation's (test_raft_membership_simulation.py); these check
what the shell adds: the voters read from the log at start (the bootstrap block, then each
VotersRecord), voter changes answered once committed with Kafka's codes, the service's
writes going on around them, and a static quorum refusing them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from api.protocol.quorum.apis import (
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoterEndpoint,
)
from api.protocol.quorum.errors import INVALID_REQUEST
from api.protocol.quorum.messages import ErrorCode as CoreError
from api.raft.core.voters import Voter
from api.raft.node import QuorumNode
from api.raft.transport.endpoint import NodeEndpoint
from api.raft.voter_blocks import VOTERS_BASE_NAME
from api.service.retention import RetentionConfig
from metadata_log.config import LogConfig
from metadata_log.reader import LogReader
from records import TopicRecord
from records.model import FeatureLevelRecord, KRaftVersionRecord, VotersRecord
from replay.features import KRAFT_VERSION, finalized_level
from replay.sql.store import SnapshotStore, sqlite_url
from tests.support.quorum_harness import Cluster, create_topic_at_leader, directory_of, register

pytestmark = pytest.mark.asyncio

OK = 0

SMALL = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=256)
POLICY = RetentionConfig(max_bytes=40_000, snapshot_bytes=8192)


def _voter(cluster: Cluster, node_id: int) -> Voter:
    address = cluster.addresses.get(node_id)
    return Voter(
        id=node_id,
        directory_id=directory_of(node_id),
        host="127.0.0.1",
        port=address.port if address is not None else 19999,
    )


async def _add(cluster: Cluster, node_id: int, timeout: float = 20.0) -> None:
    """AddRaftVoter at the leader until the new node has caught up (REQUEST_TIMED_OUT before)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        leader = await cluster.leader()
        code, message = await leader.change_voters(add=_voter(cluster, node_id))
        if code == OK:
            return
        assert code in (CoreError.REQUEST_TIMED_OUT, CoreError.NOT_LEADER_OR_FOLLOWER), message
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(message)
        await asyncio.sleep(0.05)


async def _voters_seen(node: Any, voters: set[int], timeout: float = 30.0) -> None:
    """Wait until `node` holds `voters` (a follower learns a committed change by fetching)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while node.core.voters != voters:
        assert asyncio.get_running_loop().time() < deadline, f"{node.core.voters} != {voters}"
        await asyncio.sleep(0.02)


def _entries(cluster: Cluster, node_id: int) -> list[tuple[int, int, object]]:
    with LogReader.open(cluster.root / str(node_id) / "log") as log:
        return [(e.offset, e.epoch, e.record) for e in log.read()]


async def _writes(cluster: Cluster, prefix: str, count: int) -> list[str]:
    names = [f"{prefix}{i}" for i in range(count)]
    for name in names:
        await create_topic_at_leader(cluster, name)
    return names


async def test_add_a_voter_then_remove_the_leader_and_writes_go_on(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, dynamic=True)
    await cluster.start_all()
    try:
        await register(await cluster.leader(), 1)
        written = await _writes(cluster, "a", 3)
        cluster.add(4)
        new = await cluster.start(4)
        assert not new.core.is_voter  # an observer until added
        await _add(cluster, 4)
        # Committed at the leader; the new node applies it once its fetch brings the block.
        await _voters_seen(new, {1, 2, 3, 4})
        written += await _writes(cluster, "b", 3)

        leader = await cluster.leader()
        code, message = await leader.change_voters(remove=leader.node_id)
        assert code == OK, message
        # The removed leader resigned once its removal committed: another voter leads.
        successor = await cluster.leader(excluding=leader)
        assert successor.node_id != leader.node_id
        assert successor.core.voters == {1, 2, 3, 4} - {leader.node_id}
        written += await _writes(cluster, "c", 3)
        await cluster.agreed()
    finally:
        await cluster.stop_all()
    logs = {i: _entries(cluster, i) for i in cluster.ids}
    longest = max(logs.values(), key=len)
    for node_id, entries in logs.items():
        assert entries == longest[: len(entries)], f"node {node_id} diverges"
        names = {r.name for _, _, r in entries if isinstance(r, TopicRecord)}
        assert set(written) <= names, f"node {node_id} lacks acknowledged writes"
    # The log holds the bootstrap block, then one VotersRecord per change.
    kinds = [type(r) for _, _, r in longest if isinstance(r, VotersRecord | KRaftVersionRecord)]
    assert kinds == [KRaftVersionRecord, VotersRecord, VotersRecord, VotersRecord]
    # Formatted dynamic, the quorum is at kraft.version 1 from its first block.
    assert longest[1][2] == FeatureLevelRecord(name=KRAFT_VERSION, feature_level=1)


async def test_a_restarted_node_reads_its_voters_from_its_log(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, dynamic=True)
    await cluster.start_all()
    try:
        await register(await cluster.leader(), 1)
        cluster.add(4)
        await cluster.start(4)
        await _add(cluster, 4)
        await cluster.agreed()
        await cluster.stop(4)
        restarted: QuorumNode = await cluster.start(4)
        # The config names voters 1-3 only: the set in force comes from the log.
        assert restarted.core.voters == {1, 2, 3, 4}
        assert restarted.voter_set().get(4) == _voter(cluster, 4)
    finally:
        await cluster.stop_all()


async def test_one_change_at_a_time_and_only_on_the_leader(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, dynamic=True)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        follower = next(n for n in cluster.network.nodes.values() if n is not leader)
        code, message = await follower.change_voters(remove=leader.node_id)
        assert code == CoreError.NOT_LEADER_OR_FOLLOWER
        assert f"node {leader.node_id}" in (message or "")
        others = sorted({1, 2, 3} - {leader.node_id})
        first, second = await asyncio.gather(
            leader.change_voters(remove=others[0]), leader.change_voters(remove=others[1])
        )
        assert first[0] == OK
        assert second[0] == CoreError.REQUEST_TIMED_OUT
        assert "another voter change" in (second[1] or "")
        code, message = await leader.change_voters(remove=9)
        assert code == CoreError.VOTER_NOT_FOUND, message
        code, message = await leader.change_voters(add=_voter(cluster, 7))
        assert code == CoreError.REQUEST_TIMED_OUT  # node 7 never fetched: not caught up
    finally:
        await cluster.stop_all()


async def test_a_static_quorum_refuses_voter_changes(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        code, message = await leader.change_voters(remove=leader.node_id)
        assert code == CoreError.UNSUPPORTED_VERSION
        assert "fixed by controller.quorum.voters (kraft.version 0)" in (message or "")
        assert not leader.dynamic
        assert finalized_level(leader.service.image, KRAFT_VERSION) == 0
    finally:
        await cluster.stop_all()


async def test_update_raft_voter_checks_a_voters_endpoint_at_the_leader(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, dynamic=True)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        voter = _voter(cluster, 2)

        def update(epoch: int, port: int) -> UpdateRaftVoterRequest:
            return UpdateRaftVoterRequest(
                correlation_id=1,
                current_leader_epoch=epoch,
                voter_id=2,
                voter_directory_id=voter.directory_id,
                endpoints=(VoterEndpoint(name="CONTROLLER", host=voter.host, port=port),),
            )

        endpoint = NodeEndpoint(leader)
        same = await endpoint.handle(2, update(leader.epoch, voter.port))
        assert isinstance(same, UpdateRaftVoterResponse)
        assert (same.error_code, same.leader_id) == (OK, leader.node_id)
        moved = await endpoint.handle(2, update(leader.epoch, voter.port + 1))
        assert isinstance(moved, UpdateRaftVoterResponse)
        assert moved.error_code == INVALID_REQUEST  # remove and add it again instead
        stale = await endpoint.handle(2, update(leader.epoch - 1, voter.port))
        assert isinstance(stale, UpdateRaftVoterResponse)
        assert stale.error_code == CoreError.FENCED_LEADER_EPOCH
        follower = next(n for n in cluster.network.nodes.values() if n is not leader)
        elsewhere = await NodeEndpoint(follower).handle(2, update(leader.epoch, voter.port))
        assert isinstance(elsewhere, UpdateRaftVoterResponse)
        assert elsewhere.error_code == CoreError.NOT_LEADER_OR_FOLLOWER
    finally:
        await cluster.stop_all()


async def test_voters_survive_trims_snapshot_installs_and_restarts(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, dynamic=True, snapshots=True, log_config=SMALL, policy=POLICY)
    for node_id in [*cluster.ids, 4]:  # one at a time: Alembic's migration is not for threads
        (tmp_path / str(node_id)).mkdir(exist_ok=True)
        with SnapshotStore(sqlite_url(tmp_path / str(node_id) / "snapshots.db")) as store:
            store.ensure_schema()
    await cluster.start_all()
    try:
        await register(await cluster.leader(), 1)
        cluster.add(4)
        await cluster.start(4)
        await _add(cluster, 4)
        leader = await cluster.leader()
        lagging = next(i for i in (1, 2, 3) if i != leader.node_id)
        await cluster.stop(lagging, resign=False)
        for i in range(150):
            await create_topic_at_leader(cluster, f"t{i:03d}")
        leader = await cluster.leader()
        await cluster.converged(leader.service.image.provenance.offset)
        for node in cluster.network.nodes.values():
            # Trimmed past the bootstrap block and the VotersRecord adding node 4.
            assert node.log.log_start_offset > 2, node.node_id
            assert (tmp_path / str(node.node_id) / VOTERS_BASE_NAME).exists()
        back = await cluster.start(lagging)  # behind the start: sent a snapshot
        await cluster.converged(leader.service.image.provenance.offset)
        assert back.core.snapshot_transfers >= 1
        assert back.core.voters == {1, 2, 3, 4}
        for node_id in list(cluster.network.nodes):
            await cluster.stop(node_id)
            restarted = await cluster.start(node_id)
            assert restarted.core.voters == {1, 2, 3, 4}, node_id
            assert restarted.voter_set().get(4) == _voter(cluster, 4)
        await create_topic_at_leader(cluster, "after")
        await cluster.agreed()
    finally:
        await cluster.stop_all()


async def test_a_static_quorum_upgraded_in_place_then_changes_its_voters(tmp_path: Path) -> None:
    """kraft.version 1 on a static quorum: its voters into the log, then add and remove."""
    cluster = Cluster(tmp_path)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        written = await _writes(cluster, "a", 3)
        follower = next(n for n in cluster.network.nodes.values() if n is not leader)
        code, _ = await follower.upgrade_voters()
        assert code == CoreError.NOT_LEADER_OR_FOLLOWER
        code, message = await leader.upgrade_voters()
        assert code == OK, message
        assert finalized_level(leader.service.image, KRAFT_VERSION) == 1
        code, message = await leader.upgrade_voters()
        assert code == INVALID_REQUEST and "already" in (message or "")
        await cluster.agreed()
        for node in cluster.network.nodes.values():
            assert node.dynamic and node.core.voters == {1, 2, 3}, node.node_id
        # A node restarted with its static config takes the log's voters.
        await cluster.stop(follower.node_id)
        restarted = await cluster.start(follower.node_id)
        assert restarted.dynamic and restarted.core.voters == {1, 2, 3}
        written += await _writes(cluster, "b", 3)

        cluster.dynamic = True  # node 4 is a dynamic quorum's new node (bootstrap servers)
        cluster.add(4)
        await cluster.start(4)
        await _add(cluster, 4)
        cluster.dynamic = False  # the original nodes keep their static config
        leader = await cluster.leader()
        removed = next(i for i in (1, 2, 3) if i != leader.node_id)
        code, message = await leader.change_voters(remove=removed)
        assert code == OK, message
        written += await _writes(cluster, "c", 3)
        await cluster.agreed()
        # Restarted with controller.quorum.voters=1,2,3, a node still takes {1..4} - removed.
        kept = next(i for i in (1, 2, 3) if i not in (removed, leader.node_id))
        await cluster.stop(kept)
        again = await cluster.start(kept)
        assert again.core.voters == {1, 2, 3, 4} - {removed}
        written += await _writes(cluster, "d", 3)
        # Or moved to controller.quorum.bootstrap.servers, as a dynamic quorum's node.
        await cluster.agreed()
        await cluster.stop(kept)
        cluster.dynamic = True
        moved = await cluster.start(kept)
        cluster.dynamic = False
        assert moved.dynamic and moved.core.voters == {1, 2, 3, 4} - {removed}
        written += await _writes(cluster, "e", 3)
        await cluster.agreed()
    finally:
        await cluster.stop_all()
    logs = {i: _entries(cluster, i) for i in cluster.ids}
    longest = max(logs.values(), key=len)
    for node_id, entries in logs.items():
        assert entries == longest[: len(entries)], f"node {node_id} diverges"
        names = {r.name for _, _, r in entries if isinstance(r, TopicRecord)}
        assert set(written) <= names, f"node {node_id} lacks acknowledged writes"
    # The upgrade's block: the level's records and the static voters, with their endpoints.
    at = next(i for i, (_, _, r) in enumerate(longest) if isinstance(r, KRaftVersionRecord))
    block = [r for _, _, r in longest[at : at + 3]]
    assert block[1] == FeatureLevelRecord(name=KRAFT_VERSION, feature_level=1)
    assert isinstance(block[2], VotersRecord)
    assert [(v.voter_id, v.port) for v in block[2].voters] == [
        (i, cluster.addresses[i].port) for i in (1, 2, 3)
    ]
