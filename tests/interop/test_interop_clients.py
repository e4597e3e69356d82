"""Kafka clients that key connections by node id, against `mlog serve` in a real process.

kafkajs 2.2.4 (tests/interop/kafkajs_admin.js) and librdkafka's C admin API
(tests/interop/rdkafka_admin.c, compiled here against the system's librdkafka-dev, 2.0.2 on
Debian 12) both broke when every node id was advertised at one address: kafkajs closed its
connection at the next metadata refresh once racked brokers were registered, and librdkafka
before 2.1 never reached the controller. The server now lists only itself, the controller,
under its own node id (docs/server.md, "Nodes"); these tests drive the calls that failed, with
racked brokers registered, plus kafka-python and confluent-kafka on the same process.

`make test` installs what they need (`npm ci` in tests/interop, and `librdkafka-dev` when its
header is missing). A missing tool skips its test with the reason, except under CI=true, where
it is a failure: CI must run them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
from kafka.admin import KafkaAdminClient
from kafka.admin import NewTopic as KpNewTopic

from api.cli.main import main
from tests.support.paths import INTEROP
from tests.support.quorum_processes import TIMERS, Quorum
from tests.support.server_process import ServeProcess, serve_process

# kafkajs under node and a compiled librdkafka program: real processes too (the directory
# marks every test `interop`).
pytestmark = pytest.mark.process

RDKAFKA_HEADER = Path("/usr/include/librdkafka/rdkafka.h")
CLIENT_TIMEOUT = 120


def _missing(reason: str) -> None:
    """Skip for `reason`, or fail under CI=true, where every client must be tested."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: every interop client must be tested)")
    pytest.skip(f"{reason}; `make test` installs it")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """`mlog serve` on a free port over a directory with three racked brokers (ids 1-3)."""
    base = tmp_path_factory.mktemp("interop")
    data_dir = base / "data"
    for broker_id, rack in ((1, "r1"), (2, "r0"), (3, "r1")):
        args = ["--data-dir", str(data_dir), "brokers", "register", "--id", str(broker_id)]
        assert main([*args, "--rack", rack]) == 0
    with serve_process(data_dir, base / "serve.log") as server:
        yield server
        # A server that does not stop on SIGTERM is killed on the way out of the block.
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.stop()


def _run(args: list[str], *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=CLIENT_TIMEOUT, check=False
    )


def test_kafkajs_keeps_its_connection_across_metadata_refreshes(served: ServeProcess) -> None:
    if shutil.which("node") is None:
        _missing("node is not installed")
    if not (INTEROP / "node_modules" / "kafkajs" / "package.json").exists():
        _missing("kafkajs is not installed in tests/interop (npm ci)")
    version = json.loads((INTEROP / "node_modules" / "kafkajs" / "package.json").read_text())
    assert version["version"] == "2.2.4"
    done = _run(["node", "kafkajs_admin.js", served.address], cwd=INTEROP)
    assert done.returncode == 0, done.stderr + served.stderr.read_text()[-2000:]
    seen = json.loads(done.stdout)
    # Both creates succeed: the second one follows a metadata refresh, where kafkajs used to
    # find node 0's rack changed and close the shared connection ("Closed connection").
    assert seen["createdFirst"] is True and seen["createdSecond"] is True
    host, port = served.address.rsplit(":", 1)
    assert seen["controller"] == 0
    assert seen["brokers"] == [{"nodeId": 0, "host": host, "port": int(port)}]
    one, two = seen["topics"]
    assert [len(p["replicas"]) for p in one["partitions"]] == [2, 2]
    assert [len(p["replicas"]) for p in two["partitions"]] == [3]
    # Leaders and replicas are the registered brokers the controller placed them on.
    replicas = {r for t in seen["topics"] for p in t["partitions"] for r in p["replicas"]}
    assert replicas == {1, 2, 3}
    assert seen["cleanupPolicy"] == ["delete"]
    # Kafka's DEFAULT_CONFIG synonyms are the hours keys (its .ms keys have no default).
    assert seen["synonyms"] == {
        "retention.ms": ["5:log.retention.hours=168"],
        "segment.ms": ["5:log.roll.hours=168"],
    }
    assert "kjs-one" not in seen["listed"] and "kjs-two" in seen["listed"]


def test_kafkajs_admin_reads_its_own_writes_at_a_quorum_follower(tmp_path: Path) -> None:
    """kafkajs bootstrapped at a follower of a 3-node quorum: its creates and its delete are
    forwarded to the leader, and its very next fetchTopicMetadata and listTopics, answered from
    the follower's own image, already see them: the follower relays a forwarded write's answer
    only once its image holds the leader's commit. Before, listTopics right after deleteTopics
    sometimes still listed the deleted topic."""
    if shutil.which("node") is None:
        _missing("node is not installed")
    if not (INTEROP / "node_modules" / "kafkajs" / "package.json").exists():
        _missing("kafkajs is not installed in tests/interop (npm ci)")
    quorum = Quorum(tmp_path, timers=TIMERS)
    quorum.start_all()
    try:
        asyncio.run(quorum.register_brokers())
        leader = asyncio.run(quorum.leader())
        follower = next(n for n in quorum.nodes.values() if n.node_id != leader)
        done = _run(["node", "kafkajs_admin.js", follower.address], cwd=INTEROP)
    finally:
        quorum.stop_all()
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["createdFirst"] is True and seen["createdSecond"] is True
    assert seen["controller"] == follower.node_id  # a client listener names its own node
    assert sorted(t["name"] for t in seen["topics"]) == ["kjs-one", "kjs-two"]
    assert "kjs-one" not in seen["listed"] and "kjs-two" in seen["listed"]


def test_librdkafka_reaches_the_controller_and_the_broker(
    served: ServeProcess, tmp_path: Path
) -> None:
    compiler = shutil.which("gcc")
    if compiler is None:
        _missing("gcc is not installed")
    if not RDKAFKA_HEADER.exists():
        _missing(f"librdkafka-dev is not installed ({RDKAFKA_HEADER} is missing)")
    program = tmp_path / "rdkafka_admin"
    source = INTEROP / "rdkafka_admin.c"
    built = _run([str(compiler), "-Wall", "-Werror", "-o", str(program), str(source), "-lrdkafka"])
    assert built.returncode == 0, built.stderr
    done = _run([str(program), served.address, "rdk-topic", "0"])
    assert done.returncode == 0, done.stdout + done.stderr + served.stderr.read_text()[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("librdkafka ")
    # CreateTopics and DeleteTopics go to the controller; DescribeConfigs of broker 0 goes to
    # node 0, this server, which answers the cluster-wide configs.
    assert "create rdk-topic ok" in lines
    assert "config broker 0 delete.topic.enable=true" in lines
    assert "delete rdk-topic ok" in lines


def test_kafka_python_and_confluent_see_one_stable_node(served: ServeProcess) -> None:
    kp = KafkaAdminClient(bootstrap_servers=served.address, request_timeout_ms=10_000)
    try:
        kp.create_topics([KpNewTopic("kp-racked", 2, 2)])
        cluster = kp.describe_cluster()
        kp.create_topics([KpNewTopic("kp-racked-2", 1, 3)])
    finally:
        kp.close()
    assert [(b["broker_id"], b["rack"]) for b in cluster["brokers"]] == [(0, None)]
    assert cluster["controller_id"] == 0
    ck = AdminClient({"bootstrap.servers": served.address})
    ck.create_topics([NewTopic("ck-racked", 3, 2)])["ck-racked"].result(timeout=20)
    described = ck.describe_configs([ConfigResource(ResourceType.BROKER, "0")])
    (configs,) = [future.result(timeout=20) for future in described.values()]
    assert configs["delete.topic.enable"].value == "true"
    listed = ck.list_topics(timeout=20)
    assert list(listed.brokers) == [0]
    leaders = {p.leader for p in listed.topics["ck-racked"].partitions.values()}
    assert leaders <= {1, 2, 3}
    ck.delete_topics(["ck-racked"])["ck-racked"].result(timeout=20)
