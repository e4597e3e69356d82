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

_ints: dict[tuple[int, ...], tuple[int, ...]] = {}
_uuids: dict[bytes, Uuid] = {}
_set_uuid_bytes = slot_setter(Uuid, "bytes")


def shared_ints(values: list[int] | tuple[int, ...]) -> tuple[int, ...]:
    """The shared tuple equal to `values`."""
    key = tuple(values)
    found = _ints.get(key)
    if found is None:
        if len(_ints) >= CACHE_LIMIT:
            _ints.clear()
        _ints[key] = key
        return key
    return found


def shared_uuid(raw: bytes) -> Uuid:
    """The shared Uuid for 16 bytes already checked by the Avro schema (fixed, size 16).

    Skips the dataclass `__init__` and `__post_init__`: it runs for nearly every record read.
    """
    found = _uuids.get(raw)
    if found is None:
        if len(_uuids) >= CACHE_LIMIT:
            _uuids.clear()
        found = new_instance(Uuid)
        _set_uuid_bytes(found, raw)
        _uuids[raw] = found
    return found
