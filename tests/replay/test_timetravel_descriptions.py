"""Every description `mlog history` prints (`replay/timetravel/descriptions.py`)."""

from __future__ import annotations

import pytest

from records.model import (
    BrokerRegistrationChangeRecord,
    CancelTopicPartitionsDeletionRecord,
    ConfigRecord,
    ConfigResourceType,
    ControlledShutdownChange,
    FeatureLevelRecord,
    FencingChange,
    LeaderChangeRecord,
    Mode,
    NamespaceRecord,
    PartitionRecord,
    PurgeTopicPartitionsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveNamespaceRecord,
    UnregisterBrokerRecord,
)
from replay.timetravel import (
    describe,
    descriptions,
)
from tests.support.timetravel_logs import (
    ACL,
    NS,
    T1,
    acl,
    change,
    names,
)


@pytest.mark.parametrize(
    ("record", "text"),
    [
        (
            PartitionRecord(partition_id=0, topic_id=T1, replicas=(1, 2), isr=(1,), leader=-1),
            "partition orders-0: replicas [1,2], isr [1], leader none, mode READ_WRITE",
        ),
        (
            PartitionRecord(partition_id=1, topic_id=T1, replicas=(0,), isr=(0,), leader=0),
            "partition orders-1: replicas [0], isr [0], leader 0, mode READ_WRITE",
        ),
        (change(), "partition orders-0: no field changed"),
        (change(leader=-1), "partition orders-0: leader -> none"),
        (change(leader=0), "partition orders-0: leader -> 0"),
        (change(leader=3, isr=(3,)), "partition orders-0: leader -> 3, isr -> [3]"),
        (
            change(replicas=(1, 2, 3), adding_replicas=(3,), removing_replicas=()),
            "partition orders-0: replicas -> [1,2,3], adding -> [3], removing -> []",
        ),
        (
            change(mode=Mode.READ_ONLY, partition_epoch=4),
            "partition orders-0: mode -> READ_ONLY, partition epoch -> 4",
        ),
        (
            ConfigRecord(
                resource_type=ConfigResourceType.BROKER, resource_name="", name="k", value="v"
            ),
            "config broker <cluster>: k=v",
        ),
        (
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC, resource_name="t", name="k", value=None
            ),
            "config topic t: delete k",
        ),
        (
            NamespaceRecord(namespace_id=NS, name="team"),
            f"created namespace team with id {NS}",
        ),
        (RemoveNamespaceRecord(namespace_id=NS), f"deleted namespace team (id {NS})"),
        (
            RemoveNamespaceRecord(namespace_id=T1),
            f"deleted namespace <unknown {T1}> (id {T1})",
        ),
        (
            RegisterBrokerRecord(broker_id=4, incarnation_id=NS, broker_epoch=7, fenced=True),
            "registered broker 4 (epoch 7, rack -, fenced)",
        ),
        (
            RegisterBrokerRecord(
                broker_id=4, incarnation_id=NS, broker_epoch=7, rack="r1", fenced=False
            ),
            "registered broker 4 (epoch 7, rack r1, unfenced)",
        ),
        (UnregisterBrokerRecord(broker_id=4, broker_epoch=7), "unregistered broker 4"),
        (
            BrokerRegistrationChangeRecord(broker_id=4, broker_epoch=7, fenced=FencingChange.FENCE),
            "broker 4: fenced",
        ),
        (
            BrokerRegistrationChangeRecord(
                broker_id=4,
                broker_epoch=7,
                fenced=FencingChange.UNFENCE,
                in_controlled_shutdown=ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN,
            ),
            "broker 4: unfenced, in controlled shutdown",
        ),
        (BrokerRegistrationChangeRecord(broker_id=4, broker_epoch=7), "broker 4: no change"),
        (
            FeatureLevelRecord(name="metadata.version", feature_level=3),
            "feature metadata.version level 3",
        ),
        (
            PurgeTopicPartitionsRecord(topic_id=T1, partition_count=2),
            "removed partitions 2 and above of orders (pending deletion done)",
        ),
        (
            CancelTopicPartitionsDeletionRecord(topic_id=T1, partition_count=2),
            "cancelled the pending deletion of orders to 2 partitions",
        ),
        (
            LeaderChangeRecord(leader_id=2, voters=(1, 2, 3), granting_voters=(2, 3)),
            "node 2 leads the controller quorum (voters [1,2,3], granted by [2,3])",
        ),
        (
            acl(),
            f"added ACL {ACL}: ALLOW User:bob READ on topic orders (LITERAL) from host *",
        ),
    ],
    # Ids by record type: some texts hold random topic ids, and pytest-xdist's workers must
    # collect the same ids.
    ids=lambda value: "text" if isinstance(value, str) else type(value).__name__,
)
def test_every_record_is_described_in_one_line(record: Record, text: str) -> None:
    assert describe(record, names()) == text


@pytest.mark.parametrize(
    ("values", "text"),
    [(None, "[]"), ((), "[]"), ((3,), "[3]"), ((1, 2, 3), "[1,2,3]"), ([4, 5], "[4,5]")],
)
def test_broker_lists_are_written_the_same_whether_remembered_or_not(
    values: tuple[int, ...] | None, text: str
) -> None:
    assert descriptions._ints(values) == text
    assert descriptions._ints(values) == text  # the second time from the memo
    # Past its bound the memo starts again: what it writes does not change.
    for n in range(descriptions._INTS_TEXT_MAX + 3):
        assert descriptions._ints((n, n + 1)) == f"[{n},{n + 1}]"
    assert len(descriptions._INTS_TEXT) <= descriptions._INTS_TEXT_MAX
