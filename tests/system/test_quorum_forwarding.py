"""Writes sent to a node that does not lead: forwarded to the leader, never answered stale.

Three `mlog serve` processes. A follower cut off from the others (TCP proxies on every quorum
link) keeps an image that falls behind; writes sent to it straight must not be answered
from it (issue 36, finding 1). Kafka clients that send a write to any node (kafka-python's
alter_configs picks the least loaded node) get the leader's answer through a follower
(KIP-590's Envelope; finding 2).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from api.client import AdminClient
from api.client.connection import ClientConnection
from records.model import ConfigResourceType
from replay.controller.commands import ConfigResource, CreatableTopic, TopicRef
from replay.controller.errors import ErrorCode
from tests.support.quorum_processes import TIMERS, Quorum, mlog
from tests.support.tcp_proxy import proxy_loop

pytestmark = pytest.mark.timeout(240)


async def _topics_seen_by(address: str) -> set[str]:
    client = await AdminClient.connect(address)
    try:
        return {str(t.name) for t in (await client.metadata(None)).topics}
    finally:
        await client.close()


async def _until_seen(address: str, name: str, present: bool = True) -> None:
    for _ in range(200):
        if (name in await _topics_seen_by(address)) == present:
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"{address} never {'saw' if present else 'forgot'} topic {name}")


async def _create_raw(address: str, name: str) -> int:
    """CreateTopics as a Kafka client sends it (no write id, no retry): the topic's code."""
    async with await ClientConnection.connect(address, timeout_ms=20_000) as conn:
        answer = await conn.request(
            19,
            topics=[
                {
                    "name": name,
                    "num_partitions": 1,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            timeout=5000,
            validate_only=False,
        )
    return int(answer.topics[0].error_code)


async def _delete_raw(address: str, name: str) -> int:
    """DeleteTopics as a Kafka client sends it: the topic's code."""
    async with await ClientConnection.connect(address, timeout_ms=20_000) as conn:
        answer = await conn.request(
            20, topics=[{"name": name, "topic_id": bytes(16)}], topic_names=[name], timeout=5000
        )
    return int(answer.responses[0].error_code)


async def test_a_cut_off_follower_answers_not_controller_never_its_stale_image(
    tmp_path: Path,
) -> None:
    with proxy_loop() as loop:
        quorum = Quorum(tmp_path, timers=TIMERS, proxies=loop)
        quorum.start_all()
        try:
            await quorum.register_brokers()
            leader = await quorum.leader()
            follower = next(i for i in quorum.nodes if i != leader)
            at_follower = quorum.nodes[follower].address
            admin = await AdminClient.connect_controller(quorum.nodes[leader].address)
            try:
                (made,) = await admin.create_topics([CreatableTopic(name="old")])
                assert made.outcome.error_code == 0
                await _until_seen(at_follower, "old")
                quorum.isolate(follower)
                # The leader keeps its majority with the third node: "old" goes, "new" comes.
                (gone,) = await admin.delete_topics([TopicRef(name="old")])
                assert gone.outcome.error_code == 0
                (fresh,) = await admin.create_topics([CreatableTopic(name="new")])
                assert fresh.outcome.error_code == 0
            finally:
                await admin.close()
            # The follower's image still has "old" and not "new": before the fix it answered
            # TOPIC_ALREADY_EXISTS and UNKNOWN_TOPIC_OR_PARTITION from it.
            assert "old" in await _topics_seen_by(at_follower)
            assert await _create_raw(at_follower, "old") == ErrorCode.NOT_CONTROLLER
            assert await _delete_raw(at_follower, "new") == ErrorCode.NOT_CONTROLLER
            quorum.heal()
            await _until_seen(at_follower, "old", present=False)
            # Healed, the same follower forwards: the leader's answers, for the leader's state.
            assert await _create_raw(at_follower, "old") == 0
            assert await _delete_raw(at_follower, "new") == 0
            assert await _delete_raw(at_follower, "new") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        finally:
            quorum.stop_all()


RETRIABLE = ("RequestTimedOutError", "NotControllerError")
"""kafka-python's names of the errors a leader change answers (REQUEST_TIMED_OUT: the forwarded
write's leader stopped leading before it answered; NOT_CONTROLLER)."""


def test_kafka_python_alter_configs_succeeds_through_every_node(module_quorum: Quorum) -> None:
    from kafka.admin import ConfigResource as KafkaResource
    from kafka.admin import ConfigResourceType as KafkaResourceType
    from kafka.admin import KafkaAdminClient, NewTopic

    first = next(iter(module_quorum.nodes.values()))
    admin = KafkaAdminClient(bootstrap_servers=first.address, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(name="configured", num_partitions=1, replication_factor=1)])
    finally:
        admin.close()
    # kafka-python first describes the topic's configs on some node (a read, answered from
    # that node's committed image): every node must have applied the topic.
    for node in module_quorum.nodes.values():
        asyncio.run(_until_seen(node.address, "configured"))
    failures: list[str] = []
    attempts = retried = 0
    for node in module_quorum.nodes.values():
        admin = KafkaAdminClient(bootstrap_servers=node.address, request_timeout_ms=10_000)
        try:
            for i in range(100):
                attempts += 1
                resource = KafkaResource(
                    KafkaResourceType.TOPIC,
                    "configured",
                    configs={"retention.ms": str(60_000 + i)},
                )
                # {type: {name: 'OK' or the error}}; sent to the least loaded node, any of 3.
                # A retriable answer (the quorum elected another leader meanwhile: a loaded
                # host's) is sent again, as Kafka's own admin client does; once at most.
                result = admin.alter_configs([resource])["topic"]["configured"]
                if any(error in result for error in RETRIABLE):
                    retried += 1
                    result = admin.alter_configs([resource])["topic"]["configured"]
                if result != "OK":
                    failures.append(f"bootstrapped at node {node.node_id}: {result}")
        finally:
            admin.close()
    assert attempts == 300
    assert failures == []
    assert retried <= 3  # a leader change or two, not a quorum that keeps electing
    # The follower answered with the leader's state: every node ends with the last value.
    described = asyncio.run(_retention_everywhere(module_quorum))
    assert described == {str(60_099)}


async def _retention_everywhere(quorum: Quorum) -> set[str]:
    """`retention.ms` of topic "configured" as each node describes it, once it has caught up."""
    values: set[str] = set()
    resource = ConfigResource(type=ConfigResourceType.TOPIC, name="configured")
    for node in quorum.nodes.values():
        client = await AdminClient.connect(node.address)
        try:
            value = None
            for _ in range(100):
                answer = await client.describe_configs([resource])
                value = next(
                    (str(c.value) for c in answer.results[0].configs if c.name == "retention.ms"),
                    None,
                )
                if value == "60099":
                    break
                await asyncio.sleep(0.05)
            values.add(str(value))
        finally:
            await client.close()
    return values


def test_quorum_describe_at_a_followers_client_listener_names_the_leader(
    module_quorum: Quorum,
) -> None:
    """A follower forwards DescribeQuorum to the leader (as Kafka's brokers forward it): an
    operator given one follower's client address is answered, not told to find the leader."""
    leader = asyncio.run(module_quorum.leader())
    follower = next(node for node in module_quorum.nodes.values() if node.node_id != leader)
    described = json.loads(
        mlog("quorum", "describe", "--bootstrap-server", follower.address, "--output", "json")
    )
    assert described["leader_id"] == leader, described
