"""Does the log have all of itself? Segment links and the checkpoints, checked on every open.

Offsets are dense, so a segment must start where the previous one ends; a header written by
this code also names the previous segment's last offset and sync marker, so a segment from
another copy of the log is not taken for the next one. The checkpoints say where the log
starts, how far it was durable and which segment was the newest: a log that starts later, ends
earlier or lost its newest segment is damaged, not shorter. Logs written before checkpoints
existed have none: they start at offset 0 and have no recovery point to check against.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from metadata_log.chain import ChainDamage, chain_path, link, read_chain_file
from metadata_log.checkpoint import Checkpoint, checkpoint_path
from metadata_log.container import BlockDamage
from metadata_log.errors import LogCorruptionError
from metadata_log.segment import ScanProblem, Segment, segment_name


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """What the check of one segment against the next needs to know about it."""

    path: Path
    base_offset: int
    next_offset: int
    sync: bytes
    previous_last_offset: int | None
    """From the header: None if it predates the chain."""
    previous_sync: bytes | None
    """From the header: None if it predates the chain; empty if it had no previous segment."""


def trimmed_leftovers(bases: list[int], start: int) -> int:
    """How many of the sorted segment `bases` lie wholly below the log start `start`.

    A trim (`MetadataLog.trim_before`) writes the new log start durably before it deletes the
    segments below it, so a crash in between leaves them: they end at or before the next
    segment's base, which is at or before the start. They are no part of the log (a writer
    deletes them on open, readers skip them). The newest segment is never one of them.
    """
    count = 0
    while count + 1 < len(bases) and bases[count + 1] <= start:
        count += 1
    return count


def link_problem(previous: Link, segment: Link) -> LogCorruptionError | None:
    """The problem with `segment` following `previous`, or None if it follows it."""
    if segment.base_offset > previous.next_offset:
        missing = (
            f"offset {previous.next_offset}"
            if segment.base_offset == previous.next_offset + 1
            else f"offsets {previous.next_offset}..{segment.base_offset - 1}"
        )
        return LogCorruptionError(
            previous.path.with_name(segment_name(previous.next_offset)),
            -1,
            f"the segment holding {missing} is missing: {previous.path.name} ends before "
            f"offset {previous.next_offset} and the next segment, {segment.path.name}, starts at "
            f"{segment.base_offset}",
            first_offset=previous.next_offset,
        )
    if segment.base_offset < previous.next_offset:
        return LogCorruptionError(
            segment.path,
            0,
            f"the segment starts at offset {segment.base_offset} but the previous one, "
            f"{previous.path.name}, holds entries up to offset {previous.next_offset - 1}",
            first_offset=segment.base_offset,
        )
    if segment.previous_last_offset is not None and (
        segment.previous_last_offset != previous.next_offset - 1
    ):
        return LogCorruptionError(
            segment.path,
            0,
            f"its header says the previous segment ends at offset "
            f"{segment.previous_last_offset}, but {previous.path.name} ends at offset "
            f"{previous.next_offset - 1}",
            first_offset=segment.base_offset,
        )
    return chain_problem(previous, segment)


def chain_problem(previous: Link, segment: Link) -> LogCorruptionError | None:
    """The problem with `segment`'s header naming another previous segment, or None.

    Needs only the headers, so it is checked even when the previous segment's blocks are
    damaged and its end is not known. Sync markers are each writer's own: a segment another
    replica of the same log wrote (a quorum's segments in an archive, metadata_log/archive)
    names that replica's previous segment. Where both are hash-chained and the segment's
    chain starts from the previous one's last value (`chains_link`), it follows that content,
    a stronger proof than the marker, and is taken.
    """
    if (
        segment.previous_sync is not None
        and segment.previous_sync != previous.sync
        and not chains_link(previous.path, segment.path, segment.base_offset)
    ):
        return LogCorruptionError(
            segment.path,
            0,
            f"its header names another previous segment than {previous.path.name} (the sync "
            "markers differ): a segment between them is missing, or this one comes from "
            "another copy of the log",
            first_offset=segment.base_offset,
        )
    return None


def chains_link(previous: Path, segment: Path, base_offset: int) -> bool:
    """Whether `segment`'s first block follows `previous`'s content by the hash chain.

    Its chain file must start from the last value of `previous`'s, and its first block's
    value, recomputed from the block's body, must be the one stored: the segment holds the
    entries that follow (another replica's copy of the same history), not another history
    beside a chain file taken along. False when a chain file or the block cannot be read.
    """
    try:
        before = read_chain_file(chain_path(previous))
        after = read_chain_file(chain_path(segment))
        if before is None or after is None or not before.records or not after.records:
            return False
        opened = Segment.open_header(segment, base_offset)
        block = next(opened.iter_blocks(opened.header.size, segment.stat().st_size), None)
    except (ChainDamage, BlockDamage, ScanProblem, OSError):
        return False
    last, first = before.records[-1], after.records[0]
    return (
        block is not None
        and after.previous == last.value
        and first.first_offset == last.end_offset == base_offset
        and first.count == block.count
        and link(last.value, first.first_offset, first.count, block.body) == first.value
    )


def extent_problems(
    directory: Path,
    checkpoint: Checkpoint | None,
    first: Link | None,
    newest: Link | None,
    *,
    chained: bool,
    check_end: bool = True,
) -> list[LogCorruptionError]:
    """What the checkpoints (or, without them, offset 0) say is missing from the log.

    `first` and `newest` are the first and newest segments found (None if none), `newest`
    with its next offset after recovery; `chained` is True if any header was written with the
    chain, i.e. by a writer that keeps the checkpoints. Without `check_end` (the segments were
    not all read, because of damage) only the start of the log is checked.
    """
    problems = []
    if checkpoint is None:
        if chained:
            problems.append(
                LogCorruptionError(
                    checkpoint_path(directory),
                    -1,
                    "the checkpoint file is missing, though the segments were written by a "
                    "version that keeps it",
                    first_offset=None if newest is None else newest.next_offset,
                )
            )
        start = 0
    else:
        start = checkpoint.log_start_offset
    if first is not None and first.base_offset != start:
        if first.base_offset > start:
            reason = (
                f"the log starts at offset {start} but its first segment, {first.path.name}, "
                f"starts at {first.base_offset}: the segments before it are missing"
            )
            problems.append(
                LogCorruptionError(
                    directory / segment_name(start),
                    -1,
                    reason,
                    first_offset=start,
                    repairable=False,
                )
            )
        else:
            problems.append(
                LogCorruptionError(
                    first.path,
                    0,
                    f"the segment starts at offset {first.base_offset}, before the log start "
                    f"offset {start} of the checkpoints",
                    first_offset=first.base_offset,
                )
            )
    if checkpoint is None or not check_end:
        return problems
    end = start if newest is None else newest.next_offset
    if newest is None and checkpoint.recovery_point > start:
        problems.append(
            LogCorruptionError(
                directory / segment_name(start),
                -1,
                f"every segment is missing, though the checkpoints say offsets up to "
                f"{checkpoint.recovery_point - 1} were durable",
                first_offset=start,
            )
        )
    elif newest is not None and newest.base_offset < checkpoint.newest_segment:
        problems.append(
            LogCorruptionError(
                directory / segment_name(checkpoint.newest_segment),
                -1,
                f"the newest segment is missing: the checkpoints name a segment starting at "
                f"offset {checkpoint.newest_segment}, but the newest one found is "
                f"{newest.path.name}",
                first_offset=min(end, checkpoint.newest_segment),
            )
        )
    elif newest is not None and end < checkpoint.recovery_point:
        problems.append(
            LogCorruptionError(
                newest.path,
                -1,
                f"the log ends before offset {end}, but the checkpoints say offsets up to "
                f"{checkpoint.recovery_point - 1} were durable and acknowledged",
                first_offset=end,
            )
        )
    return problems
