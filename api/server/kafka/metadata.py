"""What the cluster is: ApiVersions, Metadata, DescribeCluster and DescribeTopicPartitions.

Read from the committed image, without waiting on writes. There are no real brokers behind
this service, so Metadata and DescribeCluster answer as a KIP-919 controller does: the only node
listed is this server, under its own `node_id` (the controller) at its listener
(`advertised_nodes`). Partition leaders and replicas keep the registered broker ids the
controller placed them on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from api.controller.errors import ErrorCode
from api.controller.names import is_internal_topic
from api.protocol import codec
from api.protocol.codec import KafkaRequest, response_class
from api.protocol.fast_writer import Encoded, field_encoder
from api.protocol.private import PRIVATE_VERSIONS
from api.server.kafka.base import UNAUTHORIZED_OPS, HandlerGroup, Listener, Session, uuid_of
from api.service.service import MetadataService
from records.model import PartitionRecord
from records.uuids import Uuid
from replay.image import MetadataImage, TopicImage


def advertised_nodes(listener: Listener) -> list[dict[str, Any]]:
    """The nodes a Metadata or DescribeCluster answer lists: only this server, the controller.

    Clients key connections by node id (kafkajs, librdkafka), so each advertised id must be one
    stable address with one stable rack, and the controller id must be one of them. Listing the
    registered brokers at this server's address broke both (kafkajs closed the shared
    connection when a racked broker's rack changed hands; librdkafka before 2.1 rebound the
    bootstrap connection to each id in turn and never reached the controller). So, as a KIP-919
    controller answers a client that bootstrapped to it, the list names only this server under
    its `node.id`; partition leaders and replicas still name the registered brokers, which a
    client reads as data (as it does for an offline leader) and never needs to reach.
    """
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

    def __init__(self, service: MetadataService, listener: Listener) -> None:
        super().__init__(service, listener)
        self._brokers: dict[type[Any], Encoded] = {}

    # ------------------------------------------------------------------ ApiVersions

    async def api_versions(self, request: KafkaRequest, session: Session) -> Any:
        """Every API and version range this server answers."""
        return self._answer(
            request,
            error_code=0,
            api_keys=codec.supported_api_keys(PRIVATE_VERSIONS),
            throttle_time=0,
        )

    # ------------------------------------------------------------------ Metadata

    async def metadata(self, request: KafkaRequest, session: Session) -> Any:
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

    async def describe_topic_partitions(self, request: KafkaRequest, session: Session) -> Any:
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
            answered.append(_metadata_topic(image, topic, partitions))
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
        # Brokers (1) or controllers (2): either way the one node a client can reach is this
        # server, the controller; `include_fenced_brokers` changes nothing (it is never fenced).
        return self._answer(
            request,
            throttle_time=0,
            error_code=0,
            error_message=None,
            endpoint_type=endpoint_type,
            cluster_id=self.listener.cluster_id,
            controller_id=self.listener.node_id,
            brokers=advertised_nodes(self.listener),
            cluster_authorized_operations=UNAUTHORIZED_OPS,
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
