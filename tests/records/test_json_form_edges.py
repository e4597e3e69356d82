"""The JSON form `mlog log append` reads, at its edges: every kind of field, refused clearly."""

from __future__ import annotations

from typing import Any

import pytest

from records.errors import RecordError
from records.json_form import json_type_name, record_from_json, record_to_json
from records.model import (
    BrokerEndpoint,
    BrokerFeature,
    FeatureLevelRecord,
    Mode,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    ScramMechanism,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from records.uuids import Uuid

TOPIC_ID = Uuid.random()


def _broker() -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=1,
        incarnation_id=Uuid.random(),
        broker_epoch=0,
        end_points=(BrokerEndpoint(name="PLAINTEXT", host="h", port=9092, security_protocol=1),),
        features=(BrokerFeature(name="f", min_supported_version=0, max_supported_version=3),),
        rack="r1",
        fenced=False,
    )


def _scram() -> UserScramCredentialRecord:
    return UserScramCredentialRecord(
        name="alice",
        mechanism=ScramMechanism.SCRAM_SHA_256,
        salt=b"\x00\xffsalt",
        stored_key=b"k" * 32,
        server_key=b"\x01" * 32,
        iterations=4096,
    )


def _partition() -> PartitionRecord:
    return PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1,), isr=(1,))


def _refused(obj: dict[str, Any], *words: str) -> str:
    with pytest.raises(RecordError) as info:
        record_from_json(obj)
    message = str(info.value)
    for word in words:
        assert word in message, message
    return message


def test_json_type_names_are_kafkas() -> None:
    assert json_type_name("TopicRecord") == "TOPIC_RECORD"
    assert json_type_name("UserScramCredentialRecord") == "USER_SCRAM_CREDENTIAL_RECORD"
    assert json_type_name("X") == "X"


def test_structs_round_trip_as_objects() -> None:
    record = _broker()
    obj = record_to_json(record)
    assert obj["data"]["end_points"] == [
        {"name": "PLAINTEXT", "host": "h", "port": 9092, "security_protocol": 1}
    ]
    assert obj["data"]["features"] == [
        {"name": "f", "min_supported_version": 0, "max_supported_version": 3}
    ]
    assert obj["data"]["fenced"] is False and obj["data"]["rack"] == "r1"
    assert record_from_json(obj) == record


def test_a_struct_field_left_out_takes_its_default() -> None:
    obj = record_to_json(_broker())
    del obj["data"]["end_points"][0]["security_protocol"]
    record = record_from_json(obj)
    assert isinstance(record, RegisterBrokerRecord)
    assert record.end_points[0].security_protocol == 0


def test_structs_refuse_what_is_not_an_object_or_misses_a_field() -> None:
    obj = record_to_json(_broker())
    obj["data"]["end_points"] = ["PLAINTEXT://h:9092"]
    _refused(obj, "end_points[0]", "expected an object")
    obj = record_to_json(_broker())
    del obj["data"]["features"][0]["name"]
    _refused(obj, "features[0]", "name")
    obj = record_to_json(_broker())
    obj["data"]["end_points"][0]["port"] = "9092"
    _refused(obj, "end_points[0].port", "expected an int in [-2147483648, 2147483647]")


def test_lists_refuse_what_is_not_a_list_and_name_the_bad_item() -> None:
    obj = record_to_json(_partition())
    obj["data"]["replicas"] = 1
    _refused(obj, "replicas", "expected a list")
    obj["data"]["replicas"] = [1, "2"]
    _refused(obj, "replicas[1]")
    obj["data"]["replicas"] = [1, 2]
    record = record_from_json(obj)
    assert isinstance(record, PartitionRecord) and record.replicas == (1, 2)


def test_optional_fields_take_null() -> None:
    obj = record_to_json(PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=(1,)))
    assert obj["data"]["leader_epoch"] is None
    obj["data"]["leader_epoch"] = 4
    obj["data"]["isr"] = None
    record = record_from_json(obj)
    assert isinstance(record, PartitionChangeRecord)
    assert (record.isr, record.leader_epoch, record.mode) == (None, 4, None)
    obj["data"]["leader_epoch"] = "4"
    _refused(obj, "leader_epoch")


@pytest.mark.parametrize(
    ("field", "value"),
    [("feature_level", -(2**31)), ("feature_level", 2**31 - 1)],
)
def test_int_bounds_are_accepted(field: str, value: int) -> None:
    obj = record_to_json(FeatureLevelRecord(name="f", feature_level=1))
    obj["data"][field] = value
    record = record_from_json(obj)
    assert isinstance(record, FeatureLevelRecord) and record.feature_level == value


@pytest.mark.parametrize("value", [-(2**63), 2**63 - 1])
def test_long_bounds_are_accepted(value: int) -> None:
    obj = record_to_json(UnregisterBrokerRecord(broker_id=1, broker_epoch=1))
    obj["data"]["broker_epoch"] = value
    record = record_from_json(obj)
    assert isinstance(record, UnregisterBrokerRecord) and record.broker_epoch == value
    obj["data"]["broker_epoch"] = value + (1 if value > 0 else -1)
    _refused(obj, "broker_epoch", "expected a long in [-9223372036854775808, 9223372036854775807]")


def test_ids_must_be_id_strings() -> None:
    obj = record_to_json(TopicRecord(name="t", topic_id=TOPIC_ID))
    obj["data"]["topic_id"] = 5
    _refused(obj, "topic_id", "expected an id string")
    obj["data"]["topic_id"] = "nope"
    _refused(obj, "TOPIC_RECORD.topic_id: 'nope' is not a topic id")


def test_booleans_refuse_numbers() -> None:
    obj = record_to_json(_broker())
    obj["data"]["fenced"] = 1
    _refused(obj, "fenced", "expected true or false")
    obj["data"]["fenced"] = True
    record = record_from_json(obj)
    assert isinstance(record, RegisterBrokerRecord) and record.fenced is True


def test_enums_take_a_name_or_a_number_never_a_boolean() -> None:
    obj = record_to_json(_partition())
    assert obj["data"]["mode"] == "READ_WRITE"
    obj["data"]["mode"] = "NONE"
    assert record_from_json(obj).mode is Mode.NONE  # type: ignore[attr-defined]
    obj["data"]["mode"] = -1
    assert record_from_json(obj).mode is Mode.NONE  # type: ignore[attr-defined]
    obj["data"]["mode"] = 2
    _refused(obj, "mode", "2 is not one of")
    obj["data"]["mode"] = True
    _refused(obj, "mode", "READ_WRITE, READ_ONLY, NONE")
    obj["data"]["mode"] = None
    _refused(obj, "mode")


def test_bytes_are_base64() -> None:
    record = _scram()
    obj = record_to_json(record)
    assert obj["data"]["salt"] == "AP9zYWx0"
    assert obj["data"]["mechanism"] == "SCRAM_SHA_256"
    assert record_from_json(obj) == record
    for bad in ("not base64!", "AP9zYWx0!", "AP9z YWx0", "AP9", "ü"):
        obj["data"]["salt"] = bad
        _refused(obj, "salt", "is not base64")
    obj["data"]["salt"] = 5
    _refused(obj, "salt", "expected a base64 string")


def test_a_record_object_needs_a_type_data_and_the_current_version() -> None:
    obj = record_to_json(TopicRecord(name="t", topic_id=TOPIC_ID))
    del obj["version"]
    assert record_from_json(obj) == TopicRecord(name="t", topic_id=TOPIC_ID)
    obj["data"] = ["t"]
    _refused(obj, "TOPIC_RECORD: data must be an object")
    _refused({"type": "NOPE", "data": {}}, "unknown record type 'NOPE'", "TOPIC_RECORD")
    _refused({"type": "TOPIC_RECORD", "version": 0, "data": {}}, "missing field(s)", "topic_id")
    message = _refused({"type": "TOPIC_RECORD", "version": 0, "data": {}})
    assert "namespace" not in message  # it has a default
