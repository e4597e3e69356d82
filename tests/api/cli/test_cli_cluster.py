"""The cluster commands (brokers, topics, configs, leaders, partitions, image) end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from metadata_log.reader import LogReader
from tests.support.cli import mlog, ok


def as_json(data_dir: Path, *args: str) -> Any:
    return json.loads(ok(data_dir, "--output", "json", *args))


def entries(data_dir: Path) -> int:
    with LogReader.open(data_dir / "log") as log:
        return log.end_offset


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    for broker_id, rack in ((1, "a"), (2, "b"), (3, "a"), (4, "b")):
        ok(tmp_path, "brokers", "register", "--id", str(broker_id), "--rack", rack)
    return tmp_path


def test_brokers_register_list_fence_and_unregister(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(cluster, "brokers", "register", "--id", "5", "--endpoint", "h:9092", "--endpoint", "h:9093")
    brokers = as_json(cluster, "brokers", "list")
    assert isinstance(brokers, list)
    assert [b["broker_id"] for b in brokers] == [1, 2, 3, 4, 5]
    assert brokers[4]["endpoints"] == ["h:9092", "h:9093"]
    ok(cluster, "brokers", "fence", "--id", "5")
    assert "fenced" in ok(cluster, "brokers", "list").splitlines()[5]
    before = entries(cluster)
    assert "already fenced; nothing to do" in ok(cluster, "brokers", "fence", "--id", "5")
    assert entries(cluster) == before
    ok(cluster, "brokers", "unfence", "--id", "5")
    ok(cluster, "brokers", "shutdown", "--id", "5")
    ok(cluster, "brokers", "unregister", "--id", "5")
    assert len(as_json(cluster, "brokers", "list")) == 4
    before = entries(cluster)
    code, _ = mlog(cluster, "brokers", "fence", "--id", "42")
    assert code == 2
    assert "broker 42" in capsys.readouterr().err.lower()
    assert entries(cluster) == before


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--endpoint", "nohost"], "HOST:PORT"),
        (["--endpoint", "h:99999"], "port"),
        (["--id", "-1"], "broker id"),
    ],
)
def test_bad_broker_flags_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    args = ["brokers", "register", *(["--id", "1"] if "--id" not in flags else []), *flags]
    code, _ = mlog(tmp_path, *args)
    assert code == 2
    assert message.lower() in capsys.readouterr().err.lower()
    assert not (tmp_path / "log").exists() or entries(tmp_path) <= 1


def test_topic_lifecycle_delete_and_recreate_gets_a_new_id(cluster: Path) -> None:
    created = ok(
        cluster,
        "topics", "create", "--topic", "orders", "--partitions", "3",
        "--replication-factor", "2", "--config", "retention.ms=1000",
    )  # fmt: skip
    first = as_json(cluster, "topics", "describe", "--topic", "orders")
    assert isinstance(first, list)
    topic = first[0]
    assert topic["topic_id"] in created
    assert len(topic["topic_id"]) == 22
    assert topic["configs"] == {"retention.ms": "1000"}
    assert [len(p["replicas"]) for p in topic["partitions"]] == [2, 2, 2]
    for partition in topic["partitions"]:
        assert partition["leader"] == partition["replicas"][0]
        assert partition["state"] == "OnlinePartition"
        # Rack-aware: the two replicas of each partition are in different racks.
        assert len({r % 2 for r in partition["replicas"]}) == 2
    by_id = as_json(cluster, "topics", "describe", "--topic-id", topic["topic_id"])
    assert by_id == first
    ok(cluster, "topics", "delete", "--topic-id", topic["topic_id"])
    ok(cluster, "topics", "create", "--topic", "orders", "--partitions", "1")
    second = as_json(cluster, "topics", "describe", "--topic", "orders")
    assert isinstance(second, list)
    assert second[0]["topic_id"] != topic["topic_id"]
    assert second[0]["configs"] == {}  # the old incarnation's configs went with it
    listed = as_json(cluster, "topics", "list")
    assert [t["topic"] for t in listed] == ["orders"]


def test_topic_errors_exit_2_name_the_kafka_code_and_append_nothing(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(cluster, "topics", "create", "--topic", "a.b", "--partitions", "1")
    before = entries(cluster)
    cases = [
        (["topics", "create", "--topic", "a.b"], "TOPIC_ALREADY_EXISTS (36)"),
        (["topics", "create", "--topic", "a_b"], "INVALID_TOPIC_EXCEPTION (17)"),
        (["topics", "create", "--topic", ".."], "INVALID_TOPIC_EXCEPTION (17)"),
        (["topics", "create", "--topic", "x", "--replication-factor", "5"], "(38)"),
        (["topics", "create", "--topic", "x", "--replica-assignment", "1:1"], "(39)"),
        (["topics", "create", "--topic", "x", "--replica-assignment", "1:9"], "(39)"),
        (["topics", "create", "--topic", "x", "--config", "retention.ms=x"], "(40)"),
        (["topics", "create", "--topic", "x", "--config", "nope=1"], "INVALID_CONFIG (40)"),
        (["topics", "delete", "--topic", "missing"], "UNKNOWN_TOPIC_OR_PARTITION (3)"),
        (
            ["topics", "delete", "--topic", "a.b", "--topic-id", "AAAAAAAAAAAAAAAAAAAAAQ"],
            "INCONSISTENT_TOPIC_ID (103)",
        ),
        (["topics", "add-partitions", "--topic", "a.b", "--partitions", "1"], "(37)"),
        (["leaders", "elect", "--topic", "a.b", "--partition", "0"], "ELECTION_NOT_NEEDED (84)"),
    ]
    for args, message in cases:
        code, _ = mlog(cluster, *args)
        err = capsys.readouterr().err
        assert code == 2, args
        assert message in err, (args, err)
        assert err.count("\n") == 1, err  # one line, no traceback
    assert entries(cluster) == before


def test_validate_only_and_cluster_defaults(cluster: Path) -> None:
    ok(cluster, "topics", "create", "--topic", "v", "--validate-only")
    assert as_json(cluster, "topics", "list") == []
    ok(cluster, "configs", "alter", "--cluster", "--set", "num.partitions=3")
    ok(cluster, "configs", "alter", "--cluster", "--set", "default.replication.factor=2")
    ok(cluster, "topics", "create", "--topic", "d")
    (topic,) = as_json(cluster, "topics", "describe", "--topic", "d")
    assert (topic["partition_count"], topic["replication_factor"]) == (3, 2)
    ok(cluster, "configs", "alter", "--cluster", "--set", "delete.topic.enable=false")
    code, _ = mlog(cluster, "topics", "delete", "--topic", "d")
    assert code == 2


def test_add_partitions_and_manual_assignment(cluster: Path) -> None:
    ok(cluster, "topics", "create", "--topic", "m", "--replica-assignment", "1:2,3:4")
    ok(cluster, "topics", "add-partitions", "--topic", "m", "--partitions", "4")
    (topic,) = as_json(cluster, "topics", "describe", "--topic", "m")
    replicas = [p["replicas"] for p in topic["partitions"]]
    assert replicas[:2] == [[1, 2], [3, 4]]
    assert len(replicas) == 4 and all(len(r) == 2 for r in replicas)
    ok(cluster, "topics", "add-partitions", "--topic", "m", "--partitions", "5",
       "--replica-assignment", "4:1")  # fmt: skip
    (topic,) = as_json(cluster, "topics", "describe", "--topic", "m")
    assert topic["partitions"][4]["replicas"] == [4, 1]


def test_configs_describe_alter_with_sources(cluster: Path) -> None:
    ok(cluster, "topics", "create", "--topic", "c")
    ok(cluster, "configs", "alter", "--topic", "c", "--set", "cleanup.policy=compact",
       "--set", "retention.ms=5000")  # fmt: skip
    ok(cluster, "configs", "alter", "--topic", "c", "--append", "cleanup.policy=delete")
    ok(cluster, "configs", "alter", "--cluster", "--set", "log.roll.hours=2")
    configs = {
        c["name"]: c for c in as_json(cluster, "configs", "describe", "--topic", "c", "--all")
    }
    assert configs["cleanup.policy"]["value"] == "compact,delete"
    assert configs["cleanup.policy"]["source"] == "TOPIC_CONFIG"
    assert configs["segment.ms"]["value"] == "7200000"
    assert configs["segment.ms"]["source_name"] == "log.roll.hours"
    assert configs["segment.bytes"]["source"] == "DEFAULT_CONFIG"
    ok(cluster, "configs", "alter", "--topic", "c", "--delete", "retention.ms")
    # Without --all: every value that is not Kafka's default, wherever it comes from.
    overrides = as_json(cluster, "configs", "describe", "--topic", "c")
    assert [c["name"] for c in overrides] == ["cleanup.policy", "segment.ms"]
    ok(cluster, "configs", "alter", "--broker", "2", "--set", "num.partitions=7")
    broker = {c["name"]: c for c in as_json(cluster, "configs", "describe", "--broker", "2")}
    assert broker["num.partitions"]["source"] == "DYNAMIC_BROKER_CONFIG"


def test_a_topic_key_on_the_cluster_is_taken_with_a_note(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    ok(cluster, "configs", "alter", "--cluster", "--set", "cleanup.policy=compact")
    err = capsys.readouterr().err
    assert "cleanup.policy is a topic key" in err and "log.cleanup.policy" in err
    ok(cluster, "topics", "create", "--topic", "plain")
    described = as_json(cluster, "configs", "describe", "--topic", "plain", "--all")
    [policy] = [c for c in described if c["name"] == "cleanup.policy"]
    assert policy["value"] == "delete"  # no topic default: that is log.cleanup.policy
    ok(cluster, "configs", "alter", "--cluster", "--set", "num.partitions=2")
    assert capsys.readouterr().err == ""


def test_describe_during_a_reassignment_shows_kafkas_replication_factor(cluster: Path) -> None:
    ok(cluster, "topics", "create", "--topic", "m", "--replica-assignment", "1:2:3")
    ok(cluster, "brokers", "fence", "--id", "4")
    ok(cluster, "partitions", "reassign", "--topic", "m", "--partition", "0", "--replicas", "2,3,4")
    (topic,) = as_json(cluster, "topics", "describe", "--topic", "m")
    assert topic["partitions"][0]["replicas"] == [2, 3, 4, 1]
    # As Kafka's TopicCommand: the replicas minus the ones being added, not 4.
    assert topic["replication_factor"] == 3
    assert "ReplicationFactor: 3\t" in ok(cluster, "topics", "describe", "--topic", "m")


def test_reassign_elect_and_image_show(cluster: Path) -> None:
    ok(cluster, "topics", "create", "--topic", "r", "--replica-assignment", "1:2")
    ok(cluster, "partitions", "reassign", "--topic", "r", "--partition", "0", "--replicas", "3,4")
    (topic,) = as_json(cluster, "topics", "describe", "--topic", "r")
    partition = topic["partitions"][0]
    assert (partition["replicas"], partition["leader"]) == ([3, 4], 3)
    ok(cluster, "brokers", "fence", "--id", "3")
    ok(cluster, "brokers", "unfence", "--id", "3")
    shown = as_json(cluster, "image", "show", "/topics/byName/r/0")
    assert isinstance(shown, dict)
    leaf = shown["/topics/byName/r/0"]
    assert leaf["leader"] == 4 and leaf["replicas"] == [3, 4]
    tree = ok(cluster, "image", "show")
    assert "/brokers/1" in tree and "/topics/byId/" in tree and "/provenance" in tree
    code, _ = mlog(cluster, "image", "show", "/topics/byName/nope")
    assert code == 2


def test_restarted_cli_sees_the_same_image(cluster: Path) -> None:
    ok(cluster, "topics", "create", "--topic", "s", "--partitions", "2")
    first = ok(cluster, "image", "show")
    assert ok(cluster, "image", "show") == first


def test_leaders_elect_exits_2_when_a_partition_fails(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(cluster, "topics", "create", "--topic", "le", "--replica-assignment", "1:2")
    # Fenced and back: broker 1 is live again but out of the ISR, so it cannot lead yet.
    ok(cluster, "brokers", "fence", "--id", "1")
    ok(cluster, "brokers", "unfence", "--id", "1")
    capsys.readouterr()
    code, out = mlog(cluster, "--output", "json", "leaders", "elect")
    assert code == 2
    (result,) = json.loads(out)
    assert (result["topic"], result["partition"], result["error_code"]) == ("le", 0, 80)
    err = capsys.readouterr().err
    assert "leader election failed for 1 of 1 partition(s), e.g. le-0" in err
    code, out = mlog(cluster, "leaders", "elect")
    assert code == 2 and out.startswith("le-0: failed: ")


def test_leaders_elect_flags(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok(cluster, "topics", "create", "--topic", "lf", "--replica-assignment", "1:2")
    (topic,) = as_json(cluster, "topics", "describe", "--topic", "lf")
    capsys.readouterr()
    code, _ = mlog(cluster, "leaders", "elect", "--partition", "0")
    assert code == 2
    assert "--partition needs --topic NAME or --topic-id ID" in capsys.readouterr().err
    code, _ = mlog(cluster, "leaders", "elect", "--topic-id", topic["topic_id"])
    assert code == 2
    assert "--topic-id needs --partition N" in capsys.readouterr().err
    code, _ = mlog(cluster, "leaders", "elect", "--topic-id", topic["topic_id"], "--partition", "0")
    assert code == 2  # already led by its preferred replica
    assert "ELECTION_NOT_NEEDED (84)" in capsys.readouterr().err
    assert ok(cluster, "leaders", "elect", "--type", "unclean") == (
        "every partition already has a live leader\n"
    )
    assert ok(cluster, "leaders", "elect") == "every partition already has its preferred leader\n"
