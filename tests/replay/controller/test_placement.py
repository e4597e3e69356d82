"""Replica placement: Kafka's own worked examples, the properties it promises, and its errors.

Exact expectations come from Kafka's `AdminUtils` scaladoc and from `AdminTest`,
`AdminRackAwareTest` and `AddPartitionsTest` (core/src/test/scala/unit/kafka/admin); the few
that Kafka's tests only check loosely (sets, leaders) are pinned here and marked as such.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from records.errors import MetadataLogError
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.placement import (
    BrokerPlacementInfo,
    PlacementError,
    PlacementPlan,
    RackAwareMode,
    assign_added_partitions,
    assign_replicas_to_brokers,
    rack_alternated_broker_list,
)

Assignment = dict[int, list[int]]

# AdminRackAwareTest's usual cluster: two brokers in each of three racks.
SIX_BROKERS_THREE_RACKS = {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
# The scaladoc's cluster for the rack-alternated list.
SCALADOC_RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def plain(*ids: int) -> list[BrokerPlacementInfo]:
    return [BrokerPlacementInfo(broker_id=broker_id) for broker_id in ids]


def racked(rack_map: Mapping[int, str]) -> list[BrokerPlacementInfo]:
    return [BrokerPlacementInfo(broker_id=b, rack=rack) for b, rack in rack_map.items()]


def leader_counts(assignment: Assignment, broker_ids: Sequence[int]) -> list[int]:
    counts = Counter(replicas[0] for replicas in assignment.values())
    return [counts[b] for b in broker_ids]


def replica_counts(assignment: Assignment, broker_ids: Sequence[int]) -> list[int]:
    counts = Counter(b for replicas in assignment.values() for b in replicas)
    return [counts[b] for b in broker_ids]


def check_replica_distribution(
    assignment: Assignment,
    rack_map: Mapping[int, str],
    n_partitions: int,
    replication_factor: int,
    *,
    verify_rack_aware: bool = True,
    verify_leaders: bool = True,
    verify_replicas: bool = True,
) -> None:
    """Kafka's `RackAwareTest.checkReplicaDistribution`."""
    n_brokers = len(rack_map)
    assert len(assignment) == n_partitions
    for replicas in assignment.values():
        assert len(replicas) == replication_factor
        assert len(set(replicas)) == len(replicas), f"duplicate broker in {replicas}"
    if verify_rack_aware:
        for partition, replicas in assignment.items():
            racks = {rack_map[b] for b in replicas}
            assert len(racks) == replication_factor, f"partition {partition}: {replicas}"
    if verify_leaders:
        expected = [n_partitions // n_brokers] * n_brokers
        assert leader_counts(assignment, sorted(rack_map)) == expected
    if verify_replicas:
        expected = [n_partitions * replication_factor // n_brokers] * n_brokers
        assert replica_counts(assignment, sorted(rack_map)) == expected


# --- Kafka's worked examples -------------------------------------------------------------------


def test_rack_unaware_example_from_admin_utils_scaladoc_and_admin_test() -> None:
    # AdminTest.testReplicaAssignment: 5 brokers, 10 partitions, rf 3, fixed start index 0; the
    # same placement is the table in the assignReplicasToBrokers scaladoc.
    assert assign_replicas_to_brokers(plain(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_scaladoc_table_rows_per_broker() -> None:
    # The scaladoc draws the same placement per broker: which partitions hold which replica.
    assignment = assign_replicas_to_brokers(plain(0, 1, 2, 3, 4), 10, 3, fixed_start_index=0)
    rows = {
        position: [
            sorted(p for p, replicas in assignment.items() if replicas[position] == broker)
            for broker in range(5)
        ]
        for position in range(3)
    }
    assert rows[0] == [[0, 5], [1, 6], [2, 7], [3, 8], [4, 9]]
    assert rows[1] == [[4, 8], [0, 9], [1, 5], [2, 6], [3, 7]]
    assert rows[2] == [[3, 7], [4, 8], [0, 9], [1, 5], [2, 6]]


def test_rack_alternated_list_from_scaladoc() -> None:
    racks = {b: f"rack{1 + b // 3}" for b in range(9)}
    assert rack_alternated_broker_list(racks) == [0, 3, 6, 1, 4, 7, 2, 5, 8]


def test_rack_alternated_list_from_admin_rack_aware_test() -> None:
    assert rack_alternated_broker_list(SCALADOC_RACKS) == [0, 3, 1, 5, 4, 2]
    without_5 = {b: rack for b, rack in SCALADOC_RACKS.items() if b != 5}
    assert rack_alternated_broker_list(without_5) == [0, 3, 1, 4, 2]


def test_rack_alternated_list_ignores_mapping_order() -> None:
    reversed_map = dict(reversed(list(SCALADOC_RACKS.items())))
    assert rack_alternated_broker_list(reversed_map) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({}) == []


def test_rack_aware_example_shifts_followers_after_first_round() -> None:
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers (and the
    # scaladoc): partition 6 gets 0,4,2 rather than repeating partition 0's 0,3,1.
    assignment = assign_replicas_to_brokers(
        racked(SCALADOC_RACKS), 7, 3, fixed_start_index=0, start_partition_id=0
    )
    assert assignment == {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }


def test_rack_aware_skips_used_racks_then_used_brokers() -> None:
    # AdminRackAwareTest.testSkipBrokerWithReplicaAlreadyAssigned: rf 4 over 3 racks, so once each
    # rack has a replica the next candidate may share a rack but must be a new broker. Kafka only
    # checks for duplicates; the exact lists are worked out by hand from the algorithm.
    rack_info = {0: "a", 1: "b", 2: "c", 3: "a", 4: "a"}
    assignment = assign_replicas_to_brokers(racked(rack_info), 6, 4, fixed_start_index=2)
    assert assignment == {
        0: [2, 0, 1, 3],
        1: [3, 1, 2, 4],
        2: [4, 2, 1, 3],
        3: [0, 1, 2, 3],
        4: [1, 4, 2, 3],
        5: [2, 4, 1, 3],
    }
    check_replica_distribution(
        assignment,
        rack_info,
        6,
        4,
        verify_rack_aware=False,
        verify_leaders=False,
        verify_replicas=False,
    )
    for replicas in assignment.values():
        assert {rack_info[b] for b in replicas} == {"a", "b", "c"}


UNEVEN_RACKS = {0: "rack1", 1: "rack1", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack1"}
TWELVE_BROKERS = {
    **SIX_BROKERS_THREE_RACKS,
    6: "rack1",
    7: "rack2",
    8: "rack2",
    9: "rack3",
    10: "rack1",
    11: "rack3",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DistributionCase:
    """One of AdminRackAwareTest's checkReplicaDistribution cases."""

    rack_map: dict[int, str]
    n_partitions: int
    rf: int
    fixed_start: int = -1
    start_partition: int = -1
    verify_leaders: bool = True
    verify_replicas: bool = True


DISTRIBUTION_CASES = {
    "testAssignmentWithRackAware": DistributionCase(
        rack_map=SIX_BROKERS_THREE_RACKS, n_partitions=6, rf=3, fixed_start=2, start_partition=0
    ),
    "testAssignmentWithRackAwareWithRandomStartIndex": DistributionCase(
        rack_map=SIX_BROKERS_THREE_RACKS, n_partitions=6, rf=3
    ),
    "testAssignmentWithRackAwareWithUnevenReplicas": DistributionCase(
        rack_map=SIX_BROKERS_THREE_RACKS,
        n_partitions=13,
        rf=3,
        fixed_start=0,
        start_partition=0,
        verify_leaders=False,
        verify_replicas=False,
    ),
    "testAssignmentWithRackAwareWithUnevenRacks": DistributionCase(
        rack_map=UNEVEN_RACKS, n_partitions=12, rf=3, verify_replicas=False
    ),
    "testAssignmentWith2ReplicasRackAware": DistributionCase(
        rack_map=SIX_BROKERS_THREE_RACKS, n_partitions=12, rf=2
    ),
    "testRackAwareExpansion": DistributionCase(
        rack_map={b + 6: rack for b, rack in SIX_BROKERS_THREE_RACKS.items()},
        n_partitions=12,
        rf=2,
        start_partition=12,
    ),
    "testAssignmentWith2ReplicasRackAwareWith6Partitions": DistributionCase(
        rack_map=SIX_BROKERS_THREE_RACKS, n_partitions=6, rf=2
    ),
    "testAssignmentWith2ReplicasRackAwareWith6PartitionsAnd3Brokers": DistributionCase(
        rack_map={0: "rack1", 1: "rack2", 4: "rack3"}, n_partitions=3, rf=2
    ),
    "testLargeNumberPartitionsAssignment": DistributionCase(
        rack_map=TWELVE_BROKERS, n_partitions=96, rf=3
    ),
}


@pytest.mark.parametrize("case", DISTRIBUTION_CASES.values(), ids=DISTRIBUTION_CASES.keys())
@settings(max_examples=25, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_admin_rack_aware_test_distributions(case: DistributionCase, rng: random.Random) -> None:
    # AdminRackAwareTest's cases; those with a random start index in Kafka run here for many.
    assignment = assign_replicas_to_brokers(
        racked(case.rack_map),
        case.n_partitions,
        case.rf,
        fixed_start_index=case.fixed_start,
        start_partition_id=case.start_partition,
        rng=rng,
    )
    first = max(0, case.start_partition)
    assert sorted(assignment) == list(range(first, first + case.n_partitions))
    check_replica_distribution(
        assignment,
        case.rack_map,
        case.n_partitions,
        case.rf,
        verify_leaders=case.verify_leaders,
        verify_replicas=case.verify_replicas,
    )


@pytest.mark.parametrize(
    ("rack_map", "rf", "racks_per_partition"),
    [
        pytest.param(
            {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"},
            5,
            3,
            id="MoreReplicasThanRacks",
        ),
        pytest.param(
            {0: "rack1", 1: "rack2", 2: "rack2", 3: "rack3", 4: "rack3", 5: "rack2"},
            2,
            2,
            id="LessReplicasThanRacks",
        ),
        pytest.param({b: "rack1" for b in range(6)}, 3, 1, id="SingleRack"),
    ],
)
@settings(max_examples=25, deadline=None)
@given(rng=st.randoms(use_true_random=False))
def test_admin_rack_aware_test_rack_counts(
    rack_map: dict[int, str], rf: int, racks_per_partition: int, rng: random.Random
) -> None:
    assignment = assign_replicas_to_brokers(racked(rack_map), 6, rf, rng=rng)
    assert [len(replicas) for replicas in assignment.values()] == [rf] * 6
    for replicas in assignment.values():
        assert len({rack_map[b] for b in replicas}) == racks_per_partition
    # Six partitions over six brokers: every broker leads exactly one (testSingleRack).
    assert leader_counts(assignment, sorted(rack_map)) == [1] * 6


# --- adding partitions -------------------------------------------------------------------------


def test_add_partitions_all_servers_from_add_partitions_test() -> None:
    # AddPartitionsTest.testReplicaPlacementAllServers: topic 0 -> [2,3,0,1] on brokers 0..3 grown
    # to 7 partitions. Kafka checks each new partition's leader and replica set; the order pinned
    # here is the algorithm's and matches the order Kafka's test lists the sets in.
    added = assign_added_partitions(plain(0, 1, 2, 3), {0: [2, 3, 0, 1]}, 7)
    assert added == {
        1: [3, 2, 0, 1],
        2: [0, 3, 1, 2],
        3: [1, 0, 2, 3],
        4: [2, 3, 0, 1],
        5: [3, 0, 1, 2],
        6: [0, 1, 2, 3],
    }


def test_add_partitions_partial_servers_from_add_partitions_test() -> None:
    # AddPartitionsTest.testReplicaPlacementPartialServers: 0 -> [1,2] grown to 3 partitions:
    # partition 1 led by 2 on {0, 2}, partition 2 led by 3 on {1, 3}.
    assert assign_added_partitions(plain(0, 1, 2, 3), {0: [1, 2]}, 3) == {1: [2, 0], 2: [3, 1]}


def test_add_partitions_start_index_is_first_broker_at_or_after_partition_0_leader() -> None:
    # Partition 0's leader (2) is gone; Kafka starts at the first broker id >= 2, i.e. broker 3
    # at index 2 of the sorted list, and gives up (index 0) when every id is smaller.
    brokers = plain(4, 0, 3, 1)
    assert assign_added_partitions(brokers, {0: [2, 3]}, 2) == {1: [4, 3]}
    assert assign_added_partitions(brokers, {0: [2, 3]}, 2) == assign_replicas_to_brokers(
        brokers, 1, 2, fixed_start_index=2, start_partition_id=1
    )
    assert assign_added_partitions(brokers, {0: [9, 0]}, 2) == assign_replicas_to_brokers(
        brokers, 1, 2, fixed_start_index=0, start_partition_id=1
    )


def test_add_partitions_uses_partition_0_replication_factor() -> None:
    added = assign_added_partitions(plain(0, 1, 2, 3, 4), {0: [0, 1, 2], 1: [1, 2, 3]}, 5)
    assert sorted(added) == [2, 3, 4]
    assert all(len(replicas) == 3 for replicas in added.values())


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_create_then_add_equals_creating_all_at_once(data: st.DataObject) -> None:
    # What Kafka's start-index rule buys: with a fixed start index below the broker count and at
    # most one round of existing partitions, growing a topic places the new partitions exactly
    # where creating it at the final size would have.
    ids = data.draw(st.lists(st.integers(0, 50), min_size=1, max_size=8, unique=True))
    n = len(ids)
    rf = data.draw(st.integers(1, n))
    start = data.draw(st.integers(0, n - 1))
    existing_count = data.draw(st.integers(1, n))
    added_count = data.draw(st.integers(1, 3 * n))
    total = existing_count + added_count
    brokers = plain(*ids)
    full = assign_replicas_to_brokers(brokers, total, rf, fixed_start_index=start)
    existing = {p: full[p] for p in range(existing_count)}
    added = assign_added_partitions(brokers, existing, total)
    assert added == {p: full[p] for p in range(existing_count, total)}


@settings(max_examples=200, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_added_partitions_continue_the_leader_round_robin(data: st.DataObject, seed: int) -> None:
    # Whatever start index and shift the topic was created with, and however many partitions it
    # has, the new partitions' preferred leaders continue its round robin (rack-unaware).
    ids = data.draw(st.lists(st.integers(0, 50), min_size=1, max_size=8, unique=True))
    rf = data.draw(st.integers(1, len(ids)))
    existing_count = data.draw(st.integers(1, 4 * len(ids)))
    total = existing_count + data.draw(st.integers(1, 20))
    brokers = plain(*ids)
    full = assign_replicas_to_brokers(brokers, total, rf, rng=random.Random(seed))
    existing = {p: full[p] for p in range(existing_count)}
    added = assign_added_partitions(brokers, existing, total)
    assert {p: r[0] for p, r in added.items()} == {p: full[p][0] for p in added}


def test_add_after_first_round_restarts_the_follower_shift() -> None:
    # Past one round of partitions the equality above stops: Kafka restarts the follower shift
    # at the start index, so partition 4 gets [1, 2] instead of the [1, 0] a 5-partition topic
    # would have had.
    brokers = plain(0, 1, 2)
    full = assign_replicas_to_brokers(brokers, 5, 2, fixed_start_index=0)
    assert full[4] == [1, 0]
    existing = {p: full[p] for p in range(4)}
    assert assign_added_partitions(brokers, existing, 5) == {4: [1, 2]}


def test_rack_aware_add_indexes_the_rack_alternated_list_with_a_sorted_list_position() -> None:
    # Kafka's quirk, kept for fidelity: the start index is partition 0's leader's position in the
    # id-sorted list (broker 3 -> 3) but indexes the rack-alternated list [0, 3, 1, 5, 4, 2], so
    # partition 1 is led by 4, not by 1 as in a topic created with 2 partitions.
    brokers = racked(SCALADOC_RACKS)
    created = assign_replicas_to_brokers(brokers, 2, 3, fixed_start_index=1)
    assert created[0][0] == 3
    assert created[1][0] == 1
    assert assign_added_partitions(brokers, {0: created[0]}, 2) == {1: [4, 5, 2]}


# --- properties --------------------------------------------------------------------------------

broker_ids = st.lists(st.integers(0, 1000), min_size=1, max_size=12, unique=True)


@settings(max_examples=300, deadline=None)
@given(
    ids=broker_ids,
    data=st.data(),
    fixed_start=st.integers(-1, 30),
    start_partition=st.integers(-3, 40),
    seed=st.integers(0, 2**32),
)
def test_rack_unaware_properties(
    ids: list[int], data: st.DataObject, fixed_start: int, start_partition: int, seed: int
) -> None:
    n_partitions = data.draw(st.integers(1, 40))
    rf = data.draw(st.integers(1, len(ids)))
    assignment = assign_replicas_to_brokers(
        plain(*ids),
        n_partitions,
        rf,
        fixed_start_index=fixed_start,
        start_partition_id=start_partition,
        rng=random.Random(seed),
    )
    first = max(0, start_partition)
    assert list(assignment) == list(range(first, first + n_partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(ids)
    # Leaders go round robin, so no broker leads more than one partition more than another.
    leaders = leader_counts(assignment, ids)
    assert max(leaders) - min(leaders) <= 1


@settings(max_examples=200, deadline=None)
@given(ids=broker_ids, data=st.data(), seed=st.integers(0, 2**32))
def test_rack_unaware_full_rounds_spread_replicas_evenly(
    ids: list[int], data: st.DataObject, seed: int
) -> None:
    rounds = data.draw(st.integers(1, 4))
    rf = data.draw(st.integers(1, len(ids)))
    assignment = assign_replicas_to_brokers(
        plain(*ids), rounds * len(ids), rf, rng=random.Random(seed)
    )
    assert leader_counts(assignment, ids) == [rounds] * len(ids)
    assert replica_counts(assignment, ids) == [rounds * rf] * len(ids)


@settings(max_examples=300, deadline=None)
@given(
    rack_of=st.dictionaries(
        st.integers(0, 1000),
        st.sampled_from(["r0", "r1", "r2", "r3", "r4"]),
        min_size=1,
        max_size=12,
    ),
    data=st.data(),
    fixed_start=st.integers(-1, 30),
    start_partition=st.integers(-3, 40),
    seed=st.integers(0, 2**32),
)
def test_rack_aware_properties(
    rack_of: dict[int, str],
    data: st.DataObject,
    fixed_start: int,
    start_partition: int,
    seed: int,
) -> None:
    n_partitions = data.draw(st.integers(1, 40))
    rf = data.draw(st.integers(1, len(rack_of)))
    assignment = assign_replicas_to_brokers(
        racked(rack_of),
        n_partitions,
        rf,
        fixed_start_index=fixed_start,
        start_partition_id=start_partition,
        rng=random.Random(seed),
    )
    n_racks = len(set(rack_of.values()))
    first = max(0, start_partition)
    assert list(assignment) == list(range(first, first + n_partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        # Every rack gets a replica before any rack gets a second one.
        assert len({rack_of[b] for b in replicas}) == min(rf, n_racks)
        assert len({rack_of[b] for b in replicas[: min(rf, n_racks)]}) == min(rf, n_racks)
    leaders = leader_counts(assignment, sorted(rack_of))
    assert max(leaders) - min(leaders) <= 1


@settings(max_examples=200, deadline=None)
@given(
    n_racks=st.integers(1, 4),
    per_rack=st.integers(1, 4),
    rounds=st.integers(1, 3),
    seed=st.integers(0, 2**32),
)
def test_rack_aware_even_racks_spread_replicas_evenly(
    n_racks: int, per_rack: int, rounds: int, seed: int
) -> None:
    # The scaladoc's promise: replicas == racks and equal racks give an even spread.
    rack_of = {r * per_rack + i: f"rack{r}" for r in range(n_racks) for i in range(per_rack)}
    n_brokers = len(rack_of)
    assignment = assign_replicas_to_brokers(
        racked(rack_of), rounds * n_brokers, n_racks, rng=random.Random(seed)
    )
    check_replica_distribution(assignment, rack_of, rounds * n_brokers, n_racks)


@settings(max_examples=100, deadline=None)
@given(
    rack_of=st.dictionaries(
        st.integers(0, 100), st.sampled_from(["a", "b", "c"]), min_size=1, max_size=8
    ),
    with_racks=st.booleans(),
    data=st.data(),
)
def test_broker_order_does_not_matter(
    rack_of: dict[int, str], with_racks: bool, data: st.DataObject
) -> None:
    brokers = racked(rack_of) if with_racks else plain(*rack_of)
    shuffled = data.draw(st.permutations(brokers))
    rf = data.draw(st.integers(1, len(brokers)))
    start = data.draw(st.integers(0, 20))
    assert assign_replicas_to_brokers(
        brokers, 10, rf, fixed_start_index=start
    ) == assign_replicas_to_brokers(shuffled, 10, rf, fixed_start_index=start)


def test_random_start_index_comes_from_rng() -> None:
    ids = [3, 7, 11, 19, 23]
    leaders_of_partition_0 = set()
    for seed in range(50):
        expected_start = random.Random(seed).randrange(len(ids))
        assignment = assign_replicas_to_brokers(plain(*ids), 7, 2, rng=random.Random(seed))
        assert [r[0] for r in assignment.values()] == [
            ids[(expected_start + p) % len(ids)] for p in range(7)
        ]
        assert assignment == assign_replicas_to_brokers(plain(*ids), 7, 2, rng=random.Random(seed))
        leaders_of_partition_0.add(assignment[0][0])
    assert leaders_of_partition_0 == set(ids)


def test_fixed_start_index_ignores_rng() -> None:
    a = assign_replicas_to_brokers(plain(0, 1, 2), 6, 2, fixed_start_index=1, rng=random.Random(1))
    b = assign_replicas_to_brokers(plain(0, 1, 2), 6, 2, fixed_start_index=1, rng=random.Random(2))
    assert a == b


def test_single_broker() -> None:
    assert assign_replicas_to_brokers(plain(5), 3, 1) == {0: [5], 1: [5], 2: [5]}
    assert assign_replicas_to_brokers(racked({5: "r"}), 2, 1) == {0: [5], 1: [5]}


# --- rack-aware modes --------------------------------------------------------------------------

PARTIAL_RACKS = [
    BrokerPlacementInfo(broker_id=0, rack="r1"),
    BrokerPlacementInfo(broker_id=1),
    BrokerPlacementInfo(broker_id=2, rack="r2"),
    BrokerPlacementInfo(broker_id=3),
]


def test_partial_rack_information_is_refused_by_default() -> None:
    with pytest.raises(PlacementError, match="Not all brokers have rack information") as info:
        assign_replicas_to_brokers(PARTIAL_RACKS, 4, 2, fixed_start_index=0)
    assert info.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "brokers [1, 3] have none" in str(info.value)


def test_one_racked_broker_among_several_is_partial_rack_information() -> None:
    one_racked = [BrokerPlacementInfo(broker_id=0, rack="r1"), *plain(1, 2)]
    with pytest.raises(PlacementError, match=r"brokers \[1, 2\] have none"):
        assign_replicas_to_brokers(one_racked, 3, 2, fixed_start_index=0)
    safe = assign_replicas_to_brokers(
        one_racked, 3, 2, fixed_start_index=0, rack_aware_mode=RackAwareMode.SAFE
    )
    assert safe == assign_replicas_to_brokers(plain(0, 1, 2), 3, 2, fixed_start_index=0)
    # One broker, racked: the whole cluster has rack information.
    alone = [BrokerPlacementInfo(broker_id=0, rack="r1")]
    assert assign_replicas_to_brokers(alone, 2, 1, fixed_start_index=0) == {0: [0], 1: [0]}


@pytest.mark.parametrize("mode", [RackAwareMode.DISABLED, RackAwareMode.SAFE])
def test_partial_rack_information_placed_rack_unaware_when_allowed(mode: RackAwareMode) -> None:
    placed = assign_replicas_to_brokers(
        PARTIAL_RACKS, 8, 2, fixed_start_index=1, rack_aware_mode=mode
    )
    assert placed == assign_replicas_to_brokers(plain(0, 1, 2, 3), 8, 2, fixed_start_index=1)


def test_disabled_mode_ignores_complete_rack_information_and_safe_mode_uses_it() -> None:
    brokers = racked(SCALADOC_RACKS)
    unaware = assign_replicas_to_brokers(plain(*range(6)), 7, 3, fixed_start_index=0)
    aware = assign_replicas_to_brokers(brokers, 7, 3, fixed_start_index=0)
    assert aware != unaware
    disabled = assign_replicas_to_brokers(
        brokers, 7, 3, fixed_start_index=0, rack_aware_mode=RackAwareMode.DISABLED
    )
    safe = assign_replicas_to_brokers(
        brokers, 7, 3, fixed_start_index=0, rack_aware_mode=RackAwareMode.SAFE
    )
    assert disabled == unaware
    assert safe == aware


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_partitions", "rf", "code", "message"),
    [
        (0, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0"),
        (-2, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0"),
        (3, 0, ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0"),
        (
            3,
            6,
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "Replication factor: 6 larger than available brokers: 5.",
        ),
    ],
)
def test_invalid_counts(n_partitions: int, rf: int, code: ErrorCode, message: str) -> None:
    # AdminTest.testReplicaAssignment refuses rf 0 and rf 6 on five brokers.
    with pytest.raises(PlacementError, match=re.escape(message)) as info:
        assign_replicas_to_brokers(plain(0, 1, 2, 3, 4), n_partitions, rf)
    assert info.value.error_code == code


def test_partitions_are_checked_before_replication_factor() -> None:
    with pytest.raises(PlacementError) as info:
        assign_replicas_to_brokers(plain(), 0, 0)
    assert info.value.error_code == ErrorCode.INVALID_PARTITIONS


def test_no_brokers() -> None:
    with pytest.raises(PlacementError, match=re.escape("available brokers: 0.")) as info:
        assign_replicas_to_brokers([], 1, 1)
    assert info.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


def test_duplicate_broker_ids_are_refused() -> None:
    with pytest.raises(PlacementError, match=re.escape("Broker ids [1] are listed more")) as info:
        assign_replicas_to_brokers(plain(1, 0, 1), 2, 2, fixed_start_index=0)
    assert info.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_placement_error_is_an_api_error_and_a_value_error() -> None:
    with pytest.raises(PlacementError) as info:
        assign_replicas_to_brokers(plain(0), 1, 2)
    assert isinstance(info.value, ApiError)
    assert isinstance(info.value, MetadataLogError)
    assert isinstance(info.value, ValueError)
    assert info.value.error_code == 38


def test_add_partitions_must_increase_the_count() -> None:
    for new_count in (1, 2):
        with pytest.raises(PlacementError, match="can only be increased") as info:
            assign_added_partitions(plain(0, 1, 2), {0: [0, 1], 1: [1, 2]}, new_count)
        assert info.value.error_code == ErrorCode.INVALID_PARTITIONS
        assert f"currently has 2 partitions, {new_count} would not be an increase" in str(
            info.value
        )


def test_add_partitions_needs_partition_0() -> None:
    # AddPartitionsTest.testMissingPartition0.
    with pytest.raises(PlacementError, match="partition id 0 is missing") as info:
        assign_added_partitions(plain(0, 1, 2), {1: [0, 1]}, 3)
    assert info.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_add_partitions_refuses_gaps_and_empty_partition_0() -> None:
    with pytest.raises(PlacementError, match=re.escape("[0, 2] are not 0..1")):
        assign_added_partitions(plain(0, 1, 2), {0: [0], 2: [1]}, 4)
    with pytest.raises(PlacementError, match="Partition 0 has no replicas") as info:
        assign_added_partitions(plain(0, 1, 2), {0: []}, 2)
    assert info.value.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_add_partitions_with_too_few_brokers_for_the_existing_replication_factor() -> None:
    with pytest.raises(PlacementError, match=re.escape("Replication factor: 3 larger")) as info:
        assign_added_partitions(plain(0, 1), {0: [0, 1, 2]}, 2)
    assert info.value.error_code == ErrorCode.INVALID_REPLICATION_FACTOR


def _kafka_loop(
    arranged: Sequence[int],
    racks: Mapping[int, str] | None,
    *,
    n_partitions: int,
    replication_factor: int,
    start_index: int,
    shift: int,
    start_partition_id: int,
) -> Assignment:
    """Kafka's `assignReplicasToBrokersRackUnaware` / `...RackAware` loop, as its source reads."""
    n = len(arranged)
    n_racks = len(set(racks.values())) if racks else 1
    assignment: Assignment = {}
    first_partition = max(0, start_partition_id)
    for partition in range(first_partition, first_partition + n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [arranged[first]]
        if racks is None:
            for j in range(replication_factor - 1):
                replicas.append(arranged[(first + 1 + (shift + j) % (n - 1)) % n])
        else:
            racks_used = {racks[replicas[0]]}
            k = 0
            while len(replicas) < replication_factor:
                broker = arranged[(first + 1 + (shift * n_racks + k) % (n - 1)) % n]
                k += 1
                if (racks[broker] not in racks_used or len(racks_used) == n_racks) and (
                    broker not in replicas or len(replicas) == n
                ):
                    replicas.append(broker)
                    racks_used.add(racks[broker])
        assignment[partition] = replicas
    return assignment


@settings(max_examples=60, deadline=None)
@given(
    n_brokers=st.integers(1, 9),
    n_racks=st.integers(0, 4),
    calls=st.lists(
        st.tuples(st.integers(1, 40), st.integers(1, 9), st.integers(-1, 30), st.integers(0, 99)),
        min_size=1,
        max_size=8,
    ),
)
def test_a_reused_plan_places_as_kafka_does_every_time(
    n_brokers: int, n_racks: int, calls: list[tuple[int, int, int, int]]
) -> None:
    # One plan serves many creates (a controller keeps it while the cluster is the same) and
    # remembers replica lists between them: every answer is still Kafka's loop's.
    racks = {b: f"rack{b % n_racks}" for b in range(n_brokers)} if n_racks else None
    brokers = racked(racks) if racks else plain(*range(n_brokers))
    plan = PlacementPlan(brokers)
    arranged = rack_alternated_broker_list(racks) if racks else list(range(n_brokers))
    for n_partitions, rf, start_partition_id, seed in calls:
        replication_factor = min(rf, n_brokers)
        got = plan.assign(
            n_partitions,
            replication_factor,
            start_partition_id=start_partition_id,
            rng=random.Random(seed),
        )
        draws = random.Random(seed)
        start_index = draws.randrange(n_brokers)
        shift = draws.randrange(n_brokers)
        expected = _kafka_loop(
            arranged,
            racks,
            n_partitions=n_partitions,
            replication_factor=replication_factor,
            start_index=start_index,
            shift=shift,
            start_partition_id=start_partition_id,
        )
        assert got == expected
        # The controller's form: the same lists in partition order, as shared tuples.
        shared = plan.replica_tuples(
            n_partitions,
            replication_factor,
            start_partition_id=start_partition_id,
            rng=random.Random(seed),
        )
        assert [list(replicas) for replicas in shared] == [expected[p] for p in sorted(expected)]
