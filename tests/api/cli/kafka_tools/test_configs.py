"""`mlog kafka-configs`: the lines of Kafka's docs, and every flag, against a real server."""

# Kafka's doc lines and tool invocations are quoted whole, however long.
# ruff: noqa: E501

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafka_tools import ok, refused, run, shapes
from tests.support.server_thread import running_server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A server with brokers 0..2 and a topic `my-topic`: its address."""
    with running_server(tmp_path / "log", brokers=2) as running:
        address = running.address
        assert run(["--bootstrap-server", address, "brokers", "register", "--id", "0"])[0] == 0
        assert (
            run(["kafka-topics", "--bootstrap-server", address, "--create", "--topic", "my-topic"])[
                0
            ]
            == 0
        )
        yield address


def config(name: str, value: str, source: str) -> str:
    """kafka-configs.sh's line of one config, as a pattern."""
    return f"  {name}={value} sensitive=false synonyms=\\{{{source}:{name}={value}\\}}"


def test_the_docs_lines_run_and_print_kafkas_formats(server: str) -> None:
    # docs/configuration.html "Topic-Level Configs"
    out = ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics --entity-name my-topic\n  --alter --add-config max.message.bytes=128000",
        server,
    )
    assert out == "Completed updating config for topic my-topic.\n"
    out = ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics --entity-name my-topic --describe",
        server,
    )
    shapes(
        out,
        "Dynamic configs for topic my-topic are:",
        config("max.message.bytes", "128000", "DYNAMIC_TOPIC_CONFIG"),
    )
    out = ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092  --entity-type topics --entity-name my-topic\n  --alter --delete-config max.message.bytes",
        server,
    )
    assert out == "Completed updating config for topic my-topic.\n"
    # docs/ops.html "Modifying topics" (x=y is the docs' placeholder for a config)
    ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics --entity-name my-topic --alter --add-config retention.ms=1000",
        server,
    )
    out = ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics --entity-name my-topic --alter --delete-config retention.ms",
        server,
    )
    assert out == "Completed updating config for topic my-topic.\n"
    # docs/configuration.html "Updating Broker Configs" (a key mlog's brokers have)
    out = ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-name 0 --alter --add-config log.cleaner.min.cleanable.ratio=0.4",
        server,
    )
    assert out == "Completed updating config for broker 0.\n"
    out = ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-name 0 --describe",
        server,
    )
    shapes(
        out,
        "Dynamic configs for broker 0 are:",
        config("log.cleaner.min.cleanable.ratio", "0.4", "DYNAMIC_BROKER_CONFIG"),
    )
    out = ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-name 0 --alter --delete-config log.cleaner.min.cleanable.ratio",
        server,
    )
    assert out == "Completed updating config for broker 0.\n"
    out = ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-default --alter --add-config log.cleaner.min.cleanable.ratio=0.3",
        server,
    )
    assert out == "Completed updating default config for brokers in the cluster.\n"
    out = ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-default --describe",
        server,
    )
    shapes(
        out,
        "Default configs for brokers in the cluster are:",
        config("log.cleaner.min.cleanable.ratio", "0.3", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
    )
    # docs/ops.html: every broker, then every topic
    out = ok(
        "bin/kafka-configs.sh --describe --bootstrap-server localhost:9092 --entity-type brokers",
        server,
    )
    shapes(
        out,
        *(f"Dynamic configs for broker {b} are:" for b in (0, 1, 2)),
        "Default configs for brokers in the cluster are:",
        config("log.cleaner.min.cleanable.ratio", "0.3", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
    )
    out = ok(
        "bin/kafka-configs.sh --describe --bootstrap-server localhost:9092 --entity-type topics",
        server,
    )
    shapes(out, "Dynamic configs for topic my-topic are:")


def test_users_scram_credentials(server: str) -> None:
    # docs/security.html "Creating SCRAM Credentials", with --bootstrap-server for ZooKeeper
    line = "bin/kafka-configs.sh --zookeeper localhost:2182 --zk-tls-config-file zk_tls_config.properties --alter --add-config 'SCRAM-SHA-256=[iterations=8192,password=alice-secret],SCRAM-SHA-512=[password=alice-secret]' --entity-type users --entity-name alice"
    refused(line, server, "--zookeeper", "--bootstrap-server")
    zk = "--zookeeper localhost:2182 --zk-tls-config-file zk_tls_config.properties"
    via_server = line.replace(zk, "--bootstrap-server localhost:9092")
    assert ok(via_server, server) == "Completed updating config for user alice.\n"
    out = ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --describe --entity-type users --entity-name alice",
        server,
    )
    assert out == (
        "SCRAM credential configs for user-principal 'alice' are "
        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"
    )
    out = ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --alter --delete-config 'SCRAM-SHA-512' --entity-type users --entity-name alice",
        server,
    )
    assert out == "Completed updating config for user alice.\n"
    out = ok(
        "bin/kafka-configs.sh --bootstrap-server localhost:9092 --describe --entity-type users",
        server,
    )
    assert (
        out
        == "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n"
    )


def test_every_flag(server: str, tmp_path: Path) -> None:
    b = ["kafka-configs.sh", "--bootstrap-server", server]
    props = tmp_path / "add.properties"
    props.write_text("retention.ms=2000\n")
    client = tmp_path / "client.properties"
    client.write_text("security.protocol=PLAINTEXT\n")
    assert run(
        [
            *b,
            "--command-config",
            str(client),
            "--topic",
            "my-topic",
            "--alter",
            "--add-config-file",
            str(props),
            "--add-config",
            "cleanup.policy=[compact,delete]",
        ]
    )[:2] == (0, "Completed updating config for topic my-topic.\n")
    _code, out, _ = run(
        ["kafka-configs", "--bootstrap-controller", server, "--topic", "my-topic", "--describe"]
    )
    shapes(
        out,
        "Dynamic configs for topic my-topic are:",
        config("cleanup.policy", "compact,delete", "DYNAMIC_TOPIC_CONFIG"),
        config("retention.ms", "2000", "DYNAMIC_TOPIC_CONFIG"),
    )
    out = run([*b, "--topic", "my-topic", "--describe", "--all"])[1]
    assert out.startswith("All configs for topic my-topic are:\n")
    assert config("segment.bytes", "1073741824", "DEFAULT_CONFIG")[2:].replace("\\", "") in out
    assert (
        run(
            [
                *b,
                "--broker",
                "1",
                "--alter",
                "--add-config",
                "log.cleaner.min.cleanable.ratio=0.2",
                "--force",
            ]
        )[1]
        == "Completed updating config for broker 1.\n"
    )
    assert (
        run([*b, "--broker-defaults", "--describe"])[1]
        == "Default configs for brokers in the cluster are:\n"
    )
    assert (
        run([*b, "--user", "bob", "--alter", "--add-config", "SCRAM-SHA-512=[password=b]"])[0] == 0
    )
    assert run([*b, "--user", "bob", "--describe"])[1].endswith("SCRAM-SHA-512=iterations=4096\n")
    assert (
        run(
            [*b, "--topic", "my-topic", "--alter", "--delete-config", "retention.ms,cleanup.policy"]
        )[0]
        == 0
    )
    assert (
        run([*b, "--topic", "my-topic", "--describe"])[1]
        == "Dynamic configs for topic my-topic are:\n"
    )


@pytest.mark.parametrize(
    ("line", "words"),
    [
        # docs/ops.html "Quotas": mlog keeps no client quotas
        (
            "bin/kafka-configs.sh --bootstrap-server localhost:9092 --alter --add-config 'producer_byte_rate=1024,consumer_byte_rate=2048,request_percentage=200' --entity-type users --entity-name user1",
            ["producer_byte_rate", "quotas"],
        ),
        (
            "bin/kafka-configs.sh --bootstrap-server localhost:9092 --alter --add-config 'producer_byte_rate=1024,consumer_byte_rate=2048,request_percentage=200' --entity-type clients --entity-name clientA",
            ["--entity-type clients", "quotas"],
        ),
        (
            "bin/kafka-configs.sh --bootstrap-server localhost:9092 --alter --add-config 'producer_byte_rate=1024,consumer_byte_rate=2048,request_percentage=200' --entity-type users --entity-default",
            ["--entity-default", "quotas"],
        ),
        (
            "bin/kafka-configs.sh --bootstrap-server localhost:9092 --describe --entity-type users --entity-type clients",
            ["--entity-type"],
        ),
        # docs/configuration.html: a broker key mlog's brokers do not have
        (
            "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-default --alter --add-config log.cleaner.threads=2",
            ["log.cleaner.threads"],
        ),
        (
            "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-name 0 --alter --delete-config log.cleaner.threads",
            ["Invalid config(s): log.cleaner.threads"],
        ),
        (
            "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type brokers --entity-name x --describe",
            ["valid integer broker id"],
        ),
        (
            "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics --entity-name my-topic --alter --add-config retention.ms",
            ['"key=val"'],
        ),
        (
            "bin/kafka-configs.sh --bootstrap-server localhost:9092 --entity-type topics --entity-name my-topic",
            ["exactly one action"],
        ),
        (
            "bin/kafka-configs.sh --bootstrap-server localhost:9092 --client-defaults --describe",
            ["--client-defaults is not supported"],
        ),
        (
            "bin/kafka-configs.sh --bootstrap-server localhost:9092 --broker-logger 1 --describe",
            ["--broker-logger is not supported"],
        ),
        (
            "bin/kafka-configs.sh --bootstrap-server localhost:9092 --topic my-topic --entity-type topics --describe",
            ["specific entity flags"],
        ),
    ],
)
def test_refusals_are_one_line(server: str, line: str, words: list[str]) -> None:
    refused(line, server, *words)


@pytest.mark.parametrize(
    "flags",
    [
        ["--client", "c1"],
        ["--ip", "10.0.0.1"],
        ["--user-defaults"],
        ["--ip-defaults"],
        ["--group", "g"],
        ["--client-metrics", "m"],
        ["--zk-tls-config-file", "zk.properties"],
    ],
)
def test_the_flags_of_what_mlog_does_not_keep_are_refused(server: str, flags: list[str]) -> None:
    code, out, err = run(["kafka-configs", "--bootstrap-server", server, "--describe", *flags])
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert f"{flags[0]} is not supported" in err


def test_kafka_flags_given_to_mlog_configs_name_both_ways() -> None:
    code, _, err = run(
        [
            "configs",
            "--entity-type",
            "topics",
            "--entity-name",
            "t",
            "--alter",
            "--add-config",
            "k=v",
        ]
    )
    assert code == 2
    assert "kafka-configs.sh's flag" in err and "mlog kafka-configs" in err
    assert "--command-config?" not in err


def test_kafka_flags_given_to_mlog_users_point_at_its_verbs() -> None:
    code, _, err = run(
        [
            "users",
            "--alter",
            "--add-config",
            "SCRAM-SHA-256=[password=x]",
            "--entity-type",
            "users",
            "--entity-name",
            "alice",
        ]
    )
    assert code == 2
    assert (
        "--alter is kafka-configs.sh's flag: use `mlog users scram-set`, or `mlog kafka-configs --alter`"
        in err
    )
