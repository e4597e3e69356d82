"""The log as the core sees it: epochs and offsets, never entry bodies."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field

from api.protocol.quorum.messages import SnapshotId
from api.raft.core.errors import RaftError
from api.raft.core.voters import VoterHistory


@dataclass(slots=True)
class LogView:
    """An in-memory leader-epoch cache [(epoch, start offset)], the end and flushed offsets.

    The real log (or the simulation's) is the source of truth; the core keeps this view in step
    with the appends and truncations it asks the shell to do. Epochs in the cache strictly
    increase and so do their start offsets; an epoch with no entries is not in it.

    A log whose start moved (a trim below a snapshot, or a snapshot installed from the leader)
    holds entries from `start_offset` on; `start_epoch` is the epoch of the entry just before
    it (which the log no longer holds), and `snapshot` the node's newest snapshot of committed
    state (its end offset is at least `start_offset`: the state below the start is in it).
    """

    end_offset: int = 0
    flushed_offset: int = 0
    epochs: list[tuple[int, int]] = field(default_factory=list)
    start_offset: int = 0
    start_epoch: int = 0
    snapshot: SnapshotId | None = None
    voters: VoterHistory | None = None
    """A dynamic quorum's voter sets by offset (KIP-853); None: the static voters of the
    config (`controller.quorum.voters`)."""

    @classmethod
    def from_log(
        cls,
        *,
        end_offset: int,
        epochs: list[tuple[int, int]],
        start_offset: int = 0,
        start_epoch: int = 0,
        snapshot: SnapshotId | None = None,
        voters: VoterHistory | None = None,
    ) -> LogView:
        """The view of a log just opened (everything in it is durable)."""
        previous = (start_epoch - 1 if start_offset else -1, -1)
        for epoch, start in epochs:
            if epoch <= previous[0] or start <= previous[1] or start >= end_offset:
                raise RaftError(
                    f"the log's epoch cache {epochs[:8]} is not increasing within "
                    f"[{start_offset}, {end_offset}) after epoch {start_epoch}; run "
                    "`mlog log verify`"
                )
            previous = (epoch, start)
        if end_offset > start_offset and (not epochs or epochs[0][1] != start_offset):
            raise RaftError(f"the log's epoch cache does not start at offset {start_offset}")
        if start_offset > 0 and (snapshot is None or snapshot.end_offset < start_offset):
            raise RaftError(
                f"the log starts at offset {start_offset} but no snapshot reaches it ({snapshot})"
            )
        view = cls(
            end_offset=end_offset,
            flushed_offset=end_offset,
            epochs=list(epochs),
            start_offset=start_offset,
            start_epoch=start_epoch,
            voters=voters,
        )
        if voters is not None and voters.changes:
            first, last = voters.changes[0][0], voters.changes[-1][0]
            if first < start_offset or last >= end_offset:
                raise RaftError(
                    f"the log's voters entries [{first}..{last}] are outside its offsets "
                    f"[{start_offset}, {end_offset})"
                )
        if snapshot is not None:
            view.take_snapshot(snapshot)
        return view

    @property
    def last_epoch(self) -> int:
        """The epoch of the last entry: the one before the start for an empty log, else 0."""
        return self.epochs[-1][0] if self.epochs else self.start_epoch

    def take_snapshot(self, snapshot: SnapshotId) -> None:
        """`snapshot` (of committed state) is now the node's newest; it must match this log.

        Its end offset is within [start, end] and its epoch is that of the entry before it.
        """
        end = snapshot.end_offset
        if not self.start_offset <= end <= self.end_offset or end == 0:
            raise RaftError(
                f"snapshot {snapshot} is outside the log [{self.start_offset}, {self.end_offset}]"
            )
        epoch = self.start_epoch if end == self.start_offset else self.epoch_at(end - 1)
        if epoch != snapshot.epoch:
            raise RaftError(f"snapshot {snapshot} disagrees with the log's epoch {epoch} there")
        if self.snapshot is None or end >= self.snapshot.end_offset:
            self.snapshot = snapshot

    def install(self, snapshot: SnapshotId) -> None:
        """The log was replaced by `snapshot`: empty, starting at its end offset."""
        self.start_offset = self.end_offset = self.flushed_offset = snapshot.end_offset
        self.start_epoch = snapshot.epoch
        self.epochs = []
        self.snapshot = snapshot

    def trim_start(self, start: int) -> None:
        """The shell removed the entries below `start` (online retention, below the snapshot).

        The snapshot must reach `start` (fetchers below it are sent the snapshot); the epoch
        of the entry before the new start becomes `start_epoch`.
        """
        if start <= self.start_offset:
            return
        if self.snapshot is None or self.snapshot.end_offset < start or start > self.end_offset:
            raise RaftError(
                f"cannot move the log start to {start}: the snapshot {self.snapshot} does not "
                f"reach it or the log ends at {self.end_offset}"
            )
        self.start_epoch = self.epoch_at(start - 1)
        kept = [
            (epoch, max(first, start))
            for index, (epoch, first) in enumerate(self.epochs)
            if index + 1 == len(self.epochs) or self.epochs[index + 1][1] > start
        ]
        self.epochs = [] if start == self.end_offset else kept
        self.start_offset = start

    def below_start(self, *, fetch_offset: int, last_fetched_epoch: int) -> bool:
        """Whether a fetcher at this position needs the snapshot (KIP-630's rule).

        Its offset is below the log start, or at the start with another epoch than the entry
        before it, or its last epoch is older than that entry's: the log cannot show it
        where the two logs agree.
        """
        if self.start_offset == 0 or self.snapshot is None:
            return False
        return (
            fetch_offset < self.start_offset
            or (fetch_offset == self.start_offset and last_fetched_epoch != self.start_epoch)
            or last_fetched_epoch < self.start_epoch
        )

    def epoch_at(self, offset: int) -> int:
        """The epoch of the entry at `offset` (which must be in the log)."""
        index = bisect_right([start for _, start in self.epochs], offset) - 1
        return self.epochs[index][0]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's `endOffsetForEpoch`: (largest epoch <= `epoch`, where it ends).

        (0, 0) when every entry has a larger epoch (or the log is empty and epoch is 0). A log
        whose start moved counts the entry before its start as the end of `start_epoch`.
        """
        found = (0, 0)
        if self.start_offset > 0 and self.start_epoch <= epoch:
            found = (self.start_epoch, self.start_offset)
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
        if not self.epochs or epoch > self.epochs[-1][0]:
            # The first entry after the start opens the cache, even in the start's epoch.
            self.epochs.append((epoch, self.end_offset))
        self.end_offset += count

    def truncate(self, offset: int) -> None:
        """Drop every entry at `offset` and after (never below the log start)."""
        if offset >= self.end_offset:
            return
        self.end_offset = max(offset, self.start_offset)
        self.flushed_offset = min(self.flushed_offset, self.end_offset)
        if self.voters is not None:
            self.voters.truncate(self.end_offset)
        while self.epochs and self.epochs[-1][1] >= self.end_offset:
            self.epochs.pop()
