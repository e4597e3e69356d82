"""The plain-value writers (`dict_writer_for`) against kio's writer of the built entity."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_writer

from api.protocol import codec
from api.protocol.generated_writer import Writer, dict_writer_for, field_encoder
from tests.support.kio_entities import SUPPORTED_REQUESTS, answers

RESPONSES = SUPPORTED_REQUESTS
"""An answer of every version the server reads a request of."""


def _writer(entity_class: Any) -> Writer:
    return dict_writer_for(entity_class)


def _kio_written(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


@pytest.mark.parametrize(("key", "version"), RESPONSES, ids=[f"{k}v{v}" for k, v in RESPONSES])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_plain_values_are_written_as_kio_writes_their_entity(
    key: int, version: int, data: st.DataObject
) -> None:
    entity_class = codec.response_class(key, version)
    entity, values = data.draw(answers(entity_class))
    written = bytearray()
    _writer(entity_class)(written, values)
    assert bytes(written) == _kio_written(entity)


@pytest.mark.parametrize("length", [0, 1, 126, 127, 128, 300])
def test_strings_and_arrays_around_the_one_byte_length_are_written_as_kio_writes_them(
    length: int,
) -> None:
    # Compact lengths are a varint of the length + 1: one byte up to 126, two from 127.
    entity_class = codec.response_class(3, 12)
    topics = [
        {"error_code": 0, "name": "t" * length, "topic_id": bytes(16), "partitions": []}
        for _ in range(min(length, 130))
    ]
    values = {"throttle_time": 0, "brokers": [], "cluster_id": "c" * length, "topics": topics}
    written = bytearray()
    _writer(entity_class)(written, values)
    assert bytes(written) == _kio_written(codec.build(entity_class, **values))


def test_an_encoded_array_is_copied_and_a_null_string_refused_where_kafka_requires_one() -> None:
    entity_class = codec.response_class(3, 12)
    brokers = [{"node_id": 1, "host": "h", "port": 9092, "rack": None}]
    encoded = field_encoder(entity_class, "brokers")(brokers)
    values = {"throttle_time": 0, "brokers": encoded, "cluster_id": None, "topics": []}
    written = bytearray()
    _writer(entity_class)(written, values)
    expected = {**values, "brokers": brokers}
    assert bytes(written) == _kio_written(codec.build(entity_class, **expected))
    topic: dict[str, Any] = {"error_code": 0, "name": None, "topic_id": bytes(16), "partitions": []}
    with pytest.raises(TypeError, match="non-nullable string"):
        _writer(codec.response_class(3, 9))(bytearray(), {**values, "topics": [topic]})
