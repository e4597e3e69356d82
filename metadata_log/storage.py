"""The log's files: the segment list, its extent and checkpoints, found and checked on open.

Every role (the user's writer, a quorum node's replica log, a reader) opens the directory
through `SegmentStorage.open`; what the open does with damage, a torn tail or what a crash
left is the `Recovery` strategy's answer, so the storage has no modes. The writing roles change
the storage's state (`segments`, `next_offset`, ...) under their own write lock; readers take
a copy of `segments` and read each segment's `size` once, so they see whole blocks only.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from metadata_log.chain import chain_path, encode_header
from metadata_log.checkpoint import (
    Checkpoint,
    CheckpointDamage,
    checkpoint_path,
    read_checkpoint,
    write_checkpoint,
)
from metadata_log.config import LogConfig
from metadata_log.container import BlockDamage, RawBlock, fsync_directory, replace_file
from metadata_log.epoch import write_epoch_checkpoint
from metadata_log.errors import LogCorruptionError
from metadata_log.extent import Link, extent_problems, link_problem, trimmed_leftovers
from metadata_log.recovery import Recovery
from metadata_log.repair import move_segment
from metadata_log.segment import ScanProblem, Segment, parse_segment_name, segment_name
from metadata_log.start_snapshot import (
    START_SNAPSHOT_NAME,
    CarriedChain,
    StartSnapshot,
    StartSnapshotDamage,
    read_start_snapshot,
)
from metadata_log.tail import judge_tail
from records.codec import RecordCodec

logger = logging.getLogger("metadata_log")


def _link(segment: Segment) -> Link:
    header = segment.header
    return Link(
        path=segment.path,
        base_offset=segment.base_offset,
        next_offset=segment.next_offset,
        sync=header.sync,
        previous_last_offset=header.previous_last_offset,
        previous_sync=header.previous_sync,
    )


class SegmentStorage:
    """The segments of one log directory, oldest first, and what the log knows of its extent.

    Built by `open`; the writing roles keep `segments`, `next_offset`, `flushed_offset`,
    `last_timestamp` and the checkpoints up to date as they write.
    """

    def __init__(
        self, directory: Path, *, config: LogConfig, codec: RecordCodec, recovery: Recovery
    ) -> None:
        self.directory = directory
        self.config = config
        self.codec = codec
        self.recovery = recovery
        self.segments: list[Segment] = []
        self.next_offset = 0
        """The offset of the next entry: one past the last one written."""
        self.flushed_offset = 0
        """One past the last durable entry."""
        self.last_timestamp = -1
        self.record_bytes_appended = 0
        """Uncompressed bytes of the entries written through this open."""
        self.checkpoint: Checkpoint | None = None
        self.checkpointed_at = time.monotonic()
        self.start_snapshot: StartSnapshot | None = None
        self.torn_tail: str | None = None
        """The torn tail a read-only open saw (and left for the next writer to truncate)."""
        self.damage: LogCorruptionError | None = None
        """The first damage a reader serving up to damage found (reads stop before it)."""
        self.rebuilt: list[Segment] = []
        """Sealed segments whose indexes were rebuilt by the scan (a writer saves them)."""
        self.closed = False

    # ---------------------------------------------------------------- opening

    @classmethod
    def open(
        cls, directory: Path, *, config: LogConfig, codec: RecordCodec, recovery: Recovery
    ) -> SegmentStorage:
        """Read the checkpoints and segments of `directory`, checked, as `recovery` says.

        Raises `LogCorruptionError` for damage unless the strategy serves up to it.
        """
        storage = cls(directory, config=config, codec=codec, recovery=recovery)
        storage._load()
        return storage

    def _problem(self, error: LogCorruptionError) -> None:
        """Damage found on open: the strategy raises it, or it is remembered."""
        self.recovery.damage(error)
        if self.damage is None:
            self.damage = error

    def _load(self) -> None:
        # The checkpoints first: a segment created after they were read is then merely newer
        # than they say, never "missing".
        try:
            checkpoint = read_checkpoint(self.directory)
        except CheckpointDamage as exc:
            self._problem(
                LogCorruptionError(
                    checkpoint_path(self.directory), 0, f"the checkpoint file is damaged: {exc}"
                )
            )
            checkpoint = None
        self.checkpoint = checkpoint
        try:
            self.start_snapshot = read_start_snapshot(self.directory)
        except StartSnapshotDamage as exc:
            self._problem(
                LogCorruptionError(
                    self.directory / START_SNAPSHOT_NAME, 0, f"the file is damaged: {exc}"
                )
            )
        snapshot = self.start_snapshot
        if snapshot is not None and (
            checkpoint is None or checkpoint.log_start_offset < snapshot.offset + 1
        ):
            self.recovery.interrupted_reset(self, snapshot)
            checkpoint = self.checkpoint
        bases = []
        for name in os.listdir(self.directory):
            base = parse_segment_name(name)
            if base is not None:
                bases.append(base)
            elif name.endswith(".tmp"):
                self.recovery.stray(self.directory / name)
        bases.sort()
        leftovers = trimmed_leftovers(
            bases, 0 if checkpoint is None else checkpoint.log_start_offset
        )
        if leftovers:
            self.recovery.below_start(self.directory, bases[:leftovers], bases[leftovers])
            bases = bases[leftovers:]
        links = self._open_segments(bases)
        for problem in extent_problems(
            self.directory,
            checkpoint,
            links[0] if links else None,
            links[-1] if links else None,
            chained=any(s.header.checksummed for s in self.segments),
            check_end=len(self.segments) == len(bases) and self.damage is None,
        ):
            self._problem(problem)
        if self.segments:
            self.next_offset = self.segments[-1].next_offset
            self.last_timestamp = max(s.max_timestamp for s in self.segments)
        self.flushed_offset = self.next_offset

    def _open_segments(self, bases: list[int]) -> list[Link]:
        """Open the segments in order, checking each against the previous; their links."""
        links: list[Link] = []
        for i, base in enumerate(bases):
            path = self.directory / segment_name(base)
            segment = self._open_segment(path, base, is_last=i == len(bases) - 1)
            if segment is None:
                break  # served up to damage: nothing past a damaged header is
            link = _link(segment)
            if links:
                problem = link_problem(links[-1], link)
                if problem is not None:
                    self._problem(problem)
                    break
            links.append(link)
            self.segments.append(segment)
            if segment.damage is not None:
                break
        return links

    def _open_segment(self, path: Path, base: int, *, is_last: bool) -> Segment | None:
        try:
            file_size = path.stat().st_size
            segment = Segment.open_header(path, base)
        except BlockDamage as exc:
            self._problem(
                LogCorruptionError(path, 0, f"bad segment header: {exc}", first_offset=base)
            )
            return None
        interval = self.config.index_interval_bytes
        if not is_last:
            if segment.load_indexes(file_size):
                return segment
            # A sealed segment was complete (fsynced) before the next one was created: any
            # problem in it is damage, never a torn tail.
            problem = segment.recover_scan(file_size, interval, self.codec)
            if problem is not None:
                return self._damaged(segment, problem)
            self.rebuilt.append(segment)  # saved once the whole log is known to be sound
            return segment
        problem = segment.recover_scan(file_size, interval, self.codec)
        if problem is None:
            return segment
        if problem.certain_damage:
            return self._damaged(segment, problem)
        verdict = judge_tail(path, segment.header.sync, problem.position, file_size)
        if not verdict.torn:
            return self._damaged(segment, problem, f"; {verdict.why}")
        recovery_point = 0 if self.checkpoint is None else self.checkpoint.recovery_point
        if segment.next_offset < recovery_point:
            return self._damaged(
                segment,
                problem,
                f"; it looks torn ({verdict.why}), but the checkpoints say offsets up to "
                f"{recovery_point - 1} were durable",
            )
        description = (
            f"segment {path}: torn tail at byte {problem.position} ({problem.reason}; "
            f"{verdict.why}); {verdict.dropped()} dropped"
        )
        self.torn_tail = self.recovery.torn(path, problem.position, description)
        return segment

    def _damaged(self, segment: Segment, problem: ScanProblem, why: str = "") -> Segment:
        """Damage in a segment: raised, or (served up to damage) kept on the segment.

        Reads that reach the damage raise it, and `verify` reports it, so nothing past it is
        ever served and nothing before it is hidden.
        """
        error = LogCorruptionError(
            segment.path,
            problem.position,
            problem.reason + why,
            first_offset=problem.first_offset,
        )
        self._problem(error)
        segment.damage = error
        return segment

    # ---------------------------------------------------------------- extent

    @property
    def log_start_offset(self) -> int:
        """Offset of the first entry the log keeps (its first segment's base offset)."""
        return self.segments[0].base_offset if self.segments else self.next_offset

    def write_checkpoint(self, log_start_offset: int | None = None) -> None:
        """Persist the checkpoints: the log start, the end offset now, the newest segment."""
        start = log_start_offset
        if start is None:
            start = 0 if self.checkpoint is None else self.checkpoint.log_start_offset
        checkpoint = Checkpoint(
            log_start_offset=start,
            recovery_point=self.flushed_offset,
            newest_segment=self.segments[-1].base_offset if self.segments else start,
        )
        write_checkpoint(self.directory, checkpoint)
        self.checkpoint = checkpoint
        self.checkpointed_at = time.monotonic()

    def write_checkpoint_durably(self, checkpoint: Checkpoint) -> None:
        """Persist `checkpoint` and fsync the directory: before files it speaks of change."""
        write_checkpoint(self.directory, checkpoint, sync_directory=True)
        self.checkpoint = checkpoint

    def reset_files(self, start: int, chain: CarriedChain | None = None) -> Segment:
        """On disk: only an empty segment at `start`, checkpoints and epoch cache naming it.

        Crash-safe in this order: the segments from `start` on (newest first), the new empty
        segment (with `chain`, the hash chain's carried state, in its chain file), the
        checkpoints and the empty epoch cache, then the older segments.
        """
        bases = sorted(
            base
            for name in os.listdir(self.directory)
            if (base := parse_segment_name(name)) is not None
        )
        for base in reversed([b for b in bases if b >= start]):
            move_segment(self.directory / segment_name(base), None)
        fsync_directory(self.directory)
        active = Segment.create(self.directory, start, self.codec.entry_schema_json)
        if chain is not None:
            replace_file(
                chain_path(active.path),
                encode_header(chain.origin, chain.value),
                sync_directory=False,  # the checkpoints' directory fsync below covers it
            )
        self.write_checkpoint_durably(
            Checkpoint(log_start_offset=start, recovery_point=start, newest_segment=start)
        )
        write_epoch_checkpoint(self.directory, [])
        for base in [b for b in bases if b < start]:
            move_segment(self.directory / segment_name(base), None)
        fsync_directory(self.directory)
        return active

    def block_holding(self, offset: int) -> tuple[RawBlock, int]:
        """(the block holding `offset`, its first offset); `offset` must be in the log."""
        segment = next(s for s in reversed(self.segments) if s.base_offset <= offset)
        return next(segment.blocks_with_offsets(offset))
