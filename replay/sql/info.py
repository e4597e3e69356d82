"""What the `snapshots` table says about a snapshot, and whether this code reads its format."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from replay.image import MetadataImage, Provenance
from replay.sql.errors import SnapshotContentError, SnapshotStoreError
from replay.sql.models import FORMAT_VERSION


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotInfo:
    """What the `snapshots` table says about one snapshot."""

    id: int
    offset: int
    """Offset of the last log entry in the snapshot."""
    epoch: int
    timestamp: int
    """Append time (ms) of that entry."""
    created_at: datetime
    record_count: int
    checksum: str
    format_version: int
    base_id: int | None = None
    """The snapshot an increment is written on (None: a full snapshot)."""
    chain_length: int = 0
    """Increments from the full snapshot to this one (0: a full snapshot)."""
    content_bytes: int | None = None
    """Bytes of its own rows' values (None: written before they were counted, not measured)."""

    @property
    def is_increment(self) -> bool:
        """Whether the snapshot holds only what changed since its base."""
        return self.base_id is not None

    @property
    def provenance(self) -> Provenance:
        """The provenance of the image the snapshot holds."""
        return Provenance(offset=self.offset, epoch=self.epoch, timestamp=self.timestamp)


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifyResult:
    """What `verify` found: the stored and the recomputed checksum, or why it failed."""

    info: SnapshotInfo
    computed: str | None
    error: str | None
    image: MetadataImage | None = None
    """The image the rows hold (when they form one), for a check against the log."""

    @property
    def ok(self) -> bool:
        """Whether the rows match the stored checksum and form an image."""
        return self.error is None and self.computed == self.info.checksum


def info_of_row(row: Any) -> SnapshotInfo:
    """The `SnapshotInfo` of a `snapshots` row (its mapping)."""
    created: datetime = row["created_at"]
    if created.tzinfo is None:  # SQLite keeps no zone; the store writes UTC
        created = created.replace(tzinfo=UTC)
    return SnapshotInfo(
        id=row["id"],
        offset=row["log_offset"],
        epoch=row["epoch"],
        timestamp=row["log_timestamp"],
        created_at=created,
        record_count=row["record_count"],
        checksum=row["checksum"],
        format_version=row["format_version"],
        base_id=row["base_id"],
        chain_length=row["chain_length"],
        content_bytes=row["content_bytes"],
    )


def check_format(info: SnapshotInfo) -> None:
    """Refuse a snapshot whose format this code does not read (newer, or older and stale)."""
    if info.format_version > FORMAT_VERSION:
        raise SnapshotStoreError(
            f"snapshot {info.id} has format version {info.format_version}; this "
            f"metadata-log reads version {FORMAT_VERSION}: a newer metadata-log wrote it. "
            "Upgrade metadata-log, or use another database"
        )
    if info.format_version != FORMAT_VERSION:
        # Older snapshots may lack areas added since (version 1: ACLs and credentials;
        # version 2: the clients' idempotent writes), so they cannot stand for the log;
        # time travel skips them and replays the log.
        raise SnapshotContentError(
            f"snapshot {info.id} has format version {info.format_version}, older than "
            f"{FORMAT_VERSION}, and may lack ACLs, SCRAM credentials or clients' "
            "idempotent writes; the log is "
            f"replayed instead. Delete it (`mlog snapshot delete {info.id}`); a new "
            "snapshot replaces it"
        )
