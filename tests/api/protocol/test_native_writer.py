"""The compiled writer of answers writes what `generated_writer` writes, or gives up."""

from __future__ import annotations

import datetime
import os
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.protocol import codec, native_writer
from api.protocol.generated_writer import dict_writer_for, field_encoder
from api.protocol.quorum.apis import (
    QUORUM_VERSIONS,
)
from tests.support.kio_entities import SUPPORTED_REQUESTS, answers

pytestmark = pytest.mark.skipif(
    not native_writer.AVAILABLE and not os.environ.get("CI"),
    reason="the compiled writer is not built (no C compiler at install)",
)


def test_the_compiled_writer_is_built_in_ci() -> None:
    # `make test` installs with Cython and gcc: CI must exercise the compiled path.
    assert native_writer.AVAILABLE


def test_every_answer_has_a_compiled_writer() -> None:
    missing = [
        (key, version)
        for key, version in SUPPORTED_REQUESTS
        if native_writer.native_writer(codec.response_class(key, version)) is None  # type: ignore[arg-type]  # classes are hashable
    ]
    assert not missing


def _python(entity_class: Any, correlation_id: int, values: dict[str, Any]) -> bytes:
    """The frame `encode_response` writes with `dict_writer_for` alone (the reference)."""
    head = codec._response_head(entity_class)
    buffer = bytearray(head)
    buffer[4:8] = correlation_id.to_bytes(4, "big", signed=True)
    dict_writer_for(entity_class)(buffer, values)
    buffer[0:4] = (len(buffer) - 4).to_bytes(4, "big")
    return bytes(buffer)


def _native(entity_class: Any, correlation_id: int, values: dict[str, Any]) -> bytes | None:
    writer = native_writer.native_writer(entity_class)
    assert writer is not None
    head = codec._response_head(entity_class)
    frame: bytes | None = writer.frame(head, correlation_id, values)
    return frame


@pytest.mark.parametrize(("key", "version"), SUPPORTED_REQUESTS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), built=st.booleans(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_plain_values_are_written_as_generated_writer_writes_them(
    key: int, version: int, data: st.DataObject, built: bool, correlation_id: int
) -> None:
    entity_class = codec.response_class(key, version)
    entity, values = data.draw(answers(entity_class, built=built))
    frame = _native(entity_class, correlation_id, values)
    # Dicts and plain values all through are written here; built entities are given up.
    assert frame is not None or built
    if frame is not None:
        assert frame == _python(entity_class, correlation_id, values)
        assert frame == codec.encode_response_with_kio(correlation_id, entity)


QUORUM_REQUESTS = sorted(
    (key, version)
    for key, (low, high) in QUORUM_VERSIONS.items()
    for version in range(low, high + 1)
)


@pytest.mark.parametrize(("key", "version"), QUORUM_REQUESTS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_quorum_request_bodies_are_written_as_generated_writer_writes_them(
    key: int, version: int, data: st.DataObject
) -> None:
    """`body` (a request's, the quorum's own requests): the bytes `dict_writer_for` writes."""
    entity_class = codec.request_class(key, version)
    _, values = data.draw(answers(entity_class, built=False))
    writer = native_writer.native_writer(entity_class)  # type: ignore[arg-type]  # classes are hashable
    assert writer is not None
    body = writer.body(values)
    expected = bytearray()
    dict_writer_for(entity_class)(expected, values)  # type: ignore[arg-type]  # classes are hashable
    assert body == bytes(expected)


def test_the_bench_answers_are_written_natively() -> None:
    created = codec.response_class(19, 7)
    topic = {
        "name": "t",
        "topic_id": bytes(range(16)),
        "error_code": 0,
        "error_message": None,
        "num_partitions": 1,
        "replication_factor": 1,
        "configs": [],
    }
    metadata = codec.response_class(3, 12)
    brokers = field_encoder(metadata, "brokers")(
        [{"node_id": 1, "host": "h", "port": 9092, "rack": None}]
    )
    partition = {
        "error_code": 0,
        "partition_index": 0,
        "leader_id": 1,
        "leader_epoch": 0,
        "replica_nodes": [1],
        "isr_nodes": (1,),
        "offline_replicas": [],
    }
    described = {
        "error_code": 0,
        "name": "t",
        "topic_id": uuid.UUID(bytes=bytes(range(16))),
        "is_internal": False,
        "partitions": [partition],
    }
    deleted = codec.response_class(20, 6)
    cases = [
        (created, {"throttle_time": datetime.timedelta(0), "topics": [topic]}),
        (
            metadata,
            {
                "throttle_time": 0,
                "brokers": brokers,
                "cluster_id": "c",
                "controller_id": 1,
                "topics": [described],
                "cluster_authorized_operations": -2147483648,
            },
        ),
        (
            deleted,
            {
                "throttle_time": 0,
                "responses": [{"name": "t", "topic_id": bytes(16), "error_code": 0}],
            },
        ),
    ]
    for entity_class, values in cases:
        frame = _native(entity_class, 5, values)
        assert frame is not None, entity_class.__name__
        assert frame == _python(entity_class, 5, values)
        answer = codec.new_answer(entity_class, values)
        assert codec.encode_response(5, answer) == frame
        assert frame == codec.encode_response_with_kio(5, answer)


def _created(**changes: Any) -> dict[str, Any]:
    topic = {
        "name": "t",
        "topic_id": bytes(16),
        "error_code": 0,
        "error_message": None,
        "num_partitions": 1,
        "replication_factor": 1,
        "configs": [],
    }
    return {"throttle_time": 0, "topics": [{**topic, **changes}]}


@pytest.mark.parametrize(
    ("what", "values"),
    [
        ("a required field left out", {"throttle_time": 0}),
        ("a number out of its type's range", _created(num_partitions=2**31)),
        ("a number of another type", _created(num_partitions=1.0)),
        ("a UUID of 15 bytes", _created(topic_id=bytes(15))),
        ("a null where a string is due", _created(name=None)),
        ("a string that is not UTF-8 encodable", _created(name="\ud800")),
        ("an array of another type", _created(configs={})),
    ],
)
def test_what_it_does_not_write_plainly_is_left_to_generated_writer(
    what: str, values: dict[str, Any]
) -> None:
    entity_class = codec.response_class(19, 7)
    assert _native(entity_class, 1, values) is None, what
    try:
        expected: bytes | Exception = _python(entity_class, 1, values)
    except Exception as exc:
        expected = exc
    answer = codec.new_answer(entity_class, values)
    if isinstance(expected, bytes):
        assert codec.encode_response(1, answer) == expected
    else:
        with pytest.raises(type(expected)):
            codec.encode_response(1, answer)


def test_tagged_fields_away_from_their_defaults_are_written_as_generated_writer_does() -> None:
    entity_class = codec.response_class(19, 7)
    for values in (_created(topic_config_error_code=3), _created(topic_config_error_code=0)):
        frame = _native(entity_class, 1, values)
        assert frame is not None
        assert frame == _python(entity_class, 1, values)
        answer = codec.new_answer(entity_class, values)
        assert frame == codec.encode_response_with_kio(1, answer)


def test_a_built_entity_is_left_to_generated_writer() -> None:
    entity_class = codec.response_class(19, 7)
    built = codec.build(entity_class, **_created())
    values = {"throttle_time": 0, "topics": list(built.topics)}
    assert _native(entity_class, 1, values) is None
    assert codec.encode_response(1, codec.new_answer(entity_class, values)) == _python(
        entity_class, 1, values
    )
