"""Validation is complete before the log: whatever the controller accepts, the codec can encode.

Every command is driven with extreme values (0, -1, the int16/int32/int64 bounds and one past
them, 10^6-character strings, control characters, NUL, a lone surrogate). The controller may
refuse (an `ApiError` with a Kafka code, its message short even when it quotes a huge value);
if it accepts, every record it produced must encode with the log's codec.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.client import AdminClient, RemoteError
from api.client.connection import ClientError
from records.codec import DEFAULT_CODEC
from records.model import BrokerEndpoint, ConfigResourceType
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    BrokerAction,
    ConfigResource,
    ControllerResult,
    CreatableTopic,
    CreateNamespace,
    CreatePartitionsTopic,
    DeleteNamespace,
    DeletePartitionsTopic,
    ElectionType,
    MoveTopic,
    Reassignment,
    RegisterBroker,
    TopicPartition,
    TopicRef,
)
from replay.controller.controller import Controller, ControllerOptions
from replay.controller.errors import ApiError, ErrorCode
from replay.delta import MetadataDelta
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance
from tests.support.server_thread import running_server

NOW_MS = 1_700_000_000_000
MAX_MESSAGE = 1_000
"""An error message never quotes more than this (a name can be 10^6 characters long)."""

INTS = st.sampled_from(
    [
        0,
        -1,
        1,
        2,
        3,
        2**15 - 1,
        2**15,
        2**31 - 1,
        2**31,
        -(2**31),
        -(2**31) - 1,
        2**63 - 1,
        2**63,
        -(2**63) - 1,
        2**64,
    ]
)
TEXTS = st.sampled_from(
    [
        "t",
        "u",
        "ns",
        "",
        "x" * 10**6,
        "x" * 249,
        "x" * 250,
        "a\x00b",
        "a\x01b",
        "a\nb",
        "a\tb",
        "\x7f",
        "é",
        "\ud800",
        "ns:t",
        "retention.ms",
        "cleanup.policy",
        "delete.topic.partition.enable",
    ]
) | st.text(max_size=4)
OPTIONAL_TEXTS = st.none() | TEXTS
BROKER_IDS = st.sampled_from([1, 2, 3]) | INTS
TOPIC_REFS = st.builds(TopicRef, name=st.sampled_from(["t", "ns:u"]) | TEXTS)


def _apply(image: MetadataImage, result: ControllerResult[Any]) -> MetadataImage:
    if not result.records:
        return image
    delta = MetadataDelta(image)
    delta.replay_all(result.records)
    last = image.provenance.offset + len(result.records)
    return delta.apply(Provenance(offset=last, epoch=1, timestamp=NOW_MS))


def _controller(first_id: int = 1) -> Controller:
    counter = itertools.count(first_id)

    def new_id() -> Any:
        from records.uuids import Uuid

        return Uuid(bytes=next(counter).to_bytes(16, "big"))

    return Controller(
        options=ControllerOptions(fixed_start_index=0), new_id=new_id, clock_ms=lambda: NOW_MS
    )


def _base_image() -> MetadataImage:
    """Three brokers, a namespace, a topic in it and one outside, partition deletion enabled."""
    controller = _controller()
    image = EMPTY_IMAGE
    for broker_id in (1, 2, 3):
        image = _apply(
            image, controller.register_broker(image, RegisterBroker(broker_id=broker_id))
        )
    image = _apply(image, controller.create_namespace(image, CreateNamespace(name="ns")))
    topics = [
        CreatableTopic(name="t", num_partitions=3, replication_factor=2),
        CreatableTopic(name="ns:u", num_partitions=2, replication_factor=3),
    ]
    image = _apply(image, controller.create_topics(image, topics))
    enable = AlterConfig(name="delete.topic.partition.enable", op=AlterConfigOp.SET, value="true")
    cluster = ConfigResource(type=ConfigResourceType.BROKER, name="")
    return _apply(image, controller.incremental_alter_configs(image, [(cluster, [enable])]))


BASE = _base_image()

Command = Callable[[Controller, MetadataImage], ControllerResult[Any]]

endpoints = st.builds(BrokerEndpoint, name=TEXTS, host=TEXTS, port=INTS, security_protocol=INTS)
register = st.builds(
    RegisterBroker,
    broker_id=BROKER_IDS,
    rack=OPTIONAL_TEXTS,
    endpoints=st.lists(endpoints, max_size=2).map(tuple),
    fenced=st.booleans(),
)
creatable = st.builds(
    CreatableTopic,
    name=TEXTS,
    num_partitions=INTS,
    replication_factor=INTS,
    assignments=st.lists(
        st.tuples(INTS, st.lists(BROKER_IDS, max_size=3).map(tuple)), max_size=2
    ).map(tuple),
    configs=st.lists(st.tuples(TEXTS, OPTIONAL_TEXTS), max_size=2).map(tuple),
)
alter = st.builds(
    AlterConfig, name=TEXTS, op=st.sampled_from(list(AlterConfigOp)), value=OPTIONAL_TEXTS
)
resources = st.builds(ConfigResource, type=st.sampled_from(list(ConfigResourceType)), name=TEXTS)
partitions = st.builds(TopicPartition, topic=TOPIC_REFS, partition=INTS)

COMMANDS: dict[str, st.SearchStrategy[Command]] = {
    "register_broker": register.map(lambda r: lambda c, i: c.register_broker(i, r)),
    "change_broker": st.tuples(BROKER_IDS, st.sampled_from(list(BrokerAction))).map(
        lambda a: lambda c, i: c.change_broker(i, a[0], a[1])
    ),
    "create_topics": st.lists(creatable, min_size=1, max_size=2).map(
        lambda ts: lambda c, i: c.create_topics(i, ts)
    ),
    "delete_topics": st.lists(TOPIC_REFS, min_size=1, max_size=2).map(
        lambda rs: lambda c, i: c.delete_topics(i, rs)
    ),
    "create_partitions": st.builds(
        CreatePartitionsTopic,
        topic=TOPIC_REFS,
        count=INTS,
        assignments=st.none()
        | st.lists(st.lists(BROKER_IDS, max_size=3).map(tuple), max_size=2).map(tuple),
    ).map(lambda r: lambda c, i: c.create_partitions(i, [r])),
    "incremental_alter_configs": st.tuples(resources, st.lists(alter, max_size=2)).map(
        lambda ch: lambda c, i: c.incremental_alter_configs(i, [ch])
    ),
    "create_namespace": TEXTS.map(
        lambda n: lambda c, i: c.create_namespace(i, CreateNamespace(name=n))
    ),
    "delete_namespace": st.tuples(TEXTS, st.booleans()).map(
        lambda a: lambda c, i: c.delete_namespace(i, DeleteNamespace(name=a[0], recursive=a[1]))
    ),
    "move_topic": st.tuples(TOPIC_REFS, TEXTS).map(
        lambda a: lambda c, i: c.move_topic(i, MoveTopic(topic=a[0], to_namespace=a[1]))
    ),
    "delete_partitions": st.builds(
        DeletePartitionsTopic, topic=TOPIC_REFS, count=INTS, delay_ms=INTS
    ).map(lambda r: lambda c, i: c.delete_partitions(i, [r])),
    "purge_partitions": INTS.map(lambda now: lambda c, i: c.purge_partitions(i, now)),
    "elect_leaders": st.tuples(
        st.none() | st.lists(partitions, max_size=2), st.sampled_from(list(ElectionType))
    ).map(lambda a: lambda c, i: c.elect_leaders(i, a[0], a[1])),
    "alter_reassignments": st.builds(
        Reassignment,
        partition=partitions,
        replicas=st.none() | st.lists(BROKER_IDS, max_size=3).map(tuple),
    ).map(lambda r: lambda c, i: c.alter_reassignments(i, [r])),
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_whatever_the_controller_accepts_encodes(name: str) -> None:
    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(command=COMMANDS[name])
    def check(command: Command) -> None:
        try:
            result = command(_controller(first_id=1_000), BASE)
        except ApiError as exc:
            assert len(str(exc)) <= MAX_MESSAGE, str(exc)[:200]
            return
        answers = result.response if isinstance(result.response, list) else [result.response]
        for answer in answers:
            outcome = getattr(answer, "outcome", None)
            if outcome is not None:
                assert len(outcome.error_message or "") <= MAX_MESSAGE
        if result.records:
            DEFAULT_CODEC.encode_batches(
                [(result.records, "User:test")],
                first_offset=BASE.provenance.offset + 1,
                epoch=1,
                timestamp=NOW_MS,
            )

    check()


def _code(call: Callable[[], ControllerResult[Any]]) -> ErrorCode:
    """The error code of a refused command: raised, or in its one answer's outcome."""
    try:
        result = call()
    except ApiError as exc:
        return exc.error_code
    (answer,) = result.response if isinstance(result.response, list) else [result.response]
    assert not result.records, result.records
    return ErrorCode(answer.outcome.error_code)


T = TopicRef(name="t")


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda c: c.register_broker(BASE, RegisterBroker(broker_id=2**31)), "INVALID_REQUEST"),
        (lambda c: c.register_broker(BASE, RegisterBroker(broker_id=-1)), "INVALID_REQUEST"),
        (
            lambda c: c.register_broker(BASE, RegisterBroker(broker_id=9, rack="r\x1b[31m")),
            "INVALID_REQUEST",
        ),
        (
            lambda c: c.register_broker(
                BASE,
                RegisterBroker(
                    broker_id=9, endpoints=(BrokerEndpoint(name="P", host="h\x00", port=1),)
                ),
            ),
            "INVALID_REQUEST",
        ),
        (
            lambda c: c.register_broker(
                BASE,
                RegisterBroker(
                    broker_id=9,
                    endpoints=(
                        BrokerEndpoint(name="P", host="h", port=1),
                        BrokerEndpoint(name="Q", host="h", port=1),
                    ),
                ),
            ),
            "INVALID_REQUEST",
        ),
        (
            lambda c: c.create_topics(BASE, [CreatableTopic(name="z", num_partitions=2**31)]),
            "INVALID_PARTITIONS",
        ),
        (
            lambda c: c.create_topics(
                BASE, [CreatableTopic(name="z", num_partitions=1, replication_factor=32768)]
            ),
            "INVALID_REPLICATION_FACTOR",
        ),
        (
            lambda c: c.create_topics(
                BASE, [CreatableTopic(name="z", assignments=((0, (2**31,)),))]
            ),
            "INVALID_REPLICA_ASSIGNMENT",
        ),
        (
            lambda c: c.create_partitions(BASE, [CreatePartitionsTopic(topic=T, count=2**31)]),
            "INVALID_PARTITIONS",
        ),
        (
            lambda c: c.elect_leaders(
                BASE, [TopicPartition(topic=T, partition=2**31)], ElectionType.PREFERRED
            ),
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        (
            lambda c: c.alter_reassignments(
                BASE,
                [Reassignment(partition=TopicPartition(topic=T, partition=2**31), replicas=(1,))],
            ),
            "UNKNOWN_TOPIC_OR_PARTITION",
        ),
        (
            lambda c: c.alter_reassignments(
                BASE,
                [Reassignment(partition=TopicPartition(topic=T, partition=0), replicas=(1, 2**31))],
            ),
            "INVALID_REPLICA_ASSIGNMENT",
        ),
        (
            lambda c: c.delete_partitions(
                BASE, [DeletePartitionsTopic(topic=T, count=1, delay_ms=2**63)]
            ),
            "INVALID_REQUEST",
        ),
        (
            lambda c: c.create_namespace(BASE, CreateNamespace(name="x" * 10**6)),
            "INVALID_REQUEST",
        ),
        (lambda c: c.create_namespace(BASE, CreateNamespace(name="a\x00")), "INVALID_REQUEST"),
        (
            lambda c: c.create_topics(BASE, [CreatableTopic(name="x" * 10**6)]),
            "INVALID_TOPIC_EXCEPTION",
        ),
    ],
)
def test_values_a_record_cannot_hold_get_kafkas_error_code(
    call: Callable[[Controller], ControllerResult[Any]], code: str
) -> None:
    assert _code(lambda: call(_controller(first_id=1_000))) == ErrorCode[code]


def test_an_error_quoting_a_huge_name_is_short() -> None:
    with pytest.raises(ApiError) as refused:
        _controller().move_topic(
            BASE, MoveTopic(topic=TopicRef(name="y" * 100_000), to_namespace="ns")
        )
    assert len(str(refused.value)) <= MAX_MESSAGE
    assert "100000 characters" in str(refused.value)


async def _client_checks(address: str) -> None:
    async with await AdminClient.connect(address) as client:
        await client.create_topics([CreatableTopic(name="t", num_partitions=1)])
        t = TopicRef(name="t")
        for call, what in [
            (client.create_topics([CreatableTopic(name="z", num_partitions=2**31)]), "2147483648"),
            (
                client.create_topics(
                    [CreatableTopic(name="z", num_partitions=1, replication_factor=32768)]
                ),
                "32768",
            ),
            (
                client.create_topics([CreatableTopic(name="z", assignments=((0, (2**31,)),))]),
                "broker id 2147483648",
            ),
            (client.create_partitions([CreatePartitionsTopic(topic=t, count=2**31)]), "2147483648"),
            (
                client.elect_leaders(
                    [TopicPartition(topic=t, partition=2**31)], ElectionType.PREFERRED
                ),
                "partition 2147483648",
            ),
            (
                client.alter_partition_reassignments(
                    [Reassignment(partition=TopicPartition(topic=t, partition=2**31), replicas=())]
                ),
                "partition 2147483648",
            ),
            (
                client.alter_partition_reassignments(
                    [
                        Reassignment(
                            partition=TopicPartition(topic=t, partition=0), replicas=(2**31,)
                        )
                    ]
                ),
                "broker id 2147483648",
            ),
        ]:
            with pytest.raises(ClientError, match=what):
                await call
        # Values the wire carries but a record cannot: the server refuses them, and goes on.
        with pytest.raises(RemoteError) as refused:
            await client.register_broker(RegisterBroker(broker_id=2**31))
        assert refused.value.error_code == ErrorCode.INVALID_REQUEST
        with pytest.raises((RemoteError, ClientError)):
            await client.register_broker(RegisterBroker(broker_id=2**63))
        (created,) = await client.create_topics([CreatableTopic(name="after", num_partitions=1)])
        assert created.outcome.ok


def test_the_client_refuses_locally_what_the_wire_cannot_carry(tmp_path: Path) -> None:
    with running_server(tmp_path / "log") as server:
        asyncio.run(_client_checks(server.address))
