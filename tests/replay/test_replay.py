"""Replay: image and delta, invariants, write() round trips, load_image from the log."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from metadata_log import MetadataLog
from metadata_log.reader import LogReader
from records.errors import UnknownRecordTypeError
from records.model import (
    RECORD_CLASSES,
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
    RemoveNamespaceRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from records.uuids import Uuid
from replay.delta import MetadataDelta, merge_partition_change, replay_records
from replay.errors import (
    DuplicateTopicError,
    InvalidPartitionError,
    NamespaceReplayError,
    PendingDeletionError,
    UnknownBrokerError,
    UnknownPartitionError,
    UnknownTopicError,
)
from replay.image import EMPTY_IMAGE, EMPTY_PROVENANCE, MetadataImage, Provenance
from replay.loader import load_image, replay_blocks, replay_in_slices
from tests.support.record_gen import LogGenerator
from tests.support.sweeps import SWEEP_STRIDE

T1 = Uuid.random()
PAYMENTS = Uuid.random()


def image_of(*records: Record) -> MetadataImage:
    return replay_records(EMPTY_IMAGE, records, EMPTY_PROVENANCE)


def rewritten(image: MetadataImage) -> MetadataImage:
    return replay_records(EMPTY_IMAGE, list(image.write()), image.provenance)


def topic(name: str = "orders", topic_id: Uuid = T1, partitions: int = 2) -> list[Record]:
    out: list[Record] = [TopicRecord(name=name, topic_id=topic_id)]
    out.extend(
        PartitionRecord(partition_id=p, topic_id=topic_id, replicas=(1, 2), isr=(1, 2), leader=1)
        for p in range(partitions)
    )
    return out


def broker(broker_id: int, epoch: int = 1) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker_id, incarnation_id=Uuid.random(), broker_epoch=epoch, fenced=False
    )


def test_every_record_type_has_a_handler() -> None:
    assert MetadataDelta(EMPTY_IMAGE).handled_types() == frozenset(RECORD_CLASSES)


def test_a_record_of_no_known_type_is_refused_and_counts_nothing() -> None:
    class Stray:
        pass

    delta = MetadataDelta(EMPTY_IMAGE)
    with pytest.raises(UnknownRecordTypeError, match="Stray"):
        delta.replay_all([broker(1), Stray()])  # type: ignore[list-item]  # not a Record
    with pytest.raises(UnknownRecordTypeError, match="Stray"):
        delta.replay(Stray())  # type: ignore[arg-type]  # not a Record
    assert delta.records == 1  # the broker before it


PREFIX_STRIDE = SWEEP_STRIDE
"""Every prefix in `make test`; `make test-fast` checks every fifth (and the whole log)."""


def test_generated_log_every_prefix_writes_and_replays_to_itself() -> None:
    batches = LogGenerator(
        seed=7, cancels=True, security=True, quorum=True, client_writes=True
    ).batches(900)
    records = [r for batch in batches for r in batch]
    assert len(records) > 2000
    image = EMPTY_IMAGE
    offset = -1
    pending_seen = False
    for batch in batches:
        for record in batch:
            offset += 1
            image = replay_records(image, [record], Provenance(offset=offset, epoch=1, timestamp=0))
            pending_seen = pending_seen or any(
                t.pending_deletion for t in image.topics.by_id.values()
            )
            if offset % PREFIX_STRIDE and offset != len(records) - 1:
                continue
            again = rewritten(image)
            assert again == image
            assert list(again.write()) == list(image.write())
    assert len(image.topics) > 20
    assert image.namespaces.by_name
    assert pending_seen
    # The generated log holds every record type, moves, purges, cancels, ACLs and credentials.
    assert {type(r) for r in records} == set(RECORD_CLASSES)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_delta_or_many_give_the_same_image(seed: int) -> None:
    records = [r for batch in LogGenerator(seed=seed).batches(400) for r in batch]
    end = Provenance(offset=len(records) - 1, epoch=1, timestamp=0)
    whole = replay_records(EMPTY_IMAGE, records, end)
    rng = random.Random(seed)
    image = EMPTY_IMAGE
    i = 0
    while i < len(records):
        step = rng.randint(1, 40)
        image = replay_records(image, records[i : i + step], end)
        i += step
    assert image == whole
    assert list(image.write()) == list(whole.write())


def test_apply_leaves_the_base_image_unchanged() -> None:
    base = image_of(broker(1), broker(2), *topic())
    before = list(base.write())
    delta = MetadataDelta(base)
    delta.replay(PartitionChangeRecord(partition_id=0, topic_id=T1, leader=2))
    delta.replay(RemoveTopicRecord(topic_id=T1))
    after = delta.apply(EMPTY_PROVENANCE)
    assert list(base.write()) == before
    assert after.topics.get(T1) is None
    assert base.topics.get(T1) is not None


def test_a_delta_that_changed_topics_is_applied_once() -> None:
    # Its drafts' partition lists are let go as the image is made (a whole-log load's peak):
    # more replay, or a second apply, would read them, so both refuse.
    base = image_of(broker(1), broker(2), *topic())
    delta = MetadataDelta(base)
    delta.replay_all(topic("payments", PAYMENTS))
    moved = PartitionChangeRecord(
        partition_id=0, topic_id=T1, leader=2, replicas=(2, 1), isr=(2, 1)
    )
    delta.replay(moved)
    delta.finish_batch()
    after = delta.apply(EMPTY_PROVENANCE)
    assert len(after.topics.get(PAYMENTS).partitions) == 2  # type: ignore[union-attr]
    assert after.topics.get(T1).partitions[0].replicas == (2, 1)  # type: ignore[union-attr]
    assert (
        after.topics.by_broker
        == image_of(broker(1), broker(2), *topic(), *topic("payments", PAYMENTS)).topics.by_broker
    )  # replicas moved, not added or dropped: the same brokers hold them
    for use in (
        lambda: delta.apply(EMPTY_PROVENANCE),
        lambda: delta.replay(RemoveTopicRecord(topic_id=T1)),
        lambda: delta.replay(PartitionChangeRecord(partition_id=1, topic_id=T1, leader=2)),
    ):
        with pytest.raises(RuntimeError, match="applied already"):
            use()


def test_unchanged_areas_are_shared_between_images() -> None:
    base = image_of(broker(1), broker(2), *topic())
    nxt = replay_records(
        base,
        [
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC, resource_name="orders", name="a", value="1"
            )
        ],
        EMPTY_PROVENANCE,
    )
    assert nxt.topics is base.topics
    assert nxt.cluster is base.cluster


def test_topic_lookup_by_name_and_id() -> None:
    image = image_of(broker(1), broker(2), *topic())
    found = image.topics.get_by_name("orders")
    assert found is not None and found.topic_id == T1
    assert [p.partition_id for p in found.partitions] == [0, 1]


def test_partition_change_merges_as_kafka() -> None:
    base = PartitionRecord(
        partition_id=0, topic_id=T1, replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=4
    )
    isr_only = merge_partition_change(
        base, PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1, 2))
    )
    assert (isr_only.isr, isr_only.leader, isr_only.leader_epoch, isr_only.partition_epoch) == (
        (1, 2),
        1,
        4,
        1,
    )
    new_leader = merge_partition_change(
        base, PartitionChangeRecord(partition_id=0, topic_id=T1, leader=2)
    )
    assert (new_leader.leader, new_leader.leader_epoch, new_leader.partition_epoch) == (2, 5, 1)
    mode = merge_partition_change(
        base, PartitionChangeRecord(partition_id=0, topic_id=T1, mode=Mode.READ_ONLY)
    )
    assert mode.mode is Mode.READ_ONLY and mode.replicas == (1, 2, 3)


def test_fencing_changes_the_registration() -> None:
    image = image_of(broker(1, epoch=7))
    fenced = replay_records(
        image,
        [BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=7, fenced=FencingChange.FENCE)],
        EMPTY_PROVENANCE,
    )
    registration = fenced.cluster.get(1)
    assert registration is not None and registration.fenced
    assert fenced.cluster.usable() == []


def test_remove_topic_drops_its_configs_and_a_new_incarnation_starts_clean() -> None:
    t2 = Uuid.random()
    image = image_of(
        broker(1),
        broker(2),
        *topic(),
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC, resource_name="orders", name="a", value="1"
        ),
        RemoveTopicRecord(topic_id=T1),
        *topic(topic_id=t2),
    )
    assert dict(image.configs.get(ConfigResourceType.TOPIC, "orders")) == {}
    recreated = image.topics.get_by_name("orders")
    assert recreated is not None and recreated.topic_id == t2


def test_feature_level_zero_removes_the_feature() -> None:
    image = image_of(
        FeatureLevelRecord(name="x", feature_level=2),
        FeatureLevelRecord(name="metadata.version", feature_level=1),
        FeatureLevelRecord(name="x", feature_level=0),
    )
    assert dict(image.features.levels) == {"metadata.version": 1}
    first = next(iter(image.write()))
    assert first == FeatureLevelRecord(name="metadata.version", feature_level=1)


def test_namespace_counts_and_children() -> None:
    a, b = Uuid.random(), Uuid.random()
    image = image_of(
        broker(1),
        broker(2),
        NamespaceRecord(namespace_id=a, name="org"),
        NamespaceRecord(namespace_id=b, name="org:apache", parent_id=a),
        TopicRecord(name="kafka", topic_id=T1, namespace="org:apache"),
    )
    assert image.namespaces.children("") == ["org"]
    assert image.namespaces.children("org") == ["org:apache"]
    assert image.namespaces.topic_counts.get("org:apache") == 1
    assert image.topics.get_by_name("org:apache:kafka") is not None


@pytest.mark.parametrize(
    ("records", "error", "message"),
    [
        (topic() + topic(topic_id=Uuid.random()), DuplicateTopicError, "already exists"),
        (topic() + topic(name="other"), DuplicateTopicError, "already in use"),
        (
            [TopicRecord(name="x", topic_id=Uuid.ZERO)],
            DuplicateTopicError,
            "reserved",
        ),
        (
            [PartitionRecord(partition_id=0, topic_id=T1, replicas=(1,), isr=(1,), leader=1)],
            UnknownTopicError,
            "no live topic",
        ),
        ([RemoveTopicRecord(topic_id=T1)], UnknownTopicError, "no live topic"),
        (
            [*topic(), RemoveTopicRecord(topic_id=T1), RemoveTopicRecord(topic_id=T1)],
            UnknownTopicError,
            "was deleted",
        ),
        (
            [
                *topic(partitions=1),
                PartitionRecord(partition_id=3, topic_id=T1, replicas=(1,), isr=(1,), leader=1),
            ],
            UnknownPartitionError,
            "contiguous",
        ),
        (
            [*topic(), PartitionChangeRecord(partition_id=5, topic_id=T1, leader=1)],
            UnknownPartitionError,
            "does not exist",
        ),
        (
            [*topic(), PartitionChangeRecord(partition_id=0, topic_id=T1, leader=9)],
            InvalidPartitionError,
            "not in the ISR",
        ),
        (
            [*topic(), PartitionChangeRecord(partition_id=0, topic_id=T1, isr=(1, 7))],
            InvalidPartitionError,
            r"ISR \[1, 7\] is not one or more distinct replicas",
        ),
        (
            [TopicRecord(name="x", topic_id=T1, namespace="nowhere")],
            NamespaceReplayError,
            "does not exist",
        ),
        (
            [NamespaceRecord(namespace_id=T1, name="a:b")],
            NamespaceReplayError,
            "parent 'a'",
        ),
        ([RemoveNamespaceRecord(namespace_id=T1)], NamespaceReplayError, "no namespace"),
        (
            [UnregisterBrokerRecord(broker_id=4, broker_epoch=1)],
            UnknownBrokerError,
            "not registered",
        ),
        (
            [broker(4, epoch=2), UnregisterBrokerRecord(broker_id=4, broker_epoch=1)],
            UnknownBrokerError,
            "epoch 2",
        ),
        (
            [
                *topic(partitions=2),
                DeleteTopicPartitionsRecord(
                    topic_id=T1, partition_count=2, delete_after_ms=0, created_ms=0
                ),
            ],
            PendingDeletionError,
            "cannot reduce 2 partitions to 2",
        ),
    ],
)
def test_invariants_raise_typed_errors(
    records: list[Record], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        image_of(*records)


def test_namespace_with_children_or_topics_cannot_be_removed() -> None:
    a, b = Uuid.random(), Uuid.random()
    base = image_of(
        NamespaceRecord(namespace_id=a, name="org"),
        NamespaceRecord(namespace_id=b, name="org:apache", parent_id=a),
    )
    with pytest.raises(NamespaceReplayError, match="child namespaces"):
        replay_records(base, [RemoveNamespaceRecord(namespace_id=a)], EMPTY_PROVENANCE)
    with_topic = replay_records(
        base, [TopicRecord(name="k", topic_id=T1, namespace="org:apache")], EMPTY_PROVENANCE
    )
    with pytest.raises(NamespaceReplayError, match="holds 1 topics"):
        replay_records(with_topic, [RemoveNamespaceRecord(namespace_id=b)], EMPTY_PROVENANCE)


def test_with_timestamp_keeps_every_other_part_of_the_image() -> None:
    image = image_of(TopicRecord(name="t", topic_id=T1))
    stamped = image.with_timestamp(1_234)
    assert stamped.provenance == dataclasses.replace(image.provenance, timestamp=1_234)
    for part in dataclasses.fields(MetadataImage):  # a field added later must be kept too
        if part.name != "provenance":
            assert getattr(stamped, part.name) is getattr(image, part.name), part.name


def test_child_namespace_counts_follow_every_record_of_a_delta() -> None:
    """Within one delta, removals see the creations and removals replayed before them."""
    org, a, b, c = (Uuid.random() for _ in range(4))
    base = image_of(
        NamespaceRecord(namespace_id=org, name="org"),
        NamespaceRecord(namespace_id=a, name="org:a", parent_id=org),
        NamespaceRecord(namespace_id=b, name="org:a:b", parent_id=a),
    )
    # A whole tree, children first, in one delta.
    empty = replay_records(
        base,
        [RemoveNamespaceRecord(namespace_id=i) for i in (b, a, org)],
        EMPTY_PROVENANCE,
    )
    assert not empty.namespaces.by_name
    # The counts are built by the first removal; a child created after it still counts.
    with pytest.raises(NamespaceReplayError, match=r"child namespaces \['org:a:c'\]"):
        replay_records(
            base,
            [
                RemoveNamespaceRecord(namespace_id=b),
                NamespaceRecord(namespace_id=c, name="org:a:c", parent_id=a),
                RemoveNamespaceRecord(namespace_id=a),
            ],
            EMPTY_PROVENANCE,
        )
    # A parent before its child is refused, naming every namespace below it.
    with pytest.raises(NamespaceReplayError, match=r"\['org:a', 'org:a:b'\]"):
        replay_records(base, [RemoveNamespaceRecord(namespace_id=org)], EMPTY_PROVENANCE)


def _written(directory: Path, seed: int, count: int) -> tuple[list[list[Record]], int]:
    """A log of `count` generated batches in `directory`: the batches and the log's end."""
    batches = LogGenerator(seed=seed).batches(count)
    with MetadataLog.open(directory) as log:
        for batch in batches:
            log.append(batch, principal="test")
        return batches, log.end_offset


def test_load_image_from_log_matches_direct_replay(tmp_path: Path) -> None:
    batches, end = _written(tmp_path / "log", 11, 300)
    records = [r for batch in batches for r in batch]
    with LogReader.open(tmp_path / "log") as log:
        seen: list[int] = []
        image = load_image(log, progress=seen.append)
        assert image.provenance.offset == end - 1
        assert image.same_state(replay_records(EMPTY_IMAGE, records, EMPTY_PROVENANCE))
        assert sum(seen) == len(records)
        for lte in (0, 5, 17, len(records) // 2, end - 2):
            partial = load_image(log, lte=lte)
            assert partial.provenance.offset == lte
            direct = replay_records(EMPTY_IMAGE, records[: lte + 1], EMPTY_PROVENANCE)
            assert partial.same_state(direct)
            # From a base image: the rest of the log only.
            rest = load_image(log, base=partial)
            assert rest == image
            # The same blocks given (a quorum follower's, decoded when it checked them).
            given = replay_blocks(partial, list(log.read_records(gt=lte)))
            assert given == image


def test_replay_in_slices_ends_where_one_replay_of_the_blocks_ends(tmp_path: Path) -> None:
    _, end = _written(tmp_path / "log", 12, 60)
    with LogReader.open(tmp_path / "log") as log:
        blocks = list(log.read_records())
        whole = replay_blocks(EMPTY_IMAGE, blocks, lte=end - 1)
        sizes = [len(block.records) for block in blocks]
        for entries in (1, 7, 50, sum(sizes), sum(sizes) + 1):
            images = list(replay_in_slices(EMPTY_IMAGE, blocks, lte=end - 1, entries=entries))
            assert images[-1] == whole
            # Each slice is whole blocks of `entries` or more (the last may hold fewer), and
            # each image is the one replay of the blocks up to it gives.
            cut = 0
            for image in images:
                taken = 0
                while taken < entries and cut < len(blocks):
                    taken += sizes[cut]
                    cut += 1
                assert image.provenance.offset == blocks[cut - 1].last_offset
                assert image == replay_blocks(EMPTY_IMAGE, blocks[:cut])
        assert list(replay_in_slices(whole, [], lte=end - 1, entries=10)) == [whole]


def test_load_image_of_an_empty_log_is_empty(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path / "log") as log:
        image = load_image(log)
    assert image == EMPTY_IMAGE
    assert image.is_empty
