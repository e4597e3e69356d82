"""Broker sessions across a controller failover, on a real quorum (three nodes, one loop).

The leader fences a silent broker; then it crashes while another broker is still alive and a
third has just gone silent. The new leader fences neither live broker at once (its sessions
start when it takes over), keeps the broker fenced before (the fence is in the log), and
fences the newly silent one a session timeout after taking over. Followers answer
NOT_CONTROLLER and fence nobody. Session time is a fake clock shared by the nodes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from api.raft.node import QuorumNode
from api.service.broker_liveness import BrokerLiveness
from records.uuids import Uuid
from replay.controller.commands import BrokerRegistration, CreatableTopic
from replay.controller.errors import ApiError, ErrorCode
from tests.support.quorum_harness import Cluster

TIMEOUT_MS = 9000


def test_a_failover_neither_fences_live_brokers_nor_forgets_dead_ones(tmp_path: Path) -> None:
    asyncio.run(_failover(tmp_path))


async def _failover(root: Path) -> None:
    # Timers slower than FAST's: no election on a busy host but the one the test causes.
    cluster = Cluster(root, election_timeout_ms=1000, fetch_timeout_ms=2000)
    now = [1_000_000]
    livenesses: dict[int, BrokerLiveness] = {}

    def liveness(node: QuorumNode) -> BrokerLiveness:
        node_id = node.config.node_id
        if node_id not in livenesses:
            livenesses[node_id] = BrokerLiveness(
                node.service, session_timeout_ms=TIMEOUT_MS, clock_ms=lambda: now[0]
            )
        return livenesses[node_id]

    await cluster.start_all()
    try:
        leader = await cluster.leader()
        epochs: dict[int, int] = {}
        for broker_id in (1, 2, 3):
            result = await liveness(leader).register(
                BrokerRegistration(
                    broker_id=broker_id, cluster_id="c", incarnation_id=Uuid.random()
                ),
                cluster_id="c",
                principal=None,
            )
            epochs[broker_id] = result.broker_epoch

        async def beat(node: QuorumNode, *brokers: int) -> None:
            for broker_id in brokers:
                offset = node.service.image.provenance.offset
                answer = await liveness(node).heartbeat(
                    broker_id,
                    epochs[broker_id],
                    offset,
                    want_fence=False,
                    want_shut_down=False,
                    principal=None,
                )
                assert not answer.is_fenced

        await beat(leader, 1, 2, 3)
        service = leader.service
        (created,) = await service.submit(
            lambda image: service.controller.create_topics(
                image, [CreatableTopic(name="t", assignments=((0, (3, 1, 2)),))]
            )
        )
        assert created.outcome.ok

        async def tick(node: QuorumNode, ms: int, *alive: int) -> list[int]:
            fenced: list[int] = []
            for _ in range(ms // 1000):
                now[0] += 1000
                await beat(node, *alive)
                fenced += await liveness(node).check_sessions()
            return fenced

        assert await tick(leader, 10_000, 1, 2) == [3]  # 3 went silent: fenced
        assert await tick(leader, 4000, 1) == []  # 2 went silent 4 s ago: not yet
        follower = next(n for n in cluster.network.nodes.values() if n is not leader)
        with pytest.raises(ApiError) as refused:
            await beat(follower, 1)
        assert refused.value.error_code == ErrorCode.NOT_CONTROLLER
        assert await liveness(follower).check_sessions() == []

        await cluster.stop(leader.config.node_id, resign=False)  # the leader crashes
        now[0] += 20_000  # an election, and no heartbeat reaches anyone meanwhile
        successor = await cluster.leader(excluding=leader)
        image = successor.service.image

        def fenced(broker_id: int) -> bool:
            broker = successor.service.image.cluster.get(broker_id)
            assert broker is not None
            return broker.fenced

        assert await tick(successor, 8000, 1) == []  # the grace period: 2 is not fenced yet
        assert fenced(3) and not fenced(1) and not fenced(2)  # the dead one stays fenced
        assert await tick(successor, 2000, 1) == [2]  # a timeout after the takeover
        assert not fenced(1)
        partition = successor.service.image.topics.get_by_name("t")
        assert partition is not None and partition.partitions[0].leader == 1
        assert image.cluster.get(3) is not None
    finally:
        await cluster.stop_all()
