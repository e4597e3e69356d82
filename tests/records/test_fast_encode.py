"""The compiled block encoder writes exactly the bytes fastavro writes, and refuses what it does."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from records import fast_decode
from records.codec import DEFAULT_CODEC
from records.errors import RecordError
from records.model import (
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    PartitionRecord,
    Record,
    TopicRecord,
    UnregisterBrokerRecord,
)
from records.uuids import Uuid
from tests.support.record_strategies import any_record, int32s, int64s, texts

pytestmark = pytest.mark.skipif(
    not fast_decode.AVAILABLE and not os.environ.get("CI"),
    reason="the compiled encoder is not built here (no C compiler at install)",
)

batches = st.lists(
    st.tuples(st.lists(any_record, min_size=1, max_size=4), st.none() | texts),
    max_size=4,
)


def _by_fastavro(
    batches: list[tuple[list[Record], str | None]], first: int, epoch: int, timestamp: int
) -> tuple[int, bytes]:
    """The same entries through `encode_entries`, which writes with fastavro."""
    entries = []
    offset = first
    for records, principal in batches:
        for record in records:
            entries.append((offset, epoch, timestamp, principal, record))
            offset += 1
    return DEFAULT_CODEC.encode_entries(entries)


def _outcome(encode: object) -> object:
    try:
        return encode()  # type: ignore[operator]
    except RecordError:
        return RecordError


@given(batches, st.integers(0, 2**62), int32s, int64s)
def test_every_record_encodes_as_fastavro_writes_it(
    batches: list[tuple[list[Record], str | None]], first: int, epoch: int, timestamp: int
) -> None:
    ours = _outcome(
        lambda: DEFAULT_CODEC.encode_batches(
            batches, first_offset=first, epoch=epoch, timestamp=timestamp
        )
    )
    assert ours == _outcome(lambda: _by_fastavro(batches, first, epoch, timestamp))


def test_the_append_path_uses_the_compiled_encoder() -> None:
    # A record whose body differs between the two would fail the test above; this one shows
    # that the compiled encoder is the one the log's appends run (CI builds it).
    assert DEFAULT_CODEC.encoder_name == "compiled"
    topic_id = Uuid.random()
    records = [
        TopicRecord(name="orders", topic_id=topic_id),
        PartitionRecord(partition_id=0, topic_id=topic_id, replicas=(1, 2, 3), isr=(1, 2, 3)),
    ]
    count, body = DEFAULT_CODEC.encode_batches(
        [(records, "alice")], first_offset=7, epoch=2, timestamp=1_700_000_000_000
    )
    assert (count, body) == _by_fastavro([(records, "alice")], 7, 2, 1_700_000_000_000)


@pytest.mark.parametrize(
    "record",
    [
        TopicRecord(name=5, topic_id=Uuid.random()),  # type: ignore[arg-type]
        TopicRecord(name="t", topic_id=str(Uuid.random())),  # type: ignore[arg-type]
        TopicRecord(name="\ud800", topic_id=Uuid.random()),  # not encodable as UTF-8
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="t",
            name="k",
            value=5,  # type: ignore[arg-type]
        ),
        UnregisterBrokerRecord(broker_id=1, broker_epoch=2**63),
        FeatureLevelRecord(name="metadata.version", feature_level=2**31),
        PartitionRecord(partition_id=0, topic_id=Uuid.random(), replicas=(2**31,), isr=()),
        PartitionRecord(partition_id=0, topic_id=Uuid.random(), replicas=("1",), isr=()),  # type: ignore[arg-type]
    ],
)
def test_a_value_that_does_not_fit_is_refused(record: Record) -> None:
    with pytest.raises(RecordError):
        DEFAULT_CODEC.encode_batches([([record], None)], first_offset=0, epoch=0, timestamp=0)


def test_an_object_that_is_not_a_record_is_refused() -> None:
    with pytest.raises(RecordError, match="not a known record type"):
        DEFAULT_CODEC.encode_batches(
            [([object()], None)],  # type: ignore[list-item]
            first_offset=0,
            epoch=0,
            timestamp=0,
        )


def test_an_epoch_outside_int32_is_refused() -> None:
    record = FeatureLevelRecord(name="metadata.version", feature_level=1)
    with pytest.raises(RecordError):
        DEFAULT_CODEC.encode_batches([([record], None)], first_offset=0, epoch=2**31, timestamp=0)


@given(st.lists(any_record, max_size=6))
def test_check_records_passes_what_encodes(records: list[Record]) -> None:
    # The service's check before records enter its image: what the log writes passes it.
    DEFAULT_CODEC.check_records(records)
    DEFAULT_CODEC.encode_batches([(records, None)], first_offset=0, epoch=0, timestamp=0)


@pytest.mark.parametrize(
    "record",
    [
        TopicRecord(name="t", topic_id=str(Uuid.random())),  # type: ignore[arg-type]
        UnregisterBrokerRecord(broker_id=1, broker_epoch=2**63),
        FeatureLevelRecord(name="metadata.version", feature_level=2**31),
        PartitionRecord(partition_id=0, topic_id=Uuid.random(), replicas=(2**31,), isr=()),
    ],
)
def test_check_records_refuses_a_value_out_of_its_type(record: Record) -> None:
    with pytest.raises(RecordError):
        DEFAULT_CODEC.check_records([record])


def test_check_records_refuses_an_unknown_type() -> None:
    with pytest.raises(RecordError, match="object is not a known record type"):
        DEFAULT_CODEC.check_records([object()])  # type: ignore[list-item]


def test_a_replica_list_checked_before_vouches_only_for_equal_lists() -> None:
    # The int-array check remembers tuples found in range; a list seen before passes by
    # lookup, any other list (or one of a type it cannot remember) is checked in full.
    topic_id = Uuid.random()
    good = PartitionRecord(partition_id=0, topic_id=topic_id, replicas=(1, 2), isr=(1, 2))
    DEFAULT_CODEC.check_records([good, good])
    for replicas in [(1, 2, 2**31), (2**31, 1, 2), (-(2**31) - 1,)]:
        bad = PartitionRecord(partition_id=0, topic_id=topic_id, replicas=replicas, isr=(1,))
        with pytest.raises(RecordError, match=r"replicas=.* outside the Avro int range"):
            DEFAULT_CODEC.check_records([bad])
    listed = PartitionRecord(
        partition_id=0,
        topic_id=topic_id,
        replicas=[1, 2**31],  # type: ignore[arg-type]  # a list is checked, never remembered
        isr=(1,),
    )
    with pytest.raises(RecordError, match="outside the Avro int range"):
        DEFAULT_CODEC.check_records([listed])
