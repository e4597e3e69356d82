"""Time travel's pieces one at a time: every description `mlog history` prints, what touches a
broker, a namespace or a user, each area of `diff`, the ranges of the History and Diff APIs and
the boundaries of a point in time (what a mutation run of `replay/timetravel.py` found unpinned).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import replace
from itertools import count
from pathlib import Path

import pytest

from metadata_log import LogConfig, MetadataLog
from metadata_log.reader import LogReader
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
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
    PartitionChangeRecord,
    PartitionRecord,
    PatternType,
    PurgeTopicPartitionsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveNamespaceRecord,
    RemoveTopicRecord,
    ResourceType,
    ScramMechanism,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from records.uuids import Uuid
from replay.delta import replay_records
from replay.errors import TrimmedLogError
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance
from replay.loader import load_image
from replay.sql.store import SnapshotStore
from replay.timetravel import (
    Entity,
    Names,
    TimeTravelError,
    describe,
    diff,
    diff_points,
    history,
    history_range,
    parse_time,
    resolve_offset,
    snapshot_matches_log,
    travel,
)
from replay.timetravel.entity_history import _touches
from tests.support.timetravel_logs import (
    BATCHES,
    START,
    T1,
    T3,
    broker_of,
    topic_of,
)

NS = Uuid(bytes([5] * 16))
TRIM_CONFIG = LogConfig(segment_ms=1000)
ACL = Uuid(bytes([6] * 16))


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LogReader]:
    """test_timetravel's log: batch n appended at START + n * 1000 ms."""
    directory = tmp_path_factory.mktemp("units") / "log"
    ticks = count(START, 1000)
    with MetadataLog.open(directory, clock_ms=lambda: next(ticks)) as writer:
        for batch in BATCHES:
            writer.append(batch, principal="User:alice")
    with LogReader.open(directory) as reader:
        yield reader


def _names() -> Names:
    names = Names()
    names.topics[T1] = "orders"
    names.namespaces[NS] = "team"
    return names


def _acl() -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=ACL,
        resource_type=ResourceType.TOPIC,
        resource_name="orders",
        pattern_type=PatternType.LITERAL,
        principal="User:bob",
        host="*",
        operation=AclOperation.READ,
        permission_type=AclPermissionType.ALLOW,
    )


def _change(**fields: object) -> PartitionChangeRecord:
    return PartitionChangeRecord(partition_id=0, topic_id=T1, **fields)  # type: ignore[arg-type]


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
        (_change(), "partition orders-0: no field changed"),
        (_change(leader=-1), "partition orders-0: leader -> none"),
        (_change(leader=0), "partition orders-0: leader -> 0"),
        (_change(leader=3, isr=(3,)), "partition orders-0: leader -> 3, isr -> [3]"),
        (
            _change(replicas=(1, 2, 3), adding_replicas=(3,), removing_replicas=()),
            "partition orders-0: replicas -> [1,2,3], adding -> [3], removing -> []",
        ),
        (
            _change(mode=Mode.READ_ONLY, partition_epoch=4),
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
            _acl(),
            f"added ACL {ACL}: ALLOW User:bob READ on topic orders (LITERAL) from host *",
        ),
    ],
    # Ids by record type: some texts hold random topic ids, and pytest-xdist's workers must
    # collect the same ids.
    ids=lambda value: "text" if isinstance(value, str) else type(value).__name__,
)
def test_every_record_is_described_in_one_line(record: Record, text: str) -> None:
    assert describe(record, _names()) == text


def _touched(record: Record, entity: Entity, names: Names | None = None) -> bool:
    return _touches(record, entity, names or _names(), set())[0]


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
        (_change(leader=3), True),
        (_change(isr=(1, 3)), True),
        (_change(replicas=(3,)), True),
        (_change(adding_replicas=(3,)), True),
        (_change(removing_replicas=(3,)), True),
        (_change(leader=1, isr=(1,), replicas=(1, 2), adding_replicas=(2,)), False),
        (_change(), False),
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
    assert _touched(_acl(), bob) and not _touched(_acl(), alice)
    credential = UserScramCredentialRecord(
        name="alice",
        mechanism=ScramMechanism.SCRAM_SHA_256,
        salt=b"s",
        stored_key=b"k",
        server_key=b"k",
        iterations=4096,
    )
    assert _touched(credential, alice) and not _touched(credential, bob)
    for record in (broker_of(1), *topic_of("orders", T1, 1), _change(leader=1)):
        assert _touches(record, alice, _names(), set()) == (False, None)


def test_security_records_touch_a_namespace_a_topic_and_a_topic_id_by_their_resource() -> None:
    on_namespace = _acl_on(ResourceType.NAMESPACE, "team")
    assert _touched(on_namespace, Entity(namespace="team"))
    assert not _touched(on_namespace, Entity(namespace="other"))
    assert not _touched(on_namespace, Entity(topic="team"))
    assert _touched(_acl(), Entity(topic="orders"))
    assert _touched(_acl(), Entity(topic_id=T1))  # its name, as of the entry
    assert not _touched(_acl(), Entity(topic_id=NS))  # an id never seen has no name
    assert not _touched(_acl(), Entity(topic="other"))


def _acl_on(kind: ResourceType, name: str) -> AccessControlEntryRecord:
    return replace(_acl(), resource_type=kind, resource_name=name)


def test_a_user_to_follow_needs_a_name() -> None:
    with pytest.raises(TimeTravelError, match=r"a user to follow needs a name, e\.g\. alice"):
        Entity(user="")


def _image(records: list[Record], base: MetadataImage = EMPTY_IMAGE) -> MetadataImage:
    offset = base.provenance.offset + len(records)
    return replay_records(base, records, Provenance(offset=offset, epoch=1, timestamp=0))


def test_diff_of_features_brokers_namespaces_and_security() -> None:
    base = _image(
        [
            FeatureLevelRecord(name="metadata.version", feature_level=1),
            FeatureLevelRecord(name="kraft.version", feature_level=1),
            broker_of(1),
            broker_of(2),
            NamespaceRecord(namespace_id=NS, name="team"),
        ]
    )
    credential = UserScramCredentialRecord(
        name="alice",
        mechanism=ScramMechanism.SCRAM_SHA_256,
        salt=b"salt",
        stored_key=bytes(32),
        server_key=bytes(32),
        iterations=4096,
    )
    later = _image(
        [
            FeatureLevelRecord(name="metadata.version", feature_level=2),
            FeatureLevelRecord(name="group.version", feature_level=1),
            broker_of(3),
            RemoveNamespaceRecord(namespace_id=NS),
            credential,
            _acl_on(ResourceType.GROUP, "g"),
        ],
        base,
    )
    lines = [c.text() for c in diff(base, later)]
    assert lines[:5] == [
        "+ feature group.version: level 1",
        "~ feature metadata.version: level 1 -> 2",
        "+ broker 3",
        f"- namespace team (id {NS})",
        "+ credential alice SCRAM-SHA-256: iterations 4096",
    ]
    assert lines[5].startswith(f"+ acl group g (id {ACL}): permission ALLOW; principal User:bob")
    assert len(lines) == 6
    back = [c.text() for c in diff(later, base)]
    assert back[:4] == [
        "- feature group.version: level 1",
        "~ feature metadata.version: level 2 -> 1",
        "- broker 3",
        f"+ namespace team (id {NS})",
    ]
    assert diff(base, base) == [] and diff(later, later) == []


def test_history_range_takes_offsets_after_gt_up_to_lte_and_a_limit(log: MetadataLog) -> None:
    orders = Entity(topic="orders")
    every = [e.offset for e in history_range(log, orders)]
    assert every == [3, 4, 5, 6, 12, 13, 14, 15, 16, 17, 18, 19]
    assert [e.offset for e in history_range(log, orders, gt=6)] == every[4:]
    assert [e.offset for e in history_range(log, orders, gt=5, lte=13)] == [6, 12, 13]
    assert [e.offset for e in history_range(log, orders, gt=4, limit=2)] == [5, 6]
    assert [e.offset for e in history_range(log, orders, limit=1)] == [3]
    assert history_range(log, orders, limit=0) == []


def test_diff_points_in_either_order_and_to_the_end(log: MetadataLog) -> None:
    start, end, forward = diff_points(log, None, "6", "15")
    assert (start, end) == (6, 15)
    assert f"- topic orders (id {T1})" in [c.text() for c in forward]
    start, end, backward = diff_points(log, None, "15", "6")
    assert (start, end) == (15, 6)
    assert f"+ topic orders (id {T1}): partitions 2" in [c.text() for c in backward]
    start, end, to_end = diff_points(log, None, "22", None)
    assert (start, end) == (22, log.end_offset - 1) == (22, 23)
    assert [c.text() for c in to_end] == ["~ broker 2: fenced false -> true"]
    assert diff_points(log, None, "23", None) == (23, 23, [])
    # A pending deletion that appears, and (the other way) one that goes.
    _, _, added = diff_points(log, None, "19", "20")
    _, _, gone = diff_points(log, None, "20", "19")
    assert [c.text() for c in added if c.kind == "pending_deletion"] == [
        f"+ pending_deletion team:audit (id {T3}): keep_partitions 1"
    ]
    assert [c.text() for c in gone if c.kind == "pending_deletion"] == [
        f"- pending_deletion team:audit (id {T3}): keep_partitions 1"
    ]


def test_points_in_time_at_each_boundary(log: MetadataLog) -> None:
    # Batch 0 (offsets 0-2) at START, batch 1 (3-5) at START + 1000, ...
    with pytest.raises(TimeTravelError, match="before the log's first entry"):
        resolve_offset(log, at_time=START - 1)  # an empty image would be a state never shown
    assert resolve_offset(log, at_time=START) == 2
    assert resolve_offset(log, at_time=START + 999) == 2
    assert resolve_offset(log, at_time=START + 1000) == 5
    assert resolve_offset(log, at_time=START + 10**9) == 23
    assert resolve_offset(log) == 23
    assert resolve_offset(log, at_offset=-1) == -1
    with pytest.raises(TimeTravelError, match=r"^offset -2 is not an offset \(must be >= -1\)$"):
        resolve_offset(log, at_offset=-2)


def test_the_first_entry_is_an_image_and_minus_one_the_empty_one(log: MetadataLog) -> None:
    first = travel(log, None, at_offset=0)
    assert first.image.provenance.offset == 0 and first.replayed == 1
    assert 0 <= first.replay_seconds < 60
    assert dict(first.image.features.levels) == {"metadata.version": 1}
    empty = travel(log, None, at_offset=-1)
    assert empty.image is EMPTY_IMAGE and empty.replayed == 0
    assert (empty.load_seconds, empty.replay_seconds) == (0, 0)


def test_a_naive_time_is_utc_whatever_the_local_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        assert parse_time("2023-11-14T22:13:20") == 1_700_000_000_000
    finally:
        monkeypatch.undo()
        time.tzset()


def test_a_snapshot_of_another_log_is_skipped_with_a_warning_and_timed(
    log: MetadataLog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A snapshot whose entry does not match is skipped and said so; a good one is timed."""
    with SnapshotStore(f"sqlite:///{tmp_path / 'snapshots.db'}") as store:
        bad = store.write(load_image(log, lte=12).with_timestamp(START - 5))  # another log's
        assert snapshot_matches_log(log, bad) is False
        assert snapshot_matches_log(log, replace(bad, offset=log.end_offset)) is False
        reason = f"snapshot {bad.id} (offset 12) was not taken from this log"
        with caplog.at_level(logging.WARNING):
            alone = travel(log, store, at_offset=13)
        assert alone.snapshot is None and alone.replayed == 14
        assert alone.skipped == (reason,) and reason in caplog.text
        assert 0 <= alone.load_seconds < 60
        good = store.write(load_image(log, lte=6))
        assert snapshot_matches_log(log, good) is True
        answer = travel(log, store, at_offset=13)
        assert answer.snapshot is not None and answer.snapshot.id == good.id
        assert answer.replayed == 7 and 0 < answer.load_seconds < 60
        assert answer.skipped == (reason,)


@pytest.fixture
def start_8(tmp_path: Path) -> Iterator[tuple[MetadataLog, SnapshotStore, Path]]:
    """Single-entry segments 0..10, snapshots at 0-4 and 6, the log trimmed to start at 8."""
    ticks = count(START, 1000)
    with MetadataLog.open(
        tmp_path / "log", config=TRIM_CONFIG, clock_ms=lambda: next(ticks)
    ) as writer:
        writer.append([FeatureLevelRecord(name="metadata.version", feature_level=1)])
        for broker_id in range(1, 11):
            writer.append([broker_of(broker_id)])
    database = tmp_path / "snapshots.db"
    with (
        MetadataLog.open(tmp_path / "log", config=TRIM_CONFIG) as log,
        SnapshotStore(f"sqlite:///{database}") as store,
    ):
        for offset in (0, 1, 2, 3, 4, 6):
            store.write(load_image(log, lte=offset))
        log.trim_before(8)
        assert log.log_start_offset == 8
        yield log, store, database


def test_a_refusal_before_the_start_lists_the_newest_five_snapshots(
    start_8: tuple[MetadataLog, SnapshotStore, Path],
) -> None:
    log, store, _ = start_8
    # 5 has no snapshot of its own: refused, not answered by the one at 4 before it.
    with pytest.raises(TimeTravelError) as caught:
        travel(log, store, at_offset=5)
    assert str(caught.value).endswith(
        "the database holds snapshots at offsets 1, 2, 3, 4, 6 (newest five) there"
    )


def test_snapshots_older_than_the_start_are_not_checked_or_warned_about(
    start_8: tuple[MetadataLog, SnapshotStore, Path], caplog: pytest.LogCaptureFixture
) -> None:
    log, store, _ = start_8
    with caplog.at_level(logging.WARNING), pytest.raises(TrimmedLogError):
        travel(log, store, at_offset=9)
    assert "not taken from this log" not in caplog.text
    # start - 1 has no entry and no snapshot: what it needs is gone, said as replay says it.
    with pytest.raises(TrimmedLogError):
        travel(log, None, at_offset=7)


def test_a_damaged_snapshot_at_a_trimmed_offset_is_a_warning_and_a_refusal(
    start_8: tuple[MetadataLog, SnapshotStore, Path], caplog: pytest.LogCaptureFixture
) -> None:
    log, store, database = start_8
    assert travel(log, store, at_offset=3).snapshot is not None
    with sqlite3.connect(database) as conn:
        conn.execute("UPDATE snapshot_brokers SET rack = 'changed' WHERE broker_id = 1")
    conn.close()
    with caplog.at_level(logging.WARNING), pytest.raises(TimeTravelError, match="offset 3 is"):
        travel(log, store, at_offset=3)
    assert "checksum" in caplog.text


def test_an_unreadable_database_is_a_warning_and_the_log_alone(
    start_8: tuple[MetadataLog, SnapshotStore, Path], caplog: pytest.LogCaptureFixture
) -> None:
    log, store, database = start_8
    with sqlite3.connect(database) as conn:
        conn.execute("DROP TABLE snapshots")
    conn.close()
    with caplog.at_level(logging.WARNING), pytest.raises(TimeTravelError, match="offset 3 is"):
        travel(log, store, at_offset=3)
    assert "snapshots" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING), pytest.raises(TrimmedLogError):
        travel(log, store, at_offset=9)
    assert "replaying the log from the start" in caplog.text


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
