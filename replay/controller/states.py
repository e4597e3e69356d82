"""Partition and replica states of Kafka's controller, derived from the image and checked.

Kafka's (ZooKeeper-era) controller kept these as two state machines with a table of legal
previous states. Here the states are not stored: they are derived from the image (leader, ISR,
adding/removing replicas, mode, broker liveness), and every change the controller makes is
checked against Kafka's tables, so an illegal transition is an error instead of a silent change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import Enum
from itertools import pairwise

from records.model import NO_LEADER, Mode, PartitionChangeRecord, PartitionRecord
from replay.controller.errors import IllegalStateTransitionError
from replay.delta import merge_partition_change
from replay.image import ClusterImage


class PartitionState(Enum):
    """Kafka's `PartitionState`."""

    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"

    # Members are singletons compared by identity, so identity is a valid hash, and a C-level
    # one (Enum's own hashes the name in Python, on every lookup in the tables below).
    __hash__ = object.__hash__


class ReplicaState(Enum):
    """Kafka's `ReplicaState`."""

    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"

    __hash__ = object.__hash__  # as PartitionState's


_PARTITION_PREVIOUS: dict[PartitionState, frozenset[PartitionState]] = {
    PartitionState.NEW: frozenset({PartitionState.NON_EXISTENT}),
    PartitionState.ONLINE: frozenset(
        {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}
    ),
    PartitionState.OFFLINE: frozenset(
        {PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE}
    ),
    PartitionState.NON_EXISTENT: frozenset({PartitionState.OFFLINE}),
}
"""Kafka's `PartitionStateMachine`: the states each state may be entered from."""

_R = ReplicaState
_REPLICA_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}
"""Kafka's `ReplicaStateMachine`: the states each state may be entered from."""

PARTITION_DELETION = (PartitionState.OFFLINE, PartitionState.NON_EXISTENT)
"""The states a partition passes through when it is deleted."""

REPLICA_DELETION = (
    ReplicaState.OFFLINE,
    ReplicaState.DELETION_STARTED,
    ReplicaState.DELETION_SUCCESSFUL,
    ReplicaState.NON_EXISTENT,
)
"""The states a replica passes through when its partition is deleted."""


def is_live(cluster: ClusterImage, broker_id: int) -> bool:
    """Whether a broker is registered, unfenced and not in controlled shutdown."""
    broker = cluster.get(broker_id)
    return broker is not None and not broker.fenced and not broker.in_controlled_shutdown


def partition_state(partition: PartitionRecord | None, cluster: ClusterImage) -> PartitionState:
    """The state of a partition as Kafka's controller would name it."""
    if partition is None:
        return PartitionState.NON_EXISTENT
    if partition.leader == NO_LEADER:
        never_led = partition.leader_epoch == 0 and partition.partition_epoch == 0
        return PartitionState.NEW if never_led else PartitionState.OFFLINE
    if partition.mode == Mode.NONE or not is_live(cluster, partition.leader):
        return PartitionState.OFFLINE
    return PartitionState.ONLINE


def replica_state(
    partition: PartitionRecord | None, broker_id: int, cluster: ClusterImage
) -> ReplicaState:
    """The state of one replica of a partition."""
    if partition is None or broker_id not in partition.replicas:
        return ReplicaState.NON_EXISTENT
    if broker_id in partition.adding_replicas and broker_id not in partition.isr:
        return ReplicaState.NEW
    if partition.mode == Mode.NONE or not is_live(cluster, broker_id):
        return ReplicaState.OFFLINE
    return ReplicaState.ONLINE


def check_partition_path(where: str, path: Sequence[PartitionState]) -> None:
    """Raise unless each step of `path` is a legal partition transition."""
    for before, after in pairwise(path):
        if before not in _PARTITION_PREVIOUS[after]:
            raise IllegalStateTransitionError(
                f"{where}: illegal partition state transition {before.value} -> {after.value}"
            )


def check_replica_path(where: str, path: Sequence[ReplicaState]) -> None:
    """Raise unless each step of `path` is a legal replica transition."""
    for before, after in pairwise(path):
        if before not in _REPLICA_PREVIOUS[after]:
            raise IllegalStateTransitionError(
                f"{where}: illegal replica state transition {before.value} -> {after.value}"
            )


def check_change(
    where: str,
    before: PartitionRecord | None,
    after: PartitionRecord | None,
    cluster_before: ClusterImage,
    cluster_after: ClusterImage,
) -> None:
    """Check the partition and each replica move legally from `before` to `after`.

    Only a change of a partition that exists before and after is checked, and of it only the
    partition and the replicas it keeps. Every other path is legal from every state the image
    can derive (New, Online or Offline; a test walks each): creating a partition or a replica
    (NonExistent -> New -> any), deleting one (through Offline and the deletion states), and a
    replica leaving (any -> Offline -> the deletion states).
    """
    if before is None or after is None:
        return
    start = partition_state(before, cluster_before)
    check_partition_path(where, (start, partition_state(after, cluster_after)))
    for broker_id in sorted(set(before.replicas) & set(after.replicas)):
        first = replica_state(before, broker_id, cluster_before)
        last = replica_state(after, broker_id, cluster_after)
        # A replica whose derived state did not change made no transition: an adding replica
        # still catching up stays New while its leader moves (New -> New is not in Kafka's
        # table, which lists only the transitions its controller commands).
        if first is not last:
            check_replica_path(f"{where} replica {broker_id}", (first, last))


def checked_change(
    where: str,
    partition: PartitionRecord,
    change: PartitionChangeRecord,
    cluster_before: ClusterImage,
    cluster_after: ClusterImage,
) -> PartitionRecord:
    """The partition after `change`, refused unless every state moves along a legal transition."""
    after = merge_partition_change(partition, change)
    check_change(where, partition, after, cluster_before, cluster_after)
    return after


class ChangeChecker:
    """`checked_change` for many changes between the same two clusters, remembered by shape.

    Whether a change is legal depends on the clusters and on a few fields of the partition and
    the change (replicas, ISR, leader, reassignment, mode, whether it ever had a leader), not
    on which partition it is; a fence moving half a million partitions has a handful of
    shapes, so each is checked once.
    """

    __slots__ = ("_after", "_before", "_legal")

    def __init__(self, cluster_before: ClusterImage, cluster_after: ClusterImage) -> None:
        self._before = cluster_before
        self._after = cluster_after
        self._legal: set[tuple[object, ...]] = set()

    def check(
        self, where: Callable[[], str], partition: PartitionRecord, change: PartitionChangeRecord
    ) -> None:
        """Raise `IllegalStateTransitionError` unless the change moves every state legally."""
        shape = (
            partition.replicas,
            partition.isr,
            partition.leader,
            partition.adding_replicas,
            partition.mode,
            partition.leader_epoch == 0 and partition.partition_epoch == 0,
            change.replicas,
            change.isr,
            change.leader,
            change.adding_replicas,
            change.mode,
            change.leader_epoch,
            change.partition_epoch,
        )
        if shape in self._legal:
            return
        checked_change(where(), partition, change, self._before, self._after)
        self._legal.add(shape)
