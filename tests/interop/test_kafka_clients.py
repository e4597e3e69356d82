"""Real Kafka admin clients (kafka-python, confluent-kafka) against `MetadataServer`.

Each client gets its own server on a fresh log; the tests in a class share it and use
distinct topic names. Error codes are the ones a Kafka broker gives for the same requests.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    NewPartitions,
    NewTopic,
)
from confluent_kafka.admin import ConfigResource as CkResource
from kafka import errors as kerrors
from kafka.admin import ConfigResource as KpResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic

from api.server.server import MetadataServer
from metadata_log.reader import LogReader
from records.uuids import Uuid
from replay.loader import load_image
from tests.support.server_thread import running_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetadataServer]:
    with running_server(tmp_path_factory.mktemp("server") / "log", brokers=3) as running:
        yield running


# ----------------------------------------------------------------------------- kafka-python


@pytest.fixture(scope="module")
def kp(server: MetadataServer) -> Iterator[KafkaAdminClient]:
    admin = KafkaAdminClient(bootstrap_servers=server.address, request_timeout_ms=10_000)
    yield admin
    admin.close()


def test_kafka_python_creates_with_defaults_counts_and_manual_assignment(
    kp: KafkaAdminClient, server: MetadataServer
) -> None:
    result = kp.create_topics(
        [
            KpNewTopic("kp-defaults", num_partitions=-1, replication_factor=-1),
            KpNewTopic("kp-counts", num_partitions=4, replication_factor=2),
            KpNewTopic("kp-manual", replica_assignments={0: [1, 2], 1: [2, 3]}),
        ]
    )
    assert [t["error_code"] for t in result["topics"]] == [0, 0, 0]
    assert {"kp-defaults", "kp-counts", "kp-manual"} <= set(kp.list_topics())
    described = {t["name"]: t for t in kp.describe_topics(["kp-counts", "kp-manual"])}
    counts = described["kp-counts"]
    assert len(counts["partitions"]) == 4
    assert all(len(p["replica_nodes"]) == 2 for p in counts["partitions"])
    image_topic = server.service.image.topics.get_by_name("kp-counts")
    assert image_topic is not None
    assert uuid.UUID(counts["topic_id"]).bytes == image_topic.topic_id.bytes
    manual = described["kp-manual"]["partitions"]
    assert [p["replica_nodes"] for p in sorted(manual, key=lambda p: p["partition_index"])] == [
        [1, 2],
        [2, 3],
    ]


@pytest.mark.parametrize(
    ("topic", "code"),
    [
        (KpNewTopic("bad/name", 1, 1), 17),  # INVALID_TOPIC_EXCEPTION
        (KpNewTopic("kp-zero", 0, 1), 37),  # INVALID_PARTITIONS
        (KpNewTopic("kp-rf", 1, 9), 38),  # INVALID_REPLICATION_FACTOR
        (
            KpNewTopic("kp-assign", replica_assignments={0: [1, 1]}),
            39,
        ),  # INVALID_REPLICA_ASSIGNMENT
        (KpNewTopic("kp-config", 1, 1, topic_configs={"no.such.key": "1"}), 40),  # INVALID_CONFIG
        (KpNewTopic("__cluster_metadata", 1, 1), 42),  # INVALID_REQUEST, as Kafka's controller
    ],
)
def test_kafka_python_sees_kafkas_error_codes(kp: KafkaAdminClient, topic: Any, code: int) -> None:
    with pytest.raises(kerrors.KafkaError) as caught:
        kp.create_topics([topic])
    assert caught.value.errno == code


def test_kafka_python_sees_kafkas_internal_topics_as_internal(kp: KafkaAdminClient) -> None:
    kp.create_topics(
        [KpNewTopic("__consumer_offsets", 1, 1), KpNewTopic("__transaction_state", 1, 1)]
    )
    kp.create_topics([KpNewTopic("kp-not-internal", 1, 1)])
    described = kp.describe_topics(["__consumer_offsets", "__transaction_state", "kp-not-internal"])
    assert {t["name"]: t["is_internal"] for t in described} == {
        "__consumer_offsets": True,
        "__transaction_state": True,
        "kp-not-internal": False,
    }


def test_kafka_python_exists_partitions_configs_and_delete(kp: KafkaAdminClient) -> None:
    kp.create_topics([KpNewTopic("kp-life", 2, 1)])
    with pytest.raises(kerrors.TopicAlreadyExistsError):
        kp.create_topics([KpNewTopic("kp-life", 2, 1)])
    kp.create_partitions({"kp-life": KpNewPartitions(5)})
    assert len(kp.describe_topics(["kp-life"])[0]["partitions"]) == 5
    with pytest.raises(kerrors.InvalidPartitionsError):
        kp.create_partitions({"kp-life": KpNewPartitions(3)})

    kp.alter_configs(
        [KpResource(ConfigResourceType.TOPIC, "kp-life", configs={"retention.ms": "1000"})]
    )
    described = kp.describe_configs(
        [KpResource(ConfigResourceType.TOPIC, "kp-life")], config_filter="all"
    )
    entries = described["topic"]["kp-life"]
    assert entries["retention.ms"]["value"] == "1000"
    assert entries["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    assert entries["cleanup.policy"]["config_source"] == "DEFAULT_CONFIG"

    deleted = kp.delete_topics(["kp-life"])
    assert deleted["topics"][0]["error_code"] == 0
    assert "kp-life" not in kp.list_topics()
    with pytest.raises(kerrors.UnknownTopicOrPartitionError):
        kp.delete_topics(["kp-life"])


def test_kafka_python_deletes_by_topic_id(kp: KafkaAdminClient, server: MetadataServer) -> None:
    kp.create_topics([KpNewTopic("kp-by-id", 1, 1)])
    topic = server.service.image.topics.get_by_name("kp-by-id")
    assert topic is not None
    kp.delete_topics([uuid.UUID(bytes=topic.topic_id.bytes)])
    assert server.service.image.topics.get_by_name("kp-by-id") is None
    with pytest.raises(kerrors.UnknownTopicIdError):
        kp.delete_topics([uuid.UUID(bytes=Uuid.random().bytes)])


def test_kafka_python_describes_the_cluster(kp: KafkaAdminClient, server: MetadataServer) -> None:
    cluster = kp.describe_cluster()
    assert cluster["cluster_id"] == "test-cluster"
    assert cluster["controller_id"] == server.node_id
    # The one node a client can reach: this server, under its own node id (KIP-919's answer).
    assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [
        (server.node_id, server.port)
    ]


def test_kafka_python_describes_the_metadata_quorum(
    kp: KafkaAdminClient, server: MetadataServer
) -> None:
    # A single server is a quorum of one voter, itself the leader (docs/server.md).
    described = kp.describe_metadata_quorum()
    (topic,) = described["topics"]
    assert topic["topic_name"] == "__cluster_metadata"
    (partition,) = topic["partitions"]
    assert partition["error"] is None
    assert partition["leader_id"] == server.node_id
    assert partition["leader_epoch"] == server.service.log.epoch
    assert 0 < partition["high_watermark"] <= server.service.log.end_offset
    (voter,) = partition["current_voters"]
    assert voter["replica_id"] == server.node_id
    assert voter["log_end_offset"] == partition["high_watermark"]
    assert voter["last_caught_up_timestamp"] > 0
    assert partition["observers"] == []


# ----------------------------------------------------------------------------- confluent-kafka


@pytest.fixture(scope="module")
def ck(server: MetadataServer) -> AdminClient:
    return AdminClient({"bootstrap.servers": server.address})


def _result(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: future.result(timeout=20) for key, future in futures.items()}


def _error_code(future: Any) -> int:
    with pytest.raises(KafkaException) as caught:
        future.result(timeout=20)
    error: KafkaError = caught.value.args[0]
    return int(error.code())


def test_confluent_creates_describes_with_ids_and_lists(
    ck: AdminClient, server: MetadataServer
) -> None:
    _result(
        ck.create_topics(
            [
                NewTopic("ck-defaults"),
                NewTopic("ck-counts", 3, 2),
                NewTopic("ck-manual", 2, replica_assignment=[[1, 2], [3, 1]]),
            ]
        )
    )
    listed = ck.list_topics(timeout=20).topics
    assert {"ck-defaults", "ck-counts", "ck-manual"} <= set(listed)
    assert len(listed["ck-counts"].partitions) == 3
    described = _result(ck.describe_topics(TopicCollection(["ck-counts", "ck-manual"])))
    counts = described["ck-counts"]
    topic = server.service.image.topics.get_by_name("ck-counts")
    assert topic is not None
    got = counts.topic_id
    most, least = got.get_most_significant_bits(), got.get_least_significant_bits()
    assert ((most % 2**64) << 64 | (least % 2**64)).to_bytes(16, "big") == topic.topic_id.bytes
    manual = described["ck-manual"].partitions
    assert [[n.id for n in p.replicas] for p in manual] == [[1, 2], [3, 1]]


def test_confluent_sees_kafkas_error_codes(ck: AdminClient) -> None:
    _result(ck.create_topics([NewTopic("ck-exists", 1, 1)]))
    futures = ck.create_topics(
        [
            NewTopic("ck-exists", 1, 1),
            NewTopic("bad name", 1, 1),
            NewTopic("ck-rf", 1, 7),
            NewTopic("ck-config", 1, 1, config={"retention.ms": "soon"}),
        ]
    )
    assert _error_code(futures["ck-exists"]) == 36
    assert _error_code(futures["bad name"]) == 17
    assert _error_code(futures["ck-rf"]) == 38
    assert _error_code(futures["ck-config"]) == 40
    assert _error_code(ck.create_partitions([NewPartitions("ck-exists", 1)])["ck-exists"]) == 37
    assert _error_code(ck.delete_topics(["ck-missing"])["ck-missing"]) == 3


def test_confluent_partitions_configs_and_delete(ck: AdminClient) -> None:
    _result(ck.create_topics([NewTopic("ck-life", 1, 1)]))
    _result(ck.create_partitions([NewPartitions("ck-life", 4)]))
    assert len(ck.list_topics("ck-life", timeout=20).topics["ck-life"].partitions) == 4

    resource = CkResource("topic", "ck-life")
    _result(
        ck.incremental_alter_configs(
            [
                CkResource(
                    "topic",
                    "ck-life",
                    incremental_configs=[
                        ConfigEntry(
                            "retention.ms", "5000", incremental_operation=AlterConfigOpType.SET
                        )
                    ],
                )
            ]
        )
    )
    configs = _result(ck.describe_configs([resource]))
    entries = next(iter(configs.values()))
    assert entries["retention.ms"].value == "5000"
    assert not entries["retention.ms"].is_read_only
    assert entries["segment.bytes"].is_default

    _result(ck.delete_topics(["ck-life"]))
    assert "ck-life" not in ck.list_topics(timeout=20).topics


def test_every_acknowledged_change_is_in_the_log(server: MetadataServer, ck: AdminClient) -> None:
    _result(ck.create_topics([NewTopic("ck-durable", 2, 1)]))
    with LogReader.open(server.service.log.directory) as log:
        replayed = load_image(log)
    assert replayed.topics.get_by_name("ck-durable") is not None
