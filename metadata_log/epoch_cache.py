"""A quorum log's leader-epoch cache: [(epoch, offset of its first entry)], kept on disk.

Kafka's `LeaderEpochFileCache`: loaded from `leader-epoch-checkpoint` on open, checked
against the log's ends with a couple of block reads, rebuilt from the entries (with one
WARNING) when it is missing or wrong.
"""

from __future__ import annotations

import logging

from metadata_log.container import body_prefix
from metadata_log.epoch import (
    EPOCH_CHECKPOINT_NAME,
    EpochCheckpointDamage,
    read_epoch_checkpoint,
    write_epoch_checkpoint,
)
from metadata_log.storage import SegmentStorage

logger = logging.getLogger("metadata_log")


def epochs_from(epochs: list[tuple[int, int]], start: int) -> list[tuple[int, int]]:
    """The epoch cache of a log that starts at `start`: earlier epochs dropped or clipped."""
    kept = [
        (e, o)
        for i, (e, o) in enumerate(epochs)
        if i + 1 >= len(epochs) or epochs[i + 1][1] > start
    ]
    return [(e, max(o, start)) for e, o in kept]


class EpochCache:
    """The epochs of the entries of `storage`'s log: strictly increasing epochs and offsets."""

    def __init__(self, storage: SegmentStorage) -> None:
        self.storage = storage
        self.epochs: list[tuple[int, int]] = []

    @property
    def last_epoch(self) -> int:
        """The epoch of the last entry (0 for an empty log)."""
        return self.epochs[-1][0] if self.epochs else 0

    def persist(self, epochs: list[tuple[int, int]]) -> None:
        """Make `epochs` the cache, written to `leader-epoch-checkpoint` first (OSError)."""
        write_epoch_checkpoint(self.storage.directory, epochs)
        self.epochs = epochs

    def load(self, *, persist: bool) -> None:
        """Load `leader-epoch-checkpoint`, checked against the log; rebuild it if it is wrong.

        With `persist` (a writer) a rebuilt cache is written back; a reader keeps it in memory.
        """
        directory = self.storage.directory
        path = directory / EPOCH_CHECKPOINT_NAME
        problem: str | None = None
        stored: list[tuple[int, int]] | None = None
        try:
            stored = read_epoch_checkpoint(directory)
        except EpochCheckpointDamage as exc:
            problem = f"is damaged ({exc})"
        except OSError as exc:
            problem = f"cannot be read ({exc})"
        start = self.storage.log_start_offset
        if stored is not None:
            # A trim writes the checkpoints first: a cache from before it still starts earlier.
            stored = epochs_from(stored, start)
            problem = self.problem(stored)
        elif problem is None and self.storage.next_offset > start:
            problem = "is missing"
        if problem is None:
            self.epochs = stored or []
            return
        self.epochs = self.scan()
        last = f", the last {self.epochs[-1]}" if self.epochs else ""
        logger.warning(
            "%s %s; rebuilt it from the epochs of the entries (%d epochs%s)",
            path,
            problem,
            len(self.epochs),
            last,
        )
        if persist:
            self.persist(self.epochs)

    def problem(self, epochs: list[tuple[int, int]]) -> str | None:
        """What is wrong with `epochs` as this log's cache, None if it agrees with the log.

        Checks the ends (first start, last epoch's start and the log's last block) with a
        couple of block reads, never a scan.
        """
        storage = self.storage
        start, end = storage.log_start_offset, storage.next_offset
        if end == start:
            return None if not epochs else f"names epochs {epochs[-3:]} but the log is empty"
        if not epochs:
            return f"is empty but the log holds offsets {start}..{end - 1}"
        if epochs[0][1] != start:
            return f"starts at offset {epochs[0][1]}, the log at {start}"
        epoch, first = epochs[-1]
        if first >= end:
            return f"names epoch {epoch} from offset {first}, at or past the log's end ({end})"
        _, last_epoch, _ = body_prefix(storage.block_holding(end - 1)[0].body)
        if last_epoch != epoch:
            return f"ends with epoch {epoch}, but the log's last block has epoch {last_epoch}"
        block, block_first = storage.block_holding(first)
        if block_first != first or body_prefix(block.body)[1] != epoch:
            return f"says epoch {epoch} starts at offset {first}, which the log contradicts"
        if first > start:
            before, _ = storage.block_holding(first - 1)
            if body_prefix(before.body)[1] >= epoch:
                return f"says epoch {epoch} starts at offset {first}, but it starts earlier"
        return None

    def scan(self) -> list[tuple[int, int]]:
        """The epoch cache from the entries: the first block of each higher epoch."""
        epochs: list[tuple[int, int]] = []
        for segment in list(self.storage.segments):
            for block, first in segment.blocks_with_offsets(segment.base_offset):
                _, epoch, _ = body_prefix(block.body)
                # A lower epoch after a higher one (only in logs from before quorum mode) is
                # skipped, as Kafka's cache does: epochs in the cache only go up.
                if not epochs or epoch > epochs[-1][0]:
                    epochs.append((epoch, first))
        return epochs
