"""One conformance suite for every implementation of the replica protocol (`ReplicatedLog`).

In the eventsourcing style: the same tests run against the file log (`ReplicaLog`; for
trims with segments small enough that each block rolls one, so trims by segment and by block
agree) and
the in-memory log (`MemoryReplicaLog`), so a unit test or the Raft simulation that uses the
memory log relies on exactly the behaviour the file log has.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Protocol

import pytest

from metadata_log import (
    LogClosedError,
    LogConfig,
    LogError,
    MemoryReplicaLog,
    ReplicaBlock,
    ReplicaBlockError,
    ReplicaLog,
    ReplicatedLog,
)
from metadata_log.start_snapshot import StartSnapshot
from records import ConfigRecord, ConfigResourceType, Record

T0 = 1_700_000_000_000


class Replica(ReplicatedLog, Protocol):
    """The protocol plus what both implementations have beyond it (trims, the last epoch)."""

    @property
    def epoch(self) -> int:
        """The epoch of the last entry."""
        ...

    def trim_before(self, offset: int) -> object:
        """Remove whole segments (blocks) below `offset`."""
        ...


class Factory(Protocol):
    """Makes an empty log; `one_block_segments` makes the file log roll a segment per block."""

    def __call__(self, *, one_block_segments: bool = False) -> Replica: ...


def config(name: str, i: int) -> ConfigRecord:
    """A small valid record, told apart by `name` and `i`."""
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name=name, name=f"k{i}", value=str(i)
    )


def records(name: str, n: int) -> list[Record]:
    """`n` distinct records."""
    return [config(name, i) for i in range(n)]


@pytest.fixture(params=["file", "memory"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    """A factory of empty replica logs of one implementation, closed after the test."""
    opened: list[Replica] = []

    def make(*, one_block_segments: bool = False) -> Replica:
        log: Replica
        if request.param == "file":
            # The smallest segments hold one block each (a segment's header alone is most of
            # 4 KiB), so a trim by segments is a trim by blocks, as in the memory log; a roll
            # also makes the sealed segment durable, so only the default config keeps
            # `flushed_offset` where `flush` left it.
            settings = LogConfig(segment_bytes=4096) if one_block_segments else LogConfig()
            log = ReplicaLog.open(tmp_path / f"log{len(opened)}", config=settings)
        else:
            log = MemoryReplicaLog()
        opened.append(log)
        return log

    yield make
    for log in opened:
        log.close()


def block(log: Replica, n: int, *, epoch: int, at: int | None = None, ts: int = T0) -> ReplicaBlock:
    """A block of `n` records of `epoch` at the log's end (or `at`)."""
    first = log.end_offset if at is None else at
    return log.encode_block(
        [(records(f"e{epoch}o{first}", n), "p")],
        first_offset=first,
        epoch=epoch,
        timestamp=ts,
    )


def write(log: Replica, *sizes_epochs: tuple[int, int], ts: int = T0) -> None:
    """Write one block per (count, epoch), in order, each at the end."""
    for n, epoch in sizes_epochs:
        log.write_blocks([block(log, n, epoch=epoch, ts=ts)], check=True)


def offsets(log: Replica, **kw: int) -> list[int]:
    """The offsets `read` returns."""
    return [e.offset for e in log.read(**kw)]


def state(log: Replica) -> tuple[int, int, int, list[tuple[int, int]], int]:
    """(start, end, flushed, epoch cache, last timestamp)."""
    return (
        log.log_start_offset,
        log.end_offset,
        log.flushed_offset,
        log.epoch_cache(),
        log.last_timestamp,
    )


def test_an_empty_replica_log(make_log: Factory) -> None:
    log = make_log()
    assert state(log) == (0, 0, 0, [], -1)
    assert log.epoch == 0 and log.start_snapshot is None
    assert list(log.read()) == [] and list(log.read_records()) == []
    assert log.replica_blocks(start=0, max_bytes=1 << 20) == []


def test_written_blocks_are_read_at_once_and_durable_on_flush(make_log: Factory) -> None:
    log = make_log()
    first = block(log, 2, epoch=1)
    assert log.write_blocks([first], check=True) == 2
    second = block(log, 3, epoch=1, ts=T0 + 5)
    assert log.write_blocks([second], check=False) == 5
    assert state(log) == (0, 5, 0, [(1, 0)], T0 + 5)
    assert log.flush() == 5 and log.flushed_offset == 5
    entries = list(log.read())
    assert [e.offset for e in entries] == [0, 1, 2, 3, 4]
    assert [e.timestamp for e in entries] == [T0, T0, T0 + 5, T0 + 5, T0 + 5]
    assert {e.epoch for e in entries} == {1} and {e.principal for e in entries} == {"p"}
    assert [e.record for e in entries] == [*records("e1o0", 2), *records("e1o2", 3)]
    assert offsets(log, gt=0, lte=3) == [1, 2, 3]
    assert offsets(log, gt=1, limit=2) == [2, 3]
    assert [(b.first_offset, len(b.records)) for b in log.read_records(gt=1, lte=3)] == [(2, 2)]


def test_blocks_must_start_at_the_end_and_never_go_back(make_log: Factory) -> None:
    log = make_log()
    write(log, (2, 3))
    cases = [
        block(log, 1, epoch=3, at=3),  # a gap
        block(log, 1, epoch=3, at=1),  # an overlap
        block(log, 1, epoch=2),  # an older epoch
        block(log, 1, epoch=3, ts=T0 - 1),  # an older timestamp
    ]
    for bad in cases:
        with pytest.raises(ReplicaBlockError):
            log.write_blocks([block(log, 1, epoch=3, ts=T0 + 9), bad], check=True)
        assert state(log) == (0, 2, 0, [(3, 0)], T0)
    good = block(log, 1, epoch=3)
    damaged = replace(good, body=good.body[:-1] + bytes([good.body[-1] ^ 1]))
    with pytest.raises(ReplicaBlockError):
        log.write_blocks([damaged], check=True)
    relabelled = replace(good, epoch=4)  # the entries say epoch 3
    with pytest.raises(ReplicaBlockError):
        log.write_blocks([relabelled], check=True)
    assert log.end_offset == 2


def test_the_epoch_cache_names_the_first_offset_of_each_new_epoch(make_log: Factory) -> None:
    log = make_log()
    write(log, (2, 1), (1, 1), (3, 4), (1, 4), (2, 7))
    assert log.epoch_cache() == [(1, 0), (4, 3), (7, 7)]
    assert log.epoch == 7


@pytest.mark.parametrize("cut", range(0, 10))
def test_truncating_at_every_offset(make_log: Factory, cut: int) -> None:
    log = make_log()
    write(log, (2, 1), (3, 2), (1, 2), (3, 5))  # blocks at 0, 2, 5, 6; end 9
    log.flush()
    before = list(log.read())
    assert log.truncate_to(cut) == max(9 - cut, 0)
    assert log.end_offset == log.flushed_offset == min(cut, 9)
    assert list(log.read()) == before[:cut]
    expected = [(e, o) for e, o in [(1, 0), (2, 2), (5, 6)] if o < cut]
    assert log.epoch_cache() == expected
    assert log.last_timestamp == (T0 if cut else -1)
    # The log goes on from the cut, with a block of the last epoch or a later one.
    epoch = expected[-1][0] if expected else 1
    log.write_blocks([block(log, 2, epoch=epoch, ts=T0 + 1)], check=True)
    assert offsets(log) == list(range(min(cut, 9) + 2))
    assert log.epoch_cache()[-1] == (epoch, expected[-1][1] if expected else min(cut, 9))


def test_a_cut_inside_a_block_keeps_its_earlier_entries_as_a_block(make_log: Factory) -> None:
    log = make_log()
    write(log, (4, 1))
    kept = list(log.read())[:2]
    assert log.truncate_to(2) == 2
    assert list(log.read()) == kept
    (only,) = log.replica_blocks(start=0, max_bytes=1 << 20)
    assert (only.first_offset, only.count, only.epoch, only.crc_ok()) == (0, 2, 1, True)


def test_truncation_refuses_offsets_before_the_log_and_ignores_those_past_it(
    make_log: Factory,
) -> None:
    log = make_log()
    write(log, (3, 1))
    with pytest.raises(LogError):
        log.truncate_to(-1)
    assert log.truncate_to(3) == 0 and log.truncate_to(8) == 0
    assert log.flushed_offset == 0  # nothing was cut, nothing made durable
    assert log.truncate_to(1) == 2 and log.flushed_offset == 1


def test_replica_blocks_from_every_block_boundary(make_log: Factory) -> None:
    log = make_log()
    write(log, (2, 1), (1, 1), (3, 2))
    everything = log.replica_blocks(start=0, max_bytes=1 << 20)
    assert [(b.first_offset, b.count, b.epoch) for b in everything] == [
        (0, 2, 1),
        (2, 1, 1),
        (3, 3, 2),
    ]
    assert log.replica_blocks(start=2, max_bytes=1 << 20) == everything[1:]
    assert log.replica_blocks(start=3, max_bytes=0) == everything[2:]  # at least one
    assert log.replica_blocks(start=0, max_bytes=len(everything[0].body)) == everything[:1]
    assert log.replica_blocks(start=6, max_bytes=1 << 20) == []
    for bad in (1, 4, 7, -1):
        with pytest.raises(LogError):
            log.replica_blocks(start=bad, max_bytes=1 << 20)
    with pytest.raises(LogError):
        log.replica_blocks(start=0, max_bytes=-1)


def test_copying_a_log_block_by_block_gives_identical_entries(make_log: Factory) -> None:
    source, copy = make_log(), make_log()
    write(source, (2, 1), (3, 1), (1, 4))
    copy.write_blocks(source.replica_blocks(start=0, max_bytes=1 << 20), check=True)
    assert list(copy.read()) == list(source.read())
    assert copy.epoch_cache() == source.epoch_cache()
    assert copy.replica_blocks(start=0, max_bytes=1 << 20) == source.replica_blocks(
        start=0, max_bytes=1 << 20
    )


def test_block_bodies_are_whole_blocks_from_the_one_holding_start(make_log: Factory) -> None:
    log = make_log()
    write(log, (2, 1), (3, 1), (1, 2))
    blocks = log.replica_blocks(start=0, max_bytes=1 << 20)
    _, count, bodies = log.block_bodies(start=3, last=5, max_entries=100)
    assert (count, bodies) == (4, blocks[1].body + blocks[2].body)
    _, count, bodies = log.block_bodies(start=0, last=5, max_entries=2)
    assert (count, bodies) == (2, blocks[0].body)
    assert log.block_bodies(start=6, last=9, max_entries=10)[1:] == (0, b"")


def big_log(log: Replica) -> None:
    """Blocks at 0, 2, 3, 5 (end 6)."""
    write(log, (2, 1), (1, 1), (2, 2), (1, 3))


@pytest.mark.parametrize("offset", range(0, 8))
def test_trimming_removes_whole_blocks_below_the_offset(make_log: Factory, offset: int) -> None:
    log = make_log(one_block_segments=True)
    big_log(log)
    log.flush()
    before = list(log.read())
    log.trim_before(offset)
    # The newest block is never trimmed; others go when all their entries are below `offset`.
    start = max(b for b in (0, 2, 3, 5) if b <= offset)
    assert log.log_start_offset == start
    assert list(log.read()) == before[start:]
    assert offsets(log, gt=-1, lte=start) == [start]
    assert log.epoch_cache() == [
        (e, max(o, start))
        for i, (e, o) in enumerate([(1, 0), (2, 3), (3, 5)])
        if i == 2 or [3, 5][i] > start
    ]
    assert log.replica_blocks(start=start, max_bytes=1 << 20)[0].first_offset == start
    with pytest.raises(LogError):
        log.truncate_to(start - 1)
    log.write_blocks([block(log, 1, epoch=3, ts=T0 + 1)], check=True)
    assert log.end_offset == 7 and offsets(log)[0] == start


def snapshot_at(offset: int, *, epoch: int = 2) -> StartSnapshot:
    """A snapshot whose last entry is `offset`."""
    return StartSnapshot(offset=offset, epoch=epoch, timestamp=T0 + 7, checksum="c0ffee")


def test_a_reset_to_a_snapshot_empties_the_log_after_it(make_log: Factory) -> None:
    log = make_log()
    write(log, (2, 1), (3, 2))
    log.reset_to_snapshot(snapshot_at(9))
    assert state(log) == (10, 10, 10, [], T0 + 7)
    assert log.start_snapshot == snapshot_at(9)
    assert list(log.read()) == [] and log.replica_blocks(start=10, max_bytes=1) == []
    with pytest.raises(LogError):
        log.truncate_to(9)
    with pytest.raises(ReplicaBlockError):  # before the snapshot's time
        log.write_blocks([block(log, 1, epoch=3, ts=T0)], check=True)
    log.write_blocks([block(log, 2, epoch=3, ts=T0 + 8)], check=True)
    assert offsets(log) == [10, 11] and log.epoch_cache() == [(3, 10)]
    assert log.start_snapshot == snapshot_at(9)


def test_a_trim_past_the_start_snapshot_stops_naming_it(make_log: Factory) -> None:
    log = make_log(one_block_segments=True)
    log.reset_to_snapshot(snapshot_at(1))
    write(log, (1, 3), (2, 3), ts=T0 + 8)
    log.flush()
    log.trim_before(3)
    assert log.log_start_offset == 3 and log.start_snapshot is None
    assert log.epoch_cache() == [(3, 3)]


def test_random_writes_truncations_trims_and_resets_agree_with_a_model(
    make_log: Factory,
) -> None:
    rng = random.Random(35)
    log = make_log(one_block_segments=True)
    model: list[tuple[int, int, int]] = []  # (offset, epoch, timestamp) of each entry kept
    start, epoch, ts = 0, 1, T0
    for _ in range(60):
        choice = rng.random()
        if choice < 0.55:
            n = rng.randint(1, 3)
            epoch += rng.random() < 0.3
            ts += rng.randint(0, 2)
            log.write_blocks([block(log, n, epoch=epoch, ts=ts)], check=rng.random() < 0.5)
            model += [(start + len(model) + i, epoch, ts) for i in range(n)]
        elif choice < 0.75:
            cut = rng.randint(start, start + len(model) + 1)
            assert log.truncate_to(cut) == max(start + len(model) - cut, 0)
            del model[cut - start :]
        elif choice < 0.85:
            log.flush()
            assert log.flushed_offset == log.end_offset
        elif choice < 0.95:
            log.trim_before(rng.randint(0, start + len(model)))
            gone = log.log_start_offset - start
            del model[:gone]
            start = log.log_start_offset
        else:
            end = start + len(model)
            ts += 1
            log.reset_to_snapshot(
                StartSnapshot(offset=end, epoch=epoch, timestamp=ts, checksum="0")
            )
            start, model = end + 1, []
        got = [(e.offset, e.epoch, e.timestamp) for e in log.read()]
        assert got == model
        assert (log.log_start_offset, log.end_offset) == (start, start + len(model))
        cache = [(e, o) for k, (o, e, _) in enumerate(model) if k == 0 or model[k - 1][1] != e]
        assert log.epoch_cache() == cache


def test_a_closed_replica_log_refuses_everything(make_log: Factory) -> None:
    log = make_log()
    write(log, (1, 1))
    log.close()
    log.close()  # idempotent
    for call in (
        log.read,
        log.read_records,
        lambda: log.write_blocks([], check=True),
        log.flush,
        lambda: log.truncate_to(0),
        log.epoch_cache,
        lambda: log.replica_blocks(start=0, max_bytes=1),
    ):
        with pytest.raises(LogClosedError):
            call()


def test_the_memory_replica_log_implements_the_protocol() -> None:
    # Checked by mypy (the assignment) and at run time.
    with MemoryReplicaLog() as memory:
        replicated: ReplicatedLog = memory
        block = replicated.encode_block(
            [(records("m", 2), "p")], first_offset=0, epoch=1, timestamp=T0
        )
        assert replicated.write_blocks([block], check=True) == 2
        assert replicated.flush() == 2 and replicated.epoch_cache() == [(1, 0)]
