"""A reader of a log directory: no lock, nothing changed on disk, any number beside a writer."""

from __future__ import annotations

import os
from pathlib import Path

from metadata_log.checkpoint import CheckpointDamage, read_checkpoint
from metadata_log.config import LogConfig
from metadata_log.epoch_cache import EpochCache
from metadata_log.errors import LogClosedError, LogCorruptionError, LogError
from metadata_log.recovery import Inspect, InspectUpToDamage
from metadata_log.storage import SegmentStorage
from metadata_log.stored_log import StoredLog
from records.codec import DEFAULT_CODEC, RecordCodec

OPEN_TRIES = 5
"""Opens a reader makes while a trim beside it moves the log's start under the open."""


class LogReader(StoredLog):
    """Reads a log that a writer (`MetadataLog`, `ReplicaLog`) may be appending to.

    Stops before a torn tail (reported as `torn_tail`; the next writer truncates it) and
    raises `LogCorruptionError` for damage, unless opened with `open_up_to_damage`.
    """

    def __init__(self, storage: SegmentStorage) -> None:
        super().__init__(storage)
        self._epochs: EpochCache | None = None

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        config: LogConfig | None = None,
        codec: RecordCodec = DEFAULT_CODEC,
    ) -> LogReader:
        """Open the log in `directory` for reading; `LogCorruptionError` if it is damaged."""
        return cls(cls._storage(directory, config, codec, Inspect()))

    @classmethod
    def open_up_to_damage(
        cls,
        directory: str | os.PathLike[str],
        *,
        config: LogConfig | None = None,
        codec: RecordCodec = DEFAULT_CODEC,
    ) -> LogReader:
        """Open the log in `directory` and serve it up to the first damage (repair, dumps).

        Each damage found is logged as a WARNING; `damage` is the first, and reads that reach
        it raise it.
        """
        return cls(cls._storage(directory, config, codec, InspectUpToDamage()))

    @staticmethod
    def _storage(
        directory: str | os.PathLike[str],
        config: LogConfig | None,
        codec: RecordCodec,
        recovery: Inspect,
    ) -> SegmentStorage:
        path = Path(directory)
        if not path.is_dir():
            raise LogError(
                f"there is no log at {path}; check --data-dir (the log lives in <data-dir>/log)"
            )
        config = config or LogConfig()
        for _ in range(OPEN_TRIES - 1):
            # A trim beside this reader (a server's online retention, `log trim`) names the
            # new start in the checkpoints, then deletes the segments below it. An open that
            # read the old start and listed after the deletes sees segments missing at the
            # front; one that listed before them finds a listed segment gone. Either way the
            # start moved meanwhile, and a new open sees the log as it now is.
            start = _start(path)
            try:
                storage = SegmentStorage.open(path, config=config, codec=codec, recovery=recovery)
            except FileNotFoundError:
                continue
            except LogCorruptionError:
                if _start(path) != start:
                    continue
                raise
            if storage.damage is None or _start(path) == start:
                return storage
        return SegmentStorage.open(path, config=config, codec=codec, recovery=recovery)

    @property
    def damage(self) -> LogCorruptionError | None:
        """Opened up to damage: the first damage found (reads stop before it)."""
        return self.storage.damage

    def epoch_cache(self) -> list[tuple[int, int]]:
        """A quorum log's leader-epoch cache, checked against the log (rebuilt in memory only).

        [(epoch, offset of its first entry)], oldest first; see `ReplicaLog.epoch_cache`.
        """
        if self.storage.closed:
            raise LogClosedError("the log is closed")
        if self._epochs is None:
            self._epochs = EpochCache(self.storage)
            self._epochs.load(persist=False)
        return list(self._epochs.epochs)


def _start(directory: Path) -> int | None:
    """The log start the checkpoints name now (None: no readable checkpoint)."""
    try:
        checkpoint = read_checkpoint(directory)
    except CheckpointDamage:
        return None
    return None if checkpoint is None else checkpoint.log_start_offset
