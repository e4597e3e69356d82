"""The compiled reader of requests and answers reads what the generated readers read."""

from __future__ import annotations

import os
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from api.protocol import codec, native_reader
from api.protocol.connection import Close, Connection, Request
from api.protocol.generated_reader_codegen import compiled_reader
from api.protocol.tagged import missing_required
from tests.support.kio_entities import (
    QUORUM_ANSWERS,
    SUPPORTED_REQUESTS,
    damaged_requests,
    damaged_responses,
    request_frames,
    response_frames,
    same,
)

pytestmark = pytest.mark.skipif(
    not native_reader.AVAILABLE and not os.environ.get("CI"),
    reason="the compiled reader is not built (no C compiler at install)",
)


def test_the_compiled_reader_is_built_in_ci() -> None:
    # `make test` installs with Cython and gcc: CI must exercise the compiled path.
    assert native_reader.AVAILABLE


def _plain(key: int, version: int) -> bool:
    """Whether the version's header is one the plain path reads (no tagged header fields)."""
    plan = codec._READ_PLANS.get((key, version)) or codec._read_plan(key, version)
    return plan.plain_body is not None


def test_every_request_the_plain_path_reads_has_a_compiled_reader() -> None:
    missing = [
        (key, version)
        for key, version in SUPPORTED_REQUESTS
        if _plain(key, version)
        and native_reader.native_reader(codec.request_class(key, version)) is None  # type: ignore[arg-type]  # classes are hashable
    ]
    assert not missing


def _generated(frame: bytes, key: int, version: int) -> tuple[Any, Any] | None:
    """(header, body) as the generated readers read the frame, or None where they refuse it."""
    body_class = codec.request_class(key, version)
    try:
        header, used = compiled_reader(body_class.__header_schema__)(frame, 0)
        body, _ = compiled_reader(body_class)(frame, used)  # type: ignore[arg-type]  # classes are hashable
    except Exception:  # refused: what they refuse, the compiled reader must not read
        return None
    return header, body


def _check(frame: bytes, key: int, version: int) -> str:
    """'read' or 'gave up'; fails where the compiled reader reads what the others do not."""
    natively = codec.decode_natively(frame, key, version)
    if natively is None:
        return "gave up"
    reference = _generated(frame, key, version)
    assert reference is not None, f"read what the generated readers refuse: {frame.hex()}"
    header, body = reference
    assert missing_required(body) is None, f"read a null where a value is due: {frame.hex()}"
    got = natively.header
    assert (got.api_key, got.api_version) == (key, version)
    assert got.correlation_id == header.correlation_id
    assert same(got.client_id, header.client_id)
    assert got.write_id is None
    assert same(natively.body, body), f"{frame.hex()}: {natively.body} != {body}"
    return "read"


@pytest.mark.parametrize(("key", "version"), SUPPORTED_REQUESTS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_requests_read_as_the_generated_readers_read_them(
    key: int, version: int, data: st.DataObject
) -> None:
    # A valid frame is read here, tags and all: giving it up would only cost time, but
    # then this path would go untested.
    assert _check(data.draw(request_frames(key, version)), key, version) == "read"


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_requests())
def test_damaged_requests_are_given_up_or_read_as_the_generated_readers_read_them(
    case: tuple[Any, bytes],
) -> None:
    body_class, frame = case
    key, version = struct.unpack_from(">hh", frame, 0) if len(frame) >= 4 else (-1, -1)
    if (key, version) not in SUPPORTED_REQUESTS or codec.request_class(
        key, version
    ) is not body_class:
        return  # the key or version itself was changed: another API's reader would read it
    _check(frame, key, version)


def _check_answer(frame: bytes, key: int, version: int) -> str:
    """'read' or 'gave up'; fails where the compiled reader reads what the others do not."""
    natively = codec.decode_response_natively(key, version, frame)
    if natively is None:
        return "gave up"
    body_class = codec.response_class(key, version)
    try:
        header, used = compiled_reader(body_class.__header_schema__)(frame, 0)
        body, _ = compiled_reader(body_class)(frame, used)  # type: ignore[arg-type]  # classes are hashable
    except Exception:
        raise AssertionError(f"read what the generated readers refuse: {frame.hex()}") from None
    assert missing_required(body) is None, f"read a null where a value is due: {frame.hex()}"
    correlation_id, got = natively
    assert correlation_id == header.correlation_id
    assert same(got, body), f"{frame.hex()}: {got} != {body}"
    return "read"


@pytest.mark.parametrize(("key", "version"), QUORUM_ANSWERS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_quorum_answers_read_as_the_generated_readers_read_them(
    key: int, version: int, data: st.DataObject
) -> None:
    frame = data.draw(response_frames(key, version))
    outcome = _check_answer(frame, key, version)
    # Only a null where a value is due (which the strategies draw) is given up.
    _, body = codec.decode_response(key, version, frame)
    assert outcome == "read" or missing_required(body) is not None


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_responses())
def test_damaged_quorum_answers_are_given_up_or_read_as_the_generated_readers_read_them(
    case: tuple[int, int, bytes],
) -> None:
    _check_answer(case[2], case[0], case[1])


def test_a_fetch_answer_with_entries_is_read_natively() -> None:
    # What a follower reads after every fetch: the leader's answer, records and all.
    from api.protocol.quorum.apis import (
        FETCH_KEY,
        send_version,
    )
    from api.protocol.quorum.messages import (
        Entry,
        EntryKind,
        ErrorCode,
        FetchResponse,
        LeaderIdAndEpoch,
    )
    from api.protocol.quorum.responses import (
        decode_response,
        encode_response,
    )

    version = send_version(FETCH_KEY)
    answer = FetchResponse(
        correlation_id=7,
        error_code=ErrorCode.NONE,
        high_watermark=41,
        current_leader=LeaderIdAndEpoch(leader_id=2, leader_epoch=5),
        records=(
            Entry(offset=40, epoch=5, payload=b"\x00" * 300, count=3),
            Entry(offset=43, epoch=5, payload=b"marker", kind=EntryKind.LEADER_CHANGE),
        ),
    )
    frame = encode_response(answer, version=version)[4:]
    assert _check_answer(frame, FETCH_KEY, version) == "read"
    assert decode_response(frame, api_key=FETCH_KEY, version=version) == answer


def test_the_bench_requests_are_read_natively() -> None:
    frames = [
        codec.encode_request(
            codec.build(
                codec.request_class(19, 7),
                topics=[
                    {
                        "name": "t",
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                timeout=30_000,
                validate_only=False,
            ),
            correlation_id=1,
            client_id="bench",
        ),
        codec.encode_request(
            codec.build(
                codec.request_class(3, 12),
                topics=[{"name": "t", "topic_id": None}],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            correlation_id=2,
            client_id=None,
        ),
        codec.encode_request(
            codec.build(
                codec.request_class(20, 6),
                topics=[{"name": None, "topic_id": bytes(range(16))}],
                timeout=5,
            ),
            correlation_id=3,
            client_id="c",
        ),
    ]
    for frame in frames:
        key, version = struct.unpack_from(">hh", frame, 4)
        assert _check(frame[4:], key, version) == "read"
        connection = Connection()
        connection.feed(frame)
        event = connection.next_event()
        assert isinstance(event, Request)
        assert same(event.request, codec.decode_natively(frame[4:], key, version))


def _create_topics(**values: Any) -> bytearray:
    body = codec.build(codec.request_class(19, 7), topics=[], timeout=1, validate_only=False)
    return bytearray(codec.encode_request(body, correlation_id=9, client_id="c")[4:])


def _event(frame: bytes) -> Any:
    connection = Connection()
    connection.feed(struct.pack(">i", len(frame)) + frame)
    return connection.next_event()


def test_a_tagged_field_is_left_to_the_generated_readers() -> None:
    frame = _create_topics()
    assert frame[-1] == 0  # the body's tagged fields: none
    frame[-1:] = bytes([1, 7, 0])  # one, unknown to the schema (number 7, no bytes)
    data = bytes(frame)
    assert codec.decode_natively(data, 19, 7) is None
    event = _event(data)  # read as before: Kafka ignores an unknown tag
    assert isinstance(event, Request)
    assert same(event.request, codec.decode_known_request(data, 19, 7))


def test_a_known_tagged_field_is_read_as_the_generated_readers_read_it() -> None:
    body = codec.build(
        codec.request_class(1, 17),
        replica_state={"replica_id": 2, "replica_epoch": 7},
        cluster_id="cluster",
        max_wait=500,
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[],
        forgotten_topics_data=[],
        rack_id="",
    )
    frame = codec.encode_request(body, correlation_id=4, client_id="c")[4:]
    assert _check(frame, 1, 17) == "read"
    read = codec.decode_natively(frame, 1, 17)
    assert read is not None
    assert read.body.cluster_id == "cluster"
    assert (read.body.replica_state.replica_id, read.body.replica_state.replica_epoch) == (2, 7)


def test_a_null_where_a_value_is_due_is_left_to_the_generated_readers() -> None:
    frame = _create_topics()
    at = 10 + 1 + 1  # after the header (client id "c") and its tags: the topics' count
    assert frame[at] == 1  # an empty array
    frame[at] = 0  # null, which the field does not allow
    data = bytes(frame)
    assert codec.decode_natively(data, 19, 7) is None
    event = _event(data)
    assert isinstance(event, Close)  # refused as before, with the field named
    assert "topics is null" in event.reason


def test_a_bytes_buffer_and_an_offset_within_it_are_required() -> None:
    reader = native_reader.native_reader(codec.request_class(3, 12))  # type: ignore[arg-type]  # classes are hashable
    assert reader is not None
    with pytest.raises(TypeError):
        reader(None, 0)  # type: ignore[arg-type]
    for offset in (-1, 1):
        with pytest.raises(native_reader.GiveUp):
            reader(b"", offset)
    with pytest.raises(native_reader.GiveUp):
        reader(b"\x02", 0)  # one topic, then nothing
