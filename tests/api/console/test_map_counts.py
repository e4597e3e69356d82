"""The map's namespace counts carried from image to image equal a fresh count of each."""

from __future__ import annotations

import contextlib
import copy
import random
from pathlib import Path

from api import Metadata
from api.console.map_counts import Cell, NamespaceCounts, Row, merge
from records.model import NO_LEADER, DeleteTopicPartitionsRecord, Mode, PartitionChangeRecord
from replay.delta import MetadataDelta
from replay.errors import ReplayError
from replay.image import MetadataImage, Provenance


def _fresh(image: MetadataImage) -> dict[str, Row]:
    return NamespaceCounts().of(image)


def _random_change(md: Metadata, rng: random.Random, step: int) -> None:
    image = md.image()
    topics = list(image.topics.by_id.values())
    roll = rng.random()
    if roll < 0.2 or not topics:
        namespace = rng.choice(["", "org", "org:team"])
        name = f"{namespace}:t{step}" if namespace else f"t{step}"
        md.create_topic(name, partitions=rng.randint(1, 4), replication_factor=rng.randint(1, 3))
    elif roll < 0.3:
        md.delete_topic(rng.choice(topics).qualified_name)
    else:
        topic = rng.choice(topics)
        part = rng.choice(topic.partitions)
        change = rng.choice(["offline", "short", "mode", "leader"])
        if change == "offline":
            record = PartitionChangeRecord(
                topic_id=topic.topic_id, partition_id=part.partition_id, leader=NO_LEADER
            )
        elif change == "short":
            record = PartitionChangeRecord(
                topic_id=topic.topic_id, partition_id=part.partition_id, isr=part.replicas[:1]
            )
        elif change == "mode" and len(topic.partitions) > 1:
            # A mode changes only on the way to a partition's deletion.
            cut = DeleteTopicPartitionsRecord(
                topic_id=topic.topic_id, partition_count=1, delete_after_ms=0, created_ms=0
            )
            last = topic.partitions[-1].partition_id
            mode = PartitionChangeRecord(
                topic_id=topic.topic_id, partition_id=last, mode=Mode.READ_ONLY
            )
            with contextlib.suppress(ReplayError):  # already being cut: refused, not appended
                md.append([cut, mode])
            return
        elif change == "mode":
            return
        else:
            record = PartitionChangeRecord(
                topic_id=topic.topic_id,
                partition_id=part.partition_id,
                leader=rng.choice(part.replicas),
                isr=part.replicas,
            )
        with contextlib.suppress(ReplayError):  # a partition being cut refuses some changes
            md.append([record])


def _next(md: Metadata, image: MetadataImage) -> MetadataImage:
    """`image` with the entries appended after it: sharing what they did not touch."""
    entries = list(md.read(gt=image.provenance.offset))
    if not entries:
        return image
    delta = MetadataDelta(image)
    delta.replay_all([e.record for e in entries])
    last = entries[-1]
    return delta.apply(Provenance(offset=last.offset, epoch=last.epoch, timestamp=last.timestamp))


def test_counts_carried_through_random_changes_equal_a_fresh_count(tmp_path: Path) -> None:
    rng = random.Random(7)
    counts = NamespaceCounts()
    with Metadata.open(tmp_path / "data") as md:
        for broker in (1, 2, 3, 4):
            md.register_broker(broker, rack=f"r{broker % 2}")
        md.create_namespace("org")
        md.create_namespace("org:team")
        for n in range(40):
            md.create_topic(f"org:seed{n}", partitions=3, replication_factor=2)
        image = md.image()
        assert counts.of(image) == _fresh(image)
        for step in range(150):
            _random_change(md, rng, step)
            image = _next(md, image)
            assert counts.of(image) == _fresh(image), f"step {step}"
        assert image == md.image()
    # One count of every topic at the start; each step after it carried (a change or two).
    assert counts.recounts == 1


def test_counts_handed_out_are_never_changed_by_the_next_image(tmp_path: Path) -> None:
    counts = NamespaceCounts()
    with Metadata.open(tmp_path / "data") as md:
        md.register_broker(1)
        for n in range(8):
            md.create_topic(f"t{n}", partitions=2, replication_factor=1)
        first = counts.of(md.image())
        kept = copy.deepcopy(first)
        md.delete_topic("t0")
        md.create_namespace("org")
        md.create_topic("org:x", partitions=1, replication_factor=1)
        second = counts.of(md.image())
    assert first == kept
    assert second[""].topics == 7 and second["org"].topics == 1


def test_a_namespace_whose_last_topic_goes_has_no_counts_left(tmp_path: Path) -> None:
    counts = NamespaceCounts()
    with Metadata.open(tmp_path / "data") as md:
        md.register_broker(1)
        md.create_namespace("org")
        for n in range(8):
            md.create_topic(f"t{n}", partitions=2, replication_factor=1)
        md.create_topic("org:only", partitions=2, replication_factor=1)
        assert "org" in counts.of(md.image())
        md.delete_topic("org:only")
        assert "org" not in counts.of(md.image())
        assert counts.recounts == 1


def test_taking_a_row_out_leaves_no_empty_broker_cell() -> None:
    total = Row(name="all")
    a, b = Row(name="a", topics=1, partitions=1), Row(name="b", topics=1, partitions=1)
    a.cells[1] = Cell(leaders=1)  # broker 1 leads a's partition, broker 2 b's
    b.cells[2] = Cell(leaders=1)
    merge(total, a)
    merge(total, b)
    merge(total, a, -1)
    assert set(total.cells) == {2} and total.topics == 1
