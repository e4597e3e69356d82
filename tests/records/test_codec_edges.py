"""The codec at its edges: Avro int/long bounds, decode errors, schema registration, RecordBlock.

Each test pins behaviour a reader of the log depends on (a value one past an Avro bound must
not be written, since other Avro readers refuse it; a damaged value decodes to a clear error).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator

import pytest

from records.avro_array import AvroArray
from records.codec import DEFAULT_CODEC, RecordBlock, RecordCodec
from records.errors import RecordError, UnknownRecordTypeError
from records.model import (
    BrokerEndpoint,
    BrokerFeature,
    FeatureLevelRecord,
    Mode,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    TopicRecord,
    UnregisterBrokerRecord,
)
from records.schemas import (
    CURRENT_SCHEMAS,
    ENDPOINT_TYPE,
    FEATURE_TYPE,
    INTS_CODEC,
    NAMED_TYPES,
    UUID_CODEC,
    RecordSchema,
)
from records.uuids import Uuid

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
TOPIC_ID = Uuid.random()


def _round_trip(record: Record) -> Record:
    count, body = DEFAULT_CODEC.encode_entries([(0, 0, 0, None, record)])
    array = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    (entry,) = DEFAULT_CODEC.decode_entries(count, body, array)
    return entry.record


def _int_records(value: int) -> list[Record]:
    """A record for each kind of Avro int field: plain, optional, array, optional array."""
    return [
        FeatureLevelRecord(name="f", feature_level=value),
        PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, leader_epoch=value),
        PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(0, value), isr=(0,)),
        PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(value, 0), isr=(0,)),
        PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=(value, 0)),
        PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=(0, value)),
    ]


@pytest.mark.parametrize("value", [INT32_MIN, INT32_MAX])
def test_int_fields_hold_every_32_bit_value(value: int) -> None:
    for record in _int_records(value):
        assert _round_trip(record) == record


@pytest.mark.parametrize("value", [INT32_MIN - 1, INT32_MAX + 1])
def test_int_fields_refuse_a_value_one_past_32_bits(value: int) -> None:
    for record in _int_records(value):
        with pytest.raises(RecordError, match=r"outside the Avro int range \[-2147483648, 21"):
            DEFAULT_CODEC.encode_entries([(0, 0, 0, None, record)])
        with pytest.raises(RecordError, match="outside the Avro int range"):
            DEFAULT_CODEC.encode_record(record)


@pytest.mark.parametrize("value", [INT64_MIN, INT64_MAX])
def test_long_fields_hold_every_64_bit_value(value: int) -> None:
    record = UnregisterBrokerRecord(broker_id=1, broker_epoch=value)
    assert _round_trip(record) == record


@pytest.mark.parametrize("value", [INT64_MIN - 1, INT64_MAX + 1])
def test_long_fields_refuse_a_value_one_past_64_bits(value: int) -> None:
    record = UnregisterBrokerRecord(broker_id=1, broker_epoch=value)
    with pytest.raises(RecordError, match=r"broker_epoch=.* outside the Avro long range \[-92"):
        DEFAULT_CODEC.encode_entries([(0, 0, 0, None, record)])


def test_optional_fields_left_null_round_trip() -> None:
    record = PartitionChangeRecord(partition_id=3, topic_id=TOPIC_ID)
    assert _round_trip(record) == record
    branch, value = DEFAULT_CODEC.encode_record(record)
    assert branch == "mlog.PartitionChangeRecordV0"
    assert value["isr"] is None and value["leader_epoch"] is None and value["mode"] is None


def test_an_empty_int_array_is_written() -> None:
    record = PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(), isr=())
    assert _round_trip(record) == record


def test_encode_record_wraps_a_wrong_attribute_type() -> None:
    record = TopicRecord(name="t", topic_id="not a uuid")  # type: ignore[arg-type]
    with pytest.raises(RecordError, match="record does not fit its schema"):
        DEFAULT_CODEC.encode_record(record)


def test_decode_record_names_the_branch_of_a_value_that_does_not_fit() -> None:
    branch, value = DEFAULT_CODEC.encode_record(TopicRecord(name="t", topic_id=TOPIC_ID))
    assert DEFAULT_CODEC.decode_record(branch, value) == TopicRecord(name="t", topic_id=TOPIC_ID)
    del value["topic_id"]
    with pytest.raises(RecordError, match=r"cannot decode mlog\.TopicRecordV0"):
        DEFAULT_CODEC.decode_record(branch, value)


def test_encode_batches_numbers_records_densely_with_one_epoch_and_time() -> None:
    a = TopicRecord(name="a", topic_id=TOPIC_ID)
    b = FeatureLevelRecord(name="f", feature_level=1)
    c = UnregisterBrokerRecord(broker_id=1, broker_epoch=2)
    count, body = DEFAULT_CODEC.encode_batches(
        [([a, b], "User:alice"), ([], None), ([c], None)], first_offset=10, epoch=4, timestamp=99
    )
    assert count == 3
    array = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    entries = DEFAULT_CODEC.decode_entries(count, body, array)
    assert [(e.offset, e.epoch, e.timestamp, e.principal, e.record) for e in entries] == [
        (10, 4, 99, "User:alice", a),
        (11, 4, 99, "User:alice", b),
        (12, 4, 99, None, c),
    ]
    assert DEFAULT_CODEC.encode_batches([], first_offset=0, epoch=0, timestamp=0) == (0, b"")


def test_encode_batches_refuses_what_encode_entries_refuses() -> None:
    bad = FeatureLevelRecord(name="f", feature_level=INT32_MAX + 1)
    with pytest.raises(RecordError, match="outside the Avro int range"):
        DEFAULT_CODEC.encode_batches([([bad], None)], first_offset=0, epoch=0, timestamp=0)
    text_id = TopicRecord(name="t", topic_id="not a uuid")  # type: ignore[arg-type]
    with pytest.raises(RecordError, match="record does not fit its schema"):
        DEFAULT_CODEC.encode_batches([([text_id], None)], first_offset=0, epoch=0, timestamp=0)

    @dataclasses.dataclass(frozen=True)
    class Stranger(Record):
        pass

    with pytest.raises(RecordError, match="Stranger"):
        DEFAULT_CODEC.encode_batches([([Stranger()], None)], first_offset=0, epoch=0, timestamp=0)


def _block_of(n: int) -> RecordBlock:
    records = [FeatureLevelRecord(name=f"f{i}", feature_level=i) for i in range(n)]
    count, body = DEFAULT_CODEC.encode_batches(
        [(records, "User:bob")], first_offset=5, epoch=2, timestamp=1000
    )
    array = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    return DEFAULT_CODEC.decode_block(count, body, array)


def test_record_block_knows_its_last_entry_and_trims_to_a_range() -> None:
    block = _block_of(4)
    assert block.first_offset == 5
    assert block.offsets == [5, 6, 7, 8]
    assert block.last_offset == 8
    assert block.last_epoch == 2
    assert block.last_timestamp == 1000
    assert block.principals == ["User:bob"] * 4
    assert block.trimmed(0, 100) is block
    assert block.trimmed(5, 8) is block
    middle = block.trimmed(6, 7)
    assert (middle.first_offset, middle.offsets, middle.last_offset) == (6, [6, 7], 7)
    assert [r.feature_level for r in middle.records] == [1, 2]  # type: ignore[attr-defined]
    assert middle.epochs == [2, 2] and middle.timestamps == [1000, 1000]
    assert middle.principals == ["User:bob", "User:bob"]
    head = block.trimmed(0, 5)
    assert (head.first_offset, head.offsets) == (5, [5])
    tail = block.trimmed(8, 8)
    assert (tail.first_offset, tail.offsets, tail.last_offset) == (8, [8], 8)


def test_record_block_last_entry_is_the_last_written() -> None:
    block = RecordBlock(
        first_offset=0,
        records=[FeatureLevelRecord(name="a", feature_level=1)] * 2,
        offsets=[0, 1],
        epochs=[1, 7],
        timestamps=[10, 70],
        principals=[None, None],
    )
    assert (block.last_offset, block.last_epoch, block.last_timestamp) == (1, 7, 70)


def test_decode_block_through_fastavro_matches_the_compiled_decoder() -> None:
    records = [FeatureLevelRecord(name=f"f{i}", feature_level=i) for i in range(3)]
    count, body = DEFAULT_CODEC.encode_batches(
        [(records, None)], first_offset=7, epoch=1, timestamp=5
    )
    # A codec whose writer schema has no compiled decoder reads through fastavro.
    slow = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    saved = slow.fast
    try:
        slow.fast = None
        block = DEFAULT_CODEC.decode_block(count, body, slow)
        entries = DEFAULT_CODEC.decode_entries(count, body, slow)
        with pytest.raises(RecordError, match="a block holds no entries"):
            DEFAULT_CODEC.decode_block(0, b"", slow)
    finally:
        slow.fast = saved
    assert block.records == records
    assert (block.first_offset, block.offsets, block.epochs) == (7, [7, 8, 9], [1, 1, 1])
    assert block.timestamps == [5, 5, 5] and block.principals == [None, None, None]
    assert [e.record for e in entries] == records
    fast = DEFAULT_CODEC.decode_block(count, body, slow)
    assert fast.records == block.records and fast.offsets == block.offsets


def _schema(name: str) -> RecordSchema:
    return next(s for s in CURRENT_SCHEMAS if s.name == name)


def test_a_record_type_declared_twice_is_refused() -> None:
    topic = _schema("TopicRecord")
    with pytest.raises(ValueError, match="declared twice"):
        RecordCodec([*CURRENT_SCHEMAS, topic])


def test_a_schema_must_match_its_class() -> None:
    topic = _schema("TopicRecord")
    for bad in (
        dataclasses.replace(topic, python_class=None),
        dataclasses.replace(topic, record_type=topic.record_type + 100),
        dataclasses.replace(topic, version=topic.version + 1),
    ):
        with pytest.raises(ValueError, match="does not match its class"):
            RecordCodec([s for s in CURRENT_SCHEMAS if s.name != "TopicRecord"] + [bad])


def test_history_of_an_unknown_record_type_is_refused() -> None:
    topic = _schema("TopicRecord")
    with pytest.raises(ValueError, match="is not older"):
        RecordCodec([s for s in CURRENT_SCHEMAS if s.name != "TopicRecord"], history=[topic])


def test_the_codec_reads_segments_with_its_compiled_decoder() -> None:
    assert DEFAULT_CODEC.decoder_name == "compiled"
    same = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    assert DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json) is same
    other = json.loads(DEFAULT_CODEC.entry_schema_json)
    other["doc"] = "the same schema, written with another doc"
    array = DEFAULT_CODEC.reader_array_schema(json.dumps(other))
    assert array is not same
    assert DEFAULT_CODEC.reader_array_schema(json.dumps(other)) is array


def test_an_enum_value_outside_its_enum_names_the_choices() -> None:
    record = PartitionRecord(
        partition_id=0,
        topic_id=TOPIC_ID,
        replicas=(1,),
        isr=(1,),
        mode=5,  # type: ignore[arg-type]
    )
    with pytest.raises(RecordError, match=r"mode=5 is not a valid Mode: one of READ_WRITE \(0\)"):
        DEFAULT_CODEC.encode_entries([(0, 0, 0, None, record)])


def _fastavro_array() -> Iterator[AvroArray]:
    """The writer's array with its compiled decoder set aside: the fastavro path."""
    array = DEFAULT_CODEC.reader_array_schema(DEFAULT_CODEC.entry_schema_json)
    saved = array.fast
    array.fast = None
    try:
        yield array
    finally:
        array.fast = saved


fastavro_array = pytest.fixture(_fastavro_array)


def test_the_fastavro_path_refuses_a_count_that_does_not_match_the_body(
    fastavro_array: AvroArray,
) -> None:
    records = [FeatureLevelRecord(name=f"f{i}", feature_level=i) for i in range(3)]
    count, body = DEFAULT_CODEC.encode_batches(
        [(records, None)], first_offset=0, epoch=0, timestamp=0
    )
    assert [e.record for e in DEFAULT_CODEC.decode_entries(count, body, fastavro_array)] == records
    for wrong in (0, 1, 2, 4):
        with pytest.raises(RecordError):
            DEFAULT_CODEC.decode_entries(wrong, body, fastavro_array)
        with pytest.raises(RecordError):
            DEFAULT_CODEC.decode_block(wrong, body, fastavro_array)
    with pytest.raises(RecordError):
        DEFAULT_CODEC.decode_entries(1, b"", fastavro_array)
    with pytest.raises(RecordError, match="does not decode"):
        DEFAULT_CODEC.decode_entries(count, body[:-1], fastavro_array)
    assert DEFAULT_CODEC.decode_entries(0, b"", fastavro_array) == []


def test_the_fastavro_path_refuses_bytes_after_the_last_entry(fastavro_array: AvroArray) -> None:
    record = FeatureLevelRecord(name="f", feature_level=1)
    count, body = DEFAULT_CODEC.encode_entries([(0, 0, 0, None, record)])
    # A second entry's bytes: fastavro reads them as the next block of the array, so the count
    # of values gives it away; a zero byte ends the array early, so the position does.
    _, other = DEFAULT_CODEC.encode_entries([(1, 0, 0, None, record)])
    with pytest.raises(RecordError, match="does not match its entry count"):
        DEFAULT_CODEC.decode_entries(count, body + b"\x02" + other, fastavro_array)
    with pytest.raises(RecordError, match="does not match its entry count"):
        DEFAULT_CODEC.decode_entries(count, body + b"\x00", fastavro_array)


def test_the_fastavro_path_names_an_unknown_branch_and_a_value_that_does_not_decode(
    fastavro_array: AvroArray,
) -> None:
    record = TopicRecord(name="t", topic_id=TOPIC_ID)
    count, body = DEFAULT_CODEC.encode_entries([(0, 0, 0, None, record)])
    saved = dict(DEFAULT_CODEC._decoders)
    try:
        del DEFAULT_CODEC._decoders["mlog.TopicRecordV0"]
        with pytest.raises(UnknownRecordTypeError):
            DEFAULT_CODEC.decode_entries(count, body, fastavro_array)

        def broken(value: dict[str, object]) -> Record:
            raise KeyError("topic_id")

        DEFAULT_CODEC._decoders["mlog.TopicRecordV0"] = broken
        with pytest.raises(RecordError, match=r"cannot decode mlog\.TopicRecordV0: KeyError"):
            DEFAULT_CODEC.decode_block(count, body, fastavro_array)
    finally:
        DEFAULT_CODEC._decoders.clear()
        DEFAULT_CODEC._decoders.update(saved)


def test_enum_fields_decode_to_their_enum_members() -> None:
    """`mode` reads back as `Mode.READ_ONLY`, not the int 1 (names in dumps and JSON need it)."""
    record = PartitionRecord(
        partition_id=0, topic_id=TOPIC_ID, replicas=(1,), isr=(1,), mode=Mode.READ_ONLY
    )
    change = PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, mode=Mode.NONE)
    decoded = _round_trip(record)
    assert type(decoded.mode) is Mode and decoded.mode is Mode.READ_ONLY  # type: ignore[attr-defined]
    assert _round_trip(change).mode is Mode.NONE  # type: ignore[attr-defined]
    branch, value = DEFAULT_CODEC.encode_record(record)
    assert value["mode"] == 1
    assert DEFAULT_CODEC.decode_record(branch, value).mode is Mode.READ_ONLY  # type: ignore[attr-defined]


def test_named_types_default_as_their_classes_do() -> None:
    """A reader of an endpoint written without `security_protocol` gets the class's default."""
    for named, cls in ((ENDPOINT_TYPE, BrokerEndpoint), (FEATURE_TYPE, BrokerFeature)):
        for field in NAMED_TYPES[named]["fields"]:
            default = cls.__dataclass_fields__[field["name"]].default
            if "default" in field:
                assert field["default"] == default, (named, field["name"])
            else:
                assert default is dataclasses.MISSING, (named, field["name"])


def test_codec_conversions_as_functions() -> None:
    assert UUID_CODEC.to_avro_function()(TOPIC_ID) == TOPIC_ID.bytes
    assert INTS_CODEC.to_avro_function()((1, 2)) == (1, 2)
