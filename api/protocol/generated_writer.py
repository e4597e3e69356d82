"""Compiled-per-class writers for kio response entities: the server's encoding hot path.

kio's own writer validates every value through its phantom types (about 3 µs a field), which
made encoding the largest cost of a CreateTopics answer (28 config entries per topic). These
writers are built once per entity class from the same field metadata kio uses (Kafka type,
flexible or not, nullability, tags) and append straight to a `bytearray`. They produce the
same bytes as kio's writer (tests compare the two); a class with a field type not handled here
falls back to kio's writer.

`dict_writer_for` goes one step further for the server's answers: it writes a mapping of plain
values (the keyword arguments `codec.build` takes) as the entity built from them would be
written, without building the entity (building cost more than writing). Its function is
generated per class, one statement per field.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import operator
import struct
import uuid
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.serial import entity_writer
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

Writer = Callable[[bytearray, Any], None]

_MS = datetime.timedelta(milliseconds=1)


class Unsupported(Exception):
    """A field type this module does not write (the caller falls back to kio)."""


def uvarint(buffer: bytearray, value: int) -> None:
    """Append an unsigned varint."""
    while value > 0x7F:
        buffer.append((value & 0x7F) | 0x80)
        value >>= 7
    buffer.append(value)


def _fixed(fmt: str) -> Writer:
    pack = struct.Struct(fmt).pack

    def write(buffer: bytearray, value: Any) -> None:
        buffer += pack(value)

    return write


def _bool(buffer: bytearray, value: Any) -> None:
    buffer.append(1 if value else 0)


_INT16 = struct.Struct(">h").pack
_INT32 = struct.Struct(">i").pack
_INT64 = struct.Struct(">q").pack


def _error_code(buffer: bytearray, value: Any) -> None:
    buffer += _INT16(int(value))


def _plain_delta(pack: Callable[[int], bytes]) -> Writer:
    """A duration given as a `timedelta` or as whole milliseconds (what `codec.build` takes)."""

    def write(buffer: bytearray, value: Any) -> None:
        buffer += pack(value // _MS if isinstance(value, datetime.timedelta) else int(value))

    return write


def _plain_uuid(buffer: bytearray, value: Any) -> None:
    """A UUID given as a `uuid.UUID`, as 16 bytes, or None (the zero UUID)."""
    if value is None:
        buffer += bytes(16)
        return
    data = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
    if len(data) != 16:
        raise ValueError(f"a UUID is 16 bytes, got {len(data)}")
    buffer += data


def _timedelta_i32(buffer: bytearray, value: Any) -> None:
    buffer += _INT32(value // _MS)


def _timedelta_i64(buffer: bytearray, value: Any) -> None:
    buffer += _INT64(value // _MS)


def _uuid(buffer: bytearray, value: Any) -> None:
    buffer += bytes(16) if value is None else value.bytes


def _string(flexible: bool, optional: bool) -> Writer:
    if flexible:

        def compact(buffer: bytearray, value: Any) -> None:
            if value is None:
                if not optional:
                    raise TypeError("a non-nullable string is None")
                buffer.append(0)
                return
            data = value.encode()
            uvarint(buffer, len(data) + 1)
            buffer += data

        return compact

    def legacy(buffer: bytearray, value: Any) -> None:
        if value is None:
            if not optional:
                raise TypeError("a non-nullable string is None")
            buffer += b"\xff\xff"
            return
        data = value.encode()
        buffer += struct.pack(">h", len(data))
        buffer += data

    return legacy


def _bytes(flexible: bool, optional: bool) -> Writer:
    def write(buffer: bytearray, value: Any) -> None:
        if value is None:
            if not optional:
                raise TypeError("non-nullable bytes are None")
            buffer += b"\0" if flexible else b"\xff\xff\xff\xff"
            return
        if flexible:
            uvarint(buffer, len(value) + 1)
        else:
            buffer += struct.pack(">i", len(value))
        buffer += value

    return write


_FIXED = {
    "int8": ">b",
    "int16": ">h",
    "int32": ">i",
    "int64": ">q",
    "uint16": ">H",
    "uint32": ">I",
    "float64": ">d",
}


def _primitive(kafka_type: str, flexible: bool, optional: bool) -> Writer:
    if kafka_type in _FIXED:
        return _fixed(_FIXED[kafka_type])
    if kafka_type == "bool":
        return _bool
    if kafka_type == "error_code":
        return _error_code
    if kafka_type == "timedelta_i32":
        return _timedelta_i32
    if kafka_type == "timedelta_i64":
        return _timedelta_i64
    if kafka_type == "uuid":
        return _uuid
    if kafka_type == "string":
        return _string(flexible, optional)
    if kafka_type in ("bytes", "records"):  # Kafka writes a records field as bytes
        return _bytes(flexible, optional)
    raise Unsupported(kafka_type)


class Encoded(bytes):
    """An array field's value already written (by `field_encoder`): copied as it is.

    `value` keeps the plain value it was written from, for those who build the entity.
    """

    value: Any


def _array(item: Writer, flexible: bool) -> Writer:
    def write(buffer: bytearray, values: Any) -> None:
        if values is None:
            buffer += b"\0" if flexible else b"\xff\xff\xff\xff"
            return
        if type(values) is Encoded:  # written already (`field_encoder`)
            buffer += values
            return
        if flexible:
            uvarint(buffer, len(values) + 1)
        else:
            buffer += struct.pack(">i", len(values))
        for value in values:
            item(buffer, value)

    return write


def _nullable_entity(inner: Writer) -> Writer:
    def write(buffer: bytearray, value: Any) -> None:
        if value is None:
            buffer.append(0xFF)
        else:
            buffer.append(1)
            inner(buffer, value)

    return write


def _field_writer(field: dataclasses.Field[Any], flexible: bool, is_tag: bool) -> Writer:
    optional = False if is_tag else is_optional(field)
    kind = classify_field(field)
    if isinstance(kind, PrimitiveField):
        return _primitive(get_schema_field_type(field), flexible, optional)
    if isinstance(kind, PrimitiveTupleField):
        return _array(_primitive(get_schema_field_type(field), flexible, False), flexible)
    if isinstance(kind, EntityField):
        inner = _compiled(kind.type_)
        return _nullable_entity(inner) if optional else inner
    if isinstance(kind, EntityTupleField):
        return _array(_compiled(kind.type_), flexible)
    raise Unsupported(repr(kind))  # pragma: no cover - kio has no other kind


@cache
def _compiled(entity_class: type[Any]) -> Writer:
    flexible = bool(entity_class.__flexible__)
    plain: list[tuple[str, Writer]] = []
    tagged: list[tuple[int, str, Writer, Any]] = []
    for field in dataclasses.fields(entity_class):
        tag = get_field_tag(field)
        writer = _field_writer(field, flexible, tag is not None)
        if tag is None:
            plain.append((field.name, writer))
        else:
            tagged.append((int(tag), field.name, writer, get_tagged_field_default(field)))
    tagged.sort()
    getters = [(operator.attrgetter(name), writer) for name, writer in plain]

    if not flexible:

        def write_plain(buffer: bytearray, entity: Any) -> None:
            for get, writer in getters:
                writer(buffer, get(entity))

        return write_plain

    def write_flexible(buffer: bytearray, entity: Any) -> None:
        for get, writer in getters:
            writer(buffer, get(entity))
        present = []
        for tag, name, writer, default in tagged:
            value = getattr(entity, name)
            if value != default:
                present.append((tag, writer, value))
        _emit_tags(buffer, present)

    return write_flexible


@cache
def writer_for(entity_class: type[Any]) -> Writer:
    """The generated writer of a class, or one that calls kio's writer if a type is unsupported."""
    try:
        return _compiled(entity_class)  # type: ignore[arg-type]  # classes are hashable
    except Unsupported:
        slow = entity_writer(entity_class)

        def through_kio(buffer: bytearray, entity: Any) -> None:
            out = io.BytesIO()
            slow(out, entity)
            buffer += out.getvalue()

        return through_kio


# --------------------------------------------------------------------------- plain values

_REQUIRED = object()


def field_encoder(entity_class: type[Any], name: str) -> Callable[[Any], Encoded]:
    """Writes the plain value of an array field of `entity_class` once, for reuse.

    A value that many answers repeat (Metadata's broker list, while the cluster does not
    change) is written once and passed as the field's value in later answers.
    """
    flexible = bool(entity_class.__flexible__)
    (field,) = (f for f in dataclasses.fields(entity_class) if f.name == name)
    if not isinstance(classify_field(field), EntityTupleField | PrimitiveTupleField):
        raise TypeError(f"{entity_class.__name__}.{name} is not an array")
    writer = _plain_field_writer(field, flexible, get_field_tag(field) is not None)

    def encode(value: Any) -> Encoded:
        buffer = bytearray()
        writer(buffer, value)
        encoded = Encoded(buffer)
        encoded.value = value
        return encoded

    return encode


def _missing(entity: str, name: str) -> None:
    raise TypeError(f"{entity} needs a value for {name!r}")


def _either(plain: Writer, entity: Writer) -> Writer:
    """A nested entity given as a dict of plain values or as a built entity."""

    def write(buffer: bytearray, value: Any) -> None:
        if type(value) is dict:
            plain(buffer, value)
        else:
            entity(buffer, value)

    return write


def _plain_primitive(field: dataclasses.Field[Any], flexible: bool, optional: bool) -> Writer:
    kafka_type = get_schema_field_type(field)
    if kafka_type == "timedelta_i32":
        return _plain_delta(_INT32)
    if kafka_type == "timedelta_i64":
        return _plain_delta(_INT64)
    if kafka_type == "uuid":
        return _plain_uuid
    return _primitive(kafka_type, flexible, optional)


def _plain_field_writer(field: dataclasses.Field[Any], flexible: bool, is_tag: bool) -> Writer:
    optional = False if is_tag else is_optional(field)
    kind = classify_field(field)
    if isinstance(kind, PrimitiveField):
        return _plain_primitive(field, flexible, optional)
    if isinstance(kind, PrimitiveTupleField):
        return _array(_plain_primitive(field, flexible, False), flexible)
    if isinstance(kind, EntityField):
        inner = _either(dict_writer_for(kind.type_), _compiled(kind.type_))
        return _nullable_entity(inner) if optional else inner
    if isinstance(kind, EntityTupleField):
        return _array(_either(dict_writer_for(kind.type_), _compiled(kind.type_)), flexible)
    raise Unsupported(repr(kind))  # pragma: no cover - kio has no other kind


def _normal(value: Any) -> Any:
    return tuple(value) if type(value) is list else value


def at_default(value: Any, default: Any) -> bool:
    """Whether a tagged field's plain value equals its default (Kafka then leaves it out).

    A nested entity given as a dict is compared field by field with the default entity (a key
    left out takes the default's value); anything else is compared as `codec.build` holds it.
    """
    if value is default:
        return True
    if type(value) is dict and dataclasses.is_dataclass(default):
        return all(
            at_default(value.get(f.name, getattr(default, f.name)), getattr(default, f.name))
            for f in dataclasses.fields(default)
        )
    return bool(_normal(value) == default)


def _emit_tags(buffer: bytearray, present: list[tuple[int, Writer, Any]]) -> None:
    """The tagged-fields section: the count, then each tag, its size and its value."""
    uvarint(buffer, len(present))
    for tag, writer, value in present:
        body = bytearray()
        writer(body, value)
        uvarint(buffer, tag)
        uvarint(buffer, len(body))
        buffer += body


def _inline(field: dataclasses.Field[Any]) -> tuple[str, Any] | None:
    """For a fixed-size primitive: a statement writing `{v}` and its packer, else None."""
    if not isinstance(classify_field(field), PrimitiveField):
        return None
    kafka_type = get_schema_field_type(field)
    if kafka_type in _FIXED:
        return "buffer += P{i}({v})", struct.Struct(_FIXED[kafka_type]).pack
    if kafka_type == "error_code":
        return "buffer += P{i}(int({v}))", _INT16
    if kafka_type == "bool":
        return "buffer.append(1 if {v} else 0)", None
    return None


def _uvarint_lines(size: str) -> list[str]:
    """Statements appending the unsigned varint `size` (one byte in the common case)."""
    return [
        f"if {size} < 0x80: buffer.append({size})",
        f"else: _uvarint(buffer, {size})",
    ]


def _inline_flexible(
    field: dataclasses.Field[Any], i: int, namespace: dict[str, Any]
) -> list[str] | None:
    """For a field of a flexible class that `_inline` leaves: statements writing `v`, else None.

    The common cases written in place of a call to the field's writer (`w{i}`, which the
    statements still call for the rare values: null strings, UUIDs not given as 16 bytes):
    compact strings, UUIDs, durations, and compact arrays of entities (dicts or built) or of
    fixed-size numbers, with the same bytes and the same errors as that writer.
    """
    kind = classify_field(field)
    kafka_type = (
        get_schema_field_type(field)
        if isinstance(kind, PrimitiveField | PrimitiveTupleField)
        else None
    )
    if isinstance(kind, PrimitiveField):
        if kafka_type == "string":
            return [
                f"if v is None: w{i}(buffer, v)",
                "else:",
                "    data = v.encode()",
                "    size = len(data) + 1",
                *("    " + line for line in _uvarint_lines("size")),
                "    buffer += data",
            ]
        if kafka_type == "uuid":
            return [
                "if type(v) is bytes and len(v) == 16: buffer += v",
                f"else: w{i}(buffer, v)",
            ]
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            namespace[f"P{i}"] = _INT32 if kafka_type == "timedelta_i32" else _INT64
            return [f"buffer += P{i}(v // _MS if isinstance(v, _TD) else int(v))"]
        return None
    if isinstance(kind, EntityTupleField):
        namespace[f"D{i}"] = dict_writer_for(kind.type_)
        namespace[f"E{i}"] = _compiled(kind.type_)
        item = [
            "    for item in v:",
            f"        if type(item) is dict: D{i}(buffer, item)",
            f"        else: E{i}(buffer, item)",
        ]
    elif isinstance(kind, PrimitiveTupleField) and kafka_type in _FIXED:
        namespace[f"P{i}"] = struct.Struct(_FIXED[kafka_type]).pack
        item = [f"    for item in v: buffer += P{i}(item)"]
    else:
        return None
    return [
        "if v is None: buffer.append(0)",
        "elif type(v) is _Encoded: buffer += v",
        "else:",
        "    size = len(v) + 1",
        *("    " + line for line in _uvarint_lines("size")),
        *item,
    ]


@cache
def dict_writer_for(entity_class: type[Any]) -> Writer:
    """A writer of a mapping of plain values, giving the bytes of `codec.build`'s entity.

    Values are what `codec.build` takes: ints for error codes and durations (or `timedelta`),
    16 bytes or a `uuid.UUID` for UUIDs, dicts (or built entities) for nested entities,
    lists or tuples for arrays. Keys the class has no field for are ignored; a field without a
    value takes its default, and one without a default is an error (`TypeError`).
    """
    flexible = bool(entity_class.__flexible__)
    namespace: dict[str, Any] = {
        "_R": _REQUIRED,
        "_missing": _missing,
        "_emit_tags": _emit_tags,
        "_normal": _normal,
        "_at_default": at_default,
        "_uvarint": uvarint,
        "_Encoded": Encoded,
        "_MS": _MS,
        "_TD": datetime.timedelta,
    }
    lines = ["def write(buffer, values):", "    get = values.get"]
    tag_lines: list[str] = []
    for i, field in enumerate(dataclasses.fields(entity_class)):
        tag = get_field_tag(field)
        name = repr(field.name)
        if tag is not None:
            namespace[f"w{i}"] = _plain_field_writer(field, flexible, True)
            namespace[f"d{i}"] = get_tagged_field_default(field)
            # Most answers leave every tag at its default: no list is made for them.
            tag_lines += [
                f"    v = get({name}, d{i})",
                f"    if v is not d{i} and not _at_default(v, d{i}):",
                "        if tags is None: tags = []",
                f"        tags.append(({int(tag)}, w{i}, v))",
            ]
            continue
        inline = _inline(field)
        block = None
        if inline is None:
            namespace[f"w{i}"] = _plain_field_writer(field, flexible, False)
            statement = "w{i}(buffer, {v})"
            block = _inline_flexible(field, i, namespace) if flexible else None
        else:
            statement, namespace[f"P{i}"] = inline
        if field.default is not dataclasses.MISSING:
            namespace[f"d{i}"] = field.default
            if block is None:
                lines.append("    " + statement.format(i=i, v=f"get({name}, d{i})"))
            else:
                lines += [f"    v = get({name}, d{i})", *("    " + line for line in block)]
            continue
        lines.append(f"    v = get({name}, _R)")
        if field.default_factory is not dataclasses.MISSING:
            namespace[f"f{i}"] = field.default_factory
            lines.append(f"    if v is _R: v = f{i}()")
        else:
            lines.append(f"    if v is _R: _missing({entity_class.__name__!r}, {name})")
        if block is None:
            lines.append("    " + statement.format(i=i, v="v"))
        else:
            lines += ["    " + line for line in block]
    if flexible and tag_lines:
        # Tags in ascending order, as Kafka requires (fields are declared in tag order).
        lines += [
            "    tags = None",
            *tag_lines,
            "    if tags is None: buffer.append(0)",
            "    else: _emit_tags(buffer, sorted(tags))",
        ]
    elif flexible:
        lines.append("    buffer.append(0)")
    exec("\n".join(lines), namespace)  # the source is built above from field names only
    write: Writer = namespace["write"]
    return write
