"""Leaders and replicas on request: leader elections and partition reassignments.

Preferred and unclean leader elections follow Kafka's `ElectLeaders`; reassignments follow
KIP-455 (`AlterPartitionReassignments`, `ListPartitionReassignments`). Every change is a
`PartitionChangeRecord` checked against the partition and replica state machines.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from records.model import (
    LEADER_UNCHANGED,
    NO_LEADER,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
)
from replay.controller import partition_reduction
from replay.controller.commands import (
    ControllerResult,
    ElectionType,
    Outcome,
    PartitionResult,
    Reassignment,
    TopicPartition,
    TopicRef,
)
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.names import partition_name, resolve_topic
from replay.controller.states import checked_change, is_live
from replay.controller.topics import check_replica_lists
from replay.delta import MetadataDelta
from replay.image import ClusterImage, MetadataImage, TopicImage


def elect_leaders(
    image: MetadataImage,
    partitions: Sequence[TopicPartition] | None,
    election: ElectionType,
) -> ControllerResult[list[PartitionResult]]:
    """Preferred (or unclean) leader election; None = every partition of every topic.

    When every partition is asked for, those that need no election are left out of the
    answer, as Kafka does.
    """
    targets: list[tuple[TopicPartition, TopicImage | ApiError]] = []
    if partitions is None:
        for topic in image.topics.sorted():
            ref = TopicRef(name=topic.qualified_name)
            targets.extend(
                (TopicPartition(topic=ref, partition=p.partition_id), topic)
                for p in topic.partitions
            )
    else:
        for tp in partitions:
            try:
                targets.append((tp, resolve_topic(image, tp.topic)))
            except ApiError as exc:
                targets.append((tp, exc))
    results: list[PartitionResult] = []
    records: list[Record] = []
    for tp, found in targets:
        name = str(tp.topic)
        try:
            if isinstance(found, ApiError):
                raise found
            change = _election(image, found, tp.partition, election)
        except ApiError as exc:
            if partitions is None and exc.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                continue
            results.append(
                PartitionResult(topic=name, partition=tp.partition, outcome=Outcome.from_error(exc))
            )
            continue
        records.append(change)
        results.append(PartitionResult(topic=found.qualified_name, partition=tp.partition))
    return ControllerResult(records=tuple(records), response=results)


def _election(
    image: MetadataImage, topic: TopicImage, partition_id: int, election: ElectionType
) -> PartitionChangeRecord:
    if not 0 <= partition_id < len(topic.partitions):
        raise ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"Partition {partition_id} of {topic.qualified_name} does not exist",
        )
    partition = topic.partitions[partition_id]
    where = partition_name(topic, partition_id)
    if election == ElectionType.PREFERRED:
        preferred = partition.replicas[0]
        if partition.leader == preferred:
            raise ApiError(
                ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
            )
        if preferred not in partition.isr or not is_live(image.cluster, preferred):
            raise ApiError(
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                f"Failed to elect leader for partition {where} under strategy "
                f"PreferredReplicaPartitionLeaderElectionStrategy: broker {preferred} is "
                "not in the ISR or not live",
            )
        change = PartitionChangeRecord(
            partition_id=partition_id, topic_id=topic.topic_id, leader=preferred
        )
    else:
        if partition.leader != NO_LEADER and is_live(image.cluster, partition.leader):
            raise ApiError(
                ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
            )
        leader = next((b for b in partition.replicas if is_live(image.cluster, b)), None)
        if leader is None:
            raise ApiError(
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                f"Failed to elect leader for partition {where}: no replica is live",
            )
        change = PartitionChangeRecord(
            partition_id=partition_id, topic_id=topic.topic_id, leader=leader, isr=(leader,)
        )
    checked_change(where, partition, change, image.cluster, image.cluster)
    return change


def alter_reassignments(
    image: MetadataImage, reassignments: Sequence[Reassignment]
) -> ControllerResult[list[PartitionResult]]:
    """Start, replace or cancel partition reassignments, as Kafka's KRaft controller does.

    A target equal to the current replicas is a success that writes nothing; a new target
    for a partition being reassigned replaces the old one. Starting writes the
    PartitionChangeRecord Kafka writes (target replicas first, then the ones leaving, with
    `adding`/`removing` set). This service keeps metadata only, so there is no data to copy:
    a live new replica is in sync at once, and when every target replica is live or in the
    ISR the completing change (replicas = target, adding/removing cleared, leader moved if it
    left) follows in the same batch.
    """
    results: list[PartitionResult] = []
    records: list[Record] = []
    working = image
    for item in reassignments:
        tp = item.partition
        try:
            topic = resolve_topic(working, tp.topic)
            changes = _reassign(working, topic, tp.partition, item.replicas)
        except ApiError as exc:
            results.append(
                PartitionResult(
                    topic=str(tp.topic), partition=tp.partition, outcome=Outcome.from_error(exc)
                )
            )
            continue
        records.extend(changes)
        delta = MetadataDelta(working)
        delta.replay_all(changes)
        working = delta.apply(working.provenance)
        results.append(PartitionResult(topic=topic.qualified_name, partition=tp.partition))
    return ControllerResult(records=tuple(records), response=results)


def _reassign(
    image: MetadataImage,
    topic: TopicImage,
    partition_id: int,
    target: tuple[int, ...] | None,
) -> list[Record]:
    if not 0 <= partition_id < len(topic.partitions):
        raise ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"Partition {partition_id} of {topic.qualified_name} does not exist",
        )
    if topic.pending_deletion is not None:
        raise partition_reduction.under_changes(topic, "a reassignment")
    partition = topic.partitions[partition_id]
    where = partition_name(topic, partition_id)
    cluster = image.cluster
    in_progress = bool(partition.adding_replicas or partition.removing_replicas)
    if target is None:
        if not in_progress:
            raise ApiError(
                ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                f"No ongoing reassignment for partition {where}.",
            )
        original = tuple(b for b in partition.replicas if b not in partition.adding_replicas)
        isr = tuple(b for b in partition.isr if b in original) or original[:1]
        return [_end_reassignment(topic, partition, cluster, replicas=original, isr=isr)]
    check_replica_lists(image, [list(target)], expected=None)
    # Kafka's ReplicationControlManager.changePartitionReassignment: adding and removing are
    # counted against the partition's replicas as they stand (during a reassignment that is
    # the union of the old target and the replicas it removes), so a new target simply
    # replaces the old one; there is no "cancel first". Both sets are sorted (TreeSet).
    target = tuple(target)
    removing = tuple(sorted(set(partition.replicas) - set(target)))
    adding = tuple(sorted(set(target) - set(partition.replicas)))
    merged = target + removing
    if not in_progress and merged == partition.replicas:
        # A target equal to the current replicas: Kafka's builder has nothing to change and
        # answers success without a record.
        return []
    records: list[Record] = []
    current = partition
    # Unlike Kafka's builder, which keeps the old adding/removing lists when the new ones
    # are empty, this always writes them: a new target replaces the old one entirely.
    if (
        merged != partition.replicas
        or adding != partition.adding_replicas
        or removing != partition.removing_replicas
    ):
        start = PartitionChangeRecord(
            partition_id=partition_id,
            topic_id=topic.topic_id,
            replicas=merged if merged != partition.replicas else None,
            adding_replicas=adding,
            removing_replicas=removing,
        )
        current = checked_change(where, current, start, cluster, cluster)
        records.append(start)
    # There is no data to copy, so a live replica is in sync at once; the reassignment
    # completes (Kafka's maybeCompleteReassignment) when every target replica is in the
    # ISR or live.
    catching_up = tuple(b for b in target if b not in current.isr)
    if all(is_live(cluster, b) for b in catching_up):
        records.append(_end_reassignment(topic, current, cluster, replicas=target, isr=target))
    return records


def _end_reassignment(
    topic: TopicImage,
    partition: PartitionRecord,
    cluster: ClusterImage,
    *,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
) -> PartitionChangeRecord:
    """The checked change that settles a partition on `replicas` (a cancel or a completion).

    Adding and removing are cleared; the leader stays if it is in `isr`, else the first live
    member of `isr` leads.
    """
    leader = partition.leader if partition.leader in isr else _first_live(cluster, isr)
    change = PartitionChangeRecord(
        partition_id=partition.partition_id,
        topic_id=topic.topic_id,
        replicas=replicas,
        isr=isr,
        leader=leader if leader != partition.leader else LEADER_UNCHANGED,
        adding_replicas=(),
        removing_replicas=(),
    )
    where = partition_name(topic, partition.partition_id)
    checked_change(where, partition, change, cluster, cluster)
    return change


def list_reassignments(image: MetadataImage) -> list[tuple[TopicImage, PartitionRecord]]:
    """Partitions with a reassignment in progress."""
    return [
        (topic, p)
        for topic in image.topics.sorted()
        for p in topic.partitions
        if p.adding_replicas or p.removing_replicas
    ]


def _first_live(cluster: ClusterImage, brokers: Iterable[int]) -> int:
    return next((b for b in brokers if is_live(cluster, b)), NO_LEADER)
