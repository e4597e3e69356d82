"""`check_entry_schema`: a segment header's schema must be an entry schema that decodes in bounds.

The sweeps of `test_integrity.py` flip every bit of a header's schema text; these check each
refusal and its words directly, on schemas built to break one rule at a time.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from metadata_log.container import BlockDamage
from metadata_log.schema_check import check_entry_schema
from records.codec import DEFAULT_CODEC

ENTRY: dict[str, Any] = json.loads(DEFAULT_CODEC.entry_schema_json)


def entry(*branches: Any) -> dict[str, Any]:
    """The entry schema with the record union replaced by `branches`."""
    schema = copy.deepcopy(ENTRY)
    schema["fields"][4]["type"] = list(branches)
    return schema


def branch(name: str, *types: Any) -> dict[str, Any]:
    """A record branch with one field of each of `types`."""
    fields = [{"name": f"f{i}", "type": t} for i, t in enumerate(types)]
    return {"type": "record", "name": name, "fields": fields}


def refused(schema: Any) -> str:
    text = schema if isinstance(schema, str) else json.dumps(schema)
    with pytest.raises(BlockDamage) as info:
        check_entry_schema(text)
    return str(info.value)


def check(schema: Any) -> None:
    check_entry_schema(json.dumps(schema))


def test_the_schema_this_code_writes_passes() -> None:
    check_entry_schema(DEFAULT_CODEC.entry_schema_json)
    full = copy.deepcopy(ENTRY)
    del full["namespace"]
    full["name"] = "mlog.LogEntry"  # a full name needs no namespace
    check(full)


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("{", "the header's schema is not JSON"),
        ("[" * 100_000 + "]" * 100_000, "the header's schema is not JSON"),
        ([ENTRY], "the header's schema is not a record"),
        ({**ENTRY, "type": "enum"}, "the header's schema is not a record"),
        ({**ENTRY, "name": "Other"}, "the header's schema is 'Other', not mlog.LogEntry"),
        ({**ENTRY, "name": ""}, "the header's schema is '', not mlog.LogEntry"),
        ({**ENTRY, "name": 7}, "the header's schema is 7, not mlog.LogEntry"),
        ({**ENTRY, "namespace": 7}, "the header's schema is 'LogEntry', not mlog.LogEntry"),
        ({**ENTRY, "namespace": ""}, "the header's schema is 'LogEntry', not mlog.LogEntry"),
        ({**ENTRY, "fields": {}}, "the header's entry schema does not have the five entry fields"),
        (
            {**ENTRY, "fields": ENTRY["fields"][:4]},
            "the header's entry schema does not have the five entry fields",
        ),
        (
            {**ENTRY, "fields": [*ENTRY["fields"], ENTRY["fields"][0]]},
            "the header's entry schema does not have the five entry fields",
        ),
    ],
)
def test_the_entry_itself(schema: Any, message: str) -> None:
    assert refused(schema) == message


@pytest.mark.parametrize("index", range(4))
@pytest.mark.parametrize("how", ["not a dict", "name", "type"])
def test_each_entry_field_keeps_its_name_and_type(index: int, how: str) -> None:
    schema = copy.deepcopy(ENTRY)
    field = schema["fields"][index]
    name, avro_type = field["name"], field["type"]
    if how == "not a dict":
        schema["fields"][index] = [field]
    elif how == "name":
        field["name"] = name + "x"
    else:
        field["type"] = "string" if avro_type != "string" else "long"
    assert refused(schema) == f"the header's entry schema has no {name} field of type {avro_type}"


def test_the_record_union() -> None:
    schema = copy.deepcopy(ENTRY)
    schema["fields"][4]["name"] = "records"
    assert refused(schema) == "the header's entry schema has no record field"
    schema["fields"][4] = ["record"]
    assert refused(schema) == "the header's entry schema has no record field"
    assert refused(entry()) == "the header's record field is not a union of records"
    not_a_union = copy.deepcopy(ENTRY)
    not_a_union["fields"][4]["type"] = ENTRY["fields"][4]["type"][0]
    assert refused(not_a_union) == "the header's record field is not a union of records"
    assert refused(entry(branch("A", "long"), "long")) == (
        "a branch of the header's record union is not a record"
    )
    assert refused(entry(branch("A", "long"), {"type": "enum", "name": "E", "symbols": []})) == (
        "a branch of the header's record union is not a record"
    )


@pytest.mark.parametrize(
    "items",
    [
        "null",
        {"type": "record", "name": "Empty", "fields": []},
        {"type": "record", "name": "Nulls", "fields": [{"name": "a", "type": "null"}] * 2},
        {"type": "fixed", "name": "F0", "size": 0},
        {"type": "null"},
        {"type": {"type": "null"}},
    ],
)
@pytest.mark.parametrize("kind", ["array", "map"])
def test_a_collection_of_values_that_take_no_bytes_is_refused(kind: str, items: Any) -> None:
    key = "items" if kind == "array" else "values"
    message = refused(entry(branch("A", {"type": kind, key: items})))
    assert message == f"the header's schema has an {kind} of values that take no bytes"


@pytest.mark.parametrize(
    "items",
    [
        "boolean",
        "int",
        "long",
        "float",
        "double",
        "bytes",
        "string",
        ["null", "long"],
        {"type": "enum", "name": "E", "symbols": ["A"]},
        {"type": "fixed", "name": "F1", "size": 1},
        {"type": "record", "name": "R", "fields": [{"name": "a", "type": "null"},
                                                   {"name": "b", "type": "float"}]},
        {"type": "error", "name": "X", "fields": [{"name": "a", "type": "long"}]},
        {"type": {"type": "array", "items": "long"}},
    ],
)  # fmt: skip
def test_a_collection_of_values_that_take_bytes_passes(items: Any) -> None:
    check(entry(branch("A", {"type": "array", "items": items})))
    check(entry(branch("A", {"type": "map", "values": items})))


def test_named_types_are_defined_once_before_use_and_never_contain_themselves() -> None:
    enum = {"type": "enum", "name": "E", "symbols": ["A"]}
    fixed = {"type": "fixed", "name": "F", "size": 2}
    # Defined in one branch, used by name (short or full) in the next.
    check(entry(branch("A", enum, fixed), branch("B", "E", "mlog.F", "mlog.A")))
    assert refused(entry(branch("A", "E"))) == "the header's schema uses 'E' before defining it"
    assert refused(entry(branch("A", enum), branch("B", enum))) == (
        "the header's schema defines mlog.E twice"
    )
    assert refused(entry(branch("A", enum, {**fixed, "name": "E"}))) == (
        "the header's schema defines mlog.E twice"
    )
    assert refused(entry(branch("A", "long"), branch("A", "long"))) == (
        "the header's schema defines mlog.A twice"
    )
    assert refused(entry(branch("A", {"type": "enum", "name": "A", "symbols": []}))) == (
        "the header's schema defines mlog.A twice"
    )
    assert refused(entry(branch("A", ["null", "A"]))) == (
        "the header's schema type mlog.A contains itself"
    )
    assert refused(entry(branch("A", ["null", "mlog.A"]))) == (
        "the header's schema type mlog.A contains itself"
    )
    assert refused(entry(branch("A", {"type": "enum", "symbols": []}))) == (
        "the header's schema has a named type without a valid name"
    )


def test_records_need_a_name_and_named_fields() -> None:
    assert refused(entry({"type": "record", "fields": []})) == (
        "the header's schema has a record without a valid name"
    )
    assert refused(entry({"type": "record", "name": "A"})) == (
        "the header's record mlog.A has no field list"
    )
    assert refused(entry({"type": "record", "name": "A", "fields": [{"type": "long"}]})) == (
        "the header's record mlog.A has a field without a name"
    )
    assert refused(entry({"type": "record", "name": "A", "fields": ["long"]})) == (
        "the header's record mlog.A has a field without a name"
    )
    # A record in another namespace names its own types in it.
    check(entry(branch("A", {"type": "record", "name": "x.B", "fields": [
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
        {"name": "f", "type": "x.E"},
    ]})))  # fmt: skip


BAD_FIXED = "the header's schema has a fixed type without a valid size"


@pytest.mark.parametrize(
    ("field_type", "message"),
    [
        ([], "the header's schema has an empty union"),
        (5, "the header's schema has a type that is int"),
        (None, "the header's schema has a type that is NoneType"),
        ({"type": None}, "the header's schema has a type None"),
        ({"type": 3}, "the header's schema has a type 3"),
        ({"type": "fixed", "name": "F", "size": -1}, BAD_FIXED),
        ({"type": "fixed", "name": "F", "size": "2"}, BAD_FIXED),
    ],
)  # fmt: skip
def test_impossible_types_are_refused(field_type: Any, message: str) -> None:
    assert refused(entry(branch("A", field_type))) == message


def _nested(depth: int) -> Any:
    schema: Any = "long"
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


def test_nesting_is_bounded_at_64_levels() -> None:
    # The entry is level 0, its record field's union 1, a branch 2, the branch's field 3: an
    # array chain of 61 puts its `long` at level 64, the deepest allowed.
    check(entry(branch("A", _nested(61))))
    assert refused(entry(branch("A", _nested(62)))) == "the header's schema nests too deeply"


def _wrapped(depth: int) -> Any:
    schema: Any = "long"
    for _ in range(depth):
        schema = {"type": schema}
    return schema


def test_a_type_wrapped_in_type_objects_counts_each_level() -> None:
    # {"type": {"type": "long"}} is a long; each wrapping is one more level of nesting.
    check(entry(branch("A", _wrapped(61), {"type": "array", "items": _wrapped(3)})))
    assert refused(entry(branch("A", _wrapped(62)))) == "the header's schema nests too deeply"
