"""`mlog kafka-features`: Kafka's doc lines and every flag against a real server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.kafka_tools import refused, run, shapes
from tests.support.server_thread import running_server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    with running_server(tmp_path / "log", brokers=0) as running:
        yield running.address


def feature(name: str, low: int, high: int, level: int) -> str:
    return (
        f"Feature: {name}\tSupportedMinVersion: {low}\tSupportedMaxVersion: {high}\t"
        f"FinalizedVersionLevel: {level}\tEpoch: \\d+"
    )


def test_the_docs_lines_are_refused_saying_what_mlogs_levels_are(server: str) -> None:
    # docs/upgrade.html: Kafka's releases are not mlog's levels (and a server is needed)
    refused("bin/kafka-features.sh upgrade --metadata 3.3", server, "--bootstrap-server")
    code, out, err = run(
        ["kafka-features.sh", "--bootstrap-server", server, "upgrade", "--metadata", "3.3"]
    )
    assert code == 2 and "Unknown metadata.version 3.3" in err and "numbers" in err
    assert out == " `metadata` flag is deprecated and may be removed in a future release.\n"


def test_every_flag(server: str, tmp_path: Path) -> None:
    b = ["kafka-features", "--bootstrap-server", server]
    shapes(
        run([*b, "describe"])[1],
        feature("kraft.version", 0, 1, 0),
        feature("metadata.version", 1, 2, 2),
    )
    client = tmp_path / "client.properties"
    client.write_text("security.protocol=PLAINTEXT\n")
    code, out, _ = run(
        [
            "kafka-features.sh",
            "--command-config",
            str(client),
            "--bootstrap-controller",
            server,
            "upgrade",
            "--feature",
            "kraft.version=1",
            "--dry-run",
        ]
    )
    assert (code, out) == (0, "kraft.version can be upgraded to 1.\n")
    assert (
        run([*b, "upgrade", "--metadata", "2"])[1].splitlines()[1]
        == "metadata.version was upgraded to 2."
    )
    code, out, err = run([*b, "downgrade", "--feature", "metadata.version=1"])
    assert code == 2 and out.startswith("Could not downgrade metadata.version to 1. ")
    assert err == "mlog: error: 1 out of 1 operation(s) failed.\n"
    code, out, err = run(
        [*b, "downgrade", "--feature", "metadata.version=1", "--unsafe", "--dry-run"]
    )
    assert out.startswith("Can not downgrade metadata.version to 1. ")
    assert (
        run([*b, "disable", "--feature", "kraft.version", "--dry-run"])[1]
        == "kraft.version can be disabled.\n"
    )
    assert (
        run([*b, "disable", "--feature", "kraft.version", "--unsafe"])[1]
        == "kraft.version was disabled.\n"
    )
    shapes(
        run([*b, "describe"])[1],
        feature("kraft.version", 0, 1, 0),
        feature("metadata.version", 1, 2, 2),
    )
    for args, words in (
        (["upgrade"], ["at least one feature to upgrade"]),
        (["upgrade", "--feature", "kraft.version"], ["equals sign not found"]),
        (["upgrade", "--feature", "kraft.version=x"], ["as a short"]),
        (
            ["upgrade", "--feature", "kraft.version=1", "--feature", "kraft.version=1"],
            ["more than once"],
        ),
        (["upgrade", "--release-version", "3.9-IV0"], ["--release-version is not supported"]),
        (["version-mapping"], ["version-mapping is not supported"]),
        (["feature-dependencies", "--feature", "metadata.version=2"], ["not supported"]),
    ):
        code, out, err = run([*b, *args])
        assert code == 2 and err.count("\n") == 1, (args, err)
        for word in words:
            assert word in err, err


def test_kafka_flags_given_to_mlog_features_name_both_ways() -> None:
    code, _, err = run(["features", "upgrade", "--release-version", "3.9-IV0"])
    assert code == 2 and "--release-version is kafka-features.sh's flag" in err
