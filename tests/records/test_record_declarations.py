"""A record class is the one declaration of its type: the Avro schema is read from it.

`tests/records/test_record_schemas_golden.py` pins what this gives for the record types of this
code; these tests pin the rules (`records.fields`) on declarations of their own, and that a
declaration the rules cannot read fails at import with the field named.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Annotated, Any, ClassVar

import pytest

from records.codec import RecordCodec
from records.fields import Doc, Int32, Int64
from records.json_form import record_from_json, record_to_json
from records.model import BrokerEndpoint, Mode, Record
from records.schemas import (
    CURRENT_SCHEMAS,
    ENDPOINT_TYPE,
    OPTIONAL_INTS_CODEC,
    OPTIONAL_UUID_CODEC,
    UUID_CODEC,
    UUID_TYPE,
    record_schema,
)
from records.uuids import Uuid


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EveryKindRecord(Record):
    """A record with a field of every kind the rules know."""

    RECORD_TYPE: ClassVar[int] = 9100
    VERSION: ClassVar[int] = 3
    AVRO_DOC: ClassVar[str] = "Every kind of field."
    text: Annotated[str, Doc("A string.")]
    blob: Annotated[bytes, Doc("Bytes.")]
    small: Annotated[Int32, Doc("An int.")]
    big: Annotated[Int64, Doc("A long.")]
    id: Annotated[Uuid, Doc("An id.")]
    ids: Annotated[tuple[Int32, ...], Doc("Ints.")]
    flag: Annotated[bool, Doc("A flag.")] = True
    mode: Annotated[Mode, Doc("An enum.")] = Mode.READ_ONLY
    maybe_text: Annotated[str | None, Doc("An optional string.")] = None
    maybe_big: Annotated[Int64 | None, Doc("An optional long.")] = None
    maybe_id: Annotated[Uuid | None, Doc("An optional id.")] = None
    maybe_ids: Annotated[tuple[Int32, ...] | None, Doc("Optional ints.")] = None
    maybe_mode: Annotated[Mode | None, Doc("An optional enum.")] = None
    endpoints: Annotated[tuple[BrokerEndpoint, ...], Doc("Structs.")] = ()
    longs: Annotated[tuple[Int64, ...], Doc("Longs.")] = (1, 2)


def test_the_schema_is_read_from_the_declaration() -> None:
    schema = record_schema(EveryKindRecord)
    assert (schema.name, schema.record_type, schema.version) == ("EveryKindRecord", 9100, 3)
    assert schema.branch_name == "mlog.EveryKindRecordV3"
    assert schema.doc == "Every kind of field."
    assert schema.python_class is EveryKindRecord
    assert [
        (f["name"], f["type"], f["doc"], f.get("default", "-")) for f in schema.to_avro()["fields"]
    ] == [
        ("text", "string", "A string.", "-"),
        ("blob", "bytes", "Bytes.", "-"),
        ("small", "int", "An int.", "-"),
        ("big", "long", "A long.", "-"),
        ("id", UUID_TYPE, "An id.", "-"),
        ("ids", {"type": "array", "items": "int"}, "Ints.", "-"),
        ("flag", "boolean", "A flag.", True),
        ("mode", "int", "An enum.", 1),
        ("maybe_text", ["null", "string"], "An optional string.", None),
        ("maybe_big", ["null", "long"], "An optional long.", None),
        ("maybe_id", ["null", UUID_TYPE], "An optional id.", None),
        ("maybe_ids", ["null", {"type": "array", "items": "int"}], "Optional ints.", None),
        ("maybe_mode", ["null", "int"], "An optional enum.", None),
        ("endpoints", {"type": "array", "items": ENDPOINT_TYPE}, "Structs.", []),
        ("longs", {"type": "array", "items": "long"}, "Longs.", [1, 2]),
    ]
    by_name = {f.name: f for f in schema.fields}
    assert by_name["mode"].enum is Mode and by_name["maybe_mode"].enum is Mode
    assert by_name["small"].enum is None and by_name["small"].codec is None
    assert by_name["id"].codec is UUID_CODEC
    assert by_name["maybe_id"].codec is OPTIONAL_UUID_CODEC
    assert by_name["maybe_ids"].codec is OPTIONAL_INTS_CODEC
    assert [f.name for f in schema.fields if f.required] == [
        "text",
        "blob",
        "small",
        "big",
        "id",
        "ids",
    ]


def test_a_declared_record_round_trips_through_the_codec_and_the_json_form() -> None:
    codec = RecordCodec([*CURRENT_SCHEMAS, record_schema(EveryKindRecord)])
    record = EveryKindRecord(
        text="t",
        blob=b"\x00\xff",
        small=-(2**31),
        big=2**63 - 1,
        id=Uuid.random(),
        ids=(1, 2, 3),
        mode=Mode.NONE,
        maybe_text="m",
        maybe_big=-1,
        maybe_id=Uuid.random(),
        maybe_ids=(),
        maybe_mode=Mode.READ_WRITE,
        endpoints=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9092),),
    )
    count, body = codec.encode_entries([(0, 1, 2, None, record)])
    array = codec.reader_array_schema(codec.entry_schema_json)
    (entry,) = codec.decode_entries(count, body, array)
    assert entry.record == record
    assert record_from_json(record_to_json(record, codec), codec) == record
    defaults = EveryKindRecord(text="", blob=b"", small=0, big=0, id=record.id, ids=())
    count, body = codec.encode_entries([(0, 1, 2, None, defaults)])
    assert codec.decode_entries(count, body, array)[0].record == defaults


def _declare(annotation: Any, **field_args: Any) -> type[Record]:
    """A record class with one field `x` of `annotation` (a string, as under PEP 563)."""
    namespace: dict[str, Any] = {
        "__annotations__": {
            "RECORD_TYPE": "ClassVar[int]",
            "VERSION": "ClassVar[int]",
            "x": annotation,
        },
        "RECORD_TYPE": 9200,
        "VERSION": 0,
        "AVRO_DOC": "A test record.",
        "__module__": __name__,
    }
    if field_args:
        namespace["x"] = dataclasses.field(**field_args)
    cls = type("BadRecord", (Record,), namespace)
    declared: type[Record] = dataclasses.dataclass(frozen=True, slots=True, kw_only=True)(cls)
    return declared


@pytest.mark.parametrize(
    ("annotation", "field_args", "message"),
    [
        ("Annotated[int, Doc('An int.')]", {}, r"BadRecord\.x: say how an int is written: Int32"),
        ("Int32", {}, r"BadRecord\.x: declare it `Annotated\[<type>, Doc\(...\)\]`"),
        ("Annotated[str, Doc('a'), Doc('b')]", {}, r"BadRecord\.x: declare it"),
        ("Annotated[int | str, Doc('Two.')]", {}, r"BadRecord\.x: a union must be `X \| None`"),
        ("Annotated[list[str], Doc('A list.')]", {}, r"BadRecord\.x: no Avro form"),
        ("Annotated[tuple[str, str], Doc('A pair.')]", {}, r"declared `tuple\[X, \.\.\.\]`"),
        ("Annotated[tuple[str, ...], Doc('Strings.')]", {}, r"no Avro form for an array"),
        ("Annotated[float, Doc('A float.')]", {}, r"BadRecord\.x: no Avro form"),
        ("Annotated[BrokerEndpoint, Doc('One.')]", {}, r"BadRecord\.x: no Avro form"),
        ("Annotated[Uuid | None, Doc('Maybe.')] | None", {}, r"BadRecord\.x: declare it"),
        (
            "Annotated[tuple[BrokerEndpoint, ...] | None, Doc('Maybe.')]",
            {},
            r"no Avro form for an optional",
        ),
        ("Annotated[tuple[Mode, ...], Doc('Modes.')]", {}, r"no Avro form for an array of 'int'"),
        (
            "Annotated[tuple[Int32, ...], Doc('Ints.')]",
            {"default_factory": tuple},
            r"BadRecord\.x: an Avro default is a value, not a factory",
        ),
    ],
)
def test_a_declaration_the_rules_cannot_read_names_its_field(
    annotation: str, field_args: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        record_schema(_declare(annotation, **field_args))


def test_every_record_field_is_declared_with_a_doc_and_every_record_with_an_avro_doc() -> None:
    for schema in CURRENT_SCHEMAS:
        assert schema.python_class is not None
        assert schema.doc == schema.python_class.AVRO_DOC
        assert all(spec.doc.strip() for spec in schema.fields), schema.name


_EXPORTS_CHILD = """
import sys
import records
assert "records.codec" not in sys.modules, "importing records built the codec"
import records.model
assert "records.codec" not in sys.modules, "importing records.model built the codec"
from records.exports import declared_exports
homes = declared_exports(records.__file__)
for name in records.__all__:
    value = getattr(records, name)
    home = sys.modules[homes[name]]
    assert getattr(home, name) is value, name
try:
    records.no_such_name
except AttributeError as exc:
    assert "no_such_name" in str(exc)
else:
    raise AssertionError("records.no_such_name resolved")
print(" ".join(sorted(records.__all__)))
"""


def test_records_exports_the_names_its_imports_declare_each_imported_on_first_use() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _EXPORTS_CHILD], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    exported = set(result.stdout.split())
    assert {"DEFAULT_CODEC", "RecordCodec", "LogEntry", "RecordError", "TopicRecord", "Uuid"} <= (
        exported
    )
    assert len(exported) == 33
