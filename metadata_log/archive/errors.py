"""What can go wrong with an archive; each message is one line that says what to do."""

from __future__ import annotations

from records.errors import MetadataLogError


class ArchiveError(MetadataLogError):
    """The archive cannot be used as asked (a bad URL, another cluster's archive, ...)."""


class ArchiveUnreachable(ArchiveError):
    """The archive could not be read or written (a network or filesystem error): try again."""


class ArchiveDamage(ArchiveError):
    """An archived object is missing or differs from what the manifest says it holds."""
