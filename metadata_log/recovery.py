"""What an open does with what it finds: a writer repairs, a reader only looks.

`SegmentStorage.open` reads the directory the same way for every role and hands each finding
(damage, a torn tail, files a crash left, a reset a crash interrupted) to one of these
strategies, so no role is a flag checked along the way.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from metadata_log.container import fsync_directory
from metadata_log.errors import LogCorruptionError, LogError
from metadata_log.repair import move_segment
from metadata_log.segment import segment_name
from metadata_log.start_snapshot import StartSnapshot

if TYPE_CHECKING:
    from metadata_log.storage import SegmentStorage

logger = logging.getLogger("metadata_log")


class Recovery(Protocol):
    """The open's answer to each finding; `SegmentStorage.open` calls it as it reads."""

    def damage(self, error: LogCorruptionError) -> None:
        """Damage found: raise it, or note it and serve the log up to it."""

    def interrupted_reset(self, storage: SegmentStorage, snapshot: StartSnapshot) -> None:
        """A reset to `snapshot` that a crash interrupted: finish it, or refuse to read."""

    def stray(self, path: Path) -> None:
        """A temporary file an interrupted write left (never the only copy of anything)."""

    def below_start(self, directory: Path, bases: list[int], start: int) -> None:
        """Segments (`bases`) an interrupted trim left below the log start `start`."""

    def torn(self, path: Path, position: int, description: str) -> str | None:
        """The newest segment ends in a torn block at `position`; what to report, if anything."""


class Inspect:
    """A read-only open: changes nothing on disk, raises damage, stops before a torn tail."""

    def damage(self, error: LogCorruptionError) -> None:
        """Raise it: a reader never serves a damaged log silently."""
        raise error

    def interrupted_reset(self, storage: SegmentStorage, snapshot: StartSnapshot) -> None:
        """Refuse: only the node's writer may finish an install."""
        raise LogError(
            f"the log in {storage.directory} is being reset to start after snapshot offset "
            f"{snapshot.offset} (an install a crash interrupted); start the node (its "
            "writer finishes the reset), then read it"
        )

    def stray(self, path: Path) -> None:
        """Left alone: the writer removes it."""

    def below_start(self, directory: Path, bases: list[int], start: int) -> None:
        """Left alone: the writer removes them; reads skip them."""

    def torn(self, path: Path, position: int, description: str) -> str | None:
        """Reported (`torn_tail`), not truncated: the next writer open truncates it."""
        return description


class InspectUpToDamage(Inspect):
    """A read-only open that serves the log up to the first damage (for repair and dumps).

    Each damage is logged as a WARNING; the storage keeps the first, and reads that reach it
    raise it, so nothing past it is served and nothing before it is hidden.
    """

    def damage(self, error: LogCorruptionError) -> None:
        """Logged; the storage serves what precedes it."""
        logger.warning("reading up to the damage: %s", error)


class Repair(Inspect):
    """A writer's open: finishes what a crash interrupted and truncates a torn tail."""

    def interrupted_reset(self, storage: SegmentStorage, snapshot: StartSnapshot) -> None:
        """Finish the reset: the start-snapshot file was the intent, written first."""
        logger.info(
            "finishing the log reset to offset %d that a crash interrupted (an install)",
            snapshot.offset + 1,
        )
        storage.reset_files(snapshot.offset + 1, snapshot.chain)

    def stray(self, path: Path) -> None:
        """Removed: an interrupted segment, index, checkpoint or epoch write."""
        path.unlink()

    def below_start(self, directory: Path, bases: list[int], start: int) -> None:
        """Removed: a trim stopped after it moved the log start, and this finishes it."""
        for base in bases:
            move_segment(directory / segment_name(base), None)
        fsync_directory(directory)
        logger.info(
            "removed %d segment(s) below the log start %d left by an interrupted trim",
            len(bases),
            start,
        )

    def torn(self, path: Path, position: int, description: str) -> str | None:
        """Truncated durably, with a WARNING that names what was dropped."""
        logger.warning("truncating torn tail of %s", description)
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, position)
            os.fsync(fd)
        finally:
            os.close(fd)
        return None
