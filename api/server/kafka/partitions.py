"""Leaders and replicas: ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments.

Elections and reassignments go through `MetadataService.submit` (group-committed, answered
once durable) and log one line per partition; the list of reassignments in progress is read
from the committed image. Answers group partitions by topic, in the controller's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from api.protocol.codec import KafkaRequest
from api.server.kafka.base import HandlerGroup, Session
from records.model import AclOperation
from replay.controller.commands import (
    ControllerResult,
    ElectionType,
    PartitionResult,
    Reassignment,
    TopicPartition,
    TopicRef,
)
from replay.controller.errors import ApiError
from replay.image import MetadataImage


class PartitionApis(HandlerGroup):
    """ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments."""

    async def elect_leaders(self, request: KafkaRequest, session: Session) -> Any:
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

        def elect(image: MetadataImage) -> ControllerResult[list[PartitionResult]]:
            self.gate.require_cluster(image, session, AclOperation.ALTER)
            return controller.elect_leaders(image, wanted, election)

        results = await self.service.submit(elect, principal=session.principal)
        self._log_change(
            session.principal,
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

    async def alter_partition_reassignments(self, request: KafkaRequest, session: Session) -> Any:
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

        def reassign(image: MetadataImage) -> ControllerResult[list[PartitionResult]]:
            self.gate.require_cluster(image, session, AclOperation.ALTER)
            return controller.alter_reassignments(image, reassignments)

        results = await self.service.submit(reassign, principal=session.principal)
        self._log_change(
            session.principal,
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

    async def list_partition_reassignments(self, request: KafkaRequest, session: Session) -> Any:
        """Partitions with a reassignment in progress; null topics = all."""
        image = self.service.image
        try:
            self.gate.require_cluster(image, session, AclOperation.DESCRIBE)
        except ApiError as exc:
            return self._answer(
                request,
                throttle_time=0,
                error_code=exc.error_code,
                error_message=exc.message,
                topics=[],
            )
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


def _by_topic(results: Sequence[PartitionResult]) -> list[tuple[str, list[PartitionResult]]]:
    groups: dict[str, list[PartitionResult]] = {}
    for result in results:
        groups.setdefault(result.topic, []).append(result)
    return list(groups.items())
