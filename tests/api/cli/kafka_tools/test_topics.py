"""`mlog kafka-topics`: the lines of Kafka's docs, and every flag, against a real server."""

# Kafka's doc lines and tool invocations are quoted whole, however long.
# ruff: noqa: E501

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafka_tools import kafka, ok, refused, run, shapes
from tests.support.server_thread import running_server

TOPIC_ID = r"[A-Za-z0-9_-]{22}"


def header(topic: str, partitions: int, rf: int, configs: str = "") -> str:
    """kafka-topics.sh's topic line, as a pattern."""
    return (
        f"Topic: {topic}\tTopicId: {TOPIC_ID}\tPartitionCount: {partitions}\t"
        f"ReplicationFactor: {rf}\tConfigs: {configs}"
    )


def partition(topic: str, number: int, rf: int) -> str:
    """kafka-topics.sh's partition line (a tab first), as a pattern."""
    ids = ",".join([r"\d+"] * rf)
    return (
        f"\tTopic: {topic}\tPartition: {number}\tLeader: \\d+\tReplicas: {ids}\tIsr: {ids}\t"
        "Elr: N/A\tLastKnownElr: N/A"
    )


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A server with three brokers: its address."""
    with running_server(tmp_path / "log", brokers=3) as running:
        yield running.address


def test_the_docs_lines_run_and_print_kafkas_formats(server: str) -> None:
    # docs/quickstart.html
    out = ok(
        "bin/kafka-topics.sh --create --topic quickstart-events --bootstrap-server localhost:9092",
        server,
    )
    assert out == "Created topic quickstart-events.\n"
    out = ok(
        "bin/kafka-topics.sh --describe --topic quickstart-events --bootstrap-server localhost:9092",
        server,
    )
    shapes(out, header("quickstart-events", 1, 1), partition("quickstart-events", 0, 1))

    # docs/ops.html "Adding and removing topics" (x=y is the docs' placeholder for a config)
    out = ok(
        "bin/kafka-topics.sh --bootstrap-server localhost:9092 --create --topic my_topic_name \\\n"
        "    --partitions 20 --replication-factor 3 --config retention.ms=1000",
        server,
    )
    assert out.splitlines() == [
        "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
        "('_') could collide. To avoid issues it is best to use either, but not both.",
        "Created topic my_topic_name.",
    ]
    # docs/ops.html "Modifying topics": Kafka's tool prints nothing
    assert (
        ok(
            "bin/kafka-topics.sh --bootstrap-server localhost:9092 --alter --topic my_topic_name \\\n    --partitions 40",
            server,
        )
        == ""
    )
    out = ok(
        "bin/kafka-topics.sh --bootstrap-server localhost:9092 --topic my_topic_name --describe",
        server,
    )
    shapes(
        out,
        header("my_topic_name", 40, 3, "retention.ms=1000"),
        *(partition("my_topic_name", p, 3) for p in range(40)),
    )
    # docs/configuration.html "Topic-Level Configs"
    out = ok(
        "bin/kafka-topics.sh --bootstrap-server localhost:9092 --create --topic my-topic "
        "--partitions 1 \\\n  --replication-factor 1 --config max.message.bytes=64000 "
        "--config flush.messages=1",
        server,
    )
    assert out == "Created topic my-topic.\n"
    # docs/ops.html "Balancing leadership" / "Checking consumer position": every topic
    out = ok("bin/kafka-topics.sh --bootstrap-server localhost:9092 --describe", server)
    shapes(
        out,
        header("my-topic", 1, 1, "flush.messages=1,max.message.bytes=64000"),
        partition("my-topic", 0, 1),
        header("my_topic_name", 40, 3, "retention.ms=1000"),
        *(partition("my_topic_name", p, 3) for p in range(40)),
        header("quickstart-events", 1, 1),
        partition("quickstart-events", 0, 1),
    )
    # docs/ops.html "Adding and removing topics": deleting prints nothing
    assert (
        ok(
            "bin/kafka-topics.sh --bootstrap-server localhost:9092 --delete --topic my_topic_name",
            server,
        )
        == ""
    )
    assert ok("bin/kafka-topics.sh --bootstrap-server localhost:9092 --list", server) == (
        "my-topic\nquickstart-events\n"
    )


def test_every_flag(server: str, tmp_path: Path) -> None:
    b = ["kafka-topics", "--bootstrap-server", server]
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=PLAINTEXT\n")
    code, out, err = run(
        [
            *b,
            "--command-config",
            str(config),
            "--create",
            "--topic",
            "a",
            "--replica-assignment",
            "1:2,2:3,3:1",
        ]
    )
    assert (code, out, err) == (0, "Created topic a.\n", "")
    code, out, _ = run(
        ["kafka-topics.sh", "--bootstrap-controller", server, "--list", "--topic", "a|b"]
    )
    assert (code, out) == (0, "a\n")
    assert run([*b, "--create", "--topic", "a", "--if-not-exists"])[:2] == (0, "")
    assert run([*b, "--create", "--topic", "a"])[0] == 2  # TOPIC_ALREADY_EXISTS
    # --alter with a full assignment: the partitions past the current count are the new ones
    assert run(
        [
            *b,
            "--alter",
            "--topic",
            "a",
            "--partitions",
            "4",
            "--replica-assignment",
            "1:2,2:3,3:1,1:3",
        ]
    )[:2] == (0, "")
    code, out, _ = run(
        [*b, "--describe", "--topic", "a", "--partition-size-limit-per-response", "10"]
    )
    assert out.splitlines()[4].startswith("\tTopic: a\tPartition: 3\tLeader: 1\tReplicas: 1,3\t")
    assert run([*b, "--alter", "--topic", "nosuch", "--partitions", "5", "--if-exists"])[:2] == (
        0,
        "",
    )
    assert run([*b, "--delete", "--topic", "nosuch", "--if-exists"])[:2] == (0, "")
    assert run([*b, "--describe", "--topic", "nosuch", "--if-exists"])[:2] == (0, "")
    topic_id = out.split("TopicId: ")[1].split("\t")[0]
    code, by_id, _ = run([*b, "--describe", "--topic-id", topic_id])
    assert by_id == out
    run(
        [
            *b,
            "--create",
            "--topic",
            "__consumer_offsets",
            "--partitions",
            "1",
            "--replication-factor",
            "1",
        ]
    )
    assert run([*b, "--list"])[1] == "__consumer_offsets\na\n"
    assert run([*b, "--list", "--exclude-internal"])[1] == "a\n"
    run([*b, "--create", "--topic", "c", "--partitions", "1", "--config", "min.insync.replicas=1"])
    assert run([*b, "--describe", "--topics-with-overrides"])[1] == (
        run([*b, "--describe", "--topic", "c"])[1].splitlines()[0] + "\n"
    )
    # Every replica is in sync and led: the reports list nothing; at-min-isr lists `c` (ISR 1).
    for report in (
        "--under-replicated-partitions",
        "--unavailable-partitions",
        "--under-min-isr-partitions",
    ):
        assert run([*b, "--describe", report])[:2] == (0, ""), report
    shapes(
        run([*b, "--describe", "--at-min-isr-partitions", "--topic", "c"])[1], partition("c", 0, 1)
    )


def test_a_fenced_broker_shows_in_the_reports(tmp_path: Path) -> None:
    with running_server(tmp_path / "log", brokers=2) as server:
        b = ["kafka-topics", "--bootstrap-server", server.address]
        run([*b, "--create", "--topic", "t", "--replica-assignment", "1:2"])
        assert run(["--bootstrap-server", server.address, "brokers", "fence", "--id", "1"])[0] == 0
        code, _, err = run(
            [
                *b,
                "--create",
                "--topic",
                "m",
                "--replica-assignment",
                "1:2",
                "--config",
                "min.insync.replicas=2",
            ]
        )
        assert code == 0, err
        # broker 1 is fenced: m's ISR is broker 2 alone, below its min.insync.replicas of 2
        assert run([*b, "--describe", "--under-min-isr-partitions", "--topic", "m"])[1] == (
            "\tTopic: m\tPartition: 0\tLeader: 2\tReplicas: 1,2\tIsr: 2\tElr: N/A\tLastKnownElr: N/A\n"
        )
        assert run([*b, "--describe", "--at-min-isr-partitions", "--topic", "m"])[1] == ""
        under = run([*b, "--describe", "--under-replicated-partitions", "--topic", "t"])[1]
        assert under.startswith("\tTopic: t\tPartition: 0\tLeader: 2\tReplicas: 1,2\tIsr: 2\t")
        assert run([*b, "--describe", "--unavailable-partitions"])[1] == ""
        assert run(["--bootstrap-server", server.address, "brokers", "fence", "--id", "2"])[0] == 0
        gone = run([*b, "--describe", "--unavailable-partitions", "--topic", "t"])[1]
        assert gone.startswith("\tTopic: t\tPartition: 0\tLeader: none\t")


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (
            "bin/kafka-topics.sh --bootstrap-server localhost:9092 --list --describe",
            ["exactly one action"],
        ),
        (
            "bin/kafka-topics.sh --bootstrap-server localhost:9092 --delete",
            ["--delete needs --topic"],
        ),
        (
            "bin/kafka-topics.sh --bootstrap-server localhost:9092 --alter --topic t --partitions 2 --config a=b",
            ["--config", "kafka-configs"],
        ),
        (
            "bin/kafka-topics.sh --bootstrap-server localhost:9092 --describe --partitions 2",
            ["--partitions", "--describe"],
        ),
        (
            "bin/kafka-topics.sh --bootstrap-server localhost:9092 --create --topic t --partitions 0",
            ["partitions must be greater than 0"],
        ),
        (
            "bin/kafka-topics.sh --bootstrap-server localhost:9092 --create --topic t --replica-assignment 1:2 --partitions 3",
            ["--replica-assignment"],
        ),
        (
            "bin/kafka-topics.sh --bootstrap-server localhost:9092 --delete --topic nosuch",
            ["'nosuch' does not exist", "--if-exists"],
        ),
        (
            "bin/kafka-topics.sh --bootstrap-server localhost:9092 --describe --delete-config x",
            ["--delete-config is not supported"],
        ),
        (
            "bin/kafka-topics.sh --bootstrap-server localhost:9092 --descibe",
            ["--descibe", "--describe?"],
        ),
        (
            "bin/kafka-topics.sh --bootstrap-server localhost:9092 --list --topic [",
            ["regular expression"],
        ),
    ],
)
def test_refusals_are_one_line(server: str, line: str, words: list[str]) -> None:
    refused(line, server, *words)


def test_kafka_flags_given_to_mlog_topics_name_both_ways(server: str) -> None:
    code, _, err = run(["topics", "--bootstrap-server", server, "--delete", "--topic", "t"])
    assert code == 2
    assert "--delete is kafka-topics.sh's flag" in err
    assert "`mlog topics delete`" in err and "`mlog kafka-topics --delete`" in err
    assert "invalid choice" not in err
    code, _, err = run(["topics", "--list"])
    assert code == 2 and "`mlog topics list`, or `mlog kafka-topics --list`" in err
    assert kafka("bin/kafka-topics.sh --bootstrap-server localhost:9092 --list", server)[0] == 0


def test_without_a_server_or_a_log_it_asks_for_bootstrap_server(tmp_path: Path) -> None:
    # A runbook's line without --bootstrap-server, and no data directory here either
    code, out, err = run(["--data-dir", str(tmp_path / "none"), "kafka-topics.sh", "--list"])
    assert (code, out) == (2, "")
    assert "kafka-topics needs --bootstrap-server HOST:PORT" in err and err.count("\n") == 1
    assert not (tmp_path / "none").exists()
