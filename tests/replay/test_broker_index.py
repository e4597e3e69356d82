"""The per-broker index is what `broker_index` builds from scratch, for every image, however
its changes were deferred (`replay.broker_index`)."""

from __future__ import annotations

import dataclasses
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from immutables import Map

from records.model import (
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    Mode,
    PartitionChangeRecord,
    PurgeTopicPartitionsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from records.uuids import Uuid
from replay import broker_index as index_module
from replay.broker_index import BrokerIndex, BrokerPartitions
from replay.delta import MetadataDelta
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance, broker_index
from tests.support.record_gen import partition_record

BROKERS = 5


def _base() -> MetadataImage:
    records: list[Record] = [FeatureLevelRecord(name="metadata.version", feature_level=1)]
    records.extend(
        RegisterBrokerRecord(
            broker_id=b, incarnation_id=Uuid(bytes([b + 1] * 16)), broker_epoch=b, fenced=False
        )
        for b in range(BROKERS)
    )
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay_all(records)
    return delta.apply(Provenance(offset=len(records) - 1, epoch=0, timestamp=0))


def _replicas(rng: random.Random) -> tuple[int, ...]:
    return tuple(rng.sample(range(BROKERS), rng.randint(1, 3)))


def _batch(rng: random.Random, image: MetadataImage, serial: int) -> list[Record]:
    """One to three random changes of the image's topics, as one batch."""
    records: list[Record] = []
    live = {t.topic_id: len(t.partitions) for t in image.topics.by_id.values()}
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6) if live else 0
        if op == 0:  # create
            topic_id = Uuid(rng.randbytes(16))
            count = rng.randint(1, 4)
            records.append(TopicRecord(name=f"t{serial}-{len(records)}", topic_id=topic_id))
            records.extend(partition_record(topic_id, p, _replicas(rng)) for p in range(count))
            live[topic_id] = count
            continue
        topic_id = rng.choice(sorted(live, key=lambda t: t.bytes))
        count = live[topic_id]
        if op == 1:  # remove
            records.append(RemoveTopicRecord(topic_id=topic_id))
            del live[topic_id]
        elif op == 2:  # add a partition
            records.append(partition_record(topic_id, count, _replicas(rng)))
            live[topic_id] = count + 1
        elif op == 3:  # move a partition's replicas
            replicas = _replicas(rng)
            records.append(
                PartitionChangeRecord(
                    partition_id=rng.randrange(count),
                    topic_id=topic_id,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                )
            )
        elif op == 4:  # remove it and create it again, same id, other partitions
            records.append(RemoveTopicRecord(topic_id=topic_id))
            records.append(TopicRecord(name=f"t{serial}-{len(records)}", topic_id=topic_id))
            count = rng.randint(1, 4)
            records.extend(partition_record(topic_id, p, _replicas(rng)) for p in range(count))
            live[topic_id] = count
        elif count > 1:  # delete the last partitions and purge them at once
            keep = rng.randint(1, count - 1)
            records.append(
                DeleteTopicPartitionsRecord(
                    topic_id=topic_id, partition_count=keep, delete_after_ms=0, created_ms=0
                )
            )
            records.extend(
                PartitionChangeRecord(partition_id=p, topic_id=topic_id, mode=Mode.NONE)
                for p in range(keep, count)
            )
            records.append(PurgeTopicPartitionsRecord(topic_id=topic_id, partition_count=keep))
            live[topic_id] = keep
    return records


def _images(seed: int, batches: int) -> list[MetadataImage]:
    rng = random.Random(seed)
    images = [_base()]
    for serial in range(batches):
        image = images[-1]
        records = _batch(rng, image, serial)
        delta = MetadataDelta(image)
        delta.replay_all(records)
        delta.finish_batch()
        offset = image.provenance.offset + len(records)
        images.append(delta.apply(Provenance(offset=offset, epoch=0, timestamp=0)))
    return images


@settings(max_examples=40)
@given(
    seed=st.integers(0, 2**32),
    steps=st.integers(1, 6),
    entries=st.integers(1, 40),
    read=st.sampled_from(["forward", "backward", "shuffled", "last-first"]),
)
def test_every_image_holds_the_index_built_from_its_topics(
    seed: int, steps: int, entries: int, read: str
) -> None:
    # Small bounds, so chains are cut (built on the way) as well as left for the reader.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_module, "MAX_PENDING_STEPS", steps)
        patch.setattr(index_module, "MAX_PENDING_ENTRIES", entries)
        images = _images(seed, 30)
    order = list(range(len(images)))
    if read == "backward":
        order.reverse()
    elif read == "shuffled":
        random.Random(seed).shuffle(order)
    elif read == "last-first":
        order = [order[-1], *order[:-1]]
    for i in order:
        topics = images[i].topics
        assert topics.by_broker == broker_index(topics.by_id), f"image {i} ({read})"
        assert topics.by_broker is topics.by_broker  # built once, then kept


def test_a_chain_is_built_once_it_reaches_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index_module, "MAX_PENDING_STEPS", 8)
    images = _images(7, 40)
    built = [image.topics.replica_index.is_built for image in images]
    # Nothing read the index: images wait for it, except each one that reached the bound.
    assert not all(built[1:])
    assert any(built[1:])
    assert images[-1].topics.by_broker == broker_index(images[-1].topics.by_id)


def test_images_equal_in_their_topics_are_equal_whatever_their_index_state() -> None:
    image = _images(3, 4)[-1]
    topics = image.topics
    built = type(topics)(
        by_id=topics.by_id,
        by_name=topics.by_name,
        replica_index=BrokerIndex.of(broker_index(topics.by_id)),
    )
    assert not topics.replica_index.is_built
    assert built == topics
    assert image.same_state(MetadataImage(topics=built, cluster=image.cluster)) is False
    assert MetadataImage(topics=built).same_state(MetadataImage(topics=topics))


def _counting(value: Map[int, BrokerPartitions], calls: list[int]) -> Callable[[], Any]:
    def build() -> Map[int, BrokerPartitions]:
        calls.append(1)
        return value

    return build


def test_a_deferred_index_is_built_by_its_first_reader_once() -> None:
    image = _images(5, 20)[-1]
    expected = broker_index(image.topics.by_id)
    calls: list[int] = []
    index = BrokerIndex.deferred(_counting(expected, calls))
    assert not index.is_built
    assert calls == []  # nothing built until read
    assert index.map() is expected
    assert index.map() is expected
    assert calls == [1]
    assert index.is_built


def test_threads_reading_a_deferred_index_together_wait_for_one_build() -> None:
    image = _images(6, 20)[-1]
    expected = broker_index(image.topics.by_id)
    started, release = threading.Event(), threading.Event()
    calls: list[int] = []

    def slow() -> Map[int, BrokerPartitions]:
        calls.append(1)
        started.set()
        assert release.wait(60)
        return expected

    index = BrokerIndex.deferred(slow)
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(index.map)
        assert started.wait(60)
        others = [pool.submit(index.map) for _ in range(3)]
        release.set()
        results = [first.result(60), *(other.result(60) for other in others)]
    assert all(result is expected for result in results)
    assert calls == [1]


@settings(max_examples=20)
@given(seed=st.integers(0, 2**32), steps=st.integers(1, 6), first=st.integers(0, 29))
def test_changes_after_a_deferred_index_give_the_index_of_their_topics(
    seed: int, steps: int, first: int
) -> None:
    # A snapshot loaded at image `first` (its index deferred), then the later batches replayed
    # on it: chains start from the deferred index, and reach it when cut at their bound.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(index_module, "MAX_PENDING_STEPS", steps)
        images = _images(seed, 30)
        base = images[first]
        calls: list[int] = []
        image = _deferred(base, calls)
        rng = random.Random(f"after-{seed}")  # not the draws that made the images (their ids)
        for serial in range(first, 30):
            records = _batch(rng, image, 1000 + serial)
            delta = MetadataDelta(image)
            delta.replay_all(records)
            delta.finish_batch()
            offset = image.provenance.offset + len(records)
            image = delta.apply(Provenance(offset=offset, epoch=0, timestamp=0))
    assert image.topics.by_broker == broker_index(image.topics.by_id)
    assert len(calls) <= 1


def test_a_deferred_build_that_failed_is_not_tried_again() -> None:
    calls: list[int] = []

    def failing() -> Map[int, BrokerPartitions]:
        calls.append(1)
        raise MemoryError("no room")

    index = BrokerIndex.deferred(failing)
    with pytest.raises(MemoryError):
        index.map()
    # A second try would build from what the first one consumed: it raises instead.
    with pytest.raises(RuntimeError, match="failed to build") as raised:
        index.map()
    assert isinstance(raised.value.__cause__, MemoryError)
    assert calls == [1]
    assert not index.is_built


def _deferred(base: MetadataImage, calls: list[int]) -> MetadataImage:
    """`base` as a snapshot's load gives it: its index deferred, `calls` counting its builds."""
    deferred = BrokerIndex.deferred(_counting(broker_index(base.topics.by_id), calls))
    return dataclasses.replace(
        base, topics=dataclasses.replace(base.topics, replica_index=deferred)
    )


def _next(image: MetadataImage, rng: random.Random, serial: int) -> MetadataImage:
    """The image after one more random batch, as its own delta."""
    delta = MetadataDelta(image)
    delta.replay_all(_batch(rng, image, serial))
    delta.finish_batch()
    return delta.apply(Provenance(offset=image.provenance.offset + 1, epoch=0, timestamp=0))


def test_changes_after_an_unread_deferred_index_wait_for_a_reader(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A time travel: a snapshot's image (index deferred) and the entries after it replayed.
    # However many entries they change, nothing builds the index until someone reads it
    # (its first read builds it whole anyway); only the chain's command bound still cuts it.
    monkeypatch.setattr(index_module, "MAX_PENDING_ENTRIES", 1)
    calls: list[int] = []
    image = _deferred(_images(8, 20)[-1], calls)
    rng = random.Random("unread")
    for serial in range(12):
        image = _next(image, rng, 2000 + serial)
    assert calls == []
    assert not image.topics.replica_index.is_built
    assert image.topics.by_broker == broker_index(image.topics.by_id)
    assert calls == [1]
    # Once built, a chain from it is cut at its entry bound again.
    assert _next(image, rng, 3000).topics.replica_index.is_built


def test_a_chain_from_an_unread_deferred_index_is_cut_at_its_command_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(index_module, "MAX_PENDING_STEPS", 4)
    calls: list[int] = []
    image = _deferred(_images(9, 10)[-1], calls)
    rng = random.Random("bound")
    built = []
    for serial in range(6):
        image = _next(image, rng, 4000 + serial)
        built.append(image.topics.replica_index.is_built)
    assert built[:3] == [False, False, False]
    assert built[3] and calls == [1]
    assert image.topics.by_broker == broker_index(image.topics.by_id)
