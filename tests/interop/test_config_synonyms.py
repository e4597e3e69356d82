"""DescribeConfigs' synonyms as kafka-python reads them: every level, as Kafka lists them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.admin import ConfigResource, KafkaAdminClient
from kafka.admin import ConfigResourceType as KpType

from api import ConfigResourceType, Metadata
from tests.support.server_thread import running_server


@pytest.fixture
def admin(tmp_path: Path) -> Iterator[KafkaAdminClient]:
    with running_server(tmp_path / "log", brokers=1) as server:
        with Metadata.connect(server.address) as md:
            md.create_topic("t", partitions=1)
            md.create_topic("own", partitions=1, configs={"retention.ms": "1000"})
            md.alter_configs(ConfigResourceType.BROKER, "", set={"log.retention.hours": "5"})
        client = KafkaAdminClient(bootstrap_servers=server.address, request_timeout_ms=10_000)
        try:
            yield client
        finally:
            client.close()


def _synonyms(admin: KafkaAdminClient, topic: str, key: str) -> list[tuple[str, str, str]]:
    described = admin.describe_configs(
        [ConfigResource(KpType.TOPIC, topic)], include_synonyms=True, config_filter="all"
    )
    entry = described["topic"][topic][key]
    return [(s["name"], s["value"], s["source"]) for s in entry["synonyms"]]


def test_a_topic_key_lists_the_broker_level_keys_with_their_sources(
    admin: KafkaAdminClient,
) -> None:
    assert _synonyms(admin, "t", "retention.ms") == [
        ("log.retention.hours", "5", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]
    assert _synonyms(admin, "t", "segment.ms") == [("log.roll.hours", "168", "DEFAULT_CONFIG")]
    assert _synonyms(admin, "t", "cleanup.policy") == [
        ("log.cleanup.policy", "delete", "DEFAULT_CONFIG")
    ]


def test_a_topic_override_comes_first(admin: KafkaAdminClient) -> None:
    assert _synonyms(admin, "own", "retention.ms")[0] == (
        "retention.ms",
        "1000",
        "DYNAMIC_TOPIC_CONFIG",
    )
    assert [s[0] for s in _synonyms(admin, "own", "retention.ms")[1:]] == [
        "log.retention.hours",
        "log.retention.hours",
    ]


def test_a_topic_key_on_a_broker_resource_is_taken(tmp_path: Path) -> None:
    """kafkajs' "alter broker configs" spec's request, from kafka-python: AlterConfigs of a
    topic key (cleanup.policy) on a BROKER resource, which Kafka's controller takes. A client
    sends a broker's resource to that node: the server's own id (0), registered as a broker."""
    with running_server(tmp_path / "log", brokers=1) as server:
        with Metadata.connect(server.address) as md:
            md.register_broker(0)
            md.create_topic("t", partitions=1)
        client = KafkaAdminClient(bootstrap_servers=server.address, request_timeout_ms=10_000)
        try:
            answer = client.alter_configs(
                [
                    ConfigResource(KpType.TOPIC, "t", configs={"cleanup.policy": "compact"}),
                    ConfigResource(KpType.BROKER, "0", configs={"cleanup.policy": "delete"}),
                ],
                raise_on_unknown=False,  # kafka-python's own check of the keys, not Kafka's
                incremental=False,  # the legacy AlterConfigs kafkajs sends
            )
            assert answer == {"topic": {"t": "OK"}, "broker": {"0": "OK"}}, answer
            assert _synonyms(client, "t", "cleanup.policy")[0] == (
                "cleanup.policy",
                "compact",
                "DYNAMIC_TOPIC_CONFIG",
            )
        finally:
            client.close()
