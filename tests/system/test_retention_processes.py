"""Online retention in real `mlog serve` processes: the log stays bounded while it serves.

With `metadata.log.segment.bytes=65536`, `metadata.log.max.record.bytes.between.snapshots=65536`
and `metadata.max.retention.bytes=262144`, creating 4,000 topics keeps `log/` under the bound
plus a few segments the whole time and moves the log's start past 0; a restart gives the same
image, and so does a quorum whose third node was down all along (it is sent a snapshot). The
server keeps the Merkle index over what it trims: afterwards digests are v2, entries before
and after the start are proven, and a v2 digest taken before the trims still matches.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

import pytest

from api.client import AdminClient
from metadata_log.digest import parse_digest
from metadata_log.reader import LogReader
from replay.controller.commands import CreatableTopic, RegisterBroker
from replay.image import MetadataImage
from tests.support.cli import as_json, mlog, ok
from tests.support.merkle_verifier import verify_consistency, verify_inclusion
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


async def _agreed_images(quorum: Quorum, timeout: float = 120.0) -> list[MetadataImage]:
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
    # Two snapshots kept, each full, so that snapshot retention deletes some on a loaded host
    # too (it takes fewer snapshots there: a snapshot still being written is not started
    # again; and increments keep their base until a newer full snapshot is written).
    env = {**os.environ, "MLOG_SNAPSHOT_RETENTION": "2", "MLOG_SNAPSHOT_MAX_CHAIN": "0"}
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
    # The nodes that held the log from offset 0 kept its Merkle index over what they trimmed.
    for node in (1, 2):
        data = quorum.nodes[node].data_dir
        start = _start_offset(data)
        if start == 0:
            continue  # a follower that did not trim yet
        assert _indexed(data) >= start
        token = ok(data, "log", "digest").strip()
        assert token.startswith("mlog-digest:v2:")
        proof = as_json(data, "log", "prove", "--offset", "0", "--digest", token)
        assert proof["entry"] is None and verify_inclusion(proof, token)
    # The node that installed a snapshot never held the entries below it: a v1 digest.
    assert ok(quorum.nodes[3].data_dir, "log", "digest").startswith("mlog-digest:v1:")


def _indexed(data_dir: Path) -> int:
    """The entries the log's Merkle index holds (`<log dir>/merkle/state`)."""
    return int((data_dir / "log" / "merkle" / "state").read_text().split()[0])


async def test_a_server_s_trims_keep_v2_digests_and_proofs(tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in RETENTION.items()))
    data = tmp_path / "data"
    with serve_process(data, tmp_path / "stderr.txt", "--config", str(config)) as server:
        client = await AdminClient.connect(server.address)
        try:
            for broker_id in (1, 2, 3):
                await client.register_broker(RegisterBroker(broker_id=broker_id))
            created, early, early_offset = 0, "", TOPICS * 10
            while created < TOPICS and (created < 400 or _start_offset(data) <= early_offset + 1):
                topics = [CreatableTopic(name=f"t{i}") for i in range(created, created + BATCH)]
                assert all(r.outcome.error_code == 0 for r in await client.create_topics(topics))
                created += BATCH
                if created == 400:  # an auditor's digest, taken from the serving directory
                    early = ok(data, "log", "digest").strip()
                    early_offset = parse_digest(early).offset
        finally:
            await client.close()
        assert server.stop() == 0
        assert "retention removed" in server.log()
    start = _start_offset(data)
    assert start > early_offset + 1, (start, early_offset)
    assert _indexed(data) >= start  # the server indexed what it trimmed, nobody else did
    latest = ok(data, "log", "digest").strip()
    assert latest.startswith("mlog-digest:v2:")
    end = parse_digest(latest).offset
    for offset in (0, early_offset, start - 1, start, end):
        proof = as_json(data, "log", "prove", "--offset", str(offset), "--digest", latest)
        assert verify_inclusion(proof, latest), offset
        assert (proof["entry"] is None) == (offset < start)
    proof = as_json(data, "log", "prove", "--from-digest", early, "--digest", latest)
    assert verify_consistency(proof, early, latest)
    code, text = mlog(data, "log", "verify", "--digest", early)
    assert code == 0 and f"MATCHES: entries 0..{early_offset} were trimmed" in text, text
