"""What the cluster is: ApiVersions, Metadata, DescribeCluster and DescribeTopicPartitions.

Read from the committed image, without waiting on writes. There are no real brokers behind
this service: every node in a Metadata or DescribeCluster answer (each live registered broker,
plus this server's own `node_id`, the controller) is advertised at this server's listener, so
a client that follows a leader or the controller reaches this server again.
"""

from __future__ import annotations

from typing import Any

from api.controller.errors import ErrorCode
from api.protocol import codec
from api.protocol.codec import KafkaRequest, response_class
from api.protocol.fast_writer import Encoded, field_encoder
from api.protocol.private import PRIVATE_VERSIONS
from api.server.kafka.base import UNAUTHORIZED_OPS, HandlerGroup, Listener, uuid_of
from api.service.service import MetadataService
from records.model import PartitionRecord
from records.uuids import Uuid
from replay.image import MetadataImage, TopicImage


class MetadataApis(HandlerGroup):
    """ApiVersions, Metadata, DescribeCluster and DescribeTopicPartitions."""

    def __init__(self, service: MetadataService, listener: Listener) -> None:
        super().__init__(service, listener)
        self._brokers: dict[type[Any], tuple[Any, Encoded]] = {}

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
            cluster_authorized_operations=UNAUTHORIZED_OPS,
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
        topic_id = uuid_of(getattr(wanted, "topic_id", None))
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

    # ------------------------------------------------------------------ DescribeTopicPartitions

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

    # ------------------------------------------------------------------ DescribeCluster

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
                cluster_authorized_operations=UNAUTHORIZED_OPS,
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
            cluster_authorized_operations=UNAUTHORIZED_OPS,
        )


# ---------------------------------------------------------------------- topic entries


def _missing_topic(name: str | None, topic_id: Uuid, code: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id.bytes,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": UNAUTHORIZED_OPS,
    }


def _metadata_topic(image: MetadataImage, topic: TopicImage) -> dict[str, Any]:
    return {
        "error_code": 0,
        "name": topic.qualified_name,
        "topic_id": topic.topic_id.bytes,
        "is_internal": False,
        "partitions": [_partition_entry(image, p) for p in topic.partitions],
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
