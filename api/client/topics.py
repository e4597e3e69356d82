"""`AdminClient`'s topic and partition APIs: Kafka's, and our namespaces and deletions.

CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders, the partition reassignments and
DescribeTopicPartitions (Kafka's), then namespaces, MoveTopic and pending partition deletions
(ours, `api.protocol.private`). They return the controller's result dataclasses
(`replay.controller.commands`) where the CLI prints them, else kio's response entity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from api.client.apis import INT16_RANGE, INT32_RANGE, ClientApis, fits, outcome, uuid_of
from api.client.connection import RemoteError
from api.protocol import private
from records.uuids import Uuid
from replay.controller.commands import (
    CancelPartitionDeletion,
    CancelPartitionDeletionResult,
    CreatableTopic,
    CreateNamespace,
    CreateNamespaceResult,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteNamespace,
    DeleteNamespaceResult,
    DeletePartitionsResult,
    DeletePartitionsTopic,
    DeleteTopicResult,
    ElectionType,
    MoveTopic,
    MoveTopicResult,
    NamespaceInfo,
    PartitionResult,
    PurgeResult,
    Reassignment,
    TopicPartition,
    TopicRef,
)


class TopicApis(ClientApis):
    """Topics, partitions, leaders, reassignments and namespaces."""

    async def create_topics(
        self, topics: Sequence[CreatableTopic], *, validate_only: bool = False
    ) -> list[CreateTopicResult]:
        """CreateTopics: one result per topic."""
        for t in topics:
            fits(t.num_partitions, INT32_RANGE, "a partition count of")
            fits(t.replication_factor, INT16_RANGE, "a replication factor of")
            for partition, brokers in t.assignments:
                fits(partition, INT32_RANGE, "partition")
                fits(brokers, INT32_RANGE, "broker id")
        response = await self.write(
            19,
            topics=[
                {
                    "name": t.name,
                    "num_partitions": t.num_partitions,
                    "replication_factor": t.replication_factor,
                    "assignments": [
                        {"partition_index": p, "broker_ids": list(b)} for p, b in t.assignments
                    ],
                    "configs": [{"name": k, "value": v} for k, v in t.configs],
                }
                for t in topics
            ],
            timeout=self.timeout_ms,
            validate_only=validate_only,
        )
        return [
            CreateTopicResult(
                name=t.name,
                topic_id=uuid_of(t.topic_id),
                outcome=outcome(t.error_code, t.error_message),
                num_partitions=int(t.num_partitions),
                replication_factor=int(t.replication_factor),
            )
            for t in response.topics
        ]

    async def delete_topics(self, refs: Sequence[TopicRef]) -> list[DeleteTopicResult]:
        """DeleteTopics (v6: by name or id)."""
        response = await self.write(
            20,
            topics=[{"name": r.name, "topic_id": (r.topic_id or Uuid.ZERO).bytes} for r in refs],
            topic_names=[r.name for r in refs if r.name is not None],
            timeout=self.timeout_ms,
        )
        return [
            DeleteTopicResult(
                name=r.name,
                topic_id=uuid_of(getattr(r, "topic_id", None)),
                outcome=outcome(r.error_code, r.error_message),
            )
            for r in response.responses
        ]

    async def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], *, validate_only: bool = False
    ) -> list[CreatePartitionsResult]:
        """CreatePartitions: raise partition counts."""
        for t in topics:
            fits(t.count, INT32_RANGE, "a partition count of")
            for brokers in t.assignments or ():
                fits(brokers, INT32_RANGE, "broker id")
        response = await self.write(
            37,
            topics=[
                {
                    "name": await self.topic_name(t.topic),
                    "count": t.count,
                    "assignments": None
                    if t.assignments is None
                    else [{"broker_ids": list(b)} for b in t.assignments],
                }
                for t in topics
            ],
            timeout=self.timeout_ms,
            validate_only=validate_only,
        )
        return [
            CreatePartitionsResult(name=r.name, outcome=outcome(r.error_code, r.error_message))
            for r in response.results
        ]

    async def describe_topic_partitions(self, topics: Sequence[str], *, limit: int = 2000) -> Any:
        """DescribeTopicPartitions, first page (kio response entity)."""
        return await self.request(
            75, topics=[{"name": n} for n in topics], response_partition_limit=limit, cursor=None
        )

    async def elect_leaders(
        self, partitions: Sequence[TopicPartition] | None, election: ElectionType
    ) -> list[PartitionResult]:
        """ElectLeaders (None: every partition not led by its preferred replica)."""
        wanted: list[dict[str, Any]] | None = None
        for p in partitions or ():
            fits(p.partition, INT32_RANGE, "partition")
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for p in partitions:
                by_topic.setdefault(await self.topic_name(p.topic), []).append(p.partition)
            wanted = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
        response = await self.write(
            43, election_type=int(election), topic_partitions=wanted, timeout=self.timeout_ms
        )
        if int(response.error_code) != 0:
            raise RemoteError(
                int(response.error_code), f"ElectLeaders failed ({int(response.error_code)})"
            )
        return [
            PartitionResult(
                topic=t.topic,
                partition=int(p.partition_id),
                outcome=outcome(p.error_code, p.error_message),
            )
            for t in response.replica_election_results
            for p in t.partition_result
        ]

    async def alter_partition_reassignments(
        self, reassignments: Sequence[Reassignment]
    ) -> list[PartitionResult]:
        """AlterPartitionReassignments (replicas None cancels); one result per partition."""
        for r in reassignments:
            fits(r.partition.partition, INT32_RANGE, "partition")
            fits(r.replicas or (), INT32_RANGE, "broker id")
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for r in reassignments:
            name = await self.topic_name(r.partition.topic)
            by_topic.setdefault(name, []).append(
                {
                    "partition_index": r.partition.partition,
                    "replicas": None if r.replicas is None else list(r.replicas),
                }
            )
        response = await self.write(
            45,
            topics=[{"name": n, "partitions": ps} for n, ps in by_topic.items()],
            timeout=self.timeout_ms,
        )
        if int(response.error_code) != 0:
            raise RemoteError(
                int(response.error_code),
                response.error_message or f"reassignment failed ({int(response.error_code)})",
            )
        return [
            PartitionResult(
                topic=t.name,
                partition=int(p.partition_index),
                outcome=outcome(p.error_code, p.error_message),
            )
            for t in response.responses
            for p in t.partitions
        ]

    async def list_partition_reassignments(self) -> Any:
        """ListPartitionReassignments of every partition (kio response entity)."""
        return await self.request(46, topics=None, timeout=self.timeout_ms)

    # Our own APIs (api.protocol.private).

    async def create_namespace(self, name: str) -> CreateNamespaceResult:
        """Create a namespace and its missing parents."""
        result: CreateNamespaceResult = await self.call(
            private.CREATE_NAMESPACE, CreateNamespace(name=name)
        )
        return result

    async def delete_namespace(
        self, name: str, *, recursive: bool = False
    ) -> DeleteNamespaceResult:
        """Delete a namespace and its topics (and its children with `recursive`)."""
        result: DeleteNamespaceResult = await self.call(
            private.DELETE_NAMESPACE, DeleteNamespace(name=name, recursive=recursive)
        )
        return result

    async def list_namespaces(
        self, namespace: str = "", *, recursive: bool = False
    ) -> list[NamespaceInfo]:
        """The namespaces under one (all below it with `recursive`), with topic counts."""
        response = await self.call(
            private.LIST_NAMESPACES,
            private.ListNamespaces(namespace=namespace, recursive=recursive),
        )
        return list(response.namespaces)

    async def move_topic(self, request: MoveTopic) -> MoveTopicResult:
        """Move a topic to another namespace (it keeps its id)."""
        result: MoveTopicResult = await self.call(private.MOVE_TOPIC, request)
        return result

    async def delete_partitions(
        self, topics: Sequence[DeletePartitionsTopic], *, validate_only: bool = False
    ) -> list[DeletePartitionsResult]:
        """Lower partition counts (READ_ONLY for the delay, then NONE, then removed)."""
        response = await self.call(
            private.DELETE_PARTITIONS,
            private.DeletePartitions(topics=tuple(topics), validate_only=validate_only),
        )
        return list(response.results)

    async def cancel_partition_deletions(
        self, topics: Sequence[TopicRef]
    ) -> list[CancelPartitionDeletionResult]:
        """Cancel pending partition deletions (before their purge time): READ_WRITE again."""
        response = await self.call(
            private.CANCEL_PARTITION_DELETIONS,
            private.CancelPartitionDeletions(
                topics=tuple(CancelPartitionDeletion(topic=t) for t in topics)
            ),
        )
        return list(response.results)

    async def purge_pending(self) -> list[PurgeResult]:
        """Run one check of pending partition deletions now."""
        response = await self.call(private.PURGE_PENDING, private.PurgePending())
        return list(response.results)
