"""Configs of topics, brokers and namespaces: DescribeConfigs, (Incremental)AlterConfigs.

Descriptions are read from the committed image; changes go through `MetadataService.submit`
(group-committed, answered once durable) as the controller's incremental alteration, which
AlterConfigs (replace every override) is turned into here. A resource of a type or an
operation this server does not know is refused on its own, with the others still answered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from api.protocol.codec import KafkaRequest
from api.server.kafka.authorization import refusal_message, run_gated
from api.server.kafka.base import HandlerGroup, Session
from records.model import AclOperation, ConfigResourceType, ResourceType
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    AlterConfigsResult,
    ConfigResource,
    ControllerResult,
    Outcome,
)
from replay.controller.config_defs import (
    CLUSTER_CONFIGS,
    TOPIC_CONFIGS,
    ResolvedConfig,
    config_synonyms,
)
from replay.controller.config_values import ConfigDef, ConfigType
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import clip
from replay.image import MetadataImage, enclosing_namespaces

DESCRIBE_CONFIGS, ALTER_CONFIGS = AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS
NAMESPACE = ResourceType.NAMESPACE

_CONFIG_TYPES = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.SHORT: 4,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
}
"""DescribeConfigs v3+ `config_type` ids (`DescribeConfigsResponse.ConfigType`)."""

_KAFKA_RESOURCE_TYPES = {
    int(ConfigResourceType.TOPIC): ConfigResourceType.TOPIC,
    int(ConfigResourceType.BROKER): ConfigResourceType.BROKER,
    int(ConfigResourceType.NAMESPACE): ConfigResourceType.NAMESPACE,
}


def _synonyms(
    c: ResolvedConfig,
    *,
    topic: bool,
    cluster: Mapping[str, str],
    broker: Mapping[str, str] | None,
) -> list[dict[str, Any]]:
    """Kafka's synonyms of a described key: every level it may come from, highest first."""
    return [
        {"name": s.name, "value": None if c.sensitive else s.value, "source": int(s.source)}
        for s in config_synonyms(c, topic=topic, cluster=cluster, broker=broker)
    ]


class ConfigApis(HandlerGroup):
    """DescribeConfigs, AlterConfigs and IncrementalAlterConfigs."""

    async def describe_configs(self, request: KafkaRequest, session: Session) -> Any:
        """Every known key of each resource, with its source; unknown resources are errors."""
        image = self.service.image
        body = request.body
        synonyms = bool(getattr(body, "include_synonyms", False))
        docs = bool(getattr(body, "include_documentation", False))
        results = []
        for resource in body.resources:
            entry: dict[str, Any] = {
                "resource_type": int(resource.resource_type),
                "resource_name": resource.resource_name,
                "error_code": 0,
                "error_message": None,
                "configs": [],
            }
            try:
                kind = _resource_type(int(resource.resource_type))
                self._require(image, session, DESCRIBE_CONFIGS, kind, resource.resource_name)
                described = self._described_resource(image, kind, resource.resource_name)
                resolved = self.service.controller.describe_configs(image, described)
            except ApiError as exc:
                entry["error_code"] = exc.error_code
                entry["error_message"] = str(exc)
                results.append(entry)
                continue
            keys = resource.configuration_keys
            definitions = TOPIC_CONFIGS if kind == ConfigResourceType.TOPIC else CLUSTER_CONFIGS
            cluster = image.configs.cluster()
            broker = (
                image.configs.get(ConfigResourceType.BROKER, described.name)
                if kind == ConfigResourceType.BROKER and described.name
                else None
            )

            entry["configs"] = [
                {
                    "name": c.name,
                    "value": None if c.sensitive else c.value,
                    "read_only": c.read_only,
                    "config_source": int(c.source),
                    "is_default": int(c.source) == 5,
                    "is_sensitive": c.sensitive,
                    "synonyms": (
                        _synonyms(
                            c,
                            topic=kind == ConfigResourceType.TOPIC,
                            cluster=cluster,
                            broker=broker,
                        )
                        if synonyms
                        else []
                    ),
                    "config_type": _config_type(definitions.get(c.name)),
                    "documentation": _documentation(definitions.get(c.name)) if docs else None,
                }
                for c in resolved
                if not keys or c.name in keys
            ]
            results.append(entry)
        return self._answer(request, throttle_time=0, results=results)

    def _described_resource(
        self, image: MetadataImage, kind: ConfigResourceType, name: str
    ) -> ConfigResource:
        """The resource to describe; this server's own node id, unregistered, is the cluster.

        Clients send a broker's DescribeConfigs to that broker, and the only broker a client
        can reach is this server (`metadata.advertised_nodes`): its configs are the
        cluster-wide ones.
        """
        if (
            kind == ConfigResourceType.BROKER
            and name == str(self.listener.node_id)
            and image.cluster.get(self.listener.node_id) is None
        ):
            return ConfigResource(type=kind, name="")
        return ConfigResource(type=kind, name=name)

    def _require(
        self,
        image: MetadataImage,
        session: Session,
        operation: AclOperation,
        kind: ConfigResourceType,
        name: str,
    ) -> None:
        """Refuse unless `operation` is allowed on a config resource, as Kafka checks it.

        A topic's on the topic (TOPIC_AUTHORIZATION_FAILED), a broker's on the cluster
        (CLUSTER_AUTHORIZATION_FAILED); a namespace's on the namespace, its chain included
        (TOPIC_AUTHORIZATION_FAILED).
        """
        gate = self.gate
        if kind == ConfigResourceType.BROKER:
            gate.require_cluster(image, session, operation)
        elif kind == ConfigResourceType.NAMESPACE:
            gate.require_namespace(image, session, operation, name)
        else:
            gate.require_topic(image, session, operation, name)

    def _refusal(
        self,
        image: MetadataImage,
        session: Session,
        operation: AclOperation,
        resource: ConfigResource,
    ) -> ApiError | None:
        """`_require`'s refusal as a value, or None."""
        try:
            self._require(image, session, operation, resource.type, resource.name)
        except ApiError as exc:
            return exc
        return None

    def _inheritance_refusal(
        self,
        image: MetadataImage,
        session: Session,
        resource: ConfigResource,
        ops: Sequence[AlterConfig],
    ) -> ApiError | None:
        """A namespace's configs are its descendants' too: ALTER_CONFIGS on each that inherits.

        A namespace below the one changed that does not override every changed key itself
        (nor through a namespace between them) would resolve the new value: the change needs
        ALTER_CONFIGS there too, so a DENY on `org:secret` holds against a change on `org`
        (issue #31, finding 8). The refusal names the first such namespace.
        """
        if resource.type != ConfigResourceType.NAMESPACE or not resource.name or not ops:
            return None
        keys = frozenset(op.name for op in ops)
        for below in image.namespaces.descendants(resource.name):
            if not _inherits(image, resource.name, below, keys):
                continue
            if not self.gate.allows(image, session, ALTER_CONFIGS, NAMESPACE, below):
                return ApiError(
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    f"{refusal_message(session, ALTER_CONFIGS, NAMESPACE, below)}: it "
                    f"inherits the configs changed on namespace {clip(resource.name)}",
                )
        return None

    async def incremental_alter_configs(self, request: KafkaRequest, session: Session) -> Any:
        """Set, delete, append to or subtract from keys; one result per resource."""
        body = request.body
        changes: list[tuple[ConfigResource, list[AlterConfig]]] = []
        refused: dict[int, tuple[ErrorCode, str | None]] = {}
        for index, resource in enumerate(body.resources):
            try:
                kind = _resource_type(int(resource.resource_type))
                ops = [
                    AlterConfig(name=c.name, op=_alter_op(int(c.config_operation)), value=c.value)
                    for c in resource.configs
                ]
            except ApiError as exc:
                refused[index] = (exc.error_code, str(exc))
                continue
            changes.append((ConfigResource(type=kind, name=resource.resource_name), ops))
        return await self._alter(request, session, changes, refused)

    async def alter_configs(self, request: KafkaRequest, session: Session) -> Any:
        """Replace a resource's overrides: keys not named are deleted (Kafka's AlterConfigs)."""
        body = request.body
        image = self.service.image
        changes: list[tuple[ConfigResource, list[AlterConfig]]] = []
        refused: dict[int, tuple[ErrorCode, str | None]] = {}
        for index, resource in enumerate(body.resources):
            try:
                kind = _resource_type(int(resource.resource_type))
            except ApiError as exc:
                refused[index] = (exc.error_code, str(exc))
                continue
            named = {c.name for c in resource.configs}
            ops = [
                AlterConfig(
                    name=c.name,
                    op=AlterConfigOp.DELETE if c.value is None else AlterConfigOp.SET,
                    value=c.value,
                )
                for c in resource.configs
            ]
            current = image.configs.get(kind, _override_key(image, kind, resource.resource_name))
            ops.extend(
                AlterConfig(name=key, op=AlterConfigOp.DELETE)
                for key in sorted(current)
                if key not in named
            )
            changes.append((ConfigResource(type=kind, name=resource.resource_name), ops))
        return await self._alter(request, session, changes, refused)

    async def _alter(
        self,
        request: KafkaRequest,
        session: Session,
        changes: Sequence[tuple[ConfigResource, Sequence[AlterConfig]]],
        refused: dict[int, tuple[ErrorCode, str | None]],
    ) -> Any:
        validate_only = bool(request.body.validate_only)
        controller = self.service.controller
        principal = session.principal

        def alter(image: MetadataImage) -> ControllerResult[list[AlterConfigsResult]]:
            def run(
                allowed: list[tuple[ConfigResource, Sequence[AlterConfig]]],
            ) -> ControllerResult[list[AlterConfigsResult]]:
                return controller.incremental_alter_configs(
                    image, allowed, validate_only=validate_only
                )

            if not self.gate.on:
                return run(list(changes))
            return run_gated(
                changes,
                lambda change: (
                    self._refusal(image, session, ALTER_CONFIGS, change[0])
                    or self._inheritance_refusal(image, session, *change)
                ),
                run,
                lambda change, error: AlterConfigsResult(
                    resource=change[0], outcome=Outcome.from_error(error)
                ),
            )

        done: list[AlterConfigsResult] = await self.service.submit(alter, principal=principal)
        if not validate_only:
            self._log_change(
                principal,
                "alter configs of",
                (
                    (f"{r.resource.type.name.lower()} {r.resource.name!r}", r.outcome.error_code)
                    for r in done
                ),
            )
        answers: list[dict[str, Any]] = []
        results = iter(done)
        for index, resource in enumerate(request.body.resources):
            if index in refused:
                code, message = refused[index]
            else:
                outcome = next(results).outcome
                code, message = outcome.error_code, outcome.error_message
            answers.append(
                {
                    "error_code": code,
                    "error_message": message,
                    "resource_type": int(resource.resource_type),
                    "resource_name": resource.resource_name,
                }
            )
        return self._answer(request, throttle_time=0, responses=answers)


def _resource_type(value: int) -> ConfigResourceType:
    kind = _KAFKA_RESOURCE_TYPES.get(value)
    if kind is None:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"unsupported config resource type {value}; use topic (2), broker (4) or "
            "namespace (64)",
        )
    return kind


def _alter_op(value: int) -> AlterConfigOp:
    try:
        return AlterConfigOp(value)
    except ValueError:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"unknown config operation {value}; use 0 (set), 1 (delete), 2 (append) or "
            "3 (subtract)",
        ) from None


def _inherits(image: MetadataImage, top: str, below: str, keys: frozenset[str]) -> bool:
    """Whether namespace `below` resolves any of `keys` from its ancestor `top`."""
    left = set(keys)
    for name in enclosing_namespaces(below):  # nearest first, `below` itself included
        if name == top:
            break
        left.difference_update(image.configs.get(ConfigResourceType.NAMESPACE, name))
        if not left:
            return False
    return True


def _override_key(image: MetadataImage, kind: ConfigResourceType, name: str) -> str:
    """The name a resource's overrides are kept under (a topic's is its qualified name)."""
    if kind == ConfigResourceType.TOPIC:
        topic = image.topics.get_by_name(name)
        return topic.qualified_name if topic is not None else name
    return name


def _config_type(definition: ConfigDef | None) -> int:
    return 0 if definition is None else _CONFIG_TYPES.get(definition.type, 0)


def _documentation(definition: ConfigDef | None) -> str | None:
    return None if definition is None else definition.doc
