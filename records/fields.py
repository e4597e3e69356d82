"""What a record declaration says beyond its Python types: Avro int widths and field docs.

A record field is declared once, on its dataclass, as `name: Annotated[type, Doc("...")]`.
The Avro type follows from the Python type (`records.schemas` derives it once, at import):
str, bytes and bool are Avro's string, bytes and boolean, an `IntEnum` an int, a `Uuid` the
fixed `mlog.Uuid`, `tuple[X, ...]` an array, `X | None` the union `["null", X]`. Only an int
needs more: `Int32` (Avro int) or `Int64` (Avro long), since the width is part of the format.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Final, Literal, TypeAlias

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
"""The largest Avro int, which is Kafka's int32 too (ids, epochs, counts on the wire)."""
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
"""The largest Avro long, which is Kafka's int64 too (offsets, times in ms)."""

INT_RANGES: Final[Mapping[str, tuple[int, int]]] = MappingProxyType(
    {"int": (INT32_MIN, INT32_MAX), "long": (INT64_MIN, INT64_MAX)}
)
"""Each Avro int type's range, lowest and highest value (a record's ints are checked by it)."""


# Plain slotted classes, not dataclasses: every start-up that reads records creates both
# classes, and a dataclass costs about half a millisecond to create. Doc is positional: a marker
# written on every field reads best as Doc("...").
class Doc:
    """The doc an Avro field carries (every field has one): `Annotated[str, Doc("...")]`."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Doc({self.text!r})"


class AvroInt:
    """The Avro type of an int field: "int" (32 bits) or "long" (64 bits)."""

    __slots__ = ("type",)

    def __init__(self, avro_type: Literal["int", "long"]) -> None:
        self.type = avro_type

    def __repr__(self) -> str:
        return f"AvroInt({self.type!r})"


Int32: TypeAlias = Annotated[int, AvroInt("int")]
"""An int written as Avro int (`INT32_MIN` .. `INT32_MAX`)."""

Int64: TypeAlias = Annotated[int, AvroInt("long")]
"""An int written as Avro long (`INT64_MIN` .. `INT64_MAX`)."""
