"""A three-node quorum of real `mlog serve` processes: kill -9, SIGSTOP, corrupted tails.

Each test writes topics through the leader (following it across failures), does its damage,
lets the quorum heal and then checks every node's log: every acknowledged write is there,
exactly once, and the entries at each offset are identical on every node.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from pathlib import Path

import pytest

from api.client import AdminClient
from api.client.connection import ClientError
from tests.support.quorum_processes import (
    TIMERS,
    Quorum,
    Writer,
    check_logs,
    converge,
    mlog,
    write_until,
)
from tests.support.tcp_proxy import proxy_loop

pytestmark = pytest.mark.timeout(240)

"""Half of Kafka's defaults: the same protocol, shorter tests."""


async def test_kill_9_of_the_leader_loses_no_acknowledged_write(quorum: Quorum) -> None:
    writer = Writer(quorum)
    try:
        await write_until(writer, 20)
        for _ in range(3):
            leader = await quorum.leader()
            quorum.kill(leader)
            await write_until(writer, 10)
            quorum.start(leader)
        await converge(quorum, writer)
    finally:
        await writer.close()
    quorum.stop_all()
    check_logs(quorum, writer.acknowledged)


async def test_all_three_killed_then_restarted(quorum: Quorum) -> None:
    writer = Writer(quorum)
    try:
        await write_until(writer, 20)
        for node_id in quorum.nodes:
            quorum.kill(node_id)
        quorum.start_all()
        await write_until(writer, 10)
        await converge(quorum, writer)
    finally:
        await writer.close()
    quorum.stop_all()
    check_logs(quorum, writer.acknowledged)


async def test_a_paused_leader_is_replaced_and_steps_down_when_resumed(quorum: Quorum) -> None:
    writer = Writer(quorum)
    try:
        await write_until(writer, 10)
        paused = await quorum.leader()
        quorum.kill(paused, signal.SIGSTOP)
        await write_until(writer, 10)  # through a new leader
        quorum.kill(paused, signal.SIGCONT)
        await converge(quorum, writer)
        # One leader, and the resumed node knows it (it may have won a later election itself).
        named = {i: await quorum.controller_named_by(i) for i in quorum.nodes}
        leaders = {i for i, controller in named.items() if controller == i}
        assert len(leaders) == 1, named
        assert named[paused] in leaders, named
    finally:
        await writer.close()
    quorum.stop_all()
    check_logs(quorum, writer.acknowledged)


async def test_a_corrupted_follower_tail_stops_that_node_only_until_repaired(
    quorum: Quorum,
) -> None:
    writer = Writer(quorum)
    try:
        await write_until(writer, 20)
        leader = await quorum.leader()
        victim = next(i for i in quorum.nodes if i != leader)
        quorum.kill(victim, signal.SIGTERM)
        node = quorum.nodes[victim]
        segment = sorted((node.data_dir / "log").glob("*.avro"))[-1]
        data = bytearray(segment.read_bytes())
        data[-40] ^= 0x01  # inside the last block: a CRC failure, not a torn tail
        segment.write_bytes(bytes(data))
        quorum.start(victim)
        await write_until(writer, 10)  # the majority goes on
        deadline = time.monotonic() + 30
        while quorum.nodes[victim].running and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert not quorum.nodes[victim].running, "a damaged log must not be served"
        told = re.search(r"mlog log truncate --after-offset (\d+)", node.stderr.read_text())
        assert told, node.stderr.read_text()[-2000:]  # the line says which command repairs
        repaired = mlog(
            "log",
            "truncate",
            "--data-dir",
            str(node.data_dir),
            "--after-offset",
            told.group(1),
            "--reason",
            "test: a flipped bit",
        )
        assert "quorum-state" in repaired  # it forgets its vote: it catches up before voting
        quorum.start(victim)
        await converge(quorum, writer)
    finally:
        await writer.close()
    quorum.stop_all()
    check_logs(quorum, writer.acknowledged)


async def test_a_leader_cut_off_by_the_network_is_replaced_and_rejoins(tmp_path: Path) -> None:
    with proxy_loop() as proxies:
        q = Quorum(tmp_path, timers=TIMERS, proxies=proxies)
        q.start_all()
        writer = Writer(q)
        try:
            await q.register_brokers()
            await write_until(writer, 10)
            old = await q.leader()
            q.isolate(old)
            await write_until(writer, 10)  # through a leader elected by the other two
            assert await q.leader() != old
            q.heal()
            await converge(q, writer)
        finally:
            await writer.close()
            q.stop_all()
    check_logs(q, writer.acknowledged)


def test_clients_we_did_not_write_and_the_cli_find_the_leader(quorum: Quorum) -> None:
    from confluent_kafka.admin import AdminClient as ConfluentAdmin
    from confluent_kafka.admin import NewTopic as ConfluentTopic
    from kafka.admin import KafkaAdminClient, NewTopic

    leader = asyncio.run(quorum.leader())
    follower = next(n for i, n in quorum.nodes.items() if i != leader)
    # kafka-python sends CreateTopics to the controller its Metadata names: the leader.
    admin = KafkaAdminClient(bootstrap_servers=follower.address, request_timeout_ms=10_000)
    try:
        admin.create_topics(
            [NewTopic(name="by-kafka-python", num_partitions=1, replication_factor=1)]
        )
    finally:
        admin.close()
    confluent = ConfluentAdmin({"bootstrap.servers": follower.address})
    futures = confluent.create_topics([ConfluentTopic("by-confluent", 1, 1)])
    futures["by-confluent"].result(20)
    # The CLI through a follower: writes go to the leader, describe names it.
    mlog("topics", "create", "--topic", "by-mlog", "--bootstrap-server", follower.address)
    listed = mlog("topics", "list", "--bootstrap-server", follower.address)
    for name in ("by-kafka-python", "by-confluent", "by-mlog"):
        assert name in listed
    everyone = ",".join(n.address for n in quorum.nodes.values())
    described = mlog("quorum", "describe", "--bootstrap-server", everyone)
    assert f"LeaderId: {leader}" in described
    assert described.count("voter") == 3


async def test_a_wiped_follower_rejoins_and_catches_up_before_it_votes(quorum: Quorum) -> None:
    import shutil

    writer = Writer(quorum)
    try:
        await write_until(writer, 20)
        leader = await quorum.leader()
        wiped = next(i for i in quorum.nodes if i != leader)
        node = quorum.nodes[wiped]
        quorum.kill(wiped)
        shutil.rmtree(node.data_dir)
        quorum.start(wiped)  # refused: not formatted
        assert node.process is not None and node.process.wait(60) == 2
        assert "mlog quorum format --rejoin" in node.stderr.read_text()
        told = quorum.format(node, "--rejoin")
        assert "catches up" in told
        quorum.start(wiped)
        await write_until(writer, 10)
        await converge(quorum, writer)
        # Caught up, it votes again once it has written its quorum-state (its log's end can
        # equal the leader's a little before: it rejoins from a leader of the newest epoch it
        # heard). Then, with the leader gone, it and the third elect a new one.
        deadline = time.monotonic() + 30
        while not (node.data_dir / "quorum-state").exists():
            assert time.monotonic() < deadline, quorum.stderr_tails()
            await asyncio.sleep(0.1)
        gone = await quorum.leader()
        quorum.kill(gone)
        await write_until(writer, 5)
        quorum.start(gone)
        await converge(quorum, writer)
    finally:
        await writer.close()
    quorum.stop_all()
    check_logs(quorum, writer.acknowledged)


async def test_controllers_authenticate_each_other_with_certificates(tmp_path: Path) -> None:
    """mTLS on the client listener too, and an authorizer: the controllers elect and forward
    over their own mTLS listener whatever the ACLs say, and a peer without a certificate
    cannot even connect to a client listener."""
    import trustme

    from api.security.client_config import client_security

    ca = trustme.CA()
    ca_path, key_path = tmp_path / "ca.pem", tmp_path / "controller.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    cert = ca.issue_cert("127.0.0.1", "localhost", common_name="controller")
    cert.private_key_and_cert_chain_pem.write_to_path(str(key_path))
    keys: dict[str, int | str] = {
        **TIMERS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(key_path),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_path),
        "ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        "super.users": "User:controller",
    }
    security = client_security(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": str(ca_path),
            "ssl.keystore.location": str(key_path),
            "ssl.keystore.type": "PEM",
        },
        source="test",
    )
    q = Quorum(tmp_path / "q", timers=keys, protocol="SSL", security=security)
    q.start_all()
    writer = Writer(q)
    try:
        await q.register_brokers()
        await write_until(writer, 10)
        leader = await q.leader()
        q.kill(leader)
        await write_until(writer, 10)  # elected over authenticated links
        q.start(leader)
        await converge(q, writer)
        # A peer without a certificate cannot even connect to a controller.
        with pytest.raises(ClientError):
            await AdminClient.connect(q.nodes[leader].address, timeout_ms=3000)
    finally:
        await writer.close()
        q.stop_all()
    check_logs(q, writer.acknowledged)
    for node in q.nodes.values():
        assert "CLUSTER_AUTHORIZATION_FAILED" not in node.stderr.read_text()
