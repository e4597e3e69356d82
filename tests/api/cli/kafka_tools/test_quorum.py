"""`mlog kafka-metadata-quorum describe`: Kafka's doc lines against a one-voter server.

add-controller and remove-controller need a dynamic quorum of processes:
tests/system/test_kafka_metadata_quorum.py.
"""

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
    """A single server, node 4: a quorum of one voter."""
    with running_server(tmp_path / "log", node_id=4) as running:
        yield running.address


def test_the_docs_lines_run_and_print_kafkas_formats(server: str) -> None:
    # docs/ops.html "Metadata Quorum Tool"
    out = ok(
        "bin/kafka-metadata-quorum.sh --bootstrap-server localhost:9092 describe --status", server
    )
    shapes(
        out,
        "ClusterId:              test-cluster",
        "LeaderId:               4",
        r"LeaderEpoch:            \d+",
        r"HighWatermark:          \d+",
        "MaxFollowerLag:         0",
        "MaxFollowerLagTimeMs:   0",
        r'CurrentVoters:          \[\{"id": 4, "directoryId": null\}\]',
        r"CurrentObservers:       \[\]",
    )
    # docs/ops.html "Monitoring": the replication table (Kafka's padded, tab-ended columns)
    out = ok(
        "bin/kafka-metadata-quorum.sh --bootstrap-server localhost:9092 describe --replication",
        server,
    )
    shapes(
        out,
        r"NodeId\tDirectoryId           \tLogEndOffset\tLag\tLastFetchTimestamp\tLastCaughtUpTimestamp\tStatus\t",
        r"4     \tAAAAAAAAAAAAAAAAAAAAAA\t\d+ +\t0  \t\d{13}     \t\d{13}        \tLeader\t",
    )
    refused("bin/kafka-metadata-quorum.sh describe --replication", server, "--bootstrap-server")


def test_every_flag(server: str, tmp_path: Path) -> None:
    client = tmp_path / "client.properties"
    client.write_text("security.protocol=PLAINTEXT\n")
    code, out, err = run(
        [
            "kafka-metadata-quorum",
            "--command-config",
            str(client),
            "--bootstrap-controller",
            server,
            "describe",
            "--replication",
            "--human-readable",
        ]
    )
    assert code == 0, err
    row = out.splitlines()[1].split("\t")
    assert row[0].strip() == "4" and row[6] == "Leader"
    assert row[4].strip().endswith(" ms ago") and row[5].strip().endswith(" ms ago")
    b = ["kafka-metadata-quorum", "--bootstrap-server", server]
    for args, words in (
        (["describe"], ["One of --status or --replication"]),
        (["describe", "--status", "--replication"], ["Only one of --status or --replication"]),
        (["describe", "--status", "--human-readable"], ["--human-readable", "--replication"]),
        (["add-controller"], ["configuration file of the controller", "--command-config"]),
        (
            ["--command-config", "controller.properties", "add-controller", "--dry-run"],
            ["--dry-run is not supported"],
        ),
        (["remove-controller", "--controller-id", "1"], ["--controller-directory-id"]),
        (
            ["remove-controller", "-i", "-1", "-d", "AAAAAAAAAAAAAAAAAAAAAA"],
            ["Invalid negative --controller-id: -1"],
        ),
        (
            ["remove-controller", "-i", "1", "-d", "nope"],
            ["Failed to parse --controller-directory-id"],
        ),
    ):
        code, out, err = run([*b, *args])
        assert code == 2 and out == "" and err.count("\n") == 1, (args, err)
        for word in words:
            assert word in err, err
    # --dry-run checks its input and sends nothing: the voter stays
    code, out, _ = run(
        [
            *b,
            "remove-controller",
            "--controller-id",
            "4",
            "--controller-directory-id",
            "AAAAAAAAQACAAAAAAAAAAQ",
            "--dry-run",
        ]
    )
    assert (code, out) == (
        0,
        "DRY RUN of removing  KRaft controller 4 with directory id AAAAAAAAQACAAAAAAAAAAQ\n",
    )
    assert '"id": 4' in run([*b, "describe", "--status"])[1]


def test_kafka_flags_given_to_mlog_quorum_name_both_ways() -> None:
    code, _, err = run(["quorum", "describe", "--status"])
    assert code == 2
    assert (
        "--status is kafka-metadata-quorum.sh's flag: use `mlog quorum describe`, or `mlog kafka-metadata-quorum --status`"
        in err
    )
