"""The Spark audit's check of the hash chain: one task per segment, links checked on the driver.

Each segment's stored chain values (metadata_log.chain) can be checked on their own: the
task recomputes every block's value from the stored value before it and compares, starting
from the chain file's `previous`. What ties the segments together, each file's `previous`
being the previous segment's last stored value, is checked on the driver from what the tasks
return. The first break is the lowest offset any of them names.

Over an archive (`audit_chain(spark, "s3://...")`) each task fetches its segment and chain
objects through fsspec into a temporary directory of its own, checked by SHA-256 against the
manifest (`ArchiveCache.fetch`), and checks them as a local segment; the executors need no
mount.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from metadata_log.archive import ArchiveCache, ArchiveLocation, ManifestEntry
from metadata_log.chain import ChainDamage, chain_path, link, read_chain_file
from metadata_log.container import BlockDamage, body_prefix
from metadata_log.digest import DigestError, LogDigest, take_digest
from metadata_log.reader import LogReader
from metadata_log.segment import ScanProblem, Segment
from replay.audit.archived import is_archive_url, open_archive

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentChain:
    """What one task found in one segment."""

    base_offset: int
    has_file: bool
    previous: bytes
    last: bytes
    """The last stored value (`previous` when the segment has no record)."""
    blocks: int
    first_break: int | None
    """First offset of the first block whose stored value does not follow, if any."""
    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainAudit:
    """The chain over the whole log, as the Spark tasks and the driver found it."""

    segments: int
    blocks: int
    first_break: int | None
    reason: str
    digest: LogDigest | None
    """The digest at the audited offset (from the stored values), when one was asked for."""

    @property
    def ok(self) -> bool:
        """True if every stored value follows and every segment links to the one before."""
        return self.first_break is None

    def text(self) -> str:
        """One line for the audit's output."""
        if self.first_break is not None:
            return (
                f"hash chain: BROKEN at offset {self.first_break} ({self.reason}); checked in "
                f"{self.segments} Spark task(s)"
            )
        return (
            f"hash chain: intact over {self.blocks} blocks, checked in {self.segments} Spark "
            "task(s)"
        )


def check_segment(task: tuple[str, int, int]) -> SegmentChain:
    """Recompute and compare one segment's chain (runs in a Spark task)."""
    path_text, base, size = task
    path = Path(path_text)
    try:
        chain = read_chain_file(chain_path(path))
    except ChainDamage as exc:
        return SegmentChain(
            base_offset=base,
            has_file=True,
            previous=b"",
            last=b"",
            blocks=0,
            first_break=base,
            reason=f"its chain file is damaged ({exc})",
        )
    if chain is None:
        return SegmentChain(
            base_offset=base, has_file=False, previous=b"", last=b"", blocks=0, first_break=None
        )
    stored = {r.first_offset: r for r in chain.records}
    value = chain.previous
    blocks = 0
    try:
        segment = Segment.open_header(path, base)
        for block in segment.iter_blocks(segment.header.size, size):
            first, _, _ = body_prefix(block.body)
            blocks += 1
            record = stored.get(first)
            if record is None:
                break  # the newest blocks are recorded by the next writer open
            if link(value, first, block.count, block.body) != record.value:
                return SegmentChain(
                    base_offset=base,
                    has_file=True,
                    previous=chain.previous,
                    last=chain.head,
                    blocks=blocks,
                    first_break=first,
                    reason=f"the block at offsets {first}..{first + block.count - 1} of "
                    f"{path.name} does not follow the hash chain",
                )
            value = record.value
    except (BlockDamage, ScanProblem) as exc:
        return SegmentChain(
            base_offset=base,
            has_file=True,
            previous=chain.previous,
            last=chain.head,
            blocks=blocks,
            first_break=base,
            reason=f"{path.name} is damaged ({exc}); run `mlog log verify`",
        )
    return SegmentChain(
        base_offset=base,
        has_file=True,
        previous=chain.previous,
        last=chain.head,
        blocks=blocks,
        first_break=None,
    )


def check_archived_segment(task: tuple[str, ManifestEntry]) -> SegmentChain:
    """Fetch one archived segment and its chain file (checked by hash), then check its chain."""
    url, entry = task
    with tempfile.TemporaryDirectory(prefix="mlog-audit-chain-") as work:
        segment, _ = ArchiveCache(ArchiveLocation.open(url), Path(work)).fetch(entry)
        return check_segment((os.fspath(segment), entry.base_offset, segment.stat().st_size))


def log_digest(log_dir: str | os.PathLike[str], at_offset: int) -> LogDigest | None:
    """The digest at the last block end at or before `at_offset` (None: the log has no chain)."""
    with LogReader.open(log_dir) as log:
        try:
            return take_digest(list(log.storage.segments), at_offset, at_or_before=True)
        except DigestError:  # a log without a chain has no digest
            return None


def audit_chain(
    spark: SparkSession,
    log_dir: str | os.PathLike[str],
    at_offset: int | None = None,
    *,
    digest_from: str | os.PathLike[str] | None = None,
) -> ChainAudit:
    """Check the chain of the log in `log_dir` in parallel, one Spark task per segment.

    `log_dir` may be an archive URL (its run is checked). With `at_offset`, the audit also
    carries the digest at the last block end at or before it, taken from the stored chain
    values of `digest_from` (default: `log_dir` itself; for an archive, a local copy of it,
    e.g. the view `state --check` reads its image from; none given: no digest).
    """
    context: Any = spark.sparkContext
    source = os.fspath(log_dir)
    if is_archive_url(source):
        _, manifest = open_archive(source)
        archived = [(source, entry) for entry in manifest.run]
        found: list[SegmentChain] = (
            context.parallelize(archived, max(1, len(archived)))
            .map(check_archived_segment)
            .collect()
        )
    else:
        with LogReader.open(log_dir) as log:
            segments = list(log.storage.segments)
            tasks = [(os.fspath(s.path), s.base_offset, s.size) for s in segments]
        found = context.parallelize(tasks, max(1, len(tasks))).map(check_segment).collect()
        digest_from = log_dir if digest_from is None else digest_from
    digest = None
    if at_offset is not None and digest_from is not None:
        digest = log_digest(digest_from, at_offset)
    found.sort(key=lambda s: s.base_offset)
    breaks = [(s.first_break, s.reason) for s in found if s.first_break is not None]
    previous: SegmentChain | None = None
    for segment in found:
        if previous is not None and previous.has_file:
            if not segment.has_file:
                breaks.append(
                    (segment.base_offset, f"segment {segment.base_offset} has no chain file")
                )
            elif segment.previous != previous.last:
                breaks.append(
                    (
                        segment.base_offset,
                        f"the chain file of segment {segment.base_offset} does not start from "
                        "the previous segment's last value",
                    )
                )
        previous = segment
    first = min(breaks, default=None)
    return ChainAudit(
        segments=len(found),
        blocks=sum(s.blocks for s in found),
        first_break=None if first is None else first[0],
        reason="" if first is None else first[1],
        digest=digest,
    )
