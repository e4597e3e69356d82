"""Answers written by compiled code: the server's fast path, beside `generated_writer`.

`api.protocol._native_writer` (Cython, built by `setup.py` when a C compiler is there) writes
an answer's plain values (what `codec.build` takes, what `generated_writer.dict_writer_for`
writes) from a plan made here from the same field metadata. It writes only the plain case
(dicts for nested entities, ints, strings, bytes or `uuid.UUID`s, durations as ints or
`timedelta`s, lists, tuples or `Encoded` arrays; tagged fields away from their defaults
written in tag order, as `generated_writer.at_default` decides) and gives
up on anything else; `codec.encode_response` then writes the answer with
`dict_writer_for`, which writes it or raises as it always did.

Without the extension (no C compiler at install, or `MLOG_NO_EXTENSION=1`) `native_writer`
gives None and `dict_writer_for` writes every answer.
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from functools import cache
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
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

from api.protocol.generated_writer import Encoded, Unsupported, at_default

try:
    from api.protocol import _native_writer  # type: ignore[attr-defined]  # optional C extension
except ImportError:  # pragma: no cover - built wherever a C compiler is
    _native_writer = None

AVAILABLE: bool = _native_writer is not None

if _native_writer is not None:
    _native_writer.set_helpers(Encoded, uuid.UUID, datetime.timedelta, at_default)


@cache
def native_writer(entity_class: type[Any]) -> Any | None:
    """The compiled writer of a class's plain values, or None (no extension, or a type it lacks).

    Its `frame(head, correlation id, values)` is the answer frame, or None where it gives up.
    """
    if _native_writer is None:
        return None
    try:
        return _native_writer.Writer(_entity(entity_class))  # type: ignore[arg-type]  # classes are hashable
    except Unsupported:
        return None


@cache
def _entity(entity_class: type[Any]) -> Any:
    """The plan of an entity class (`_native_writer.Entity`); `Unsupported` if it has none."""
    flexible = bool(entity_class.__flexible__)
    plan = _native_writer.Entity(flexible)
    tagged: list[tuple[int, str, Any, Any]] = []
    for field in dataclasses.fields(entity_class):
        number = get_field_tag(field)
        if number is not None:
            # Written only away from its default, never null (`generated_writer`: not optional).
            value = _value(field, flexible, optional=False)
            tagged.append((int(number), field.name, get_tagged_field_default(field), value))
            continue
        value = _value(field, flexible)
        if field.default is not dataclasses.MISSING:
            plan.add(field.name, value, default=field.default)
        elif field.default_factory is not dataclasses.MISSING:
            plan.add(field.name, value, factory=field.default_factory)
        else:
            plan.add(field.name, value)
    for tag_number, name, default, value in sorted(tagged, key=lambda t: t[0]):
        plan.add_tagged(name, default, tag_number, value)
    return plan


def _primitive(kafka_type: str, nullable: bool, flexible: bool) -> Any:
    if kafka_type not in _native_writer.KINDS:
        raise Unsupported(kafka_type)
    return _native_writer.Value(kafka_type, nullable, flexible)


def _value(field: dataclasses.Field[Any], flexible: bool, *, optional: bool | None = None) -> Any:
    """How a field's value is written (`_native_writer.Value`), as `generated_writer` writes it."""
    kind = classify_field(field)
    optional = is_optional(field) if optional is None else optional
    if isinstance(kind, PrimitiveField):
        return _primitive(get_schema_field_type(field), optional, flexible)
    if isinstance(kind, PrimitiveTupleField):
        item = _primitive(get_schema_field_type(field), False, flexible)
        return _native_writer.Value("array", True, flexible, item=item)
    if isinstance(kind, EntityField):
        entity = _entity(kind.type_)
        return _native_writer.Value("entity", optional, flexible, entity=entity)
    if isinstance(kind, EntityTupleField):
        entity = _entity(kind.type_)
        item = _native_writer.Value("entity", False, flexible, entity=entity)
        return _native_writer.Value("array", True, flexible, item=item)
    raise Unsupported(repr(kind))  # pragma: no cover - kio has no other kind
