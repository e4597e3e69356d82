"""Errors of the Spark audit: a session that cannot start, said in one line."""

from __future__ import annotations

from records.errors import MetadataLogError


class AuditSessionError(MetadataLogError):
    """Spark cannot start for an audit: a bad or unreachable master, or a failed launch."""


class AuditSqlError(MetadataLogError):
    """An audit's SQL statement is not valid Spark SQL: said before (or instead of) a Spark run."""
