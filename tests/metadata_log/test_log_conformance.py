"""One conformance suite for every implementation of the user's `AppendLog` protocol.

In the eventsourcing style: the same tests run against the file log (`MetadataLog`) and the
in-memory log (`MemoryLog`), so a unit test or a simulation that uses the memory log relies on
exactly the behaviour the file log has.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from metadata_log import (
    AppendLog,
    LogClosedError,
    LogError,
    MemoryLog,
    MetadataLog,
    ReadLog,
    ReplicaLog,
    ReplicatedLog,
)
from metadata_log.reader import LogReader
from records import ConfigRecord, ConfigResourceType, Record, TopicRecord
from records.errors import RecordError
from records.uuids import Uuid

T0 = 1_700_000_000_000

Clock = list[int]
"""A settable clock: the log reads `clock[0]` (ms)."""

Factory = Callable[[Clock], AppendLog]


def config(name: str, i: int) -> ConfigRecord:
    """A small valid record, told apart by `name` and `i`."""
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name=name, name=f"k{i}", value=str(i)
    )


def batch(name: str, n: int) -> list[Record]:
    """`n` distinct records."""
    return [config(name, i) for i in range(n)]


@pytest.fixture(params=["file", "memory"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """A factory of empty logs of one implementation, closed after the test."""
    opened: list[AppendLog] = []

    def make(clock: Clock) -> AppendLog:
        log: AppendLog
        if request.param == "file":
            log = MetadataLog.open(tmp_path / f"log{len(opened)}", clock_ms=lambda: clock[0])
        else:
            log = MemoryLog(clock_ms=lambda: clock[0])
        opened.append(log)
        return log

    yield make
    for log in opened:
        log.close()


def test_an_empty_log_has_nothing_to_read(make_log: Factory) -> None:
    log = make_log([T0])
    assert (log.end_offset, log.log_start_offset, log.last_timestamp) == (0, 0, -1)
    assert list(log.read()) == []
    assert list(log.read_records()) == []


def test_appends_get_dense_offsets_and_read_back_as_written(make_log: Factory) -> None:
    clock = [T0]
    log = make_log(clock)
    first = log.append(batch("a", 3), principal="alice")
    clock[0] = T0 + 5
    second = log.append(batch("b", 2))
    assert (first, second) == ((0, 2), (3, 4))
    assert (first.timestamp, second.timestamp) == (T0, T0 + 5)
    entries = list(log.read())
    assert [e.offset for e in entries] == [0, 1, 2, 3, 4]
    assert [e.record for e in entries] == [*batch("a", 3), *batch("b", 2)]
    assert [e.principal for e in entries] == ["alice"] * 3 + [None] * 2
    assert {e.epoch for e in entries} == {log.epoch}
    assert [e.timestamp for e in entries] == [T0] * 3 + [T0 + 5] * 2
    assert (log.end_offset, log.last_timestamp) == (5, T0 + 5)


def test_timestamps_never_go_down_when_the_clock_does(make_log: Factory) -> None:
    clock = [T0]
    log = make_log(clock)
    log.append(batch("a", 1))
    clock[0] = T0 - 1000
    result = log.append(batch("b", 1))
    assert result.timestamp == T0
    assert [e.timestamp for e in log.read()] == [T0, T0]


def test_ranges_are_gt_lte_and_limit(make_log: Factory) -> None:
    log = make_log([T0])
    for n in range(4):
        log.append(batch(f"r{n}", 3))
    offsets = [e.offset for e in log.read(gt=2, lte=8)]
    assert offsets == list(range(3, 9))
    assert [e.offset for e in log.read(gt=-1, limit=2)] == [0, 1]
    assert [e.offset for e in log.read(gt=9)] == [10, 11]
    assert [e.offset for e in log.read(lte=0)] == [0]
    assert list(log.read(limit=0)) == []
    assert list(log.read(gt=11)) == []
    assert list(log.read(gt=40)) == []
    blocks = list(log.read_records(gt=1, lte=7))
    assert [r for b in blocks for r in b.records] == [e.record for e in log.read(gt=1, lte=7)]
    assert [o for b in blocks for o in b.offsets] == list(range(2, 8))


@pytest.mark.parametrize(
    "arguments", [{"gt": -2}, {"lte": -5}, {"limit": -1}, {"gt": "1"}, {"lte": 1.5}]
)
def test_a_range_that_is_not_one_is_refused(
    make_log: Factory, arguments: dict[str, object]
) -> None:
    log = make_log([T0])
    log.append(batch("a", 2))
    with pytest.raises(LogError):
        log.read(**arguments)  # type: ignore[arg-type] # what a caller may pass
    if "limit" not in arguments:  # read_records takes no limit
        with pytest.raises(LogError):
            log.read_records(**arguments)  # type: ignore[arg-type] # what a caller may pass


def test_what_an_append_refuses(make_log: Factory) -> None:
    log = make_log([T0])
    with pytest.raises(LogError, match="at least one record"):
        log.append([])
    with pytest.raises(RecordError, match="is not a metadata record"):
        log.append([config("a", 0), "text"])  # type: ignore[list-item] # what a caller may pass
    with pytest.raises(LogError, match="at least one batch"):
        log.append_batches([])
    bad: list[Record] = [TopicRecord(name=123, topic_id=Uuid.random())]  # type: ignore[arg-type]
    with pytest.raises(RecordError):
        log.append_batches([(batch("good", 2), "p"), (bad, "q")])
    assert log.end_offset == 0  # all or nothing
    assert list(log.read()) == []


def test_batches_appended_together_keep_their_principals(make_log: Factory) -> None:
    log = make_log([T0])
    results = log.append_batches([(batch("a", 2), "alice"), (batch("b", 1), None)])
    assert results == [(0, 1), (2, 2)]
    assert [e.principal for e in log.read()] == ["alice", "alice", None]


async def test_concurrent_asynchronous_appends_each_get_their_own_offsets(
    make_log: Factory,
) -> None:
    log = make_log([T0])

    async def one(k: int) -> tuple[int, int]:
        return await log.append_async([config("async", k)], principal=f"p{k}")

    results = await asyncio.gather(*(one(k) for k in range(20)))
    assert sorted(first for first, _ in results) == list(range(20))
    by_offset = {e.offset: e for e in log.read()}
    for k, (first, last) in enumerate(results):
        assert first == last and by_offset[first].principal == f"p{k}"
    await log.aclose()


def test_a_closed_log_refuses_reads_and_appends(make_log: Factory) -> None:
    log = make_log([T0])
    log.append(batch("a", 1))
    log.close()
    log.close()  # idempotent
    with pytest.raises(LogClosedError):
        log.read()
    with pytest.raises(LogClosedError):
        log.read_records()
    with pytest.raises(LogClosedError):
        log.append(batch("b", 1))


def test_the_file_roles_implement_their_protocols(tmp_path: Path) -> None:
    # Checked by mypy (the assignments) and at run time (the entries read back).
    with MetadataLog.open(tmp_path / "user") as user:
        appender: AppendLog = user
        appender.append(batch("a", 1))
    with LogReader.open(tmp_path / "user") as reader:
        readable: ReadLog = reader
        assert [e.offset for e in readable.read()] == [0]
    with ReplicaLog.open(tmp_path / "replica") as replica:
        replicated: ReplicatedLog = replica
        block = replicated.encode_block(
            [(batch("r", 2), "p")], first_offset=0, epoch=1, timestamp=T0
        )
        assert replicated.write_blocks([block], check=True) == 2
        assert replicated.flush() == 2 and replicated.epoch_cache() == [(1, 0)]
    memory: AppendLog = MemoryLog()
    memory.append(batch("m", 1))
    assert memory.end_offset == 1
