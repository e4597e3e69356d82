"""`mlog kafka-acls`: the lines of Kafka's docs, and every flag, against a real server."""

# Kafka's doc lines and tool invocations are quoted whole, however long.
# ruff: noqa: E501

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from replay.controller.authorizer import AuthorizerConfig
from tests.support.kafka_tools import kafka, ok, refused, run
from tests.support.server_thread import running_server

ENTRY = r"\(principal=User:[^,]+, host=[^,]+, operation=[A-Z_]+, permissionType=(ALLOW|DENY)\)"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A server whose PLAINTEXT clients (User:ANONYMOUS) are super users: its address."""
    anonymous = AuthorizerConfig(super_users=frozenset({"User:ANONYMOUS"}))
    with running_server(tmp_path / "log", brokers=1, authorizer=anonymous) as running:
        yield running.address


def pattern(kind: str, name: str, pattern_type: str = "LITERAL") -> str:
    return f"ResourcePattern(resourceType={kind}, name={name}, patternType={pattern_type})"


def blocks(text: str) -> dict[str, list[str]]:
    """kafka-acls.sh's output as {title line: its ACLs}, checking Kafka's exact spacing.

    Each block is `TITLE `pattern`: `, then ` \\t(first)`, `\\t(next)`..., the last ACL with a
    space after it, then an empty line.
    """
    found: dict[str, list[str]] = {}
    for block in text.split(" \n\n"):
        if not block:
            continue
        title, _, rest = block.partition(": \n \t")
        assert title.endswith("`"), block
        entries = rest.split("\n\t")
        for entry in entries:
            assert re.fullmatch(ENTRY, entry), entry
        found[title] = entries
    return found


def entry(principal: str, host: str, operation: str, permission: str = "ALLOW") -> str:
    return (
        f"(principal={principal}, host={host}, operation={operation}, permissionType={permission})"
    )


def test_the_docs_lines_run_and_print_kafkas_formats(server: str) -> None:
    # docs/security.html "Adding or removing a principal as producer or consumer" ...
    out = ok(
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --add --allow-principal User:Bob --allow-principal User:Alice --allow-host 198.51.100.0 --allow-host 198.51.100.1 --operation Read --operation Write --topic Test-topic",
        server,
    )
    found = blocks(out)
    adding = f"Adding ACLs for resource `{pattern('TOPIC', 'Test-topic')}`"
    current = f"Current ACLs for resource `{pattern('TOPIC', 'Test-topic')}`"
    assert list(found) == [adding, current]
    assert len(found[adding]) == 8 and set(found[adding]) == set(found[current])
    assert entry("User:Bob", "198.51.100.1", "WRITE") in found[adding]
    out = ok(
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --add --allow-principal User:'*' --allow-host '*' --deny-principal User:BadBob --deny-host 198.51.100.3 --operation Read --topic Test-topic",
        server,
    )
    assert set(blocks(out)[adding]) == {
        entry("User:*", "*", "READ"),
        entry("User:BadBob", "198.51.100.3", "READ", "DENY"),
    }
    out = ok(
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --add --allow-principal User:Peter --allow-host 198.51.200.1 --producer --topic '*'",
        server,
    )
    assert blocks(out)[f"Adding ACLs for resource `{pattern('TOPIC', '*')}`"] == [
        entry("User:Peter", "198.51.200.1", op) for op in ("WRITE", "DESCRIBE", "CREATE")
    ]
    out = ok(
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --add --allow-principal User:Jane --producer --topic Test- --resource-pattern-type prefixed",
        server,
    )
    assert f"Adding ACLs for resource `{pattern('TOPIC', 'Test-', 'PREFIXED')}`" in blocks(out)
    out = ok(
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --list --topic Test-topic", server
    )
    assert list(blocks(out)) == [current]
    assert len(blocks(out)[current]) == 10
    out = ok(
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --list --topic Test-topic --resource-pattern-type match",
        server,
    )
    assert set(blocks(out)) == {
        current,
        f"Current ACLs for resource `{pattern('TOPIC', '*')}`",
        f"Current ACLs for resource `{pattern('TOPIC', 'Test-', 'PREFIXED')}`",
    }
    out = ok("bin/kafka-acls.sh --bootstrap-server localhost:9092 --list --topic '*'", server)
    assert list(blocks(out)) == [f"Current ACLs for resource `{pattern('TOPIC', '*')}`"]
    # Kafka asks before it removes; mlog asks on stderr and reads the answer
    code, out, err = kafka(
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --remove --allow-principal User:Bob --allow-principal User:Alice --allow-host 198.51.100.0 --allow-host 198.51.100.1 --operation Read --operation Write --topic Test-topic ",
        server,
        stdin="y\n",
    )
    assert code == 0 and "Are you sure" in err
    assert len(blocks(out)[f"Removed ACLs from resource `{pattern('TOPIC', 'Test-topic')}`"]) == 8
    assert len(blocks(out)[current]) == 2
    code, out, err = kafka(
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --remove --allow-principal User:Jane --producer --topic Test- --resource-pattern-type Prefixed",
        server,
        stdin="y\n",
    )
    assert code == 0, err
    assert (
        len(blocks(out)[f"Removed ACLs from resource `{pattern('TOPIC', 'Test-', 'PREFIXED')}`"])
        == 3
    )
    # docs/security.html "Adding or removing a principal as producer or consumer"
    out = ok(
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --add --allow-principal User:Bob --producer --topic Test-topic",
        server,
    )
    assert blocks(out)[adding] == [
        entry("User:Bob", "*", op) for op in ("WRITE", "DESCRIBE", "CREATE")
    ]
    out = ok(
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --add --allow-principal User:Bob --consumer --topic Test-topic --group Group-1 ",
        server,
    )
    found = blocks(out)
    assert found[adding] == [entry("User:Bob", "*", op) for op in ("READ", "DESCRIBE")]
    assert found[f"Adding ACLs for resource `{pattern('GROUP', 'Group-1')}`"] == [
        entry("User:Bob", "*", "READ")
    ]


def test_the_docs_lines_with_a_command_config(server: str, tmp_path: Path) -> None:
    # docs/security.html "Authorization via the AdminClient": the file is the test's own
    conf = tmp_path / "adminclient-configs.conf"
    conf.write_text("security.protocol=PLAINTEXT\n")
    lines = (
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --command-config /tmp/adminclient-configs.conf --add --allow-principal User:Bob --producer --topic Test-topic",
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --command-config /tmp/adminclient-configs.conf --add --allow-principal User:Bob --consumer --topic Test-topic --group Group-1",
        "bin/kafka-acls.sh --bootstrap-server localhost:9092 --command-config /tmp/adminclient-configs.conf --list --topic Test-topic",
    )
    for line in lines:
        out = ok(line.replace("/tmp/adminclient-configs.conf", str(conf)), server)
        assert f"Current ACLs for resource `{pattern('TOPIC', 'Test-topic')}`" in blocks(out)
    refused(
        'bin/kafka-acls.sh --bootstrap-server localhost:9092 --command-config /tmp/adminclient-configs.conf --add --allow-principal User:tokenRequester --operation CreateTokens --user-principal "owner1"'.replace(
            "/tmp/adminclient-configs.conf", str(conf)
        ),
        server,
        "--user-principal is not supported",
    )


def test_every_flag(server: str) -> None:
    b = ["kafka-acls", "--bootstrap-controller", server]
    out = run(
        [
            *b,
            "--add",
            "--allow-principal",
            "User:tx",
            "--producer",
            "--idempotent",
            "--topic",
            "t",
            "--transactional-id",
            "tid",
        ]
    )[1]
    found = blocks(out)
    assert found[f"Adding ACLs for resource `{pattern('TRANSACTIONAL_ID', 'tid')}`"] == [
        entry("User:tx", "*", "WRITE"),
        entry("User:tx", "*", "DESCRIBE"),
    ]
    assert found[f"Adding ACLs for resource `{pattern('CLUSTER', 'kafka-cluster')}`"] == [
        entry("User:tx", "*", "IDEMPOTENT_WRITE")
    ]
    out = run(
        [
            *b,
            "--add",
            "--deny-principal",
            "User:eve",
            "--deny-host",
            "10.0.0.1",
            "--operation",
            "Describe",
            "--group",
            "g",
            "--namespace",
            "team",
        ]
    )[1]
    assert f"Adding ACLs for resource `{pattern('NAMESPACE', 'team')}`" in blocks(out)
    out = run(
        [
            *b,
            "--add",
            "--allow-principal",
            "User:ops",
            "--operation",
            "DescribeConfigs",
            "--cluster",
        ]
    )[1]
    cluster = blocks(out)[f"Current ACLs for resource `{pattern('CLUSTER', 'kafka-cluster')}`"]
    assert entry("User:ops", "*", "DESCRIBE_CONFIGS") in cluster
    out = run([*b, "--list", "--principal", "User:tx"])[1]
    assert out.startswith("ACLs for principal `User:tx`\n")
    assert set(blocks(out.split("\n", 1)[1])) == {
        f"Current ACLs for resource `{pattern('TOPIC', 't')}`",
        f"Current ACLs for resource `{pattern('TRANSACTIONAL_ID', 'tid')}`",
        f"Current ACLs for resource `{pattern('CLUSTER', 'kafka-cluster')}`",
    }
    out = run(
        [
            *b,
            "--remove",
            "--deny-principal",
            "User:eve",
            "--deny-host",
            "10.0.0.1",
            "--group",
            "g",
            "--force",
        ]
    )[1]
    assert f"Removed ACLs from resource `{pattern('GROUP', 'g')}`" in blocks(out)
    out = run([*b, "--list", "--group", "g", "--resource-pattern-type", "any"])[1]
    assert out == ""
    # mlog's --output json does not change a Kafka tool's output
    out = run(["--output", "json", *b, "--list", "--transactional-id", "tid"])[1]
    assert list(blocks(out)) == [
        f"Current ACLs for resource `{pattern('TRANSACTIONAL_ID', 'tid')}`"
    ]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--add", "--list"], ["exactly one action"]),
        (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], ["--group"]),
        (["--add", "--allow-principal", "User:a", "--producer"], ["--topic"]),
        (
            [
                "--add",
                "--allow-principal",
                "User:a",
                "--operation",
                "Read",
                "--consumer",
                "--topic",
                "t",
                "--group",
                "g",
            ],
            ["--operation"],
        ),
        (
            ["--add", "--allow-principal", "User:a", "--idempotent", "--topic", "t"],
            ["--idempotent"],
        ),
        (
            [
                "--add",
                "--allow-principal",
                "User:a",
                "--topic",
                "t",
                "--resource-pattern-type",
                "match",
            ],
            ["'literal' or 'prefixed'"],
        ),
        (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], ["Fly"]),
        (["--list", "--delegation-token", "x"], ["--delegation-token is not supported"]),
        (
            ["--authorizer-properties", "zookeeper.connect=localhost:2181", "--list"],
            ["--authorizer-properties"],
        ),
    ],
)
def test_refusals_are_one_line(server: str, args: list[str], words: list[str]) -> None:
    code, out, err = run(["kafka-acls", "--bootstrap-server", server, *args])
    assert code == 2 and out == "" and err.count("\n") == 1, err
    for word in words:
        assert word in err, err


def test_kafka_flags_given_to_mlog_acls_name_both_ways() -> None:
    code, _, err = run(["acls", "--add", "--allow-principal", "User:a", "--topic", "t"])
    assert code == 2
    assert "--add is kafka-acls.sh's flag: use `mlog acls add`, or `mlog kafka-acls --add`" in err
    assert "--db?" not in err
