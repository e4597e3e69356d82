"""Configs: describing and altering topic, namespace and broker (cluster) configs.

What the keys are, their defaults, and which source wins for a key is `config_defs`; this
module applies it to requests: it finds the resource a request names (a topic, a namespace, a
broker, or "" for the cluster-wide default) and turns IncrementalAlterConfigs operations into
`ConfigRecord`s, Kafka's way (`ConfigurationControlManager`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from records.model import ConfigRecord, ConfigResourceType, Record
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    AlterConfigsResult,
    ConfigResource,
    ControllerResult,
    Outcome,
    TopicRef,
)
from replay.controller.config_defs import (
    CLUSTER_CONFIGS,
    TOPIC_CONFIGS,
    ResolvedConfig,
    resolve_cluster_configs,
    resolve_topic_configs,
    validate_cluster_config,
    validate_topic_config,
)
from replay.controller.config_values import ConfigDef, ConfigType, InvalidConfigError
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.names import resolve_topic
from replay.controller.namespaces import require_namespace
from replay.image import MetadataImage, enclosing_namespaces


def describe_configs(image: MetadataImage, resource: ConfigResource) -> list[ResolvedConfig]:
    """Every known key of a resource with its value and where the value comes from."""
    cluster = image.configs.cluster()
    if resource.type == ConfigResourceType.TOPIC:
        topic = resolve_topic(image, TopicRef(name=resource.name))
        overrides = image.configs.get(ConfigResourceType.TOPIC, topic.qualified_name)
        return resolve_topic_configs(overrides, cluster, namespace_configs(image, topic.namespace))
    if resource.type == ConfigResourceType.NAMESPACE:
        _check_namespace_resource(image, resource.name)
        # A namespace's own values show as NAMESPACE_CONFIG with its own name as source.
        return resolve_topic_configs({}, cluster, namespace_configs(image, resource.name))
    if resource.type == ConfigResourceType.BROKER:
        _check_broker_resource(image, resource.name)
        if not resource.name:
            return resolve_cluster_configs(cluster)
        broker = image.configs.get(ConfigResourceType.BROKER, resource.name)
        return resolve_cluster_configs(cluster, broker)
    raise ApiError(
        ErrorCode.INVALID_REQUEST,
        f"config resource type {resource.type.name} is not supported; use TOPIC, NAMESPACE "
        "or BROKER",
    )


def namespace_configs(image: MetadataImage, namespace: str) -> list[tuple[str, Mapping[str, str]]]:
    """The configs of a namespace and of those enclosing it, nearest first."""
    chain: list[tuple[str, Mapping[str, str]]] = []
    for name in enclosing_namespaces(namespace):
        values = image.configs.get(ConfigResourceType.NAMESPACE, name)
        if values:
            chain.append((name, values))
    return chain


def incremental_alter_configs(
    image: MetadataImage,
    changes: Sequence[tuple[ConfigResource, Sequence[AlterConfig]]],
    *,
    validate_only: bool,
) -> ControllerResult[list[AlterConfigsResult]]:
    """Set, delete, append to or subtract from config keys; one result per resource."""
    results: list[AlterConfigsResult] = []
    records: list[Record] = []
    for resource, ops in changes:
        try:
            resource_records = _alter_resource(image, resource, ops)
        except ApiError as exc:
            results.append(AlterConfigsResult(resource=resource, outcome=Outcome.from_error(exc)))
            continue
        if not validate_only:
            records.extend(resource_records)
        results.append(AlterConfigsResult(resource=resource))
    return ControllerResult(records=tuple(records), response=results)


def _alter_resource(
    image: MetadataImage, resource: ConfigResource, ops: Sequence[AlterConfig]
) -> list[Record]:
    if resource.type == ConfigResourceType.TOPIC:
        topic = resolve_topic(image, TopicRef(name=resource.name))
        name = topic.qualified_name
        definitions = TOPIC_CONFIGS
        validate = validate_topic_config
    elif resource.type == ConfigResourceType.BROKER:
        _check_broker_resource(image, resource.name)
        name = resource.name
        definitions = CLUSTER_CONFIGS
        validate = validate_cluster_config
    elif resource.type == ConfigResourceType.NAMESPACE:
        _check_namespace_resource(image, resource.name)
        name = resource.name
        definitions = TOPIC_CONFIGS
        validate = validate_topic_config
    else:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"config resource type {resource.type.name} cannot be altered; use TOPIC, "
            "NAMESPACE or BROKER",
        )
    current = dict(image.configs.get(resource.type, name))
    names = [op.name for op in ops]
    if len(set(names)) != len(names):
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            "Error due to duplicate config keys: give each key once per resource",
        )
    records: list[Record] = []
    for op in ops:
        definition, check = _definition(resource, op.name, definitions, validate)
        value: str | None
        if op.op == AlterConfigOp.DELETE:
            value = None
        elif op.op == AlterConfigOp.SET:
            if op.value is None:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST,
                    f"Null value not supported for SET of {op.name}; use DELETE",
                )
            value = op.value
        else:
            if definition.type != ConfigType.LIST:
                raise ApiError(
                    ErrorCode.INVALID_CONFIG,
                    f"Config value append/subtract is not allowed for config key "
                    f"{op.name} (it is not a list)",
                )
            existing = current.get(op.name, definition.default or "")
            items = [v.strip() for v in existing.split(",") if v.strip()]
            given = [v.strip() for v in (op.value or "").split(",") if v.strip()]
            if op.op == AlterConfigOp.APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            value = ",".join(items)
        if value is not None:
            try:
                value = check(op.name, value)
            except InvalidConfigError as exc:
                raise ApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        records.append(
            ConfigRecord(resource_type=resource.type, resource_name=name, name=op.name, value=value)
        )
    return records


def _definition(
    resource: ConfigResource,
    key: str,
    definitions: Mapping[str, ConfigDef],
    validate: Callable[[str, str], str],
) -> tuple[ConfigDef, Callable[[str, str], str]]:
    """The definition of `key` on `resource` and its values' check (else INVALID_CONFIG).

    Kafka's controller takes any key on a BROKER resource (ControllerConfigurationValidator
    checks the name only) and its broker refuses only its own keys that are not dynamic: a
    topic key (`cleanup.policy`) is stored there, and sets no topic default (that is
    `log.cleanup.policy`). It is checked against the topic key's rule.
    """
    definition = definitions.get(key)
    if definition is not None:
        return definition, validate
    if resource.type == ConfigResourceType.BROKER and key in TOPIC_CONFIGS:
        return TOPIC_CONFIGS[key], validate_topic_config
    raise ApiError(
        ErrorCode.INVALID_CONFIG,
        f"Unknown {resource.type.name.lower()} config name: {key} "
        "(`mlog configs describe --all` lists the known keys)",
    )


def _check_namespace_resource(image: MetadataImage, name: str) -> None:
    if name == "":
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            'The default namespace "" takes its configs from the cluster; use --cluster',
        )
    require_namespace(image, name)


def _check_broker_resource(image: MetadataImage, name: str) -> None:
    if name == "":
        return
    # ASCII digits only, as replay reads the name: `isdigit` is true of '²', which int() refuses.
    if not (name.isascii() and name.isdigit()) or image.cluster.get(int(name)) is None:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f'broker {name!r} is not registered; use a registered broker id, or "" for '
            "the cluster-wide default",
        )
