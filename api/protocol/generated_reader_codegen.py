"""The compiler of the generated readers: Python source generated per kio entity class, then exec'd.

One function per entity class (one block per field, runs of fixed-width fields read by one
`struct` call) from the field metadata kio uses, in the manner of
`generated_writer.dict_writer_for`. Each returns what kio's `entity_reader(cls)(buffer, offset)`
returns, `(entity, bytes read)`, and raises on every input kio refuses
(`generated_reader_runtime.Refused`); `generated_reader` decides what happens then.
`source_of` shows the generated source of a class.

The semantics copied from kio's native reader (kio 0.6):

- Entities are made without `__init__`, their slots set one by one, as kio does.
- Compact strings, bytes and arrays carry an unsigned varint length + 1 (0 is null); legacy
  strings an int16 and legacy bytes and arrays an int32 length (-1 is null, below -1 an
  error). Strings are strict UTF-8. A varint is at most 5 bytes.
- Arrays are read as null where their length says so even when the field is not nullable
  (`tagged.missing_required` catches that).
- A nullable entity has an int8 marker: -1 is null, any other value is followed by the entity.
- A bool is the byte 0 or 1; anything else is an error.
- A UUID of 16 zero bytes is None; error codes are `ErrorCode` members (an unknown code is an
  error); durations are plain `datetime.timedelta`s.
- The tagged-fields section of a flexible entity: a known tag's value is read with its
  field's reader (its size prefix is not checked); an unknown tag is an error.
- A request header's `client_id` is always a nullable legacy string.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass
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

from api.protocol.generated_reader_runtime import Reader, generated_namespace


class Unsupported(Exception):
    """A field type or class layout this module does not read (the caller uses kio)."""


# --------------------------------------------------------------------------- field kinds


@dataclass(frozen=True, slots=True)
class Primitive:
    """A number, bool, UUID, duration, error code, string or bytes of a Kafka type."""

    kafka_type: str
    flexible: bool
    nullable: bool


@dataclass(frozen=True, slots=True)
class Nested:
    """An entity inside another (with a null marker where it is nullable)."""

    entity_class: type[Any]
    nullable: bool


@dataclass(frozen=True, slots=True)
class Array:
    """An array of primitives or entities (compact where the class is flexible)."""

    item: Primitive | Nested
    flexible: bool


Kind = Primitive | Nested | Array

FIXED_CODES = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float64": "d",
    "bool": "B",
    "error_code": "h",
    "timedelta_i32": "i",
    "timedelta_i64": "q",
    "uuid": "16s",
}
"""The `struct` code of each fixed-width Kafka type."""

_CONVERT = {
    "bool": "_BOOL[{0}]",  # an IndexError for bytes other than 0 and 1, as kio refuses them
    "error_code": "_ERROR[{0}]",  # a KeyError for codes ErrorCode has no member for
    "timedelta_i32": "_TD(0, 0, 0, {0})",
    "timedelta_i64": "_TD(0, 0, 0, {0})",
    "uuid": "None if {0} == _ZERO else _uuid({0})",
}
"""The expression that turns an unpacked fixed-width value into the value kio gives."""

_NULLABLE = frozenset({"string", "bytes", "records", "uuid"})
"""Types kio reads as nullable fields (`datetime_i64` too, not read here)."""


def _primitive(kafka_type: str, flexible: bool, nullable: bool) -> Primitive:
    if kafka_type not in FIXED_CODES and kafka_type not in ("string", "bytes", "records"):
        raise Unsupported(f"kafka type {kafka_type!r}")
    if nullable and kafka_type not in _NULLABLE:
        raise Unsupported(f"a nullable {kafka_type}")  # kio has no reader for it either
    return Primitive(kafka_type, flexible, nullable)


def _kind(entity_class: type[Any], field: dataclasses.Field[Any], is_tag: bool) -> Kind:
    """How kio reads a field (its native reader's `build_field_schema`)."""
    flexible = bool(entity_class.__flexible__)
    if entity_class.__name__ == "RequestHeader" and field.name == "client_id":
        return Primitive("string", False, True)  # Kafka's exception: always legacy
    kind = classify_field(field)
    if isinstance(kind, PrimitiveField):
        # A tagged field is optional by its absence: its value is not nullable.
        nullable = is_optional(field) and not is_tag
        return _primitive(get_schema_field_type(field), flexible, nullable)
    if isinstance(kind, PrimitiveTupleField):
        return Array(_primitive(get_schema_field_type(field), flexible, False), flexible)
    if isinstance(kind, EntityField):
        return Nested(kind.type_, is_optional(field))  # with a marker, tagged or not
    if isinstance(kind, EntityTupleField):
        return Array(Nested(kind.type_, False), flexible)
    raise Unsupported(repr(kind))  # pragma: no cover - kio has no other kind


@dataclass(frozen=True, slots=True)
class Layout:
    """How kio reads an entity class: its fields in order, then its tagged fields."""

    entity_class: type[Any]
    flexible: bool
    fields: tuple[tuple[str, Kind, bool], ...]
    """(name, kind, required): required is untagged and not optional (`missing_required`)."""
    tagged: tuple[tuple[str, Any, int, Kind], ...]
    """(name, default, tag, kind) of each tagged field, as the generated reader reads it."""


@cache
def layout(entity_class: type[Any]) -> Layout:
    """The fields of a class as the generated reader reads them; `Unsupported` as it raises.

    For other readers of the same bytes (`native_reader`), so that they read what this
    module's readers read.
    """
    flexible = bool(entity_class.__flexible__)
    fields: list[tuple[str, Kind, bool]] = []
    tagged: list[tuple[str, Any, int, Kind]] = []
    for field in dataclasses.fields(entity_class):
        tag = get_field_tag(field)
        if tag is None:
            kind = _kind(entity_class, field, False)
            fields.append((field.name, kind, not is_optional(field)))
        else:
            if not flexible:
                raise Unsupported("a tagged field in a non-flexible entity")
            kind = _kind(entity_class, field, True)
            tagged.append((field.name, get_tagged_field_default(field), int(tag), kind))
    return Layout(entity_class, flexible, tuple(fields), tuple(tagged))


# --------------------------------------------------------------------------- code generation


class _Source:
    """The body of one generated function and the names it uses.

    Fixed-width values are collected into a run and read by one `struct` call when a
    variable-width value (or the end) needs the position.
    """

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self.lines: list[str] = []
        self._run: list[tuple[str, str, str | None]] = []
        self._names = 0

    def const(self, value: Any, prefix: str) -> str:
        """A name for `value` in the generated code's namespace."""
        name = f"{prefix}{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def var(self, prefix: str = "v") -> str:
        """A fresh local variable."""
        self._names += 1
        return f"{prefix}{self._names}"

    def fixed(self, code: str, convert: str | None = None) -> str:
        """A variable that holds a fixed-width value once the run is read."""
        name = self.var()
        self._run.append((code, name, convert))
        return name

    def block(self, text: str) -> None:
        """Lines (dedented, with `{}` fields filled in already) after the pending run."""
        self.flush()
        self.lines.extend(text.strip("\n").splitlines())

    def flush(self) -> None:
        """Read the pending run of fixed-width values."""
        if not self._run:
            return
        layout = struct.Struct(">" + "".join(code for code, _, _ in self._run))
        unpack = self.const(layout.unpack_from, "_S")
        self.lines.append(f"{', '.join(n for _, n, _ in self._run)}, = {unpack}(buffer, pos)")
        self.lines.append(f"pos += {layout.size}")
        for _, name, convert in self._run:
            if convert is not None:
                self.lines.append(f"{name} = {convert.format(name)}")
        self._run.clear()

    def function(self, name: str, signature: str, ending: list[str]) -> str:
        """The source of a function with this body."""
        self.flush()
        body = [*self.lines, *ending]
        if any("size" in line for line in body):
            body.insert(0, "size = len(buffer)")
        return "\n".join([f"def {name}({signature}):", *("    " + line for line in body)])


def _indent(lines: str, depth: int) -> str:
    pad = "    " * depth
    return "\n".join(pad + line for line in lines.splitlines())


def _emit(src: _Source, kind: Kind) -> str:
    """Code that reads one value at `pos` and moves `pos` past it; the variable holding it."""
    if isinstance(kind, Primitive):
        code = FIXED_CODES.get(kind.kafka_type)
        if code is not None:
            return src.fixed(code, _CONVERT.get(kind.kafka_type))
        return _emit_sized(src, kind)
    if isinstance(kind, Nested):
        read = src.const(_compiled(kind.entity_class), "_R")  # type: ignore[arg-type]  # classes are hashable
        value = src.var()
        if not kind.nullable:
            src.block(f"{value}, pos = {read}(buffer, pos)")
            return value
        marker = src.fixed("b")
        src.block(
            f"""
if {marker} == -1:
    {value} = None
else:
    {value}, pos = {read}(buffer, pos)
"""
        )
        return value
    return _emit_array(src, kind)


def _read_varint(name: str) -> str:
    """Code that reads an unsigned varint into `name` (one byte inline, longer ones by call)."""
    return f"""{name} = buffer[pos]
if {name} < 0x80:
    pos += 1
else:
    {name}, pos = read_uvarint(buffer, pos)"""


def _emit_sized(src: _Source, kind: Primitive) -> str:
    """A string or bytes: its length (-1 or 0 for null), then that many bytes."""
    value = src.var()
    decode = ".decode()" if kind.kafka_type == "string" else ""
    null = f"{value} = None" if kind.nullable else "raise Refused('null where a value is due')"
    if kind.flexible:
        length = src.var("n")
        src.block(
            f"""
{_read_varint(length)}
if {length}:
    end = pos + {length} - 1
    if end > size:
        raise Truncated
    {value} = buffer[pos:end]{decode}
    pos = end
else:
    {null}
"""
        )
        return value
    length = src.fixed("h" if kind.kafka_type == "string" else "i")
    src.block(
        f"""
if {length} >= 0:
    end = pos + {length}
    if end > size:
        raise Truncated
    {value} = buffer[pos:end]{decode}
    pos = end
elif {length} == -1:
    {null}
else:
    raise Refused('a negative length')
"""
    )
    return value


def _emit_array(src: _Source, kind: Array) -> str:
    value = src.var()
    count = src.var("n") if kind.flexible else src.fixed("i")
    items = _emit_items(src, kind.item, count, value)
    if kind.flexible:
        src.block(
            f"""
{_read_varint(count)}
if {count} > 1:
    {count} -= 1
{_indent(items, 1)}
elif {count}:
    {value} = ()
else:
    {value} = None
"""
        )
        return value
    src.block(
        f"""
if {count} > 0:
{_indent(items, 1)}
elif {count} == 0:
    {value} = ()
elif {count} == -1:
    {value} = None
else:
    raise Refused('a negative array length')
"""
    )
    return value


def _emit_items(src: _Source, item: Primitive | Nested, count: str, value: str) -> str:
    """Code that reads `count` (> 0) items into the tuple `value`."""
    smallest = min_size(item)
    code = FIXED_CODES.get(item.kafka_type) if isinstance(item, Primitive) else None
    if code is not None and len(code) == 1:
        convert = _CONVERT.get(item.kafka_type)  # type: ignore[union-attr]  # a primitive
        unpacked = f"_unpack('>%d{code}' % {count}, buffer, pos)"
        if convert is not None:
            unpacked = f"tuple([{convert.format('x')} for x in {unpacked}])"
        return f"""
end = pos + {smallest} * {count}
if end > size:
    raise ImpossibleCount({count})
{value} = {unpacked}
pos = end
""".strip("\n")
    if isinstance(item, Nested) and not item.nullable:
        read = src.const(_compiled(item.entity_class), "_R")  # type: ignore[arg-type]  # classes are hashable
    else:
        read = src.const(_value_reader(item), "_R")
    # Items of no bytes (an entity without fields) could fill any count: kio reads them.
    check = f"if {smallest} * {count} > size - pos:\n    raise ImpossibleCount({count})\n"
    # One item is the common case (a request about one topic): no list for it.
    return (
        (check if smallest else "")
        + f"""
if {count} == 1:
    item, pos = {read}(buffer, pos)
    {value} = (item,)
else:
    items = []
    for _ in range({count}):
        item, pos = {read}(buffer, pos)
        items.append(item)
    {value} = tuple(items)
""".strip("\n")
    )


def min_size(kind: Kind) -> int:
    """The fewest bytes a value of a kind takes."""
    if isinstance(kind, Primitive):
        code = FIXED_CODES.get(kind.kafka_type)
        if code is not None:
            return struct.calcsize(">" + code)
        if kind.flexible:
            return 1
        return 2 if kind.kafka_type == "string" else 4
    if isinstance(kind, Nested):
        return 1 if kind.nullable else _entity_min_size(kind.entity_class)  # type: ignore[arg-type]  # classes are hashable
    return 1 if kind.flexible else 4


@cache
def _entity_min_size(entity_class: type[Any]) -> int:
    size = 1 if entity_class.__flexible__ else 0  # the count of tagged fields
    for field in dataclasses.fields(entity_class):
        if get_field_tag(field) is None:
            size += min_size(_kind(entity_class, field, False))
    return size


def _define(src: _Source, source: str, name: str) -> Any:
    exec(source, src.namespace)  # the source is built in this module from field metadata
    return src.namespace[name]


@cache
def _value_reader(kind: Kind) -> Reader:
    """A function that reads one value of a kind: a tagged field's or an array item's."""
    src = _Source(generated_namespace())
    value = _emit(src, kind)
    return _define(src, src.function("read", "buffer, pos", [f"return {value}, pos"]), "read")  # type: ignore[no-any-return]


def _construction(
    entity_class: type[Any], src: _Source, values: list[tuple[str, str]]
) -> list[str]:
    """Lines that make `entity` of the class from (field name, value expression) pairs.

    kio allocates the entity and sets its slots without calling `__init__` (a frozen
    dataclass's `__init__` goes through `object.__setattr__` once per field, slower still).
    Here the slots are set on an instance of a twin class, which has the same slots and is
    not frozen, so each is one plain attribute store; then the instance becomes an instance
    of the entity class. Python allows that change only between classes of the same layout:
    the twin is tried once when the reader is built, and a class it does not suit has its
    slot descriptors called instead (what kio's `PyObject_GenericSetAttr` calls).
    """
    klass = src.const(entity_class, "_C")
    twin = _twin(entity_class)
    if twin is not None:
        made = src.const(twin, "_M")
        lines = [f"entity = _new({made})"]
        lines += [f"entity.{name} = {value}" for name, value in values]
        return [*lines, f"entity.__class__ = {klass}"]
    lines = [f"entity = _new({klass})"]
    for name, value in values:
        lines.append(f"{src.const(_slot_setter(entity_class, name), '_set')}(entity, {value})")
    return lines


def _twin(entity_class: type[Any]) -> type[Any] | None:
    """A mutable class of the same layout as a slotted entity class without bases, or None."""
    slots = vars(entity_class).get("__slots__")
    names = {field.name for field in dataclasses.fields(entity_class)}
    if entity_class.__bases__ != (object,) or not isinstance(slots, tuple) or set(slots) != names:
        return None
    twin = type(f"{entity_class.__name__}Twin", (), {"__slots__": slots})
    instance: Any = object.__new__(twin)
    try:
        instance.__class__ = entity_class
    except TypeError:  # pragma: no cover - a layout Python does not see as the same
        return None
    return twin


def _slot_setter(entity_class: type[Any], name: str) -> Callable[[Any, Any], None]:
    """The `__set__` of a field's slot descriptor, found as attribute lookup finds it."""
    for klass in entity_class.__mro__:
        if name in vars(klass):
            slot = vars(klass)[name]
            if type(slot).__name__ != "member_descriptor":
                break
            return slot.__set__  # type: ignore[no-any-return]
    raise Unsupported(f"{entity_class.__name__}.{name} is not a slot")


def _entity_source(entity_class: type[Any]) -> tuple[_Source, list[str]]:
    """The body that reads an entity into `entity` (the caller adds the return)."""
    flexible = bool(entity_class.__flexible__)
    src = _Source(generated_namespace())
    assigned: list[tuple[str, str]] = []
    tagged: list[tuple[int, str, Reader, Any]] = []
    for field in dataclasses.fields(entity_class):
        tag = get_field_tag(field)
        if tag is None:
            assigned.append((field.name, _emit(src, _kind(entity_class, field, False))))
        else:
            if not flexible:
                raise Unsupported("a tagged field in a non-flexible entity")  # kio refuses it
            reader = _value_reader(_kind(entity_class, field, True))
            tagged.append((int(tag), field.name, reader, get_tagged_field_default(field)))
    if flexible and not tagged:
        src.block(
            """
if buffer[pos]:
    pos = _no_tags(buffer, pos)
else:
    pos += 1
"""
        )
    elif tagged:
        known = src.const({tag: (i, read) for i, (tag, _, read, _) in enumerate(tagged)}, "_T")
        defaults = src.const([default for _, _, _, default in tagged], "_D")
        # Most frames carry none of the declared tags (a count of 0): the defaults, inline.
        src.block(
            f"""
if buffer[pos]:
    tags, pos = _tags(buffer, pos, {known}, {defaults})
else:
    tags = {defaults}
    pos += 1
"""
        )
        assigned += [(name, f"tags[{i}]") for i, (_, name, _, _) in enumerate(tagged)]
    return src, _construction(entity_class, src, assigned)


@cache
def _compiled(entity_class: type[Any]) -> Reader:
    """The reader of an entity at a position: `(entity, end)`."""
    src, ending = _entity_source(entity_class)
    source = src.function("read", "buffer, pos", [*ending, "return entity, pos"])
    return _define(src, source, "read")  # type: ignore[no-any-return]


@cache
def compiled_reader(entity_class: type[Any]) -> Reader:
    """The generated reader of a class: `(buffer, offset) -> (entity, bytes read)`.

    It takes `bytes` only (kio takes any read-only buffer). Raises `Unsupported` when the
    class has a field type it does not read.
    """
    src, ending = _entity_source(entity_class)
    src.lines[:0] = [
        "if type(buffer) is not bytes or not 0 <= offset <= len(buffer):",
        "    raise Refused('bytes and an offset within them are expected')",
        "pos = offset",
    ]
    source = src.function("read", "buffer, offset", [*ending, "return entity, pos - offset"])
    return _define(src, source, "read")  # type: ignore[no-any-return]


def source_of(entity_class: type[Any]) -> str:
    """The generated source of a class's reader (for reading and debugging)."""
    src, ending = _entity_source(entity_class)
    return src.function("read", "buffer, pos", [*ending, "return entity, pos"])
