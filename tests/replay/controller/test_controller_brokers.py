"""Broker commands: what a registration may hold, and the leaders and ISRs a broker takes along."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.service.service import MetadataService
from records.model import NO_LEADER, BrokerEndpoint, PartitionRecord
from replay.controller.commands import (
    BrokerAction,
    BrokerResult,
    CreatableTopic,
    RegisterBroker,
)
from replay.controller.controller import Controller, ControllerOptions
from replay.controller.errors import ApiError, ErrorCode


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


def test_fencing_moves_leadership_and_unfencing_brings_it_back(service: MetadataService) -> None:
    for broker_id in (1, 2):
        register(service, RegisterBroker(broker_id=broker_id))
    service.execute(
        lambda image: service.controller.create_topics(
            image, [CreatableTopic(name="t", assignments=((0, (1, 2)),))]
        )
    )
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
    for broker_id in (1, 2):
        register(service, RegisterBroker(broker_id=broker_id))
    service.execute(
        lambda image: service.controller.create_topics(
            image, [CreatableTopic(name="t", assignments=((0, (1, 2)),))]
        )
    )
    assert act(service, 2, BrokerAction.FENCE).partitions_changed == 1  # the ISR only
    assert (partition(service, "t").leader, partition(service, "t").isr) == (1, (1,))
    act(service, 1, BrokerAction.FENCE)
    assert (partition(service, "t").leader, partition(service, "t").isr) == (NO_LEADER, (1,))
    gone = act(service, 1, BrokerAction.UNREGISTER)
    assert gone.partitions_changed == 0  # the last member stays, leaderless: nothing to write
    assert service.image.cluster.get(1) is None
