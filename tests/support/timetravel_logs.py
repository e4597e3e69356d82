"""A log of known batches for the time-travel tests, and the records they describe.

`BATCHES` appended one a second from `START` (`known_log`) is the log most of them travel in;
`timed_log` opens any log whose entry n is appended at `START + n * 1000` ms.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path

from metadata_log import LogConfig, MetadataLog
from metadata_log.reader import LogReader
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
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
    PatternType,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    ResourceType,
    TopicRecord,
)
from records.uuids import Uuid
from replay.timetravel import Names

T1, T2, T3 = Uuid.random(), Uuid.random(), Uuid.random()
NS = Uuid(bytes([5] * 16))
"""The id of namespace "team" (in BATCHES and `names()`)."""
ACL = Uuid(bytes([6] * 16))
"""The id of `acl()`'s ACL."""

START = 1_700_000_000_000
"""When the first append of a `timed_log` happens (2023-11-14T22:13:20Z)."""


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


def retention(topic: str, ms: int) -> ConfigRecord:
    """`retention.ms` set to `ms` on the topic of that full name."""
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC,
        resource_name=topic,
        name="retention.ms",
        value=str(ms),
    )


BATCHES: list[list[Record]] = [
    [
        FeatureLevelRecord(name="metadata.version", feature_level=1),
        broker_of(1),
        broker_of(2),
    ],  # 0-2
    topic_of("orders", T1, 2),  # 3-5
    [retention("orders", 1000)],  # 6
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


def timed_log(directory: Path, *, config: LogConfig | None = None) -> MetadataLog:
    """The log in `directory`, whose appends happen at START, START + 1000 ms, ... in turn."""
    ticks = count(START, 1000)
    return MetadataLog.open(directory, config=config, clock_ms=lambda: next(ticks))


@contextmanager
def known_log(directory: Path) -> Iterator[LogReader]:
    """`BATCHES` by User:alice in a `timed_log` (batch n at START + n * 1000 ms), read back."""
    with timed_log(directory) as writer:
        for batch in BATCHES:
            writer.append(batch, principal="User:alice")
    with LogReader.open(directory) as reader:
        yield reader


def names() -> Names:
    """What `describe` knows by name: topic T1 is "orders", namespace NS "team"."""
    known = Names()
    known.topics[T1] = "orders"
    known.namespaces[NS] = "team"
    return known


def acl(acl_id: Uuid = ACL, **fields: object) -> AccessControlEntryRecord:
    """An ACL: User:bob may READ topic "orders" (LITERAL) from any host, but for `fields`."""
    values: dict[str, object] = {
        "id": acl_id,
        "resource_type": ResourceType.TOPIC,
        "resource_name": "orders",
        "pattern_type": PatternType.LITERAL,
        "principal": "User:bob",
        "host": "*",
        "operation": AclOperation.READ,
        "permission_type": AclPermissionType.ALLOW,
        **fields,
    }
    return AccessControlEntryRecord(**values)  # type: ignore[arg-type]  # test keywords


def acl_on(kind: ResourceType, name: str) -> AccessControlEntryRecord:
    """`acl()` on another resource."""
    return acl(resource_type=kind, resource_name=name)


def change(**fields: object) -> PartitionChangeRecord:
    """A change of partition orders-0 (T1's partition 0) with `fields`."""
    return PartitionChangeRecord(partition_id=0, topic_id=T1, **fields)  # type: ignore[arg-type]
