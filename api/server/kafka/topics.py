"""Topic writes: CreateTopics, DeleteTopics and CreatePartitions.

Each goes through `MetadataService.submit`, so it is group-committed and answered once
durable; the controller validates it (`replay.controller`) and this module only turns kio's
request into commands and the results into the answer, logging one line per topic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from api.protocol import codec
from api.protocol.codec import KafkaRequest, response_class
from api.protocol.generated_writer import Encoded, field_encoder
from api.server.kafka.authorization import Gate, name_of, run_gated
from api.server.kafka.base import HandlerGroup, Listener, Session, uuid_of
from api.service.service import MetadataService
from records.model import AclOperation, ResourceType
from records.slots import preset_constructor
from records.uuids import Uuid
from replay.controller.commands import (
    ControllerResult,
    CreatableTopic,
    CreatedConfig,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
    Outcome,
    TopicRef,
)
from replay.controller.errors import ApiError, ErrorCode
from replay.image import MetadataImage

DESCRIBE_CONFIGS = AclOperation.DESCRIBE_CONFIGS

_creatable: Callable[..., CreatableTopic] = preset_constructor(
    CreatableTopic, ("name", "num_partitions", "replication_factor", "assignments", "configs")
)
"""A request's topic as the controller takes it, stored through its slots (every create)."""

_topic_ref_of: Callable[[str | None, Uuid | None], TopicRef] = preset_constructor(
    TopicRef, ("name", "topic_id")
)
"""A DeleteTopics reference, stored through its slots (every delete)."""


class TopicApis(HandlerGroup):
    """CreateTopics, DeleteTopics and CreatePartitions."""

    def __init__(
        self, service: MetadataService, listener: Listener, gate: Gate | None = None
    ) -> None:
        super().__init__(service, listener, gate)
        self._last_configs: tuple[int, tuple[CreatedConfig, ...], Encoded] | None = None

    async def create_topics(self, request: KafkaRequest, session: Session) -> Any:
        """Create a batch of topics (KIP-4): one result per topic."""
        body = request.body
        topics = [
            _creatable(
                t.name,
                int(t.num_partitions),
                int(t.replication_factor),
                # Most creates name neither: no generator is made for an empty list.
                tuple(
                    (int(a.partition_index), tuple(int(b) for b in a.broker_ids))
                    for a in t.assignments
                )
                if t.assignments
                else (),
                tuple((c.name, c.value) for c in t.configs) if t.configs else (),
            )
            for t in body.topics
        ]
        validate_only = bool(getattr(body, "validate_only", False))
        controller = self.service.controller
        gate = self.gate
        hidden: set[str] | None = None

        def create(image: MetadataImage) -> ControllerResult[list[CreateTopicResult]]:
            nonlocal hidden

            def run(allowed: list[CreatableTopic]) -> ControllerResult[list[CreateTopicResult]]:
                return controller.create_topics(image, allowed, validate_only=validate_only)

            hidden = (
                self._hidden_configs(image, session, (t.name for t in topics)) if gate.on else set()
            )
            if not gate.on:
                return run(topics)
            if gate.allows_cluster(image, session, AclOperation.CREATE):
                return run(topics)
            # A name given twice is left to the controller (INVALID_REQUEST, as Kafka answers
            # duplicates before it authorizes).
            counts = Counter(t.name for t in topics)
            return run_gated(
                topics,
                lambda t: (
                    None
                    if counts[t.name] > 1
                    else gate.topic_refusal(image, session, AclOperation.CREATE, t.name)
                ),
                run,
                lambda t, error: CreateTopicResult(name=t.name, outcome=Outcome.from_error(error)),
            )

        results = await self.service.submit(create, principal=session.principal)
        if hidden is None:
            # A retry answered with its write's stored answer (`create` never ran): the
            # answer is the principal's all the same, so its configs are hidden as a fresh
            # answer's are, by the ACLs of now.
            hidden = self._hidden_configs(self.service.image, session, (r.name for r in results))
        if not validate_only:
            self._log_change(
                session.principal, "create topic", ((r.name, r.outcome.error_code) for r in results)
            )
        return self._answer(
            request,
            throttle_time=0,
            topics=[self._created_topic(request, r, r.name in hidden) for r in results],
        )

    def _hidden_configs(
        self, image: MetadataImage, session: Session, names: Iterable[str]
    ) -> set[str]:
        """The topics whose configs `session` may not see (no DESCRIBE_CONFIGS on them).

        Kafka creates them all the same and leaves their configs out of the answer.
        """
        gate = self.gate
        if not gate.on:
            return set()
        return {
            name
            for name in names
            if not gate.allows(image, session, DESCRIBE_CONFIGS, ResourceType.TOPIC, name)
        }

    def _created_topic(
        self, request: KafkaRequest, result: CreateTopicResult, hidden: bool
    ) -> dict[str, Any]:
        """One topic's entry in the answer.

        Its configs (and sizes) are left out when they are `hidden` from the principal, as
        Kafka answers a principal without DESCRIBE_CONFIGS on the topic.
        """
        created = result.outcome.ok
        return {
            "name": result.name,
            "topic_id": result.topic_id.bytes,
            "error_code": result.outcome.error_code,
            "error_message": result.outcome.error_message,
            "topic_config_error_code": (
                ErrorCode.TOPIC_AUTHORIZATION_FAILED if created and hidden else 0
            ),
            "num_partitions": -1 if hidden else result.num_partitions,
            "replication_factor": -1 if hidden else result.replication_factor,
            "configs": (
                self._created_configs(request, result.configs) if created and not hidden else None
            ),
        }

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
        gate = self.gate

        def delete(image: MetadataImage) -> ControllerResult[list[DeleteTopicResult]]:
            def run(allowed: list[TopicRef]) -> ControllerResult[list[DeleteTopicResult]]:
                return controller.delete_topics(image, allowed)

            if not gate.on or gate.allows_cluster(image, session, AclOperation.DELETE):
                return run(refs)
            return run_gated(
                refs,
                lambda ref: self._deletion_refusal(image, session, ref),
                run,
                lambda ref, error: DeleteTopicResult(
                    name=ref.name,
                    topic_id=ref.topic_id or Uuid.ZERO,
                    outcome=Outcome.from_error(error),
                ),
            )

        results = await self.service.submit(delete, principal=session.principal)
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

    def _deletion_refusal(
        self, image: MetadataImage, session: Session, ref: TopicRef
    ) -> ApiError | None:
        """Why a topic may not be deleted (DELETE on it), or None.

        An unknown id passes on to the controller, which answers UNKNOWN_TOPIC_ID.
        """
        name = name_of(image, ref)
        if name is None:
            return None
        return self.gate.topic_refusal(image, session, AclOperation.DELETE, name)

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
        gate = self.gate

        def create(image: MetadataImage) -> ControllerResult[list[CreatePartitionsResult]]:
            def run(
                allowed: list[CreatePartitionsTopic],
            ) -> ControllerResult[list[CreatePartitionsResult]]:
                return controller.create_partitions(image, allowed, validate_only=validate_only)

            if not gate.on:
                return run(requests)
            return run_gated(
                requests,
                lambda r: gate.topic_refusal(
                    image, session, AclOperation.ALTER, r.topic.name or ""
                ),
                run,
                lambda r, error: CreatePartitionsResult(
                    name=r.topic.name or "", outcome=Outcome.from_error(error)
                ),
            )

        results = await self.service.submit(create, principal=session.principal)
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
    return _topic_ref_of(name, topic_id)
