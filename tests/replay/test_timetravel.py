"""Time travel: image_at by offset and time, diff between two images, history of an entity."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from metadata_log import MetadataLog
from metadata_log.reader import LogReader
from records.model import (
    FeatureLevelRecord,
    MoveTopicRecord,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
)
from records.uuids import Uuid
from replay.image import EMPTY_IMAGE
from replay.loader import load_image
from replay.timetravel import (
    Entity,
    TimeTravelError,
    batch_end,
    diff,
    history,
    image_at,
    offset_at_time,
    parse_time,
    point_offset,
)
from tests.support.timetravel_logs import (
    NS,
    START,
    T1,
    T2,
    T3,
    broker_of,
    known_log,
    retention,
    topic_of,
)


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LogReader]:
    with known_log(tmp_path_factory.mktemp("timetravel") / "log") as reader:
        yield reader


def test_image_at_offsets_and_times(log: MetadataLog) -> None:
    assert image_at(log, at_offset=-1) == EMPTY_IMAGE
    at_5 = image_at(log, at_offset=5)
    assert at_5 == load_image(log, lte=5)
    assert at_5.topics.get_by_name("orders").topic_id == T1  # type: ignore[union-attr]
    # Batch n is appended at START + n*1000 ms; the last entry at or before a time counts.
    assert offset_at_time(log, START - 1) == -1
    assert offset_at_time(log, START + 1500) == 5
    assert image_at(log, at_time=START + 1500) == at_5
    assert image_at(log, at_time="2023-11-14T22:13:21.500Z") == at_5
    assert image_at(log) == load_image(log)
    with pytest.raises(TimeTravelError, match="past the end of the log"):
        image_at(log, at_offset=99)
    with pytest.raises(TimeTravelError, match="not both"):
        image_at(log, at_offset=1, at_time=START)


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", ""])
def test_bad_times_say_what_a_time_looks_like(text: str) -> None:
    with pytest.raises(TimeTravelError, match="ISO-8601"):
        parse_time(text)


def test_a_diff_point_is_an_offset_or_an_iso_time_never_milliseconds(log: MetadataLog) -> None:
    with pytest.raises(TimeTravelError) as error:
        point_offset(log, "yesterday")
    assert str(error.value) == (
        "'yesterday' is neither an offset (an integer) nor an ISO-8601 time "
        "(2026-11-22T08:30:00Z); an integer here is always an offset, not milliseconds"
    )
    # An offset inside an atomic batch is the batch's end: only committed states are shown.
    assert point_offset(log, "1") == batch_end(log, 1) >= 1
    assert point_offset(log, str(batch_end(log, 1))) == batch_end(log, 1)
    assert point_offset(log, "2023-11-14T22:13:20Z") == offset_at_time(log, START)


def test_parse_time_forms() -> None:
    assert parse_time("1700000000000") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_time("2023-11-14T22:13:20") == 1_700_000_000_000
    assert parse_time("2023-11-14T23:13:20+01:00") == 1_700_000_000_000


def test_diff_names_every_kind_of_change(log: MetadataLog) -> None:
    before, after = image_at(log, at_offset=6), image_at(log, at_offset=23)
    lines = [c.text() for c in diff(before, after)]
    assert "~ broker 2: fenced false -> true" in lines
    assert f"+ namespace team (id {NS})" in lines
    assert f"- topic orders (id {T1})" in lines
    assert f"+ topic orders (id {T2}): partitions 3" in lines
    assert f"+ topic team:audit (id {T3}): partitions 3" in lines
    assert "- config topic orders retention.ms: value 1000" in lines
    assert diff(after, after) == []
    middle = image_at(log, at_offset=14)
    changes = {c.name: c for c in diff(before, middle)}
    assert changes["orders-0"].fields == (
        ("isr", [1, 2], [2]),
        ("leader", 1, 2),
        ("leader_epoch", 0, 1),
        ("partition_epoch", 0, 1),
    )
    assert ("mode", "READ_WRITE", "READ_ONLY") in changes["orders-1"].fields
    deletion = {c.kind: c for c in diff(image_at(log, at_offset=19), after)}
    assert (
        deletion["pending_deletion"].text()
        == f"+ pending_deletion team:audit (id {T3}): keep_partitions 1"
    )
    as_json = changes["orders-0"].to_json()
    assert as_json["op"] == "~"
    assert as_json["changes"]["leader"] == {"before": 1, "after": 2}


def test_diff_partitions_added_and_removed() -> None:
    from replay.delta import replay_records
    from replay.image import Provenance

    base = replay_records(
        EMPTY_IMAGE,
        [broker_of(1), broker_of(2), *topic_of("t", T1, 2)],
        Provenance(offset=3, epoch=1, timestamp=0),
    )
    more = replay_records(
        base,
        [PartitionRecord(partition_id=2, topic_id=T1, replicas=(2,), isr=(2,), leader=2)],
        Provenance(offset=4, epoch=1, timestamp=0),
    )
    assert [c.text() for c in diff(base, more)] == ["+ partition t-2: replicas [2]"]
    assert [c.text() for c in diff(more, base)] == ["- partition t-2"]


def test_history_of_a_recreated_topic_shows_each_incarnation(log: MetadataLog) -> None:
    entries = list(history(log, Entity(topic="orders")))
    assert [e.offset for e in entries] == [3, 4, 5, 6, 12, 13, 14, 15, 16, 17, 18, 19]
    assert {e.topic_id for e in entries[:8]} == {str(T1)}
    assert {e.topic_id for e in entries[8:]} == {str(T2)}
    assert entries[0].description == f"created topic orders with id {T1}"
    assert entries[7].description == f"deleted topic orders (id {T1})"
    assert entries[3].description == "config topic orders: retention.ms=1000"
    assert entries[4].description == "partition orders-0: leader -> 2, isr -> [2]"
    assert all(e.principal == "User:alice" for e in entries)
    assert entries[0].timestamp == START + 1000
    by_id = list(history(log, Entity(topic_id=T2)))
    assert [e.offset for e in by_id] == [16, 17, 18, 19]


def test_history_of_a_namespace_and_a_broker(log: MetadataLog) -> None:
    namespace = [e.offset for e in history(log, Entity(namespace="team"))]
    assert namespace == [7, 8]
    broker = list(history(log, Entity(broker=2)))
    assert broker[0].offset == 2
    assert broker[-1].description == "broker 2: fenced"
    assert 12 in [e.offset for e in broker]  # became leader of orders-0
    assert [e.offset for e in history(log, Entity(broker=2), lte=5)] == [2, 4, 5]


def test_history_needs_exactly_one_entity() -> None:
    with pytest.raises(TimeTravelError, match="one entity"):
        Entity(topic="a", broker=1)
    with pytest.raises(TimeTravelError, match="one entity"):
        Entity()


def test_history_and_diff_follow_a_topic_across_a_move(tmp_path: Path) -> None:
    org, apache, events = Uuid.random(), Uuid.random(), Uuid.random()
    batches: list[list[Record]] = [
        [
            FeatureLevelRecord(name="metadata.version", feature_level=1),
            broker_of(1),
            broker_of(2),
        ],
        [NamespaceRecord(namespace_id=org, name="org")],  # 3
        [NamespaceRecord(namespace_id=apache, name="org:apache", parent_id=org)],  # 4
        topic_of("events", events, 1, namespace="org:apache"),  # 5-6
        [retention("org:apache:events", 1000)],  # 7
        [MoveTopicRecord(topic_id=events, namespace="org")],  # 8
        [PartitionChangeRecord(partition_id=0, topic_id=events, leader=2, isr=(2,))],  # 9
        [retention("org:events", 2000)],  # 10
        [MoveTopicRecord(topic_id=events, namespace="")],  # 11
        [PartitionChangeRecord(partition_id=0, topic_id=events, leader=1, isr=(1, 2))],  # 12
    ]
    with MetadataLog.open(tmp_path / "log") as log:
        for batch in batches:
            log.append(batch)
        # By id: every entry, each labelled with the topic's name at that entry.
        by_id = {h.offset: h.description for h in history(log, Entity(topic_id=events))}
        assert sorted(by_id) == [5, 6, 7, 8, 9, 10, 11, 12]
        assert by_id[6].startswith("partition org:apache:events-0:")
        assert by_id[8] == f"moved topic org:apache:events to org:events (id {events})"
        assert by_id[9].startswith("partition org:events-0: leader -> 2")
        assert by_id[11] == f"moved topic org:events to events (id {events})"
        assert by_id[12].startswith("partition events-0: leader -> 1")
        # By name: the entries while the topic had that name, from the move to it on and up
        # to (and with) the move away.
        by_name = [h.offset for h in history(log, Entity(topic="org:events"))]
        assert by_name == [8, 9, 10, 11]
        assert [h.offset for h in history(log, Entity(topic="org:apache:events"))] == [
            5,
            6,
            7,
            8,
        ]
        assert [h.offset for h in history(log, Entity(topic="events"))] == [11, 12]
        assert [h.offset for h in history(log, Entity(namespace="org"))] == [3, 8, 11]
        # A diff across a move says so, under the new name, beside the configs that moved.
        lines = [c.text() for c in diff(image_at(log, at_offset=7), image_at(log, at_offset=10))]
        assert f"~ topic org:events (id {events}): moved org:apache:events -> org:events" in lines
        assert "- config topic org:apache:events retention.ms: value 1000" in lines
        assert "+ config topic org:events retention.ms: value 2000" in lines
        assert any(line.startswith("~ partition org:events-0: isr [1,2] -> [2]") for line in lines)
        moved = next(c for c in diff(image_at(log, at_offset=7), image_at(log, at_offset=8)))
        assert moved.to_json()["changes"] == {
            "moved": {"before": "org:apache:events", "after": "org:events"}
        }
