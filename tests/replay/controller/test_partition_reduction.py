"""Partition reduction: delayed deletion through READ_ONLY and NONE, driven by a test clock."""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.service.service import SERVICE_PRINCIPAL, MetadataService
from records.model import (
    CancelTopicPartitionsDeletionRecord,
    ConfigResourceType,
    DeleteTopicPartitionsRecord,
    Mode,
    PartitionChangeRecord,
    PurgeTopicPartitionsRecord,
    Record,
)
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    BrokerAction,
    CancelPartitionDeletion,
    CancelPartitionDeletionResult,
    ConfigResource,
    CreatableTopic,
    CreateNamespace,
    CreatePartitionsTopic,
    DeleteNamespace,
    DeletePartitionsResult,
    DeletePartitionsTopic,
    MoveTopic,
    PurgeStep,
    Reassignment,
    RegisterBroker,
    TopicPartition,
    TopicRef,
)
from replay.controller.config_defs import CLUSTER_CONFIGS, validate_cluster_config
from replay.controller.config_values import InvalidConfigError
from replay.controller.controller import Controller, ControllerOptions
from replay.controller.errors import ErrorCode
from replay.controller.states import PartitionState, ReplicaState, partition_state, replica_state
from replay.image import TopicImage
from tests.support.cli import as_json, error, mlog, ok

T0 = 1_700_000_000_000
"""The test clock's start, ms since the epoch."""

MINUTE = 60_000


class Clock:
    """A clock the test moves by hand: no sleeping for the minutes a deletion waits."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def open_service(path: Path, clock: Clock) -> MetadataService:
    controller = Controller(
        options=ControllerOptions(fixed_start_index=0), rng=random.Random(1), clock_ms=clock
    )
    return MetadataService.open(path, controller=controller, clock_ms=clock)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def service(tmp_path: Path, clock: Clock) -> Iterator[MetadataService]:
    with open_service(tmp_path / "log", clock) as svc:
        for broker_id in (1, 2, 3):
            svc.execute(
                functools.partial(
                    svc.controller.register_broker, request=RegisterBroker(broker_id=broker_id)
                )
            )
        create_topic(svc, "orders", 6)
        enable(svc)
        yield svc


def create_topic(svc: MetadataService, name: str, partitions: int) -> None:
    request = CreatableTopic(name=name, num_partitions=partitions, replication_factor=2)
    (result,) = svc.execute(lambda image: svc.controller.create_topics(image, [request]))
    assert result.outcome.ok, result.outcome


def set_cluster(svc: MetadataService, name: str, value: str) -> None:
    resource = ConfigResource(type=ConfigResourceType.BROKER, name="")
    ops = [AlterConfig(name=name, op=AlterConfigOp.SET, value=value)]
    (result,) = svc.execute(
        lambda image: svc.controller.incremental_alter_configs(image, [(resource, ops)])
    )
    assert result.outcome.ok, result.outcome


def enable(svc: MetadataService) -> None:
    set_cluster(svc, "delete.topic.partition.enable", "true")


def reduce(
    svc: MetadataService, topic: str, count: int, delay_ms: int, *, validate_only: bool = False
) -> DeletePartitionsResult:
    request = DeletePartitionsTopic(topic=TopicRef(name=topic), count=count, delay_ms=delay_ms)
    (result,) = svc.execute(
        lambda image: svc.controller.delete_partitions(
            image, [request], validate_only=validate_only
        )
    )
    return result


def topic_of(svc: MetadataService, name: str = "orders") -> TopicImage:
    topic = svc.image.topics.get_by_name(name)
    assert topic is not None
    return topic


def modes(topic: TopicImage) -> list[Mode]:
    return [Mode(p.mode) for p in topic.partitions]


def appended(svc: MetadataService, before: int) -> list[Record]:
    return [e.record for e in svc.log.read(gt=before - 1)]


# ---------------------------------------------------------------------- configs


def test_the_cluster_keys_and_their_defaults() -> None:
    enable_def = CLUSTER_CONFIGS["delete.topic.partition.enable"]
    interval = CLUSTER_CONFIGS["delete.topic.partition.interval.delay.ms"]
    assert (enable_def.type.value, enable_def.default) == ("BOOLEAN", "false")
    assert (interval.type.value, interval.default) == ("LONG", "300000")
    assert validate_cluster_config("delete.topic.partition.interval.delay.ms", " 1000 ") == "1000"
    with pytest.raises(InvalidConfigError) as info:
        validate_cluster_config("delete.topic.partition.interval.delay.ms", "0")
    assert str(info.value) == (
        "Invalid value 0 for configuration delete.topic.partition.interval.delay.ms: Value "
        "must be at least 1"
    )


def test_a_decrease_is_refused_while_disabled(tmp_path: Path, clock: Clock) -> None:
    with open_service(tmp_path / "log", clock) as svc:
        svc.execute(
            functools.partial(svc.controller.register_broker, request=RegisterBroker(broker_id=1))
        )
        request = CreatableTopic(name="t", num_partitions=3, replication_factor=1)
        svc.execute(lambda image: svc.controller.create_topics(image, [request]))
        before = svc.log.end_offset
        result = reduce(svc, "t", 1, 0)
        assert result.outcome.error_code == ErrorCode.INVALID_PARTITIONS
        assert result.outcome.error_message == (
            "partition deletion is disabled; set delete.topic.partition.enable=true "
            "(`mlog configs alter --cluster --set delete.topic.partition.enable=true`)"
        )
        assert svc.log.end_offset == before
        assert len(topic_of(svc, "t").partitions) == 3


# ---------------------------------------------------------------------- the delayed deletion


def test_delayed_deletion_goes_read_only_then_none_then_is_gone(
    service: MetadataService, clock: Clock
) -> None:
    before = service.log.end_offset
    result = reduce(service, "orders", 4, 10 * MINUTE)
    assert result.outcome.ok
    assert result.removed == (4, 5)
    assert result.purge_at_ms == T0 + 10 * MINUTE and not result.immediate
    # One batch: the deletion record and a mode change per removed partition.
    topic_id = topic_of(service).topic_id
    assert appended(service, before) == [
        DeleteTopicPartitionsRecord(
            topic_id=topic_id, partition_count=4, delete_after_ms=T0 + 10 * MINUTE, created_ms=T0
        ),
        PartitionChangeRecord(partition_id=4, topic_id=topic_id, mode=Mode.READ_ONLY),
        PartitionChangeRecord(partition_id=5, topic_id=topic_id, mode=Mode.READ_ONLY),
    ]
    topic = topic_of(service)
    assert modes(topic) == [Mode.READ_WRITE] * 4 + [Mode.READ_ONLY] * 2
    assert topic.pending_deletion is not None
    cluster = service.image.cluster
    assert partition_state(topic.partitions[5], cluster) is PartitionState.ONLINE

    # Nothing is removed early: a check one ms before the purge time writes nothing.
    clock.advance(10 * MINUTE - 1)
    before = service.log.end_offset
    assert service.purge_due() == []
    assert service.log.end_offset == before
    assert modes(topic_of(service))[4:] == [Mode.READ_ONLY] * 2

    # At the purge time: NONE (neither readable nor writable), the partitions go Offline.
    clock.advance(1)
    (step,) = service.purge_due()
    assert (step.name, step.step, step.partitions) == ("orders", PurgeStep.MODE_NONE, (4, 5))
    assert appended(service, before) == [
        PartitionChangeRecord(partition_id=4, topic_id=topic_id, mode=Mode.NONE),
        PartitionChangeRecord(partition_id=5, topic_id=topic_id, mode=Mode.NONE),
    ]
    assert {e.principal for e in service.log.read(gt=before - 1)} == {SERVICE_PRINCIPAL}
    topic = topic_of(service)
    assert modes(topic) == [Mode.READ_WRITE] * 4 + [Mode.NONE] * 2
    assert len(topic.partitions) == 6 and topic.pending_deletion is not None
    removed = topic.partitions[4]
    assert partition_state(removed, cluster) is PartitionState.OFFLINE
    assert {replica_state(removed, b, cluster) for b in removed.replicas} == {ReplicaState.OFFLINE}

    # The next check removes them; the deletion is complete and ids stay contiguous.
    clock.advance(5 * MINUTE)
    before = service.log.end_offset
    (step,) = service.purge_due()
    assert (step.step, step.partitions) == (PurgeStep.REMOVED, (4, 5))
    assert appended(service, before) == [
        PurgeTopicPartitionsRecord(topic_id=topic_id, partition_count=4)
    ]
    topic = topic_of(service)
    assert [p.partition_id for p in topic.partitions] == [0, 1, 2, 3]
    assert modes(topic) == [Mode.READ_WRITE] * 4
    assert topic.pending_deletion is None and topic.topic_id == topic_id
    assert service.purge_due() == []


def cancel(svc: MetadataService, topic: str = "orders") -> CancelPartitionDeletionResult:
    request = CancelPartitionDeletion(topic=TopicRef(name=topic))
    (result,) = svc.execute(
        lambda image: svc.controller.cancel_partition_deletions(image, [request])
    )
    return result


def test_a_pending_deletion_is_cancelled_before_its_purge_time(
    service: MetadataService, clock: Clock, tmp_path: Path
) -> None:
    assert reduce(service, "orders", 4, 10 * MINUTE).outcome.ok
    topic_id = topic_of(service).topic_id
    clock.advance(10 * MINUTE - 1)
    before = service.log.end_offset
    result = cancel(service)
    assert result.outcome.ok and result.restored == (4, 5)
    assert appended(service, before) == [
        PartitionChangeRecord(partition_id=4, topic_id=topic_id, mode=Mode.READ_WRITE),
        PartitionChangeRecord(partition_id=5, topic_id=topic_id, mode=Mode.READ_WRITE),
        CancelTopicPartitionsDeletionRecord(topic_id=topic_id, partition_count=4),
    ]
    topic = topic_of(service)
    assert modes(topic) == [Mode.READ_WRITE] * 6 and topic.pending_deletion is None
    # Nothing is left to purge, and the topic takes partition changes again.
    clock.advance(MINUTE)
    assert service.purge_due() == []
    assert reduce(service, "orders", 5, 0).outcome.ok
    # A restart replays the cancel to the same image.
    image = service.image
    service.close()
    with open_service(tmp_path / "log", clock) as reopened:
        assert reopened.image.same_state(image)


def test_a_deletion_past_its_purge_time_cannot_be_cancelled(
    service: MetadataService, clock: Clock
) -> None:
    assert reduce(service, "orders", 4, 10 * MINUTE).outcome.ok
    clock.advance(10 * MINUTE)
    before = service.log.end_offset
    refused = cancel(service)
    assert refused.outcome.error_code == ErrorCode.INVALID_REQUEST
    assert refused.outcome.error_message == (
        f"The partition deletion of orders reached its purge time ({T0 + 10 * MINUTE} ms since "
        "the epoch) and cannot be cancelled; it completes at the next check of pending deletions"
    )
    assert service.log.end_offset == before
    service.purge_due()  # mode NONE
    assert cancel(service).outcome.error_code == ErrorCode.INVALID_REQUEST
    service.purge_due()  # removed
    nothing = cancel(service)
    assert nothing.outcome.error_message == (
        "Topic orders has no partition deletion pending; nothing to cancel"
    )
    missing = cancel(service, "nope")
    assert missing.outcome.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_immediate_deletion_removes_in_one_batch(service: MetadataService) -> None:
    before = service.log.end_offset
    result = reduce(service, "orders", 2, 0)
    assert result.outcome.ok and result.immediate and result.removed == (2, 3, 4, 5)
    topic_id = topic_of(service).topic_id
    entries = list(service.log.read(gt=before - 1))
    assert len({e.timestamp for e in entries}) == 1
    assert [e.record for e in entries] == [
        DeleteTopicPartitionsRecord(
            topic_id=topic_id, partition_count=2, delete_after_ms=T0, created_ms=T0
        ),
        *(
            PartitionChangeRecord(partition_id=p, topic_id=topic_id, mode=Mode.NONE)
            for p in (2, 3, 4, 5)
        ),
        PurgeTopicPartitionsRecord(topic_id=topic_id, partition_count=2),
    ]
    topic = topic_of(service)
    assert len(topic.partitions) == 2 and topic.pending_deletion is None


def test_restart_during_a_pending_deletion_resumes_from_the_log(
    service: MetadataService, clock: Clock, tmp_path: Path
) -> None:
    reduce(service, "orders", 3, MINUTE)
    pending_image = service.image
    service.close()

    # Restarted before the purge time: still READ_ONLY, nothing happens early.
    with open_service(tmp_path / "log", clock) as again:
        assert again.image.same_state(pending_image)
        assert again.purge_due() == []
        clock.advance(MINUTE)
        (step,) = again.purge_due()
        assert step.step == PurgeStep.MODE_NONE
        none_image = again.image

    # Restarted between NONE and the removal: the next check removes them.
    with open_service(tmp_path / "log", clock) as again:
        assert again.image.same_state(none_image)
        assert modes(topic_of(again))[3:] == [Mode.NONE] * 3
        (step,) = again.purge_due()
        assert step.step == PurgeStep.REMOVED
        done = again.image
    with open_service(tmp_path / "log", clock) as again:
        assert again.image.same_state(done)
        assert len(topic_of(again).partitions) == 3
        assert again.purge_due() == []


def test_deletions_of_several_topics_advance_independently(
    service: MetadataService, clock: Clock
) -> None:
    create_topic(service, "later", 3)
    reduce(service, "orders", 5, MINUTE)
    reduce(service, "later", 1, 3 * MINUTE)
    clock.advance(MINUTE)
    assert [(s.name, s.step) for s in service.purge_due()] == [("orders", PurgeStep.MODE_NONE)]
    clock.advance(MINUTE)
    assert [(s.name, s.step) for s in service.purge_due()] == [("orders", PurgeStep.REMOVED)]
    clock.advance(MINUTE)
    assert [(s.name, s.step, s.partitions) for s in service.purge_due()] == [
        ("later", PurgeStep.MODE_NONE, (1, 2))
    ]
    assert [(s.name, s.step) for s in service.purge_due()] == [("later", PurgeStep.REMOVED)]
    assert len(topic_of(service).partitions) == 5
    assert len(topic_of(service, "later").partitions) == 1


def test_a_deletion_survives_a_move_and_a_disabled_config(
    service: MetadataService, clock: Clock
) -> None:
    reduce(service, "orders", 4, MINUTE)
    service.execute(
        functools.partial(service.controller.create_namespace, request=CreateNamespace(name="org"))
    )
    move = MoveTopic(topic=TopicRef(name="orders"), to_namespace="org")
    service.execute(functools.partial(service.controller.move_topic, request=move))
    # Disabling the feature stops new decreases, not the ones already decided.
    set_cluster(service, "delete.topic.partition.enable", "false")
    clock.advance(MINUTE)
    assert [(s.name, s.step) for s in service.purge_due()] == [("org:orders", PurgeStep.MODE_NONE)]
    assert [s.step for s in service.purge_due()] == [PurgeStep.REMOVED]
    assert len(topic_of(service, "org:orders").partitions) == 4


def test_deleting_a_namespace_takes_its_pending_deletions_along(
    service: MetadataService, clock: Clock
) -> None:
    service.execute(
        functools.partial(service.controller.create_namespace, request=CreateNamespace(name="org"))
    )
    create_topic(service, "org:t", 3)
    reduce(service, "org:t", 1, MINUTE)
    service.execute(
        functools.partial(service.controller.delete_namespace, request=DeleteNamespace(name="org"))
    )
    clock.advance(MINUTE)
    assert service.purge_due() == []


# ---------------------------------------------------------------------- refusals


def test_other_partition_changes_are_refused_while_a_deletion_is_pending(
    service: MetadataService,
) -> None:
    reduce(service, "orders", 4, MINUTE)
    before = service.log.end_offset
    expected = (
        "The topic is currently under changes: orders is reducing to 4 partition(s), so {} is "
        "refused; retry after the deletion completes (`mlog topics describe` shows its purge "
        "time)"
    )
    again = reduce(service, "orders", 2, 0)
    assert again.outcome.error_code == ErrorCode.INVALID_PARTITIONS
    assert again.outcome.error_message == expected.format("another partition deletion")
    add = CreatePartitionsTopic(topic=TopicRef(name="orders"), count=8)
    (added,) = service.execute(lambda image: service.controller.create_partitions(image, [add]))
    assert added.outcome.error_code == ErrorCode.INVALID_PARTITIONS
    assert added.outcome.error_message == expected.format("adding partitions")
    move = Reassignment(
        partition=TopicPartition(topic=TopicRef(name="orders"), partition=0), replicas=(3, 1)
    )
    (moved,) = service.execute(lambda image: service.controller.alter_reassignments(image, [move]))
    assert moved.outcome.error_code == ErrorCode.INVALID_PARTITIONS
    assert moved.outcome.error_message == expected.format("a reassignment")
    assert service.log.end_offset == before


@pytest.mark.parametrize(
    ("topic", "count", "delay", "code", "message"),
    [
        (
            "orders",
            0,
            0,
            ErrorCode.INVALID_PARTITIONS,
            "Number of partitions was set to an invalid non-positive value.",
        ),
        (
            "orders",
            6,
            0,
            ErrorCode.INVALID_PARTITIONS,
            "The topic orders currently has 6 partition(s); 6 would not be a decrease.",
        ),
        (
            "orders",
            9,
            0,
            ErrorCode.INVALID_PARTITIONS,
            "The topic orders currently has 6 partition(s); 9 would not be a decrease.",
        ),
        (
            "orders",
            3,
            -1,
            ErrorCode.INVALID_REQUEST,
            "The partition deletion delay must be between 0 and 31536000000 ms (365 days), "
            "got -1; give it in milliseconds",
        ),
        (
            "orders",
            3,
            365 * 24 * 3600 * 1000 + 1,
            ErrorCode.INVALID_REQUEST,
            "The partition deletion delay must be between 0 and 31536000000 ms (365 days), "
            "got 31536000001; give it in milliseconds",
        ),
        (
            "orders",
            3,
            10**14,  # the year 5195
            ErrorCode.INVALID_REQUEST,
            "The partition deletion delay must be between 0 and 31536000000 ms (365 days), "
            "got 100000000000000; give it in milliseconds",
        ),
        (
            "orders",
            3,
            2**63 - T0,
            ErrorCode.INVALID_REQUEST,
            "The partition deletion delay must be between 0 and 31536000000 ms (365 days), "
            f"got {2**63 - T0}; give it in milliseconds",
        ),
        (
            "nope",
            1,
            0,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition: topic 'nope' does not exist",
        ),
    ],
)
def test_decrease_errors_append_nothing(  # noqa: PLR0917 - one parameter per table column
    service: MetadataService, topic: str, count: int, delay: int, code: ErrorCode, message: str
) -> None:
    before = service.log.end_offset
    result = reduce(service, topic, count, delay)
    assert (result.outcome.error_code, result.outcome.error_message) == (code, message)
    assert service.log.end_offset == before


def test_the_longest_delay_is_a_year(service: MetadataService) -> None:
    result = reduce(service, "orders", 3, 365 * 24 * 3600 * 1000)
    assert result.outcome.ok
    assert result.purge_at_ms == T0 + 365 * 24 * 3600 * 1000


def test_a_decrease_waits_for_a_reassignment(service: MetadataService) -> None:
    # A reassignment to a fenced broker stays in progress.
    service.execute(lambda image: service.controller.change_broker(image, 3, BrokerAction.FENCE))
    topic = topic_of(service)
    moving = next(p for p in topic.partitions if 3 not in p.replicas)
    move = Reassignment(
        partition=TopicPartition(topic=TopicRef(name="orders"), partition=moving.partition_id),
        replicas=(moving.replicas[0], 3),
    )
    (moved,) = service.execute(lambda image: service.controller.alter_reassignments(image, [move]))
    assert moved.outcome.ok
    before = service.log.end_offset
    result = reduce(service, "orders", 2, 0)
    assert result.outcome.error_code == ErrorCode.INVALID_PARTITIONS
    assert result.outcome.error_message == (
        f"The topic is currently under changes: partition(s) [{moving.partition_id}] of orders "
        "are being reassigned; wait for the reassignment or cancel it (`mlog partitions "
        "reassign --cancel`)"
    )
    assert service.log.end_offset == before


def test_a_decrease_waits_for_a_reassignment_that_only_adds(service: MetadataService) -> None:
    service.execute(lambda image: service.controller.change_broker(image, 3, BrokerAction.FENCE))
    moving = next(p for p in topic_of(service).partitions if 3 not in p.replicas)
    move = Reassignment(
        partition=TopicPartition(topic=TopicRef(name="orders"), partition=moving.partition_id),
        replicas=(*moving.replicas, 3),
    )
    (moved,) = service.execute(lambda image: service.controller.alter_reassignments(image, [move]))
    assert moved.outcome.ok
    partition = topic_of(service).partitions[moving.partition_id]
    assert partition.adding_replicas == (3,) and partition.removing_replicas == ()
    result = reduce(service, "orders", 2, 0)
    assert result.outcome.error_code == ErrorCode.INVALID_PARTITIONS
    assert "are being reassigned" in (result.outcome.error_message or "")


def test_a_topic_cancelled_twice_in_one_request_is_a_duplicate(service: MetadataService) -> None:
    assert reduce(service, "orders", 2, MINUTE).outcome.ok
    request = CancelPartitionDeletion(topic=TopicRef(name="orders"))
    results = service.execute(
        lambda image: service.controller.cancel_partition_deletions(image, [request, request])
    )
    assert [r.outcome.error_code for r in results] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
    assert results[1].outcome.error_message == "Duplicate topic in the request."


def test_validate_only_and_duplicates(service: MetadataService) -> None:
    before = service.log.end_offset
    result = reduce(service, "orders", 2, MINUTE, validate_only=True)
    assert result.outcome.ok and result.removed == (2, 3, 4, 5)
    assert service.log.end_offset == before
    request = DeletePartitionsTopic(topic=TopicRef(name="orders"), count=2, delay_ms=0)
    results = service.execute(
        lambda image: service.controller.delete_partitions(image, [request, request])
    )
    assert [r.outcome.error_code for r in results] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
    assert results[1].outcome.error_message == "Duplicate topic in the request."
    assert len(topic_of(service).partitions) == 2


# ---------------------------------------------------------------------- the scheduler loop


async def test_the_scheduler_checks_every_interval_until_done(
    service: MetadataService, clock: Clock
) -> None:
    set_cluster(service, "delete.topic.partition.interval.delay.ms", "60000")
    reduce(service, "orders", 4, 90_000)
    slept: list[float] = []
    observed: list[list[Mode]] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        observed.append(modes(topic_of(service)))
        clock.advance(int(seconds * 1000))

    await service.run_scheduler(sleep=fake_sleep, rounds=4)
    assert slept == [60.0, 60.0, 60.0]
    ro, rw, none = Mode.READ_ONLY, Mode.READ_WRITE, Mode.NONE
    assert observed == [
        [rw] * 4 + [ro] * 2,  # t=0: not due
        [rw] * 4 + [ro] * 2,  # t=60 s: not due (purge at 90 s)
        [rw] * 4 + [none] * 2,  # t=120 s: NONE
    ]
    assert modes(topic_of(service)) == [rw] * 4  # t=180 s: removed
    assert service.scheduler_interval_ms() == 60_000


async def test_purge_through_submit(service: MetadataService, clock: Clock) -> None:
    reduce(service, "orders", 5, 0)
    reduce_later = DeletePartitionsTopic(topic=TopicRef(name="orders"), count=4, delay_ms=10)
    await service.submit(lambda image: service.controller.delete_partitions(image, [reduce_later]))
    assert await service.purge_due_async() == []
    steps = await service.purge_due_async(now_ms=T0 + 10)
    assert [s.step for s in steps] == [PurgeStep.MODE_NONE]
    assert [s.step for s in await service.purge_due_async(now_ms=T0 + 10)] == [PurgeStep.REMOVED]
    assert len(topic_of(service).partitions) == 4


# ---------------------------------------------------------------------- CLI


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    for broker_id in (1, 2, 3):
        ok(tmp_path, "brokers", "register", "--id", str(broker_id))
    ok(tmp_path, "topics", "create", "--topic", "orders", "--partitions", "4")
    return tmp_path


def test_cli_alter_decrease_refused_then_immediate(
    cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    alter = ("topics", "alter", "--topic", "orders", "--partitions")
    err = error(cluster, capsys, *alter, "2", "--delete-partitions-delay", "0")
    assert err == (
        "mlog: error: INVALID_PARTITIONS (37): partition deletion is disabled; set "
        "delete.topic.partition.enable=true (`mlog configs alter --cluster --set "
        "delete.topic.partition.enable=true`)"
    )
    ok(cluster, "configs", "alter", "--cluster", "--set", "delete.topic.partition.enable=true")
    err = error(cluster, capsys, *alter, "2")
    assert err == (
        "mlog: error: lowering the partition count from 4 to 2 needs --delete-partitions-delay "
        "MS: how long the removed partitions stay readable (0 removes them at once)"
    )
    capsys.readouterr()
    code, _ = mlog(cluster, *alter, "2", "--delete-partitions-delay", "-5")
    assert code == 2
    assert "-5 is not a count (must be 0..9223372036854775807)" in capsys.readouterr().err
    assert "applies to a decrease only" in error(
        cluster, capsys, *alter, "6", "--delete-partitions-delay", "10"
    )
    text = ok(cluster, *alter, "3", "--delete-partitions-delay", "0")
    assert text.splitlines() == [
        "WARNING: If partitions are decreased for a topic that has a key, messages with a key "
        "will change partition: the partition logic maps keys over fewer partitions",
        "Removed partition(s) 3 of orders at once (mode NONE, then deleted)",
    ]
    assert as_json(cluster, "topics", "describe", "--topic", "orders")[0]["partition_count"] == 3
    text = ok(cluster, *alter, "5")
    assert text.splitlines() == [
        "WARNING: If partitions are increased for a topic that has a key, the partition logic "
        "or ordering of the messages will be affected",
        "Raised the partition count of orders from 3 to 5",
    ]
    assert "Topic already has 5 partition(s)." in error(cluster, capsys, *alter, "5")


def test_cli_delayed_decrease_is_shown_and_purged(
    cluster: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ok(cluster, "configs", "alter", "--cluster", "--set", "delete.topic.partition.enable=true")
    decided = as_json(
        cluster,
        "topics",
        "alter",
        "--topic",
        "orders",
        "--partitions",
        "2",
        "--delete-partitions-delay",
        str(10 * MINUTE),
    )
    assert decided["removed"] == [2, 3] and not decided["immediate"]
    purge_at = decided["purge_at"]
    described = as_json(cluster, "topics", "describe", "--topic", "orders")[0]
    assert described["pending_deletion"]["purge_at"] == purge_at
    assert [p["mode"] for p in described["partitions"]] == ["READ_WRITE"] * 2 + ["READ_ONLY"] * 2
    text = ok(cluster, "topics", "describe", "--topic", "orders")
    assert "PendingDeletion: partitions 2,3 (PartitionCount 4 -> 2)\tPurgeAt: " in text
    assert "Mode: READ_ONLY\tState: OnlinePartition" in text
    assert "under changes" in error(
        cluster, capsys, "topics", "add-partitions", "--topic", "orders", "--partitions", "6"
    )
    checked = as_json(cluster, "topics", "purge-pending")
    assert checked["steps"] == []
    assert checked["pending"][0]["partitions"] == [
        {"partition": 2, "mode": "READ_ONLY"},
        {"partition": 3, "mode": "READ_ONLY"},
    ]
    # Eleven minutes later (the wall clock the CLI reads, moved on): each writer checks.
    real_ns = time.time_ns
    monkeypatch.setattr(time, "time_ns", lambda: real_ns() + 11 * MINUTE * 1_000_000)
    capsys.readouterr()
    ok(cluster, "brokers", "register", "--id", "4")
    assert capsys.readouterr().err == (
        "mlog: pending partition deletion of orders: partition(s) 2,3 set to mode NONE\n"
    )
    described = as_json(cluster, "topics", "describe", "--topic", "orders")[0]
    assert [p["mode"] for p in described["partitions"]][2:] == ["NONE", "NONE"]
    assert [p["state"] for p in described["partitions"]][2:] == ["OfflinePartition"] * 2
    text = ok(cluster, "topics", "purge-pending")
    assert text == ("pending partition deletion of orders: partition(s) 2,3 removed\n")
    assert as_json(cluster, "topics", "describe", "--topic", "orders")[0]["partition_count"] == 2
    assert ok(cluster, "topics", "purge-pending") == "no pending partition deletion was due\n"


def test_cli_cancels_a_pending_deletion(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok(cluster, "configs", "alter", "--cluster", "--set", "delete.topic.partition.enable=true")
    ok(
        cluster,
        *("topics", "alter", "--topic", "orders", "--partitions", "2"),
        *("--delete-partitions-delay", "3600000"),
    )
    assert ok(cluster, "topics", "cancel-deletion", "--topic", "orders") == (
        "cancelled the pending partition deletion of orders: partition(s) 2,3 are READ_WRITE "
        "again\n"
    )
    (topic,) = as_json(cluster, "topics", "describe", "--topic", "orders")
    assert topic["pending_deletion"] is None
    assert [p["mode"] for p in topic["partitions"]] == ["READ_WRITE"] * 4
    capsys.readouterr()
    code, _ = mlog(cluster, "topics", "cancel-deletion", "--topic", "orders")
    assert code == 2
    assert "Topic orders has no partition deletion pending" in capsys.readouterr().err
