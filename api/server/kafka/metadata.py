"""What the cluster is: ApiVersions, Metadata, DescribeCluster and DescribeTopicPartitions.

Read from the committed image, without waiting on writes. There are no real brokers behind
this service, so Metadata and DescribeCluster answer as a KIP-919 controller does: the only node
listed is this server, under its own `node_id` (the controller) at its listener
(`advertised_nodes`). Partition leaders and replicas keep the registered broker ids the
controller placed them on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from api.protocol import codec
from api.protocol.codec import KafkaRequest, response_class
from api.protocol.generated_writer import Encoded, field_encoder
from api.protocol.private import PRIVATE_VERSIONS
from api.server.kafka.authorization import Gate, refusal_message
from api.server.kafka.base import UNAUTHORIZED_OPS, HandlerGroup, Listener, Session, uuid_of
from api.service.service import MetadataService
from records.model import AclOperation, PartitionRecord, ResourceType
from records.uuids import Uuid
from replay.controller.authorizer import CLUSTER_NAME, CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from replay.controller.errors import ErrorCode
from replay.controller.names import is_internal_topic
from replay.image import MetadataImage, TopicImage


def advertised_nodes(listener: Listener) -> list[dict[str, Any]]:
    """The nodes a Metadata or DescribeCluster answer lists: only this server, the controller.

    On a quorum's controller listener: every voter, and the leader is the controller.

    Clients key connections by node id (kafkajs, librdkafka), so each advertised id must be one
    stable address with one stable rack, and the controller id must be one of them. Listing the
    registered brokers at this server's address broke both (kafkajs closed the shared
    connection when a racked broker's rack changed hands; librdkafka before 2.1 rebound the
    bootstrap connection to each id in turn and never reached the controller). So, as a KIP-919
    controller answers a client that bootstrapped to it, the list names only this server under
    its `node.id`; partition leaders and replicas still name the registered brokers, which a
    client reads as data (as it does for an offline leader) and never needs to reach.
    """
    if listener.quorum is not None and listener.advertises_voters:
        # A quorum's controller listener lists every voter at its controller address: the
        # controllers and our CLI send writes to the one named controller. A client listener
        # names only this node (below): its clients cannot reach the controller listeners,
        # and the writes it does not lead are forwarded to the leader (`forwarding.py`).
        return [
            {
                "node_id": node_id,
                "broker_id": node_id,
                "host": host,
                "port": port,
                "rack": None,
                "is_fenced": False,
            }
            for node_id, (host, port) in sorted(listener.quorum.voter_addresses().items())
        ]
    return [
        {
            "node_id": listener.node_id,
            "broker_id": listener.node_id,
            "host": listener.host,
            "port": listener.port,
            "rack": None,
            "is_fenced": False,
        }
    ]


class MetadataApis(HandlerGroup):
    """ApiVersions, Metadata, DescribeCluster and DescribeTopicPartitions."""

    def __init__(
        self,
        service: MetadataService,
        listener: Listener,
        gate: Gate | None = None,
        *,
        features: Callable[[int], dict[str, Any]] | None = None,
        also_served: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        """`features(version)`: ApiVersions' feature fields (`kafka.features`; None: none).

        `also_served`: APIs ApiVersions lists beyond these handlers' (`sole_voter.py`).
        """
        super().__init__(service, listener, gate)
        self._brokers: dict[type[Any], Encoded] = {}
        self._features = features
        self._served = {**PRIVATE_VERSIONS, **(also_served or {})}

    # ------------------------------------------------------------------ ApiVersions

    async def api_versions(self, request: KafkaRequest, session: Session) -> Any:
        """Every API and version range this server answers."""
        return self._answer(
            request,
            error_code=0,
            api_keys=codec.supported_api_keys(self._served),
            throttle_time=0,
            **({} if self._features is None else self._features(request.header.api_version)),
        )

    # ------------------------------------------------------------------ Metadata

    async def metadata(self, request: KafkaRequest, session: Session) -> Any:
        """Brokers, the controller and topics; unknown topics are errors (no auto-creation)."""
        image = self.service.image
        body = request.body
        version = request.header.api_version
        wanted = body.topics
        topics: list[dict[str, Any]]
        if wanted is None or (version == 0 and not wanted):
            # Every topic the principal may describe; the others are left out, unmentioned.
            topics = [
                _metadata_topic(image, t)
                for t in image.topics.sorted()
                if self._describable(image, session, t.qualified_name)
            ]
        else:
            topics = [self._metadata_lookup(image, session, t) for t in wanted]
        if getattr(body, "include_topic_authorized_operations", False):
            for topic in topics:
                if topic["error_code"] == 0:
                    topic["topic_authorized_operations"] = self._topic_operations(
                        image, session, topic["name"]
                    )
        cluster_operations = UNAUTHORIZED_OPS
        if getattr(body, "include_cluster_authorized_operations", False):
            cluster_operations = self._cluster_operations(image, session)
            if cluster_operations != UNAUTHORIZED_OPS and not cluster_operations & (
                1 << AclOperation.DESCRIBE
            ):
                cluster_operations = 0  # Kafka: none told without DESCRIBE on the cluster
        return self._answer(
            request,
            throttle_time=0,
            brokers=self._metadata_brokers(request, image),
            cluster_id=self.listener.cluster_id,
            controller_id=self.listener.controller_id,
            topics=topics,
            cluster_authorized_operations=cluster_operations,
            error_code=0,
        )

    def _describable(self, image: MetadataImage, session: Session, name: str) -> bool:
        return self.gate.allows(image, session, AclOperation.DESCRIBE, ResourceType.TOPIC, name)

    def _topic_operations(self, image: MetadataImage, session: Session, name: str) -> int:
        """A topic's `topic_authorized_operations` bit field, from the authorizer."""
        return self._operations(image, session, ResourceType.TOPIC, name, TOPIC_OPERATIONS)

    def _cluster_operations(self, image: MetadataImage, session: Session) -> int:
        """`cluster_authorized_operations`, as `_topic_operations` for the cluster."""
        return self._operations(
            image, session, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS
        )

    def _operations(
        self,
        image: MetadataImage,
        session: Session,
        resource_type: ResourceType,
        name: str,
        operations: tuple[AclOperation, ...],
    ) -> int:
        """A resource's operations bit field; Kafka's "not asked for" without an authorizer."""
        authorizer = self.gate.authorizer
        if authorizer is None:
            return UNAUTHORIZED_OPS
        return authorizer.authorized_operations(
            image, session.principal, session.host, resource_type, name, operations=operations
        )

    def _metadata_brokers(self, request: KafkaRequest, image: MetadataImage) -> Encoded:
        """The broker list of a Metadata answer, written once per response version.

        It is `advertised_nodes`, which depends only on the listener, so it never changes.
        """
        header = request.header
        entity_class = response_class(header.api_key, header.api_version)
        cached = self._brokers.get(entity_class)
        if cached is None:
            cached = field_encoder(entity_class, "brokers")(advertised_nodes(self.listener))
            self._brokers[entity_class] = cached
        return cached

    def _metadata_lookup(
        self, image: MetadataImage, session: Session, wanted: Any
    ) -> dict[str, Any]:
        name = getattr(wanted, "name", None)
        topic_id = uuid_of(getattr(wanted, "topic_id", None))
        if name is None and topic_id is not None and topic_id != Uuid.ZERO:
            found = image.topics.get(topic_id)
            if found is None:
                return _missing_topic(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID)
            if not self._describable(image, session, found.qualified_name):
                # Kafka: ids are not secret, the name is: refused without it.
                return _missing_topic(None, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            return _metadata_topic(image, found)
        if name is None:
            return _missing_topic(None, Uuid.ZERO, ErrorCode.INVALID_REQUEST)
        if not self._describable(image, session, name):
            # Before the lookup: whether the topic exists is not told either.
            return _missing_topic(name, Uuid.ZERO, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        topic = image.topics.get_by_name(name)
        if topic is None:
            return _missing_topic(name, Uuid.ZERO, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return _metadata_topic(image, topic)

    # ------------------------------------------------------------------ DescribeTopicPartitions

    async def describe_topic_partitions(self, request: KafkaRequest, session: Session) -> Any:
        """Topics and their partitions, paged by `response_partition_limit` and a cursor."""
        image = self.service.image
        body = request.body
        limit = max(1, int(body.response_partition_limit))
        named = bool(body.topics)
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
            if not self._describable(image, session, name):
                if named:  # as Metadata: refused by name, whether or not it exists
                    answered.append(
                        _missing_topic(name, Uuid.ZERO, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    )
                continue  # listing all: left out
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
            entry = _metadata_topic(image, topic, partitions)
            if self.gate.on:  # Kafka fills it in on every DescribeTopicPartitions answer
                entry["topic_authorized_operations"] = self._topic_operations(image, session, name)
            answered.append(entry)
            if first + len(partitions) < len(topic.partitions):
                next_cursor = {"topic_name": name, "partition_index": first + len(partitions)}
                break
        return self._answer(request, throttle_time=0, topics=answered, next_cursor=next_cursor)

    # ------------------------------------------------------------------ DescribeCluster

    async def describe_cluster(self, request: KafkaRequest, session: Session) -> Any:
        """The cluster id and the controller, this server, as the one node (`advertised_nodes`)."""
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
                cluster_authorized_operations=UNAUTHORIZED_OPS,
            )
        image = self.service.image
        cluster_operations = UNAUTHORIZED_OPS
        if getattr(body, "include_cluster_authorized_operations", False):
            cluster_operations = self._cluster_operations(image, session)
        if not self.gate.allows_cluster(image, session, AclOperation.DESCRIBE):
            return self._answer(
                request,
                throttle_time=0,
                error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                error_message=refusal_message(
                    session, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
                ),
                endpoint_type=endpoint_type,
                cluster_id=self.listener.cluster_id,
                controller_id=-1,
                brokers=[],
                cluster_authorized_operations=cluster_operations,
            )
        # Brokers (1) or controllers (2): either way the one node a client can reach is this
        # server, the controller; `include_fenced_brokers` changes nothing (it is never fenced).
        return self._answer(
            request,
            throttle_time=0,
            error_code=0,
            error_message=None,
            endpoint_type=endpoint_type,
            cluster_id=self.listener.cluster_id,
            controller_id=self.listener.controller_id,
            brokers=advertised_nodes(self.listener),
            cluster_authorized_operations=cluster_operations,
        )


# ---------------------------------------------------------------------- topic entries


def _missing_topic(name: str | None, topic_id: Uuid, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id.bytes,
        "is_internal": name is not None and is_internal_topic(name),
        "partitions": [],
        "topic_authorized_operations": UNAUTHORIZED_OPS,
    }


def _metadata_topic(
    image: MetadataImage, topic: TopicImage, partitions: Sequence[PartitionRecord] | None = None
) -> dict[str, Any]:
    """A topic's entry with `partitions` (by default all of them)."""
    listed = topic.partitions if partitions is None else partitions
    return {
        "error_code": 0,
        "name": topic.qualified_name,
        "topic_id": topic.topic_id.bytes,
        "is_internal": is_internal_topic(topic.qualified_name),
        "partitions": [_partition_entry(image, p) for p in listed],
        "topic_authorized_operations": UNAUTHORIZED_OPS,
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
