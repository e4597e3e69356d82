"""Online retention in real `mlog serve` processes: the log stays bounded while it serves.

With `metadata.log.segment.bytes=65536`, `metadata.log.max.record.bytes.between.snapshots=65536`
and `metadata.max.retention.bytes=262144`, creating 4,000 topics keeps `log/` under the bound
plus a few segments the whole time and moves the log's start past 0; a restart gives the same
image, and so does a quorum whose third node was down all along (it is sent a snapshot).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

import pytest

from api.client import AdminClient
from metadata_log.reader import LogReader
from replay.controller.commands import CreatableTopic, RegisterBroker
from replay.image import MetadataImage
from tests.support.quorum_processes import TIMERS, Quorum, Writer, converge
from tests.support.server_process import serve_process

pytestmark = pytest.mark.timeout(300)

RETENTION = {
    "metadata.log.segment.bytes": "65536",
    "metadata.log.max.record.bytes.between.snapshots": "65536",
    "metadata.max.retention.bytes": "262144",
}
BOUND = 262144
SLACK = 4 * 65536
"""A few segments over the bound: the newest, and those written while a snapshot is taken."""
TOPICS = 4000
BATCH = 50


def _log_bytes(data_dir: Path) -> int:
    """The segments' bytes; a segment the server trims between the listing and its stat is gone."""
    total = 0
    for path in (data_dir / "log").glob("*.avro"):
        with contextlib.suppress(FileNotFoundError):
            total += path.stat().st_size
    return total


async def _create(address: str, data_dirs: list[Path], *, controller: bool = False) -> list[int]:
    """Create the topics in batches, measuring each data directory's log after each batch."""
    if controller:
        client = await AdminClient.connect_controller(address, timeout_ms=5000)
    else:
        client = await AdminClient.connect(address)
    sizes: list[int] = []
    try:
        for broker_id in (1, 2, 3):
            await client.register_broker(RegisterBroker(broker_id=broker_id))
        for first in range(0, TOPICS, BATCH):
            topics = [CreatableTopic(name=f"t{i}") for i in range(first, first + BATCH)]
            results = await client.create_topics(topics)
            assert all(r.outcome.error_code == 0 for r in results)
            sizes.extend(_log_bytes(d) for d in data_dirs)
    finally:
        await client.close()
    return sizes


async def _image(address: str) -> MetadataImage:
    client = await AdminClient.connect(address)
    try:
        return await client.image_at()
    finally:
        await client.close()


async def _agreed_images(quorum: Quorum, timeout: float = 30.0) -> list[MetadataImage]:
    """Every node's image, once all are equal (a follower learns the commit a fetch later)."""
    deadline = time.monotonic() + timeout
    while True:
        images = [await _image(node.address) for node in quorum.nodes.values()]
        if all(image == images[0] for image in images):
            return images
        offsets = [image.provenance.offset for image in images]
        assert time.monotonic() < deadline, f"the nodes' images differ (offsets {offsets})"
        await asyncio.sleep(0.2)


def _start_offset(data_dir: Path) -> int:
    with LogReader.open(data_dir / "log") as log:
        return log.log_start_offset


async def test_a_standalone_log_stays_bounded_and_restarts_to_the_same_image(
    tmp_path: Path,
) -> None:
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in RETENTION.items()))
    data = tmp_path / "data"
    # Two snapshots kept, so that snapshot retention deletes some on a loaded host too (it
    # takes fewer snapshots there: a snapshot still being written is not started again).
    env = {**os.environ, "MLOG_SNAPSHOT_RETENTION": "2"}
    with serve_process(data, tmp_path / "stderr.txt", "--config", str(config), env=env) as server:
        sizes = await _create(server.address, [data])
        before = await _image(server.address)
        client = await AdminClient.connect(server.address)
        try:  # readers name what is gone, as after an offline trim
            with pytest.raises(Exception, match="trimmed"):
                await client.image_at(at_offset=1)
        finally:
            await client.close()
        assert server.stop() == 0
        log = server.log()
    assert max(sizes) <= BOUND + SLACK, sizes
    assert _start_offset(data) > 0
    assert "retention removed" in log and "retention deleted" in log
    assert len(before.topics) == TOPICS
    with serve_process(data, tmp_path / "stderr2.txt", "--config", str(config)) as server:
        after = await _image(server.address)
        assert server.stop() == 0
    assert after == before


async def test_a_lagging_quorum_node_catches_up_to_the_same_image(tmp_path: Path) -> None:
    quorum = Quorum(tmp_path, timers={**TIMERS, **RETENTION})
    quorum.start(1)
    quorum.start(2)
    writer = Writer(quorum)
    try:
        leader = await quorum.leader()
        dirs = [quorum.nodes[1].data_dir, quorum.nodes[2].data_dir]
        sizes = await _create(quorum.nodes[leader].address, dirs, controller=True)
        assert max(sizes) <= BOUND + SLACK, sizes
        assert _start_offset(quorum.nodes[leader].data_dir) > 0
        quorum.start(3)  # below the leader's log start: it is sent the snapshot
        await converge(quorum, writer)
        images = await _agreed_images(quorum)
        assert len(images[0].topics) == TOPICS + len(writer.acknowledged)
        assert "installed the leader's snapshot" in quorum.nodes[3].stderr.read_text()
    finally:
        await writer.close()
        quorum.stop_all()
