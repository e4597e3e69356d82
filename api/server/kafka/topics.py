"""Topic writes: CreateTopics, DeleteTopics and CreatePartitions.

Each goes through `MetadataService.submit`, so it is group-committed and answered once
durable; the controller validates it (`api.controller`) and this module only turns kio's
request into commands and the results into the answer, logging one line per topic.
"""

from __future__ import annotations

from typing import Any

from api.controller.commands import (
    CreatableTopic,
    CreatedConfig,
    CreatePartitionsTopic,
    TopicRef,
)
from api.protocol import codec
from api.protocol.codec import KafkaRequest, response_class
from api.protocol.fast_writer import Encoded, field_encoder
from api.server.kafka.base import HandlerGroup, Listener, Session, uuid_of
from api.service.service import MetadataService
from records.uuids import Uuid


class TopicApis(HandlerGroup):
    """CreateTopics, DeleteTopics and CreatePartitions."""

    def __init__(self, service: MetadataService, listener: Listener) -> None:
        super().__init__(service, listener)
        self._last_configs: tuple[int, tuple[CreatedConfig, ...], Encoded] | None = None

    async def create_topics(self, request: KafkaRequest, session: Session) -> Any:
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
            principal=session.principal,
        )
        if not validate_only:
            self._log_change(
                session.principal, "create topic", ((r.name, r.outcome.error_code) for r in results)
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

    async def delete_topics(self, request: KafkaRequest, session: Session) -> Any:
        """Delete topics by name (v1+) or by name or id (v6)."""
        body = request.body
        if request.header.api_version >= 6:
            refs = [_topic_ref(t.name, uuid_of(t.topic_id)) for t in body.topics]
        else:
            refs = [TopicRef(name=name) for name in body.topic_names]
        controller = self.service.controller
        results = await self.service.submit(
            lambda image: controller.delete_topics(image, refs), principal=session.principal
        )
        self._log_change(
            session.principal,
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

    async def create_partitions(self, request: KafkaRequest, session: Session) -> Any:
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
            principal=session.principal,
        )
        if not validate_only:
            self._log_change(
                session.principal,
                "create partitions",
                ((r.name, r.outcome.error_code) for r in results),
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


def _topic_ref(name: str | None, topic_id: Uuid | None) -> TopicRef:
    if topic_id == Uuid.ZERO:
        topic_id = None
    return TopicRef(name=name, topic_id=topic_id)
