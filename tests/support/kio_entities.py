"""Hypothesis strategies of kio entities: any class, values valid for each field's Kafka type.

For the tests that compare our readers and writers with kio's on the same entities: request
frames of every supported API version, damaged ones, and `same` (equal, types and all).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from functools import cache
from typing import Any

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
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

from api.protocol import codec
from api.protocol.quorum.apis import (
    QUORUM_VERSIONS,
)

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}

TEXT = st.text(max_size=6)


def _milliseconds(low: int, high: int) -> st.SearchStrategy[datetime.timedelta]:
    return st.integers(low, high).map(lambda ms: datetime.timedelta(milliseconds=ms))


def _primitives(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _INTS:
        low, high = _INTS[kafka_type]
        return st.one_of(
            st.sampled_from([low, -1, 0, 1, high]).filter(low.__le__), st.integers(low, high)
        )
    simple: dict[str, st.SearchStrategy[Any]] = {
        "bool": st.booleans(),
        "string": TEXT,
        "bytes": st.binary(max_size=6),
        "records": st.binary(max_size=6),
        "float64": st.floats(allow_nan=False, allow_infinity=False),
        "error_code": st.sampled_from(list(ErrorCode)),
        "timedelta_i32": _milliseconds(-(2**31), 2**31 - 1),
        "timedelta_i64": _milliseconds(-(2**40), 2**40),
        "uuid": st.one_of(st.just(uuid.UUID(int=0)), st.uuids()),
    }
    return simple[kafka_type]


def _field_values(field: dataclasses.Field[Any]) -> st.SearchStrategy[Any]:
    kind = classify_field(field)
    values: st.SearchStrategy[Any]
    if isinstance(kind, PrimitiveField):
        values = _primitives(get_schema_field_type(field))
    elif isinstance(kind, PrimitiveTupleField):
        values = st.lists(_primitives(get_schema_field_type(field)), max_size=3).map(tuple)
    elif isinstance(kind, EntityField):
        values = entities(kind.type_)
    else:
        assert isinstance(kind, EntityTupleField)
        values = st.lists(entities(kind.type_), max_size=2).map(tuple)
    if get_field_tag(field) is not None:
        # A tagged field is written only when it is not its default.
        default = get_tagged_field_default(field)
        return st.one_of(st.just(default), values)
    return st.one_of(st.none(), values) if is_optional(field) else values


@cache
def entities(entity_class: type[Any]) -> st.SearchStrategy[Any]:
    """Entities of a kio class with values valid for each field's Kafka type."""
    fields = {f.name: _field_values(f) for f in dataclasses.fields(entity_class)}
    return st.builds(entity_class, **fields)


SUPPORTED_REQUESTS = [
    (key, version)
    for key, (low, high) in sorted(codec.SUPPORTED_VERSIONS.items())
    for version in range(low, high + 1)
]
"""(API key, version) of every request version the server reads."""


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down."""
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if type(a) is tuple:
        return len(a) == len(b) and all(map(same, a, b))
    return bool(a == b)


@st.composite
def request_frames(draw: st.DrawFn, key: int, version: int) -> bytes:
    """A request frame (without its size) of a random body, correlation id and client id."""
    body = draw(entities(codec.request_class(key, version)))  # type: ignore[arg-type]  # classes are hashable
    frame = codec.encode_request(
        body,
        correlation_id=draw(st.integers(-(2**31), 2**31 - 1)),
        client_id=draw(st.one_of(st.none(), TEXT)),
    )
    return frame[4:]


QUORUM_ANSWERS = [
    (key, version)
    for key, (low, high) in sorted(QUORUM_VERSIONS.items())
    for version in range(low, high + 1)
]
"""(API key, version) of every answer version the quorum's links read."""


@st.composite
def response_frames(draw: st.DrawFn, key: int, version: int) -> bytes:
    """A response frame (without its size) of a random body and correlation id."""
    body = draw(entities(codec.response_class(key, version)))  # type: ignore[arg-type]  # classes are hashable
    frame = codec.encode_response(draw(st.integers(-(2**31), 2**31 - 1)), body)
    return frame[4:]


@st.composite
def damaged_responses(draw: st.DrawFn) -> tuple[int, int, bytes]:
    """(key, version, frame): a quorum answer with 1-3 bytes set, inserted, deleted or cut."""
    key, version = draw(st.sampled_from(QUORUM_ANSWERS))
    return key, version, damaged(draw, draw(response_frames(key, version)))


def damaged(draw: st.DrawFn, frame: bytes) -> bytes:
    """`frame` with 1-3 bytes set, inserted, deleted or cut."""
    changed = bytearray(frame)
    for _ in range(draw(st.integers(1, 3))):
        position = draw(st.integers(0, len(changed)))
        change = draw(st.sampled_from(["set", "insert", "delete", "cut"]))
        byte = draw(st.one_of(st.sampled_from([0, 1, 2, 0x7F, 0x80, 0xFF]), st.integers(0, 255)))
        if change == "insert":
            changed.insert(position, byte)
        elif position < len(changed):
            if change == "set":
                changed[position] = byte
            elif change == "delete":
                del changed[position]
            else:
                del changed[position:]
    return bytes(changed)


@st.composite
def damaged_requests(draw: st.DrawFn) -> tuple[Any, bytes]:
    """(body class, frame): a supported request with 1-3 bytes set, inserted, deleted or cut."""
    key, version = draw(st.sampled_from(SUPPORTED_REQUESTS))
    return codec.request_class(key, version), damaged(draw, draw(request_frames(key, version)))


def plain_value(value: Any, draw: st.DrawFn, *, built: bool = True) -> Any:
    """A value of an entity as a handler may give it: plain values, or (`built`) as it is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if built and draw(st.booleans()):
            return value  # a built entity is written as it is
        return {
            f.name: plain_value(getattr(value, f.name), draw, built=built)
            for f in dataclasses.fields(value)
        }
    if type(value) is tuple:
        items = [plain_value(item, draw, built=built) for item in value]
        return items if draw(st.booleans()) else tuple(items)
    if isinstance(value, uuid.UUID):
        return value.bytes if draw(st.booleans()) else value
    if isinstance(value, datetime.timedelta) and draw(st.booleans()):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, enum.IntEnum):
        return int(value)
    return value


@st.composite
def answers(
    draw: st.DrawFn, entity_class: Any, *, built: bool = True
) -> tuple[Any, dict[str, Any]]:
    """(entity, the plain values of it a handler may answer with) of a kio class."""
    entity = draw(entities(entity_class))
    values = {
        f.name: plain_value(getattr(entity, f.name), draw, built=built)
        for f in dataclasses.fields(entity)
    }
    return entity, values
