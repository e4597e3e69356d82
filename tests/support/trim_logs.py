"""Logs with a start snapshot and trimmed prefixes, shared by the trim tests."""

from __future__ import annotations

from pathlib import Path

from metadata_log import LogConfig, MetadataLog
from metadata_log.segment import parse_segment_name
from records import ConfigRecord, ConfigResourceType
from tests.support.replica_logs import block_of, opened


def fill(directory: Path, blocks: int = 40) -> None:
    """Several segments of blocks of 5 entries, epochs 1 then 2, all flushed."""
    with opened(directory) as log:
        for i in range(blocks):
            log.write_blocks([block_of(log, i * 5, 5, 1 if i < 20 else 2)], check=False)
        log.flush()
        assert len(log.segments()) > 2


def segment_bases(directory: Path) -> list[int]:
    return sorted(b for n in directory.iterdir() if (b := parse_segment_name(n.name)) is not None)


CONFIG = LogConfig(segment_ms=1000)


def config(tag: str, i: int) -> ConfigRecord:
    return ConfigRecord(
        resource_type=ConfigResourceType.TOPIC, resource_name=tag, name=str(i), value="v"
    )


def build(directory: Path, segments: int) -> None:
    """A log of `segments` segments of 3 entries each (one block per segment)."""
    now = [1_700_000_000_000]
    for n in range(segments):
        with MetadataLog.open(directory, config=CONFIG, clock_ms=lambda: now[0]) as log:
            log.append([config(f"s{n}", i) for i in range(3)])
        now[0] += CONFIG.segment_ms
