"""Errors of the segmented log."""

from __future__ import annotations

from pathlib import Path

from records.errors import MetadataLogError


class LogError(MetadataLogError):
    """Something went wrong in the log layer."""


class LogCorruptionError(LogError):
    """Stored log data is damaged or missing (not a torn tail); nothing past it is served.

    Names the file, the byte position and the first offset affected when it is known, and the
    explicit repair: cut the log before the damage with `mlog log truncate`, which keeps what
    it removes in `<log dir>/quarantine/`.
    """

    def __init__(
        self,
        segment: Path,
        position: int,
        reason: str,
        *,
        first_offset: int | None = None,
        repairable: bool = True,
    ) -> None:
        kind = "log segment" if segment.suffix == ".avro" else "log file"
        affected = "" if first_offset is None else f"; offsets from {first_offset} on are affected"
        if not repairable:
            advice = "restore it from a replica or backup"
        elif first_offset is None:
            advice = (
                "restore it from a replica or backup, or cut the log before it with "
                "`mlog log truncate --after-offset N` (`mlog log verify` shows N; the removed "
                "bytes are kept in the log's quarantine/ directory)"
            )
        else:
            advice = (
                "restore it from a replica or backup, or cut the log before the damage with "
                f"`mlog log truncate --after-offset {first_offset - 1}` (the removed bytes are "
                "kept in the log's quarantine/ directory)"
            )
        where = f"is damaged at byte {position}" if position >= 0 else "is not as expected"
        super().__init__(
            f"{kind} {segment} {where}: {reason}{affected}. "
            f"Run `mlog log verify` for a full report; {advice}"
        )
        self.segment = segment
        self.position = position
        """Byte of the damage in the file; -1 for a whole file (missing, or its place wrong)."""
        self.reason = reason
        self.first_offset = first_offset
        """First offset whose entry is damaged or missing, when known."""
        self.repairable = repairable
        """False when cutting the log cannot help (its start is missing)."""


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


class ReplicaBlockError(LogError):
    """A block for replication is malformed or does not fit the log; nothing was written."""
