"""`verify`: check every byte of a log directory and report every problem, without opening it.

Runs without the writer lock and without `MetadataLog.open`, so it reports what an open would
refuse: damaged headers, missing segments, a damaged or missing checkpoint file, as well as
every damaged block. Each segment is read once, a block at a time (chunks of about a MiB; a
block is loaded only after its sync marker matched), and each block is decoded in full and
dropped, so memory stays within a small multiple of the largest block.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

from metadata_log.chain_check import ChainChecker, ChainReport
from metadata_log.checkpoint import CheckpointDamage, checkpoint_path, read_checkpoint
from metadata_log.container import BlockDamage
from metadata_log.errors import LogCorruptionError
from metadata_log.extent import (
    Link,
    chain_problem,
    extent_problems,
    link_problem,
    trimmed_leftovers,
)
from metadata_log.segment import (
    ScanProblem,
    Segment,
    SegmentInfo,
    parse_segment_name,
    segment_name,
)
from metadata_log.tail import judge_tail
from records.codec import DEFAULT_CODEC, RecordCodec

_NO_INDEX = 1 << 62
"""An index interval no segment reaches: verify builds no index beyond the first entry."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SegmentReport:
    """What `verify` found in one segment."""

    info: SegmentInfo
    entries: int
    """Entries decoded and checked before the first problem (all of them if none)."""
    error: LogCorruptionError | None


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyReport:
    """What `verify` found in the whole log."""

    segments: tuple[SegmentReport, ...]
    torn_tail: str | None
    """A torn tail of the newest segment (a writer open truncates it): not damage."""
    problems: tuple[LogCorruptionError, ...] = ()
    """Problems of the log as a whole: missing segments, checkpoints, links between segments."""
    chain: ChainReport | None = None
    """The hash chain (metadata_log.chain): where it starts, the blocks that do not follow."""

    @property
    def ok(self) -> bool:
        """True if nothing is damaged or missing and the hash chain holds."""
        return (
            not self.problems
            and all(s.error is None for s in self.segments)
            and (self.chain is None or self.chain.ok)
        )

    @property
    def entries(self) -> int:
        """Entries decoded and checked."""
        return sum(s.entries for s in self.segments)

    @property
    def errors(self) -> list[LogCorruptionError]:
        """Every problem found, segments' and the log's, in log order."""
        found = [s.error for s in self.segments if s.error is not None]
        return [*found, *self.problems]


def segment_bases(directory: Path) -> list[int]:
    """Base offsets of the segment files in `directory`, sorted."""
    bases = [parse_segment_name(name) for name in os.listdir(directory)]
    return sorted(base for base in bases if base is not None)


def verify_log(
    directory: str | os.PathLike[str],
    codec: RecordCodec = DEFAULT_CODEC,
    *,
    progress: Callable[[int], None] | None = None,
    sizes: Mapping[int, int] | None = None,
    chain_values_at: Collection[int] = (),
) -> VerifyReport:
    """Check the checkpoints, every header, link and block of the log in `directory`.

    `sizes` bounds the bytes checked per segment (by base offset); by default each file's size.
    `progress` is called with the entries of each block checked. The hash chain is
    recomputed and compared with its stored values; its recomputed value at each end offset of
    `chain_values_at` is kept in the report (to check digests).
    """
    path = Path(directory)
    problems: list[LogCorruptionError] = []
    try:
        checkpoint = read_checkpoint(path)
    except CheckpointDamage as exc:
        problems.append(
            LogCorruptionError(checkpoint_path(path), 0, f"the checkpoint file is damaged: {exc}")
        )
        checkpoint = None
    recovery_point = 0 if checkpoint is None else checkpoint.recovery_point
    bases = segment_bases(path)
    # Segments an interrupted trim left below the log start are no part of the log.
    bases = bases[
        trimmed_leftovers(bases, 0 if checkpoint is None else checkpoint.log_start_offset) :
    ]
    reports: list[SegmentReport] = []
    chain = ChainChecker(
        (checkpoint.log_start_offset if checkpoint is not None else bases[0] if bases else 0),
        frozenset(chain_values_at),
    )
    links: list[Link | None] = []
    torn_tail: str | None = None
    chained = False
    for i, base in enumerate(bases):
        segment_path = path / segment_name(base)
        size = os.stat(segment_path).st_size
        if sizes is not None and base in sizes:
            size = min(size, sizes[base])
        try:
            segment = Segment.open_header(segment_path, base)
        except BlockDamage as exc:
            header_error = LogCorruptionError(
                segment_path, 0, f"bad segment header: {exc}", first_offset=base
            )
            info = SegmentInfo(
                base_offset=base,
                next_offset=base,
                size_bytes=size,
                path=segment_path,
                max_timestamp=-1,
            )
            reports.append(SegmentReport(info=info, entries=0, error=header_error))
            chain.unreadable(base)
            links.append(None)
            continue
        chained = chained or segment.header.checksummed
        is_last = i == len(bases) - 1
        chain.begin_segment(segment)
        error, torn = _check_segment(
            segment,
            size,
            codec,
            is_last=is_last,
            recovery_point=recovery_point,
            progress=progress,
            chain=chain,
        )
        if error is None:
            chain.end_segment(newest=is_last)
        else:
            chain.unreadable(segment.next_offset)
        torn_tail = torn_tail or torn
        reports.append(
            SegmentReport(info=segment.info(), entries=segment.next_offset - base, error=error)
        )
        link = Link(
            path=segment_path,
            base_offset=base,
            next_offset=segment.next_offset,
            sync=segment.header.sync,
            previous_last_offset=segment.header.previous_last_offset,
            previous_sync=segment.header.previous_sync,
        )
        previous = links[-1] if links else None
        if previous is not None:
            # After a damaged segment its end is not known: only the chain of headers is.
            check = link_problem if reports[-2].error is None else chain_problem
            problem = check(previous, link)
            if problem is not None:
                problems.append(problem)
        links.append(link)
    problems.extend(
        extent_problems(
            path,
            checkpoint,
            links[0] if links else None,
            links[-1] if links else None,
            chained=chained,
            check_end=not reports or reports[-1].error is None,
        )
    )
    return VerifyReport(
        segments=tuple(reports),
        torn_tail=torn_tail,
        problems=tuple(problems),
        chain=chain.report(),
    )


def _check_segment(
    segment: Segment,
    size: int,
    codec: RecordCodec,
    *,
    is_last: bool,
    recovery_point: int,
    progress: Callable[[int], None] | None,
    chain: ChainChecker,
) -> tuple[LogCorruptionError | None, str | None]:
    """Decode every block of `segment` up to `size`: (damage found, torn tail description)."""
    try:
        array_schema = segment.array_schema(codec)
        for block in segment.iter_blocks(segment.header.size, size):
            decoded = segment.decode(codec, block, array_schema, segment.next_offset)
            chain.block(block, decoded.first_offset)
            segment.note_block(
                position=block.position,
                end=block.end,
                first_offset=decoded.first_offset,
                count=block.count,
                epoch=decoded.epochs[0],
                timestamp=decoded.timestamps[0],
                interval=_NO_INDEX,
            )
            if progress is not None:
                progress(block.count)
    except LogCorruptionError as exc:
        return exc, None
    except ScanProblem as problem:
        first = segment.next_offset
        if not is_last:
            why = "a sealed segment is never torn"
        else:
            verdict = judge_tail(segment.path, segment.header.sync, problem.position, size)
            if verdict.torn and first >= recovery_point:
                return None, (
                    f"segment {segment.path}: torn tail at byte {problem.position} "
                    f"({problem.reason}; {verdict.why}); {verdict.dropped()} would be dropped"
                )
            why = verdict.why
            if verdict.torn:
                why = (
                    f"it looks torn ({verdict.why}), but the checkpoints say offsets up to "
                    f"{recovery_point - 1} were durable"
                )
        reason = f"{problem.reason}; {why}"
        return LogCorruptionError(segment.path, problem.position, reason, first_offset=first), None
    return None, None
