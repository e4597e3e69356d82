"""Online retention in a quorum (real logs and SQL): every node trims below the snapshot its
core offers, while serving, and a follower behind the new start is sent that snapshot."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from api.service.retention import RetentionConfig
from metadata_log.config import LogConfig
from replay.sql.store import SnapshotStore, sqlite_url
from tests.support.quorum_harness import Cluster, create_topic_at_leader, register

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a deadline

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
        # Retention runs beside the writes, on its own schedule: where fsyncs are fast (a
        # memory file system) the writes ended before its first trim. A generous deadline.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
            node.log.log_start_offset > 0 for node in cluster.network.nodes.values()
        ):
            await asyncio.sleep(0.1)
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


class ArchiveEnd:
    """Where the archive ends, as each node last read it (moved by the test)."""

    def __init__(self, end: int | None) -> None:
        self.archived_end = end


async def test_no_node_trims_past_the_archives_end(tmp_path: Path) -> None:
    policy = RetentionConfig(max_bytes=0, snapshot_bytes=8192)  # everything below a snapshot
    cluster = Cluster(tmp_path, snapshots=True, log_config=SMALL, policy=policy)
    for node_id in cluster.ids:
        with SnapshotStore(sqlite_url(tmp_path / str(node_id) / "snapshots.db")) as store:
            store.ensure_schema()
    archive = ArchiveEnd(None)
    await cluster.start_all()
    try:
        for node in cluster.network.nodes.values():
            assert node.service.retention is not None
            node.service.retention.archive = archive
        leader = await cluster.leader()
        await register(leader, 1)
        written = 0
        nodes = list(cluster.network.nodes.values())
        # Until every node's retention wanted to trim below a snapshot and was held back.
        while not all(n.service.retention and n.service.retention.archive_held_back for n in nodes):
            assert written < 600, "retention never wanted to trim"
            await create_topic_at_leader(cluster, f"t{written:03d}")
            written += 1
            for node in nodes:  # nothing archived: nothing goes
                assert node.log.log_start_offset == 0, node.config.node_id
        leader = await cluster.leader()
        held = leader.log.segments()[3].next_offset
        archive.archived_end = held
        deadline = time.monotonic() + 60
        while not all(n.log.log_start_offset > 0 for n in nodes):  # it goes on up to the end
            assert time.monotonic() < deadline, "retention did not go on once archived"
            await create_topic_at_leader(cluster, f"t{written:03d}")
            written += 1
            await asyncio.sleep(0.05)
        for node in nodes:
            assert 0 < node.log.log_start_offset <= held, node.config.node_id
    finally:
        await cluster.stop_all()
