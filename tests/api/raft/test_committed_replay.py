"""A node's image following the high watermark: from the log at first, then from kept blocks."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from api.protocol.quorum.messages import Entry
from api.raft.blocks import ReplicaBlocks
from api.raft.committed_replay import INLINE_REPLAY_ENTRIES, CommittedReplay
from api.service.gc_policy import mass_changes_under_way
from api.service.replicated import ReplicatedService
from records.model import ConfigRecord, ConfigResourceType
from replay.broker_index import BrokerIndex
from replay.controller.controller import Controller
from replay.image import broker_index
from replay.loader import load_image

T = TypeVar("T")


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ReplicatedService]:
    service = ReplicatedService.open_replicated(
        tmp_path / "log", controller=Controller(rng=random.Random(1))
    )
    yield service
    await service.aclose()


async def _on_a_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(functools.partial(function, *args, **kwargs))


def _configs(first: int, count: int) -> list[ConfigRecord]:
    """Broker configs, one a record (a broker's configs need no registration to replay)."""
    return [
        ConfigRecord(
            resource_type=ConfigResourceType.BROKER,
            resource_name=str(first + i),
            name="log.retention.ms",
            value=str(first + i),
        )
        for i in range(count)
    ]


def _write(blocks: ReplicaBlocks, first: int, count: int, *, peer: bool = True) -> None:
    """A block of `count` configs at `first`, written as a leader's (`peer`) or as this node's."""
    block = blocks.encode([(_configs(first, count), None)], first=first, epoch=1)
    if not peer:
        blocks.keep(block)  # this node's own proposal: its records are not kept for the replay
    blocks.write([Entry(offset=first, epoch=1, count=block.count, payload=block.encode())])


async def test_the_image_follows_the_high_watermark_block_by_block(
    service: ReplicatedService,
) -> None:
    blocks = ReplicaBlocks(service.replica_log, last_timestamp=0)
    replay = CommittedReplay(service, blocks, io=_on_a_thread, node_id=2)
    assert replay.applied == 0
    _write(blocks, 0, 3)
    _write(blocks, 3, 2)
    await replay.follow(3)  # the first image: from the log (or a snapshot)
    assert replay.applied == 3
    assert service.image == load_image(service.replica_log, lte=2)
    await replay.follow(5)  # then from the records the blocks' check decoded
    assert replay.applied == 5
    assert service.image == load_image(service.replica_log, lte=4)
    _write(blocks, 5, 4, peer=False)
    await replay.follow(9)  # a block of its own: read back from the log
    assert service.image == load_image(service.replica_log, lte=8)
    image = service.image
    await replay.follow(9)  # nothing new committed: nothing replayed
    assert service.image is image
    replay.close()


async def test_a_commit_of_many_slices_is_a_mass_change_until_the_node_stops(
    service: ReplicatedService,
) -> None:
    blocks = ReplicaBlocks(service.replica_log, last_timestamp=0)
    replay = CommittedReplay(service, blocks, io=_on_a_thread, node_id=2)
    _write(blocks, 0, 1)
    await replay.follow(1)
    before = mass_changes_under_way()
    size = INLINE_REPLAY_ENTRIES // 2 + 1
    for first in range(1, 1 + 4 * size, size):
        _write(blocks, first, size)
    try:
        await replay.follow(1 + 4 * size)
        assert mass_changes_under_way() == before + 1
        assert service.image == load_image(service.replica_log, lte=4 * size)
    finally:
        replay.close()
    assert mass_changes_under_way() == before


async def test_a_start_from_a_snapshot_builds_its_broker_index_on_a_thread(
    service: ReplicatedService, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A snapshot's load leaves the per-broker index to its first reader; the node builds it
    # on a thread once it starts, not on its loop, and nobody has to read it first.
    blocks = ReplicaBlocks(service.replica_log, last_timestamp=0)
    replay = CommittedReplay(service, blocks, io=_on_a_thread, node_id=2)
    _write(blocks, 0, 3)
    loaded = load_image(service.replica_log, lte=2)
    built_on: list[str] = []

    def build() -> Any:
        built_on.append(threading.current_thread().name)
        return broker_index(loaded.topics.by_id)

    deferred = dataclasses.replace(loaded.topics, replica_index=BrokerIndex.deferred(build))
    monkeypatch.setattr(
        service, "first_image", lambda last: dataclasses.replace(loaded, topics=deferred)
    )
    await replay.follow(3)
    deadline = time.monotonic() + 60
    while not service.image.topics.replica_index.is_built and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert built_on and built_on[0] != threading.current_thread().name
    assert service.image.topics.by_broker == broker_index(loaded.topics.by_id)
    assert len(built_on) == 1
    replay.close()


async def test_a_start_image_whose_index_fails_to_build_says_so(
    service: ReplicatedService, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocks = ReplicaBlocks(service.replica_log, last_timestamp=0)
    replay = CommittedReplay(service, blocks, io=_on_a_thread, node_id=2)
    _write(blocks, 0, 3)
    loaded = load_image(service.replica_log, lte=2)

    def build() -> Any:
        raise MemoryError("no room for the index")

    deferred = dataclasses.replace(loaded.topics, replica_index=BrokerIndex.deferred(build))
    monkeypatch.setattr(
        service, "first_image", lambda last: dataclasses.replace(loaded, topics=deferred)
    )
    await replay.follow(3)
    deadline = time.monotonic() + 60
    while "failed to build" not in caplog.text and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert "per-broker index failed to build: no room for the index" in caplog.text
    with pytest.raises(RuntimeError, match="failed to build"):
        _ = service.image.topics.by_broker  # its first reader (a fence) fails as loudly
    replay.close()
