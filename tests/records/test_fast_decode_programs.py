"""The compiled decoder's programs: Avro schemas compiled, named types resolved, branches chosen."""

from __future__ import annotations

import logging

import pytest

from records import fast_decode
from records.codec import DEFAULT_CODEC
from records.fast_decode import _is_current, _Programs, column_plan, fast_decoder
from records.schemas import CURRENT_SCHEMAS


def test_this_build_has_the_compiled_decoder() -> None:
    assert fast_decode.AVAILABLE is True


def test_primitives_containers_and_named_types_compile() -> None:
    programs = _Programs()
    assert programs.compile("int") == ("int",)
    assert programs.compile({"type": "string"}) == ("string",)
    assert programs.compile({"type": "array", "items": "long"}) == ("array", ("long",))
    assert programs.compile({"type": "map", "values": "bytes"}) == ("map", ("bytes",))
    fixed = programs.compile({"type": "fixed", "name": "Id", "namespace": "ns", "size": 16})
    assert fixed == ("fixed", 16)
    assert programs.compile("ns.Id") == fixed
    assert programs.compile("Id", "ns") == fixed  # a short name in its namespace
    colour = programs.compile({"type": "enum", "name": "a.b.Colour", "symbols": ["RED", "BLUE"]})
    assert colour == ("enum", ("RED", "BLUE"))
    assert programs.named["a.b.Colour"] == colour
    record = {
        "type": "record",
        "name": "R",
        "namespace": "ns",
        "fields": [{"name": "x", "type": "int"}, {"name": "id", "type": "Id"}],
    }
    assert programs.compile(record) == ("record", ("x", "id"), (("int",), fixed))
    union = programs.compile(["null", "ns.R", {"type": "record", "name": "S", "fields": []}], "ns")
    assert union[0] == "union"
    assert union[2] == (None, "ns.R", "ns.S")
    assert programs.compile(["ns.Id", "R"], "ns")[2] == (None, "ns.R")


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("Nope", "unknown named type 'Nope'"),
        (5, "not an Avro schema: 5"),
        ({"type": "weird", "name": "W"}, "unknown Avro type 'weird'"),
    ],
)
def test_what_is_not_a_schema_is_refused(schema: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _Programs().compile(schema)


def test_a_branch_is_current_only_with_todays_fields_in_todays_order() -> None:
    current = {s.branch_name: s for s in CURRENT_SCHEMAS}
    topic = current["mlog.TopicRecordV0"]
    names = tuple(f.name for f in topic.fields)
    assert _is_current(current, "mlog.TopicRecordV0", names) is True
    assert _is_current(current, "mlog.TopicRecordV0", names[::-1]) is False
    assert _is_current(current, "mlog.TopicRecordV0", names[:-1]) is False
    assert _is_current(current, "mlog.NoSuchRecordV0", names) is False


def test_a_malformed_writer_schema_gets_no_compiled_decoder(
    caplog: pytest.LogCaptureFixture,
) -> None:
    schema = {
        "type": "record",
        "name": "Entry",
        "fields": [
            {"name": "offset", "type": "long"},
            {"name": "epoch", "type": "int"},
            {"name": "timestamp", "type": "long"},
            {"name": "principal", "type": ["null", "string"]},
            {"name": "record", "type": ["mlog.Missing"]},
        ],
    }
    with caplog.at_level(logging.DEBUG, logger="records.fast_decode"):
        assert fast_decoder(schema, {}, {}, {}) is None
    assert "no compiled decoder for this writer schema: unknown named type" in caplog.text
    assert DEFAULT_CODEC.decoder_name == "compiled"


def test_a_dotted_name_sets_the_namespace_of_what_it_holds() -> None:
    programs = _Programs()
    programs.compile({"type": "fixed", "name": "a.b.Id", "size": 4})
    record = {"type": "record", "name": "a.b.R", "fields": [{"name": "id", "type": "Id"}]}
    assert programs.compile(record) == ("record", ("id",), (("fixed", 4),))


def test_no_columnar_plan_for_a_schema_of_another_shape(caplog: pytest.LogCaptureFixture) -> None:
    def plan(schema: object) -> object:
        return column_plan(
            schema,
            {},
            {},
            {},
            kinds=[],
            types=[],
            payload=False,
            structs_json=str,
            json_dumps=str,
        )

    other = {"type": "record", "name": "E", "fields": [{"name": "offset", "type": "long"}]}
    assert plan(other) is None
    with caplog.at_level(logging.DEBUG, logger="records.fast_decode"):
        assert plan({"type": "record", "name": "E"}) is None
    assert "no columnar decoder for this writer schema" in caplog.text
