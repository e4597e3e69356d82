"""Errors of time travel: a point the log does not have, or a malformed request."""

from __future__ import annotations

from records.errors import MetadataLogError


class TimeTravelError(MetadataLogError):
    """A time-travel request names a point the log does not have, or is malformed."""
