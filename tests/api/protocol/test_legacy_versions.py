"""Versions Kafka 3.9 serves that kio lacks, checked with frames assembled byte by byte.

The request bytes and the expected answers are written here from Kafka 3.9's JSON message
definitions, not from `api.protocol.legacy_schemas`, so a wrong schema fails these tests.
"""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from api.protocol import codec
from api.protocol.connection import Connection, Request
from api.server.kafka.base import Listener
from api.server.kafka.dispatch import KafkaApis
from api.service.service import MetadataService
from records.model import ConfigResourceType
from replay.controller.authorizer import STANDARD_AUTHORIZER
from replay.controller.commands import AlterConfig, AlterConfigOp, ConfigResource, RegisterBroker
from replay.controller.commands import CreatableTopic as Creatable

CORRELATION = 0x01020304


def _i8(value: int) -> bytes:
    return struct.pack(">b", value)


def _i16(value: int) -> bytes:
    return struct.pack(">h", value)


def _i32(value: int) -> bytes:
    return struct.pack(">i", value)


def _str(value: str | None) -> bytes:
    if value is None:
        return _i16(-1)
    data = value.encode()
    return _i16(len(data)) + data


def _array(*items: bytes) -> bytes:
    return _i32(len(items)) + b"".join(items)


def _frame(api_key: int, version: int, body: bytes) -> bytes:
    """A request frame with header v1 (every version here is not flexible)."""
    payload = _i16(api_key) + _i16(version) + _i32(CORRELATION) + _str("sarama") + body
    return _i32(len(payload)) + payload


def _response(body: bytes) -> bytes:
    """A response frame with header v0."""
    payload = _i32(CORRELATION) + body
    return _i32(len(payload)) + payload


@pytest.fixture
def service(tmp_path: Path) -> MetadataService:
    opened = MetadataService.open(tmp_path / "log")
    for broker_id in (1, 2):
        request = RegisterBroker(broker_id=broker_id)
        opened.execute(lambda image, r=request: opened.controller.register_broker(image, r))  # type: ignore[misc]
    return opened


def _answer(service: MetadataService, frame: bytes) -> bytes:
    (event,) = Connection().receive(frame)
    assert isinstance(event, Request), event
    apis = KafkaApis(service, Listener(host="127.0.0.1", port=9092, node_id=0, cluster_id="c"))
    body = asyncio.run(apis.handle(event.request))
    data = codec.encode_response(event.request.header.correlation_id, body)
    assert data == codec.encode_response_with_kio(event.request.header.correlation_id, body)
    return data


@pytest.mark.parametrize(("api_key", "version"), [(19, 0), (19, 1), (20, 0), (32, 0), (29, 0)])
def test_kafka_3_9_versions_are_advertised(api_key: int, version: int) -> None:
    low, high = codec.SUPPORTED_VERSIONS[api_key]
    assert low <= version <= high


def test_describe_acls_v0_as_sarama_sends_it(service: MetadataService) -> None:
    # resource type ANY (1), no name, principal or host filter, operation ANY, permission ANY.
    body = _i8(1) + _str(None) + _str(None) + _str(None) + _i8(1) + _i8(1)
    # No authorizer: Kafka's SECURITY_DISABLED (54), in v0's layout.
    message = (
        "No Authorizer is configured on the broker; set authorizer.class.name="
        f"{STANDARD_AUTHORIZER} in the server config to use ACLs"
    )
    expected = _response(_i32(0) + _i16(54) + _str(message) + _array())
    assert _answer(service, _frame(29, 0, body)) == expected


def test_create_topics_v0_and_v1(service: MetadataService) -> None:
    def topic(name: str, partitions: int, replication: int) -> bytes:
        return _str(name) + _i32(partitions) + _i16(replication) + _array() + _array()

    v0 = _array(topic("legacy-0", 2, 2), topic("__cluster_metadata", 1, 1)) + _i32(30_000)
    assert _answer(service, _frame(19, 0, v0)) == _response(
        _array(_str("legacy-0") + _i16(0), _str("__cluster_metadata") + _i16(42))
    )
    created = service.image.topics.get_by_name("legacy-0")
    assert created is not None and len(created.partitions) == 2

    # v1 adds validate_only to the request and the error message to each result.
    v1 = _array(topic("legacy-1", 1, 3)) + _i32(30_000) + _i8(1)
    (refused,) = service.controller.create_topics(
        service.image,
        [Creatable(name="legacy-1", num_partitions=1, replication_factor=3)],
        validate_only=True,
    ).response
    message = refused.outcome.error_message
    assert message is not None and "replication factor of 3" in message
    answer = _answer(service, _frame(19, 1, v1))
    assert answer == _response(_array(_str("legacy-1") + _i16(38) + _str(message)))
    v1_ok = _array(topic("legacy-1", 1, 1)) + _i32(30_000) + _i8(1)
    assert _answer(service, _frame(19, 1, v1_ok)) == _response(
        _array(_str("legacy-1") + _i16(0) + _str(None))
    )
    assert service.image.topics.get_by_name("legacy-1") is None  # validate_only


def test_delete_topics_v0(service: MetadataService) -> None:
    create = _array(_str("gone") + _i32(1) + _i16(1) + _array() + _array()) + _i32(30_000)
    _answer(service, _frame(19, 0, create))
    body = _array(_str("gone"), _str("never")) + _i32(30_000)
    assert _answer(service, _frame(20, 0, body)) == _response(
        _array(_str("gone") + _i16(0), _str("never") + _i16(3))
    )
    assert service.image.topics.get_by_name("gone") is None


class _Reader:
    """Reads a v0 DescribeConfigs answer field by field, as its JSON definition lays it out."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str | None:
        size = self.take(">h")
        if size < 0:
            return None
        text = self.data[self.at : self.at + size].decode()
        self.at += size
        return text


def test_describe_configs_v0_has_is_default_and_no_sources(service: MetadataService) -> None:
    _answer(
        service,
        _frame(19, 0, _array(_str("t") + _i32(1) + _i16(1) + _array() + _array()) + _i32(0)),
    )
    resource = ConfigResource(type=ConfigResourceType.TOPIC, name="t")
    change = AlterConfig(name="retention.ms", op=AlterConfigOp.SET, value="1000")
    service.execute(
        lambda image: service.controller.incremental_alter_configs(image, [(resource, [change])])
    )
    # One topic resource (type 2), keys: null (every key).
    body = _array(_i8(2) + _str("t") + _i32(-1))
    data = _answer(service, _frame(32, 0, body))
    reader = _Reader(data)
    assert reader.take(">i") == len(data) - 4
    assert reader.take(">i") == CORRELATION
    assert reader.take(">i") == 0  # throttle time
    assert reader.take(">i") == 1  # results
    assert reader.take(">h") == 0 and reader.string() is None
    assert reader.take(">b") == 2 and reader.string() == "t"
    configs: dict[str, tuple[str | None, bool, bool, bool]] = {}
    for _ in range(reader.take(">i")):
        name = reader.string()
        assert name is not None
        value = reader.string()
        read_only, is_default, is_sensitive = (bool(reader.take(">b")) for _ in range(3))
        configs[name] = (value, read_only, is_default, is_sensitive)
    assert reader.at == len(data)  # nothing left over: no source or synonyms in v0
    assert configs["retention.ms"] == ("1000", False, False, False)
    assert configs["cleanup.policy"] == ("delete", False, True, False)
