"""The config keys the service knows: their defaults, ranges, validation and resolution.

Topic keys are Kafka's (``TopicConfig``), with Kafka's defaults, ranges and the cluster-level
synonym that supplies a topic's default (``retention.ms`` <- ``log.retention.ms``). Cluster keys
are stored as BROKER configs with the empty resource name (the cluster-wide default, as Kafka's
``--entity-default``); a BROKER config with a broker id overrides it for that broker.

Values are stored as the canonical text ``validate_*`` returns, so ``"01"`` and ``"1"`` are one
value and a describe shows what Kafka would show. What a value is (types, checks, parsing) is in
`config_values`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from replay.controller.config_values import (
    LONG_MAX,
    Check,
    ConfigDef,
    ConfigType,
    InvalidConfigError,
    Parsed,
    at_least,
    between,
    canonical_text,
    one_of,
    parse_value,
    throttled_replicas,
)

__all__ = [
    "CLUSTER_CONFIGS",
    "TOPIC_CONFIGS",
    "ConfigSource",
    "ResolvedConfig",
    "cluster_bool",
    "cluster_int",
    "cluster_value",
    "resolve_cluster_configs",
    "resolve_topic_configs",
    "validate_cluster_config",
    "validate_topic_config",
]


class ConfigSource(enum.IntEnum):
    """Where a described value comes from; numbers are DescribeConfigs' ``ConfigSource``.

    ``NAMESPACE_CONFIG`` is ours (a value inherited from an enclosing namespace); it is outside
    Kafka's range so a Kafka client shows it as unknown rather than as something it is not.
    """

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    NAMESPACE_CONFIG = 64


@dataclass(frozen=True, slots=True)
class ResolvedConfig:
    """A key's effective value for one resource and where it comes from."""

    name: str
    value: str | None
    source: ConfigSource
    source_name: str = ""
    read_only: bool = False
    sensitive: bool = False


# ---------------------------------------------------------------------------- definitions

SNAPSHOT_BYTES_KEY = "metadata.log.max.record.bytes.between.snapshots"
"""Kafka's key: the most record bytes appended after the last snapshot before a new one (the
service takes one sooner for a smaller image: `api.service.snapshots.cadence_bytes`)."""
SNAPSHOT_INTERVAL_KEY = "metadata.log.max.snapshot.interval.ms"
"""Kafka's key: the longest time between snapshots while records are appended (0: none)."""

_DAY_MS = 86_400_000
_WEEK_MS = 7 * _DAY_MS
_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000


def _topic(  # noqa: PLR0917 - a table of Kafka's definitions reads best positionally
    name: str,
    type_: ConfigType,
    default: str,
    doc: str,
    check: Check | None = None,
    synonyms: tuple[tuple[str, int], ...] | str | None = None,
) -> ConfigDef:
    if synonyms is None:
        synonyms = ((name, 1),)
    elif isinstance(synonyms, str):
        synonyms = ((synonyms, 1),)
    return ConfigDef(name, type_, default, doc, check, synonyms)


_T = ConfigType
TOPIC_CONFIGS: Mapping[str, ConfigDef] = {
    d.name: d
    for d in (
        _topic(
            "cleanup.policy",
            _T.LIST,
            "delete",
            "delete or compact old segments, or both",
            one_of("compact", "delete"),
            "log.cleanup.policy",
        ),
        _topic(
            "compression.type",
            _T.STRING,
            "producer",
            "final compression of the topic's data",
            one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        ),
        _topic(
            "delete.retention.ms",
            _T.LONG,
            str(_DAY_MS),
            "how long delete tombstones are kept for compacted topics",
            at_least(0),
            "log.cleaner.delete.retention.ms",
        ),
        _topic(
            "file.delete.delay.ms",
            _T.LONG,
            "60000",
            "wait before deleting a file from the filesystem",
            at_least(0),
            "log.segment.delete.delay.ms",
        ),
        _topic(
            "flush.messages",
            _T.LONG,
            str(LONG_MAX),
            "messages between forced fsyncs",
            at_least(1),
            "log.flush.interval.messages",
        ),
        _topic(
            "flush.ms",
            _T.LONG,
            str(LONG_MAX),
            "time between forced fsyncs",
            at_least(0),
            "log.flush.interval.ms",
        ),
        _topic(
            "follower.replication.throttled.replicas",
            _T.LIST,
            "",
            "replicas whose log replication is throttled on the follower side",
            throttled_replicas,
            (),
        ),
        _topic(
            "index.interval.bytes",
            _T.INT,
            "4096",
            "how often an offset index entry is added",
            at_least(0),
            "log.index.interval.bytes",
        ),
        _topic(
            "leader.replication.throttled.replicas",
            _T.LIST,
            "",
            "replicas whose log replication is throttled on the leader side",
            throttled_replicas,
            (),
        ),
        _topic(
            "local.retention.bytes",
            _T.LONG,
            "-2",
            "local bytes kept before tiered segments are deleted (-2 = retention.bytes)",
            at_least(-2),
            "log.local.retention.bytes",
        ),
        _topic(
            "local.retention.ms",
            _T.LONG,
            "-2",
            "local time kept before tiered segments are deleted (-2 = retention.ms)",
            at_least(-2),
            "log.local.retention.ms",
        ),
        _topic(
            "max.compaction.lag.ms",
            _T.LONG,
            str(LONG_MAX),
            "longest time a message stays ineligible for compaction",
            at_least(1),
            "log.cleaner.max.compaction.lag.ms",
        ),
        _topic(
            "max.message.bytes",
            _T.INT,
            "1048588",
            "largest record batch size allowed",
            at_least(0),
            "message.max.bytes",
        ),
        _topic(
            "message.timestamp.after.max.ms",
            _T.LONG,
            "3600000",
            "how far a record timestamp may be ahead of the broker's time",
            at_least(0),
            "log.message.timestamp.after.max.ms",
        ),
        _topic(
            "message.timestamp.before.max.ms",
            _T.LONG,
            str(LONG_MAX),
            "how far a record timestamp may be behind the broker's time",
            at_least(0),
            "log.message.timestamp.before.max.ms",
        ),
        _topic(
            "message.timestamp.type",
            _T.STRING,
            "CreateTime",
            "whether record timestamps are the producer's or the append time",
            one_of("CreateTime", "LogAppendTime"),
            "log.message.timestamp.type",
        ),
        _topic(
            "min.cleanable.dirty.ratio",
            _T.DOUBLE,
            "0.5",
            "dirty share of the log that triggers compaction",
            between(0, 1),
            "log.cleaner.min.cleanable.ratio",
        ),
        _topic(
            "min.compaction.lag.ms",
            _T.LONG,
            "0",
            "shortest time a message stays uncompacted",
            at_least(0),
            "log.cleaner.min.compaction.lag.ms",
        ),
        _topic(
            "min.insync.replicas",
            _T.INT,
            "1",
            "in-sync replicas needed to acknowledge a write with acks=all",
            at_least(1),
        ),
        _topic(
            "preallocate",
            _T.BOOLEAN,
            "false",
            "preallocate segment files",
            None,
            "log.preallocate",
        ),
        _topic(
            "remote.storage.enable",
            _T.BOOLEAN,
            "false",
            "tiered storage for the topic",
            None,
            (),
        ),
        _topic(
            "retention.bytes",
            _T.LONG,
            "-1",
            "largest size of a partition before old segments go (-1 = no limit)",
            None,
            "log.retention.bytes",
        ),
        _topic(
            "retention.ms",
            _T.LONG,
            str(_WEEK_MS),
            "longest time a record is kept (-1 = no limit)",
            at_least(-1),
            (
                ("log.retention.ms", 1),
                ("log.retention.minutes", _MINUTE_MS),
                ("log.retention.hours", _HOUR_MS),
            ),
        ),
        _topic(
            "segment.bytes",
            _T.INT,
            str(1024**3),
            "segment file size",
            at_least(1024 * 1024),
            "log.segment.bytes",
        ),
        _topic(
            "segment.index.bytes",
            _T.INT,
            str(10 * 1024 * 1024),
            "offset index size",
            at_least(4),
            "log.index.size.max.bytes",
        ),
        _topic(
            "segment.jitter.ms",
            _T.LONG,
            "0",
            "random jitter subtracted from segment.ms",
            at_least(0),
            "log.roll.jitter.ms",
        ),
        _topic(
            "segment.ms",
            _T.LONG,
            str(_WEEK_MS),
            "time after which a segment is rolled",
            at_least(1),
            (("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)),
        ),
        _topic(
            "unclean.leader.election.enable",
            _T.BOOLEAN,
            "false",
            "allow an out-of-sync replica to become leader as a last resort",
        ),
    )
}


def _synonym_defs() -> list[ConfigDef]:
    """The cluster keys that supply topic defaults, typed like the topic key they feed."""
    defs: dict[str, ConfigDef] = {}
    for topic in TOPIC_CONFIGS.values():
        for synonym, factor in topic.synonyms:
            if factor == 1:
                default, check = topic.default, topic.check
            else:  # an hours/minutes key: no default of its own, the ms key's range scaled
                default, check = None, at_least(-1)
            doc = f"cluster default of the topic config {topic.name}"
            if factor != 1:
                doc += f" in units of {factor:,} ms"
            defs[synonym] = ConfigDef(synonym, topic.type, default, doc, check)
    return list(defs.values())


CLUSTER_CONFIGS: Mapping[str, ConfigDef] = {
    d.name: d
    for d in sorted(
        [
            ConfigDef(
                "num.partitions",
                _T.INT,
                "1",
                "partitions of a topic created with partitions = -1",
                at_least(1),
            ),
            ConfigDef(
                "default.replication.factor",
                _T.SHORT,
                "1",
                "replication factor of a topic created with replication factor = -1",
                at_least(1),
            ),
            ConfigDef(
                "delete.topic.enable",
                _T.BOOLEAN,
                "true",
                "allow deleting topics; when false a delete is TOPIC_DELETION_DISABLED",
            ),
            ConfigDef(
                "delete.topic.partition.enable",
                _T.BOOLEAN,
                "false",
                "allow lowering a topic's partition count; when false a decrease is refused",
            ),
            ConfigDef(
                "delete.topic.partition.interval.delay.ms",
                _T.LONG,
                "300000",
                "how often the service checks pending partition deletions, in ms",
                at_least(1),
            ),
            ConfigDef(
                SNAPSHOT_BYTES_KEY,
                _T.LONG,
                str(20 * 1024 * 1024),
                "most record bytes appended after the last snapshot before a new one (sooner "
                "for an image whose own records take fewer)",
                at_least(1),
            ),
            ConfigDef(
                SNAPSHOT_INTERVAL_KEY,
                _T.LONG,
                str(_HOUR_MS),
                "longest time between snapshots while entries are appended (0 = no limit)",
                at_least(0),
            ),
            *_synonym_defs(),
        ],
        key=lambda d: d.name,
    )
}


def _validate(definitions: Mapping[str, ConfigDef], kind: str, name: str, value: str) -> str:
    definition = definitions.get(name)
    if definition is None:
        raise InvalidConfigError(
            f"Unknown {kind} config name: {name} (`mlog configs describe --all` lists the "
            "known keys)"
        )
    if definition.read_only:
        raise InvalidConfigError(f"Cannot update {name}: it is read-only")
    return canonical_text(definition, value)


def validate_topic_config(name: str, value: str) -> str:
    """The canonical text of a topic config value, or InvalidConfigError."""
    return _validate(TOPIC_CONFIGS, "topic", name, value)


def validate_cluster_config(name: str, value: str) -> str:
    """The canonical text of a cluster (BROKER) config value, or InvalidConfigError."""
    return _validate(CLUSTER_CONFIGS, "broker", name, value)


def cluster_value(cluster: Mapping[str, str], name: str) -> Parsed:
    """The typed effective value of a cluster key (the stored override or the default)."""
    definition = CLUSTER_CONFIGS[name]
    text = cluster.get(name, definition.default)
    if text is None:
        raise KeyError(f"{name} has no value and no default")
    return _parsed_cluster_value(name, text)


def cluster_int(cluster: Mapping[str, str], name: str) -> int:
    """The effective value of an integer cluster key (`num.partitions`, ...)."""
    return int(cluster_value(cluster, name))  # type: ignore[arg-type]  # int-typed keys give ints


def cluster_bool(cluster: Mapping[str, str], name: str) -> bool:
    """The effective value of a boolean cluster key (`delete.topic.enable`, ...)."""
    return bool(cluster_value(cluster, name))


@lru_cache(maxsize=1024)
def _parsed_cluster_value(name: str, text: str) -> Parsed:
    # Parsing is pure and every parsed value is immutable; the controller reads a few keys
    # (delete.topic.enable, num.partitions, ...) on every request.
    return parse_value(CLUSTER_CONFIGS[name], text)


# ---------------------------------------------------------------------------- resolution


def resolve_topic_configs(
    overrides: Mapping[str, str],
    cluster: Mapping[str, str],
    namespace_chain: Sequence[tuple[str, Mapping[str, str]]] = (),
) -> list[ResolvedConfig]:
    """Every topic key with its effective value, in name order.

    The nearest source wins: the topic's own override, then the namespaces from the nearest
    outwards (``namespace_chain`` as (namespace, configs) pairs), then the cluster synonym
    (``log.retention.ms`` before ``log.retention.hours``), then Kafka's default.
    """
    resolved: list[ResolvedConfig] = []
    for name, definition in sorted(TOPIC_CONFIGS.items()):
        resolved.append(_resolve_topic_key(name, definition, overrides, cluster, namespace_chain))
    return resolved


def _resolve_topic_key(
    name: str,
    definition: ConfigDef,
    overrides: Mapping[str, str],
    cluster: Mapping[str, str],
    namespace_chain: Sequence[tuple[str, Mapping[str, str]]],
) -> ResolvedConfig:
    value = overrides.get(name)
    if value is not None:
        return ResolvedConfig(name, value, ConfigSource.TOPIC_CONFIG)
    for namespace, configs in namespace_chain:
        value = configs.get(name)
        if value is not None:
            return ResolvedConfig(name, value, ConfigSource.NAMESPACE_CONFIG, namespace)
    for synonym, factor in definition.synonyms:
        value = cluster.get(synonym)
        if value is not None:
            if factor != 1:
                value = str(int(value) * factor)
            return ResolvedConfig(name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, synonym)
    return ResolvedConfig(name, definition.default, ConfigSource.DEFAULT_CONFIG)


def resolve_cluster_configs(
    cluster: Mapping[str, str], broker: Mapping[str, str] | None = None
) -> list[ResolvedConfig]:
    """Every cluster key with its value: the broker's own, the cluster-wide one, the default."""
    resolved: list[ResolvedConfig] = []
    for name, definition in CLUSTER_CONFIGS.items():
        value: str | None
        if broker is not None and name in broker:
            value, source = broker[name], ConfigSource.DYNAMIC_BROKER_CONFIG
        elif name in cluster:
            value, source = cluster[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        else:
            value, source = definition.default, ConfigSource.DEFAULT_CONFIG
        resolved.append(
            ResolvedConfig(
                name,
                value,
                source,
                read_only=definition.read_only,
                sensitive=definition.sensitive,
            )
        )
    return resolved


# ---------------------------------------------------------------------------- synonyms


KAFKA_DEFAULT_SYNONYMS: Mapping[str, tuple[str, str]] = {
    "retention.ms": ("log.retention.hours", "168"),
    "segment.ms": ("log.roll.hours", "168"),
    "segment.jitter.ms": ("log.roll.jitter.hours", "0"),
    "flush.ms": ("log.flush.scheduler.interval.ms", str(2**63 - 1)),
}
"""The broker key (and value) Kafka's DescribeConfigs names as a topic key's DEFAULT_CONFIG
synonym where it is not the first synonym: Kafka's `log.retention.ms`, `log.retention.minutes`,
`log.roll.ms`, `log.roll.jitter.ms` and `log.flush.interval.ms` have no default (KafkaConfig's
null), so its static defaults hold only the hours (or scheduler) key."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigSynonym:
    """One level a key's value may come from, as DescribeConfigs' synonyms list it."""

    name: str
    value: str | None
    source: ConfigSource


def config_synonyms(
    described: ResolvedConfig,
    *,
    topic: bool,
    cluster: Mapping[str, str],
    broker: Mapping[str, str] | None = None,
) -> list[ConfigSynonym]:
    """The synonyms of a described key, highest precedence first, as Kafka lists them.

    A topic key: its own override (or the namespace's), then each broker-level key that
    supplies its default and is set cluster-wide in Kafka's order (`log.retention.ms`,
    `log.retention.minutes`, `log.retention.hours`, with their values), then Kafka's default
    under the broker-level key that holds it (`log.retention.hours=168`, DEFAULT_CONFIG:
    `KAFKA_DEFAULT_SYNONYMS`). A cluster or broker key: the broker's own value,
    the cluster-wide one, the default. Levels not set are left out, as in Kafka.
    """
    found: list[ConfigSynonym] = []
    if topic:
        definition = TOPIC_CONFIGS.get(described.name)
        if described.source in (ConfigSource.TOPIC_CONFIG, ConfigSource.NAMESPACE_CONFIG):
            found.append(
                ConfigSynonym(name=described.name, value=described.value, source=described.source)
            )
        if definition is None:
            return found
        for synonym, _factor in definition.synonyms:
            if synonym in cluster:
                found.append(
                    ConfigSynonym(
                        name=synonym,
                        value=cluster[synonym],
                        source=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                    )
                )
        if definition.default is not None and definition.synonyms:
            # Kafka's default is the broker-level key's that has one: the first synonym, but
            # for the keys whose first synonym has no default (`log.retention.ms`).
            name, value = KAFKA_DEFAULT_SYNONYMS.get(
                described.name, (definition.synonyms[0][0], definition.default)
            )
            found.append(ConfigSynonym(name=name, value=value, source=ConfigSource.DEFAULT_CONFIG))
        return found
    definition = CLUSTER_CONFIGS.get(described.name)
    if broker is not None and described.name in broker:
        found.append(
            ConfigSynonym(
                name=described.name,
                value=broker[described.name],
                source=ConfigSource.DYNAMIC_BROKER_CONFIG,
            )
        )
    if described.name in cluster:
        found.append(
            ConfigSynonym(
                name=described.name,
                value=cluster[described.name],
                source=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
            )
        )
    if definition is not None and definition.default is not None:
        found.append(
            ConfigSynonym(
                name=described.name, value=definition.default, source=ConfigSource.DEFAULT_CONFIG
            )
        )
    return found
