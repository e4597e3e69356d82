"""Online retention in a quorum (real logs and SQL): every node trims below the snapshot its
core offers, while serving, and a follower behind the new start is sent that snapshot."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from api.service.retention import RetentionConfig
from metadata_log.config import LogConfig
from replay.sql.store import SnapshotStore, sqlite_url
from tests.support.quorum_harness import Cluster, create_topic_at_leader, register

pytestmark = pytest.mark.timeout(120)

SMALL = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=256)
POLICY = RetentionConfig(max_bytes=40_000, snapshot_bytes=8192)


async def test_nodes_trim_while_serving_and_a_lagging_one_catches_up_by_snapshot(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="api.server")
    cluster = Cluster(tmp_path, snapshots=True, log_config=SMALL, policy=POLICY)
    for node_id in cluster.ids:  # one at a time: Alembic's migration is not for threads
        with SnapshotStore(sqlite_url(tmp_path / str(node_id) / "snapshots.db")) as store:
            store.ensure_schema()
    await cluster.start_all()
    try:
        leader = await cluster.leader()
        await register(leader, 1)
        lagging_id = next(i for i in cluster.ids if i != leader.config.node_id)
        await cluster.stop(lagging_id, resign=False)
        for i in range(150):
            # Snapshots every 8 KiB on a busy host can cost a leader its term: follow it.
            await create_topic_at_leader(cluster, f"t{i:03d}")
        leader = await cluster.leader()
        await cluster.converged(leader.service.image.provenance.offset)
        for node in cluster.network.nodes.values():
            assert node.log.log_start_offset > 0, node.config.node_id
            assert node.core.log.start_offset == node.log.log_start_offset
            size = sum(s.size_bytes for s in node.log.segments())
            assert size <= POLICY.max_bytes + 3 * SMALL.segment_bytes
        assert "retention removed" in caplog.text
        back = await cluster.start(lagging_id)
        await cluster.converged(leader.service.image.provenance.offset)
        assert back.core.snapshot_transfers >= 1
        await cluster.agreed()
        await create_topic_at_leader(cluster, "after")
        await cluster.agreed()
        images = [n.service.image for n in cluster.network.nodes.values()]
        assert all(image == images[0] for image in images)
        assert images[0].topics.get_by_name("after") is not None
    finally:
        await cluster.stop_all()
