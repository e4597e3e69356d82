"""A leader's proposals: queued writes placed as one block, answered in order once committed."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from api.raft.blocks import ReplicaBlocks
from api.raft.core.core import RaftCore
from api.raft.proposals import Proposals
from api.service.replicated import ReplicatedService
from metadata_log.log import AppendResult
from metadata_log.timings import LatencyCounts
from records.model import Record
from replay.controller.controller import Controller
from replay.controller.errors import ApiError, ErrorCode
from tests.support.raft_core import drain, leader
from tests.support.replica_logs import record

REFUSED = ApiError(ErrorCode.NOT_CONTROLLER, "node 1 is not the active controller")


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[ReplicatedService]:
    service = ReplicatedService.open_replicated(
        tmp_path / "log", controller=Controller(rng=random.Random(1))
    )
    yield service
    await service.aclose()


def _proposals(core: RaftCore, service: ReplicatedService) -> tuple[Proposals, LatencyCounts]:
    latency = LatencyCounts()
    blocks = ReplicaBlocks(service.replica_log, last_timestamp=0)
    return Proposals(
        core, blocks, service, not_controller=lambda: REFUSED, latency=latency
    ), latency


def _records(tag: str, count: int) -> list[Record]:
    return [record(tag, i) for i in range(count)]


async def test_queued_writes_go_into_one_block_and_are_answered_once_committed(
    service: ReplicatedService,
) -> None:
    core = leader()
    proposals, latency = _proposals(core, service)
    first = core.log.end_offset
    one = proposals.queue(_records("a", 2), principal="User:alice", first=first)
    two = proposals.queue(_records("b", 1), principal="User:bob", first=first + 2)
    assert proposals.queued
    proposals.place(leading=True)
    assert not proposals.queued
    [entry] = drain(core).append
    assert (entry.offset, entry.count) == (first, 3)
    proposals.resolve(first + 2)  # the high watermark passed the first write only
    assert one.done() and not two.done()
    proposals.resolve(first + 3)
    assert tuple(one.result()) == (first, first + 1)
    assert tuple(two.result()) == (first + 2, first + 2)
    assert one.result().timestamp == two.result().timestamp  # one block, one timestamp
    assert latency.count == 2


async def test_writes_on_a_node_that_does_not_lead_are_refused(
    service: ReplicatedService,
) -> None:
    core = leader()
    proposals, _ = _proposals(core, service)
    end = core.log.end_offset
    write = proposals.queue(_records("a", 1), principal=None, first=end)
    proposals.place(leading=False)  # leads, but does not take writes yet
    with pytest.raises(ApiError) as refused:
        write.result()
    assert refused.value is REFUSED
    assert core.log.end_offset == end  # nothing proposed


async def test_a_write_that_expected_another_offset_is_refused_not_misplaced(
    service: ReplicatedService,
) -> None:
    core = leader()
    proposals, _ = _proposals(core, service)
    end = core.log.end_offset
    write = proposals.queue(_records("a", 1), principal=None, first=end + 5)
    proposals.place(leading=True)
    with pytest.raises(ApiError, match=f"expected offset {end + 5}, the log is at {end}"):
        write.result()
    assert core.log.end_offset == end


async def test_a_lost_leadership_refuses_what_is_in_flight_and_queued(
    service: ReplicatedService,
) -> None:
    core = leader()
    proposals, latency = _proposals(core, service)
    first = core.log.end_offset
    placed = proposals.queue(_records("a", 1), principal=None, first=first)
    proposals.place(leading=True)
    queued = proposals.queue(_records("b", 1), principal=None, first=first + 1)
    gone = proposals.queue(_records("c", 1), principal=None, first=first + 2)
    gone.cancel()  # its caller stopped waiting: the others are refused all the same
    proposals.fail(REFUSED)
    for future in (placed, queued):
        with pytest.raises(ApiError):
            future.result()
    assert not proposals.queued
    proposals.resolve(first + 10)  # nothing is left to answer
    assert latency.count == 0


async def test_an_entry_placed_by_the_node_commits_in_order_with_the_writes(
    service: ReplicatedService,
) -> None:
    core = leader()
    proposals, _ = _proposals(core, service)
    first = core.log.end_offset
    write = proposals.queue(_records("a", 1), principal=None, first=first)
    proposals.place(leading=True)
    # A voters entry the node placed itself, after the write.
    placed = proposals.track(
        (record("v", 0),), principal=None, placed=AppendResult(first + 1, first + 1, 0)
    )
    proposals.resolve(first + 1)
    assert write.done() and not placed.done()
    proposals.resolve(first + 2)
    assert tuple(placed.result()) == (first + 1, first + 1)
