"""Logs of many segments and archives of them, shared by the archive tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from metadata_log import LogConfig, MetadataLog
from metadata_log.archive import ArchiveLocation, SegmentArchiver, UploadReport
from metadata_log.reader import LogReader
from tests.support.replica_logs import record

SMALL_SEGMENTS = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=512)
"""About one segment per dozen batches: a few hundred appends make dozens of segments."""

CLUSTER = "archive-test-cluster"


def grow(directory: Path, batches: int, *, tag: str = "a", start: int = 0) -> None:
    """Append `batches` batches of 4 config records (each batch one block)."""
    now = [1_700_000_000_000 + start * 1000]

    def clock() -> int:
        now[0] += 1000
        return now[0]

    with MetadataLog.open(directory, config=SMALL_SEGMENTS, clock_ms=clock) as log:
        for b in range(start, start + batches):
            log.append([record(f"{tag}{b}", i, 120) for i in range(4)])


def archive_all(directory: Path, url: str, work: Path) -> UploadReport:
    """One upload round of `directory`'s sealed segments to the archive at `url`."""
    archiver = SegmentArchiver(ArchiveLocation.open(url), cluster_id=CLUSTER, work_dir=work)
    with LogReader.open(directory, config=SMALL_SEGMENTS) as log:
        return archiver.archive(log, committed_end=log.end_offset)


def trim_to(directory: Path, offset: int) -> int:
    """Trim `directory`'s log below `offset`; its new start."""
    with MetadataLog.open(directory, config=SMALL_SEGMENTS) as log:
        log.trim_before(offset)
        return log.log_start_offset


def copy_log(directory: Path, target: Path) -> Path:
    """A copy of a log directory (the untrimmed twin the answers are compared with)."""
    shutil.copytree(directory, target)
    return target
