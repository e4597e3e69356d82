"""Requests the controller accepts and the results it answers, one value type per API.

They mirror Kafka's admin requests (KIP-4) closely enough that the wire protocol maps onto them
one to one, and the CLI builds the same values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Generic, TypeVar

from records.model import (
    AclOperation,
    AclPermissionType,
    BrokerEndpoint,
    BrokerFeature,
    ConfigResourceType,
    PatternType,
    Record,
    ResourceType,
)
from records.slots import preset_constructor
from records.uuids import Uuid
from replay.controller.errors import ApiError, ErrorCode

if TYPE_CHECKING:
    from replay.image import MetadataImage

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerResult(Generic[T]):
    """What a command produced: the records to append (one atomic batch) and the answer.

    A command whose records may be too many for one batch (fencing a broker that leads half
    the cluster) writes the first `MAX_RECORDS_PER_BATCH` and sets `more`: the service runs
    `more` against the working image after that batch, and again on what it returns, until
    one returns no `more`, answering after the last (Kafka's non-atomic `ControllerResult`,
    split by `maxRecordsPerBatch`). Other commands run between the batches.
    """

    records: tuple[Record, ...]
    response: T
    more: Continuation | None = None


def finished(records: tuple[Record, ...], response: T) -> ControllerResult[T]:
    """`ControllerResult(records=records, response=response)`, stored through its slots.

    For the commands of every admin write (creating and deleting topics), where the
    dataclass's keyword parsing and frozen stores cost about half of a small write's result.
    """
    return _new_controller_result(records, response)  # type: ignore[no-any-return]  # untyped


_new_controller_result = preset_constructor(ControllerResult, ("records", "response"))


Continuation = Callable[["MetadataImage"], "ControllerResult[None]"]
"""The next batch of a command that writes more than one (see `ControllerResult.more`)."""

MAX_RECORDS_PER_BATCH = 10_000
"""The most records a command writes in one batch when it may write more than one (KRaft's
`maxRecordsPerBatch`); a broker's own record and its first partition moves share the first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRef:
    """A topic named by qualified name, by id, or both (then they must agree)."""

    name: str | None = None
    topic_id: Uuid | None = None

    def __str__(self) -> str:
        if self.name is not None:
            return self.name
        return str(self.topic_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """An error code and message (code NONE and message None on success)."""

    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the operation succeeded."""
        return self.error_code == ErrorCode.NONE

    @classmethod
    def from_error(cls, error: ApiError) -> Outcome:
        """The outcome of an operation refused with `error`: its code and message."""
        return cls(error_code=error.error_code, error_message=error.message)


# ------------------------------------------------------------------------------- brokers


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBroker:
    """Register (or re-register) a broker; it starts unfenced unless `fenced`."""

    broker_id: int
    rack: str | None = None
    endpoints: tuple[BrokerEndpoint, ...] = ()
    fenced: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistration:
    """A broker process registering itself (Kafka's BrokerRegistration, API 62).

    It starts fenced, with a new broker epoch; its heartbeats unfence it once it has caught up.
    """

    broker_id: int
    cluster_id: str
    incarnation_id: Uuid
    """Chosen by the broker process at start; a new one means a new process."""
    listeners: tuple[BrokerEndpoint, ...] = ()
    features: tuple[BrokerFeature, ...] = ()
    rack: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrChange:
    """One partition of an AlterPartition (API 56): the ISR its leader asks for."""

    topic_id: Uuid
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[tuple[int, int], ...]
    """(broker id, broker epoch or -1) of each replica of the new ISR."""
    leader_recovery_state: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class IsrResult:
    """The answer for one partition of an AlterPartition: the error, or the partition after."""

    topic_id: Uuid
    partition: int
    error_code: ErrorCode = ErrorCode.NONE
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


class BrokerAction(IntEnum):
    """A change of an existing broker's registration."""

    UNREGISTER = 0
    FENCE = 1
    UNFENCE = 2
    CONTROLLED_SHUTDOWN = 3


@dataclass(slots=True, kw_only=True)
class BrokerResult:
    """The answer to a broker command.

    Not frozen: a command whose moves follow in further batches (`ControllerResult.more`)
    sets `partitions_changed` when its last batch is computed, before the answer is given.
    """

    broker_id: int
    broker_epoch: int = -1
    outcome: Outcome = field(default_factory=Outcome)
    partitions_changed: int = 0
    """Partitions whose leader or ISR moved because of the change."""
    changed: bool = True
    """False when the broker was already in the asked-for state (nothing was written)."""


# ------------------------------------------------------------------------------- topics


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopic:
    """One topic of a CreateTopics request (Kafka's `CreatableTopic`)."""

    name: str
    num_partitions: int = -1
    """-1: the cluster's `num.partitions`."""
    replication_factor: int = -1
    """-1: the cluster's `default.replication.factor`."""
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()
    """Manual assignment: (partition id, replica broker ids); counts must then be -1."""
    configs: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatedConfig:
    """A config of a created topic, as CreateTopics v5+ answers."""

    name: str
    value: str | None
    read_only: bool
    source: int
    sensitive: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicResult:
    """The answer for one topic of a CreateTopics request."""

    name: str
    topic_id: Uuid = Uuid.ZERO
    outcome: Outcome = field(default_factory=Outcome)
    num_partitions: int = -1
    replication_factor: int = -1
    configs: tuple[CreatedConfig, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopicResult:
    """The answer for one topic of a DeleteTopics request."""

    name: str | None
    topic_id: Uuid
    outcome: Outcome = field(default_factory=Outcome)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsTopic:
    """Raise a topic's partition count to `count` (Kafka's `CreatePartitionsTopic`)."""

    topic: TopicRef
    count: int
    assignments: tuple[tuple[int, ...], ...] | None = None
    """Replicas of each new partition, in order; None = placed as Kafka does."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsResult:
    """The answer for one topic of a CreatePartitions request."""

    name: str
    outcome: Outcome = field(default_factory=Outcome)


# ------------------------------------------------------------------------------- configs


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigResource:
    """A config resource: a topic (qualified name) or a broker ("" = cluster default)."""

    type: ConfigResourceType
    name: str


class AlterConfigOp(IntEnum):
    """Kafka's `AlterConfigOp.OpType` ids."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfig:
    """One operation of an IncrementalAlterConfigs request."""

    name: str
    op: AlterConfigOp
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsResult:
    """The answer for one resource of an alter request."""

    resource: ConfigResource
    outcome: Outcome = field(default_factory=Outcome)


# ------------------------------------------------------------------------------- partitions


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartition:
    """A partition of a topic."""

    topic: TopicRef
    partition: int


class ElectionType(IntEnum):
    """Kafka's `ElectionType`."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionResult:
    """The answer for one partition (elections, reassignments)."""

    topic: str
    partition: int
    outcome: Outcome = field(default_factory=Outcome)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reassignment:
    """Move a partition to `replicas`; None cancels the reassignment in progress."""

    partition: TopicPartition
    replicas: tuple[int, ...] | None


# ------------------------------------------------------------------------------- namespaces


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateNamespace:
    """Create a namespace and every missing tier above it, in one atomic batch."""

    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateNamespaceResult:
    """The answer to a namespace creation."""

    name: str
    namespace_id: Uuid
    created: tuple[str, ...]
    """Every namespace the batch created, parents first (the asked-for one last)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteNamespace:
    """Delete a namespace and its topics; `recursive` also deletes its child namespaces."""

    name: str
    recursive: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteNamespaceResult:
    """The answer to a namespace deletion: everything the batch removed."""

    name: str
    namespaces: tuple[str, ...]
    """Deleted namespaces, deepest first (the asked-for one last)."""
    topics: tuple[str, ...]
    """Deleted topics, by qualified name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceInfo:
    """One namespace of a listing."""

    name: str
    namespace_id: Uuid
    topics: int
    """Topics directly in the namespace."""
    total_topics: int
    """Topics in the namespace and every namespace below it."""
    children: int
    """Namespaces directly below it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveTopic:
    """Move a topic to another namespace; it keeps its id, partitions and configs."""

    topic: TopicRef
    """The topic where it is now (qualified name and/or id)."""
    to_namespace: str


@dataclass(frozen=True, slots=True, kw_only=True)
class MoveTopicResult:
    """The answer to a topic move."""

    topic_id: Uuid
    from_name: str
    to_name: str


# ------------------------------------------------------------------------------- partition deletion


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletePartitionsTopic:
    """Lower a topic's partition count to `count`; the highest partition ids go.

    With `delay_ms` > 0 the removed partitions turn READ_ONLY until the purge time (now +
    delay), then NONE, then are removed; with 0 they go NONE and are removed in the same batch.
    """

    topic: TopicRef
    count: int
    delay_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletePartitionsResult:
    """The answer for one topic of a partition deletion."""

    name: str
    outcome: Outcome = field(default_factory=Outcome)
    removed: tuple[int, ...] = ()
    """Ids of the partitions being removed."""
    purge_at_ms: int = -1
    """When they are purged (ms since the epoch); the creation time when immediate."""
    immediate: bool = False
    """True when the partitions were removed in the same batch (delay 0)."""


class PurgeStep(IntEnum):
    """What a pending-deletion check did to a topic."""

    MODE_NONE = 0
    """The purge time passed: the partitions went to mode NONE (neither readable nor writable)."""
    REMOVED = 1
    """The partitions, already NONE, were removed from the topic; the deletion is complete."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelPartitionDeletion:
    """Cancel a topic's pending partition deletion while its purge time is ahead."""

    topic: TopicRef


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelPartitionDeletionResult:
    """The answer for one topic of a cancel: the partitions that are READ_WRITE again."""

    name: str
    outcome: Outcome = field(default_factory=Outcome)
    restored: tuple[int, ...] = ()
    """Ids of the partitions the deletion would have removed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgeResult:
    """One step a pending-deletion check took for one topic."""

    name: str
    topic_id: Uuid
    step: PurgeStep
    partitions: tuple[int, ...]


# ------------------------------------------------------------------------------- ACLs


@dataclass(frozen=True, slots=True, kw_only=True)
class AclBinding:
    """An ACL as Kafka's `AclBinding` names it: a resource pattern and an access control entry.

    Fields are ints on the way in (a request may carry any code; the controller refuses the
    ones a stored ACL cannot hold) and the record's enums on the way out.
    """

    resource_type: int
    resource_name: str
    pattern_type: int = PatternType.LITERAL
    principal: str
    host: str = "*"
    operation: int
    permission_type: int = AclPermissionType.ALLOW


@dataclass(frozen=True, slots=True, kw_only=True)
class AclFilter:
    """Kafka's `AclBindingFilter`: which ACLs a describe or a delete is about.

    ANY (and None for the strings) matches anything; pattern type MATCH matches the ACLs that
    apply to the named resource: the literal name, the literal `*` and prefixes of the name.
    """

    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission_type: int = AclPermissionType.ANY


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAclResult:
    """The answer for one ACL of a CreateAcls request."""

    outcome: Outcome = field(default_factory=Outcome)


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsResult:
    """The answer for one filter of a DeleteAcls request: the ACLs it removed."""

    outcome: Outcome = field(default_factory=Outcome)
    matching: tuple[AclBinding, ...] = ()


# ------------------------------------------------------------------------------- SCRAM credentials


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramUpsertion:
    """Set a user's SCRAM credential for a mechanism (Kafka's `ScramCredentialUpsertion`).

    The client sends the salted password (PBKDF2 of the password), never the password; the
    controller derives the stored and server keys from it.
    """

    name: str
    mechanism: int
    """`ScramMechanism` code; any other value is refused with UNSUPPORTED_SASL_MECHANISM."""
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        # Never show the salted password (it logs the user in) or the salt.
        return (
            f"ScramUpsertion(name={self.name!r}, mechanism={self.mechanism}, "
            f"iterations={self.iterations})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramDeletion:
    """Remove a user's SCRAM credential for a mechanism."""

    name: str
    mechanism: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterScramResult:
    """The answer for one user of an AlterUserScramCredentials request."""

    user: str
    outcome: Outcome = field(default_factory=Outcome)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialInfo:
    """What may be shown of a credential: its mechanism and iterations (never salt or keys)."""

    mechanism: int
    iterations: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeScramResult:
    """The answer for one user of a DescribeUserScramCredentials request."""

    user: str
    outcome: Outcome = field(default_factory=Outcome)
    credentials: tuple[ScramCredentialInfo, ...] = ()
