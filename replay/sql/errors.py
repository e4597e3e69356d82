"""Errors of the SQL snapshot store; each message says what to do next."""

from __future__ import annotations

from records.errors import MetadataLogError


class SnapshotStoreError(MetadataLogError):
    """Something went wrong with the snapshot database."""


class StoreUnavailableError(SnapshotStoreError):
    """The database cannot be reached (down, wrong URL, no permission)."""


class SnapshotDatabaseDamagedError(SnapshotStoreError):
    """The database's own files or pages are damaged (SQLite's CORRUPT/NOTADB, PG's XX001/2).

    Snapshots are a cache of the log: the service warns and replays the whole log instead.
    """


class SchemaError(SnapshotStoreError):
    """The database schema is not the one this code writes."""


class SchemaBehindError(SchemaError):
    """The schema is older than this code: `mlog db upgrade` brings it up to date."""


class SchemaAheadError(SchemaError):
    """The schema is newer than this code knows: a newer metadata-log wrote it."""


class SnapshotNotFoundError(SnapshotStoreError):
    """No snapshot has the id asked for."""


class SnapshotContentError(SnapshotStoreError):
    """A snapshot's rows do not form an image (damaged or edited by hand)."""


class SnapshotChecksumError(SnapshotContentError):
    """A snapshot's rows do not match the checksum stored with it."""
