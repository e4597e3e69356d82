"""Leader elections: preferred and unclean, for named partitions or every partition."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.service.service import MetadataService
from records.model import NO_LEADER, PartitionChangeRecord, PartitionRecord
from replay.controller.commands import (
    BrokerAction,
    ControllerResult,
    CreatableTopic,
    ElectionType,
    PartitionResult,
    Reassignment,
    RegisterBroker,
    TopicPartition,
    TopicRef,
)
from replay.controller.controller import Controller, ControllerOptions
from replay.controller.errors import ErrorCode


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MetadataService]:
    controller = Controller(options=ControllerOptions(fixed_start_index=0), rng=random.Random(1))
    with MetadataService.open(tmp_path / "log", controller=controller) as svc:
        for broker_id in (1, 2, 3):
            request = RegisterBroker(broker_id=broker_id)
            svc.execute(lambda image, r=request: svc.controller.register_broker(image, r))  # type: ignore[misc]
        for name, replicas in (("a", (1, 2)), ("b", (2, 3))):
            topic = CreatableTopic(name=name, assignments=((0, replicas),))
            svc.execute(lambda image, t=topic: svc.controller.create_topics(image, [t]))  # type: ignore[misc]
        yield svc


def elect(svc: MetadataService, election: ElectionType, *names: str) -> list[PartitionResult]:
    asked = [TopicPartition(topic=TopicRef(name=n), partition=0) for n in names] or None
    return svc.execute(lambda image: svc.controller.elect_leaders(image, asked, election))


def partition(svc: MetadataService, name: str) -> PartitionRecord:
    topic = svc.image.topics.get_by_name(name)
    assert topic is not None
    return topic.partitions[0]


def fence(svc: MetadataService, broker_id: int) -> None:
    svc.execute(lambda image: svc.controller.change_broker(image, broker_id, BrokerAction.FENCE))


def test_electing_every_partition_answers_only_for_those_that_needed_it(
    service: MetadataService,
) -> None:
    assert elect(service, ElectionType.PREFERRED) == []  # every leader is preferred already
    fence(service, 1)
    service.execute(lambda image: service.controller.change_broker(image, 1, BrokerAction.UNFENCE))
    topic = service.image.topics.get_by_name("a")
    assert topic is not None
    rejoin = PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, isr=(2, 1))
    service.execute(lambda image: _records(rejoin))
    results = elect(service, ElectionType.PREFERRED)
    assert [(r.topic, r.partition, r.outcome.error_code) for r in results] == [
        ("a", 0, ErrorCode.NONE)
    ]
    assert partition(service, "a").leader == 1
    named = elect(service, ElectionType.PREFERRED, "a", "nope")
    assert [r.outcome.error_code for r in named] == [
        ErrorCode.ELECTION_NOT_NEEDED,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]


def test_an_unclean_election_takes_a_live_replica_outside_the_isr(
    service: MetadataService,
) -> None:
    fence(service, 2)
    fence(service, 3)
    assert (partition(service, "b").leader, partition(service, "b").isr) == (NO_LEADER, (3,))
    (not_needed,) = elect(service, ElectionType.UNCLEAN, "a")
    assert not_needed.outcome.error_code == ErrorCode.ELECTION_NOT_NEEDED
    (none_live,) = elect(service, ElectionType.UNCLEAN, "b")
    assert none_live.outcome.error_code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    service.execute(lambda image: service.controller.change_broker(image, 2, BrokerAction.UNFENCE))
    assert partition(service, "b").leader == NO_LEADER  # 2 is not in the ISR
    (elected,) = elect(service, ElectionType.UNCLEAN, "b")
    assert elected.outcome.error_code == ErrorCode.NONE
    assert (partition(service, "b").leader, partition(service, "b").isr) == (2, (2,))
    assert elect(service, ElectionType.UNCLEAN) == []


def _records(*records: PartitionChangeRecord) -> ControllerResult[None]:
    return ControllerResult(records=records, response=None)


def reassign(svc: MetadataService, name: str, replicas: tuple[int, ...] | None) -> PartitionResult:
    move = Reassignment(
        partition=TopicPartition(topic=TopicRef(name=name), partition=0), replicas=replicas
    )
    (result,) = svc.execute(lambda image: svc.controller.alter_reassignments(image, [move]))
    return result


def test_a_reassignment_that_only_adds_is_listed_and_cancelled(service: MetadataService) -> None:
    fence(service, 3)  # the added replica cannot catch up: the reassignment stays in progress
    assert reassign(service, "a", (1, 2, 3)).outcome.ok
    moving = partition(service, "a")
    assert (moving.replicas, moving.adding_replicas, moving.removing_replicas) == (
        (1, 2, 3),
        (3,),
        (),
    )
    listed = service.controller.list_reassignments(service.image)
    assert [(t.name, p.partition_id) for t, p in listed] == [("a", 0)]
    assert reassign(service, "a", None).outcome.ok
    back = partition(service, "a")
    assert (back.replicas, back.isr, back.adding_replicas) == ((1, 2), (1, 2), ())
    assert service.controller.list_reassignments(service.image) == []
    again = reassign(service, "a", None)
    assert again.outcome.error_code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_cancelling_keeps_only_original_replicas_in_the_isr(service: MetadataService) -> None:
    fence(service, 1)  # a's ISR is (2,), b's (2, 3)
    assert reassign(service, "b", (2, 3, 1)).outcome.ok  # 1 is fenced: in progress
    assert partition(service, "b").adding_replicas == (1,)
    assert reassign(service, "b", None).outcome.ok
    back = partition(service, "b")
    assert (back.replicas, back.isr, back.leader) == ((2, 3), (2, 3), 2)


def test_a_preferred_leader_must_be_in_the_isr_and_live(service: MetadataService) -> None:
    fence(service, 1)
    service.execute(lambda image: service.controller.change_broker(image, 1, BrokerAction.UNFENCE))
    assert partition(service, "a").isr == (2,)  # live again, not yet back in the ISR
    (result,) = elect(service, ElectionType.PREFERRED, "a")
    assert result.outcome.error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert partition(service, "a").leader == 2


def test_an_unclean_election_replaces_a_leader_that_is_not_live(service: MetadataService) -> None:
    # Registered again as fenced, broker 1 keeps leading `a` until something moves it.
    register = RegisterBroker(broker_id=1, fenced=True)
    service.execute(lambda image: service.controller.register_broker(image, register))
    assert partition(service, "a").leader == 1
    (result,) = elect(service, ElectionType.UNCLEAN, "a")
    assert result.outcome.error_code == ErrorCode.NONE
    assert (partition(service, "a").leader, partition(service, "a").isr) == (2, (2,))


def test_the_leader_is_fenced_while_an_added_replica_catches_up(service: MetadataService) -> None:
    # The adding replica stays New (not in the ISR) while leadership moves: no transition.
    fence(service, 3)
    assert reassign(service, "a", (1, 2, 3)).outcome.ok
    fence(service, 1)
    moved = partition(service, "a")
    assert (moved.leader, moved.isr, moved.adding_replicas) == (2, (2,), (3,))
