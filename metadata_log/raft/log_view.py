"""The log as the core sees it: epochs and offsets, never entry bodies."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from metadata_log.raft.errors import RaftError


@dataclass(slots=True)
class LogView:
    """An in-memory leader-epoch cache [(epoch, start offset)], the end and flushed offsets.

    The real log (or the simulation's) is the source of truth; the core keeps this view in step
    with the appends and truncations it asks the shell to do. Epochs in the cache strictly
    increase and so do their start offsets; an epoch with no entries is not in it.
    """

    end_offset: int = 0
    flushed_offset: int = 0
    epochs: list[tuple[int, int]] = field(default_factory=list)

    @classmethod
    def from_log(cls, *, end_offset: int, epochs: list[tuple[int, int]]) -> LogView:
        """The view of a log just opened (everything in it is durable)."""
        previous = (-1, -1)
        for epoch, start in epochs:
            if epoch <= previous[0] or start <= previous[1] or start >= end_offset:
                raise RaftError(
                    f"the log's epoch cache {epochs[:8]} is not increasing within [0, "
                    f"{end_offset}); run `mlog log verify`"
                )
            previous = (epoch, start)
        if end_offset > 0 and (not epochs or epochs[0][1] != 0):
            raise RaftError("the log's epoch cache does not start at offset 0")
        return cls(end_offset=end_offset, flushed_offset=end_offset, epochs=list(epochs))

    @property
    def last_epoch(self) -> int:
        """The epoch of the last entry, 0 for an empty log."""
        return self.epochs[-1][0] if self.epochs else 0

    def epoch_at(self, offset: int) -> int:
        """The epoch of the entry at `offset` (which must be in the log)."""
        index = bisect_right([start for _, start in self.epochs], offset) - 1
        return self.epochs[index][0]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's `endOffsetForEpoch`: (largest epoch <= `epoch`, where it ends).

        (0, 0) when every entry has a larger epoch (or the log is empty and epoch is 0).
        """
        found = (0, 0)
        for index, (known, _start) in enumerate(self.epochs):
            if known > epoch:
                break
            end = self.epochs[index + 1][1] if index + 1 < len(self.epochs) else self.end_offset
            found = (known, end)
        return found

    def append(self, epoch: int, count: int) -> None:
        """Account for `count` entries of `epoch` appended at the end."""
        if count <= 0:
            return
        if epoch < self.last_epoch:
            raise RaftError(f"appending epoch {epoch} after epoch {self.last_epoch}")
        if epoch > self.last_epoch:
            self.epochs.append((epoch, self.end_offset))
        self.end_offset += count

    def truncate(self, offset: int) -> None:
        """Drop every entry at `offset` and after."""
        if offset >= self.end_offset:
            return
        self.end_offset = max(offset, 0)
        self.flushed_offset = min(self.flushed_offset, self.end_offset)
        while self.epochs and self.epochs[-1][1] >= self.end_offset:
            self.epochs.pop()
