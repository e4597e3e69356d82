"""The log's roles as small typed protocols: what a user, a reader and a Raft shell need.

Like eventsourcing's recorders: the file log (`MetadataLog`, `ReplicaLog`, `LogReader`) and the
in-memory `MemoryLog` and `MemoryReplicaLog` implement them, and code that only appends and
reads asks for `AppendLog` rather than a class, so a test can hand it either.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol

from metadata_log.replica import ReplicaBlock
from metadata_log.start_snapshot import StartSnapshot
from metadata_log.writer import AppendResult
from records.codec import RecordBlock
from records.entry import LogEntry
from records.model import Record


class ReadLog(Protocol):
    """Reads of committed entries by offset range (keyword-only `gt`, `lte`, `limit`)."""

    @property
    def end_offset(self) -> int:
        """The offset the next entry will get (one past the last committed entry)."""
        ...

    @property
    def log_start_offset(self) -> int:
        """Offset of the first entry the log keeps."""
        ...

    @property
    def last_timestamp(self) -> int:
        """The timestamp (ms) of the last entry, -1 for an empty log."""
        ...

    def read(
        self, *, gt: int | None = None, lte: int | None = None, limit: int | None = None
    ) -> Iterator[LogEntry]:
        """Committed entries with `gt < offset <= lte`, at most `limit`, oldest first."""
        ...

    def read_records(
        self, *, gt: int | None = None, lte: int | None = None
    ) -> Iterator[RecordBlock]:
        """The same records as `read`, a block at a time (for bulk readers)."""
        ...

    def close(self) -> None:
        """Release what the log holds; idempotent."""
        ...


class AppendLog(ReadLog, Protocol):
    """The user's log: atomic, durable appends of record batches, and reads."""

    @property
    def epoch(self) -> int:
        """The leader epoch stamped on appended entries."""
        ...

    def append(self, records: Iterable[Record], *, principal: str | None = None) -> AppendResult:
        """Append `records` as one atomic batch; (first, last) offset once durable."""
        ...

    def append_batches(
        self, batches: Iterable[tuple[Iterable[Record], str | None]]
    ) -> list[AppendResult]:
        """Append several batches, each with its principal, all or none."""
        ...

    async def append_async(
        self, records: Iterable[Record], *, principal: str | None = None
    ) -> AppendResult:
        """`append`, group-committed with concurrent callers."""
        ...

    async def aclose(self) -> None:
        """Wait for appends in flight, then close."""
        ...


class ReplicatedLog(ReadLog, Protocol):
    """A quorum node's log as the Raft shell uses it (Kafka's ReplicatedLog, etcd's Storage)."""

    @property
    def flushed_offset(self) -> int:
        """One past the last durable entry."""
        ...

    @property
    def start_snapshot(self) -> StartSnapshot | None:
        """The snapshot the log starts just after (an install), if it still starts there."""
        ...

    def encode_block(
        self,
        batches: Sequence[tuple[Sequence[Record], str | None]],
        *,
        first_offset: int,
        epoch: int,
        timestamp: int,
    ) -> ReplicaBlock:
        """Encode `batches` as one block; nothing written."""
        ...

    def write_blocks(self, blocks: Sequence[ReplicaBlock], *, check: bool) -> int:
        """Append whole blocks at the end, without fsync; the new end offset."""
        ...

    def flush(self) -> int:
        """Make written blocks durable; the flushed end offset."""
        ...

    def truncate_to(self, offset: int) -> int:
        """Durably remove the entries from `offset` on; how many went."""
        ...

    def epoch_cache(self) -> list[tuple[int, int]]:
        """[(epoch, offset of its first entry)], oldest first."""
        ...

    def replica_blocks(
        self, *, start: int, max_bytes: int, max_blocks: int | None = None
    ) -> list[ReplicaBlock]:
        """Whole blocks from the one beginning at `start`, for another node (bounded)."""
        ...

    def block_bodies(self, *, start: int, last: int, max_entries: int) -> tuple[str, int, bytes]:
        """Stored block bodies from the one holding `start` (schema JSON, count, bodies)."""
        ...

    def reset_to_snapshot(self, snapshot: StartSnapshot) -> None:
        """Make the log empty, starting just after `snapshot`."""
        ...
