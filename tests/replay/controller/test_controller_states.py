"""Kafka's partition and replica states, derived from the image, and the transitions checked."""

from __future__ import annotations

import dataclasses

import pytest

from records.model import (
    BrokerRegistrationChangeRecord,
    ControlledShutdownChange,
    FencingChange,
    Mode,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
)
from records.uuids import Uuid
from replay.controller.errors import IllegalStateTransitionError
from replay.controller.states import (
    PartitionState,
    ReplicaState,
    check_change,
    checked_change,
    is_live,
    partition_state,
    replica_state,
)
from replay.delta import replay_records
from replay.image import EMPTY_IMAGE, EMPTY_PROVENANCE, ClusterImage

T = Uuid.random()


def _cluster(*records: Record) -> ClusterImage:
    return replay_records(EMPTY_IMAGE, list(records), EMPTY_PROVENANCE).cluster


def _broker(broker_id: int, *, fenced: bool = False) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=Uuid.random(), broker_epoch=broker_id, fenced=fenced
    )


LIVE = _cluster(_broker(1), _broker(2), _broker(3))
"""Brokers 1-3 registered, unfenced."""


def _partition(**changes: object) -> PartitionRecord:
    base = PartitionRecord(
        partition_id=0, topic_id=T, replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=1
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_a_broker_is_live_when_registered_unfenced_and_not_shutting_down() -> None:
    cluster = _cluster(
        _broker(1),
        _broker(2, fenced=True),
        _broker(3),
        BrokerRegistrationChangeRecord(
            broker_id=3,
            broker_epoch=3,
            fenced=FencingChange.NONE,
            in_controlled_shutdown=ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN,
        ),
    )
    assert [is_live(cluster, b) for b in (1, 2, 3, 4)] == [True, False, False, False]


def test_partition_states() -> None:
    assert partition_state(None, LIVE) is PartitionState.NON_EXISTENT
    assert partition_state(_partition(), LIVE) is PartitionState.ONLINE
    never_led = _partition(leader=-1, leader_epoch=0, partition_epoch=0)
    assert partition_state(never_led, LIVE) is PartitionState.NEW
    for epochs in ((1, 0), (0, 1), (2, 2)):
        led_once = _partition(leader=-1, leader_epoch=epochs[0], partition_epoch=epochs[1])
        assert partition_state(led_once, LIVE) is PartitionState.OFFLINE, epochs
    assert partition_state(_partition(mode=Mode.NONE), LIVE) is PartitionState.OFFLINE
    assert partition_state(_partition(mode=Mode.READ_ONLY), LIVE) is PartitionState.ONLINE
    assert partition_state(_partition(), _cluster(_broker(2))) is PartitionState.OFFLINE


def test_replica_states() -> None:
    partition = _partition(replicas=(1, 2, 3), isr=(1, 3), adding_replicas=(2, 3))
    assert replica_state(None, 1, LIVE) is ReplicaState.NON_EXISTENT
    assert replica_state(partition, 4, LIVE) is ReplicaState.NON_EXISTENT
    assert replica_state(partition, 1, LIVE) is ReplicaState.ONLINE
    assert replica_state(partition, 2, LIVE) is ReplicaState.NEW  # adding, not yet in sync
    assert replica_state(partition, 3, LIVE) is ReplicaState.ONLINE  # adding, caught up
    assert replica_state(partition, 1, _cluster(_broker(2))) is ReplicaState.OFFLINE
    assert replica_state(_partition(mode=Mode.NONE), 1, LIVE) is ReplicaState.OFFLINE


def test_an_online_partition_cannot_become_new() -> None:
    online = _partition()
    reset = _partition(leader=-1, leader_epoch=0, partition_epoch=0)
    with pytest.raises(IllegalStateTransitionError, match="OnlinePartition -> NewPartition"):
        check_change("t-0", online, reset, LIVE, LIVE)
    offline = _partition(leader=-1)
    check_change("t-0", online, offline, LIVE, LIVE)  # Online -> Offline is legal
    check_change("t-0", offline, online, LIVE, LIVE)


def test_an_online_replica_cannot_become_new() -> None:
    before = _partition(replicas=(1, 2), isr=(1, 2))
    after = _partition(replicas=(1, 2), isr=(1,), adding_replicas=(2,))
    with pytest.raises(
        IllegalStateTransitionError, match="t-0 replica 2: illegal replica state transition "
    ) as info:
        check_change("t-0", before, after, LIVE, LIVE)
    assert "OnlineReplica -> NewReplica" in str(info.value)
    change = PartitionChangeRecord(partition_id=0, topic_id=T, isr=(1,), adding_replicas=(2,))
    with pytest.raises(IllegalStateTransitionError):
        checked_change("t-0", before, change, LIVE, LIVE)


def test_checked_change_returns_the_merged_partition() -> None:
    before = _partition(replicas=(1, 2), isr=(1, 2))
    change = PartitionChangeRecord(partition_id=0, topic_id=T, isr=(1,))
    after = checked_change("t-0", before, change, LIVE, LIVE)
    assert after.isr == (1,) and after.replicas == (1, 2) and after.partition_epoch == 1


def test_a_replica_still_catching_up_stays_new_while_its_leader_moves() -> None:
    # New -> New is not in Kafka's table (its controller never commands it), but a replica
    # whose derived state did not change made no transition: the leader move is legal.
    before = _partition(replicas=(1, 2, 3), isr=(1, 2), adding_replicas=(3,))
    change = PartitionChangeRecord(partition_id=0, topic_id=T, leader=2)
    after = checked_change("t-0", before, change, LIVE, LIVE)
    assert after.leader == 2 and after.adding_replicas == (3,)
    assert replica_state(after, 3, LIVE) is ReplicaState.NEW
    caught_up = PartitionChangeRecord(partition_id=0, topic_id=T, isr=(1, 2, 3))
    assert checked_change("t-0", before, caught_up, LIVE, LIVE).isr == (1, 2, 3)  # New -> Online


def test_an_offline_replica_it_keeps_cannot_become_new() -> None:
    fenced_2 = _cluster(_broker(1), _broker(2, fenced=True), _broker(3))
    before = _partition(replicas=(1, 2), isr=(1,))
    after = _partition(replicas=(1, 2), isr=(1,), adding_replicas=(2,))
    with pytest.raises(IllegalStateTransitionError, match="OfflineReplica -> NewReplica"):
        check_change("t-0", before, after, fenced_2, fenced_2)
