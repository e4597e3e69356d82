"""A follower below the leader's log start catches up by FetchSnapshot (real logs and SQL)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from api.cli.main import main
from metadata_log.config import LogConfig
from tests.support.quorum_harness import Cluster, create_topic, register

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a deadline

SMALL = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=256)
"""Small segments (the header alone is about 9 KB), so a trim removes some."""


def _cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(args), out=out), out.getvalue()


async def test_a_lagging_follower_gets_the_snapshot_installs_it_and_follows(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path, snapshots=True, log_config=SMALL)
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        await create_topic(leader, "before")
        await cluster.converged(leader.service.image.provenance.offset)
        lagging = next(n for n in cluster.network.nodes.values() if n is not leader)
        lagging_id = lagging.config.node_id
        await cluster.stop(lagging_id, resign=False)
        for i in range(60):
            await create_topic(await cluster.leader(), f"t{i:02d}")
        # The other two snapshot (by their policy's path: committed images), stop in turn,
        # trim below the snapshot and come back, a majority up all along.
        for node_id in [i for i in cluster.ids if i != lagging_id]:
            leader = await cluster.leader()
            await cluster.converged(leader.service.image.provenance.offset)
            node = cluster.network.nodes[node_id]
            snapshots = node.service._snapshots
            assert snapshots is not None
            info = await asyncio.wrap_future(snapshots.request(node.service.image, node.log))
            assert info is not None
            await cluster.stop(node_id)
            code, text = _cli(
                "--data-dir", str(tmp_path / str(node_id)), "log", "trim", "--before-snapshot"
            )
            assert code == 0 and "now starts at offset" in text, text
            again = await cluster.start(node_id)
            assert again.log.log_start_offset > 0
            assert again.core.log.snapshot is not None
        leader = await cluster.leader()
        start = leader.log.log_start_offset
        assert start > 3  # beyond what the lagging follower holds
        back = await cluster.start(lagging_id)
        await cluster.converged(leader.service.image.provenance.offset)
        assert back.core.snapshot_transfers >= 1
        assert back.log.start_snapshot is not None
        assert back.log.log_start_offset == back.log.start_snapshot.offset + 1 > start
        await cluster.agreed()
        await create_topic(await cluster.leader(), "after")
        await cluster.agreed()
        assert back.service.image.topics.get_by_name("after")
        # Restarted, it starts from the snapshot its log starts after.
        await cluster.stop(lagging_id, resign=False)
        again = await cluster.start(lagging_id)
        await cluster.agreed()
        assert again.core.snapshot_transfers == 0
    finally:
        await cluster.stop_all()


def test_snapshot_create_refuses_a_quorum_nodes_directory(tmp_path: Path) -> None:
    (tmp_path / "quorum-state").write_text("{}")
    code, _ = _cli("--data-dir", str(tmp_path), "snapshot", "create")
    assert code != 0
