"""Replica placement for new topics and partitions, as Kafka's `AdminUtils` computes it.

This is `AdminUtils.assignReplicasToBrokers` (Kafka 2.x/3.x, ZooKeeper-mode controller and the
admin tools) together with the broker-list preparation of `AdminZkClient.getBrokerMetadatas`
(brokers sorted by id, `RackAwareMode`) and the start index Kafka derives when partitions are
added to an existing topic (`AdminZkClient.createNewPartitionsAssignment`). The functions are
pure: the only source of variation is the random start index, drawn from the `rng` passed in.

Rack-unaware placement, for brokers sorted by id:

- the first replica (preferred leader) of partition `p` is broker `(p + start_index) % n`;
- the other replicas follow it at a distance `1 + (shift + j) % (n - 1)` for the j-th follower,
  where `shift` starts at the start index (or a second random draw) and grows by one every time
  the partition id reaches a multiple of `n`, so later rounds do not repeat the same followers.

Rack-aware placement runs the same round robin over a rack-alternated broker list (one broker of
each rack in turn) and skips a candidate follower whose rack already holds a replica while some
rack holds none, or that already holds a replica itself, so that each partition spans
`min(replication_factor, racks)` racks.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from replay.controller.errors import ApiError, ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerPlacementInfo:
    """A broker as placement sees it: its id and its rack (`broker.rack`), if it has one."""

    broker_id: int
    rack: str | None = None


class RackAwareMode(IntEnum):
    """How placement treats rack information, as Kafka's `RackAwareMode`."""

    ENFORCED = 0
    """Use racks; refuse when only some brokers have one (Kafka's default)."""
    DISABLED = 1
    """Ignore racks (`--disable-rack-aware`)."""
    SAFE = 2
    """Use racks when every broker has one, otherwise ignore them."""


class PlacementError(ApiError, ValueError):
    """Replicas could not be placed; `error_code` is the Kafka error a client would receive."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(error_code, message)


def rack_alternated_broker_list(broker_racks: Mapping[int, str]) -> list[int]:
    """Broker ids, one from each rack in turn: Kafka's `getRackAlternatedBrokerList`.

    Racks are visited in sorted order and each rack's brokers in id order; a rack that has run out
    of brokers is skipped. With racks `rack1: 0, 1, 2`, `rack2: 3, 4, 5`, `rack3: 6, 7, 8` the
    list is `0, 3, 6, 1, 4, 7, 2, 5, 8`.
    """
    by_rack: dict[str, list[int]] = {}
    for broker_id, rack in broker_racks.items():
        by_rack.setdefault(rack, []).append(broker_id)
    columns = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    longest = max((len(column) for column in columns), default=0)
    return [column[i] for i in range(longest) for column in columns if i < len(column)]


def assign_replicas_to_brokers(
    brokers: Sequence[BrokerPlacementInfo],
    n_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition_id: int = -1,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replica lists for `n_partitions` new partitions, as Kafka's `assignReplicasToBrokers`.

    Returns partition id -> broker ids, first the preferred leader, for partition ids
    `max(0, start_partition_id)` onwards. Brokers are taken in id order whatever order they are
    given in. A negative `fixed_start_index` draws the start index and the initial follower shift
    from `rng` (a fresh `random.Random()` when None), as Kafka draws them from its own `Random`;
    a non-negative one is used for both and makes the result deterministic.

    Raises `PlacementError`: INVALID_PARTITIONS (37) when `n_partitions < 1`,
    INVALID_REPLICATION_FACTOR (38) when `replication_factor` is below 1 or above the number of
    brokers, and INVALID_REPLICA_ASSIGNMENT (39) for duplicate broker ids or, in ENFORCED mode,
    when some but not all brokers have a rack.
    """
    _check_counts(n_partitions, replication_factor, len(brokers))
    plan = PlacementPlan(brokers, rack_aware_mode)
    return plan.assign(
        n_partitions,
        replication_factor,
        fixed_start_index=fixed_start_index,
        start_partition_id=start_partition_id,
        rng=rng,
    )


def _check_counts(n_partitions: int, replication_factor: int, n_brokers: int) -> None:
    if n_partitions <= 0:
        raise PlacementError(
            ErrorCode.INVALID_PARTITIONS,
            f"Number of partitions must be larger than 0, got {n_partitions}; "
            "ask for at least one partition.",
        )
    if replication_factor <= 0:
        raise PlacementError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor must be larger than 0, got {replication_factor}; "
            "ask for at least one replica.",
        )
    if replication_factor > n_brokers:
        raise PlacementError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{n_brokers}. Lower the replication factor or start more brokers.",
        )


MEMO_LIMIT = 65_536
"""Replica lists a plan remembers (then it starts again): bounds a plan's memory on large
clusters, where the same (leader position, shift) pair seldom comes back anyway."""


class PlacementPlan:
    """`assign_replicas_to_brokers` for one set of brokers, prepared once and reused.

    The brokers' order, racks and rack-alternated list are computed once; and since a
    partition's replicas depend only on its leader's position, the follower shift (modulo
    brokers - 1) and the replication factor, each distinct replica list is computed once too.
    A controller keeps the plan while its cluster image is the same object. The result is
    exactly `assign_replicas_to_brokers`'s (Kafka's), partition by partition.
    """

    def __init__(
        self,
        brokers: Sequence[BrokerPlacementInfo],
        rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
    ) -> None:
        ordered = _broker_metadatas(brokers, rack_aware_mode)
        self._n_given = len(brokers)
        self._rack_aware = not all(broker.rack is None for broker in ordered)
        if self._rack_aware:
            # `_broker_metadatas` left either no racks or a rack on every broker.
            self._racks: dict[int, str] = {
                b.broker_id: b.rack for b in ordered if b.rack is not None
            }
            self._arranged = rack_alternated_broker_list(self._racks)
            self._n_racks = len(set(self._racks.values()))
        else:
            self._racks = {}
            self._arranged = [broker.broker_id for broker in ordered]
            self._n_racks = 0
        self._memo: dict[tuple[int, int, int], tuple[int, ...]] = {}
        self._layouts: dict[tuple[int, int, int, int, int], tuple[tuple[int, ...], ...]] = {}
        """Whole answers by (start index, first shift, partitions, replication, first id)."""
        self._layout_entries = 0
        """Replica lists the answers in `_layouts` hold together (at most `MEMO_LIMIT`)."""

    def assign(
        self,
        n_partitions: int,
        replication_factor: int,
        *,
        fixed_start_index: int = -1,
        start_partition_id: int = -1,
        rng: random.Random | None = None,
    ) -> dict[int, list[int]]:
        """Replica lists for `n_partitions` new partitions, as `assign_replicas_to_brokers`."""
        first_partition = max(0, start_partition_id)
        placed = self.replica_tuples(
            n_partitions,
            replication_factor,
            fixed_start_index=fixed_start_index,
            start_partition_id=start_partition_id,
            rng=rng,
        )
        return {first_partition + i: list(replicas) for i, replicas in enumerate(placed)}

    def replica_tuples(
        self,
        n_partitions: int,
        replication_factor: int,
        *,
        fixed_start_index: int = -1,
        start_partition_id: int = -1,
        rng: random.Random | None = None,
    ) -> tuple[tuple[int, ...], ...]:
        """`assign`'s replica lists in partition order, as tuples the plan shares.

        Partitions with the same replicas get the same tuple (the plan's own, immutable):
        the controller's path, where each becomes a `PartitionRecord`'s replicas and ISR.
        A whole answer depends only on the start index, the first shift, the counts and the
        first partition id, so it is remembered too: topics of one size repeat a few.
        """
        _check_counts(n_partitions, replication_factor, self._n_given)
        if rng is None:
            rng = random.Random()
        n_brokers = len(self._arranged)
        start_index, shift = _start_and_shift(n_brokers, fixed_start_index, rng)
        if len(self._memo) > MEMO_LIMIT:
            self._memo.clear()
        first_partition = max(0, start_partition_id)
        whole = (start_index, shift, n_partitions, replication_factor, first_partition)
        layouts = self._layouts
        layout = layouts.get(whole)
        if layout is None:
            layout = tuple(
                self._placed(start_index, shift, n_partitions, replication_factor, first_partition)
            )
            self._layout_entries += n_partitions
            if self._layout_entries > MEMO_LIMIT:  # bounded by the partitions they hold
                layouts.clear()
                self._layout_entries = n_partitions
            layouts[whole] = layout
        return layout

    def _placed(
        self,
        start_index: int,
        shift: int,
        n_partitions: int,
        replication_factor: int,
        first_partition: int,
    ) -> list[tuple[int, ...]]:
        """The replica lists from `first_partition` on: Kafka's loop, each list computed once."""
        n_brokers = len(self._arranged)
        memo = self._memo
        # The rack-aware round robin steps the shift by the number of racks (Kafka's
        # `shift * numRacks`); only its value modulo brokers - 1 moves a follower.
        scale = self._n_racks if self._rack_aware else 1
        modulo = n_brokers - 1 if n_brokers > 1 else 1
        placed: list[tuple[int, ...]] = []
        for partition in range(first_partition, first_partition + n_partitions):
            # The shift follows the absolute partition id, so a run that starts mid-round bumps
            # it at the next multiple of the broker count, not after n_brokers of its own.
            if partition > 0 and partition % n_brokers == 0:
                shift += 1
            first = (partition + start_index) % n_brokers
            key = (first, (shift * scale) % modulo, replication_factor)
            replicas = memo.get(key)
            if replicas is None:
                replicas = memo[key] = self._replicas(first, shift, replication_factor)
            placed.append(replicas)
        return placed

    def _replicas(self, first: int, shift: int, replication_factor: int) -> tuple[int, ...]:
        """One partition's replicas: its leader at position `first`, followers by `shift`."""
        arranged = self._arranged
        n_brokers = len(arranged)
        if not self._rack_aware:
            # Kafka's `assignReplicasToBrokersRackUnaware`, one partition.
            return (
                arranged[first],
                *(
                    arranged[_replica_index(first, shift, j, n_brokers)]
                    for j in range(replication_factor - 1)
                ),
            )
        # Kafka's `assignReplicasToBrokersRackAware`, one partition.
        broker_racks = self._racks
        n_racks = self._n_racks
        leader = arranged[first]
        replicas = [leader]
        racks_used = {broker_racks[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            # Terminates: k runs through every other position within n-1 steps, and while a rack
            # (or broker) lacks a replica some unused broker satisfies both conditions.
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n_brokers)]
                rack = broker_racks[broker]
                k += 1
                if (rack not in racks_used or len(racks_used) == n_racks) and (
                    broker not in brokers_used or len(brokers_used) == n_brokers
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        return tuple(replicas)


def assign_added_partitions(
    brokers: Sequence[BrokerPlacementInfo],
    existing: Mapping[int, Sequence[int]],
    new_count: int,
    *,
    rack_aware_mode: RackAwareMode = RackAwareMode.ENFORCED,
) -> dict[int, list[int]]:
    """Replica lists for the partitions added when a topic grows to `new_count` partitions.

    This is Kafka's `createNewPartitionsAssignment` without a manual assignment: `new_count` is
    the new total (CreatePartitions' `count`), `existing` maps the current partition ids
    `0 .. n-1` to their replicas. The replication factor is that of partition 0, the new ids
    start at `n`, and the start index is the position, in the id-sorted broker list, of the first
    broker whose id is at least partition 0's preferred leader (0 if none is), used as
    `fixed_start_index`. Only the new partitions are returned.

    In rack-unaware mode the preferred leaders therefore continue the round robin of a topic
    created by `assign_replicas_to_brokers` on the same brokers. The followers continue it too
    only while the topic has at most as many partitions as there are brokers and was created with
    a fixed start index below the broker count: Kafka restarts the follower shift at the start
    index. In rack-aware mode Kafka uses the sorted-list position as an index into the
    rack-alternated list, so the leaders need not continue the original round robin; this
    function does the same, to place partitions exactly where Kafka would.

    Raises `PlacementError`: INVALID_PARTITIONS (37) when `new_count` does not exceed the current
    count, INVALID_REPLICA_ASSIGNMENT (39) when `existing` is not partitions `0 .. n-1` or
    partition 0 has no replicas, and whatever `assign_replicas_to_brokers` raises.
    """
    # Kafka throws AdminOperationException for a missing partition 0 (a client sees
    # UNKNOWN_SERVER_ERROR); the fault is in the topic's replica assignment, so 39 names it.
    if 0 not in existing:
        raise PlacementError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Unexpected existing replica assignment, partition id 0 is missing: "
            f"partitions {sorted(existing)}. Repair the topic's assignment before adding "
            "partitions.",
        )
    if sorted(existing) != list(range(len(existing))):
        # Kafka numbers new partitions from the current count; with gaps they would collide.
        raise PlacementError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Existing partition ids {sorted(existing)} are not 0..{len(existing) - 1}; "
            "new partitions are numbered from the partition count, so repair the topic's "
            "assignment before adding partitions.",
        )
    partition0 = existing[0]
    if not partition0:
        raise PlacementError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Partition 0 has no replicas, so there is no replication factor to follow; "
            "repair the topic's assignment before adding partitions.",
        )
    partitions_to_add = new_count - len(existing)
    if partitions_to_add <= 0:
        raise PlacementError(
            ErrorCode.INVALID_PARTITIONS,
            "The number of partitions for a topic can only be increased. "
            f"Topic currently has {len(existing)} partitions, {new_count} would not be an "
            "increase.",
        )
    sorted_ids = sorted(broker.broker_id for broker in brokers)
    first_leader = partition0[0]
    start_index = next((i for i, b in enumerate(sorted_ids) if b >= first_leader), 0)
    return assign_replicas_to_brokers(
        brokers,
        partitions_to_add,
        len(partition0),
        fixed_start_index=start_index,
        start_partition_id=len(existing),
        rack_aware_mode=rack_aware_mode,
    )


def _broker_metadatas(
    brokers: Sequence[BrokerPlacementInfo], mode: RackAwareMode
) -> list[BrokerPlacementInfo]:
    """The brokers in id order, racks kept or dropped per `mode` (Kafka's `getBrokerMetadatas`)."""
    ordered = sorted(brokers, key=lambda broker: broker.broker_id)
    counts = Counter(broker.broker_id for broker in ordered)
    duplicates = sorted(broker_id for broker_id, count in counts.items() if count > 1)
    if duplicates:
        # A broker listed twice would receive two replicas of one partition.
        raise PlacementError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Broker ids {duplicates} are listed more than once; pass each broker once.",
        )
    with_rack = sum(1 for broker in ordered if broker.rack is not None)
    partial = 0 < with_rack < len(ordered)
    if mode is RackAwareMode.ENFORCED and partial:
        raise _partial_rack_error(ordered)
    if mode is RackAwareMode.DISABLED or (mode is RackAwareMode.SAFE and partial):
        return [BrokerPlacementInfo(broker_id=broker.broker_id) for broker in ordered]
    return ordered


def _partial_rack_error(brokers: Iterable[BrokerPlacementInfo]) -> PlacementError:
    """The error for brokers of which only some have a rack."""
    missing = [broker.broker_id for broker in brokers if broker.rack is None]
    # Kafka throws AdminOperationException here (UNKNOWN_SERVER_ERROR on the wire); the request
    # is valid but the cluster cannot honour rack-aware placement, and 39 says placement failed.
    return PlacementError(
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "Not all brokers have rack information for replica rack aware assignment: brokers "
        f"{missing} have none. Give every broker a rack (`mlog brokers register --id N "
        "--rack R` registers it again with one) or none, or place replicas with rack-aware "
        "mode DISABLED or SAFE.",
    )


def _start_and_shift(n_brokers: int, fixed_start_index: int, rng: random.Random) -> tuple[int, int]:
    """The start index and initial follower shift: both the fixed index, or two random draws."""
    if fixed_start_index >= 0:
        return fixed_start_index, fixed_start_index
    # Two independent draws, start index first, as Kafka's two `rand.nextInt(n)` calls.
    start_index = rng.randrange(n_brokers)
    return start_index, rng.randrange(n_brokers)


def _replica_index(first_replica_index: int, shift: int, replica_index: int, n_brokers: int) -> int:
    """Position of a follower, Kafka's `replicaIndex`: never the leader's, the step is 1 .. n-1."""
    step = 1 + (shift + replica_index) % (n_brokers - 1)
    return (first_replica_index + step) % n_brokers
