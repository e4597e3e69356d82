"""What the generated readers (`generated_reader_codegen`) call as they run.

Their errors (`Refused` and its kinds: what kio refuses too), the unsigned varint of Kafka's
compact lengths, a class's tagged-fields section, a UUID made without `uuid.UUID`'s checks, and
`generated_namespace`, the names a generated reader's source may use. `tagged` reads varints
with `read_uvarint` too, so both readers agree on what a varint is.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

Reader = Callable[[bytes, int], tuple[Any, int]]
"""`(buffer, offset) -> (value, end)`; entity readers return the bytes read instead of end."""


class Refused(ValueError):
    """Bytes kio's reader would refuse too (its own error comes from reading them with kio)."""


class Truncated(Refused):
    """A value runs past the end of the buffer."""


class ImpossibleCount(Truncated):
    """An array count larger than the items left in the buffer could be.

    kio never reads such an array, but it reserves memory for the count first: a count of
    about 2**31 or more makes the reservation fail, which aborts the process (a Rust
    allocation failure is no Python exception). Whoever sees this error can refuse the bytes
    without giving them to kio. Its argument is the count.
    """


# --------------------------------------------------------------------------- values


def read_uvarint(buffer: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (kio's limit) and the position after it."""
    value = shift = 0
    for _ in range(5):
        byte = buffer[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
    raise Refused("a varint longer than 5 bytes")


def _no_tags(buffer: bytes, pos: int) -> int:
    """The position after a tagged-fields section that must be empty (a class without tags)."""
    count, pos = read_uvarint(buffer, pos)
    if count:
        raise Refused("a tagged field the schema does not declare")
    return pos


def _tags(
    buffer: bytes, pos: int, known: dict[int, tuple[int, Reader]], defaults: list[Any]
) -> tuple[list[Any], int]:
    """The values of a class's tagged fields (defaults for the absent ones) and the end."""
    count, pos = read_uvarint(buffer, pos)
    values = list(defaults)
    for _ in range(count):
        tag, pos = read_uvarint(buffer, pos)
        _, pos = read_uvarint(buffer, pos)  # the size: kio reads the value whatever it says
        entry = known.get(tag)
        if entry is None:
            raise Refused(f"unknown tagged field {tag}")
        index, read = entry
        values[index], pos = read(buffer, pos)
    return values, pos


_ERROR_CODES: dict[int, ErrorCode] = {code.value: ErrorCode(code.value) for code in ErrorCode}
_ZERO_UUID = bytes(16)
_new = object.__new__
_set = object.__setattr__
_UUID = uuid.UUID
_UUID_SAFE = uuid.SafeUUID.unknown


def _uuid(data: bytes) -> uuid.UUID:
    """`uuid.UUID(bytes=data)` without its argument checks (16 bytes are given)."""
    value = _new(_UUID)
    _set(value, "int", int.from_bytes(data))
    _set(value, "is_safe", _UUID_SAFE)
    return value


def generated_namespace() -> dict[str, Any]:
    """The globals of a generated reader's source: these helpers, by the names it uses."""
    return {
        "Refused": Refused,
        "Truncated": Truncated,
        "ImpossibleCount": ImpossibleCount,
        "read_uvarint": read_uvarint,
        "_no_tags": _no_tags,
        "_tags": _tags,
        "_new": _new,
        "_uuid": _uuid,
        "_ZERO": _ZERO_UUID,
        "_BOOL": (False, True),
        "_ERROR": _ERROR_CODES,
        "_TD": datetime.timedelta,
        "_unpack": struct.unpack_from,
    }
