"""Retried writes with real `mlog serve` processes: a lost answer's write is applied once.

The client talks to the server through a TCP proxy (tests/support/tcp_proxy.py) that lets the write
through and drops its answer, cutting the connection: the write was committed (answers are
sent only then) and the client cannot know it. The client sends it again with the same write
id; the server answers with the first answer and appends nothing. With a quorum the leader is
killed (kill -9) the moment its answer comes, so the retry goes to the next leader.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from api.client import AdminClient
from metadata_log.reader import LogReader
from records.model import ClientWriteRecord, NamespaceRecord, TopicRecord
from replay.controller.commands import CreatableTopic, RegisterBroker
from tests.support.quorum_processes import Quorum, check_logs
from tests.support.server_process import serve_process
from tests.support.tcp_proxy import Proxy, ProxyLoop, proxy_loop

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a deadline

TIMERS: dict[str, int | str] = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "500",
}
"""As tests/system/test_quorum_processes.py: half of Kafka's defaults, a quick election."""


def _records(log_dir: Path, kind: type, *, replicated: bool = False) -> list[Any]:
    with LogReader.open(log_dir) as log:
        return [e.record for e in log.read() if isinstance(e.record, kind)]


async def _create_losing_the_answer(address: str, proxy: Proxy, name: str) -> Any:
    """CreateTopics through `address` (the proxy) while the proxy loses its first answer."""
    async with await AdminClient.connect(address, timeout_ms=10_000) as client:
        await client.register_broker(RegisterBroker(broker_id=1))
        proxy.lose_next_answer()
        (result,) = await client.create_topics([CreatableTopic(name=name)])
        return result


def test_a_single_server_answers_a_retry_after_a_lost_answer(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve_process(data, tmp_path / "stderr.txt") as served, proxy_loop() as proxies:
        port = int(served.address.rsplit(":", 1)[1])
        proxy = proxies.proxy(port)
        result = asyncio.run(_create_losing_the_answer(f"127.0.0.1:{proxy.port}", proxy, "t"))
        assert proxy.answer_lost.is_set()
        assert served.stop() == 0
    assert result.outcome.ok, result  # not TOPIC_ALREADY_EXISTS: the first attempt's answer
    (topic,) = _records(data / "log", TopicRecord)
    assert topic.name == "t" and topic.topic_id == result.topic_id
    notes = _records(data / "log", ClientWriteRecord)
    assert [n.api_key for n in notes] == [10006, 19]  # the registration's, then the topic's


async def _failover_retry(quorum: Quorum, proxies: ProxyLoop) -> tuple[Any, str, int]:
    leader = await quorum.leader()
    node = quorum.nodes[leader]
    proxy = proxies.proxy(node.port)
    process = node.process
    assert process is not None
    client = await AdminClient.connect(f"127.0.0.1:{proxy.port}", timeout_ms=10_000)
    # The other voters, as `connect_controller` would have learned them.
    client.bootstrap = [n.address for n in quorum.nodes.values()]
    try:
        proxy.lose_next_answer(then=lambda: os.kill(process.pid, signal.SIGKILL))
        (result,) = await client.create_topics([CreatableTopic(name="once")])
        assert proxy.answer_lost.is_set()
        answered_by = client.address or ""
        # A private write sent to a follower: it forwards it to the leader (KIP-590).
        leader_now = await quorum.leader()
        follower = next(
            n for i, n in quorum.nodes.items() if i not in (leader, leader_now) and n.running
        )
        async with await AdminClient.connect(follower.address, timeout_ms=10_000) as other:
            created = await other.create_namespace("team")
            assert created.created == ("team",)
            assert other.address == follower.address  # answered there, with the leader's answer
    finally:
        await client.close()
    process.wait(10)
    return result, answered_by, leader


def test_a_write_whose_leader_died_after_committing_it_is_applied_once(tmp_path: Path) -> None:
    with proxy_loop() as proxies:
        quorum = Quorum(tmp_path, timers=TIMERS)
        quorum.start_all()
        try:
            asyncio.run(quorum.register_brokers())
            result, answered_by, killed = asyncio.run(_failover_retry(quorum, proxies))
        finally:
            quorum.stop_all()
    assert result.outcome.ok, result  # the stored answer, from the next leader
    assert answered_by != quorum.nodes[killed].address
    check_logs(quorum, ["once"])  # every node's log: the topic exactly once
    for node in quorum.nodes.values():
        log_dir = node.data_dir / "log"
        (topic,) = _records(log_dir, TopicRecord, replicated=True)
        assert topic.topic_id == result.topic_id
        notes = _records(log_dir, ClientWriteRecord, replicated=True)
        assert [n.api_key for n in notes if n.api_key == 19] == [19]
        if node.node_id != killed:  # written after it died: on the others, once
            (namespace,) = _records(log_dir, NamespaceRecord, replicated=True)
            assert namespace.name == "team"
