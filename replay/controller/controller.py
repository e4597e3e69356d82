"""The controller: validates commands against an image and answers with the records to append.

Nothing changes here: a command returns `ControllerResult(records, response)`, and only the
replay of those records (after they are appended) changes the image. Validation follows Kafka's
controller (`ReplicationControlManager`, `ConfigurationControlManager`, `ClusterControlManager`):
the same checks, in the same order, with the same error codes and messages where Kafka has one.

`Controller` is the one entry point the service, the server and the tests call; each method
hands its command to the module of its concern (`brokers`, `topics`, `configs`, `namespaces`,
`partition_reduction`, `elections`, `acls`, `credentials`), passing what that concern needs of
the controller's own state (ids, randomness, clock).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from records.model import PartitionRecord
from records.uuids import Uuid
from replay.controller import (
    acls,
    broker_protocol,
    brokers,
    configs,
    credentials,
    elections,
    namespaces,
    partition_reduction,
    topics,
)
from replay.controller.commands import (
    AclBinding,
    AclFilter,
    AlterConfig,
    AlterConfigsResult,
    AlterScramResult,
    BrokerAction,
    BrokerRegistration,
    BrokerResult,
    CancelPartitionDeletion,
    CancelPartitionDeletionResult,
    ConfigResource,
    ControllerResult,
    CreatableTopic,
    CreateAclResult,
    CreateNamespace,
    CreateNamespaceResult,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteAclsResult,
    DeleteNamespace,
    DeleteNamespaceResult,
    DeletePartitionsResult,
    DeletePartitionsTopic,
    DeleteTopicResult,
    DescribeScramResult,
    ElectionType,
    IsrChange,
    IsrResult,
    MoveTopic,
    MoveTopicResult,
    NamespaceInfo,
    PartitionResult,
    PurgeResult,
    Reassignment,
    RegisterBroker,
    ScramDeletion,
    ScramUpsertion,
    TopicPartition,
    TopicRef,
)
from replay.controller.config_defs import ResolvedConfig
from replay.controller.names import resolve_topic
from replay.image import MetadataImage, TopicImage


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerOptions:
    """Knobs for reproducible placement and ids (tests, benchmarks); defaults are random."""

    fixed_start_index: int = -1
    """Kafka's `fixedStartIndex` for replica placement; -1 = random, as Kafka does."""


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Controller:
    """Turns commands into records, validating them against an image the way Kafka does."""

    def __init__(
        self,
        *,
        options: ControllerOptions | None = None,
        new_id: Callable[[], Uuid] = Uuid.random,
        rng: random.Random | None = None,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.options = options or ControllerOptions()
        self._new_id = new_id
        self._clock_ms = clock_ms or _wall_clock_ms
        self._topics = topics.TopicCreator(
            fixed_start_index=self.options.fixed_start_index,
            new_id=new_id,
            rng=rng or random.Random(),
        )

    @staticmethod
    def resolve_topic(image: MetadataImage, ref: TopicRef) -> TopicImage:
        """The live topic a reference names; Kafka's errors if there is none or they disagree."""
        return resolve_topic(image, ref)

    # ------------------------------------------------------------------ brokers

    def register_broker(
        self, image: MetadataImage, request: RegisterBroker
    ) -> ControllerResult[BrokerResult]:
        """Register a broker (a new incarnation if it was registered before)."""
        return brokers.register_broker(image, request, self._new_id)

    def change_broker(
        self, image: MetadataImage, broker_id: int, action: BrokerAction
    ) -> ControllerResult[BrokerResult]:
        """Unregister, fence, unfence, or start a controlled shutdown of a broker."""
        return brokers.change_broker(image, broker_id, action)

    @staticmethod
    def broker_registration(
        image: MetadataImage,
        request: BrokerRegistration,
        *,
        cluster_id: str,
        session_alive: Callable[[int], bool],
    ) -> ControllerResult[BrokerResult]:
        """A broker process registering itself (BrokerRegistration): fenced, a new epoch."""
        return broker_protocol.register(
            image, request, cluster_id=cluster_id, session_alive=session_alive
        )

    @staticmethod
    def alter_partition(
        image: MetadataImage, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange]
    ) -> ControllerResult[list[IsrResult]]:
        """ISR changes asked by partition leaders (AlterPartition), with Kafka's epoch checks."""
        return broker_protocol.alter_partition(image, broker_id, broker_epoch, changes)

    # ------------------------------------------------------------------ topics

    def create_topics(
        self,
        image: MetadataImage,
        topics: Sequence[CreatableTopic],
        *,
        validate_only: bool = False,
    ) -> ControllerResult[list[CreateTopicResult]]:
        """Create a batch of topics (KIP-4): one result per topic; failures do not spread."""
        return self._topics.create_topics(image, topics, validate_only=validate_only)

    def delete_topics(
        self, image: MetadataImage, refs: Sequence[TopicRef]
    ) -> ControllerResult[list[DeleteTopicResult]]:
        """Delete topics by name or id; each result stands alone, deletion is immediate."""
        return topics.delete_topics(image, refs)

    def create_partitions(
        self,
        image: MetadataImage,
        requests: Sequence[CreatePartitionsTopic],
        *,
        validate_only: bool = False,
    ) -> ControllerResult[list[CreatePartitionsResult]]:
        """Raise partition counts; new partitions are placed as Kafka places added ones."""
        return self._topics.create_partitions(image, requests, validate_only=validate_only)

    # ------------------------------------------------------------------ configs

    def describe_configs(
        self, image: MetadataImage, resource: ConfigResource
    ) -> list[ResolvedConfig]:
        """Every known key of a resource with its value and where the value comes from."""
        return configs.describe_configs(image, resource)

    def incremental_alter_configs(
        self,
        image: MetadataImage,
        changes: Sequence[tuple[ConfigResource, Sequence[AlterConfig]]],
        *,
        validate_only: bool = False,
    ) -> ControllerResult[list[AlterConfigsResult]]:
        """Set, delete, append to or subtract from config keys; one result per resource."""
        return configs.incremental_alter_configs(image, changes, validate_only=validate_only)

    # ------------------------------------------------------------------ namespaces

    def create_namespace(
        self, image: MetadataImage, request: CreateNamespace
    ) -> ControllerResult[CreateNamespaceResult]:
        """Create a namespace and every missing tier above it, in one batch."""
        return namespaces.create_namespace(image, request, self._new_id)

    def delete_namespace(
        self, image: MetadataImage, request: DeleteNamespace
    ) -> ControllerResult[DeleteNamespaceResult]:
        """Delete a namespace with its topics (and, if recursive, its subtree) in one batch."""
        return namespaces.delete_namespace(image, request)

    def move_topic(
        self, image: MetadataImage, request: MoveTopic
    ) -> ControllerResult[MoveTopicResult]:
        """Move a topic to another namespace; it keeps its id, partitions and configs."""
        return namespaces.move_topic(image, request)

    @staticmethod
    def list_namespaces(
        image: MetadataImage, parent: str = "", *, recursive: bool = False
    ) -> list[NamespaceInfo]:
        """The namespaces directly below `parent` (or every one below it), with topic counts."""
        return namespaces.list_namespaces(image, parent, recursive=recursive)

    # ------------------------------------------------------------------ partition deletion

    def delete_partitions(
        self,
        image: MetadataImage,
        requests: Sequence[DeletePartitionsTopic],
        *,
        validate_only: bool = False,
    ) -> ControllerResult[list[DeletePartitionsResult]]:
        """Lower partition counts with a delayed (or immediate) deletion; one result per topic."""
        return partition_reduction.delete_partitions(
            image, requests, now_ms=self._clock_ms(), validate_only=validate_only
        )

    def cancel_partition_deletions(
        self, image: MetadataImage, requests: Sequence[CancelPartitionDeletion]
    ) -> ControllerResult[list[CancelPartitionDeletionResult]]:
        """Cancel pending partition deletions before their purge time; one result per topic."""
        return partition_reduction.cancel_deletions(image, requests, now_ms=self._clock_ms())

    @staticmethod
    def purge_partitions(image: MetadataImage, now_ms: int) -> ControllerResult[list[PurgeResult]]:
        """One check of pending partition deletions at `now_ms`: the next step of each due one."""
        return partition_reduction.purge_due(image, now_ms)

    # ------------------------------------------------------------------ leaders and reassignments

    def elect_leaders(
        self,
        image: MetadataImage,
        partitions: Sequence[TopicPartition] | None,
        election: ElectionType = ElectionType.PREFERRED,
    ) -> ControllerResult[list[PartitionResult]]:
        """Preferred (or unclean) leader election; None = every partition of every topic."""
        return elections.elect_leaders(image, partitions, election)

    def alter_reassignments(
        self, image: MetadataImage, reassignments: Sequence[Reassignment]
    ) -> ControllerResult[list[PartitionResult]]:
        """Start, replace or cancel partition reassignments, as Kafka's KRaft controller does."""
        return elections.alter_reassignments(image, reassignments)

    def list_reassignments(self, image: MetadataImage) -> list[tuple[TopicImage, PartitionRecord]]:
        """Partitions with a reassignment in progress."""
        return elections.list_reassignments(image)

    # ------------------------------------------------------------------ ACLs

    def create_acls(
        self, image: MetadataImage, bindings: Sequence[AclBinding]
    ) -> ControllerResult[list[CreateAclResult]]:
        """Create ACLs (each with a fresh random id); one result per binding, as Kafka."""
        return acls.create_acls(image, bindings, self._new_id)

    @staticmethod
    def delete_acls(
        image: MetadataImage, filters: Sequence[AclFilter]
    ) -> ControllerResult[list[DeleteAclsResult]]:
        """Remove the ACLs each filter matches; one result per filter with what it matched."""
        return acls.delete_acls(image, filters)

    @staticmethod
    def describe_acls(image: MetadataImage, acl_filter: AclFilter) -> list[AclBinding]:
        """The ACLs a filter matches (ApiError INVALID_REQUEST for a filter with UNKNOWN)."""
        return acls.describe_acls(image, acl_filter)

    # ------------------------------------------------------------------ SCRAM credentials

    @staticmethod
    def alter_user_scram_credentials(
        image: MetadataImage,
        deletions: Sequence[ScramDeletion],
        upsertions: Sequence[ScramUpsertion],
    ) -> ControllerResult[list[AlterScramResult]]:
        """Delete and set users' SCRAM credentials; one result per user, as Kafka."""
        return credentials.alter_credentials(image, deletions, upsertions)

    @staticmethod
    def describe_user_scram_credentials(
        image: MetadataImage, users: Sequence[str] | None
    ) -> list[DescribeScramResult]:
        """Mechanisms and iterations of the named users (None or empty: every user)."""
        return credentials.describe_credentials(image, users)
