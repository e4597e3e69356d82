"""Config keys: Kafka's types, ranges and defaults, canonical values and resolution order."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pytest

from replay.controller.config_defs import (
    CLUSTER_CONFIGS,
    KAFKA_DEFAULT_SYNONYMS,
    TOPIC_CONFIGS,
    ConfigSource,
    ResolvedConfig,
    cluster_value,
    config_synonyms,
    resolve_cluster_configs,
    resolve_topic_configs,
    validate_cluster_config,
    validate_topic_config,
)
from replay.controller.config_values import InvalidConfigError


@pytest.mark.parametrize(
    ("name", "value", "canonical"),
    [
        ("retention.ms", " 1000 ", "1000"),
        ("retention.ms", "-1", "-1"),
        ("cleanup.policy", "compact, delete", "compact,delete"),
        ("cleanup.policy", "", ""),
        ("preallocate", "TRUE", "true"),
        ("min.cleanable.dirty.ratio", "0.25", "0.25"),
        ("leader.replication.throttled.replicas", "0:1,1:2", "0:1,1:2"),
        ("leader.replication.throttled.replicas", "*", "*"),
        ("compression.type", "zstd", "zstd"),
    ],
)
def test_valid_topic_values_are_stored_canonically(name: str, value: str, canonical: str) -> None:
    assert validate_topic_config(name, value) == canonical


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "retention.ms",
            "abc",
            "Invalid value abc for configuration retention.ms: Not a number of type LONG",
        ),
        ("retention.ms", "-2", "Value must be at least -1"),
        ("segment.bytes", "100", "Value must be at least 1048576"),
        ("segment.bytes", str(2**31), "Not a number of type INT"),
        ("min.cleanable.dirty.ratio", "1.5", "no less than 0 and no more than 1"),
        ("min.cleanable.dirty.ratio", "nan", "Not a number of type DOUBLE"),
        ("cleanup.policy", "shred", "String must be one of: compact, delete"),
        ("cleanup.policy", "compact,,delete", "a list item is empty"),
        ("preallocate", "yes", "either true or false"),
        ("leader.replication.throttled.replicas", "0-1", "[partitionId]:[brokerId]"),
        ("no.such.key", "1", "Unknown topic config name: no.such.key"),
    ],
)
def test_invalid_topic_values_say_why(name: str, value: str, message: str) -> None:
    with pytest.raises(InvalidConfigError, match=re.escape(message)):
        validate_topic_config(name, value)


def test_cluster_keys_include_defaults_and_topic_synonyms() -> None:
    assert validate_cluster_config("num.partitions", "3") == "3"
    with pytest.raises(InvalidConfigError, match="at least 1"):
        validate_cluster_config("default.replication.factor", "0")
    with pytest.raises(
        InvalidConfigError, match=re.escape("Unknown broker config name: retention.ms")
    ):
        validate_cluster_config("retention.ms", "1")
    assert "log.retention.ms" in CLUSTER_CONFIGS
    assert "log.retention.hours" in CLUSTER_CONFIGS
    assert cluster_value({}, "num.partitions") == 1
    assert cluster_value({"delete.topic.enable": "false"}, "delete.topic.enable") is False
    # Every synonym a topic key names is a known cluster key.
    for definition in TOPIC_CONFIGS.values():
        for synonym, _ in definition.synonyms:
            assert synonym in CLUSTER_CONFIGS, synonym


def test_topic_resolution_nearest_source_wins() -> None:
    def resolved(
        overrides: Mapping[str, str],
        cluster: Mapping[str, str],
        chain: Sequence[tuple[str, Mapping[str, str]]] = (),
    ) -> dict[str, ResolvedConfig]:
        return {c.name: c for c in resolve_topic_configs(overrides, cluster, chain)}

    default = resolved({}, {})["retention.ms"]
    assert (default.value, default.source) == (str(7 * 86_400_000), ConfigSource.DEFAULT_CONFIG)
    hours = resolved({}, {"log.retention.hours": "2"})["retention.ms"]
    assert (hours.value, hours.source_name) == ("7200000", "log.retention.hours")
    assert hours.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    ms = resolved({}, {"log.retention.hours": "2", "log.retention.ms": "5"})["retention.ms"]
    assert (ms.value, ms.source_name) == ("5", "log.retention.ms")
    chain = [("a.b", {"retention.ms": "7"}), ("a", {"retention.ms": "8"})]
    inherited = resolved({}, {"log.retention.ms": "5"}, chain)["retention.ms"]
    assert (inherited.value, inherited.source, inherited.source_name) == (
        "7",
        ConfigSource.NAMESPACE_CONFIG,
        "a.b",
    )
    own = resolved({"retention.ms": "9"}, {"log.retention.ms": "5"}, chain)["retention.ms"]
    assert (own.value, own.source) == ("9", ConfigSource.TOPIC_CONFIG)
    names = [c.name for c in resolve_topic_configs({}, {})]
    assert names == sorted(TOPIC_CONFIGS)


def test_cluster_resolution_broker_then_cluster_then_default() -> None:
    configs = {
        c.name: c for c in resolve_cluster_configs({"num.partitions": "3"}, {"num.partitions": "4"})
    }
    assert (configs["num.partitions"].value, configs["num.partitions"].source) == (
        "4",
        ConfigSource.DYNAMIC_BROKER_CONFIG,
    )
    configs = {c.name: c for c in resolve_cluster_configs({"num.partitions": "3"})}
    assert configs["num.partitions"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert configs["delete.topic.enable"].source == ConfigSource.DEFAULT_CONFIG
    assert configs["delete.topic.enable"].value == "true"


def _synonyms_of(name: str, cluster: Mapping[str, str]) -> list[tuple[str, str | None, str]]:
    [described] = [c for c in resolve_topic_configs({}, cluster) if c.name == name]
    return [
        (s.name, s.value, s.source.name)
        for s in config_synonyms(described, topic=True, cluster=cluster)
    ]


def test_topic_synonyms_name_kafkas_default_where_kafka_keeps_it() -> None:
    """Kafka's `log.retention.ms` and `log.roll.ms` have no default: its DEFAULT_CONFIG
    synonyms are the hours keys, in hours (a client comparing with Kafka's list sees them)."""
    assert _synonyms_of("retention.ms", {}) == [("log.retention.hours", "168", "DEFAULT_CONFIG")]
    assert _synonyms_of("segment.ms", {}) == [("log.roll.hours", "168", "DEFAULT_CONFIG")]
    assert _synonyms_of("cleanup.policy", {}) == [
        ("log.cleanup.policy", "delete", "DEFAULT_CONFIG")
    ]
    # Set cluster-wide, every level in Kafka's order: ms, minutes, hours, then the default.
    cluster = {"log.retention.hours": "5", "log.retention.ms": "1000", "log.roll.hours": "2"}
    assert _synonyms_of("retention.ms", cluster) == [
        ("log.retention.ms", "1000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.retention.hours", "5", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.retention.hours", "168", "DEFAULT_CONFIG"),
    ]
    assert _synonyms_of("segment.ms", cluster) == [
        ("log.roll.hours", "2", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ("log.roll.hours", "168", "DEFAULT_CONFIG"),
    ]
    # Every special default names a broker key of the topic key's own synonyms, or Kafka's
    # one more (the jitter hours, the flush scheduler), with Kafka's default in its units.
    for topic_key, (broker_key, value) in KAFKA_DEFAULT_SYNONYMS.items():
        definition = TOPIC_CONFIGS[topic_key]
        factor = dict(definition.synonyms).get(broker_key)
        if factor is not None:
            assert definition.default == str(int(value) * factor), topic_key
