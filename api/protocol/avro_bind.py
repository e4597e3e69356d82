"""Avro schemas and converters derived from frozen dataclasses, for the private API bodies.

A private API's request and response are the same dataclasses the controller takes and
returns (`replay.controller.commands`), so the wire form cannot drift from what the service
means. This module maps their type hints onto Avro once per class:

| Python hint                | Avro                                   |
| -------------------------- | -------------------------------------- |
| `int`, `bool`, `str`, `bytes`, `float` | `long`, `boolean`, `string`, `bytes`, `double` |
| an `IntEnum`               | `int` (the enum's value)               |
| `Uuid`                     | `bytes` (16)                           |
| `X | None`                 | `["null", X]`                          |
| `tuple[X, ...]`            | `array` of X                           |
| `tuple[A, B]`              | a record `{_0: A, _1: B}`              |
| a dataclass                | a record of its fields (named once, referenced after) |
| `Any`                      | `string` holding JSON                  |

The schema's JSON is what the docs and a golden test pin, so a change to a command's fields
that would change the wire form is seen in review.
"""

from __future__ import annotations

import dataclasses
import enum
import io
import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from fastavro import parse_schema, schemaless_reader, schemaless_writer

from records.errors import MetadataLogError
from records.uuids import Uuid

Convert = Callable[[Any], Any]

_PRIMITIVES: dict[Any, str] = {
    int: "long",
    bool: "boolean",
    str: "string",
    bytes: "bytes",
    float: "double",
}


class BindError(MetadataLogError):
    """A body that does not decode, or a value that does not fit its schema."""


@dataclass(frozen=True, slots=True)
class Binding:
    """A dataclass's Avro schema and its value converters."""

    cls: type[Any]
    schema: dict[str, Any]
    parsed: Any
    to_avro: Convert
    from_avro: Convert

    def encode(self, value: Any) -> bytes:
        """The Avro binary encoding of `value` (an instance of `cls`)."""
        buffer = io.BytesIO()
        try:
            schemaless_writer(buffer, self.parsed, self.to_avro(value))
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise BindError(f"{self.cls.__name__} does not fit its schema: {exc}") from exc
        return buffer.getvalue()

    def decode(self, data: bytes) -> Any:
        """An instance of `cls` from its Avro binary encoding; the whole input must be used."""
        value, used = self.decode_prefix(data)
        if used != len(data):
            raise BindError(
                f"malformed {self.cls.__name__} body: {len(data) - used} bytes after it"
            )
        return value

    def decode_prefix(self, data: bytes) -> tuple[Any, int]:
        """An instance of `cls` from the start of `data`, and how many bytes it took."""
        stream = io.BytesIO(data)
        try:
            value = schemaless_reader(stream, self.parsed, None)
            return self.from_avro(value), stream.tell()
        except (EOFError, TypeError, ValueError, KeyError, IndexError, UnicodeDecodeError) as exc:
            raise BindError(f"malformed {self.cls.__name__} body: {exc}") from None


def binding(cls: type[Any]) -> Binding:
    """The binding of a dataclass (built once per class)."""
    return _binding(cls)  # type: ignore[arg-type]  # classes are hashable


@cache
def _binding(cls: type[Any]) -> Binding:
    builder = _Builder()
    schema, to_avro, from_avro = builder.record(cls)
    return Binding(cls, schema, parse_schema(schema), to_avro, from_avro)


class _Builder:
    """Builds one schema; named records are defined once and referenced by name after."""

    def __init__(self) -> None:
        self._defined: dict[str, tuple[Convert, Convert]] = {}
        self._pairs = 0

    def record(self, cls: type[Any]) -> tuple[Any, Convert, Convert]:
        name = cls.__name__
        if name in self._defined:
            to_avro, from_avro = self._defined[name]
            return name, to_avro, from_avro
        hints = typing.get_type_hints(cls)
        fields = [f for f in dataclasses.fields(cls) if f.init]
        converters: list[tuple[str, Convert, Convert]] = []
        # Placeholders first, so a recursive reference finds the name.
        self._defined[name] = (lambda v: v, lambda v: v)
        avro_fields = []
        for f in fields:
            schema, to_avro, from_avro = self.hint(hints[f.name])
            avro_fields.append({"name": f.name, "type": schema})
            converters.append((f.name, to_avro, from_avro))

        def record_to_avro(value: Any) -> dict[str, Any]:
            return {n: to(getattr(value, n)) for n, to, _ in converters}

        def record_from_avro(value: dict[str, Any]) -> Any:
            return cls(**{n: back(value[n]) for n, _, back in converters})

        self._defined[name] = (record_to_avro, record_from_avro)
        return (
            {"type": "record", "name": name, "fields": avro_fields},
            record_to_avro,
            record_from_avro,
        )

    def hint(self, hint: Any) -> tuple[Any, Convert, Convert]:
        if hint in _PRIMITIVES:
            return _PRIMITIVES[hint], _same, _same
        if hint is Any:
            return "string", _to_json, json.loads
        if hint is Uuid:
            return "bytes", _uuid_bytes, Uuid
        if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
            return "int", int, hint
        origin = typing.get_origin(hint)
        args = typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            present = [a for a in args if a is not type(None)]
            if len(present) != 1 or len(args) != 2:
                raise TypeError(f"only `X | None` unions bind to Avro, not {hint}")
            schema, to_avro, from_avro = self.hint(present[0])
            return (
                ["null", schema],
                lambda v: None if v is None else to_avro(v),
                lambda v: None if v is None else from_avro(v),
            )
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            schema, to_avro, from_avro = self.hint(args[0])
            return (
                {"type": "array", "items": schema},
                lambda v: [to_avro(x) for x in v],
                lambda v: tuple(from_avro(x) for x in v),
            )
        if origin is tuple and args:
            return self._pair(args)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            return self.record(hint)
        raise TypeError(f"no Avro binding for {hint!r}")

    def _pair(self, args: tuple[Any, ...]) -> tuple[Any, Convert, Convert]:
        """A fixed-size tuple as a record `{_0, _1, ...}` (a fresh name each time)."""
        self._pairs += 1
        parts = [self.hint(a) for a in args]
        schema = {
            "type": "record",
            "name": f"Tuple{self._pairs}",
            "fields": [{"name": f"_{i}", "type": s} for i, (s, _, _) in enumerate(parts)],
        }
        keys = [f"_{i}" for i in range(len(parts))]
        tos = [t for _, t, _ in parts]
        backs = [b for _, _, b in parts]

        def to_avro(value: Any) -> dict[str, Any]:
            return {k: t(x) for k, t, x in zip(keys, tos, value, strict=True)}

        def from_avro(value: dict[str, Any]) -> tuple[Any, ...]:
            return tuple(b(value[k]) for k, b in zip(keys, backs, strict=True))

        return schema, to_avro, from_avro


def _same(value: Any) -> Any:
    return value


def _to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _uuid_bytes(value: Uuid) -> bytes:
    return value.bytes
