"""Checks that a writer schema from a segment header decodes in bounded time and memory.

A header written with `mlog.header_crc32` is exactly what a writer of this code wrote. A header
from before the CRC is checked here instead, because a flipped bit in its schema text can make
a decoder read forever: an array of zero-byte items (`null`, an empty record) decodes any count
without consuming input, and a record that contains itself recurses without end. Missing or
renamed entry fields would surface as raw `KeyError`s far from the file. So the entry must have
exactly the shape every writer of this code base used, and no array, map or record may be one
that decodes without reading input.
"""

from __future__ import annotations

import json
from typing import Any

from metadata_log.container import BlockDamage

_ENTRY_FIELDS: tuple[tuple[str, Any], ...] = (
    ("offset", "long"),
    ("epoch", "int"),
    ("timestamp", "long"),
    ("principal", ["null", "string"]),
)
_PRIMITIVE_SIZES = {
    "null": 0,
    "boolean": 1,
    "int": 1,
    "long": 1,
    "float": 4,
    "double": 8,
    "bytes": 1,
    "string": 1,
}
"""The fewest bytes a value of each primitive type takes."""
_MAX_DEPTH = 64
"""Our schemas nest a few levels; a deeper one is damage (and would exhaust the stack)."""


def check_entry_schema(schema_json: str) -> None:
    """Raise BlockDamage unless `schema_json` is a log entry schema of the shape we write."""
    try:
        schema = json.loads(schema_json)
    except (ValueError, RecursionError):
        raise BlockDamage("the header's schema is not JSON") from None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise BlockDamage("the header's schema is not a record")
    if _full_name(schema, "") != "mlog.LogEntry":
        raise BlockDamage(f"the header's schema is {schema.get('name')!r}, not mlog.LogEntry")
    fields = schema.get("fields")
    if not isinstance(fields, list) or len(fields) != len(_ENTRY_FIELDS) + 1:
        raise BlockDamage("the header's entry schema does not have the five entry fields")
    for field, (name, avro_type) in zip(fields, _ENTRY_FIELDS, strict=False):
        if (
            not isinstance(field, dict)
            or field.get("name") != name
            or field.get("type") != avro_type
        ):
            raise BlockDamage(f"the header's entry schema has no {name} field of type {avro_type}")
    record = fields[-1]
    if not isinstance(record, dict) or record.get("name") != "record":
        raise BlockDamage("the header's entry schema has no record field")
    branches = record.get("type")
    if not isinstance(branches, list) or not branches:
        raise BlockDamage("the header's record field is not a union of records")
    for branch in branches:
        if not isinstance(branch, dict) or branch.get("type") != "record":
            raise BlockDamage("a branch of the header's record union is not a record")
    _Walker().min_size(schema, "mlog", 0)


def _full_name(schema: dict[str, Any], namespace: str) -> str | None:
    name = schema.get("name")
    if not isinstance(name, str) or not name:
        return None
    if "." in name:
        return name
    space = schema.get("namespace", namespace)
    if not isinstance(space, str):
        return None
    return f"{space}.{name}" if space else name


class _Walker:
    """Walks a schema, resolving names, computing the fewest bytes each type decodes from."""

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}
        self.defining: set[str] = set()

    def min_size(self, schema: Any, namespace: str, depth: int) -> int:
        if depth > _MAX_DEPTH:
            raise BlockDamage("the header's schema nests too deeply")
        if isinstance(schema, str):
            return self._named(schema, namespace)
        if isinstance(schema, list):
            if not schema:
                raise BlockDamage("the header's schema has an empty union")
            for branch in schema:
                self.min_size(branch, namespace, depth + 1)
            return 1  # the branch index
        if not isinstance(schema, dict):
            raise BlockDamage(f"the header's schema has a type that is {type(schema).__name__}")
        kind = schema.get("type")
        if kind in ("record", "error"):
            return self._record(schema, namespace, depth)
        if kind in ("array", "map"):
            items = schema.get("items" if kind == "array" else "values")
            if self.min_size(items, namespace, depth + 1) == 0:
                # Zero-byte items: a count decodes to that many items without reading input.
                raise BlockDamage(f"the header's schema has an {kind} of values that take no bytes")
            return 1
        if kind == "enum":
            self._define(schema, namespace, 1)
            return 1
        if kind == "fixed":
            size = schema.get("size")
            if not isinstance(size, int) or size < 0:
                raise BlockDamage("the header's schema has a fixed type without a valid size")
            self._define(schema, namespace, size)
            return size
        if isinstance(kind, str | list | dict) and kind not in ("record", "error"):
            return self.min_size(kind, namespace, depth + 1)
        raise BlockDamage(f"the header's schema has a type {kind!r}")

    def _named(self, name: str, namespace: str) -> int:
        if name in _PRIMITIVE_SIZES:
            return _PRIMITIVE_SIZES[name]
        for candidate in (name, f"{namespace}.{name}"):
            if candidate in self.defining:
                raise BlockDamage(f"the header's schema type {candidate} contains itself")
            if candidate in self.sizes:
                return self.sizes[candidate]
        raise BlockDamage(f"the header's schema uses {name!r} before defining it")

    def _define(self, schema: dict[str, Any], namespace: str, size: int) -> str:
        full = _full_name(schema, namespace)
        if full is None:
            raise BlockDamage("the header's schema has a named type without a valid name")
        if full in self.sizes or full in self.defining:
            raise BlockDamage(f"the header's schema defines {full} twice")
        self.sizes[full] = size
        return full

    def _record(self, schema: dict[str, Any], namespace: str, depth: int) -> int:
        full = _full_name(schema, namespace)
        if full is None:
            raise BlockDamage("the header's schema has a record without a valid name")
        if full in self.sizes or full in self.defining:
            raise BlockDamage(f"the header's schema defines {full} twice")
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise BlockDamage(f"the header's record {full} has no field list")
        inner = full.rpartition(".")[0]
        self.defining.add(full)
        total = 0
        for field in fields:
            if not isinstance(field, dict) or not isinstance(field.get("name"), str):
                raise BlockDamage(f"the header's record {full} has a field without a name")
            total += self.min_size(field.get("type"), inner, depth + 1)
        self.defining.discard(full)
        self.sizes[full] = total
        return total
