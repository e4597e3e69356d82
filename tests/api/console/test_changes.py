"""An entry in words: the entity it touched, and its values before -> after."""

from __future__ import annotations

from pathlib import Path

import pytest

from api import Metadata
from api.console import changes
from api.console.changes import ENTITY_KINDS, RECORD_ENTITY_KINDS, Reading
from records.entry import LogEntry
from records.model import (
    RECORD_CLASSES,
    ConfigRecord,
    ConfigResourceType,
    MoveTopicRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RemoveTopicRecord,
    TopicRecord,
)
from records.uuids import Uuid
from replay.image import EMPTY_IMAGE, MetadataImage
from replay.timetravel import Names, learn_image

TOPIC = Uuid.parse("6f1c2b3a-0000-4000-8000-0000000000aa")


def _entry(offset: int, record: Record) -> LogEntry:
    return LogEntry(offset=offset, epoch=1, timestamp=1000, principal="User:a", record=record)


def _partition(leader: int) -> PartitionRecord:
    return PartitionRecord(
        partition_id=0,
        topic_id=TOPIC,
        replicas=(1, 2),
        isr=(1, 2),
        leader=leader,
        leader_epoch=0,
        partition_epoch=0,
    )


def test_a_partition_change_says_each_changed_field_before_and_after() -> None:
    reading = Reading(EMPTY_IMAGE)
    created = reading.read(_entry(0, TopicRecord(name="orders", topic_id=TOPIC)))
    assert (created.entity_kind, created.entity, created.kind) == ("topic", "orders", "Topic")
    reading.read(_entry(1, _partition(leader=1)))
    moved = reading.read(
        _entry(2, PartitionChangeRecord(partition_id=0, topic_id=TOPIC, leader=2, isr=(2,)))
    )
    assert (moved.entity_kind, moved.entity) == ("partition", "orders-0")
    assert moved.text == "partition orders-0: leader 1 -> 2, isr [1,2] -> [2]"
    lost = reading.read(_entry(3, PartitionChangeRecord(partition_id=0, topic_id=TOPIC, leader=-1)))
    assert lost.text == "partition orders-0: leader 2 -> none"


def test_a_deleted_topics_entries_keep_its_name() -> None:
    reading = Reading(EMPTY_IMAGE)
    reading.read(_entry(0, TopicRecord(name="orders", topic_id=TOPIC)))
    gone = reading.read(_entry(1, RemoveTopicRecord(topic_id=TOPIC)))
    assert (gone.entity, gone.text) == ("orders", f"deleted topic orders (id {TOPIC})")


def test_a_removed_topics_partitions_are_forgotten_and_the_others_kept() -> None:
    other = Uuid.parse("6f1c2b3a-0000-4000-8000-0000000000bb")
    reading = Reading(EMPTY_IMAGE)
    reading.read(_entry(0, TopicRecord(name="orders", topic_id=TOPIC)))
    reading.read(_entry(1, _partition(leader=1)))
    reading.read(_entry(2, TopicRecord(name="payments", topic_id=other)))
    kept = PartitionRecord(partition_id=0, topic_id=other, replicas=(1, 2), isr=(1, 2), leader=1)
    reading.follow(_entry(3, kept))
    reading.follow(_entry(4, RemoveTopicRecord(topic_id=TOPIC)))
    moved = reading.read(_entry(5, PartitionChangeRecord(partition_id=0, topic_id=other, leader=2)))
    assert moved.text == "partition payments-0: leader 1 -> 2"
    gone = reading.read(_entry(6, PartitionChangeRecord(partition_id=0, topic_id=TOPIC, leader=2)))
    assert "leader 1 -> 2" not in gone.text  # the removed topic's partition: no before


def test_a_config_says_its_value_before_and_after() -> None:
    reading = Reading(EMPTY_IMAGE)
    texts = [
        reading.read(
            _entry(
                i,
                ConfigRecord(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name="orders",
                    name="retention.ms",
                    value=value,
                ),
            )
        ).text
        for i, value in enumerate(("1000", "2000", None))
    ]
    assert texts == [
        "config topic orders: retention.ms set to 1000",
        "config topic orders: retention.ms 1000 -> 2000",
        "config topic orders: retention.ms 2000 -> deleted",
    ]


def test_values_before_come_from_the_image_where_the_reading_starts(history_dir: Path) -> None:
    with Metadata.open(history_dir) as md:
        reading = Reading(md.image(at_offset=8))
        (entry,) = md.read(gt=8, lte=9)
    described = reading.read(entry)
    assert described.text == "config topic orders: retention.ms 86400000 -> 3600000"
    assert described.entity == "topic orders"


def test_every_record_type_has_its_kind_of_entity() -> None:
    assert set(RECORD_ENTITY_KINDS) == set(RECORD_CLASSES)
    assert set(RECORD_ENTITY_KINDS.values()) <= set(ENTITY_KINDS)


def test_names_looked_up_in_the_image_read_as_names_learnt_from_all_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From every point: each entry after it in the same words, names looked up lazily or not."""
    with Metadata.open(tmp_path / "data") as md:
        md.register_broker(1)
        md.create_namespace("org")
        for name in ("a", "b", "org:c"):
            md.create_topic(name, partitions=2, replication_factor=1)
        ids = {t.qualified_name: t.topic_id for t in md.image().topics.by_id.values()}
        md.append([MoveTopicRecord(topic_id=ids["a"], namespace="org")])
        md.append([PartitionChangeRecord(topic_id=ids["a"], partition_id=1, leader=-1)])
        md.delete_topic("b")
        md.create_topic("b", partitions=1, replication_factor=1)  # a new id, the same name
        md.append([MoveTopicRecord(topic_id=ids["org:c"], namespace="")])
        md.delete_topic("org:a")
        entries = list(md.read())
        images = {p: md.image(at_offset=p) for p in range(-1, entries[-1].offset + 1)}

    def learnt(image: MetadataImage) -> Names:
        names = Names()
        learn_image(image, names)
        return names

    for point, image in images.items():
        after = [e for e in entries if e.offset > point]
        lazy_reading = Reading(image)
        lazy = [lazy_reading.read(e) for e in after]
        with monkeypatch.context() as patched:
            patched.setattr(changes, "image_names", learnt)
            eager_reading = Reading(image)
            eager = [eager_reading.read(e) for e in after]
        assert lazy == eager, point
        if point == -1:
            texts = [d.text for d in lazy]
            assert sum("moved" in t for t in texts) == 2 and "<unknown" not in " ".join(texts)
