"""Avro schemas of the record types, derived from their dataclasses in `records.model`.

Each record class is the one declaration of its type (see `records.fields`); this module
reads each once, at import, into a `RecordSchema` per (record type, version): the Avro type
and doc of every field, its Avro default (the dataclass default as Avro writes it) and, where
the Python value differs from the Avro value, a `FieldCodec`. The codec, the JSON form and the
log entry schema are all derived from these.
"""

from __future__ import annotations

import dataclasses
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Annotated, Any, Union, get_args, get_origin

from records import model
from records.fields import AvroInt, Doc
from records.interning import INTS, UUIDS, shared_uuid
from records.uuids import Uuid

AVRO_NAMESPACE = "mlog"

UUID_TYPE = "mlog.Uuid"
"""Reference to the named fixed(16) type of every id; defined on first use in a schema."""

STRUCT_CLASSES: tuple[type[Any], ...] = (
    model.BrokerEndpoint,
    model.BrokerFeature,
    model.QuorumVoter,
)
"""The nested Avro records a record's array field may hold; defined on first use."""


def avro_name(cls: type[Any]) -> str:
    """The full Avro name of a struct class, e.g. mlog.BrokerEndpoint."""
    return f"{AVRO_NAMESPACE}.{cls.__name__}"


ENDPOINT_TYPE = avro_name(model.BrokerEndpoint)
FEATURE_TYPE = avro_name(model.BrokerFeature)


@dataclass(frozen=True, slots=True)
class Lookup:
    """A conversion that is a table lookup: `table[v]`, or `table[tuple(v)]` (`ints`)."""

    table: Mapping[Any, Any]
    ints: bool = False
    """The Avro value is a list of ints, looked up as a tuple (the shared tuple comes back)."""
    optional: bool = False
    """None is the value as it is (an optional field)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldCodec:
    """How a field's Python value differs from its Avro value, as expressions over `{v}`.

    The compiled encoders and decoders (`records.codec`) inline these expressions: a function
    call per field would cost more than most conversions themselves.
    """

    to_avro: str | None
    """Python value -> Avro value; None when fastavro writes the value as it is."""
    from_avro: str
    """Avro value -> Python value."""
    helpers: Mapping[str, Any] = field(default_factory=dict)
    """Names the expressions use, with their values."""
    compiled: Lookup | None = None
    """`from_avro` as the compiled block decoder applies it (`records._fastdecode`'s `_Maker`),
    on the values it reads (a fixed chosen in a union comes bare there); None: not a lookup."""

    def to_avro_function(self) -> Callable[[Any], Any]:
        """`to_avro` as a function, for one-off conversions outside the compiled codecs."""
        namespace = dict(self.helpers)
        source = "lambda v: " + (self.to_avro or "{v}").format(v="v")
        function: Callable[[Any], Any] = eval(source, namespace)
        return function


_NO_DEFAULT: Any = object()


@dataclass(frozen=True, slots=True, kw_only=True)
class FieldSpec:
    """One field of a record schema."""

    name: str
    type: Any
    doc: str
    default: Any = _NO_DEFAULT
    codec: FieldCodec | None = None
    enum: type[IntEnum] | None = None
    """The Python enum of an int field, for JSON forms and validation."""

    @property
    def required(self) -> bool:
        """True if the field has no default: a record must always give it."""
        return self.default is _NO_DEFAULT


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordSchema:
    """The schema of one version of one record type."""

    name: str
    """Avro record name without version, e.g. "TopicRecord"; never changes."""
    record_type: int
    version: int
    doc: str
    fields: tuple[FieldSpec, ...]
    python_class: type[model.Record] | None = field(default=None)
    """The class values decode to; None for an old version that is upcast first."""

    @property
    def branch_name(self) -> str:
        """Full Avro name of this version's branch in the entry union, e.g. mlog.TopicRecordV0."""
        return f"{AVRO_NAMESPACE}.{self.name}V{self.version}"

    def to_avro(self) -> dict[str, Any]:
        """The Avro record schema (with named types as references)."""
        fields: list[dict[str, Any]] = []
        for f in self.fields:
            entry: dict[str, Any] = {"name": f.name, "type": f.type, "doc": f.doc}
            if f.default is not _NO_DEFAULT:
                entry["default"] = f.default
            fields.append(entry)
        return {
            "type": "record",
            "name": f"{self.name}V{self.version}",
            "namespace": AVRO_NAMESPACE,
            "doc": self.doc,
            "fields": fields,
        }


def _enum_codec(enum: type[IntEnum], *, optional: bool) -> FieldCodec:
    """Enums are written as ints; the compiled encoder checks membership (`FieldSpec.enum`)."""
    name = f"_{enum.__name__}_by_value"
    expr = f"{name}[{{v}}]"
    by_value = {int(member): member for member in enum}
    return FieldCodec(
        to_avro=None,
        from_avro=f"None if {{v}} is None else {expr}" if optional else expr,
        helpers={name: by_value},
        compiled=Lookup(by_value, optional=optional),
    )


def _optional_uuid_from_avro(value: bytes | tuple[str, bytes] | None) -> Uuid | None:
    if value is None:
        return None
    if isinstance(value, tuple):  # return_record_name tags a named fixed chosen in a union
        value = value[1]
    return shared_uuid(value)


UUID_CODEC = FieldCodec(
    to_avro="{v}.bytes",
    from_avro="_UUIDS[{v}]",
    helpers={"_UUIDS": UUIDS},
    compiled=Lookup(UUIDS),
)
OPTIONAL_UUID_CODEC = FieldCodec(
    to_avro="None if {v} is None else {v}.bytes",
    from_avro="_optional_uuid_from_avro({v})",
    helpers={"_optional_uuid_from_avro": _optional_uuid_from_avro},
    compiled=Lookup(UUIDS, optional=True),
)
INTS_CODEC = FieldCodec(
    to_avro=None,
    from_avro="_INTS[tuple({v})]",
    helpers={"_INTS": INTS},
    compiled=Lookup(INTS, ints=True),
)
# Inside a union fastavro reads a 2-tuple as its (branch name, value) notation: write a list.
OPTIONAL_INTS_CODEC = FieldCodec(
    to_avro="None if {v} is None else list({v})",
    from_avro="None if {v} is None else _INTS[tuple({v})]",
    helpers={"_INTS": INTS},
    compiled=Lookup(INTS, ints=True, optional=True),
)


def _struct_codec(cls: type[Any]) -> FieldCodec:
    """An array of a struct: Avro writes each as a dict of its fields (inlined, as a literal)."""
    helper = f"_{cls.__name__}"
    names = [f.name for f in dataclasses.fields(cls)]
    # `{{`/`}}`: the expression is a format string over `{v}`.
    item = "{{" + ", ".join(f"{n!r}: _e.{n}" for n in names) + "}}"
    return FieldCodec(
        to_avro=f"[{item} for _e in {{v}}]",
        from_avro=f"tuple({helper}(**e) for e in {{v}})",
        helpers={helper: cls},
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Typed:
    """A Python type read as Avro: its Avro type, conversion and enum."""

    type: Any
    codec: FieldCodec | None = None
    enum: type[IntEnum] | None = None


def _typed(hint: Any, where: str) -> _Typed:
    """The Avro form of a field's Python type (see `records.fields` for the rules)."""
    origin = get_origin(hint)
    if origin is Annotated:
        base, *extras = get_args(hint)
        widths = [e.type for e in extras if isinstance(e, AvroInt)]
        if widths:
            if base is not int:
                raise TypeError(f"{where}: Int32/Int64 annotate an int, not {base!r}")
            return _Typed(type=widths[-1])
        return _typed(base, where)
    if origin is Union or origin is types.UnionType:
        args = get_args(hint)
        inner_hints = [a for a in args if a is not type(None)]
        if len(args) != 2 or len(inner_hints) != 1:
            raise TypeError(f"{where}: a union must be `X | None`, not {hint!r}")
        return _optional(_typed(inner_hints[0], where), where)
    if origin is tuple:
        item, *rest = get_args(hint)
        if rest != [Ellipsis]:
            raise TypeError(f"{where}: a sequence is declared `tuple[X, ...]`, not {hint!r}")
        return _array(item, where)
    if hint in _PRIMITIVES:
        return _Typed(type=_PRIMITIVES[hint])
    if hint is Uuid:
        return _Typed(type=UUID_TYPE, codec=UUID_CODEC)
    if isinstance(hint, type) and issubclass(hint, IntEnum):
        return _Typed(type="int", codec=_enum_codec(hint, optional=False), enum=hint)
    if hint is int:
        raise TypeError(f"{where}: say how an int is written: Int32 or Int64 (records.fields)")
    raise TypeError(f"{where}: no Avro form for {hint!r}")


_PRIMITIVES: Mapping[Any, str] = {str: "string", bytes: "bytes", bool: "boolean"}
_PLAIN = frozenset(("string", "bytes", "boolean", "int", "long"))
"""Avro types whose values fastavro writes as Python holds them."""


def _optional(inner: _Typed, where: str) -> _Typed:
    """`X | None`: the union ["null", X] and the conversion that lets None through."""
    avro_type = ["null", inner.type]
    if inner.enum is not None:
        return _Typed(type=avro_type, codec=_enum_codec(inner.enum, optional=True), enum=inner.enum)
    if inner.codec is None and inner.type in _PLAIN:
        return _Typed(type=avro_type)
    if inner.codec is UUID_CODEC:
        return _Typed(type=avro_type, codec=OPTIONAL_UUID_CODEC)
    if inner.codec is INTS_CODEC:
        return _Typed(type=avro_type, codec=OPTIONAL_INTS_CODEC)
    raise TypeError(f"{where}: no Avro form for an optional {inner.type!r}")


def _array(item: Any, where: str) -> _Typed:
    """`tuple[X, ...]`: an Avro array of ints or of structs, read back into a tuple."""
    if item in STRUCT_CLASSES:
        return _Typed(type={"type": "array", "items": avro_name(item)}, codec=_struct_codec(item))
    inner = _typed(item, where)
    if inner.type in ("int", "long") and inner.codec is None:
        return _Typed(type={"type": "array", "items": inner.type}, codec=INTS_CODEC)
    raise TypeError(f"{where}: no Avro form for an array of {inner.type!r}")


def _avro_default(value: Any) -> Any:
    """A dataclass default as Avro writes it (the value a reader fills in for a new field)."""
    if isinstance(value, IntEnum):
        return int(value)
    if isinstance(value, tuple):
        return [_avro_default(v) for v in value]
    return value


def _declared_fields(cls: type[Any]) -> list[tuple[dataclasses.Field[Any], Any, str]]:
    """(field, Python type, doc) of each field of a record or struct class, in order."""
    module = vars(sys.modules[cls.__module__])
    declared = []
    for f in dataclasses.fields(cls):
        where = f"{cls.__name__}.{f.name}"
        # A postponed annotation (PEP 563) is evaluated as `typing.get_type_hints` would, but
        # for the fields alone: the class constants' annotations would double the cost.
        hint = eval(f.type, module) if isinstance(f.type, str) else f.type
        docs = [e.text for e in get_args(hint)[1:] if isinstance(e, Doc)]
        if get_origin(hint) is not Annotated or len(docs) != 1:
            raise TypeError(f"{where}: declare it `Annotated[<type>, Doc(...)]`")
        if f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{where}: an Avro default is a value, not a factory")
        declared.append((f, hint, docs[0]))
    return declared


def _field_specs(cls: type[Any]) -> tuple[FieldSpec, ...]:
    specs = []
    for f, hint, doc in _declared_fields(cls):
        typed = _typed(hint, f"{cls.__name__}.{f.name}")
        default = _NO_DEFAULT if f.default is dataclasses.MISSING else _avro_default(f.default)
        specs.append(
            FieldSpec(
                name=f.name,
                type=typed.type,
                doc=doc,
                default=default,
                codec=typed.codec,
                enum=typed.enum,
            )
        )
    return tuple(specs)


def record_schema(cls: type[model.Record]) -> RecordSchema:
    """The schema of a record class, read from its declaration."""
    return RecordSchema(
        name=cls.__name__,
        record_type=cls.RECORD_TYPE,
        version=cls.VERSION,
        doc=cls.AVRO_DOC,
        fields=_field_specs(cls),
        python_class=cls,
    )


def _struct_schema(cls: type[Any]) -> dict[str, Any]:
    """The named Avro record of a struct class."""
    fields = []
    for spec in _field_specs(cls):
        if spec.codec is not None:
            raise TypeError(f"{cls.__name__}.{spec.name}: a struct field is a plain Avro value")
        # A struct field's default comes before its doc: the key order these schemas were first
        # written with, kept so that the segment header bytes never change.
        entry: dict[str, Any] = {"name": spec.name, "type": spec.type}
        if not spec.required:
            entry["default"] = spec.default
        entry["doc"] = spec.doc
        fields.append(entry)
    return {
        "type": "record",
        "name": cls.__name__,
        "namespace": AVRO_NAMESPACE,
        "doc": cls.AVRO_DOC,
        "fields": fields,
    }


NAMED_TYPES: Mapping[str, dict[str, Any]] = {
    UUID_TYPE: {
        "type": "fixed",
        "name": "Uuid",
        "namespace": AVRO_NAMESPACE,
        "size": 16,
        "doc": "A 128-bit id (topic, namespace, incarnation); shown as 22-char URL-safe base64.",
    },
    **{avro_name(cls): _struct_schema(cls) for cls in STRUCT_CLASSES},
}
"""The named types fields refer to by name; each is defined inline at its first use."""

STRUCTS: Mapping[str, type[Any]] = {avro_name(cls): cls for cls in STRUCT_CLASSES}
"""The class of each named struct type, by its Avro name."""

CURRENT_SCHEMAS: tuple[RecordSchema, ...] = tuple(map(record_schema, model.RECORD_CLASSES))
"""The schema every record type is written with today, in `model.RECORD_CLASSES` order."""


def inline_named_types(schema: Any, defined: set[str]) -> Any:
    """Replace references to `NAMED_TYPES` by their definition at first use (Avro requires it)."""
    if isinstance(schema, str):
        if schema in NAMED_TYPES and schema not in defined:
            defined.add(schema)
            return inline_named_types(NAMED_TYPES[schema], defined)
        return schema
    if isinstance(schema, list):
        return [inline_named_types(s, defined) for s in schema]
    if isinstance(schema, dict):
        return {k: inline_named_types(v, defined) for k, v in schema.items()}
    return schema


def entry_schema(record_schemas: tuple[RecordSchema, ...]) -> dict[str, Any]:
    """The self-contained Avro schema of one log entry carrying any of `record_schemas`."""
    raw = {
        "type": "record",
        "name": "LogEntry",
        "namespace": AVRO_NAMESPACE,
        "doc": "One entry of the metadata log.",
        "fields": [
            {"name": "offset", "type": "long", "doc": "Dense position in the log, from 0."},
            {"name": "epoch", "type": "int", "doc": "Leader epoch of the writer that appended it."},
            {"name": "timestamp", "type": "long", "doc": "Append time, ms since the Unix epoch."},
            {
                "name": "principal",
                "type": ["null", "string"],
                "doc": "Who asked for the change; null if unknown.",
            },
            {
                "name": "record",
                "type": [s.to_avro() for s in record_schemas],
                "doc": "The metadata record; the union branch names type and version.",
            },
        ],
    }
    result: dict[str, Any] = inline_named_types(raw, set())
    return result
