"""Replay enforces every rule of `replay.rules.RULES`, and accepts what the controller writes.

Each rule has records that break it (refused, with the rule named) and, where the rule has an
edge, records just inside it (accepted). A test checks every rule has a refused example.
"""

from __future__ import annotations

import pytest

from records.errors import UnknownRecordTypeError
from records.model import (
    BrokerEndpoint,
    BrokerRegistrationChangeRecord,
    CancelTopicPartitionsDeletionRecord,
    ConfigRecord,
    ConfigResourceType,
    ControlledShutdownChange,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    FencingChange,
    Mode,
    MoveTopicRecord,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    PurgeTopicPartitionsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveNamespaceRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from records.uuids import Uuid
from replay.delta import MetadataDelta, replay_records
from replay.delta import topics as topics_delta
from replay.delta.features import FeaturesDelta
from replay.errors import (
    ConfigReplayError,
    DuplicateTopicError,
    FeatureReplayError,
    InvalidBrokerError,
    InvalidPartitionError,
    InvalidTopicError,
    NamespaceReplayError,
    PendingDeletionError,
    ReplayError,
    UnknownBrokerError,
    UnknownPartitionError,
    UnknownTopicError,
)
from replay.image import EMPTY_IMAGE, EMPTY_PROVENANCE, MetadataImage
from replay.rules import RULES, namespace_name_problem, topic_name_problem

ORDERS = Uuid(bytes(range(1, 17)))  # 2 partitions on brokers 1, 2
KAFKA = Uuid(bytes(range(2, 18)))  # org:kafka, 1 partition
SHRINKING = Uuid(bytes(range(3, 19)))  # 3 partitions, deletion to 2 pending, partition 2 READ_ONLY
MOVING = Uuid(bytes(range(4, 20)))  # partition 0 being reassigned from (1, 2) to (2, 3)
ODD = Uuid(bytes(range(5, 21)))  # replicas on a fenced (4), a shut-down (5), a gone (7) broker
ORG = Uuid(bytes(range(6, 22)))
ORG_A = Uuid(bytes(range(7, 23)))
NEW = Uuid(bytes(range(8, 24)))


def _broker(broker_id: int, epoch: int, **kwargs: object) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=Uuid(bytes([broker_id + 1] * 16)),
        broker_epoch=epoch,
        **{"fenced": False, **kwargs},  # type: ignore[arg-type]  # test keywords of the record
    )


def _partition(
    topic_id: Uuid, partition_id: int, replicas: tuple[int, ...], **kwargs: object
) -> PartitionRecord:
    fields: dict[str, object] = {"isr": replicas, "leader": replicas[0], **kwargs}
    return PartitionRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        replicas=replicas,
        **fields,  # type: ignore[arg-type]  # test keywords of the record
    )


BASE_RECORDS: list[Record] = [
    FeatureLevelRecord(name="metadata.version", feature_level=1),
    _broker(1, 1),
    _broker(2, 2),
    _broker(3, 3),
    _broker(4, 4, fenced=True),
    _broker(5, 5),
    BrokerRegistrationChangeRecord(
        broker_id=5,
        broker_epoch=5,
        in_controlled_shutdown=ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN,
    ),
    NamespaceRecord(namespace_id=ORG, name="org"),
    NamespaceRecord(namespace_id=ORG_A, name="org:a", parent_id=ORG),
    TopicRecord(name="orders", topic_id=ORDERS),
    _partition(ORDERS, 0, (1, 2)),
    _partition(ORDERS, 1, (2, 1)),
    TopicRecord(name="kafka", topic_id=KAFKA, namespace="org"),
    _partition(KAFKA, 0, (2, 3)),
    TopicRecord(name="shrinking", topic_id=SHRINKING),
    *[_partition(SHRINKING, p, (1, 2)) for p in range(3)],
    DeleteTopicPartitionsRecord(
        topic_id=SHRINKING, partition_count=2, delete_after_ms=2_000, created_ms=1_000
    ),
    PartitionChangeRecord(partition_id=2, topic_id=SHRINKING, mode=Mode.READ_ONLY),
    TopicRecord(name="moving", topic_id=MOVING),
    _partition(MOVING, 0, (1, 2)),
    PartitionChangeRecord(
        partition_id=0,
        topic_id=MOVING,
        replicas=(2, 3, 1),
        adding_replicas=(3,),
        removing_replicas=(1,),
    ),
    TopicRecord(name="odd", topic_id=ODD),
    _partition(ODD, 0, (1, 4, 5, 7)),
]


def replay_batch(records: list[Record], image: MetadataImage | None = None) -> MetadataImage:
    """`records` as one batch on `image` (default `BASE`), the batch rules checked at its end."""
    delta = MetadataDelta(BASE if image is None else image)
    delta.replay_all(records)
    delta.finish_batch()
    return delta.apply(EMPTY_PROVENANCE)


BASE = replay_batch(BASE_RECORDS, EMPTY_IMAGE)


def _register(broker_id: int, epoch: int, **kwargs: object) -> list[Record]:
    return [_broker(broker_id, epoch, **kwargs)]


def _endpoint(host: str, port: int) -> BrokerEndpoint:
    return BrokerEndpoint(name="PLAINTEXT", host=host, port=port)


def _change(topic_id: Uuid, partition_id: int, **kwargs: object) -> list[Record]:
    return [
        PartitionChangeRecord(
            partition_id=partition_id,
            topic_id=topic_id,
            **kwargs,  # type: ignore[arg-type]  # test keywords of the record
        )
    ]


def _config(resource_type: ConfigResourceType, name: str) -> list[Record]:
    return [ConfigRecord(resource_type=resource_type, resource_name=name, name="k", value="v")]


def _delete(topic_id: Uuid, count: int, *, after: int = 5, created: int = 5) -> list[Record]:
    return [
        DeleteTopicPartitionsRecord(
            topic_id=topic_id, partition_count=count, delete_after_ms=after, created_ms=created
        )
    ]


REFUSED: list[tuple[str, type[ReplayError], list[Record]]] = [
    (
        "feature.level-nonnegative",
        FeatureReplayError,
        [FeatureLevelRecord(name="x", feature_level=-1)],
    ),
    ("broker.id-nonnegative", InvalidBrokerError, _register(-1, 9)),
    ("broker.registration-valid", InvalidBrokerError, _register(6, 9, rack="  ")),
    ("broker.registration-valid", InvalidBrokerError, _register(6, 9, rack="")),
    (
        "broker.registration-valid",
        InvalidBrokerError,
        _register(6, 9, end_points=(_endpoint("h", 0),)),
    ),
    (
        "broker.registration-valid",
        InvalidBrokerError,
        _register(6, 9, end_points=(_endpoint("h", 65536),)),
    ),
    (
        "broker.registration-valid",
        InvalidBrokerError,
        _register(6, 9, end_points=(_endpoint("", 9092),)),
    ),
    ("broker.epoch-increases", InvalidBrokerError, _register(2, 2)),
    ("broker.epoch-increases", InvalidBrokerError, _register(2, 1)),
    (
        "broker.registered",
        UnknownBrokerError,
        [UnregisterBrokerRecord(broker_id=9, broker_epoch=1)],
    ),
    (
        "broker.registered",
        UnknownBrokerError,
        [UnregisterBrokerRecord(broker_id=1, broker_epoch=2)],
    ),
    (
        "broker.registered",
        UnknownBrokerError,
        [BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, fenced=FencingChange.FENCE)],
    ),
    (
        "broker.unfence-after-shutdown",
        InvalidBrokerError,
        [BrokerRegistrationChangeRecord(broker_id=5, broker_epoch=5, fenced=FencingChange.UNFENCE)],
    ),
    (
        "broker.unfence-after-shutdown",
        InvalidBrokerError,
        [
            BrokerRegistrationChangeRecord(
                broker_id=1,
                broker_epoch=1,
                fenced=FencingChange.UNFENCE,
                in_controlled_shutdown=ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN,
            )
        ],
    ),
    ("namespace.name-legal", NamespaceReplayError, [NamespaceRecord(namespace_id=NEW, name="")]),
    (
        "namespace.name-legal",
        NamespaceReplayError,
        [NamespaceRecord(namespace_id=NEW, name="org::x", parent_id=ORG)],
    ),
    (
        "namespace.name-legal",
        NamespaceReplayError,
        [NamespaceRecord(namespace_id=NEW, name="org:..", parent_id=ORG)],
    ),
    (
        "namespace.name-legal",
        NamespaceReplayError,
        [NamespaceRecord(namespace_id=NEW, name="org:.", parent_id=ORG)],
    ),
    ("namespace.name-legal", NamespaceReplayError, [NamespaceRecord(namespace_id=NEW, name="a_b")]),
    (
        "namespace.name-legal",
        NamespaceReplayError,
        [NamespaceRecord(namespace_id=NEW, name="x" * 250)],
    ),
    (
        "namespace.name-unique",
        NamespaceReplayError,
        [NamespaceRecord(namespace_id=NEW, name="org")],
    ),
    ("namespace.id-unique", NamespaceReplayError, [NamespaceRecord(namespace_id=ORG, name="b")]),
    (
        "namespace.id-unique",
        NamespaceReplayError,
        [NamespaceRecord(namespace_id=Uuid.ZERO, name="b")],
    ),
    ("namespace.parent", NamespaceReplayError, [NamespaceRecord(namespace_id=NEW, name="zz:a")]),
    ("namespace.parent", NamespaceReplayError, [NamespaceRecord(namespace_id=NEW, name="org:b")]),
    (
        "namespace.parent",
        NamespaceReplayError,
        [NamespaceRecord(namespace_id=NEW, name="org:a:b", parent_id=ORG)],
    ),
    (
        "namespace.parent",
        NamespaceReplayError,
        [NamespaceRecord(namespace_id=NEW, name="b", parent_id=ORG)],
    ),
    ("namespace.exists", NamespaceReplayError, [RemoveNamespaceRecord(namespace_id=NEW)]),
    (
        "namespace.exists",
        NamespaceReplayError,
        [RemoveNamespaceRecord(namespace_id=ORG_A), RemoveNamespaceRecord(namespace_id=ORG_A)],
    ),
    (
        "namespace.empty-before-removal",
        NamespaceReplayError,
        [RemoveNamespaceRecord(namespace_id=ORG)],
    ),
    (
        "namespace.empty-before-removal",
        NamespaceReplayError,
        [RemoveNamespaceRecord(namespace_id=ORG_A), RemoveNamespaceRecord(namespace_id=ORG)],
    ),
    ("topic.name-legal", InvalidTopicError, [TopicRecord(name="", topic_id=NEW)]),
    ("topic.name-legal", InvalidTopicError, [TopicRecord(name=".", topic_id=NEW)]),
    ("topic.name-legal", InvalidTopicError, [TopicRecord(name="..", topic_id=NEW)]),
    ("topic.name-legal", InvalidTopicError, [TopicRecord(name="a:b", topic_id=NEW)]),
    ("topic.name-legal", InvalidTopicError, [TopicRecord(name="x" * 250, topic_id=NEW)]),
    ("topic.name-unique", DuplicateTopicError, [TopicRecord(name="orders", topic_id=NEW)]),
    (
        "topic.name-unique",
        DuplicateTopicError,
        [TopicRecord(name="kafka", topic_id=NEW, namespace="org")],
    ),
    (
        "topic.name-unique",
        DuplicateTopicError,
        [
            TopicRecord(name="orders", topic_id=NEW, namespace="org"),
            _partition(NEW, 0, (1,)),
            MoveTopicRecord(topic_id=NEW, namespace=""),
        ],
    ),
    ("topic.id-unique", DuplicateTopicError, [TopicRecord(name="new", topic_id=ORDERS)]),
    ("topic.id-unique", DuplicateTopicError, [TopicRecord(name="new", topic_id=Uuid.ZERO)]),
    (
        "topic.id-unique",
        DuplicateTopicError,
        [TopicRecord(name="new", topic_id=Uuid.METADATA_TOPIC_ID)],
    ),
    (
        "topic.namespace-exists",
        NamespaceReplayError,
        [TopicRecord(name="new", topic_id=NEW, namespace="nowhere")],
    ),
    (
        "topic.namespace-exists",
        NamespaceReplayError,
        [MoveTopicRecord(topic_id=ORDERS, namespace="nowhere")],
    ),
    ("topic.exists", UnknownTopicError, [_partition(NEW, 0, (1,))]),
    ("topic.exists", UnknownTopicError, [RemoveTopicRecord(topic_id=NEW)]),
    (
        "topic.exists",
        UnknownTopicError,
        [RemoveTopicRecord(topic_id=ORDERS), *_change(ORDERS, 0, leader=2)],
    ),
    (
        "topic.move-changes-namespace",
        NamespaceReplayError,
        [MoveTopicRecord(topic_id=KAFKA, namespace="org")],
    ),
    ("topic.has-partitions", InvalidTopicError, [TopicRecord(name="new", topic_id=NEW)]),
    ("partition.next-id", UnknownPartitionError, [_partition(ORDERS, 3, (1, 2))]),
    ("partition.next-id", UnknownPartitionError, [_partition(ORDERS, 1, (1, 2))]),
    ("partition.next-id", UnknownPartitionError, [_partition(ORDERS, 0, (1, 2))]),
    ("partition.next-id", UnknownPartitionError, [_partition(ORDERS, -1, (1, 2))]),
    ("partition.exists", UnknownPartitionError, _change(ORDERS, 2, leader=2)),
    ("partition.exists", UnknownPartitionError, _change(ORDERS, -1, leader=2)),
    (
        "partition.replicas-valid",
        InvalidPartitionError,
        [PartitionRecord(partition_id=2, topic_id=ORDERS, replicas=(), isr=(), leader=-1)],
    ),
    ("partition.replicas-valid", InvalidPartitionError, [_partition(ORDERS, 2, (1, 1))]),
    (
        "partition.replicas-valid",
        InvalidPartitionError,
        [_partition(ORDERS, 2, (1, 2, 1), isr=(1,))],
    ),
    ("partition.replicas-valid", InvalidPartitionError, [_partition(ORDERS, 2, (1, -3), isr=(1,))]),
    ("partition.replicas-valid", InvalidPartitionError, _change(ORDERS, 0, replicas=(1, 1))),
    (
        "partition.isr-valid",
        InvalidPartitionError,
        [_partition(ORDERS, 2, (1, 2), isr=(), leader=-1)],
    ),
    ("partition.isr-valid", InvalidPartitionError, [_partition(ORDERS, 2, (1, 2), isr=(1, 1))]),
    ("partition.isr-valid", InvalidPartitionError, [_partition(ORDERS, 2, (1, 2), isr=(1, 3))]),
    ("partition.isr-valid", InvalidPartitionError, _change(ORDERS, 0, isr=(), leader=-1)),
    ("partition.isr-valid", InvalidPartitionError, _change(ORDERS, 0, isr=(1, 7))),
    ("partition.isr-valid", InvalidPartitionError, _change(ORDERS, 0, replicas=(1,))),
    (
        "partition.leader-in-isr",
        InvalidPartitionError,
        [_partition(ORDERS, 2, (1, 2), isr=(1,), leader=2)],
    ),
    ("partition.leader-in-isr", InvalidPartitionError, [_partition(ORDERS, 2, (1, 2), leader=3)]),
    ("partition.leader-in-isr", InvalidPartitionError, [_partition(ORDERS, 2, (1, 2), leader=-2)]),
    ("partition.leader-in-isr", InvalidPartitionError, _change(ORDERS, 0, isr=(2,))),
    ("partition.leader-in-isr", InvalidPartitionError, _change(ORDERS, 0, leader=3)),
    (
        "partition.reassignment-valid",
        InvalidPartitionError,
        [_partition(ORDERS, 2, (1, 2), adding_replicas=(3,))],
    ),
    (
        "partition.reassignment-valid",
        InvalidPartitionError,
        [_partition(ORDERS, 2, (1, 2), removing_replicas=(3,))],
    ),
    (
        "partition.reassignment-valid",
        InvalidPartitionError,
        [_partition(ORDERS, 2, (1, 2), adding_replicas=(2, 2))],
    ),
    (
        "partition.reassignment-valid",
        InvalidPartitionError,
        [_partition(ORDERS, 2, (1, 2, 3), removing_replicas=(3, 3))],
    ),
    (
        "partition.reassignment-valid",
        InvalidPartitionError,
        [_partition(ORDERS, 2, (1, 2), adding_replicas=(2,), removing_replicas=(2,))],
    ),
    (
        "partition.reassignment-valid",
        InvalidPartitionError,
        [_partition(ORDERS, 2, (1, 2), removing_replicas=(1, 2))],
    ),
    (
        "partition.reassignment-valid",
        InvalidPartitionError,
        _change(MOVING, 0, adding_replicas=(4,)),
    ),
    (
        "partition.epochs-valid",
        InvalidPartitionError,
        [_partition(ORDERS, 2, (1, 2), leader_epoch=-1)],
    ),
    (
        "partition.epochs-valid",
        InvalidPartitionError,
        [_partition(ORDERS, 2, (1, 2), partition_epoch=-1)],
    ),
    ("partition.epochs-valid", InvalidPartitionError, _change(ORDERS, 0, partition_epoch=0)),
    (
        "partition.epochs-valid",
        InvalidPartitionError,
        [*_change(ORDERS, 0, partition_epoch=5), *_change(ORDERS, 0, partition_epoch=4)],
    ),
    ("partition.epochs-valid", InvalidPartitionError, _change(ORDERS, 0, leader=2, leader_epoch=0)),
    (
        "partition.epochs-valid",
        InvalidPartitionError,
        [*_change(ORDERS, 0, leader=2), *_change(ORDERS, 0, leader_epoch=0)],
    ),
    (
        "partition.added-replicas-registered",
        InvalidPartitionError,
        _change(ORDERS, 0, replicas=(1, 2, 9), adding_replicas=(9,)),
    ),
    (
        "partition.added-replicas-registered",
        InvalidPartitionError,
        _change(ORDERS, 0, replicas=(9, 1, 2)),
    ),
    ("partition.elected-leader-live", InvalidPartitionError, _change(ODD, 0, leader=4)),
    ("partition.elected-leader-live", InvalidPartitionError, _change(ODD, 0, leader=5)),
    ("partition.elected-leader-live", InvalidPartitionError, _change(ODD, 0, leader=7)),
    ("partition.stable-while-deleting", InvalidPartitionError, [_partition(SHRINKING, 3, (1, 2))]),
    (
        "partition.stable-while-deleting",
        InvalidPartitionError,
        _change(SHRINKING, 0, replicas=(2, 1)),
    ),
    (
        "partition.stable-while-deleting",
        InvalidPartitionError,
        _change(SHRINKING, 0, replicas=(1, 2, 3), adding_replicas=(3,)),
    ),
    (
        "deletion.cancel-matches",
        PendingDeletionError,
        [CancelTopicPartitionsDeletionRecord(topic_id=ORDERS, partition_count=1)],
    ),
    (
        "deletion.cancel-matches",
        PendingDeletionError,
        [CancelTopicPartitionsDeletionRecord(topic_id=SHRINKING, partition_count=1)],
    ),
    (
        "deletion.cancel-read-write",
        PendingDeletionError,
        [CancelTopicPartitionsDeletionRecord(topic_id=SHRINKING, partition_count=2)],
    ),
    ("partition.mode-by-deletion", InvalidPartitionError, _change(ORDERS, 0, mode=Mode.READ_ONLY)),
    ("partition.mode-by-deletion", InvalidPartitionError, _change(SHRINKING, 1, mode=Mode.NONE)),
    (
        "partition.mode-by-deletion",
        InvalidPartitionError,
        _change(SHRINKING, 2, mode=Mode.READ_WRITE),
    ),
    (
        "partition.mode-by-deletion",
        InvalidPartitionError,
        [*_change(SHRINKING, 2, mode=Mode.NONE), *_change(SHRINKING, 2, mode=Mode.READ_ONLY)],
    ),
    (  # NONE is past the purge time: no cancel brings it back, even one in the same batch
        "partition.mode-by-deletion",
        InvalidPartitionError,
        [
            *_change(SHRINKING, 2, mode=Mode.NONE),
            *_change(SHRINKING, 2, mode=Mode.READ_WRITE),
            CancelTopicPartitionsDeletionRecord(topic_id=SHRINKING, partition_count=2),
        ],
    ),
    (
        "partition.mode-by-deletion",
        InvalidPartitionError,
        [TopicRecord(name="new", topic_id=NEW), _partition(NEW, 0, (1,), mode=Mode.READ_ONLY)],
    ),
    (
        "partition.mode-by-deletion",
        InvalidPartitionError,
        [
            TopicRecord(name="new", topic_id=NEW),
            _partition(NEW, 0, (1,), mode=Mode.NONE),
            _partition(NEW, 1, (1,)),
            *_delete(NEW, 1),
        ],
    ),
    ("deletion.one-pending", PendingDeletionError, _delete(SHRINKING, 1)),
    ("deletion.count-valid", PendingDeletionError, _delete(ORDERS, 0)),
    ("deletion.count-valid", PendingDeletionError, _delete(ORDERS, 2)),
    ("deletion.count-valid", PendingDeletionError, _delete(ORDERS, -1)),
    ("deletion.times-valid", PendingDeletionError, _delete(ORDERS, 1, after=4, created=5)),
    (
        "deletion.no-reassignment",
        PendingDeletionError,
        [_partition(MOVING, 1, (1,)), *_delete(MOVING, 1)],
    ),
    (
        "deletion.no-reassignment",
        PendingDeletionError,
        [*_change(ORDERS, 1, replicas=(2, 1, 3), adding_replicas=(3,)), *_delete(ORDERS, 1)],
    ),
    (
        "deletion.no-reassignment",
        PendingDeletionError,
        [*_change(ORDERS, 1, replicas=(2, 1), removing_replicas=(1,)), *_delete(ORDERS, 1)],
    ),
    (
        "deletion.purge-matches",
        PendingDeletionError,
        [PurgeTopicPartitionsRecord(topic_id=ORDERS, partition_count=1)],
    ),
    (
        "deletion.purge-matches",
        PendingDeletionError,
        [
            *_change(SHRINKING, 2, mode=Mode.NONE),
            PurgeTopicPartitionsRecord(topic_id=SHRINKING, partition_count=1),
        ],
    ),
    (
        "deletion.purged-mode-none",
        PendingDeletionError,
        [PurgeTopicPartitionsRecord(topic_id=SHRINKING, partition_count=2)],
    ),
    ("config.resource-valid", ConfigReplayError, _config(ConfigResourceType.UNKNOWN, "x")),
    ("config.resource-exists", ConfigReplayError, _config(ConfigResourceType.TOPIC, "nope")),
    ("config.resource-exists", ConfigReplayError, _config(ConfigResourceType.TOPIC, "kafka")),
    ("config.resource-exists", ConfigReplayError, _config(ConfigResourceType.NAMESPACE, "")),
    ("config.resource-exists", ConfigReplayError, _config(ConfigResourceType.NAMESPACE, "nope")),
    ("config.resource-exists", ConfigReplayError, _config(ConfigResourceType.BROKER, "b1")),
    ("config.resource-exists", ConfigReplayError, _config(ConfigResourceType.BROKER, "-1")),
    ("config.resource-exists", ConfigReplayError, _config(ConfigResourceType.BROKER, "\u0663")),
]


@pytest.mark.parametrize(
    ("rule", "error", "records"),
    REFUSED,
    ids=[f"{rule}-{i}" for i, (rule, _, _) in enumerate(REFUSED)],
)
def test_a_record_breaking_a_rule_is_refused_naming_the_rule(
    rule: str, error: type[ReplayError], records: list[Record]
) -> None:
    with pytest.raises(error) as caught:
        replay_batch(records)
    assert caught.value.rule == rule
    assert str(caught.value).endswith(f"(rule {rule})")


def test_every_rule_has_a_refused_example() -> None:
    # The rules of ACLs and credentials have theirs in test_replay_security.py.
    security = {rule for rule in RULES if rule.startswith(("acl.", "scram."))}
    assert security
    assert {rule for rule, _, _ in REFUSED} == set(RULES) - security
    assert all(text for text in RULES.values())


ACCEPTED: list[tuple[str, list[Record]]] = [
    (
        "a cancel after its partitions are READ_WRITE again",
        [
            *_change(SHRINKING, 2, mode=Mode.READ_WRITE),
            CancelTopicPartitionsDeletionRecord(topic_id=SHRINKING, partition_count=2),
        ],
    ),
    ("feature removed", [FeatureLevelRecord(name="metadata.version", feature_level=0)]),
    ("broker 0", _register(0, 9)),
    ("no rack", _register(6, 9, rack=None)),
    ("port 1", _register(6, 9, rack="r", end_points=(_endpoint("h", 1),))),
    ("port 65535", _register(6, 9, end_points=(_endpoint("h", 65535),))),
    ("re-registration", _register(2, 3)),
    (
        "unfence a fenced broker",
        [BrokerRegistrationChangeRecord(broker_id=4, broker_epoch=4, fenced=FencingChange.UNFENCE)],
    ),
    (
        "re-register after a controlled shutdown, then unfence",
        [
            _broker(5, 6, fenced=True),
            BrokerRegistrationChangeRecord(
                broker_id=5, broker_epoch=6, fenced=FencingChange.UNFENCE
            ),
        ],
    ),
    (
        "unregister a broker hosting replicas",
        [UnregisterBrokerRecord(broker_id=3, broker_epoch=3)],
    ),
    ("namespace of 249", [NamespaceRecord(namespace_id=NEW, name="a" * 249)]),
    ("namespace tiers", [NamespaceRecord(namespace_id=NEW, name="org:a:b-1.x", parent_id=ORG_A)]),
    ("remove a leaf namespace", [RemoveNamespaceRecord(namespace_id=ORG_A)]),
    ("topic of 249", [TopicRecord(name="x" * 249, topic_id=NEW), _partition(NEW, 0, (1,))]),
    (
        "topic name characters",
        [TopicRecord(name="a.b_c-D9", topic_id=NEW), _partition(NEW, 0, (1,))],
    ),
    (
        "same name in another namespace",
        [TopicRecord(name="orders", topic_id=NEW, namespace="org:a"), _partition(NEW, 0, (1,))],
    ),
    (
        "created and removed in one batch",
        [TopicRecord(name="new", topic_id=NEW), RemoveTopicRecord(topic_id=NEW)],
    ),
    ("move", [MoveTopicRecord(topic_id=ORDERS, namespace="org:a")]),
    ("next partition", [_partition(ORDERS, 2, (3, 1))]),
    ("ISR a subset, in another order", [_partition(ORDERS, 2, (1, 2, 3), isr=(3, 1), leader=3)]),
    ("no leader", [_partition(ORDERS, 2, (1, 2), leader=-1)]),
    ("replicas on gone brokers", [_partition(ORDERS, 2, (7, 8), leader=-1)]),
    ("broker id 0", [_partition(ORDERS, 2, (0, 1), isr=(1,), leader=1)]),
    ("leader epoch given", [_partition(ORDERS, 2, (1, 2), leader_epoch=3, partition_epoch=5)]),
    ("leaderless", _change(ORDERS, 0, leader=-1)),
    ("preferred election", _change(ORDERS, 1, leader=1)),
    ("ISR shrink", _change(ORDERS, 0, isr=(1,))),
    ("epoch given", _change(ORDERS, 0, partition_epoch=1)),
    ("leader epoch given", _change(ORDERS, 0, leader=2, leader_epoch=1)),
    ("leader epoch kept", _change(ORDERS, 0, isr=(1,), leader_epoch=0)),
    ("reassignment start", _change(ORDERS, 0, replicas=(2, 3, 1), adding_replicas=(3,))),
    (
        "reassignment complete",
        _change(
            MOVING,
            0,
            replicas=(2, 3),
            isr=(2, 3),
            leader=2,
            adding_replicas=(),
            removing_replicas=(),
        ),
    ),
    (
        "reassignment cancelled",
        _change(MOVING, 0, replicas=(1, 2), adding_replicas=(), removing_replicas=()),
    ),
    ("replicas reordered", _change(ORDERS, 0, replicas=(2, 1))),
    ("fenced replica stays", _change(ODD, 0, isr=(1, 4))),
    ("mode READ_ONLY to NONE", _change(SHRINKING, 2, mode=Mode.NONE)),
    (
        "deletion with modes in one batch",
        [
            *_delete(ORDERS, 1),
            *_change(ORDERS, 1, mode=Mode.NONE),
            PurgeTopicPartitionsRecord(topic_id=ORDERS, partition_count=1),
        ],
    ),
    ("deletion keeps 1 of 2", _delete(ORDERS, 1, after=5, created=5)),
    (
        "a partition created READ_ONLY, purged in the same batch",
        [
            TopicRecord(name="new", topic_id=NEW),
            _partition(NEW, 0, (1,)),
            _partition(NEW, 1, (1,), mode=Mode.READ_ONLY),
            *_delete(NEW, 1),
            *_change(NEW, 1, mode=Mode.NONE),
            PurgeTopicPartitionsRecord(topic_id=NEW, partition_count=1),
        ],
    ),
    (
        "a topic with a READ_ONLY partition, removed in the same batch",
        [
            TopicRecord(name="new", topic_id=NEW),
            _partition(NEW, 0, (1,), mode=Mode.READ_ONLY),
            RemoveTopicRecord(topic_id=NEW),
        ],
    ),
    ("deletion keeps 2 of 3", [_partition(ORDERS, 2, (1, 2)), *_delete(ORDERS, 2)]),
    (
        "a snapshot's order: partition modes before their deletion",
        [
            TopicRecord(name="new", topic_id=NEW),
            _partition(NEW, 0, (1,)),
            _partition(NEW, 1, (1,), mode=Mode.READ_ONLY),
            *_delete(NEW, 1),
        ],
    ),
    (
        "purge",
        [
            *_change(SHRINKING, 2, mode=Mode.NONE),
            PurgeTopicPartitionsRecord(topic_id=SHRINKING, partition_count=2),
        ],
    ),
    ("topic config", _config(ConfigResourceType.TOPIC, "org:kafka")),
    ("namespace config", _config(ConfigResourceType.NAMESPACE, "org:a")),
    ("cluster config", _config(ConfigResourceType.BROKER, "")),
    ("config of a broker gone", _config(ConfigResourceType.BROKER, "42")),
]


@pytest.mark.parametrize(("name", "records"), ACCEPTED, ids=[n for n, _ in ACCEPTED])
def test_records_inside_every_rule_replay(name: str, records: list[Record]) -> None:
    image = replay_batch(records)
    # What replay accepts, a snapshot of it replays to the same image.
    again = replay_batch(list(image.write()), EMPTY_IMAGE)
    assert again.same_state(image), name


def test_a_refused_batch_leaves_the_base_image_as_it_was() -> None:
    before = list(BASE.write())
    with pytest.raises(InvalidPartitionError):
        replay_batch([*_change(ORDERS, 0, isr=(1,)), *_change(ORDERS, 0, isr=(1, 1))])
    assert list(BASE.write()) == before


def test_the_partition_change_outcome_is_the_merged_state() -> None:
    image = replay_batch([*_change(ODD, 0, isr=(1, 4)), *_change(ORDERS, 0, leader=2)])
    odd = image.topics.get(ODD)
    orders = image.topics.get(ORDERS)
    assert odd is not None and orders is not None
    assert odd.partitions[0].isr == (1, 4) and odd.partitions[0].partition_epoch == 1
    assert (orders.partitions[0].leader, orders.partitions[0].leader_epoch) == (2, 1)


def test_unfence_and_controlled_shutdown_change_the_registration() -> None:
    image = replay_batch(
        [
            BrokerRegistrationChangeRecord(
                broker_id=4, broker_epoch=4, fenced=FencingChange.UNFENCE
            ),
            BrokerRegistrationChangeRecord(
                broker_id=1,
                broker_epoch=1,
                in_controlled_shutdown=ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN,
            ),
            BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=2),
        ]
    )
    four, one, two = (image.cluster.get(b) for b in (4, 1, 2))
    assert four is not None and (four.fenced, four.in_controlled_shutdown) == (False, False)
    assert one is not None and (one.fenced, one.in_controlled_shutdown) == (False, True)
    assert two == BASE.cluster.get(2)
    assert [b.broker_id for b in image.cluster.usable()] == [2, 3, 4]


def test_removing_a_feature_of_the_base_image() -> None:
    image = replay_batch([FeatureLevelRecord(name="metadata.version", feature_level=0)])
    assert dict(image.features.levels) == {}
    assert dict(BASE.features.levels) == {"metadata.version": 1}


def test_an_unknown_record_type_is_refused_by_both_replay_paths() -> None:
    class Alien(Record):
        __slots__ = ()

    delta = MetadataDelta(BASE)
    with pytest.raises(UnknownRecordTypeError, match="'Alien'"):
        delta.replay(Alien())
    with pytest.raises(UnknownRecordTypeError, match="'Alien'"):
        delta.replay_all([FeatureLevelRecord(name="x", feature_level=1), Alien()])
    assert delta.records == 1


def test_a_key_error_inside_a_handler_is_not_taken_for_an_unknown_type(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(delta: FeaturesDelta, record: Record) -> None:
        raise KeyError("a key of the handler's own")  # as a bug in a handler would

    monkeypatch.setattr(FeaturesDelta, "replay_feature_level", broken)
    with pytest.raises(KeyError, match="a key of the handler's own"):
        MetadataDelta(BASE).replay_all([FeatureLevelRecord(name="x", feature_level=1)])


def test_records_counts_every_record_replayed() -> None:
    delta = MetadataDelta(BASE)
    delta.replay(FeatureLevelRecord(name="x", feature_level=1))
    delta.replay_all([FeatureLevelRecord(name="y", feature_level=1)] * 3)
    assert delta.records == 4
    with pytest.raises(FeatureReplayError):
        delta.replay_all(
            [
                FeatureLevelRecord(name="z", feature_level=1),
                FeatureLevelRecord(name="z", feature_level=-1),
            ]
        )
    assert delta.records == 5


def test_finish_batch_checks_only_the_batch_since_the_last() -> None:
    delta = MetadataDelta(BASE)
    delta.replay(TopicRecord(name="new", topic_id=NEW))
    with pytest.raises(InvalidTopicError) as caught:
        delta.finish_batch()
    assert caught.value.record == TopicRecord(name="new", topic_id=NEW)
    delta.finish_batch()  # the topic was reported once; the next batch starts clean
    delta.replay(_partition(NEW, 0, (1,), mode=Mode.READ_ONLY))
    with pytest.raises(InvalidPartitionError) as mode_error:
        delta.finish_batch()
    assert mode_error.value.rule == "partition.mode-by-deletion"
    assert mode_error.value.record == _partition(NEW, 0, (1,), mode=Mode.READ_ONLY)


def test_the_replica_list_memo_only_skips_work_never_a_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(topics_delta, "_VALID_REPLICAS", set())
    monkeypatch.setattr(topics_delta, "_VALID_REPLICAS_MAX", 2)
    image = replay_batch([_partition(ORDERS, 2, (1, 2)), _partition(ORDERS, 3, (2, 3))])
    assert sorted(topics_delta._VALID_REPLICAS) == [(1, 2), (2, 3)]
    # Known replicas, but a leader outside the ISR: still refused.
    with pytest.raises(InvalidPartitionError, match="leader 3"):
        replay_batch([_partition(ORDERS, 4, (1, 2), leader=3)], image)
    with pytest.raises(InvalidPartitionError, match="ISR"):
        replay_batch([_partition(ORDERS, 4, (1, 2), isr=(1, 1))], image)
    # Full: the memo starts again rather than grow.
    replay_batch([_partition(ORDERS, 4, (3, 1))], image)
    assert sorted(topics_delta._VALID_REPLICAS) == [(3, 1)]


def test_replay_records_leaves_batch_rules_to_the_caller() -> None:
    # One record at a time (as the every-prefix test replays a log), a topic is partitionless
    # between its TopicRecord and its first PartitionRecord.
    image = replay_records(BASE, [TopicRecord(name="new", topic_id=NEW)], EMPTY_PROVENANCE)
    topic = image.topics.get(NEW)
    assert topic is not None and topic.partitions == ()


def test_an_unregistered_broker_leaves_the_image() -> None:
    image = replay_batch([UnregisterBrokerRecord(broker_id=3, broker_epoch=3)])
    assert image.cluster.get(3) is None
    assert [b.broker_id for b in image.cluster.sorted()] == [1, 2, 4, 5]
    kafka = image.topics.get(KAFKA)
    assert kafka is not None and kafka.partitions[0].replicas == (2, 3)  # offline, kept


def test_a_config_deleted_in_the_delta_does_not_move_with_its_topic() -> None:
    before = replay_batch(_config(ConfigResourceType.TOPIC, "orders"))  # k=v
    image = replay_batch(
        [
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC, resource_name="orders", name="x", value="1"
            ),
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC, resource_name="orders", name="k", value=None
            ),
            MoveTopicRecord(topic_id=ORDERS, namespace="org:a"),
        ],
        before,
    )
    assert dict(image.configs.get(ConfigResourceType.TOPIC, "org:a:orders")) == {"x": "1"}
    assert dict(image.configs.get(ConfigResourceType.TOPIC, "orders")) == {}


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([_partition(ORDERS, 0, (1, 2))], "partition 0 already exists"),
        ([_partition(ORDERS, 1, (1, 2))], "partition 1 already exists"),
        ([_partition(ORDERS, 3, (1, 2))], "contiguous; the topic has 2 partitions"),
        ([_partition(ORDERS, -1, (1, 2))], "contiguous; the topic has 2 partitions"),
        (_change(ODD, 0, leader=4), "new leader 4 is fenced"),
        (_change(ODD, 0, leader=5), "new leader 5 is in controlled shutdown"),
        (_change(ODD, 0, leader=7), "new leader 7 is not registered"),
    ],
)
def test_the_detail_says_which_case_of_the_rule(records: list[Record], message: str) -> None:
    with pytest.raises(ReplayError, match=message):
        replay_batch(records)


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "a topic name cannot be empty"),
        (".", 'a topic cannot be named "."'),
        ("..", 'a topic cannot be named ".."'),
        ("x" * 250, f"topic name {'x' * 40!r}... is longer than 249 characters"),
        (
            "a b",
            "topic name 'a b' has a character other than ASCII letters, digits, '.', '_' and '-'",
        ),
        ("x" * 249, None),
        ("a.b_c-D9", None),
    ],
)
def test_topic_name_problems_say_what_is_wrong(name: str, problem: str | None) -> None:
    assert topic_name_problem(name) == problem
    if problem is not None:
        with pytest.raises(InvalidTopicError) as caught:
            replay_batch([TopicRecord(name=name, topic_id=NEW)])
        assert caught.value.detail == problem


def test_namespace_name_problems_say_what_is_wrong() -> None:
    assert namespace_name_problem("y" * 250) == (
        f"namespace name {'y' * 40!r}... is longer than 249 characters"
    )
    assert namespace_name_problem("a:" + "y" * 247) is None
    assert namespace_name_problem("a::b") == "namespace 'a::b' has an empty tier"
    assert namespace_name_problem("a:..") == "namespace 'a:..' has a tier \"..\""


def test_a_replay_error_names_a_known_rule_and_keeps_its_detail() -> None:
    error = InvalidTopicError("topic.exists", "gone")
    assert error.args == ("gone",) and str(error) == "gone (rule topic.exists)"
    with pytest.raises(ValueError, match=r"'no\.such-rule' is not in replay\.rules\.RULES"):
        ReplayError("no.such-rule", "x")


def test_image_summaries() -> None:
    assert EMPTY_IMAGE.is_empty and not BASE.is_empty
    assert not replay_batch([_broker(9, 9)], EMPTY_IMAGE).is_empty
    assert BASE.topics.partition_count() == 2 + 1 + 3 + 1 + 1
    # same_state compares every area: an image differing in one only is not the same.
    changes: list[list[Record]] = [
        [FeatureLevelRecord(name="x", feature_level=1)],
        [_broker(9, 9)],
        [NamespaceRecord(namespace_id=NEW, name="other")],
        _change(ORDERS, 0, leader=2),
        _config(ConfigResourceType.BROKER, ""),
    ]
    for records in changes:
        assert not replay_batch(records).same_state(BASE)
    assert replay_batch([]).same_state(BASE)


def test_a_snapshot_writes_metadata_version_first() -> None:
    image = replay_batch([FeatureLevelRecord(name="a.feature", feature_level=3)])
    features = [r for r in image.write() if isinstance(r, FeatureLevelRecord)]
    assert [f.name for f in features] == ["metadata.version", "a.feature"]
