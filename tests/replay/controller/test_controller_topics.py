"""Topic commands at their bounds: replication factors, partition counts, fenced assignments."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.service.service import MetadataService
from records.uuids import Uuid
from replay.controller.commands import (
    BrokerAction,
    CreatableTopic,
    CreatePartitionsTopic,
    RegisterBroker,
    TopicRef,
)
from replay.controller.controller import Controller, ControllerOptions
from replay.controller.errors import ErrorCode
from replay.controller.topics import MAX_PARTITIONS_PER_REQUEST


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MetadataService]:
    controller = Controller(options=ControllerOptions(fixed_start_index=0), rng=random.Random(1))
    with MetadataService.open(tmp_path / "log", controller=controller) as svc:
        for broker_id in range(1, 4):
            request = RegisterBroker(broker_id=broker_id)
            svc.execute(lambda image, r=request: svc.controller.register_broker(image, r))  # type: ignore[misc]
        yield svc


def create(
    svc: MetadataService, topic: CreatableTopic, *, validate_only: bool = False
) -> tuple[ErrorCode, str]:
    (result,) = svc.execute(
        lambda image: svc.controller.create_topics(image, [topic], validate_only=validate_only)
    )
    return result.outcome.error_code, result.outcome.error_message or ""


def grow(
    svc: MetadataService, name: str, count: int, assignments: tuple[tuple[int, ...], ...] | None
) -> tuple[ErrorCode, str]:
    request = CreatePartitionsTopic(topic=TopicRef(name=name), count=count, assignments=assignments)
    (result,) = svc.execute(lambda image: svc.controller.create_partitions(image, [request]))
    return result.outcome.error_code, result.outcome.error_message or ""


def sized(name: str, partitions: int, factor: int) -> CreatableTopic:
    return CreatableTopic(name=name, num_partitions=partitions, replication_factor=factor)


def fence(svc: MetadataService, broker_id: int) -> None:
    svc.execute(lambda image: svc.controller.change_broker(image, broker_id, BrokerAction.FENCE))


@pytest.mark.parametrize("factor", [0, -2, -(2**15)])
def test_a_replication_factor_below_one_is_refused(service: MetadataService, factor: int) -> None:
    code, text = create(
        service, CreatableTopic(name="t", num_partitions=1, replication_factor=factor)
    )
    assert code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert text.startswith("Replication factor must be larger than 0")


def test_a_replication_factor_beyond_int16_is_refused_before_counting_brokers(
    service: MetadataService,
) -> None:
    code, text = create(
        service, CreatableTopic(name="t", num_partitions=1, replication_factor=2**15)
    )
    assert code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert text.startswith("Replication factor 32768 is more than 32767")
    code, text = create(
        service, CreatableTopic(name="t", num_partitions=1, replication_factor=2**15 - 1)
    )
    assert code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert text.startswith("Unable to replicate the partition 32767 time(s)")


def test_as_many_replicas_as_usable_brokers_and_no_more(service: MetadataService) -> None:
    assert create(service, CreatableTopic(name="t", num_partitions=1, replication_factor=3))[0] == (
        ErrorCode.NONE
    )
    code, text = create(service, CreatableTopic(name="u", num_partitions=1, replication_factor=4))
    assert code == ErrorCode.INVALID_REPLICATION_FACTOR and "only 3 broker(s)" in text


def test_the_partition_limit_of_one_request_is_inclusive(service: MetadataService) -> None:
    code, _ = create(
        service,
        CreatableTopic(name="big", num_partitions=MAX_PARTITIONS_PER_REQUEST, replication_factor=1),
        validate_only=True,
    )
    assert code == ErrorCode.NONE
    code, text = create(
        service,
        CreatableTopic(
            name="big", num_partitions=MAX_PARTITIONS_PER_REQUEST + 1, replication_factor=1
        ),
        validate_only=True,
    )
    assert code == ErrorCode.INVALID_PARTITIONS
    assert text.startswith(f"{MAX_PARTITIONS_PER_REQUEST + 1} partitions in one request")


def test_a_manual_assignment_over_the_partition_limit_is_refused(service: MetadataService) -> None:
    assignments = tuple((i, (1,)) for i in range(MAX_PARTITIONS_PER_REQUEST + 1))
    code, text = create(service, CreatableTopic(name="m", assignments=assignments))
    assert code == ErrorCode.INVALID_PARTITIONS
    assert "partitions in one request" in text


def test_a_manual_assignment_of_only_fenced_brokers_is_refused(service: MetadataService) -> None:
    fence(service, 2)
    code, text = create(service, CreatableTopic(name="m", assignments=((0, (1,)), (1, (2,)))))
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "partition 1 are fenced or in controlled shutdown" in text
    assert create(service, CreatableTopic(name="m", assignments=((0, (2, 1)),)))[0] == (
        ErrorCode.NONE
    )
    topic = service.image.topics.get_by_name("m")
    assert topic is not None and topic.partitions[0].isr == (1,) and topic.partitions[0].leader == 1


def test_a_config_given_twice_is_refused(service: MetadataService) -> None:
    topic = CreatableTopic(
        name="c",
        num_partitions=1,
        replication_factor=1,
        configs=(("retention.ms", "1000"), ("retention.ms", "2000")),
    )
    code, text = create(service, topic)
    assert code == ErrorCode.INVALID_CONFIG and "given twice" in text


def test_added_partitions_take_assignments_for_exactly_the_new_ones(
    service: MetadataService,
) -> None:
    create(service, CreatableTopic(name="g", num_partitions=2, replication_factor=1))
    assert grow(service, "g", 3, ((3,),)) == (ErrorCode.NONE, "")
    code, text = grow(service, "g", 5, ((3,),))
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert "add 2 additional partition(s), but only 1" in text
    topic = service.image.topics.get_by_name("g")
    assert topic is not None and topic.partitions[2].replicas == (3,)


def test_added_partitions_need_as_many_usable_brokers_as_replicas(
    service: MetadataService,
) -> None:
    create(service, CreatableTopic(name="g", num_partitions=1, replication_factor=2))
    fence(service, 3)
    assert grow(service, "g", 2, None) == (ErrorCode.NONE, "")
    fence(service, 2)
    code, text = grow(service, "g", 3, None)
    assert code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert "Unable to replicate the partition 2 time(s): only 1 broker(s)" in text
    code, text = grow(service, "g", 3 + MAX_PARTITIONS_PER_REQUEST, None)
    assert code == ErrorCode.INVALID_PARTITIONS


def test_a_refused_deletion_names_the_topic_as_asked(service: MetadataService) -> None:
    unknown = Uuid.random()
    results = service.execute(
        lambda image: service.controller.delete_topics(
            image, [TopicRef(name="nope"), TopicRef(topic_id=unknown)]
        )
    )
    assert [(r.name, r.topic_id) for r in results] == [("nope", Uuid.ZERO), (None, unknown)]
    assert [r.outcome.error_code for r in results] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
    ]


def test_a_manual_assignment_leaves_the_counts_to_it(service: MetadataService) -> None:
    with_factor = CreatableTopic(name="m", replication_factor=1, assignments=((0, (1,)),))
    code, text = create(service, with_factor)
    assert code == ErrorCode.INVALID_REQUEST and "replication factor was not set to -1" in text
    with_count = CreatableTopic(name="m", num_partitions=1, assignments=((0, (1,)),))
    code, text = create(service, with_count)
    assert code == ErrorCode.INVALID_REQUEST and "numPartitions was not set to -1" in text


def test_a_decrease_with_assignments_is_not_an_increase(service: MetadataService) -> None:
    create(service, sized("one", 1, 1))
    code, text = grow(service, "one", 0, ((1,),))
    assert code == ErrorCode.INVALID_PARTITIONS and "0 would not be an increase" in text
    assert grow(service, "one", 2, ((2,),)) == (ErrorCode.NONE, "")
    code, text = grow(service, "one", 3, ((1, 2),))
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
