"""The Kafka admin APIs: decoded kio requests in, answers out, answered by the service.

Reads are answered from the committed image without waiting on writes; writes go through
`MetadataService.submit`, so they are group-committed and answered once durable. Every
answer is a `codec.Answer`: the plain values `codec.build` takes for the response class of
the request's version, which keeps only the fields that version has, so one handler serves
every advertised version of its API. `codec.encode_response` writes it without building the
entity; `Answer.entity()` builds it.

There are no real brokers behind this service: every node in a Metadata or DescribeCluster
answer (each live registered broker, plus this server's own `node_id`, the controller) is
advertised at this server's listener, so a client that follows a leader or the controller
reaches this server again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from api.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    AlterConfigsResult,
    ConfigResource,
    CreatableTopic,
    CreatedConfig,
    CreatePartitionsTopic,
    ElectionType,
    PartitionResult,
    Reassignment,
    TopicPartition,
    TopicRef,
)
from api.controller.config_defs import CLUSTER_CONFIGS, TOPIC_CONFIGS
from api.controller.config_values import ConfigDef, ConfigType
from api.controller.errors import ApiError, ErrorCode
from api.protocol import codec
from api.protocol.codec import KafkaRequest, response_class
from api.protocol.fast_writer import Encoded, field_encoder
from api.protocol.private import PRIVATE_VERSIONS
from api.service.service import MetadataService
from records.model import ConfigResourceType, PartitionRecord
from records.uuids import Uuid
from replay.image import MetadataImage, TopicImage

logger = logging.getLogger("api.server")

ANONYMOUS = "User:ANONYMOUS"
"""The principal of a Kafka client: this server has no authentication (as PLAINTEXT)."""

_UNAUTHORIZED_OPS = -(2**31)
"""`authorized_operations` when the client did not ask for them (Kafka's INT32_MIN)."""

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Listener:
    """Where this server is reached (`advertised.listeners`) and who it is in answers."""

    host: str
    port: int
    node_id: int = 0
    cluster_id: str = ""


Handler = Callable[[KafkaRequest, str], Awaitable[codec.Answer]]


class KafkaApis:
    """Answers the Kafka admin APIs of `codec.SUPPORTED_VERSIONS` from a service."""

    def __init__(self, service: MetadataService, listener: Listener) -> None:
        self.service = service
        self.listener = listener
        self._last_configs: tuple[int, tuple[CreatedConfig, ...], Encoded] | None = None
        self._brokers: dict[type[Any], tuple[Any, Encoded]] = {}
        self._handlers: dict[int, Handler] = {
            18: self.api_versions,
            3: self.metadata,
            19: self.create_topics,
            20: self.delete_topics,
            37: self.create_partitions,
            32: self.describe_configs,
            33: self.alter_configs,
            44: self.incremental_alter_configs,
            60: self.describe_cluster,
            75: self.describe_topic_partitions,
            43: self.elect_leaders,
            45: self.alter_partition_reassignments,
            46: self.list_partition_reassignments,
            29: self.describe_acls,
        }

    async def handle(self, request: KafkaRequest, principal: str = ANONYMOUS) -> codec.Answer:
        """The answer to a decoded request."""
        return await self._handlers[request.header.api_key](request, principal)

    def _answer(self, request: KafkaRequest, **values: Any) -> codec.Answer:
        header = request.header
        return codec.Answer(response_class(header.api_key, header.api_version), values)

    def _log_change(self, principal: str, what: str, results: Iterable[tuple[str, int]]) -> None:
        for name, code in results:
            outcome = "ok" if code == 0 else ErrorCode(code).name
            logger.info("%s %s %s: %s", principal, what, name, outcome)

    # ------------------------------------------------------------------ nodes

    def _nodes(self, image: MetadataImage, *, fenced: bool = False) -> list[dict[str, Any]]:
        """Live registered brokers (and fenced ones if asked) plus this server, at its address."""
        nodes: dict[int, dict[str, Any]] = {}
        for broker in image.cluster.sorted():
            if broker.fenced and not fenced:
                continue
            nodes[broker.broker_id] = {
                "node_id": broker.broker_id,
                "broker_id": broker.broker_id,
                "host": self.listener.host,
                "port": self.listener.port,
                "rack": broker.rack,
                "is_fenced": broker.fenced,
            }
        nodes.setdefault(
            self.listener.node_id,
            {
                "node_id": self.listener.node_id,
                "broker_id": self.listener.node_id,
                "host": self.listener.host,
                "port": self.listener.port,
                "rack": None,
                "is_fenced": False,
            },
        )
        return [nodes[i] for i in sorted(nodes)]

    # ------------------------------------------------------------------ ApiVersions

    async def api_versions(self, request: KafkaRequest, principal: str) -> Any:
        """Every API and version range this server answers."""
        return self._answer(
            request,
            error_code=0,
            api_keys=codec.supported_api_keys(PRIVATE_VERSIONS),
            throttle_time=0,
        )

    # ------------------------------------------------------------------ Metadata

    async def metadata(self, request: KafkaRequest, principal: str) -> Any:
        """Brokers, the controller and topics; unknown topics are errors (no auto-creation)."""
        image = self.service.image
        version = request.header.api_version
        wanted = request.body.topics
        topics: list[dict[str, Any]]
        if wanted is None or (version == 0 and not wanted):
            topics = [_metadata_topic(image, t) for t in image.topics.sorted()]
        else:
            topics = [self._metadata_lookup(image, t) for t in wanted]
        return self._answer(
            request,
            throttle_time=0,
            brokers=self._metadata_brokers(request, image),
            cluster_id=self.listener.cluster_id,
            controller_id=self.listener.node_id,
            topics=topics,
            cluster_authorized_operations=_UNAUTHORIZED_OPS,
            error_code=0,
        )

    def _metadata_brokers(self, request: KafkaRequest, image: MetadataImage) -> Encoded:
        """The broker list of a Metadata answer, written once per version and cluster image.

        Every Metadata answer carries it, and it changes only when a broker does (the image's
        cluster part is immutable, replaced on every change).
        """
        header = request.header
        entity_class = response_class(header.api_key, header.api_version)
        cached = self._brokers.get(entity_class)
        if cached is None or cached[0] is not image.cluster:
            encoded = field_encoder(entity_class, "brokers")(self._nodes(image))
            cached = self._brokers[entity_class] = (image.cluster, encoded)
        return cached[1]

    def _metadata_lookup(self, image: MetadataImage, wanted: Any) -> dict[str, Any]:
        name = getattr(wanted, "name", None)
        topic_id = _uuid_of(getattr(wanted, "topic_id", None))
        if name is None and topic_id is not None and topic_id != Uuid.ZERO:
            found = image.topics.get(topic_id)
            if found is None:
                return _missing_topic(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
            return _metadata_topic(image, found)
        if name is None:
            return _missing_topic(None, Uuid.ZERO, ErrorCode.INVALID_REQUEST)
        topic = image.topics.get_by_name(name)
        if topic is None:
            return _missing_topic(name, Uuid.ZERO, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return _metadata_topic(image, topic)

    # ------------------------------------------------------------------ topics

    async def create_topics(self, request: KafkaRequest, principal: str) -> Any:
        """Create a batch of topics (KIP-4): one result per topic."""
        body = request.body
        topics = [
            CreatableTopic(
                name=t.name,
                num_partitions=int(t.num_partitions),
                replication_factor=int(t.replication_factor),
                assignments=tuple(
                    (int(a.partition_index), tuple(int(b) for b in a.broker_ids))
                    for a in t.assignments
                ),
                configs=tuple((c.name, c.value) for c in t.configs),
            )
            for t in body.topics
        ]
        validate_only = bool(getattr(body, "validate_only", False))
        controller = self.service.controller
        results = await self.service.submit(
            lambda image: controller.create_topics(image, topics, validate_only=validate_only),
            principal=principal,
        )
        if not validate_only:
            self._log_change(
                principal, "create topic", ((r.name, r.outcome.error_code) for r in results)
            )
        return self._answer(
            request,
            throttle_time=0,
            topics=[
                {
                    "name": r.name,
                    "topic_id": r.topic_id.bytes,
                    "error_code": r.outcome.error_code,
                    "error_message": r.outcome.error_message,
                    "num_partitions": r.num_partitions,
                    "replication_factor": r.replication_factor,
                    "configs": self._created_configs(request, r.configs) if r.outcome.ok else None,
                }
                for r in results
            ],
        )

    def _created_configs(
        self, request: KafkaRequest, configs: tuple[CreatedConfig, ...]
    ) -> Encoded | tuple[()]:
        """A new topic's configs in the request's version, written once per config state.

        The controller hands consecutive creates the very same tuple (while the configs that
        resolve them do not change); its bytes are kept and copied into each answer.
        """
        header = request.header
        if header.api_version < 5:
            return ()  # configs are in CreateTopics answers from v5
        last = self._last_configs
        if last is not None and last[0] == header.api_version and last[1] is configs:
            return last[2]
        topic_class = codec.nested_class(
            response_class(header.api_key, header.api_version), "topics"
        )
        encoded = field_encoder(topic_class, "configs")(
            [
                {
                    "name": c.name,
                    "value": c.value,
                    "read_only": c.read_only,
                    "config_source": c.source,
                    "is_sensitive": c.sensitive,
                }
                for c in configs
            ]
        )
        self._last_configs = (header.api_version, configs, encoded)
        return encoded

    async def delete_topics(self, request: KafkaRequest, principal: str) -> Any:
        """Delete topics by name (v1+) or by name or id (v6)."""
        body = request.body
        if request.header.api_version >= 6:
            refs = [_topic_ref(t.name, _uuid_of(t.topic_id)) for t in body.topics]
        else:
            refs = [TopicRef(name=name) for name in body.topic_names]
        controller = self.service.controller
        results = await self.service.submit(
            lambda image: controller.delete_topics(image, refs), principal=principal
        )
        self._log_change(
            principal,
            "delete topic",
            ((r.name or str(r.topic_id), r.outcome.error_code) for r in results),
        )
        return self._answer(
            request,
            throttle_time=0,
            responses=[
                {
                    "name": r.name,
                    "topic_id": r.topic_id.bytes,
                    "error_code": r.outcome.error_code,
                    "error_message": r.outcome.error_message,
                }
                for r in results
            ],
        )

    async def create_partitions(self, request: KafkaRequest, principal: str) -> Any:
        """Raise partition counts (lowering is DeletePartitions, a private API)."""
        body = request.body
        requests = [
            CreatePartitionsTopic(
                topic=TopicRef(name=t.name),
                count=int(t.count),
                assignments=(
                    None
                    if t.assignments is None
                    else tuple(tuple(int(b) for b in a.broker_ids) for a in t.assignments)
                ),
            )
            for t in body.topics
        ]
        validate_only = bool(body.validate_only)
        controller = self.service.controller
        results = await self.service.submit(
            lambda image: controller.create_partitions(
                image, requests, validate_only=validate_only
            ),
            principal=principal,
        )
        if not validate_only:
            self._log_change(
                principal, "create partitions", ((r.name, r.outcome.error_code) for r in results)
            )
        return self._answer(
            request,
            throttle_time=0,
            results=[
                {
                    "name": r.name,
                    "error_code": r.outcome.error_code,
                    "error_message": r.outcome.error_message,
                }
                for r in results
            ],
        )

    async def describe_topic_partitions(self, request: KafkaRequest, principal: str) -> Any:
        """Topics and their partitions, paged by `response_partition_limit` and a cursor."""
        image = self.service.image
        body = request.body
        limit = max(1, int(body.response_partition_limit))
        names = sorted({t.name for t in body.topics}) or sorted(image.topics.by_name)
        cursor = body.cursor
        start_name, start_partition = (
            (cursor.topic_name, int(cursor.partition_index)) if cursor else (None, 0)
        )
        answered: list[dict[str, Any]] = []
        next_cursor: dict[str, Any] | None = None
        budget = limit
        for name in names:
            if start_name is not None and name < start_name:
                continue
            first = start_partition if name == start_name else 0
            topic = image.topics.get_by_name(name)
            if topic is None:
                answered.append(
                    _missing_topic(name, Uuid.ZERO, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                )
                continue
            if budget == 0:
                next_cursor = {"topic_name": name, "partition_index": first}
                break
            partitions = topic.partitions[first : first + budget]
            budget -= len(partitions)
            entry = _metadata_topic(image, topic)
            entry["partitions"] = [_partition_entry(image, p) for p in partitions]
            answered.append(entry)
            if first + len(partitions) < len(topic.partitions):
                next_cursor = {"topic_name": name, "partition_index": first + len(partitions)}
                break
        return self._answer(request, throttle_time=0, topics=answered, next_cursor=next_cursor)

    # ------------------------------------------------------------------ configs

    async def describe_configs(self, request: KafkaRequest, principal: str) -> Any:
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
                resolved = self.service.controller.describe_configs(
                    image, ConfigResource(type=kind, name=resource.resource_name)
                )
            except ApiError as exc:
                entry["error_code"] = exc.error_code
                entry["error_message"] = str(exc)
                results.append(entry)
                continue
            keys = resource.configuration_keys
            definitions = TOPIC_CONFIGS if kind == ConfigResourceType.TOPIC else CLUSTER_CONFIGS
            entry["configs"] = [
                {
                    "name": c.name,
                    "value": None if c.sensitive else c.value,
                    "read_only": c.read_only,
                    "config_source": int(c.source),
                    "is_default": int(c.source) == 5,
                    "is_sensitive": c.sensitive,
                    "synonyms": (
                        [{"name": c.name, "value": c.value, "source": int(c.source)}]
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

    async def incremental_alter_configs(self, request: KafkaRequest, principal: str) -> Any:
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
        return await self._alter(request, principal, changes, refused)

    async def alter_configs(self, request: KafkaRequest, principal: str) -> Any:
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
        return await self._alter(request, principal, changes, refused)

    async def _alter(
        self,
        request: KafkaRequest,
        principal: str,
        changes: Sequence[tuple[ConfigResource, Sequence[AlterConfig]]],
        refused: dict[int, tuple[ErrorCode, str | None]],
    ) -> Any:
        validate_only = bool(request.body.validate_only)
        controller = self.service.controller
        done: list[AlterConfigsResult] = await self.service.submit(
            lambda image: controller.incremental_alter_configs(
                image, changes, validate_only=validate_only
            ),
            principal=principal,
        )
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

    # ------------------------------------------------------------------ cluster

    async def describe_cluster(self, request: KafkaRequest, principal: str) -> Any:
        """The cluster id, the controller (this server) and the brokers."""
        image = self.service.image
        body = request.body
        endpoint_type = int(getattr(body, "endpoint_type", 1))
        if endpoint_type not in (1, 2):
            return self._answer(
                request,
                throttle_time=0,
                error_code=ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
                error_message=f"unknown endpoint type {endpoint_type}",
                endpoint_type=endpoint_type,
                cluster_id=self.listener.cluster_id,
                controller_id=-1,
                brokers=[],
                cluster_authorized_operations=_UNAUTHORIZED_OPS,
            )
        fenced = bool(getattr(body, "include_fenced_brokers", False))
        nodes = self._nodes(image, fenced=fenced)
        if endpoint_type == 2:  # controllers: this server is the only one
            nodes = [n for n in nodes if n["node_id"] == self.listener.node_id]
        return self._answer(
            request,
            throttle_time=0,
            error_code=0,
            error_message=None,
            endpoint_type=endpoint_type,
            cluster_id=self.listener.cluster_id,
            controller_id=self.listener.node_id,
            brokers=nodes,
            cluster_authorized_operations=_UNAUTHORIZED_OPS,
        )

    async def describe_acls(self, request: KafkaRequest, principal: str) -> Any:
        """No ACLs exist yet: an empty answer (it tells clients this is a modern broker)."""
        return self._answer(
            request, throttle_time=0, error_code=0, error_message=None, resources=[]
        )

    # ------------------------------------------------------------------ partitions

    async def elect_leaders(self, request: KafkaRequest, principal: str) -> Any:
        """Preferred (or unclean) leader election; null partitions = all."""
        body = request.body
        election = ElectionType(int(getattr(body, "election_type", 0)))
        wanted = (
            None
            if body.topic_partitions is None
            else [
                TopicPartition(topic=TopicRef(name=t.topic), partition=int(p))
                for t in body.topic_partitions
                for p in t.partitions
            ]
        )
        controller = self.service.controller
        results = await self.service.submit(
            lambda image: controller.elect_leaders(image, wanted, election), principal=principal
        )
        self._log_change(
            principal,
            "elect leader of",
            ((f"{r.topic}-{r.partition}", r.outcome.error_code) for r in results),
        )
        return self._answer(
            request,
            throttle_time=0,
            error_code=0,
            replica_election_results=[
                {
                    "topic": topic,
                    "partition_result": [
                        {
                            "partition_id": r.partition,
                            "error_code": r.outcome.error_code,
                            "error_message": r.outcome.error_message,
                        }
                        for r in group
                    ],
                }
                for topic, group in _by_topic(results)
            ],
        )

    async def alter_partition_reassignments(self, request: KafkaRequest, principal: str) -> Any:
        """Start or cancel reassignments (KIP-455)."""
        body = request.body
        reassignments = [
            Reassignment(
                partition=TopicPartition(
                    topic=TopicRef(name=t.name), partition=int(p.partition_index)
                ),
                replicas=None if p.replicas is None else tuple(int(r) for r in p.replicas),
            )
            for t in body.topics
            for p in t.partitions
        ]
        controller = self.service.controller
        results = await self.service.submit(
            lambda image: controller.alter_reassignments(image, reassignments),
            principal=principal,
        )
        self._log_change(
            principal,
            "reassign",
            ((f"{r.topic}-{r.partition}", r.outcome.error_code) for r in results),
        )
        return self._answer(
            request,
            throttle_time=0,
            allow_replication_factor_change=getattr(body, "allow_replication_factor_change", True),
            error_code=0,
            error_message=None,
            responses=[
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": r.partition,
                            "error_code": r.outcome.error_code,
                            "error_message": r.outcome.error_message,
                        }
                        for r in group
                    ],
                }
                for topic, group in _by_topic(results)
            ],
        )

    async def list_partition_reassignments(self, request: KafkaRequest, principal: str) -> Any:
        """Partitions with a reassignment in progress; null topics = all."""
        image = self.service.image
        wanted: dict[str, set[int]] | None = None
        if request.body.topics is not None:
            wanted = {}
            for t in request.body.topics:
                wanted.setdefault(t.name, set()).update(int(p) for p in t.partition_indexes)
        moving: dict[str, list[dict[str, Any]]] = {}
        for topic, partition in self.service.controller.list_reassignments(image):
            name = topic.qualified_name
            if wanted is not None and partition.partition_id not in wanted.get(name, ()):
                continue
            moving.setdefault(name, []).append(
                {
                    "partition_index": partition.partition_id,
                    "replicas": list(partition.replicas),
                    "adding_replicas": list(partition.adding_replicas),
                    "removing_replicas": list(partition.removing_replicas),
                }
            )
        return self._answer(
            request,
            throttle_time=0,
            error_code=0,
            error_message=None,
            topics=[{"name": n, "partitions": p} for n, p in moving.items()],
        )


# ---------------------------------------------------------------------- helpers


def _uuid_of(value: Any) -> Uuid | None:
    if value is None:
        return None
    return Uuid(bytes=value.bytes)


def _topic_ref(name: str | None, topic_id: Uuid | None) -> TopicRef:
    if topic_id == Uuid.ZERO:
        topic_id = None
    return TopicRef(name=name, topic_id=topic_id)


def _missing_topic(name: str | None, topic_id: Uuid, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id.bytes,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": _UNAUTHORIZED_OPS,
    }


def _metadata_topic(image: MetadataImage, topic: TopicImage) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": topic.qualified_name,
        "topic_id": topic.topic_id.bytes,
        "is_internal": False,
        "partitions": [_partition_entry(image, p) for p in topic.partitions],
        "topic_authorized_operations": _UNAUTHORIZED_OPS,
    }


def _partition_entry(image: MetadataImage, partition: PartitionRecord) -> dict[str, Any]:
    brokers = image.cluster.brokers
    offline = [r for r in partition.replicas if r not in brokers or brokers[r].fenced]
    return {
        "error_code": 0,
        "partition_index": partition.partition_id,
        "leader_id": partition.leader,
        "leader_epoch": partition.leader_epoch,
        "replica_nodes": list(partition.replicas),
        "isr_nodes": list(partition.isr),
        "offline_replicas": offline,
        "eligible_leader_replicas": None,
        "last_known_elr": None,
        "mode": int(partition.mode),
    }


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


def _by_topic(results: Sequence[PartitionResult]) -> list[tuple[str, list[PartitionResult]]]:
    groups: dict[str, list[PartitionResult]] = {}
    for result in results:
        groups.setdefault(result.topic, []).append(result)
    return list(groups.items())
