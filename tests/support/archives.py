"""Logs of many segments and archives of them, shared by the archive tests."""

from __future__ import annotations

import shutil
from pathlib import Path

from metadata_log import LogConfig, MetadataLog
from metadata_log.archive import ArchiveLocation, SegmentArchiver, UploadReport
from metadata_log.reader import LogReader
from records.model import ConfigResourceType
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


SMALL_SEGMENT_ENV = {"MLOG_SEGMENT_BYTES": "8192"}
"""`mlog`'s setting for data directories of dozens of segments (a segment per command or two)."""


def build_data_dir(data_dir: Path, topics: int) -> None:
    """A data directory of controller commands (they replay, so snapshots can be taken).

    Three brokers; `topics` topics of 2 partitions, every third one's retention.ms altered,
    every seventh deleting the topic made three before. Run with `SMALL_SEGMENT_ENV` set: at
    40 topics the log has 60 segments or so.
    """
    from api import Metadata  # the metadata_log tests import none of api

    with Metadata.open(data_dir) as md:
        for broker in (1, 2, 3):
            md.register_broker(broker)
        for i in range(topics):
            md.create_topic(f"t{i}", partitions=2)
            if i % 3 == 0:
                md.alter_configs(
                    ConfigResourceType.TOPIC, f"t{i}", set={"retention.ms": str(1000 + i)}
                )
            if i % 7 == 6:
                md.delete_topic(f"t{i - 3}")


def trimmed_twins(root: Path, *, topics: int = 40) -> tuple[Path, Path, str, str]:
    """(trimmed data dir, untrimmed twin, archive URL, digest token taken before the trim).

    A data directory of `topics` topics (`build_data_dir`), a snapshot, a few commands after
    it, its digest; the twin copied then; its sealed segments uploaded with `mlog archive
    upload` and the log trimmed below the snapshot (`mlog log trim --before-snapshot
    --archive-url`). Run with `SMALL_SEGMENT_ENV` set.
    """
    from tests.support.cli import ok  # the CLI only where a test runs it

    data, twin, url = root / "trimmed", root / "twin", f"file://{root / 'archive'}"
    build_data_dir(data, topics)
    ok(data, "snapshot", "create")
    for name in ("late1", "late2", "late3"):
        ok(data, "topics", "create", "--topic", name)
    digest = ok(data, "log", "digest").strip()
    shutil.copytree(data, twin)
    ok(data, "archive", "upload", "--archive-url", url)
    ok(data, "log", "trim", "--before-snapshot", "--archive-url", url)
    return data, twin, url, digest


def tamper(archive: Path, kind: str, index: int, *, delete: bool = False) -> str:
    """Flip a byte of (or delete) the `kind` object of the `index`th archived segment.

    `kind`: `avro` or `chain`. Returns the object's name, as the errors give it.
    """
    path = sorted((archive / "segments").glob(f"*.{kind}"))[index]
    if delete:
        path.unlink()
    else:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    return f"segments/{path.name}"
