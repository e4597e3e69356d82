"""Logs built block by block for the replica, quorum and trim tests."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from metadata_log import LogConfig
from metadata_log.reader import LogReader
from metadata_log.replica import ReplicaBlock
from metadata_log.replica_log import ReplicaLog
from records import (
    ConfigRecord,
    ConfigResourceType,
)

CONFIG = LogConfig(segment_bytes=19 * 1024, index_interval_bytes=256)
"""Small segments (the header alone is about 12 KB) and a dense index, so a few dozen blocks
span several segments and the index is used."""


T0 = 1_700_000_000_000


def record(tag: str, i: int, value_bytes: int = 24) -> ConfigRecord:
    """A record with an incompressible value, so blocks have a real size."""
    rng = random.Random(f"{tag}/{i}")
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC,
        resource_name=tag,
        name=str(i),
        value=rng.randbytes(value_bytes).hex(),
    )


def metadata_log_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Messages of the WARNING records logged on the "metadata_log" logger."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "metadata_log" and r.levelno == logging.WARNING
    ]


@contextmanager
def opened(directory: Path) -> Iterator[ReplicaLog]:
    """Open a quorum-mode log and close it afterwards, whatever happens."""
    log = ReplicaLog.open(directory, config=CONFIG)
    try:
        yield log
    finally:
        log.close()


@contextmanager
def opened_reader(directory: Path) -> Iterator[LogReader]:
    """Open a reader of a quorum-mode log and close it afterwards, whatever happens."""
    with LogReader.open(directory, config=CONFIG) as log:
        yield log


def block_of(
    log: ReplicaLog,
    first: int,
    count: int,
    epoch: int,
    *,
    tag: str = "b",
    principal: str = "p",
    value_bytes: int = 24,
) -> ReplicaBlock:
    """A block of `count` records at `first`, stamped `epoch` and a timestamp from `first`."""
    records = [record(tag, first + i, value_bytes) for i in range(count)]
    return log.encode_block(
        [(records, principal)], first_offset=first, epoch=epoch, timestamp=T0 + first
    )


_TEN = [(3, 1), (1, 1), (4, 1), (2, 2), (5, 2), (1, 4), (3, 4), (2, 4), (4, 5), (1, 7)]


SHAPE = [(count, epoch + 7 * n) for n in range(3) for count, epoch in _TEN]
"""(entries, epoch) of each block of the standard test log; epochs only go up."""


def build(directory: Path, shape: list[tuple[int, int]] = SHAPE) -> list[ReplicaBlock]:
    """A flushed quorum log of one block per (count, epoch) of `shape`."""
    blocks: list[ReplicaBlock] = []
    with opened(directory) as log:
        offset = 0
        for count, epoch in shape:
            block = block_of(log, offset, count, epoch, value_bytes=96)
            offset = log.write_blocks([block], check=True)
            blocks.append(block)
        log.flush()
    return blocks
