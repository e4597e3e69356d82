"""Every numeric config key's range as Kafka documents it: its least value taken, one less not."""

from __future__ import annotations

import pytest

from replay.controller.config_defs import (
    CLUSTER_CONFIGS,
    TOPIC_CONFIGS,
    cluster_bool,
    cluster_int,
    cluster_value,
    resolve_topic_configs,
    validate_cluster_config,
    validate_topic_config,
)
from replay.controller.config_values import ConfigType, InvalidConfigError

TOPIC_MINIMA = {
    "delete.retention.ms": 0,
    "file.delete.delay.ms": 0,
    "flush.messages": 1,
    "flush.ms": 0,
    "index.interval.bytes": 0,
    "local.retention.bytes": -2,
    "local.retention.ms": -2,
    "max.compaction.lag.ms": 1,
    "max.message.bytes": 0,
    "message.timestamp.after.max.ms": 0,
    "message.timestamp.before.max.ms": 0,
    "min.cleanable.dirty.ratio": 0,
    "min.compaction.lag.ms": 0,
    "min.insync.replicas": 1,
    "retention.ms": -1,
    "segment.bytes": 1024 * 1024,
    "segment.index.bytes": 4,
    "segment.jitter.ms": 0,
    "segment.ms": 1,
}
"""Kafka's topic-level configs ("Valid Values: [N,...]")."""

CLUSTER_MINIMA = {
    "default.replication.factor": 1,
    "delete.topic.partition.interval.delay.ms": 1,
    "log.cleaner.delete.retention.ms": 0,
    "log.cleaner.max.compaction.lag.ms": 1,
    "log.cleaner.min.cleanable.ratio": 0,
    "log.cleaner.min.compaction.lag.ms": 0,
    "log.flush.interval.messages": 1,
    "log.flush.interval.ms": 0,
    "log.index.interval.bytes": 0,
    "log.index.size.max.bytes": 4,
    "log.local.retention.bytes": -2,
    "log.local.retention.ms": -2,
    "log.message.timestamp.after.max.ms": 0,
    "log.message.timestamp.before.max.ms": 0,
    "log.retention.hours": -1,
    "log.retention.minutes": -1,
    "log.retention.ms": -1,
    "log.roll.hours": -1,
    "log.roll.jitter.ms": 0,
    "log.roll.ms": 1,
    "log.segment.bytes": 1024 * 1024,
    "log.segment.delete.delay.ms": 0,
    "message.max.bytes": 0,
    "metadata.log.max.record.bytes.between.snapshots": 1,
    "metadata.log.max.snapshot.interval.ms": 0,
    "min.insync.replicas": 1,
    "num.partitions": 1,
}
"""The broker-level configs: Kafka's, and ours (`delete.topic.partition.interval.delay.ms`)."""

CASES = [
    *((validate_topic_config, name, low) for name, low in TOPIC_MINIMA.items()),
    *((validate_cluster_config, name, low) for name, low in CLUSTER_MINIMA.items()),
]


def test_every_numeric_key_with_a_range_is_listed() -> None:
    numeric = (ConfigType.SHORT, ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE)
    for definitions, minima in ((TOPIC_CONFIGS, TOPIC_MINIMA), (CLUSTER_CONFIGS, CLUSTER_MINIMA)):
        ranged = {n for n, d in definitions.items() if d.type in numeric and d.check is not None}
        assert ranged == set(minima)


# Ids by name: a function's str holds its address, which pytest-xdist's workers do not share.
@pytest.mark.parametrize(
    ("validate", "name", "low"), CASES, ids=lambda value: getattr(value, "__name__", str(value))
)
def test_the_least_value_is_taken_and_one_less_refused(
    validate: object, name: str, low: int
) -> None:
    assert callable(validate)
    ratio = name.endswith("ratio")
    assert validate(name, str(low)) == (f"{float(low)!r}" if ratio else str(low))
    below = low - (0.001 if ratio else 1)
    with pytest.raises(InvalidConfigError, match="Value must be"):
        validate(name, str(below))


@pytest.mark.parametrize("name", ["min.cleanable.dirty.ratio"])
def test_ratios_are_at_most_one(name: str) -> None:
    assert validate_topic_config(name, "1") == "1.0"
    with pytest.raises(InvalidConfigError, match="no more than 1"):
        validate_topic_config(name, "1.001")
    assert validate_cluster_config("log.cleaner.min.cleanable.ratio", "1") == "1.0"
    with pytest.raises(InvalidConfigError, match="no more than 1"):
        validate_cluster_config("log.cleaner.min.cleanable.ratio", "1.001")


SYNONYMS = {
    "retention.ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", 60_000),
        ("log.retention.hours", 3_600_000),
    ),
    "segment.ms": (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
}
"""Kafka's time keys with unit synonyms, strongest first."""


def test_unit_synonyms_scale_to_milliseconds_strongest_first() -> None:
    for name, synonyms in SYNONYMS.items():
        assert TOPIC_CONFIGS[name].synonyms == synonyms
    resolved = {c.name: c for c in resolve_topic_configs({}, {"log.retention.minutes": "3"})}
    assert (resolved["retention.ms"].value, resolved["retention.ms"].source_name) == (
        "180000",
        "log.retention.minutes",
    )
    both = {"log.retention.minutes": "3", "log.retention.hours": "1", "log.roll.hours": "2"}
    resolved = {c.name: c for c in resolve_topic_configs({}, both)}
    assert resolved["retention.ms"].value == "180000"
    assert resolved["segment.ms"].value == "7200000"


def test_unit_keys_have_no_default_of_their_own() -> None:
    for key in ("log.retention.hours", "log.retention.minutes", "log.roll.hours"):
        definition = CLUSTER_CONFIGS[key]
        assert definition.default is None
        assert "in units of" in definition.doc
        with pytest.raises(KeyError, match="has no value and no default"):
            cluster_value({}, key)
        assert cluster_value({key: "2"}, key) == 2
    assert CLUSTER_CONFIGS["log.retention.ms"].default == TOPIC_CONFIGS["retention.ms"].default


def test_typed_cluster_values() -> None:
    assert cluster_int({}, "num.partitions") == 1
    assert cluster_int({"num.partitions": "12"}, "num.partitions") == 12
    assert cluster_bool({}, "delete.topic.enable") is True
    assert cluster_bool({"delete.topic.enable": "FALSE"}, "delete.topic.enable") is False


def test_a_text_synonym_passes_through_as_it_is() -> None:
    resolved = {c.name: c for c in resolve_topic_configs({}, {"log.cleanup.policy": "compact"})}
    assert (resolved["cleanup.policy"].value, resolved["cleanup.policy"].source_name) == (
        "compact",
        "log.cleanup.policy",
    )
