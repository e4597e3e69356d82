"""What a record declaration says beyond its Python types: Avro int widths and field docs.

A record field is declared once, on its dataclass, as `name: Annotated[type, Doc("...")]`.
The Avro type follows from the Python type (`records.schemas` derives it once, at import):
str, bytes and bool are Avro's string, bytes and boolean, an `IntEnum` an int, a `Uuid` the
fixed `mlog.Uuid`, `tuple[X, ...]` an array, `X | None` the union `["null", X]`. Only an int
needs more: `Int32` (Avro int) or `Int64` (Avro long), since the width is part of the format.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal, TypeAlias


# Positional, unlike the other values: a marker written on every field reads best as Doc("...").
@dataclass(frozen=True, slots=True)
class Doc:
    """The doc an Avro field carries (every field has one): `Annotated[str, Doc("...")]`."""

    text: str


@dataclass(frozen=True, slots=True)
class AvroInt:
    """The Avro type of an int field: "int" (32 bits) or "long" (64 bits)."""

    type: Literal["int", "long"]


Int32: TypeAlias = Annotated[int, AvroInt("int")]
"""An int written as Avro int (-2**31 .. 2**31 - 1)."""

Int64: TypeAlias = Annotated[int, AvroInt("long")]
"""An int written as Avro long (-2**63 .. 2**63 - 1)."""
