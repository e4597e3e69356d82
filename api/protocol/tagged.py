"""Reading requests as Kafka does where kio is stricter or looser than Kafka.

`strip_unknown_tags` drops unknown tagged fields from a request frame, as Kafka's own parser
ignores them (`strip_unknown_response_tags` from a response frame, as Kafka's clients do);
`missing_required` finds null values kio accepts in non-nullable fields.

A flexible request (KIP-482) may carry tagged fields this server's schemas do not know: a
newer client's optional extras. kio's reader refuses them, so when it does, `codec` passes the
frame through `strip_unknown_tags`, which walks the request header (v2) and body with the same
field metadata kio uses and copies the bytes, leaving out every tagged field whose tag the
schema does not declare (and fixing the section's count). The known fields, tagged or not, are
copied unchanged, so kio then reads exactly what it would have read without the extras.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from api.protocol.generated_reader_codegen import FIXED_CODES
from api.protocol.generated_reader_runtime import Refused, read_uvarint
from api.protocol.generated_writer import uvarint

Copier = Callable[[bytes, int, bytearray], int]
"""Reads one value at a position, appends what is kept, returns the position after it."""

_WIDTHS = {kafka_type: struct.calcsize(">" + code) for kafka_type, code in FIXED_CODES.items()}
"""The byte width of each fixed-width Kafka type."""


class Malformed(Exception):
    """The frame does not follow its schema (kio's error is reported instead)."""


def _take(data: bytes, pos: int, size: int, out: bytearray) -> int:
    end = pos + size
    if size < 0 or end > len(data):
        raise Malformed("truncated")
    out += data[pos:end]
    return end


def _primitive(kafka_type: str, flexible: bool) -> Copier:
    width = _WIDTHS.get(kafka_type)
    if width is not None:
        return lambda data, pos, out: _take(data, pos, width, out)
    if kafka_type not in ("string", "bytes", "records"):
        raise Malformed(f"unknown type {kafka_type}")
    if flexible:

        def compact(data: bytes, pos: int, out: bytearray) -> int:
            start = pos
            length, pos = read_uvarint(data, pos)
            out += data[start:pos]
            return _take(data, pos, max(length - 1, 0), out)

        return compact
    fmt = ">h" if kafka_type == "string" else ">i"
    size = struct.calcsize(fmt)

    def legacy(data: bytes, pos: int, out: bytearray) -> int:
        if pos + size > len(data):
            raise Malformed("truncated")
        (length,) = struct.unpack_from(fmt, data, pos)
        pos = _take(data, pos, size, out)
        return _take(data, pos, max(length, 0), out)

    return legacy


def _array(item: Copier, flexible: bool) -> Copier:
    def copy(data: bytes, pos: int, out: bytearray) -> int:
        if flexible:
            start = pos
            count, pos = read_uvarint(data, pos)
            out += data[start:pos]
            count -= 1
        else:
            if pos + 4 > len(data):
                raise Malformed("truncated")
            (count,) = struct.unpack_from(">i", data, pos)
            pos = _take(data, pos, 4, out)
        for _ in range(max(count, 0)):
            pos = item(data, pos, out)
        return pos

    return copy


def _nullable(inner: Copier) -> Copier:
    def copy(data: bytes, pos: int, out: bytearray) -> int:
        if pos >= len(data):
            raise Malformed("truncated")
        marker = data[pos]
        out.append(marker)
        return pos + 1 if marker == 0xFF else inner(data, pos + 1, out)

    return copy


def _field(field: dataclasses.Field[Any], flexible: bool, is_tag: bool) -> Copier:
    kind = classify_field(field)
    if isinstance(kind, PrimitiveField):
        return _primitive(get_schema_field_type(field), flexible)
    if isinstance(kind, PrimitiveTupleField):
        return _array(_primitive(get_schema_field_type(field), flexible), flexible)
    if isinstance(kind, EntityField):
        inner = _entity(kind.type_)
        return _nullable(inner) if not is_tag and is_optional(field) else inner
    if isinstance(kind, EntityTupleField):
        return _array(_entity(kind.type_), flexible)
    raise Malformed(repr(kind))  # pragma: no cover - kio has no other kind


def _tagged_section(known: frozenset[int]) -> Copier:
    def copy(data: bytes, pos: int, out: bytearray) -> int:
        count, pos = read_uvarint(data, pos)
        kept = bytearray()
        n = 0
        for _ in range(count):
            start = pos
            tag, pos = read_uvarint(data, pos)
            size, pos = read_uvarint(data, pos)
            end = pos + size
            if end > len(data):
                raise Malformed("truncated")
            if tag in known:
                kept += data[start:end]
                n += 1
            pos = end
        uvarint(out, n)
        out += kept
        return pos

    return copy


@cache
def _entity(entity_class: type[Any]) -> Copier:
    flexible = bool(entity_class.__flexible__)
    plain: list[Copier] = []
    tags: set[int] = set()
    for field in dataclasses.fields(entity_class):
        tag = get_field_tag(field)
        if tag is None:
            plain.append(_field(field, flexible, False))
        else:
            tags.add(int(tag))
    section = _tagged_section(frozenset(tags)) if flexible else None

    def copy(data: bytes, pos: int, out: bytearray) -> int:
        for copier in plain:
            pos = copier(data, pos, out)
        return section(data, pos, out) if section is not None else pos

    return copy


def strip_unknown_tags(frame: bytes | memoryview, body_class: type[Any]) -> bytes:
    """The request frame (without its size) with unknown tagged fields left out.

    Raises `Malformed` when the frame does not follow the schema at all.
    """
    data = bytes(frame)
    out = bytearray()
    try:
        # Request header v2: key, version, correlation id, a legacy nullable client id, tags.
        pos = _take(data, 0, 8, out)
        pos = _primitive("string", False)(data, pos, out)
        if body_class.__header_schema__.__flexible__:
            pos = _tagged_section(frozenset())(data, pos, out)
        pos = _entity(body_class)(data, pos, out)  # type: ignore[arg-type]  # classes hash
    except (IndexError, Refused) as exc:  # a varint cut short or longer than 5 bytes
        raise Malformed(f"bad varint: {exc}") from None
    return bytes(out) + data[pos:]


def strip_unknown_response_tags(frame: bytes | memoryview, body_class: type[Any]) -> bytes:
    """The response frame (without its size) with unknown tagged fields left out.

    A newer server's answer may carry tagged fields this client's schemas do not know; Kafka's
    clients skip them, and so does ours. Raises `Malformed` when the frame does not follow the
    schema at all.
    """
    data = bytes(frame)
    out = bytearray()
    try:
        pos = _take(data, 0, 4, out)  # response header: the correlation id, then (v1) tags
        if body_class.__header_schema__.__flexible__:
            pos = _tagged_section(frozenset())(data, pos, out)
        pos = _entity(body_class)(data, pos, out)  # type: ignore[arg-type]  # classes hash
    except (IndexError, Refused) as exc:
        raise Malformed(f"bad varint: {exc}") from None
    return bytes(out) + data[pos:]


def missing_required(entity: Any) -> str | None:
    """The path of a non-nullable field that holds null (kio reads a null array there)."""
    check = _CHECKS.get(type(entity)) or _check(type(entity))
    return check(entity)


_CHECKS: dict[type[Any], Callable[[Any], str | None]] = {}
"""`missing_required` of each entity class: a function generated from its `_plan`."""


def _check(entity_class: type[Any]) -> Callable[[Any], str | None]:
    """The function `missing_required` runs for an entity class: one block per planned field.

    Made once per class (a request is checked on every read): the walk of `_plan` written
    out, nested entities checked by class in turn.
    """
    lines = ["def check(entity):"]
    for name, required, nested, many in _plan(entity_class):  # type: ignore[arg-type]
        lines.append(f"    v = entity.{name}")
        indent = "    "
        if required:
            lines.append(f"    if v is None: return {name!r}")
        else:  # planned for its entities only
            lines.append("    if v is not None:")
            indent = "        "
        if nested:
            lines += [
                f"{indent}for item in {'v' if many else '(v,)'}:",
                f"{indent}    inner = _missing(item)",
                f"{indent}    if inner is not None: return {name + '.'!r} + inner",
            ]
    lines.append("    return None")
    namespace: dict[str, Any] = {"_missing": missing_required}
    exec("\n".join(lines), namespace)  # the source is built above from field names only
    check: Callable[[Any], str | None] = namespace["check"]
    _CHECKS[entity_class] = check
    return check


@cache
def _plan(entity_class: type[Any]) -> tuple[tuple[str, bool, bool, bool], ...]:
    """(field, non-nullable, holds entities, is an array) for the fields worth checking."""
    plan = []
    for field in dataclasses.fields(entity_class):
        kind = classify_field(field)
        nested = isinstance(kind, EntityField | EntityTupleField)
        many = isinstance(kind, EntityTupleField | PrimitiveTupleField)
        required = get_field_tag(field) is None and not is_optional(field)
        if nested or (many and required):
            plan.append((field.name, required, nested, many))
    return tuple(plan)
