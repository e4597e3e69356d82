"""Broker commands: what a registration may hold, and the leaders and ISRs a broker takes along."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.service.service import MetadataService
from records.model import NO_LEADER, BrokerEndpoint, PartitionRecord, Record
from replay.controller import brokers
from replay.controller.commands import (
    BrokerAction,
    BrokerResult,
    ControllerResult,
    CreatableTopic,
    Reassignment,
    RegisterBroker,
    TopicPartition,
    TopicRef,
)
from replay.controller.controller import Controller, ControllerOptions
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.states import is_live
from replay.delta import MetadataDelta
from replay.image import MetadataImage, Provenance, broker_index


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MetadataService]:
    controller = Controller(options=ControllerOptions(fixed_start_index=0), rng=random.Random(1))
    with MetadataService.open(tmp_path / "log", controller=controller) as svc:
        yield svc


def register(svc: MetadataService, request: RegisterBroker) -> BrokerResult:
    return svc.execute(lambda image: svc.controller.register_broker(image, request))


def act(svc: MetadataService, broker_id: int, action: BrokerAction) -> BrokerResult:
    return svc.execute(lambda image: svc.controller.change_broker(image, broker_id, action))


def partition(svc: MetadataService, name: str) -> PartitionRecord:
    topic = svc.image.topics.get_by_name(name)
    assert topic is not None
    return topic.partitions[0]


def refused(svc: MetadataService, request: RegisterBroker) -> str:
    before = svc.log.end_offset
    with pytest.raises(ApiError) as info:
        register(svc, request)
    assert info.value.error_code == ErrorCode.INVALID_REQUEST
    assert svc.log.end_offset == before
    return info.value.message


def endpoint(host: str = "h", port: int = 9092, protocol: int = 0) -> BrokerEndpoint:
    return BrokerEndpoint(name="PLAINTEXT", host=host, port=port, security_protocol=protocol)


def test_broker_ids_span_int32_from_zero(service: MetadataService) -> None:
    assert register(service, RegisterBroker(broker_id=0)).broker_id == 0
    assert register(service, RegisterBroker(broker_id=2**31 - 1)).broker_id == 2**31 - 1
    for bad in (-1, 2**31):
        assert "broker id must be in 0..2147483647" in refused(
            service, RegisterBroker(broker_id=bad)
        )


@pytest.mark.parametrize("port", [1, 65535])
def test_ports_span_1_to_65535(service: MetadataService, port: int) -> None:
    register(service, RegisterBroker(broker_id=1, endpoints=(endpoint(port=port),)))
    broker = service.image.cluster.get(1)
    assert broker is not None and broker.end_points[0].port == port


@pytest.mark.parametrize("port", [0, 65536, -1, True])
def test_a_port_outside_1_to_65535_is_refused(service: MetadataService, port: int) -> None:
    message = refused(service, RegisterBroker(broker_id=1, endpoints=(endpoint(port=port),)))
    assert "is not HOST:PORT with a port in 1..65535" in message


def test_endpoints_are_checked_one_by_one(service: MetadataService) -> None:
    twice = (endpoint(), endpoint())
    assert "is given twice" in refused(service, RegisterBroker(broker_id=1, endpoints=twice))
    register(service, RegisterBroker(broker_id=1, endpoints=(endpoint(), endpoint(port=9093))))
    bad_name = BrokerEndpoint(name="PLAIN\nTEXT", host="h", port=1)
    assert "a listener name" in refused(service, RegisterBroker(broker_id=2, endpoints=(bad_name,)))
    protocol = (endpoint(protocol=-1),)
    assert "security protocol" in refused(service, RegisterBroker(broker_id=2, endpoints=protocol))
    register(service, RegisterBroker(broker_id=2, endpoints=(endpoint(protocol=2**15 - 1),)))


def test_the_broker_epoch_is_the_offset_of_the_registration(service: MetadataService) -> None:
    first = register(service, RegisterBroker(broker_id=1))
    assert first.broker_epoch == service.log.end_offset - 1
    again = register(service, RegisterBroker(broker_id=1))
    assert again.broker_epoch == service.log.end_offset - 1 > first.broker_epoch
    broker = service.image.cluster.get(1)
    assert broker is not None and broker.broker_epoch == again.broker_epoch


def _two_brokers_with(service: MetadataService, *topics: CreatableTopic) -> None:
    """Brokers 1 and 2 registered, then `topics` created in one request."""
    for broker_id in (1, 2):
        register(service, RegisterBroker(broker_id=broker_id))
    service.execute(lambda image: service.controller.create_topics(image, list(topics)))


def test_fencing_moves_leadership_and_unfencing_brings_it_back(service: MetadataService) -> None:
    _two_brokers_with(service, CreatableTopic(name="t", assignments=((0, (1, 2)),)))
    service.execute(
        lambda image: service.controller.create_topics(
            image, [CreatableTopic(name="u", assignments=((0, (2,)),))]
        )
    )
    fenced = act(service, 1, BrokerAction.FENCE)
    assert fenced.partitions_changed == 1  # t's leader moved; u never held broker 1
    assert (partition(service, "t").leader, partition(service, "t").isr) == (2, (2,))
    again = act(service, 1, BrokerAction.FENCE)
    assert again.changed is False and again.partitions_changed == 0
    act(service, 2, BrokerAction.FENCE)
    assert (partition(service, "t").leader, partition(service, "t").isr) == (NO_LEADER, (2,))
    assert (partition(service, "u").leader, partition(service, "u").isr) == (NO_LEADER, (2,))
    back = act(service, 1, BrokerAction.UNFENCE)
    assert back.partitions_changed == 0  # broker 1 is in no ISR
    back = act(service, 2, BrokerAction.UNFENCE)
    assert back.partitions_changed == 2 and back.changed is True
    assert partition(service, "t").leader == 2 and partition(service, "u").leader == 2


def test_an_unfenced_registration_elects_where_it_is_in_the_isr(service: MetadataService) -> None:
    register(service, RegisterBroker(broker_id=1))
    service.execute(
        lambda image: service.controller.create_topics(
            image, [CreatableTopic(name="t", assignments=((0, (1,)),))]
        )
    )
    act(service, 1, BrokerAction.FENCE)
    assert partition(service, "t").leader == NO_LEADER
    fenced_again = register(service, RegisterBroker(broker_id=1, fenced=True))
    assert fenced_again.partitions_changed == 0 and partition(service, "t").leader == NO_LEADER
    back = register(service, RegisterBroker(broker_id=1))
    assert back.partitions_changed == 1 and partition(service, "t").leader == 1


def test_a_broker_in_controlled_shutdown_is_not_unfenced(service: MetadataService) -> None:
    register(service, RegisterBroker(broker_id=1, fenced=True))
    act(service, 1, BrokerAction.CONTROLLED_SHUTDOWN)
    assert act(service, 1, BrokerAction.CONTROLLED_SHUTDOWN).changed is False
    with pytest.raises(ApiError) as info:
        act(service, 1, BrokerAction.UNFENCE)
    assert info.value.error_code == ErrorCode.INVALID_REQUEST
    assert "register it again" in info.value.message


def test_a_follower_leaves_the_isr_and_a_last_member_stays(service: MetadataService) -> None:
    _two_brokers_with(service, CreatableTopic(name="t", assignments=((0, (1, 2)),)))
    assert act(service, 2, BrokerAction.FENCE).partitions_changed == 1  # the ISR only
    assert (partition(service, "t").leader, partition(service, "t").isr) == (1, (1,))
    act(service, 1, BrokerAction.FENCE)
    assert (partition(service, "t").leader, partition(service, "t").isr) == (NO_LEADER, (1,))
    gone = act(service, 1, BrokerAction.UNREGISTER)
    assert gone.partitions_changed == 0  # the last member stays, leaderless: nothing to write
    assert service.image.cluster.get(1) is None


def moves_in_batches(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    monkeypatch.setattr("replay.controller.brokers.records_per_batch", lambda: size)


def held(svc: MetadataService, broker_id: int) -> set[tuple[str, int]]:
    return {(topic.name, p.partition_id) for topic, p in svc.image.topics.partitions_of(broker_id)}


def test_the_broker_index_follows_creation_reassignment_and_deletion(
    service: MetadataService,
) -> None:
    for broker_id in (1, 2, 3, 4):
        register(service, RegisterBroker(broker_id=broker_id))
    service.execute(
        lambda image: service.controller.create_topics(
            image,
            [
                CreatableTopic(name="a", assignments=((0, (1, 2)), (1, (2, 3)))),
                CreatableTopic(name="b", assignments=((0, (3, 4)),)),
            ],
        )
    )
    assert held(service, 2) == {("a", 0), ("a", 1)}
    assert held(service, 4) == {("b", 0)}
    a = service.image.topics.get_by_name("a")
    assert a is not None
    ref = TopicRef(name="a")
    service.execute(
        lambda image: service.controller.alter_reassignments(
            image, [Reassignment(partition=TopicPartition(topic=ref, partition=1), replicas=(4,))]
        )
    )
    assert held(service, 4) == {("a", 1), ("b", 0)}
    assert held(service, 3) == {("b", 0)}
    service.execute(lambda image: service.controller.delete_topics(image, [TopicRef(name="b")]))
    assert held(service, 3) == set() and 3 not in service.image.topics.by_broker
    topics = service.image.topics
    assert topics.by_broker == broker_index(topics.by_id)


def test_a_fence_writes_its_moves_in_bounded_batches(
    service: MetadataService, monkeypatch: pytest.MonkeyPatch
) -> None:
    for broker_id in (1, 2, 3):
        register(service, RegisterBroker(broker_id=broker_id))
    service.execute(
        lambda image: service.controller.create_topics(
            image,
            [
                CreatableTopic(name="t", num_partitions=12, replication_factor=2),
                CreatableTopic(name="u", num_partitions=3, replication_factor=1),
            ],
        )
    )
    mine = [p for _, p in service.image.topics.partitions_of(1) if p.leader == 1 or len(p.isr) > 1]
    moves_in_batches(monkeypatch, 3)
    sizes: list[int] = []
    append = service.log.append  # type: ignore[attr-defined]  # a MetadataLog here

    def counted(records: Any, **kwargs: Any) -> Any:
        sizes.append(len(records))
        return append(records, **kwargs)

    monkeypatch.setattr(service.log, "append", counted)
    result = act(service, 1, BrokerAction.FENCE)
    assert result.partitions_changed == len(mine) > 3
    assert len(sizes) > 1 and max(sizes) <= 3 and sum(sizes) == 1 + len(mine)
    for _, p in service.image.topics.partitions_of(1):
        assert p.leader != 1 and (1 not in p.isr or p.isr == (1,))


def test_other_commands_are_answered_between_the_batches_of_a_fence(
    service: MetadataService, monkeypatch: pytest.MonkeyPatch
) -> None:
    _two_brokers_with(service, CreatableTopic(name="t", num_partitions=20, replication_factor=2))
    moves_in_batches(monkeypatch, 2)

    async def both() -> tuple[int, int]:
        fence = asyncio.ensure_future(
            service.submit(
                lambda image: service.controller.change_broker(image, 1, BrokerAction.FENCE)
            )
        )
        await asyncio.sleep(0)
        await service.submit(
            lambda image: service.controller.create_topics(
                image, [CreatableTopic(name="x", num_partitions=1, replication_factor=1)]
            )
        )
        created = service.image.provenance.offset
        await fence
        return created, service.image.provenance.offset

    created, fenced = asyncio.run(both())
    assert created < fenced  # the new topic went in while the fence was still moving leaders
    assert all(p.leader == 2 for p in service.image.topics.get_by_name("t").partitions)  # type: ignore[union-attr]


def replayed(image: MetadataImage, records: tuple[Record, ...]) -> MetadataImage:
    delta = MetadataDelta(image)
    delta.replay_all(records)
    delta.finish_batch()
    last = image.provenance.offset + len(records)
    return delta.apply(Provenance(offset=last, epoch=1, timestamp=0))


def batches(
    image: MetadataImage, result: ControllerResult[BrokerResult], between: Any = None
) -> tuple[MetadataImage, list[int]]:
    """Every batch of `result` replayed in turn (`between` may change the image before each)."""
    image = replayed(image, result.records)
    sizes = [len(result.records)]
    more = result.more
    while more is not None:
        if between is not None:
            image = between(image)
        step = more(image)
        image = replayed(image, step.records)
        sizes.append(len(step.records))
        more = step.more
    return image, sizes


def test_each_batch_looks_at_a_bounded_share_of_the_brokers_partitions(
    service: MetadataService, monkeypatch: pytest.MonkeyPatch
) -> None:
    _two_brokers_with(service, CreatableTopic(name="t", num_partitions=30, replication_factor=2))
    act(service, 1, BrokerAction.FENCE)  # broker 1 leaves every ISR: unfencing elects nowhere
    moves_in_batches(monkeypatch, 2)
    looked: list[int] = []
    elected = brokers._elected

    def counted(*args: Any) -> Any:
        looked[-1] += 1
        return elected(*args)

    monkeypatch.setattr("replay.controller.brokers._elected", counted)
    looked.append(0)
    result = service.controller.change_broker(service.image, 1, BrokerAction.UNFENCE)
    image = replayed(service.image, result.records)
    more = result.more
    while more is not None:
        looked.append(0)
        step = more(image)
        assert step.records == ()
        more = step.more
    budget = 2 * brokers.SCANS_PER_MOVE
    assert sum(looked) == 30 and len(looked) > 1 and max(looked) <= budget
    assert result.response.partitions_changed == 0
    assert is_live(image.cluster, 1)


def test_a_topic_deleted_between_batches_is_skipped_and_the_count_is_of_every_batch(
    service: MetadataService, monkeypatch: pytest.MonkeyPatch
) -> None:
    _two_brokers_with(
        service,
        *(CreatableTopic(name=name, num_partitions=4, replication_factor=2) for name in "abc"),
    )
    moves_in_batches(monkeypatch, 3)
    deleted: list[str] = []

    def delete_one(image: MetadataImage) -> MetadataImage:
        if deleted:
            return image
        # A topic the walk has not finished: broker 1 is still in an ISR of it.
        name = next(t.name for t in image.topics.sorted() if any(1 in p.isr for p in t.partitions))
        deleted.append(name)
        return replayed(
            image, service.controller.delete_topics(image, [TopicRef(name=name)]).records
        )

    result = service.controller.change_broker(service.image, 1, BrokerAction.FENCE)
    image, sizes = batches(service.image, result, between=delete_one)
    assert deleted and image.topics.get_by_name(deleted[0]) is None
    assert result.response.partitions_changed == sum(sizes) - 1 < 12
    for topic in image.topics.sorted():
        assert all(p.leader != 1 and 1 not in p.isr for p in topic.partitions)
