"""Errors of the segmented log."""

from __future__ import annotations

from pathlib import Path

from records.errors import MetadataLogError


class LogError(MetadataLogError):
    """Something went wrong in the log layer."""


class LogCorruptionError(LogError):
    """Stored log data is damaged somewhere other than a torn tail; nothing past it is served."""

    def __init__(self, segment: Path, position: int, reason: str) -> None:
        super().__init__(
            f"log segment {segment} is damaged at byte {position}: {reason}. "
            "Run `mlog log verify` for a full report; restore the segment from a replica or "
            "backup, or truncate the log before this position"
        )
        self.segment = segment
        self.position = position
        self.reason = reason


class LogLockedError(LogError):
    """Another process holds the writer lock of the log directory."""

    def __init__(self, directory: Path, holder: str) -> None:
        super().__init__(
            f"log directory {directory} is already open for writing by {holder}; if that is "
            "`mlog serve`, send the command through it with --bootstrap-server HOST:PORT; "
            "otherwise stop that process first, or use a read-only command (e.g. `mlog log dump`)"
        )
        self.directory = directory
        self.holder = holder


class LogFailedError(LogError):
    """An earlier append hit an I/O error; the log accepts no more writes (fail-stop)."""


class LogClosedError(LogError):
    """The log was closed."""


class ReadOnlyLogError(LogError):
    """An append was attempted on a log opened read-only."""


class LogConfigError(LogError):
    """A log setting is out of range."""
