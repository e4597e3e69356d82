"""A snapshot's content tables, their columns, and the order-independent checksum of their rows.

The checksum is a SHA-256 over, per table, the row count and the sum (mod 2**128) of a BLAKE2b
digest of each row -- a multiset hash, so rows can be read back in any order the database likes,
and a digest can be taken out again (`remove`): an increment's checksum is its base's with the
changed rows' old digests taken out and their new ones added (`replay.sql.increments`). A row is
serialized with `marshal` format version 0 (see `replay.sql.content`). Partitions are hashed per
topic (the topic's partition rows in id order, as one item).
"""

from __future__ import annotations

import hashlib
import json
import marshal
from collections.abc import Generator, Iterable, Sequence
from typing import Any

from records.model import PARTITION_STATE_FIELDS
from replay.sql import security_rows
from replay.sql.errors import SnapshotContentError

Row = tuple[Any, ...]

FEATURES = "snapshot_features"
BROKERS = "snapshot_brokers"
ENDPOINTS = "snapshot_broker_endpoints"
BROKER_FEATURES = "snapshot_broker_features"
NAMESPACES = "snapshot_namespaces"
TOPICS = "snapshot_topics"
PARTITIONS = "snapshot_partitions"
PENDING = "snapshot_pending_deletions"
CONFIGS = "snapshot_configs"
ACLS = security_rows.ACLS
SCRAM = security_rows.SCRAM
CLIENT_WRITES = "snapshot_client_writes"

COLUMNS: dict[str, tuple[str, ...]] = {
    FEATURES: ("name", "level"),
    BROKERS: (
        "broker_id",
        "incarnation_id",
        "broker_epoch",
        "rack",
        "fenced",
        "in_controlled_shutdown",
    ),
    ENDPOINTS: ("broker_id", "position", "name", "host", "port", "security_protocol"),
    BROKER_FEATURES: (
        "broker_id",
        "position",
        "name",
        "min_supported_version",
        "max_supported_version",
    ),
    NAMESPACES: ("namespace_id", "name", "parent_id"),
    TOPICS: ("topic_id", "namespace", "name"),
    PARTITIONS: ("topic_id", "partition_id", *PARTITION_STATE_FIELDS),
    PENDING: ("topic_id", "partition_count", "delete_after_ms", "created_ms"),
    CONFIGS: ("resource_type", "resource_name", "name", "value"),
    SCRAM: security_rows.SCRAM_COLUMNS,
    ACLS: security_rows.ACL_COLUMNS,
    CLIENT_WRITES: ("client_id", "position", "sequence", "principal", "api_key", "response"),
}
"""Content columns of each table, in the order of the rows below (the write order)."""

_MODULUS = 1 << 128


def item_digest(data: bytes) -> int:
    """The digest of one item's marshal bytes, as the integer the checksum sums.

    A compiled partition reader computes the same one in C (`replay.sql._row_runs`).
    """
    return int.from_bytes(hashlib.blake2b(data, digest_size=16).digest(), "big")


class ContentChecksum:
    """The order-independent checksum of a snapshot's rows (see the module docstring)."""

    def __init__(self) -> None:
        self._sums = dict.fromkeys(COLUMNS, 0)
        self._counts = dict.fromkeys(COLUMNS, 0)

    def add(self, table: str, row: Row) -> None:
        """Count one row of `table`."""
        self._add(table, marshal.dumps(row, 0), 1)

    def counted(self, table: str, rows: Iterable[Row]) -> Generator[Row, None, None]:
        """`rows` as they come, each counted as `add` counts it (the sum taken at their end).

        For a table of many rows (a snapshot's topics, one a topic): one loop, without the
        calls a row into `add`, `_add` and `item_digest` (0.62-0.71x their time).
        """
        dumps, blake2b, from_bytes = marshal.dumps, hashlib.blake2b, int.from_bytes
        total = count = 0
        try:
            for row in rows:
                total += from_bytes(blake2b(dumps(row, 0), digest_size=16).digest(), "big")
                count += 1
                yield row
        finally:
            self._sums[table] = (self._sums[table] + total) % _MODULUS
            self._counts[table] += count

    def add_group(self, table: str, rows: Sequence[Row]) -> None:
        """Count rows that always travel together (one topic's partitions, in id order)."""
        self._add(table, marshal.dumps(list(rows), 0), len(rows))

    def _add(self, table: str, data: bytes, count: int, *, sign: int = 1) -> None:
        digest = item_digest(data)
        self._sums[table] = (self._sums[table] + sign * digest) % _MODULUS
        self._counts[table] += sign * count

    def add_sum(self, table: str, digest_sum: int, count: int) -> None:
        """Count `count` rows whose items' digests (`add_group`'s, as integers) sum to this."""
        self._sums[table] = (self._sums[table] + digest_sum) % _MODULUS
        self._counts[table] += count

    def remove(self, table: str, row: Row) -> None:
        """Take one row of `table` out again (what `add` counted)."""
        self._add(table, marshal.dumps(row, 0), 1, sign=-1)

    def remove_group(self, table: str, rows: Sequence[Row]) -> None:
        """Take out rows `add_group` counted together."""
        self._add(table, marshal.dumps(list(rows), 0), len(rows), sign=-1)

    def take_table(self, table: str, other: ContentChecksum) -> None:
        """Make `table`'s count and sum those of `other` (a table an increment did not touch)."""
        self._sums[table] = other._sums[table]
        self._counts[table] = other._counts[table]

    def to_text(self) -> str:
        """The per-table counts and sums as JSON: what a later increment starts from."""
        return json.dumps({t: [self._counts[t], f"{self._sums[t]:032x}"] for t in COLUMNS})

    @classmethod
    def from_text(cls, text: str) -> ContentChecksum:
        """The checksum `to_text` wrote; SnapshotContentError if the text is not that."""
        checksum = cls()
        try:
            state = json.loads(text)
            for table in COLUMNS:
                count, digest_sum = state[table]
                if not isinstance(count, int) or count < 0:
                    raise ValueError(table)
                checksum._counts[table] = count
                checksum._sums[table] = int(digest_sum, 16) % _MODULUS
        except (TypeError, ValueError, KeyError, AttributeError):
            raise SnapshotContentError(
                "a snapshot's stored content sums are not readable; it cannot be the base of "
                "an increment (the next snapshot is written in full)"
            ) from None
        return checksum

    def count(self, table: str) -> int:
        """Rows of `table` counted so far."""
        return self._counts[table]

    def hexdigest(self) -> str:
        """The checksum: 64 hex digits."""
        summary = "".join(f"{t}:{self._counts[t]}:{self._sums[t]:032x};" for t in COLUMNS)
        return hashlib.sha256(summary.encode()).hexdigest()


def record_count(checksum: ContentChecksum) -> int:
    """How many records the image of these rows writes (endpoints are part of their broker)."""
    return sum(
        checksum.count(t)
        for t in (
            FEATURES,
            BROKERS,
            NAMESPACES,
            TOPICS,
            PARTITIONS,
            PENDING,
            CONFIGS,
            SCRAM,
            ACLS,
            CLIENT_WRITES,
        )
    )
