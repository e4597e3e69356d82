"""The controller and the service: Kafka's validation and error codes, records, restarts."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.service.service import MetadataService
from records.model import (
    ConfigResourceType,
    Mode,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from records.uuids import Uuid
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    BrokerAction,
    BrokerResult,
    ConfigResource,
    ControllerResult,
    CreatableTopic,
    CreatePartitionsTopic,
    ElectionType,
    PartitionResult,
    Reassignment,
    RegisterBroker,
    TopicPartition,
    TopicRef,
)
from replay.controller.config_defs import ConfigSource
from replay.controller.controller import Controller, ControllerOptions
from replay.controller.errors import (
    ApiError,
    ErrorCode,
    IllegalStateTransitionError,
    StorageError,
)
from replay.controller.states import (
    PARTITION_DELETION,
    REPLICA_DELETION,
    PartitionState,
    ReplicaState,
    check_partition_path,
    check_replica_path,
    partition_state,
)
from replay.image import MetadataImage


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MetadataService]:
    controller = Controller(options=ControllerOptions(fixed_start_index=0), rng=random.Random(1))
    with MetadataService.open(tmp_path / "log", controller=controller) as svc:
        for broker_id in range(1, 4):
            register(svc, broker_id, f"r{broker_id % 2}")
        yield svc


def register(svc: MetadataService, broker_id: int, rack: str | None = None) -> BrokerResult:
    request = RegisterBroker(broker_id=broker_id, rack=rack)
    return svc.execute(lambda image: svc.controller.register_broker(image, request))


def create(
    svc: MetadataService, *topics: CreatableTopic, validate_only: bool = False
) -> list[tuple[ErrorCode, str | None]]:
    results = svc.execute(
        lambda image: svc.controller.create_topics(image, topics, validate_only=validate_only)
    )
    return [(r.outcome.error_code, r.outcome.error_message) for r in results]


def appended_nothing(svc: MetadataService, before: int) -> bool:
    return svc.log.end_offset == before


# ---------------------------------------------------------------------- create topics


def test_creating_kraft_s_own_log_topic_is_refused(service: MetadataService) -> None:
    before = service.log.end_offset
    assert create(service, CreatableTopic(name="__cluster_metadata")) == [
        (ErrorCode.INVALID_REQUEST, "Creation of internal topic __cluster_metadata is prohibited.")
    ]
    assert appended_nothing(service, before)


def test_create_topic_writes_topic_partitions_and_configs(service: MetadataService) -> None:
    before = service.log.end_offset
    results = service.execute(
        lambda image: service.controller.create_topics(
            image,
            [
                CreatableTopic(
                    name="orders",
                    num_partitions=3,
                    replication_factor=2,
                    configs=(("retention.ms", "1000"),),
                )
            ],
        )
    )
    (result,) = results
    assert result.outcome.ok
    assert len(str(result.topic_id)) == 22
    records = [e.record for e in service.log.read(gt=before - 1)]
    assert isinstance(records[0], TopicRecord)
    assert sum(isinstance(r, PartitionRecord) for r in records) == 3
    topic = service.image.topics.get_by_name("orders")
    assert topic is not None and topic.topic_id == result.topic_id
    for partition in topic.partitions:
        assert len(partition.replicas) == 2
        assert partition.isr == partition.replicas
        assert partition.leader == partition.replicas[0]
        assert partition.leader_epoch == 0 and partition.partition_epoch == 0
        assert partition_state(partition, service.image.cluster) is PartitionState.ONLINE
    assert dict(service.image.configs.get(ConfigResourceType.TOPIC, "orders")) == {
        "retention.ms": "1000"
    }


def test_defaults_come_from_cluster_configs(service: MetadataService) -> None:
    service.execute(
        lambda image: service.controller.incremental_alter_configs(
            image,
            [
                (
                    ConfigResource(type=ConfigResourceType.BROKER, name=""),
                    [
                        AlterConfig(name="num.partitions", op=AlterConfigOp.SET, value="4"),
                        AlterConfig(
                            name="default.replication.factor", op=AlterConfigOp.SET, value="3"
                        ),
                    ],
                )
            ],
        )
    )
    assert create(service, CreatableTopic(name="d")) == [(ErrorCode.NONE, None)]
    topic = service.image.topics.get_by_name("d")
    assert topic is not None and len(topic.partitions) == 4
    assert all(len(p.replicas) == 3 for p in topic.partitions)


def test_manual_assignment(service: MetadataService) -> None:
    assignments = ((0, (1, 2)), (1, (2, 3)))
    assert create(service, CreatableTopic(name="m", assignments=assignments)) == [
        (ErrorCode.NONE, None)
    ]
    topic = service.image.topics.get_by_name("m")
    assert topic is not None
    assert [p.replicas for p in topic.partitions] == [(1, 2), (2, 3)]


def test_fenced_replicas_are_not_in_isr_nor_leader(service: MetadataService) -> None:
    service.execute(lambda image: service.controller.change_broker(image, 1, BrokerAction.FENCE))
    assert create(service, CreatableTopic(name="m", assignments=((0, (1, 2)),))) == [
        (ErrorCode.NONE, None)
    ]
    topic = service.image.topics.get_by_name("m")
    assert topic is not None
    (partition,) = topic.partitions
    assert partition.isr == (2,) and partition.leader == 2


@pytest.mark.parametrize(
    ("topic", "code", "message"),
    [
        (CreatableTopic(name=""), ErrorCode.INVALID_TOPIC_EXCEPTION, "can't be empty"),
        (CreatableTopic(name=".."), ErrorCode.INVALID_TOPIC_EXCEPTION, 'cannot be "." or ".."'),
        (CreatableTopic(name="a" * 250), ErrorCode.INVALID_TOPIC_EXCEPTION, "longer than 249"),
        (CreatableTopic(name="bad name!"), ErrorCode.INVALID_TOPIC_EXCEPTION, "ASCII"),
        (CreatableTopic(name="exists"), ErrorCode.TOPIC_ALREADY_EXISTS, "already exists"),
        (CreatableTopic(name="my_topic"), ErrorCode.INVALID_TOPIC_EXCEPTION, "collides"),
        (
            CreatableTopic(name="z", num_partitions=0),
            ErrorCode.INVALID_PARTITIONS,
            "non-positive",
        ),
        (
            CreatableTopic(name="z", num_partitions=-3),
            ErrorCode.INVALID_PARTITIONS,
            "non-positive",
        ),
        (
            CreatableTopic(name="z", num_partitions=2**31 - 1),
            ErrorCode.INVALID_PARTITIONS,
            "more than the 10,000 one request may create",
        ),
        (
            CreatableTopic(name="z", replication_factor=0),
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "larger than 0",
        ),
        (
            CreatableTopic(name="z", replication_factor=4),
            ErrorCode.INVALID_REPLICATION_FACTOR,
            "only 3 broker",
        ),
        (
            CreatableTopic(name="z", assignments=((0, (1, 9)),)),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "no such broker",
        ),
        (
            CreatableTopic(name="z", assignments=((0, (1, 1)),)),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "more than once",
        ),
        (
            CreatableTopic(name="z", assignments=((0, (1, 2)), (1, (3,)))),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "not consistent",
        ),
        (
            CreatableTopic(name="z", assignments=((0, (1,)), (2, (3,)))),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "consecutive",
        ),
        (
            CreatableTopic(name="z", assignments=((0, ()),)),
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "empty replica list",
        ),
        (
            CreatableTopic(name="z", num_partitions=2, assignments=((0, (1,)),)),
            ErrorCode.INVALID_REQUEST,
            "numPartitions",
        ),
        (
            CreatableTopic(name="z", configs=(("no.such.key", "1"),)),
            ErrorCode.INVALID_CONFIG,
            "no.such.key",
        ),
        (
            CreatableTopic(name="z", configs=(("retention.ms", "soon"),)),
            ErrorCode.INVALID_CONFIG,
            "retention.ms",
        ),
        (
            CreatableTopic(name="z", configs=(("retention.ms", None),)),
            ErrorCode.INVALID_CONFIG,
            "Null value",
        ),
        (
            CreatableTopic(name="ns:z"),
            ErrorCode.INVALID_REQUEST,
            "Namespace 'ns' does not exist",
        ),
    ],
)
def test_create_errors_append_nothing(
    service: MetadataService, topic: CreatableTopic, code: ErrorCode, message: str
) -> None:
    assert create(service, CreatableTopic(name="exists")) == [(ErrorCode.NONE, None)]
    assert create(service, CreatableTopic(name="my.topic")) == [(ErrorCode.NONE, None)]
    before = service.log.end_offset
    image = service.image
    ((got, text),) = create(service, topic)
    assert got == code
    assert text is not None and message in text
    assert appended_nothing(service, before)
    assert service.image is image


def test_one_failure_does_not_fail_the_others_and_duplicates_are_invalid_request(
    service: MetadataService,
) -> None:
    before = service.log.end_offset
    results = create(
        service,
        CreatableTopic(name="good", num_partitions=1),
        CreatableTopic(name="twice"),
        CreatableTopic(name="bad", replication_factor=9),
        CreatableTopic(name="twice"),
    )
    assert [code for code, _ in results] == [
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REPLICATION_FACTOR,
        ErrorCode.INVALID_REQUEST,
    ]
    assert results[1][1] == "Duplicate topic name."
    assert service.image.topics.get_by_name("good") is not None
    assert service.image.topics.get_by_name("twice") is None
    assert service.log.end_offset == before + 2  # the TopicRecord and one PartitionRecord


def test_names_colliding_within_one_batch(service: MetadataService) -> None:
    results = create(service, CreatableTopic(name="a.b"), CreatableTopic(name="a_b"))
    assert [code for code, _ in results] == [ErrorCode.NONE, ErrorCode.INVALID_TOPIC_EXCEPTION]


def test_validate_only_appends_nothing(service: MetadataService) -> None:
    before = service.log.end_offset
    assert create(service, CreatableTopic(name="v", num_partitions=2), validate_only=True) == [
        (ErrorCode.NONE, None)
    ]
    assert appended_nothing(service, before)
    assert service.image.topics.get_by_name("v") is None


# ---------------------------------------------------------------------- ids and deletion


def delete(svc: MetadataService, ref: TopicRef) -> tuple[ErrorCode, str | None]:
    (result,) = svc.execute(lambda image: svc.controller.delete_topics(image, [ref]))
    return result.outcome.error_code, result.outcome.error_message


def test_delete_by_name_or_id_and_recreate_gets_a_new_id(service: MetadataService) -> None:
    create(service, CreatableTopic(name="t", num_partitions=1))
    first = service.image.topics.get_by_name("t")
    assert first is not None
    assert delete(service, TopicRef(name="t")) == (ErrorCode.NONE, None)
    assert service.image.topics.get_by_name("t") is None
    create(service, CreatableTopic(name="t", num_partitions=1))
    second = service.image.topics.get_by_name("t")
    assert second is not None and second.topic_id != first.topic_id
    assert delete(service, TopicRef(topic_id=second.topic_id)) == (ErrorCode.NONE, None)
    assert service.image.topics.get(second.topic_id) is None


def test_delete_errors(service: MetadataService) -> None:
    create(service, CreatableTopic(name="t", num_partitions=1))
    topic = service.image.topics.get_by_name("t")
    assert topic is not None
    before = service.log.end_offset
    code, text = delete(service, TopicRef(name="nope"))
    assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and text and "nope" in text
    code, text = delete(service, TopicRef(topic_id=Uuid.random()))
    assert code == ErrorCode.UNKNOWN_TOPIC_ID and text and "topic ID" in text
    code, text = delete(service, TopicRef(name="t", topic_id=Uuid.random()))
    assert code == ErrorCode.INCONSISTENT_TOPIC_ID and text and "does not match" in text
    assert appended_nothing(service, before)


def test_topic_deletion_disabled(service: MetadataService) -> None:
    create(service, CreatableTopic(name="t", num_partitions=1))
    service.execute(
        lambda image: service.controller.incremental_alter_configs(
            image,
            [
                (
                    ConfigResource(type=ConfigResourceType.BROKER, name=""),
                    [AlterConfig(name="delete.topic.enable", op=AlterConfigOp.SET, value="false")],
                )
            ],
        )
    )
    before = service.log.end_offset
    code, text = delete(service, TopicRef(name="t"))
    assert code == ErrorCode.TOPIC_DELETION_DISABLED
    assert text and "delete.topic.enable=true" in text
    assert appended_nothing(service, before)


def test_topic_ids_are_never_reserved_nor_start_with_dash() -> None:
    for _ in range(2000):
        topic_id = Uuid.random()
        assert topic_id not in Uuid.RESERVED
        assert not str(topic_id).startswith("-")
        assert len(str(topic_id)) == 22


# ---------------------------------------------------------------------- partitions


def add_partitions(
    svc: MetadataService,
    name: str,
    count: int,
    assignments: tuple[tuple[int, ...], ...] | None = None,
) -> tuple[ErrorCode, str | None]:
    request = CreatePartitionsTopic(topic=TopicRef(name=name), count=count, assignments=assignments)
    (result,) = svc.execute(lambda image: svc.controller.create_partitions(image, [request]))
    return result.outcome.error_code, result.outcome.error_message


def test_add_partitions_places_like_kafka(service: MetadataService) -> None:
    create(service, CreatableTopic(name="grow", num_partitions=2, replication_factor=2))
    assert add_partitions(service, "grow", 5) == (ErrorCode.NONE, None)
    topic = service.image.topics.get_by_name("grow")
    assert topic is not None and len(topic.partitions) == 5
    assert all(len(p.replicas) == 2 and p.leader == p.replicas[0] for p in topic.partitions)


def test_add_partitions_errors(service: MetadataService) -> None:
    create(service, CreatableTopic(name="grow", num_partitions=2, replication_factor=2))
    before = service.log.end_offset
    code, text = add_partitions(service, "grow", 1)
    assert code == ErrorCode.INVALID_PARTITIONS and text and "would not be an increase" in text
    code, text = add_partitions(service, "grow", 2)
    assert code == ErrorCode.INVALID_PARTITIONS and text and "already has 2" in text
    code, text = add_partitions(service, "grow", 2**31 - 1)
    assert code == ErrorCode.INVALID_PARTITIONS and text and "create-partitions" in text
    code, text = add_partitions(service, "grow", 4, ((1, 2),))
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and text and "additional" in text
    code, text = add_partitions(service, "grow", 3, ((1, 7),))
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    code, text = add_partitions(service, "nope", 3)
    assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert appended_nothing(service, before)


def test_a_topic_named_twice_in_one_request_is_done_once(service: MetadataService) -> None:
    create(service, CreatableTopic(name="twice", num_partitions=1, replication_factor=1))
    topic = service.image.topics.get_by_name("twice")
    assert topic is not None
    by_name, by_id = TopicRef(name="twice"), TopicRef(topic_id=topic.topic_id)
    grow = [CreatePartitionsTopic(topic=ref, count=2) for ref in (by_name, by_id)]
    added = service.execute(
        lambda image: service.controller.create_partitions(image, grow, validate_only=False)
    )
    removed = service.execute(
        lambda image: service.controller.delete_topics(image, [by_id, by_name])
    )
    for results in (added, removed):
        assert [(r.outcome.error_code, r.outcome.error_message) for r in results] == [
            (ErrorCode.NONE, None),
            (ErrorCode.INVALID_REQUEST, "Duplicate topic in the request."),
        ]
    assert service.image.topics.get(topic.topic_id) is None


# ---------------------------------------------------------------------- configs


def alter(
    svc: MetadataService, resource: ConfigResource, *ops: AlterConfig
) -> tuple[ErrorCode, str | None]:
    (result,) = svc.execute(
        lambda image: svc.controller.incremental_alter_configs(image, [(resource, ops)])
    )
    return result.outcome.error_code, result.outcome.error_message


def test_describe_and_alter_topic_configs(service: MetadataService) -> None:
    create(service, CreatableTopic(name="c", num_partitions=1))
    topic = ConfigResource(type=ConfigResourceType.TOPIC, name="c")
    assert alter(
        service, topic, AlterConfig(name="retention.ms", op=AlterConfigOp.SET, value="5000")
    ) == (ErrorCode.NONE, None)
    configs = {c.name: c for c in service.controller.describe_configs(service.image, topic)}
    assert configs["retention.ms"].value == "5000"
    assert configs["retention.ms"].source == ConfigSource.TOPIC_CONFIG
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG
    assert alter(service, topic, AlterConfig(name="retention.ms", op=AlterConfigOp.DELETE)) == (
        ErrorCode.NONE,
        None,
    )
    configs = {c.name: c for c in service.controller.describe_configs(service.image, topic)}
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG
    assert alter(
        service, topic, AlterConfig(name="cleanup.policy", op=AlterConfigOp.APPEND, value="compact")
    ) == (ErrorCode.NONE, None)
    overrides = service.image.configs.get(ConfigResourceType.TOPIC, "c")
    assert overrides["cleanup.policy"] == "delete,compact"


def test_alter_config_errors_append_nothing(service: MetadataService) -> None:
    create(service, CreatableTopic(name="c", num_partitions=1))
    topic = ConfigResource(type=ConfigResourceType.TOPIC, name="c")
    before = service.log.end_offset
    code, _ = alter(service, topic, AlterConfig(name="nope", op=AlterConfigOp.SET, value="1"))
    assert code == ErrorCode.INVALID_CONFIG
    code, _ = alter(
        service, topic, AlterConfig(name="retention.ms", op=AlterConfigOp.SET, value="x")
    )
    assert code == ErrorCode.INVALID_CONFIG
    code, text = alter(
        service, topic, AlterConfig(name="retention.ms", op=AlterConfigOp.APPEND, value="1")
    )
    assert code == ErrorCode.INVALID_CONFIG and text and "not a list" in text
    missing = ConfigResource(type=ConfigResourceType.TOPIC, name="missing")
    code, _ = alter(
        service, missing, AlterConfig(name="retention.ms", op=AlterConfigOp.SET, value="1")
    )
    assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert appended_nothing(service, before)


# ---------------------------------------------------------------------- leaders, brokers


def elect(
    svc: MetadataService, name: str, partition: int, election: ElectionType = ElectionType.PREFERRED
) -> tuple[ErrorCode, str | None]:
    tp = TopicPartition(topic=TopicRef(name=name), partition=partition)
    (result,) = svc.execute(lambda image: svc.controller.elect_leaders(image, [tp], election))
    return result.outcome.error_code, result.outcome.error_message


def test_fence_moves_leadership_and_preferred_election_restores_it(
    service: MetadataService,
) -> None:
    create(service, CreatableTopic(name="e", assignments=((0, (1, 2)),)))
    before = service.log.end_offset
    code, text = elect(service, "e", 0)
    assert code == ErrorCode.ELECTION_NOT_NEEDED and text and "not needed" in text
    assert appended_nothing(service, before)
    service.execute(lambda image: service.controller.change_broker(image, 1, BrokerAction.FENCE))
    topic = service.image.topics.get_by_name("e")
    assert topic is not None
    assert topic.partitions[0].leader == 2 and topic.partitions[0].isr == (2,)
    assert topic.partitions[0].leader_epoch == 1
    code, text = elect(service, "e", 0)
    assert code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    service.execute(lambda image: service.controller.change_broker(image, 1, BrokerAction.UNFENCE))
    # Broker 1 rejoining the ISR is the leader's job (AlterPartition); simulate it.
    service.execute(
        lambda image: _records(
            PartitionChangeRecord(partition_id=0, topic_id=topic.topic_id, isr=(2, 1))
        )
    )
    assert elect(service, "e", 0) == (ErrorCode.NONE, None)
    after = service.image.topics.get_by_name("e")
    assert after is not None and after.partitions[0].leader == 1
    code, _ = elect(service, "e", 5)
    assert code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _records(*records: PartitionChangeRecord) -> ControllerResult[None]:
    return ControllerResult(records=records, response=None)


def test_broker_errors(service: MetadataService) -> None:
    before = service.log.end_offset
    with pytest.raises(ApiError) as info:
        service.execute(
            lambda image: service.controller.change_broker(image, 42, BrokerAction.FENCE)
        )
    assert info.value.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED
    assert appended_nothing(service, before)


def test_unregister_and_reregister(service: MetadataService) -> None:
    first = service.image.cluster.get(3)
    assert first is not None
    service.execute(
        lambda image: service.controller.change_broker(image, 3, BrokerAction.UNREGISTER)
    )
    assert service.image.cluster.get(3) is None
    service.execute(
        lambda image: service.controller.register_broker(image, RegisterBroker(broker_id=3))
    )
    second = service.image.cluster.get(3)
    assert second is not None and second.broker_epoch > first.broker_epoch
    assert second.incarnation_id != first.incarnation_id


# ---------------------------------------------------------------------- reassignment


def test_reassignment_moves_replicas(service: MetadataService) -> None:
    create(service, CreatableTopic(name="r", assignments=((0, (1, 2)),)))
    request = Reassignment(
        partition=TopicPartition(topic=TopicRef(name="r"), partition=0), replicas=(2, 3)
    )
    (result,) = service.execute(
        lambda image: service.controller.alter_reassignments(image, [request])
    )
    assert result.outcome.ok
    topic = service.image.topics.get_by_name("r")
    assert topic is not None
    partition = topic.partitions[0]
    assert partition.replicas == (2, 3)
    assert partition.leader == 2 and set(partition.isr) == {2, 3}
    assert partition.adding_replicas == () and partition.removing_replicas == ()
    changes = [
        e.record
        for e in service.log.read(gt=service.log.end_offset - 3)
        if isinstance(e.record, PartitionChangeRecord)
    ]
    assert changes[0].adding_replicas == (3,) and changes[0].removing_replicas == (1,)


def test_reassignment_to_a_fenced_broker_stays_in_progress_and_can_be_cancelled(
    service: MetadataService,
) -> None:
    create(service, CreatableTopic(name="r", assignments=((0, (1, 2)),)))
    service.execute(lambda image: service.controller.change_broker(image, 3, BrokerAction.FENCE))
    tp = TopicPartition(topic=TopicRef(name="r"), partition=0)
    service.execute(
        lambda image: service.controller.alter_reassignments(
            image, [Reassignment(partition=tp, replicas=(1, 3))]
        )
    )
    topic = service.image.topics.get_by_name("r")
    assert topic is not None and topic.partitions[0].adding_replicas == (3,)
    assert topic.replication_factor == 2  # replicas 1,3,2 minus the adding 3, as Kafka shows
    assert len(service.controller.list_reassignments(service.image)) == 1
    (result,) = service.execute(
        lambda image: service.controller.alter_reassignments(
            image, [Reassignment(partition=tp, replicas=None)]
        )
    )
    assert result.outcome.ok
    topic = service.image.topics.get_by_name("r")
    assert topic is not None and topic.partitions[0].replicas == (1, 2)
    (again,) = service.execute(
        lambda image: service.controller.alter_reassignments(
            image, [Reassignment(partition=tp, replicas=None)]
        )
    )
    assert again.outcome.error_code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_reassignment_to_the_current_replicas_is_a_success_that_writes_nothing(
    service: MetadataService,
) -> None:
    create(service, CreatableTopic(name="r", assignments=((0, (1, 2)),)))
    tp = TopicPartition(topic=TopicRef(name="r"), partition=0)
    before = service.log.end_offset
    (result,) = service.execute(
        lambda image: service.controller.alter_reassignments(
            image, [Reassignment(partition=tp, replicas=(1, 2))]
        )
    )
    assert result.outcome.ok
    assert appended_nothing(service, before)


def test_a_new_target_replaces_a_reassignment_in_progress(service: MetadataService) -> None:
    create(service, CreatableTopic(name="r", assignments=((0, (1, 2)),)))
    register(service, 4)
    service.execute(lambda image: service.controller.change_broker(image, 3, BrokerAction.FENCE))
    tp = TopicPartition(topic=TopicRef(name="r"), partition=0)

    def reassign(replicas: tuple[int, ...]) -> PartitionResult:
        (result,) = service.execute(
            lambda image: service.controller.alter_reassignments(
                image, [Reassignment(partition=tp, replicas=replicas)]
            )
        )
        return result

    assert reassign((1, 3)).outcome.ok
    topic = service.image.topics.get_by_name("r")
    assert topic is not None
    assert topic.partitions[0].replicas == (1, 3, 2)
    assert topic.partitions[0].adding_replicas == (3,)
    # Another target while broker 3 is still catching up: Kafka counts adding and removing
    # against the replicas as they stand ([1, 3, 2]) and completes at once, since 4 is live.
    assert reassign((2, 4)).outcome.ok
    topic = service.image.topics.get_by_name("r")
    assert topic is not None
    partition = topic.partitions[0]
    assert partition.replicas == (2, 4)
    assert partition.adding_replicas == () and partition.removing_replicas == ()
    assert set(partition.isr) == {2, 4} and partition.leader in (2, 4)
    assert service.controller.list_reassignments(service.image) == []


def test_a_new_target_that_still_waits_replaces_the_old_one(service: MetadataService) -> None:
    create(service, CreatableTopic(name="r", assignments=((0, (1, 2)),)))
    register(service, 4)
    service.execute(lambda image: service.controller.change_broker(image, 3, BrokerAction.FENCE))
    service.execute(lambda image: service.controller.change_broker(image, 4, BrokerAction.FENCE))
    tp = TopicPartition(topic=TopicRef(name="r"), partition=0)
    first, second = (Reassignment(partition=tp, replicas=t) for t in ((1, 3), (1, 4)))
    (result,) = service.execute(
        lambda image: service.controller.alter_reassignments(image, [first])
    )
    assert result.outcome.ok
    (result,) = service.execute(
        lambda image: service.controller.alter_reassignments(image, [second])
    )
    assert result.outcome.ok
    topic = service.image.topics.get_by_name("r")
    assert topic is not None
    partition = topic.partitions[0]
    assert partition.replicas == (1, 4, 2, 3)
    assert partition.adding_replicas == (4,)
    assert partition.removing_replicas == (2, 3)


# ---------------------------------------------------------------------- states


def test_illegal_transitions_raise() -> None:
    with pytest.raises(IllegalStateTransitionError, match="NonExistentPartition -> Online"):
        check_partition_path("t-0", (PartitionState.NON_EXISTENT, PartitionState.ONLINE))
    with pytest.raises(IllegalStateTransitionError, match="OnlinePartition -> NonExistent"):
        check_partition_path("t-0", (PartitionState.ONLINE, PartitionState.NON_EXISTENT))
    with pytest.raises(IllegalStateTransitionError):
        check_replica_path("t-0", (ReplicaState.ONLINE, ReplicaState.DELETION_STARTED))
    check_partition_path(
        "t-0",
        (PartitionState.NON_EXISTENT, PartitionState.NEW, PartitionState.ONLINE),
    )


def test_creation_and_deletion_are_legal_from_every_derivable_state() -> None:
    # `check_change` returns at once for a created or deleted partition; this is why. An
    # existing partition derives New, Online or Offline, and so does each of its replicas.
    existing = (PartitionState.NEW, PartitionState.ONLINE, PartitionState.OFFLINE)
    # A new one enters New and, unless it stays there, moves on to Online or Offline.
    for state in existing:
        check_partition_path("deleted", (state, *PARTITION_DELETION))
        if state is not PartitionState.NEW:
            path = (PartitionState.NON_EXISTENT, PartitionState.NEW, state)
            check_partition_path("created", path)
    check_partition_path("created", (PartitionState.NON_EXISTENT, PartitionState.NEW))
    for replica in (ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.OFFLINE):
        steps = REPLICA_DELETION if replica is not ReplicaState.OFFLINE else REPLICA_DELETION[1:]
        check_replica_path("deleted", (replica, *steps))
        if replica is not ReplicaState.NEW:
            check_replica_path("created", (ReplicaState.NON_EXISTENT, ReplicaState.NEW, replica))
    check_replica_path("created", (ReplicaState.NON_EXISTENT, ReplicaState.NEW))


def test_states_follow_brokers(service: MetadataService) -> None:
    create(service, CreatableTopic(name="s", assignments=((0, (1,)),)))
    service.execute(lambda image: service.controller.change_broker(image, 1, BrokerAction.FENCE))
    topic = service.image.topics.get_by_name("s")
    assert topic is not None
    assert partition_state(topic.partitions[0], service.image.cluster) is PartitionState.OFFLINE
    assert topic.partitions[0].mode == Mode.READ_WRITE


# ---------------------------------------------------------------------- service


def test_restart_gives_an_identical_image(tmp_path: Path) -> None:
    controller = Controller(rng=random.Random(3))
    with MetadataService.open(tmp_path / "log", controller=controller) as svc:
        for b in range(4):
            register(svc, b, f"r{b % 2}")
        for i in range(30):
            create(svc, CreatableTopic(name=f"t{i}", num_partitions=3, replication_factor=2))
        delete(svc, TopicRef(name="t3"))
        svc.execute(lambda image: svc.controller.change_broker(image, 2, BrokerAction.FENCE))
        written = list(svc.image.write())
        live: MetadataImage = svc.image
    with MetadataService.open(tmp_path / "log") as again:
        assert list(again.image.write()) == written
        assert again.image.provenance.offset == live.provenance.offset


async def test_concurrent_submits_are_group_committed_and_ordered(tmp_path: Path) -> None:
    svc = MetadataService.open(tmp_path / "log", controller=Controller(rng=random.Random(5)))
    try:
        await svc.submit(
            lambda image: svc.controller.register_broker(image, RegisterBroker(broker_id=0))
        )

        async def one(i: int) -> ErrorCode:
            (result,) = await svc.submit(
                lambda image: svc.controller.create_topics(
                    image, [CreatableTopic(name=f"c{i % 40}", num_partitions=1)]
                )
            )
            return result.outcome.error_code

        codes = await asyncio.gather(*(one(i) for i in range(80)))
        assert codes.count(ErrorCode.NONE) == 40
        assert codes.count(ErrorCode.TOPIC_ALREADY_EXISTS) == 40
        assert len(svc.image.topics) == 40
        entries = list(svc.log.read())
        assert sum(isinstance(e.record, TopicRecord) for e in entries) == 40
    finally:
        await svc.aclose()


async def test_the_committed_image_carries_the_time_the_log_wrote(tmp_path: Path) -> None:
    """The service stamps an image when it accepts records, the log when it writes them; the
    committed image takes the log's time, so a restart replays the very same image."""
    ticks = itertools.count(1_800_000_000_000)  # every clock read is a millisecond later
    svc = MetadataService.open(tmp_path / "log", clock_ms=lambda: next(ticks))
    try:
        register(svc, 0, None)
        assert svc.image.provenance.timestamp == list(svc.log.read())[-1].timestamp

        async def one(i: int) -> None:
            await svc.submit(
                lambda image: svc.controller.create_topics(image, [CreatableTopic(name=f"s{i}")])
            )

        await asyncio.gather(*(one(i) for i in range(20)))  # group-committed blocks
        last = list(svc.log.read())[-1]
        assert svc.image.provenance.offset == last.offset
        assert svc.image.provenance.timestamp == last.timestamp
        live = svc.image
    finally:
        await svc.aclose()
    with MetadataService.open(tmp_path / "log") as again:
        assert again.image == live


async def test_a_failed_append_refuses_writes_with_a_storage_error(tmp_path: Path) -> None:
    svc = MetadataService.open(tmp_path / "log")
    try:

        def broken(records: object, *, principal: str | None = None) -> object:
            raise OSError(28, "No space left on device")

        svc.log.append = broken  # type: ignore[attr-defined]  # simulate a full disk
        committed = svc.image
        with pytest.raises(StorageError, match="ENOSPC"):
            svc.execute(
                lambda image: svc.controller.register_broker(image, RegisterBroker(broker_id=0))
            )
        assert svc.stopped and svc.image is committed
        with pytest.raises(StorageError, match="re-opens the log") as refused:
            svc.execute(
                lambda image: svc.controller.register_broker(image, RegisterBroker(broker_id=1))
            )
        assert refused.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    finally:
        svc.close()


def test_remove_topic_record_is_what_delete_appends(service: MetadataService) -> None:
    create(service, CreatableTopic(name="x", num_partitions=1))
    delete(service, TopicRef(name="x"))
    last = list(service.log.read(gt=service.log.end_offset - 2))[-1].record
    assert isinstance(last, RemoveTopicRecord)
