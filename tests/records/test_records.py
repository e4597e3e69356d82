from __future__ import annotations

import copy
import dataclasses
import io
import json
import re
import uuid
from collections.abc import Iterator
from enum import IntEnum
from typing import Annotated, Any, ClassVar

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from records.codec import DEFAULT_CODEC, EntryTuple, RecordCodec
from records.entry import LogEntry
from records.errors import RecordError, UnknownRecordTypeError, UnsupportedRecordVersionError
from records.fields import Doc, Int64
from records.json_form import json_type_name, record_from_json, record_to_json
from records.model import (
    RECORD_CLASSES,
    BrokerEndpoint,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    Mode,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    mode_name,
)
from records.schemas import (
    CURRENT_SCHEMAS,
    NAMED_TYPES,
    FieldSpec,
    RecordSchema,
    entry_schema,
    record_schema,
)
from records.upcasting import UpcasterRegistry
from records.uuids import Uuid
from records.varint import encode_long, read_long
from tests.support.record_strategies import (
    RECORD_STRATEGIES,
    any_record,
    entry_tuples,
    int64s,
    texts,
    topic_records,
    write_body,
)

# ----------------------------------------------------------------------------- strategies


def _decode(count: int, body: bytes, codec: RecordCodec = DEFAULT_CODEC) -> list[LogEntry]:
    return codec.decode_entries(count, body, codec.reader_array_schema(codec.entry_schema_json))


def test_strategies_cover_every_record_class() -> None:
    assert set(RECORD_STRATEGIES) == set(RECORD_CLASSES)
    assert len(RECORD_STRATEGIES) == len(RECORD_CLASSES) == 23


@given(st.data())
def test_each_strategy_builds_its_own_class(data: st.DataObject) -> None:
    for cls, strategy in RECORD_STRATEGIES.items():
        assert type(data.draw(strategy)) is cls


# ----------------------------------------------------------------------------- round trips


@settings(max_examples=200)
@given(st.lists(entry_tuples, min_size=1, max_size=20))
def test_entries_round_trip_through_the_codec(entries: list[EntryTuple]) -> None:
    count, body = DEFAULT_CODEC.encode_entries(entries)
    assert count == len(entries)
    decoded = _decode(count, body)
    expected = [
        LogEntry(offset=o, epoch=e, timestamp=t, principal=p, record=r) for o, e, t, p, r in entries
    ]
    assert decoded == expected
    for got, (*_, record) in zip(decoded, entries, strict=True):
        assert type(got.record) is type(record)


def test_namespace_parent_id_round_trips() -> None:
    # The only optional named type (["null", "mlog.Uuid"]) in the schema.
    parent = Uuid.random()
    record = NamespaceRecord(namespace_id=Uuid.random(), name="a:b", parent_id=parent)
    count, body = DEFAULT_CODEC.encode_entries([(0, 0, 0, None, record)])
    (entry,) = _decode(count, body)
    assert isinstance(entry.record, NamespaceRecord)
    assert entry.record.parent_id is not None
    assert entry.record.parent_id.bytes == parent.bytes
    assert str(entry.record.parent_id) == str(parent)
    assert entry.record == record


@given(any_record)
def test_encode_record_matches_the_schema_branch(record: Record) -> None:
    branch, value = DEFAULT_CODEC.encode_record(record)
    schema = DEFAULT_CODEC.schema_for(record.RECORD_TYPE)
    assert branch == schema.branch_name
    assert list(value) == [f.name for f in schema.fields]
    assert DEFAULT_CODEC.decode_record(branch, value) == record


@settings(max_examples=200)
@given(any_record)
def test_records_round_trip_through_json(record: Record) -> None:
    obj = record_to_json(record)
    assert obj["type"] == json_type_name(type(record).__name__)
    assert obj["version"] == type(record).VERSION
    text = json.dumps(obj)
    assert record_from_json(json.loads(text)) == record


def test_json_form_uses_kafka_names_and_enum_names() -> None:
    topic_id = Uuid.random()
    record = PartitionChangeRecord(partition_id=3, topic_id=topic_id, isr=(1, 2), mode=Mode.NONE)
    obj = record_to_json(record)
    assert obj["type"] == "PARTITION_CHANGE_RECORD"
    assert obj["data"]["topic_id"] == str(topic_id)
    assert obj["data"]["mode"] == "NONE"
    assert obj["data"]["isr"] == [1, 2]
    assert obj["data"]["replicas"] is None


def test_json_input_accepts_enum_numbers() -> None:
    obj = record_to_json(
        PartitionRecord(partition_id=0, topic_id=Uuid.random(), replicas=(1,), isr=(1,))
    )
    obj["data"]["mode"] = 1
    record = record_from_json(obj)
    assert isinstance(record, PartitionRecord)
    assert record.mode is Mode.READ_ONLY


# ----------------------------------------------------------------------------- schema


def _records_in(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, dict):
        if schema.get("type") == "record":
            yield schema
        for value in schema.values():
            yield from _records_in(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from _records_in(item)


def _is_doc(value: object) -> bool:
    return isinstance(value, str) and value.strip() != ""


def test_every_avro_record_and_field_is_documented() -> None:
    records = list(_records_in(DEFAULT_CODEC.entry_schema))
    names = {r["name"] for r in records}
    # LogEntry, the record types and the nested BrokerEndpoint / BrokerFeature / QuorumVoter
    assert {"LogEntry", "BrokerEndpoint", "BrokerFeature", "QuorumVoter"} <= names
    assert len(records) == 1 + len(CURRENT_SCHEMAS) + 3
    for record in records:
        assert _is_doc(record.get("doc")), record["name"]
        for field in record["fields"]:
            assert _is_doc(field.get("doc")), f"{record['name']}.{field['name']}"
    for named in NAMED_TYPES.values():
        assert _is_doc(named.get("doc")), named["name"]
    for schema in CURRENT_SCHEMAS:
        assert _is_doc(schema.doc), schema.name
        for spec in schema.fields:
            assert _is_doc(spec.doc), f"{schema.name}.{spec.name}"


def test_entry_schema_parses_with_fastavro() -> None:
    parsed: Any = fastavro.parse_schema(DEFAULT_CODEC.entry_schema)
    assert parsed["name"] == "mlog.LogEntry"
    assert json.loads(DEFAULT_CODEC.entry_schema_json) == DEFAULT_CODEC.entry_schema
    # Named types are defined once (at first use), then referenced by name.
    text = DEFAULT_CODEC.entry_schema_json
    assert text.count('"name":"Uuid"') == 1
    assert text.count('"name":"BrokerEndpoint"') == 1


def _avro_value_of_default(spec: FieldSpec, default: Any) -> Any:
    if spec.codec is not None and spec.codec.to_avro is not None:
        default = spec.codec.to_avro_function()(default)
    if isinstance(default, IntEnum):
        return int(default)
    if isinstance(default, tuple):
        return list(default)
    return default


@pytest.mark.parametrize("schema", CURRENT_SCHEMAS, ids=lambda s: s.name)
def test_avro_defaults_match_the_dataclass_defaults(schema: RecordSchema) -> None:
    # A reader whose schema adds a field fills it with the Avro default: it must be the value a
    # record built in Python gets.
    cls = schema.python_class
    assert cls is not None
    assert dataclasses.is_dataclass(cls)
    avro_fields = {f["name"]: f for f in schema.to_avro()["fields"]}
    for spec, field in zip(schema.fields, dataclasses.fields(cls), strict=True):
        has_default = field.default is not dataclasses.MISSING
        assert field.default_factory is dataclasses.MISSING
        assert ("default" in avro_fields[spec.name]) == has_default, spec.name
        if has_default:
            assert avro_fields[spec.name]["default"] == _avro_value_of_default(
                spec, field.default
            ), spec.name


def test_record_types_are_unique_and_schemas_follow_record_classes() -> None:
    types = [cls.RECORD_TYPE for cls in RECORD_CLASSES]
    assert len(set(types)) == len(types)
    assert tuple(s.python_class for s in CURRENT_SCHEMAS) == RECORD_CLASSES
    assert len({(s.record_type, s.version) for s in CURRENT_SCHEMAS}) == len(CURRENT_SCHEMAS)


def test_union_branch_names() -> None:
    branch_re = re.compile(r"mlog\.[A-Z][A-Za-z]*V[0-9]+")
    for schema in CURRENT_SCHEMAS:
        assert branch_re.fullmatch(schema.branch_name), schema.branch_name
        assert schema.branch_name == f"mlog.{schema.name}V{schema.version}"
    assert TopicRecord in RECORD_CLASSES
    assert DEFAULT_CODEC.schema_for(TopicRecord.RECORD_TYPE).branch_name == "mlog.TopicRecordV0"
    union = next(f for f in DEFAULT_CODEC.entry_schema["fields"] if f["name"] == "record")["type"]
    assert [f"{b['namespace']}.{b['name']}" for b in union] == [
        s.branch_name for s in CURRENT_SCHEMAS
    ]


# ----------------------------------------------------------------------------- codec errors


def _sample_entries() -> list[EntryTuple]:
    topic_id = Uuid.random()
    return [
        (0, 1, 1000, "alice", TopicRecord(name="orders", topic_id=topic_id)),
        (
            1,
            1,
            1000,
            None,
            PartitionRecord(partition_id=0, topic_id=topic_id, replicas=(1,), isr=(1,)),
        ),
    ]


def test_unknown_union_branch_raises_unknown_record_type() -> None:
    modified = copy.deepcopy(DEFAULT_CODEC.entry_schema)
    renamed = 0
    for record in _records_in(modified):
        if record["name"] == "TopicRecordV0":
            record["name"] = "TopicRecordV9"
            renamed += 1
    assert renamed == 1
    value = {
        "offset": 7,
        "epoch": 1,
        "timestamp": 5,
        "principal": None,
        "record": (
            "mlog.TopicRecordV9",
            {"name": "t", "topic_id": Uuid.random().bytes, "namespace": ""},
        ),
    }
    body = write_body(modified, [value])
    array = DEFAULT_CODEC.reader_array_schema(json.dumps(modified))
    with pytest.raises(UnknownRecordTypeError, match="TopicRecordV9") as info:
        DEFAULT_CODEC.decode_entries(1, body, array)
    assert "TopicRecordV9" in info.value.name


def test_wrong_count_raises_record_error() -> None:
    count, body = DEFAULT_CODEC.encode_entries(_sample_entries())
    assert len(_decode(count, body)) == 2
    for wrong in (0, 1, 3, 100):
        with pytest.raises(RecordError):
            _decode(wrong, body)


@given(st.lists(entry_tuples, min_size=1, max_size=5), st.data())
def test_damaged_bodies_raise_record_error(entries: list[EntryTuple], data: st.DataObject) -> None:
    count, body = DEFAULT_CODEC.encode_entries(entries)
    wrong_count = data.draw(st.integers(0, 2 * count + 2).filter(lambda n: n != count))
    with pytest.raises(RecordError):
        _decode(wrong_count, body)
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(RecordError):
        _decode(count, body[:cut])
    # A run of 0x80 bytes plus the decoder's end marker is a non-canonical varint zero: the
    # array still ends there and decodes to the same entries, so no data can change that way
    # (and the block CRC rejects such a body before the codec sees it). Any other tail fails.
    extra = data.draw(st.binary(min_size=1, max_size=8).filter(lambda b: b != b"\x80" * len(b)))
    with pytest.raises(RecordError):
        _decode(count, body + extra)


def test_empty_block_round_trips() -> None:
    count, body = DEFAULT_CODEC.encode_entries([])
    assert (count, body) == (0, b"")
    assert _decode(count, body) == []


def test_wrong_python_type_raises_record_error() -> None:
    topic_id = Uuid.random()
    with pytest.raises(RecordError):
        DEFAULT_CODEC.encode_entries(
            [(0, 0, 0, None, TopicRecord(name=5, topic_id=topic_id))]  # type: ignore[arg-type]
        )
    with pytest.raises(RecordError):
        DEFAULT_CODEC.encode_entries(
            [
                (
                    0,
                    0,
                    0,
                    None,
                    ConfigRecord(
                        resource_type=ConfigResourceType.TOPIC,
                        resource_name="t",
                        name="k",
                        value=5,  # type: ignore[arg-type]
                    ),
                )
            ]
        )
    with pytest.raises(RecordError):
        DEFAULT_CODEC.encode_entries(
            [(0, 0, 0, None, UnregisterBrokerRecord(broker_id=1, broker_epoch=2**63))]
        )


def test_wrong_type_for_an_id_raises_record_error() -> None:
    # A topic id passed as its text form instead of a Uuid.
    record = TopicRecord(name="t", topic_id=str(Uuid.random()))  # type: ignore[arg-type]
    with pytest.raises(RecordError):
        DEFAULT_CODEC.encode_entries([(0, 0, 0, None, record)])


def test_wrong_type_for_an_endpoint_raises_record_error() -> None:
    record = RegisterBrokerRecord(
        broker_id=1,
        incarnation_id=Uuid.random(),
        broker_epoch=0,
        end_points=("PLAINTEXT://localhost:9092",),  # type: ignore[arg-type]
    )
    with pytest.raises(RecordError):
        DEFAULT_CODEC.encode_entries([(0, 0, 0, None, record)])


def test_int_field_out_of_int32_range_is_not_written() -> None:
    # The schema says Avro "int" (32 bits): other Avro readers reject a larger value.
    record = FeatureLevelRecord(name="metadata.version", feature_level=2**31)
    with pytest.raises(RecordError):
        DEFAULT_CODEC.encode_entries([(0, 0, 0, None, record)])


def test_invalid_enum_value_is_not_written() -> None:
    # Anything written must read back: a mode that is no Mode makes the entry unreadable.
    record = PartitionRecord(
        partition_id=0,
        topic_id=Uuid.random(),
        replicas=(1,),
        isr=(1,),
        mode=7,  # type: ignore[arg-type]
    )
    with pytest.raises(RecordError):
        DEFAULT_CODEC.encode_entries([(0, 0, 0, None, record)])


def test_unknown_record_class_raises_record_error() -> None:
    with pytest.raises(RecordError, match="ExampleRecord"):
        DEFAULT_CODEC.encode_entries([(0, 0, 0, None, ExampleRecord(name="x", size=1))])
    with pytest.raises(RecordError, match="ExampleRecord"):
        DEFAULT_CODEC.encode_record(ExampleRecord(name="x", size=1))


def test_unknown_branch_in_decode_record() -> None:
    with pytest.raises(UnknownRecordTypeError):
        DEFAULT_CODEC.decode_record("mlog.NoSuchRecordV0", {})
    with pytest.raises(UnknownRecordTypeError):
        DEFAULT_CODEC.schema_for(9999)


# ----------------------------------------------------------------------------- JSON errors


def _topic_json() -> dict[str, Any]:
    return record_to_json(TopicRecord(name="orders", topic_id=Uuid.random()))


def test_json_unknown_type() -> None:
    obj = _topic_json()
    obj["type"] = "NO_SUCH_RECORD"
    with pytest.raises(RecordError, match="NO_SUCH_RECORD"):
        record_from_json(obj)


def test_json_not_a_record_object() -> None:
    bads: list[object] = [[], "TOPIC_RECORD", {"type": "TOPIC_RECORD"}, {"data": {}}]
    for bad in bads:
        with pytest.raises(RecordError):
            record_from_json(bad)


def test_json_wrong_version() -> None:
    obj = _topic_json()
    obj["version"] = 1
    with pytest.raises(RecordError, match="version"):
        record_from_json(obj)


def test_json_unknown_field() -> None:
    obj = _topic_json()
    obj["data"]["colour"] = "red"
    with pytest.raises(RecordError, match="colour"):
        record_from_json(obj)


def test_json_unknown_field_in_endpoint() -> None:
    obj = record_to_json(
        RegisterBrokerRecord(
            broker_id=1,
            incarnation_id=Uuid.random(),
            broker_epoch=0,
            end_points=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9092),),
        )
    )
    obj["data"]["end_points"][0]["tls"] = True
    with pytest.raises(RecordError, match="tls"):
        record_from_json(obj)


def test_json_missing_field() -> None:
    obj = _topic_json()
    del obj["data"]["topic_id"]
    with pytest.raises(RecordError, match="topic_id"):
        record_from_json(obj)


def test_json_missing_optional_field_takes_the_default() -> None:
    obj = _topic_json()
    del obj["data"]["namespace"]
    record = record_from_json(obj)
    assert isinstance(record, TopicRecord)
    assert record.namespace == ""


def test_json_wrong_type() -> None:
    obj = _topic_json()
    obj["data"]["name"] = 5
    with pytest.raises(RecordError, match="name") as info:
        record_from_json(obj)
    assert "string" in str(info.value)
    obj = _topic_json()
    obj["data"]["topic_id"] = "not-an-id"
    with pytest.raises(RecordError, match="topic_id"):
        record_from_json(obj)


@pytest.mark.parametrize(
    ("record", "field", "bad"),
    [
        (FeatureLevelRecord(name="v", feature_level=1), "feature_level", 2**31),
        (FeatureLevelRecord(name="v", feature_level=1), "feature_level", -(2**31) - 1),
        (FeatureLevelRecord(name="v", feature_level=1), "feature_level", True),
        (FeatureLevelRecord(name="v", feature_level=1), "feature_level", 1.0),
        (UnregisterBrokerRecord(broker_id=1, broker_epoch=1), "broker_epoch", 2**63),
    ],
)
def test_json_int_out_of_range(record: Record, field: str, bad: object) -> None:
    obj = record_to_json(record)
    obj["data"][field] = bad
    with pytest.raises(RecordError, match=field):
        record_from_json(obj)


def test_json_bad_enum_name() -> None:
    obj = record_to_json(
        PartitionRecord(partition_id=0, topic_id=Uuid.random(), replicas=(1,), isr=(1,))
    )
    obj["data"]["mode"] = "READ_SOMETIMES"
    with pytest.raises(RecordError, match="READ_SOMETIMES") as info:
        record_from_json(obj)
    assert "mode" in str(info.value)
    assert "READ_WRITE" in str(info.value)
    obj["data"]["mode"] = 7
    with pytest.raises(RecordError, match="mode"):
        record_from_json(obj)


# ----------------------------------------------------------------------------- upcasting


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ExampleRecord(Record):
    RECORD_TYPE: ClassVar[int] = 9000
    VERSION: ClassVar[int] = 1
    AVRO_DOC: ClassVar[str] = "A test record at its second version."
    name: Annotated[str, Doc("A name.")]
    size: Annotated[Int64, Doc("Length of the name, added in version 1.")]


EXAMPLE_V1 = record_schema(ExampleRecord)
# An older version is kept as the schema it was written with: its class is gone.
EXAMPLE_V0 = RecordSchema(
    name="ExampleRecord",
    record_type=9000,
    version=0,
    doc="A test record at its first version.",
    fields=(FieldSpec(name="name", type="string", doc="A name."),),
)
EXAMPLE_UPCASTERS = UpcasterRegistry({(9000, 0): lambda v: {**v, "size": len(v["name"])}})


def _example_codec(upcasters: UpcasterRegistry = EXAMPLE_UPCASTERS) -> RecordCodec:
    return RecordCodec([*CURRENT_SCHEMAS, EXAMPLE_V1], history=[EXAMPLE_V0], upcasters=upcasters)


@given(st.lists(texts, min_size=1, max_size=10), topic_records)
def test_old_version_is_upcast_on_read(names: list[str], topic: TopicRecord) -> None:
    codec = _example_codec()
    writer = entry_schema((*CURRENT_SCHEMAS, EXAMPLE_V0))
    values: list[dict[str, Any]] = [
        {
            "offset": i,
            "epoch": 3,
            "timestamp": 1000 + i,
            "principal": None,
            "record": ("mlog.ExampleRecordV0", {"name": name}),
        }
        for i, name in enumerate(names)
    ]
    topic_branch, topic_value = codec.encode_record(topic)
    values.append(
        {
            "offset": len(names),
            "epoch": 3,
            "timestamp": 2000,
            "principal": "bob",
            "record": (topic_branch, topic_value),
        }
    )
    body = write_body(writer, values)
    entries = codec.decode_entries(len(values), body, codec.reader_array_schema(json.dumps(writer)))
    assert [e.record for e in entries] == [
        *(ExampleRecord(name=n, size=len(n)) for n in names),
        topic,
    ]
    assert [e.offset for e in entries] == list(range(len(values)))
    assert entries[-1].principal == "bob"


@given(texts)
def test_current_version_of_new_type_round_trips(name: str) -> None:
    codec = _example_codec()
    record = ExampleRecord(name=name, size=-5)
    count, body = codec.encode_entries([(0, 0, 0, None, record)])
    assert _decode(count, body, codec) == [
        LogEntry(offset=0, epoch=0, timestamp=0, principal=None, record=record)
    ]
    assert record_from_json(json.loads(json.dumps(record_to_json(record, codec))), codec) == record


def test_history_without_upcaster_path_fails_at_construction() -> None:
    with pytest.raises(UnsupportedRecordVersionError) as info:
        _example_codec(UpcasterRegistry())
    assert info.value.record_type == 9000
    assert info.value.version == 0
    with pytest.raises(UnsupportedRecordVersionError):
        UpcasterRegistry({(9000, 0): lambda v: v}).chain(9000, 0, 2)
    assert len(UpcasterRegistry({(9000, 0): lambda v: v}).chain(9000, 0, 1)) == 1


def test_history_must_be_older_than_current() -> None:
    with pytest.raises(ValueError, match="not older"):
        RecordCodec([*CURRENT_SCHEMAS, EXAMPLE_V1], history=[EXAMPLE_V1])


def test_upcaster_that_drops_a_field_is_not_reported_as_unknown_type() -> None:
    codec = _example_codec(UpcasterRegistry({(9000, 0): dict}))
    writer = entry_schema((*CURRENT_SCHEMAS, EXAMPLE_V0))
    value = {
        "offset": 0,
        "epoch": 0,
        "timestamp": 0,
        "principal": None,
        "record": ("mlog.ExampleRecordV0", {"name": "x"}),
    }
    body = write_body(writer, [value])
    with pytest.raises(RecordError, match="size") as info:
        codec.decode_entries(1, body, codec.reader_array_schema(json.dumps(writer)))
    assert not isinstance(info.value, UnknownRecordTypeError)


# ----------------------------------------------------------------------------- Uuid

UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")


def test_random_ids_never_start_with_a_dash() -> None:
    # `Uuid.random` redraws on the first byte's top 6 bits; they are the text's first letter.
    for first in range(256):
        assert str(Uuid(bytes([first]) + bytes(15))).startswith("-") == (first >> 2 == 62)
    assert not any(str(Uuid.random()).startswith("-") for _ in range(2000))


@given(st.binary(min_size=16, max_size=16))
def test_uuid_text_form_round_trips(raw: bytes) -> None:
    u = Uuid(raw)
    text = str(u)
    assert UUID_TEXT.fullmatch(text)
    assert Uuid.parse(text) == u
    assert Uuid.parse(f"  {text}\n") == u
    assert Uuid.parse(str(uuid.UUID(bytes=raw))) == u
    assert Uuid.parse(str(uuid.UUID(bytes=raw)).upper()) == u


@given(st.uuids())
def test_an_id_made_of_a_uuids_bytes_is_the_checked_one(value: uuid.UUID) -> None:
    made = Uuid.of_16_bytes(value.bytes)
    checked = Uuid(value.bytes)
    assert made == checked
    assert hash(made) == hash(checked)
    assert str(made) == str(checked)
    assert {made: 1}[checked] == 1
    assert type(made) is Uuid


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "abc",
        "A" * 21,
        "A" * 23,
        "AAAAAAAAAAAAAAAAAAAA!!",
        "AAAAAAAAAAAAAAAAAAAA==",
        "AAAAAAAAAAAAAAAAAAAAAR",  # non-zero padding bits: not the text of any id
        "z" * 36,
        "00000000-0000-0000-0000-00000000000g",
        "00000000000000000000000000000000",
    ],
)
def test_uuid_parse_rejects_garbage(garbage: str) -> None:
    with pytest.raises(ValueError, match="not a topic id"):
        Uuid.parse(garbage)


def test_uuid_random() -> None:
    seen = set()
    for _ in range(2000):
        u = Uuid.random()
        assert u not in (Uuid.ZERO, Uuid.METADATA_TOPIC_ID)
        assert not str(u).startswith("-")
        assert u.bytes[6] >> 4 == 4
        assert u.bytes[8] >> 6 == 0b10
        assert uuid.UUID(bytes=u.bytes).version == 4
        seen.add(u)
    assert len(seen) == 2000


def test_uuid_constants_and_size() -> None:
    assert str(Uuid.METADATA_TOPIC_ID) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert str(Uuid.ZERO) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert repr(Uuid.METADATA_TOPIC_ID) == "Uuid('AAAAAAAAAAAAAAAAAAAAAQ')"
    with pytest.raises(ValueError, match="16 bytes"):
        Uuid(b"short")
    with pytest.raises(ValueError, match="16 bytes"):
        Uuid(bytes(17))


# ----------------------------------------------------------------------------- varint


@given(int64s, st.binary(max_size=4), st.binary(max_size=4))
def test_varint_round_trip(value: int, before: bytes, after: bytes) -> None:
    encoded = encode_long(value)
    assert 1 <= len(encoded) <= 10
    assert read_long(before + encoded + after, len(before)) == (
        value,
        len(before) + len(encoded),
    )
    assert read_long(memoryview(encoded), 0) == (value, len(encoded))


@given(int64s)
def test_varint_matches_fastavro(value: int) -> None:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema("long"), value)
    assert encode_long(value) == out.getvalue()


def test_varint_damage() -> None:
    with pytest.raises(IndexError):
        read_long(encode_long(2**40)[:-1], 0)
    with pytest.raises(ValueError, match="10 bytes"):
        read_long(b"\x80" * 10 + b"\x01", 0)


def test_partition_modes_are_named_by_lookup_as_the_enum_names_them() -> None:
    for mode in Mode:
        assert mode_name(mode) == mode_name(int(mode)) == mode.name
    with pytest.raises(ValueError):
        mode_name(99)
