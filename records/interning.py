"""Sharing of equal immutable values among decoded records (replica lists, ids).

An image of a million partitions holds a million PartitionRecords; without sharing, each would
carry its own copy of its topic id and of replica and ISR tuples that are equal across most
partitions (a handful of brokers give few distinct lists). Sharing them keeps the image under
the memory budget of about 300 bytes per partition. The caches are bounded: when one fills up it
is emptied, which costs only sharing, never correctness (the values are immutable).
"""

from __future__ import annotations

from records.slots import new_instance, slot_setter
from records.uuids import Uuid

CACHE_LIMIT = 1 << 16
"""Entries a cache holds before it is emptied; records of one topic are read together, so a
recent-values cache of this size catches nearly all repeats."""

_set_uuid_bytes = slot_setter(Uuid, "bytes")


class _IntsCache(dict[tuple[int, ...], tuple[int, ...]]):
    """tuple -> the shared equal tuple; a hit is one C-level lookup, no Python frame."""

    def __missing__(self, key: tuple[int, ...]) -> tuple[int, ...]:
        if len(self) >= CACHE_LIMIT:
            self.clear()
        self[key] = key
        return key


class _UuidCache(dict[bytes, Uuid]):
    """16 raw bytes -> the shared Uuid, built on a miss without `__init__`'s checks."""

    def __missing__(self, raw: bytes) -> Uuid:
        if len(self) >= CACHE_LIMIT:
            self.clear()
        found: Uuid = new_instance(Uuid)
        _set_uuid_bytes(found, raw)
        self[raw] = found
        return found


INTS = _IntsCache()
"""`INTS[tuple(values)]` is the shared tuple; generated decoders index it directly."""
UUIDS = _UuidCache()
"""`UUIDS[raw]` is the shared Uuid for 16 bytes already checked by the Avro schema (fixed,
size 16); generated decoders index it directly, skipping the dataclass `__init__`."""


def shared_ints(values: list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """The shared tuple equal to `values`."""
    return INTS[tuple(values)]


def shared_uuid(raw: bytes) -> Uuid:
    """The shared Uuid for 16 bytes already checked by the Avro schema (fixed, size 16)."""
    found: Uuid = UUIDS[raw]
    return found
