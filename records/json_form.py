"""The JSON form of records, as `mlog log dump --output json` prints and `mlog log append` reads.

A record is `{"type": "TOPIC_RECORD", "version": 0, "data": {...}}` like Kafka's metadata log
dump; ids are in Kafka's 22-char text form, enums by name (numbers are accepted on input),
bytes (SCRAM salts and keys) in standard base64, as Kafka's JSON forms write them.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from collections.abc import Mapping
from enum import IntEnum
from typing import Any

from records.codec import DEFAULT_CODEC, RecordCodec
from records.errors import RecordError
from records.fields import INT_RANGES
from records.model import Record
from records.schemas import NAMED_TYPES, STRUCT_CLASSES, STRUCTS, UUID_TYPE, FieldSpec
from records.uuids import Uuid


def json_type_name(schema_name: str) -> str:
    """Kafka's upper-snake name of a record type, e.g. TopicRecord -> TOPIC_RECORD."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", schema_name).upper()


def _to_json(value: Any, enum: type[IntEnum] | None) -> Any:
    if value is None:
        return None
    if isinstance(value, Uuid):
        return str(value)
    if enum is not None:
        return enum(value).name
    if isinstance(value, tuple):
        return [_to_json(v, None) for v in value]
    if isinstance(value, STRUCT_CLASSES):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def record_to_json(record: Record, codec: RecordCodec = DEFAULT_CODEC) -> dict[str, Any]:
    """The JSON form of a record."""
    schema = codec.schema_for(record.RECORD_TYPE)
    return {
        "type": json_type_name(schema.name),
        "version": schema.version,
        "data": {f.name: _to_json(getattr(record, f.name), f.enum) for f in schema.fields},
    }


def _bytes_from_json(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise RecordError(f"{where}: expected a base64 string, got {value!r}")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise RecordError(f"{where}: {value!r} is not base64") from None


def _from_json(avro_type: Any, value: Any, where: str, enum: type[IntEnum] | None) -> Any:
    if isinstance(avro_type, list):  # ["null", X]
        if value is None:
            return None
        return _from_json(avro_type[1], value, where, enum)
    if isinstance(avro_type, dict):  # array
        if not isinstance(value, list):
            raise RecordError(f"{where}: expected a list, got {value!r}")
        return tuple(
            _from_json(avro_type["items"], v, f"{where}[{i}]", None) for i, v in enumerate(value)
        )
    if avro_type == UUID_TYPE:
        if not isinstance(value, str):
            raise RecordError(f"{where}: expected an id string, got {value!r}")
        try:
            return Uuid.parse(value)
        except ValueError as exc:
            raise RecordError(f"{where}: {exc}") from None
    if avro_type in STRUCTS:
        if not isinstance(value, dict):
            raise RecordError(f"{where}: expected an object, got {value!r}")
        fields = NAMED_TYPES[avro_type]["fields"]
        known = {f["name"] for f in fields}
        unknown = set(value) - known
        if unknown:
            raise RecordError(f"{where}: unknown field(s) {sorted(unknown)}")
        kwargs = {
            f["name"]: _from_json(f["type"], value[f["name"]], f"{where}.{f['name']}", None)
            for f in fields
            if f["name"] in value
        }
        try:
            return STRUCTS[avro_type](**kwargs)
        except TypeError as exc:
            raise RecordError(f"{where}: {exc}") from None
    if enum is not None:
        if isinstance(value, str):
            try:
                return enum[value]
            except KeyError:
                pass
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                return enum(value)
            except ValueError:
                pass
        choices = ", ".join(m.name for m in enum)
        raise RecordError(f"{where}: {value!r} is not one of {choices}")
    if avro_type in INT_RANGES:
        low, high = INT_RANGES[avro_type]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            article = "an" if avro_type == "int" else "a"
            raise RecordError(
                f"{where}: expected {article} {avro_type} in [{low}, {high}], got {value!r}"
            )
        return value
    if avro_type == "string":
        if not isinstance(value, str):
            raise RecordError(f"{where}: expected a string, got {value!r}")
        return value
    if avro_type == "bytes":
        return _bytes_from_json(value, where)
    if avro_type == "boolean":
        if not isinstance(value, bool):
            raise RecordError(f"{where}: expected true or false, got {value!r}")
        return value
    raise RecordError(f"{where}: unsupported type {avro_type!r}")  # pragma: no cover


def _field_value(spec: FieldSpec, data: Mapping[str, Any], where: str) -> Any:
    return _from_json(spec.type, data[spec.name], f"{where}.{spec.name}", spec.enum)


def record_from_json(obj: Any, codec: RecordCodec = DEFAULT_CODEC) -> Record:
    """Parse and validate the JSON form of a record; raises RecordError naming what is wrong."""
    if not isinstance(obj, dict) or "type" not in obj or "data" not in obj:
        raise RecordError('a record is an object {"type": ..., "version": ..., "data": {...}}')
    by_name = {json_type_name(s.name): s for s in codec.schemas}
    schema = by_name.get(obj["type"])
    if schema is None:
        raise RecordError(f"unknown record type {obj['type']!r}; known: {', '.join(by_name)}")
    version = obj.get("version", schema.version)
    if version != schema.version:
        raise RecordError(
            f"{obj['type']} version {version!r} cannot be written; use {schema.version}"
        )
    data = obj["data"]
    if not isinstance(data, dict):
        raise RecordError(f"{obj['type']}: data must be an object")
    names = {f.name for f in schema.fields}
    unknown = set(data) - names
    if unknown:
        raise RecordError(f"{obj['type']}: unknown field(s) {sorted(unknown)}")
    kwargs = {f.name: _field_value(f, data, obj["type"]) for f in schema.fields if f.name in data}
    cls = schema.python_class
    if cls is None:  # pragma: no cover - current schemas always have a class
        raise RecordError(f"{obj['type']} has no class")
    try:
        return cls(**kwargs)
    except TypeError as exc:
        missing = sorted(f.name for f in schema.fields if f.name not in data and f.required)
        raise RecordError(f"{obj['type']}: missing field(s) {missing}") from exc
