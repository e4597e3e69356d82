"""Readiness (`/readyz`, `mlog status`): a quorum node without a leader is not ready."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from api.server.health import health
from tests.support.quorum_harness import Cluster, register


async def test_a_lone_quorum_node_is_not_ready_and_a_quorum_s_nodes_are(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    lone = await cluster.start(1)
    try:
        state = health(lone.service, lone, node_id=1)
        assert not state.ready and not state.writes
        assert state.leader_id == -1 and "no leader known" in state.reason
        await cluster.start(2)
        await cluster.start(3)
        leader = await cluster.leader()
        await register(leader, 1)
        await cluster.agreed()
        # Elections may follow on a busy host: take the states once they agree.
        deadline = time.monotonic() + 20
        while True:
            nodes = list(cluster.network.nodes.values())
            states = [health(n.service, n, node_id=n.config.node_id) for n in nodes]
            leaders = {s.leader_id for s in states}
            writers = [n.config.node_id for n, s in zip(nodes, states, strict=True) if s.writes]
            if len(leaders) == 1 and writers == list(leaders) and all(s.ready for s in states):
                break
            assert time.monotonic() < deadline, states
            await asyncio.sleep(0.05)
        for state in states:
            if not state.writes:
                assert state.reason == f"writes go to the leader, node {writers[0]}"
    finally:
        await cluster.stop_all()
