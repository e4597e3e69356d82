"""What touches a broker, a namespace, a topic or a user, and the History API's ranges.

`replay/timetravel/entity_history.py`, record by record.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from metadata_log import MetadataLog
from metadata_log.reader import LogReader
from records.model import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    NamespaceRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveNamespaceRecord,
    RemoveTopicRecord,
    ResourceType,
    ScramMechanism,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from replay.loader import load_image
from replay.timetravel import (
    Entity,
    TimeTravelError,
    history,
    history_range,
)
from replay.timetravel.entity_history import _touches
from tests.support.timetravel_logs import (
    NS,
    T1,
    acl,
    acl_on,
    broker_of,
    change,
    known_log,
    names,
    topic_of,
)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LogReader]:
    with known_log(tmp_path_factory.mktemp("timetravel") / "log") as reader:
        yield reader


def _touched(record: Record, entity: Entity) -> bool:
    return _touches(record, entity, names(), set())[0]


BROKER_3 = Entity(broker=3)


@pytest.mark.parametrize(
    ("record", "touched"),
    [
        (RegisterBrokerRecord(broker_id=3, incarnation_id=NS, broker_epoch=1), True),
        (RegisterBrokerRecord(broker_id=4, incarnation_id=NS, broker_epoch=1), False),
        (UnregisterBrokerRecord(broker_id=3, broker_epoch=1), True),
        (BrokerRegistrationChangeRecord(broker_id=3, broker_epoch=1), True),
        (
            ConfigRecord(
                resource_type=ConfigResourceType.BROKER, resource_name="3", name="k", value="v"
            ),
            True,
        ),
        (
            ConfigRecord(
                resource_type=ConfigResourceType.BROKER, resource_name="4", name="k", value="v"
            ),
            False,
        ),
        (
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC, resource_name="3", name="k", value="v"
            ),
            False,
        ),
        (PartitionRecord(partition_id=0, topic_id=T1, replicas=(1, 3), isr=(1,), leader=1), True),
        (PartitionRecord(partition_id=0, topic_id=T1, replicas=(1, 2), isr=(1,), leader=3), True),
        (PartitionRecord(partition_id=0, topic_id=T1, replicas=(1, 2), isr=(1,), leader=1), False),
        (change(leader=3), True),
        (change(isr=(1, 3)), True),
        (change(replicas=(3,)), True),
        (change(adding_replicas=(3,)), True),
        (change(removing_replicas=(3,)), True),
        (change(leader=1, isr=(1,), replicas=(1, 2), adding_replicas=(2,)), False),
        (change(), False),
        (FeatureLevelRecord(name="metadata.version", feature_level=3), False),
    ],
)
def test_what_touches_a_broker(record: Record, touched: bool) -> None:
    assert _touched(record, BROKER_3) is touched


def test_what_touches_a_namespace() -> None:
    team = Entity(namespace="team")
    assert _touched(RemoveNamespaceRecord(namespace_id=NS), team)
    assert not _touched(RemoveNamespaceRecord(namespace_id=T1), team)
    config = {"resource_name": "team", "name": "k", "value": "v"}
    assert _touched(ConfigRecord(resource_type=ConfigResourceType.NAMESPACE, **config), team)
    assert not _touched(ConfigRecord(resource_type=ConfigResourceType.TOPIC, **config), team)
    other = {**config, "resource_name": "other"}
    assert not _touched(ConfigRecord(resource_type=ConfigResourceType.NAMESPACE, **other), team)
    assert not _touched(broker_of(1), team)


def test_a_user_is_touched_only_by_its_security_records() -> None:
    bob, alice = Entity(user="bob"), Entity(user="alice")
    assert _touched(acl(), bob) and not _touched(acl(), alice)
    credential = UserScramCredentialRecord(
        name="alice",
        mechanism=ScramMechanism.SCRAM_SHA_256,
        salt=b"s",
        stored_key=b"k",
        server_key=b"k",
        iterations=4096,
    )
    assert _touched(credential, alice) and not _touched(credential, bob)
    for record in (broker_of(1), *topic_of("orders", T1, 1), change(leader=1)):
        assert _touches(record, alice, names(), set()) == (False, None)


def test_security_records_touch_a_namespace_a_topic_and_a_topic_id_by_their_resource() -> None:
    on_namespace = acl_on(ResourceType.NAMESPACE, "team")
    assert _touched(on_namespace, Entity(namespace="team"))
    assert not _touched(on_namespace, Entity(namespace="other"))
    assert not _touched(on_namespace, Entity(topic="team"))
    assert _touched(acl(), Entity(topic="orders"))
    assert _touched(acl(), Entity(topic_id=T1))  # its name, as of the entry
    assert not _touched(acl(), Entity(topic_id=NS))  # an id never seen has no name
    assert not _touched(acl(), Entity(topic="other"))


def test_a_user_to_follow_needs_a_name() -> None:
    with pytest.raises(TimeTravelError, match=r"a user to follow needs a name, e\.g\. alice"):
        Entity(user="")


def test_history_range_takes_offsets_after_gt_up_to_lte_and_a_limit(log: MetadataLog) -> None:
    orders = Entity(topic="orders")
    every = [e.offset for e in history_range(log, orders)]
    assert every == [3, 4, 5, 6, 12, 13, 14, 15, 16, 17, 18, 19]
    assert [e.offset for e in history_range(log, orders, gt=6)] == every[4:]
    assert [e.offset for e in history_range(log, orders, gt=5, lte=13)] == [6, 12, 13]
    assert [e.offset for e in history_range(log, orders, gt=4, limit=2)] == [5, 6]
    assert [e.offset for e in history_range(log, orders, limit=1)] == [3]
    assert history_range(log, orders, limit=0) == []


def test_a_namespace_history_keeps_its_topics_and_its_own_removal(tmp_path: Path) -> None:
    records: list[Record] = [
        broker_of(1),
        NamespaceRecord(namespace_id=NS, name="team"),
        *topic_of("a", T1, 1, namespace="team"),
        RemoveTopicRecord(topic_id=T1),
        RemoveNamespaceRecord(namespace_id=NS),
    ]
    with MetadataLog.open(tmp_path / "log") as writer:
        writer.append(records, principal="User:alice")
        load_image(writer)  # a history any controller could write
        entries = list(history(writer, Entity(namespace="team")))
    assert [(e.offset, e.description) for e in entries] == [
        (1, f"created namespace team with id {NS}"),
        (2, f"created topic team:a with id {T1}"),
        (4, f"deleted topic team:a (id {T1})"),
        (5, f"deleted namespace team (id {NS})"),
    ]
