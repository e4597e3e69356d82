"""The quorum's shell over real logs: elections, committed writes, followers, leader changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.controller.errors import ApiError, ErrorCode
from records import LeaderChangeRecord, TopicRecord
from tests.quorum_harness import Cluster, create_topic, register

pytestmark = pytest.mark.timeout(60)


def _entries(node_log: object) -> list[tuple[int, int, int, object]]:
    return [(e.offset, e.epoch, e.timestamp, e.record) for e in node_log.read()]  # type: ignore[attr-defined]


async def _converged(cluster: Cluster, offset: int, timeout: float = 10.0) -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if all(n.service.image.provenance.offset >= offset for n in cluster.network.nodes.values()):
            return
        await asyncio.sleep(0.01)
    raise TimeoutError(
        f"images at {[n.service.image.provenance.offset for n in cluster.network.nodes.values()]}"
        f", wanted {offset}"
    )


async def test_three_nodes_elect_a_leader_and_replicate_committed_writes(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        await create_topic(leader, "orders")
        offset = leader.service.image.provenance.offset
        await _converged(cluster, offset)
        images = [n.service.image for n in cluster.network.nodes.values()]
        assert all(image.topics.get_by_name("orders") is not None for image in images)
        logs = [_entries(n.log)[: offset + 1] for n in cluster.network.nodes.values()]
        assert logs[0] == logs[1] == logs[2]
        assert isinstance(logs[0][0][3], LeaderChangeRecord)
        assert sum(isinstance(e[3], TopicRecord) for e in logs[0]) == 1
    finally:
        await cluster.stop_all()


async def test_a_write_on_a_follower_names_the_leader(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    nodes = await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        follower = next(n for n in nodes if n is not leader)
        await _converged(cluster, leader.service.image.provenance.offset)
        with pytest.raises(ApiError) as refused:
            await create_topic(follower, "t")
        assert refused.value.error_code == ErrorCode.NOT_CONTROLLER
        assert f"node {leader.config.node_id} at 127.0.0.1:" in str(refused.value)
    finally:
        await cluster.stop_all()


async def test_a_stopped_leader_hands_over_and_catches_up_when_back(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    await cluster.start_all()
    try:
        first = await cluster.leader()
        await register(first, 1)
        await create_topic(first, "a")
        old = first.config.node_id
        await cluster.stop(old)
        second = await cluster.leader()
        assert second.config.node_id != old
        assert second.service.image.topics.get_by_name("a") is not None
        await create_topic(second, "b")
        back = await cluster.start(old)
        await _converged(cluster, second.service.image.provenance.offset)
        assert back.service.image.topics.get_by_name("b") is not None
        assert not back.leading
    finally:
        await cluster.stop_all()


async def test_an_isolated_leader_loses_its_pending_write_and_the_rest_go_on(
    tmp_path: Path,
) -> None:
    import asyncio

    cluster = Cluster(tmp_path)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        cluster.network.isolate(leader.config.node_id)
        pending = asyncio.ensure_future(create_topic(leader, "lost"))
        await asyncio.sleep(0.05)
        assert not pending.done()  # not committed: no majority acknowledges it
        others = [n for n in cluster.network.nodes.values() if n is not leader]
        new = None
        for _ in range(1000):
            new = next((n for n in others if n.leading), None)
            if new is not None:
                break
            await asyncio.sleep(0.01)
        assert new is not None
        await create_topic(new, "kept")
        with pytest.raises(ApiError) as refused:
            await pending
        assert refused.value.error_code == ErrorCode.NOT_CONTROLLER
        cluster.network.heal()
        await _converged(cluster, new.service.image.provenance.offset)
        for node in cluster.network.nodes.values():
            assert node.service.image.topics.get_by_name("lost") is None
            assert node.service.image.topics.get_by_name("kept") is not None
    finally:
        await cluster.stop_all()
