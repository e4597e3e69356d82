"""The protocol core without sockets: framing, versions, errors and fuzzed input."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader

from api.protocol import codec
from api.protocol.connection import Close, Connection, Reply, Request
from api.protocol.tagged import missing_required
from api.server.kafka.base import Listener
from api.server.kafka.dispatch import KafkaApis
from api.service.service import MetadataService
from records.model import ConfigResourceType, Mode
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    ConfigResource,
    DeletePartitionsTopic,
    RegisterBroker,
    TopicRef,
)
from replay.controller.commands import CreatableTopic as Creatable
from tests.support.protocol_frames import (
    API_VERSIONS,
    SEEDS,
    CreatableTopic,
    CreateTopicsRequest,
    MetadataRequest,
    _frame,
    metadata_frame,
)


def MetadataRequestTopic(**values: Any) -> dict[str, Any]:  # noqa: N802
    return values


def test_a_frame_split_anywhere_decodes_once_and_two_frames_decode_in_order() -> None:
    for cut in range(len(API_VERSIONS) + 1):
        connection = Connection()
        events = connection.receive(API_VERSIONS[:cut]) + connection.receive(API_VERSIONS[cut:])
        assert len(events) == 1
        assert isinstance(events[0], Request)
    both = Connection().receive(
        API_VERSIONS
        + _frame(
            MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            8,
        )
    )
    assert [e.request.header.correlation_id for e in both if isinstance(e, Request)] == [7, 8]


def test_an_api_versions_newer_than_supported_gets_a_v0_answer_with_error_35() -> None:
    frame = bytearray(API_VERSIONS)
    struct.pack_into(">h", frame, 6, 99)  # the api_version, after size and api_key
    (event,) = Connection().receive(bytes(frame))
    assert isinstance(event, Reply)
    correlation, body = codec.decode_response(18, 0, event.data[4:])
    assert correlation == 7
    assert int(body.error_code) == 35
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}[3] == (0, 13)


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        (struct.pack(">ihhi", 8, 9999, 0, 1), "unknown API key 9999"),
        (struct.pack(">ihhi", 8, 3, 99, 1), "unsupported version 99"),
        (struct.pack(">i", 200 * 1024 * 1024), "socket.request.max.bytes"),
        (struct.pack(">i", -5), "request size -5"),
        (struct.pack(">ihh", 4, 3, 1), "too short"),
        (struct.pack(">ihhihi", 14, 3, 1, 1, -1, 5), "malformed Metadata v1"),
    ],
)
def test_bad_frames_close_the_connection_with_a_reason(frame: bytes, reason: str) -> None:
    connection = Connection()
    events = connection.receive(frame)
    assert len(events) == 1
    assert isinstance(events[0], Close)
    assert reason in events[0].reason
    assert connection.receive(API_VERSIONS) == []  # nothing is decoded after a close


def test_a_partial_frame_waits_for_the_rest() -> None:
    connection = Connection()
    assert connection.receive(API_VERSIONS[:-1]) == []
    assert not connection.closed


@pytest.fixture
def service(tmp_path: Path) -> MetadataService:
    opened = MetadataService.open(tmp_path / "log")
    for broker_id in (1, 2):
        request = RegisterBroker(broker_id=broker_id)
        opened.execute(lambda image, r=request: opened.controller.register_broker(image, r))  # type: ignore[misc]
    return opened


def _answer(service: MetadataService, frame: bytes) -> object:
    (event,) = Connection().receive(frame)
    assert isinstance(event, Request)
    apis = KafkaApis(service, Listener(host="127.0.0.1", port=9092, node_id=0, cluster_id="c"))
    body = asyncio.run(apis.handle(event.request))
    data = codec.encode_response(event.request.header.correlation_id, body)
    assert data == codec.encode_response_with_kio(event.request.header.correlation_id, body)
    header = event.request.header
    return codec.decode_response(header.api_key, header.api_version, data[4:])[1]


def test_every_advertised_kafka_api_has_a_handler_and_no_other(service: MetadataService) -> None:
    # The handlers live in one module per concern; the dispatch table must still cover exactly
    # what ApiVersions advertises, or a client gets its connection closed mid-conversation.
    apis = KafkaApis(service, Listener(host="h", port=1))
    assert set(apis._handlers) == set(codec.SUPPORTED_VERSIONS)


def test_metadata_by_id_unknown_names_and_the_partition_mode_tag(
    service: MetadataService,
) -> None:
    service.execute(
        lambda image: service.controller.create_topics(
            image, [Creatable(name="t", num_partitions=3, replication_factor=1)]
        )
    )
    topic = service.image.topics.get_by_name("t")
    assert topic is not None
    topic_id = uuid.UUID(bytes=topic.topic_id.bytes)
    response = _answer(
        service,
        _frame(
            MetadataRequest(
                topics=(
                    MetadataRequestTopic(topic_id=topic_id, name=None),
                    MetadataRequestTopic(topic_id=None, name="nope"),
                    MetadataRequestTopic(topic_id=uuid.uuid4(), name=None),
                ),
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
        ),
    )
    found, missing, unknown_id = response.topics  # type: ignore[attr-defined]
    assert (found.name, found.topic_id, int(found.error_code)) == ("t", topic_id, 0)
    assert [p.mode for p in found.partitions] == [0, 0, 0]
    assert int(missing.error_code) == 3
    assert int(unknown_id.error_code) == 100
    assert service.image.topics.get_by_name("nope") is None  # no auto-creation
    assert response.controller_id == 0  # type: ignore[attr-defined]
    # Only this server, the controller, is a node; partitions still name the registered brokers.
    assert [b.node_id for b in response.brokers] == [0]  # type: ignore[attr-defined]
    assert {r for p in found.partitions for r in p.replica_nodes} <= {1, 2}


def test_create_topics_answers_per_topic_with_kafka_codes(service: MetadataService) -> None:
    request = CreateTopicsRequest(
        topics=(
            CreatableTopic(
                name="ok", num_partitions=2, replication_factor=2, assignments=(), configs=()
            ),
            CreatableTopic(
                name="rf", num_partitions=1, replication_factor=5, assignments=(), configs=()
            ),
            CreatableTopic(
                name="ok", num_partitions=1, replication_factor=1, assignments=(), configs=()
            ),
        ),
        validate_only=False,
    )
    response = _answer(service, _frame(request))
    codes = [(t.name, int(t.error_code)) for t in response.topics]  # type: ignore[attr-defined]
    assert codes == [("ok", 42), ("rf", 38), ("ok", 42)]


def test_a_read_only_partition_carries_the_mode_tag(tmp_path: Path) -> None:
    service = MetadataService.open(tmp_path / "log")
    service.execute(
        lambda image: service.controller.register_broker(image, RegisterBroker(broker_id=1))
    )
    service.execute(
        lambda image: service.controller.incremental_alter_configs(
            image, [(_cluster(), [_set("delete.topic.partition.enable", "true")])]
        )
    )
    service.execute(
        lambda image: service.controller.create_topics(
            image, [Creatable(name="t", num_partitions=3, replication_factor=1)]
        )
    )
    service.execute(
        lambda image: service.controller.delete_partitions(
            image, [DeletePartitionsTopic(topic=TopicRef(name="t"), count=2, delay_ms=60_000)]
        )
    )
    response = _answer(
        service,
        _frame(
            MetadataRequest(
                topics=None,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        ),
    )
    (topic,) = response.topics  # type: ignore[attr-defined]
    assert [p.mode for p in topic.partitions] == [0, 0, int(Mode.READ_ONLY)]
    # On the wire the tag is absent for READ_WRITE and present once for the READ_ONLY one.
    frame = codec.encode_response(1, codec.build(codec.response_class(3, 12), **_fields(response)))
    assert frame.count(bytes([0x01, 0x90, 0x4E, 0x01, 0x01])) == 1  # 1 tag, 10000, size 1, 1


def _fields(response: object) -> dict[str, object]:

    return {f.name: getattr(response, f.name) for f in dataclasses.fields(response)}  # type: ignore[arg-type]


def _cluster() -> ConfigResource:
    return ConfigResource(type=ConfigResourceType.BROKER, name="")


def _set(name: str, value: str) -> AlterConfig:
    return AlterConfig(name=name, op=AlterConfigOp.SET, value=value)


# ----------------------------------------------------------------------------- fuzz


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    frame = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        position = draw(st.integers(4, len(frame) - 1))
        frame[position] = draw(st.integers(0, 255))
    cut = draw(st.integers(4, len(frame)))
    return bytes(frame[:cut]) if draw(st.booleans()) else bytes(frame)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=200), _mutated()))
def test_fuzzed_bytes_give_events_never_exceptions(data: bytes) -> None:
    events = Connection(max_request_bytes=1 << 20).receive(data)
    for event in events:
        assert isinstance(event, Request | Reply | Close)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(_mutated())
def test_fuzzed_requests_that_decode_are_answered(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    service = MetadataService.open(tmp_path_factory.mktemp("fuzz") / "log")
    try:
        apis = KafkaApis(service, Listener(host="h", port=1, node_id=0, cluster_id="c"))
        for event in Connection().receive(data):
            if isinstance(event, Request):
                body = asyncio.run(apis.handle(event.request))
                correlation = event.request.header.correlation_id
                encoded = codec.encode_response(correlation, body)
                assert encoded == codec.encode_response_with_kio(correlation, body)
    finally:
        service.close()


def test_kio_reads_what_we_write() -> None:
    body = codec.build(
        codec.response_class(18, 3),
        error_code=0,
        api_keys=codec.supported_api_keys(),
        throttle_time=0,
    )
    data = codec.encode_response(3, body)
    reader = entity_reader(codec.response_class(18, 3))
    assert reader(data, 4 + 4)[0].api_keys == body.api_keys


@pytest.mark.parametrize("version", [2, 5, 7])
def test_an_answer_is_written_as_its_built_entity(version: int) -> None:
    topic = {
        "name": "t",
        "topic_id": uuid.UUID(int=7).bytes,
        "error_code": 0,
        "error_message": None,
        "num_partitions": 3,
        "replication_factor": 2,
        "configs": [
            {
                "name": "k",
                "value": "v",
                "read_only": False,
                "config_source": 5,
                "is_sensitive": False,
            }
        ],
        "not_a_field": object(),  # ignored, as build ignores it
    }
    answer = codec.Answer(
        codec.response_class(19, version), {"throttle_time": 5, "topics": [topic]}
    )
    data = codec.encode_response(1, answer)
    assert data == codec.encode_response_with_kio(1, answer.entity())
    assert data == codec.encode_response(1, answer.entity())


def test_an_answer_without_a_required_value_or_with_a_bad_uuid_is_refused() -> None:
    entity_class = codec.response_class(20, 6)
    with pytest.raises(TypeError, match="responses"):
        codec.encode_response(1, codec.Answer(entity_class, {"throttle_time": 0}))
    bad = {"name": "t", "topic_id": b"short", "error_code": 0}
    with pytest.raises(ValueError, match="16 bytes"):
        codec.encode_response(
            1, codec.Answer(entity_class, {"throttle_time": 0, "responses": [bad]})
        )


# ---------------------------------------------------------------------- unknown tagged fields


def test_unknown_tagged_fields_are_ignored_as_kafka_ignores_them() -> None:
    frame = metadata_frame()
    plain = codec.decode_request(frame)
    header_tags = 8 + 2 + len("metadata-log")
    extra = bytes([2, 5, 1, 0, 99, 2, 1, 1])  # two tags this schema does not declare
    variants = [
        frame[:header_tags] + extra + frame[header_tags + 1 :],  # in the request header
        frame[:-4] + extra + frame[-3:],  # in a topic entry (nested entity)
        frame[:-1] + extra,  # at the end of the body
    ]
    for variant in variants:
        decoded = codec.decode_request(variant)
        assert decoded.body == plain.body and decoded.header == plain.header


def test_unknown_tagged_fields_in_a_response_are_skipped_as_kafka_clients_skip_them() -> None:
    # A newer server's answer with extras this client's schemas do not know.
    entity_class = codec.response_class(60, 0)  # DescribeCluster v0: flexible
    body = {"throttle_time": 0, "error_code": 0, "cluster_id": "c", "controller_id": 1}
    body |= {"brokers": [], "cluster_authorized_operations": 0}
    frame = codec.encode_response(9, codec.Answer(entity_class, body))[4:]
    plain = codec.decode_response(60, 0, frame)
    extra = bytes([2, 5, 1, 0, 99, 2, 1, 1])  # two tags the schema does not declare
    variants = [frame[:4] + extra + frame[5:], frame[:-1] + extra]  # header, end of body
    for variant in variants:
        assert codec.decode_response(60, 0, variant) == plain
    with pytest.raises(KeyError, match="tag: 5"):  # overrunning the frame: the error stands
        codec.decode_response(60, 0, frame[:-1] + bytes([1, 5, 40, 0]))


def test_a_tagged_section_that_overruns_the_frame_still_closes_the_connection() -> None:
    frame = metadata_frame()
    bad = frame[:-1] + bytes([1, 5, 40, 0])  # says 40 bytes follow, one does
    with pytest.raises(codec.ProtocolError, match="malformed Metadata v12"):
        codec.decode_request(bad)
    size = struct.pack(">i", len(bad))
    (event,) = Connection().receive(size + bad)
    assert isinstance(event, Close)


def test_a_null_array_where_kafka_requires_one_is_malformed() -> None:
    # Found by the fuzz test: kio reads a compact null array into a non-nullable field.
    data = bytes.fromhex("00130007000000070008746573740002026600000000010001010100000000ea600100")
    with pytest.raises(codec.ProtocolError, match="topics is null"):
        codec.decode_request(data)


# ---------------------------------------------------------------------- the plain-header path


def _decoded_or_error(frame: bytes) -> Any:
    """The events of `frame` (without its size) on a new connection, as the server has them."""
    return Connection().receive(struct.pack(">i", len(frame)) + frame)


def _through_the_general_path(frame: bytes, monkeypatch: pytest.MonkeyPatch) -> Any:
    """`decode_request` with the plain-header path standing aside (`_read` replaced)."""
    generated = codec._read

    def read(frame: bytes | memoryview, header_class: Any, body_class: Any) -> tuple[Any, Any]:
        return generated(frame, header_class, body_class)

    with monkeypatch.context() as patch:
        patch.setattr(codec, "_read", read)
        return _decoded_or_error(frame)


def _with_write_id(frame: bytes) -> bytes:
    body = codec.decode_request(frame).body
    write_id = codec.write_id_bytes(bytes(range(16)), 5)
    return codec.encode_request(body, correlation_id=3, write_id=write_id)[4:]


_HEADER_CASES = [
    *(seed[4:] for seed in SEEDS),
    metadata_frame(),
    _with_write_id(metadata_frame()),  # a header tag: the general path reads it
    struct.pack(">hhih", 3, 1, 4, -1) + struct.pack(">i", -1),  # Metadata v1, null client id
    struct.pack(">hhih", 3, 12, 4, -2) + bytes(6),  # a client id length below -1
    struct.pack(">hhih", 3, 12, 4, 40) + b"short",  # a client id past the end
    struct.pack(">hhih", 3, 12, 4, 2) + b"\xff\xfe" + bytes(6),  # not UTF-8
    bytes.fromhex("00130007000000070008746573740002026600000000010001010100000000ea600100"),
]


@pytest.mark.parametrize("frame", _HEADER_CASES, ids=lambda frame: frame[:12].hex())
def test_the_plain_header_path_decodes_as_the_general_path(
    frame: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _decoded_or_error(frame) == _through_the_general_path(frame, monkeypatch)


def test_a_write_id_in_the_header_is_still_read() -> None:
    decoded = codec.decode_request(_with_write_id(metadata_frame()))
    assert decoded.header.write_id == (bytes(range(16)), 5)
    assert decoded.header == codec.RequestHeader(
        api_key=3,
        api_version=12,
        correlation_id=3,
        client_id="metadata-log",
        write_id=(bytes(range(16)), 5),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
def test_mutated_frames_decode_on_the_plain_header_path_as_on_the_general_path(
    data: bytes,
) -> None:
    frame = data[4:]
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _decoded_or_error(frame) == _through_the_general_path(frame, monkeypatch)


@pytest.mark.parametrize("frame", [seed[4:] for seed in SEEDS] + [metadata_frame()])
def test_frames_without_header_tags_take_the_plain_header_path(frame: bytes) -> None:
    api_key, version, _ = codec.peek_header(frame)
    plan = codec._read_plan(api_key, version)
    assert plan.plain_body is not None
    assert codec._read_plain(frame, api_key, version, plan) == codec.decode_request(frame)


def test_a_null_required_field_is_named_by_its_path() -> None:
    body = codec.decode_request(SEEDS[2][4:]).body  # CreateTopics v7, one topic
    (topic,) = body.topics
    assert missing_required(body) is None
    assert missing_required(dataclasses.replace(body, topics=None)) == "topics"
    no_configs = dataclasses.replace(topic, configs=None)
    assert missing_required(dataclasses.replace(body, topics=(topic, no_configs))) == (
        "topics.configs"
    )
