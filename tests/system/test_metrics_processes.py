"""`/metrics` of real `mlog serve` processes under a workload, checked against their images.

A single node and each node of a three-node quorum are scraped while topics are created; each
scrape's controller gauges must be those of the image at the offset the scrape reports
(topics, partitions, brokers), and once the writes stop every node reports the same committed
offset and exactly one reports itself the active controller.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from api.client import AdminClient
from replay.controller.commands import CreatableTopic, RegisterBroker
from tests.support.metrics_scrape import metrics_address, readyz, scrape
from tests.support.quorum_processes import TIMERS, Quorum, Writer, converge, write_until
from tests.support.server_process import serve_process

pytestmark = pytest.mark.timeout(240)


async def _check_against_image(address: str, values: dict[str, float]) -> int:
    """Compare one scrape's controller gauges with the node's image at the scraped offset."""
    offset = int(values["mlog_controller_last_applied_record_offset"])
    client = await AdminClient.connect(address)
    try:
        image = await client.image_at(at_offset=offset)
    finally:
        await client.close()
    assert image.provenance.offset == offset
    brokers = list(image.cluster.brokers.values())
    fenced = sum(1 for b in brokers if b.fenced)
    assert values["mlog_controller_global_topic_count"] == len(image.topics)
    assert values["mlog_controller_global_partition_count"] == image.topics.partition_count()
    assert values["mlog_controller_fenced_broker_count"] == fenced
    assert values["mlog_controller_active_broker_count"] == len(brokers) - fenced
    assert values["mlog_controller_last_committed_record_offset"] >= offset
    return offset


async def _create_topics(address: str, batches: int, prefix: str) -> None:
    client = await AdminClient.connect(address)
    try:
        for broker_id in (1, 2, 3):
            await client.register_broker(RegisterBroker(broker_id=broker_id))
        for batch in range(batches):
            topics = [
                CreatableTopic(name=f"{prefix}{batch}-{i}", num_partitions=1 + i % 3)
                for i in range(10)
            ]
            results = await client.create_topics(topics)
            assert all(r.outcome.error_code == 0 for r in results)
    finally:
        await client.close()


async def test_a_single_node_s_metrics_match_its_image_during_a_workload(tmp_path: Path) -> None:
    with serve_process(
        tmp_path / "data", tmp_path / "stderr.txt", "--metrics-listen", "127.0.0.1:0"
    ) as server:
        metrics = metrics_address(server.stderr)
        assert readyz(metrics)[0] == 200
        workload = asyncio.create_task(_create_topics(server.address, 40, "t"))
        offsets = []
        while not workload.done():
            values = await asyncio.to_thread(scrape, metrics)
            offsets.append(await _check_against_image(server.address, values))
        await workload
        values = await asyncio.to_thread(scrape, metrics)
        offsets.append(await _check_against_image(server.address, values))
        assert offsets == sorted(offsets)
        assert values["mlog_controller_global_topic_count"] == 400
        assert values["mlog_controller_active_broker_count"] == 3
        assert values["mlog_controller_active_controller_count"] == 1
        assert values["mlog_server_requests_total{api=CreateTopics,error=NONE}"] == 40
        assert values["mlog_log_fsync_duration_seconds_count"] > 0
        status, body = readyz(metrics)
        assert status == 200 and body["ready"] and body["writes"]
        assert body["committed_offset"] == values["mlog_controller_last_committed_record_offset"]
        assert server.stop() == 0


async def test_each_quorum_node_s_metrics_match_its_image_and_agree(tmp_path: Path) -> None:
    quorum = Quorum(tmp_path, timers={**TIMERS, "metrics.listen": "127.0.0.1:0"})
    quorum.start_all()
    writer = Writer(quorum, prefix="q")
    try:
        await quorum.register_brokers()
        scrapers = {i: metrics_address(n.stderr) for i, n in quorum.nodes.items()}
        workload = asyncio.create_task(write_until(writer, 40))
        checked = 0
        while not workload.done():
            for node_id, metrics in scrapers.items():
                values = await asyncio.to_thread(scrape, metrics)
                await _check_against_image(quorum.nodes[node_id].address, values)
                checked += 1
        await workload
        await converge(quorum, writer)
        deadline = time.monotonic() + 30
        while True:
            scraped = {i: await asyncio.to_thread(scrape, a) for i, a in scrapers.items()}
            committed = {
                v["mlog_controller_last_committed_record_offset"] for v in scraped.values()
            }
            applied = {v["mlog_controller_last_applied_record_offset"] for v in scraped.values()}
            if len(committed) == 1 and committed == applied:
                break
            assert time.monotonic() < deadline, f"no agreement: {committed} {applied}"
            await asyncio.sleep(0.2)
        for node_id, values in scraped.items():
            await _check_against_image(quorum.nodes[node_id].address, values)
            assert values["mlog_controller_global_topic_count"] == len(writer.acknowledged)
            offset = values["mlog_controller_last_committed_record_offset"]
            assert values["mlog_raft_high_watermark"] == offset + 1
        active = [i for i, v in scraped.items() if v["mlog_controller_active_controller_count"]]
        leader = await quorum.leader()
        assert active == [leader]
        assert scraped[leader]["mlog_raft_commit_latency_seconds_count"] > 0
        assert {v["mlog_raft_current_leader"] for v in scraped.values()} == {leader}
        for metrics in scrapers.values():
            status, body = readyz(metrics)
            assert status == 200 and body["leader_id"] == leader
            assert body["writes"] == (body["role"] == "leader")
        assert checked > 0
    finally:
        await writer.close()
        quorum.stop_all()
