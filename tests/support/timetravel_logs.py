"""A log of known batches for the time-travel tests."""

from __future__ import annotations

from records.model import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    FencingChange,
    Mode,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from records.uuids import Uuid

T1, T2, T3, NS = Uuid.random(), Uuid.random(), Uuid.random(), Uuid.random()


START = 1_700_000_000_000


def broker_of(broker_id: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=Uuid.random(), broker_epoch=broker_id, fenced=False
    )


def topic_of(name: str, topic_id: Uuid, partitions: int, namespace: str = "") -> list[Record]:
    out: list[Record] = [TopicRecord(name=name, topic_id=topic_id, namespace=namespace)]
    out += [
        PartitionRecord(partition_id=p, topic_id=topic_id, replicas=(1, 2), isr=(1, 2), leader=1)
        for p in range(partitions)
    ]
    return out


BATCHES: list[list[Record]] = [
    [
        FeatureLevelRecord(name="metadata.version", feature_level=1),
        broker_of(1),
        broker_of(2),
    ],  # 0-2
    topic_of("orders", T1, 2),  # 3-5
    [
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="orders",
            name="retention.ms",
            value="1000",
        )
    ],  # 6
    [NamespaceRecord(namespace_id=NS, name="team")],  # 7
    topic_of("audit", T3, 3, namespace="team"),  # 8-11
    [PartitionChangeRecord(partition_id=0, topic_id=T1, leader=2, isr=(2,))],  # 12
    [
        DeleteTopicPartitionsRecord(
            topic_id=T1, partition_count=1, delete_after_ms=9, created_ms=1
        ),
        PartitionChangeRecord(partition_id=1, topic_id=T1, mode=Mode.READ_ONLY),
    ],  # 13-14
    [RemoveTopicRecord(topic_id=T1)],  # 15
    topic_of("orders", T2, 3),  # 16-19
    [
        DeleteTopicPartitionsRecord(
            topic_id=T3, partition_count=1, delete_after_ms=9, created_ms=1
        ),
        PartitionChangeRecord(partition_id=1, topic_id=T3, mode=Mode.READ_ONLY),
        PartitionChangeRecord(partition_id=2, topic_id=T3, mode=Mode.READ_ONLY),
    ],  # 20-22
    [BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=2, fenced=FencingChange.FENCE)],  # 23
]
