"""Kafka request/response (de)serialisation through `kio`, the one module that imports it.

A request frame (without its int32 size) starts with the API key, the API version and the
correlation id in every header version; the rest of the header and the body depend on the API
and version. `decode_request` reads them with kio's generated schemas; `encode_response` writes
a response with the header version its API and version use. Bodies are plain dataclass
entities: handlers read fields with `getattr` and answer with the plain values `build` takes
(an `Answer`), which keep only the fields the answering version has, so one handler serves
every version of an API.
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode as KioErrorCode
from kio.serial import entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i32Timedelta

from api.protocol.generated_reader import read_request, read_response, reader_for
from api.protocol.generated_reader_runtime import Reader
from api.protocol.generated_writer import Encoded, Unsupported, dict_writer_for, writer_for
from api.protocol.legacy_schemas import LEGACY_PAYLOADS
from api.protocol.native_reader import native_reader
from api.protocol.native_writer import native_writer
from api.protocol.tagged import (
    Malformed,
    missing_required,
    strip_unknown_response_tags,
    strip_unknown_tags,
)
from records.errors import MetadataLogError
from records.slots import preset_constructor

_PREFIX = struct.Struct(">hhi")
HEADER_PREFIX_BYTES = _PREFIX.size
"""The bytes `peek_header` reads: key, version, correlation id (shorter frames are refused)."""
_INT32 = struct.Struct(">i")

API_VERSIONS_KEY = 18
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36

SUPPORTED_VERSIONS: Mapping[int, tuple[int, int]] = {
    18: (0, 4),  # ApiVersions
    3: (0, 13),  # Metadata
    19: (0, 7),  # CreateTopics (v0-1 from `legacy_schemas`)
    20: (0, 6),  # DeleteTopics (v0 from `legacy_schemas`)
    37: (0, 3),  # CreatePartitions
    32: (0, 4),  # DescribeConfigs (v0 from `legacy_schemas`)
    33: (0, 2),  # AlterConfigs
    44: (0, 1),  # IncrementalAlterConfigs
    60: (0, 2),  # DescribeCluster
    75: (0, 0),  # DescribeTopicPartitions
    43: (0, 2),  # ElectLeaders
    45: (0, 1),  # AlterPartitionReassignments
    46: (0, 0),  # ListPartitionReassignments
    29: (0, 3),  # DescribeAcls (v0 from `legacy_schemas`)
    30: (0, 3),  # CreateAcls (v0 from `legacy_schemas`)
    31: (0, 3),  # DeleteAcls (v0 from `legacy_schemas`)
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    62: (0, 4),  # BrokerRegistration
    63: (0, 2),  # BrokerHeartbeat
    64: (0, 0),  # UnregisterBroker
    57: (0, 2),  # UpdateFeatures (v2: Kafka 4.0's, the top-level error only)
    56: (2, 3),  # AlterPartition (v0-1 name topics; kio has v2-3, by topic id)
    17: (0, 1),  # SaslHandshake (v0: raw SASL tokens follow, without Kafka headers)
    36: (0, 2),  # SaslAuthenticate
}
"""Kafka APIs this server answers, with the versions it advertises (ApiVersions).

At least every version Kafka 3.9 serves for each (its JSON definitions' `validVersions`);
Where a range goes past Kafka 3.9's, the extra versions are later Kafka's.
"""

API_NAMES: Mapping[int, str] = {
    18: "ApiVersions",
    3: "Metadata",
    19: "CreateTopics",
    20: "DeleteTopics",
    37: "CreatePartitions",
    32: "DescribeConfigs",
    33: "AlterConfigs",
    44: "IncrementalAlterConfigs",
    60: "DescribeCluster",
    75: "DescribeTopicPartitions",
    43: "ElectLeaders",
    45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments",
    29: "DescribeAcls",
    30: "CreateAcls",
    31: "DeleteAcls",
    50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials",
    62: "BrokerRegistration",
    63: "BrokerHeartbeat",
    64: "UnregisterBroker",
    57: "UpdateFeatures",
    56: "AlterPartition",
    17: "SaslHandshake",
    36: "SaslAuthenticate",
    # The controller quorum's, served only by a server with a quorum endpoint
    # (`api.protocol.quorum`).
    1: "Fetch",
    52: "Vote",
    53: "BeginQuorumEpoch",
    54: "EndQuorumEpoch",
    55: "DescribeQuorum",
    59: "FetchSnapshot",
    80: "AddRaftVoter",
    81: "RemoveRaftVoter",
    82: "UpdateRaftVoter",
}
"""The name of each Kafka API key this server may answer (for messages and the log)."""


class ProtocolError(MetadataLogError):
    """A frame that cannot be answered; the connection is closed with this reason."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestHeader:
    """The parts of a request header the server uses."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    write_id: tuple[bytes, int] | None = None
    """An idempotent write's (client instance id: 16 bytes, sequence), from `WRITE_ID_TAG`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KafkaRequest:
    """A decoded Kafka request: its header and its body entity (a kio dataclass)."""

    header: RequestHeader
    body: Any


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """API key, API version and correlation id: the first 8 bytes of every request header."""
    if len(frame) < _PREFIX.size:
        raise ProtocolError(f"a request of {len(frame)} bytes is too short for a header")
    key, version, correlation = _PREFIX.unpack_from(frame, 0)
    return int(key), int(version), int(correlation)


@cache
def _payload_class(api_key: int, version: int, kind: EntityType) -> type[Any]:
    legacy = LEGACY_PAYLOADS.get((api_key, version, kind))
    if legacy is not None:
        return legacy
    module = load_payload_module(api_key, version, kind)  # type: ignore[arg-type]
    for value in vars(module).values():
        if isinstance(value, type) and getattr(value, "__type__", None) == kind:
            return value
    raise ProtocolError(f"kio has no {kind.name} for API {api_key} v{version}")


_REQUEST_CLASSES: dict[tuple[int, int], type[Any]] = {}
_RESPONSE_CLASSES: dict[tuple[int, int], type[Any]] = {}
# Every request asks for both classes: a dict keyed by two ints answers in C, where the cache
# of `_payload_class` hashes an enum member (a Python call) on every lookup.


def request_class(api_key: int, version: int) -> type[Any]:
    """The kio request entity of an API version."""
    try:
        return _REQUEST_CLASSES[api_key, version]
    except KeyError:
        found = _REQUEST_CLASSES[api_key, version] = _payload_class(
            api_key, version, EntityType.request
        )
        return found


def response_class(api_key: int, version: int) -> type[Any]:
    """The kio response entity of an API version (Metadata v9+ with the partition mode)."""
    try:
        return _RESPONSE_CLASSES[api_key, version]
    except KeyError:
        pass
    body = _payload_class(api_key, version, EntityType.response)
    if api_key == METADATA_KEY and body.__flexible__:
        body = _with_partition_mode(body)  # type: ignore[arg-type]  # classes are hashable
    _RESPONSE_CLASSES[api_key, version] = body
    return body


METADATA_KEY = 3

PARTITION_MODE_TAG = 10_000
"""The tag of the partition `mode` (int8) in flexible Metadata answers (v9+).

A tagged field is skipped by clients that do not know it. It is written only when it is not
the default READ_WRITE (0): READ_ONLY is 1, NONE is -1. The tag is far above Kafka's own (it
uses single digits) so a future Kafka field cannot collide with it.
"""


@cache
def _with_partition_mode(body: type[Any]) -> type[Any]:
    """Metadata response classes whose partitions carry the `mode` tagged field."""
    hints = typing.get_type_hints(body)
    topic = typing.get_args(hints["topics"])[0]
    partition = typing.get_args(typing.get_type_hints(topic)["partitions"])[0]
    mode_field = dataclasses.field(
        default=0, metadata={"kafka_type": "int8", "tag": PARTITION_MODE_TAG}
    )
    options: dict[str, Any] = {"frozen": True, "slots": True, "kw_only": True}
    with_mode = dataclasses.make_dataclass(
        partition.__name__, [("mode", int, mode_field)], bases=(partition,), **options
    )
    topic_field = dataclasses.field(metadata={"kafka_type": "entity"})
    topic_with_mode = dataclasses.make_dataclass(
        topic.__name__,
        [("partitions", tuple[with_mode, ...], topic_field)],  # type: ignore[valid-type]
        bases=(topic,),
        **options,
    )
    return dataclasses.make_dataclass(
        body.__name__,
        [("topics", tuple[topic_with_mode, ...], dataclasses.field(metadata={}))],  # type: ignore[valid-type]
        bases=(body,),
        **options,
    )


WRITE_ID_TAG = 10_001
"""The tag of an idempotent write's id in request header v2's tagged fields (flexible versions).

Its value is 24 bytes: the client instance's random id (16) and the write's sequence number
(int64, big-endian); a retry of the write sends the same (docs/replication.md). Like
`PARTITION_MODE_TAG` it is far above Kafka's own tags, so a future Kafka header field cannot
collide with it. Clients that do not send it get writes without deduplication.
"""

_WRITE_ID = struct.Struct(">16sq")


def _with_write_id(header: type[Any]) -> type[Any]:
    """Request header v2 with the `write_id` tagged field (empty when absent)."""
    write_id = dataclasses.field(default=b"", metadata={"kafka_type": "bytes", "tag": WRITE_ID_TAG})
    return dataclasses.make_dataclass(
        header.__name__,
        [("write_id", bytes, write_id)],
        bases=(header,),
        frozen=True,
        slots=True,
        kw_only=True,
    )


_HEADER_V2: type[Any] = request_class(API_VERSIONS_KEY, 3).__header_schema__
"""kio's request header v2 (that of every flexible request version)."""
_IDEMPOTENT_HEADER = _with_write_id(_HEADER_V2)
_HEADERS: dict[type[Any], type[Any]] = {_HEADER_V2: _IDEMPOTENT_HEADER}
"""Header classes read in place of kio's: v2 with the write id tag."""


def write_id_bytes(client_id: bytes, sequence: int) -> bytes:
    """The `WRITE_ID_TAG` value of a write."""
    return _WRITE_ID.pack(client_id, sequence)


def parse_write_id(raw: bytes, what: str) -> tuple[bytes, int]:
    """(client instance id, sequence) of a `WRITE_ID_TAG` value; `ProtocolError` if malformed.

    `what` names the request for the message (`CreateTopics v7`).
    """
    if len(raw) != _WRITE_ID.size:
        raise ProtocolError(
            f"malformed {what} request: a write id of {len(raw)} bytes "
            f"(tag {WRITE_ID_TAG} holds {_WRITE_ID.size})"
        )
    client_id, sequence = _WRITE_ID.unpack(raw)
    return client_id, int(sequence)


def decode_request(frame: bytes | memoryview) -> KafkaRequest:
    """Decode a request frame of an API and version in `SUPPORTED_VERSIONS`.

    Raises `ProtocolError` for anything malformed: truncated or with values out of range.
    """
    api_key, version, _ = peek_header(frame)
    return decode_known_request(frame, api_key, version)


@dataclass(frozen=True, slots=True)
class _ReadPlan:
    """How a request of one API version is read (`decode_known_request`)."""

    header_class: type[Any]
    body_class: type[Any]
    plain_body: Reader | None
    """The body's reader for `_read_plain` (None: the header is not one it reads)."""
    flexible: bool
    """The header ends with a tagged-fields section (header v2)."""
    native: Any = None
    """The compiled reader of the body for `_read_plain` (`native_reader`), or None."""


_READ_PLANS: dict[tuple[int, int], _ReadPlan] = {}
"""The read plan of each API version, by (key, version)."""

_PLAIN_HEADER_FIELDS = (
    ("request_api_key", "int16"),
    ("request_api_version", "int16"),
    ("correlation_id", "int32"),
    ("client_id", "string"),
)
"""The untagged fields of request headers v1 and v2, which `_read_plain` reads."""


def _read_plan(api_key: int, version: int) -> _ReadPlan:
    body_class = request_class(api_key, version)
    header_class = body_class.__header_schema__
    header_class = _HEADERS.get(header_class, header_class)
    untagged = tuple(
        (f.name, f.metadata.get("kafka_type"))
        for f in dataclasses.fields(header_class)
        if "tag" not in f.metadata
    )
    # classes are hashable (the cache of `reader_for` is keyed by them)
    plain_body = reader_for(body_class) if untagged == _PLAIN_HEADER_FIELDS else None  # type: ignore[arg-type]
    native = native_reader(body_class) if plain_body is not None else None  # type: ignore[arg-type]
    found = _READ_PLANS[api_key, version] = _ReadPlan(
        header_class, body_class, plain_body, bool(header_class.__flexible__), native
    )
    return found


_PLAIN_PREFIX = struct.Struct(">hhih")


_plain_header = preset_constructor(
    RequestHeader, ("api_key", "api_version", "correlation_id", "client_id")
)
"""`RequestHeader(...)` without a write id, through its slots (`_read_plain`)."""
_request = preset_constructor(KafkaRequest, ("header", "body"))
"""`KafkaRequest(header=..., body=...)` through its slots."""


class _NotPlain(Exception):
    """A frame `_read_plain` leaves to the general path."""


def _read_plain(frame: bytes, api_key: int, version: int, plan: _ReadPlan) -> KafkaRequest:
    """`decode_known_request` of a frame whose header has no tagged field: the common case.

    Reads what `read_request`'s generated readers read (the header's key, version,
    correlation id and nullable legacy client id, then the body with the body's reader),
    without the header entity, and makes the results without their dataclasses' `__init__`
    (a frozen dataclass sets each field through `object.__setattr__`: about half of the
    decoding outside the readers). Raises on anything else (tags in the header, a refused
    or malformed frame, a null required field): the caller then reads the frame as before,
    so a frame this refuses gets the same result or error as it always did.
    """
    _, _, correlation_id, length = _PLAIN_PREFIX.unpack_from(frame, 0)
    if length >= 0:
        pos = 10 + length
        if pos > len(frame):
            raise _NotPlain
        client_id: str | None = frame[10:pos].decode()
    elif length == -1:
        client_id = None
        pos = 10
    else:
        raise _NotPlain
    if plan.flexible:
        if frame[pos]:  # tagged fields: the general path reads them
            raise _NotPlain
        pos += 1
    body, _ = plan.plain_body(frame, pos)  # type: ignore[misc]  # set for plain headers
    if missing_required(body) is not None:
        raise _NotPlain
    return _request(_plain_header(api_key, version, correlation_id, client_id), body)  # type: ignore[no-any-return]


def decode_natively(frame: bytes, api_key: int, version: int) -> KafkaRequest | None:
    """`decode_known_request` by the compiled reader (`native_reader`), or None.

    None where it is not built, the header or body is not one it reads plainly (a tagged
    field, a null where a value is due, anything malformed), or `_read` is replaced: the
    caller then reads the frame with `decode_known_request`, which gives the result or the
    error. Where it reads a frame, it reads what the generated readers read (tests).
    """
    if _read is not _GENERATED_READ or type(frame) is not bytes:
        return None
    plan = _READ_PLANS.get((api_key, version)) or _read_plan(api_key, version)
    return _natively(frame, api_key, version, plan)


def _natively(frame: bytes, api_key: int, version: int, plan: _ReadPlan) -> KafkaRequest | None:
    """`decode_natively` with the plan found (and `_read` and the frame's type checked)."""
    native = plan.native
    if native is None:
        return None
    try:
        correlation_id, client_id, body = native.plain_request(frame, plan.flexible)
    except Exception:
        return None
    # It reads no null where a value is due: `missing_required` has nothing to find.
    return _request(_plain_header(api_key, version, correlation_id, client_id), body)  # type: ignore[no-any-return]


def decode_known_request(frame: bytes | memoryview, api_key: int, version: int) -> KafkaRequest:
    """`decode_request` of a frame whose header `peek_header` has read already."""
    plan = _READ_PLANS.get((api_key, version)) or _read_plan(api_key, version)
    if plan.plain_body is not None and _read is _GENERATED_READ and type(frame) is bytes:
        # The common case, by the compiled reader, else by the generated readers straight;
        # `_read` replaced (by kio's readers, as `bench/decode_bench.py` does for its
        # baseline) reads everything itself.
        natively = _natively(frame, api_key, version, plan)
        if natively is not None:
            return natively
        try:
            return _read_plain(frame, api_key, version, plan)
        except Exception:  # read again below: the same result or error as ever
            pass
    header_class, body_class = plan.header_class, plan.body_class
    try:
        header, body = _read(frame, header_class, body_class)
    except Exception as exc:  # kio raises several error types (and ValueError) on bad bytes
        # kio refuses tagged fields it does not know, where Kafka ignores them (a newer
        # client's optional extras): without them, the frame is read again once.
        malformed = ProtocolError(f"malformed {_name(api_key)} v{version} request: {exc}")
        try:
            stripped = strip_unknown_tags(frame, body_class)
        except Malformed:
            raise malformed from None
        if stripped == frame:  # no unknown tag: the frame is malformed as it is
            raise malformed from None
        try:
            header, body = _read(stripped, header_class, body_class)
        except Exception:
            raise malformed from None
    missing = missing_required(body)
    if missing is not None:
        raise ProtocolError(f"malformed {_name(api_key)} v{version} request: {missing} is null")
    write_id = None
    raw = getattr(header, "write_id", b"")
    if raw:
        write_id = parse_write_id(raw, f"{_name(api_key)} v{version}")
    return KafkaRequest(
        header=RequestHeader(
            api_key=api_key,
            api_version=version,
            correlation_id=int(header.correlation_id),
            client_id=header.client_id,
            write_id=write_id,
        ),
        body=body,
    )


def _read(frame: bytes | memoryview, header_class: Any, body_class: Any) -> tuple[Any, Any]:
    # Through the generated readers first: kio's own would abort the process on an array
    # count beyond the frame (see `generated_reader`). Bytes after the body are ignored, as
    # Kafka's own parser ignores them (librdkafka 2.x sends three after a Metadata v13 body).
    return read_request(frame, header_class, body_class)


_GENERATED_READ = _read
"""`_read` as the server has it (the generated readers): `_read_plain` stands aside when
another reader replaces it."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A response as the plain values `build` takes, written without building the entity.

    Handlers answer with these: `encode_response` writes the values straight to bytes (the
    same bytes as the built entity's), and `entity` builds the entity for those who want one.
    """

    entity_class: type[Any]
    values: dict[str, Any]

    def entity(self) -> Any:
        """The kio entity `build` makes of the values."""
        return build(self.entity_class, **self.values)


new_answer: Callable[[type[Any], dict[str, Any]], Answer] = preset_constructor(
    Answer, ("entity_class", "values")
)
"""`Answer(entity_class, values)` stored through its slots (a handler's answer, every request)."""


def encode_response(correlation_id: int, body: Any) -> bytes:
    """A response frame (int32 size first) with the header version its API and version use.

    `body` is an entity or an `Answer`.
    """
    if type(body) is Answer:
        entity_class = body.entity_class
        found = _ANSWER_WRITERS.get(entity_class) or _answer_writer(entity_class)
        head, plain, native = found
        if native is not None:
            # The compiled writer (`native_writer`); None where it gives up: written below.
            frame: bytes | None = native.frame(head, correlation_id, body.values)
            if frame is not None:
                return frame
        buffer = bytearray(head)
        _INT32.pack_into(buffer, 4, correlation_id)
        if plain is not None:
            plain(buffer, body.values)
        else:  # pragma: no cover - every supported answer has a plain writer
            writer_for(entity_class)(buffer, body.entity())  # type: ignore[arg-type]
    else:
        entity_class = type(body)
        buffer = bytearray(_response_head(entity_class))
        _INT32.pack_into(buffer, 4, correlation_id)
        writer_for(entity_class)(buffer, body)  # type: ignore[arg-type]  # classes are hashable
    _INT32.pack_into(buffer, 0, len(buffer) - 4)
    return bytes(buffer)


_ANSWER_WRITERS: dict[type[Any], tuple[bytes, Callable[[bytearray, Any], None] | None, Any]] = {}
"""Per response class: its frame's first bytes (size and correlation id to be filled in, the
header's empty tag section where it has one), its plain-value writer (None: unsupported) and
its compiled one (`native_writer`, None where there is none)."""


def _response_head(entity_class: type[Any]) -> bytes:
    """Size, correlation id and, for response header v1, its empty tagged-fields section."""
    return bytes(9) if entity_class.__header_schema__.__flexible__ else bytes(8)


def _answer_writer(
    entity_class: type[Any],
) -> tuple[bytes, Callable[[bytearray, Any], None] | None, Any]:
    try:
        plain: Callable[[bytearray, Any], None] | None = dict_writer_for(entity_class)  # type: ignore[arg-type]  # classes are hashable
    except Unsupported:  # pragma: no cover - every supported answer has a plain writer
        plain = None
    native = native_writer(entity_class) if plain is not None else None  # type: ignore[arg-type]  # classes are hashable
    found = _ANSWER_WRITERS[entity_class] = (_response_head(entity_class), plain, native)
    return found


def encode_response_with_kio(correlation_id: int, body: Any) -> bytes:
    """`encode_response` through kio's own writer: the reference the generated writer must match."""
    if type(body) is Answer:
        body = body.entity()
    header_class = type(body).__header_schema__
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(header_class)(buffer, header_class(correlation_id=correlation_id))
    entity_writer(type(body))(buffer, body)
    data = buffer.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def encode_request(
    body: Any,
    *,
    correlation_id: int,
    client_id: str | None = "metadata-log",
    write_id: bytes | None = None,
) -> bytes:
    """A request frame (int32 size first): for tests and tools that speak to a server.

    `write_id` (`write_id_bytes`) goes in the header's `WRITE_ID_TAG` (flexible versions only).
    """
    header_class = type(body).__header_schema__
    if write_id is not None:
        header_class = _HEADERS.get(header_class, header_class)
    fields = {f.name for f in dataclasses.fields(header_class)}
    values: dict[str, Any] = {
        "request_api_key": int(body.__api_key__),
        "request_api_version": int(body.__version__),
        "correlation_id": correlation_id,
        "client_id": client_id,
        "write_id": write_id,
    }
    header = header_class(**{k: v for k, v in values.items() if k in fields})
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(header_class)(buffer, header)
    entity_writer(type(body))(buffer, body)
    data = buffer.getbuffer()
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def decode_response(api_key: int, version: int, frame: bytes | memoryview) -> tuple[int, Any]:
    """Correlation id and body of a response frame (without its size).

    The quorum's links read their answers here (a follower each fetch answer), and so do
    tests and tools. The compiled reader reads the plain case (`native_reader`: no tagged
    header field, no null where a value is due); anything else, or a frame it gives up, is
    read by the generated readers, as before, with their result or error.
    """
    natively = decode_response_natively(api_key, version, frame)
    if natively is not None:
        return natively
    body_class = response_class(api_key, version)
    try:
        header, body = read_response(frame, body_class)
    except Exception as exc:
        # A newer server's tagged fields this client does not know: Kafka's clients skip
        # them, so the frame is read again once without them (else the error stands).
        try:
            stripped = strip_unknown_response_tags(frame, body_class)
        except Malformed:
            raise exc from None
        if stripped == bytes(frame):
            raise
        header, body = read_response(stripped, body_class)
    return int(header.correlation_id), body


def decode_response_natively(
    api_key: int, version: int, frame: bytes | memoryview
) -> tuple[int, Any] | None:
    """`decode_response` by the compiled reader, or None.

    None where it is not built, the frame is not `bytes`, or it gives up (a tagged header
    field, a null where a value is due, anything malformed): the generated readers then read
    it. Where it reads a frame, it reads what they read (tests).
    """
    if type(frame) is not bytes:
        return None
    body_class = response_class(api_key, version)
    native = native_reader(body_class)  # type: ignore[arg-type]  # classes are hashable
    if native is None:
        return None
    try:
        return native.plain_response(frame, body_class.__header_schema__.__flexible__)  # type: ignore[attr-defined,no-any-return]  # the compiled Reader
    except Exception:
        return None


def api_versions_error(
    correlation_id: int, extra: Mapping[int, tuple[int, int]] | None = None
) -> bytes:
    """Kafka's answer to an ApiVersions request of a version it does not know.

    A v0 body (v0 response header) with UNSUPPORTED_VERSION and the supported ranges (with
    `extra`, the private APIs').
    """
    body = build(
        response_class(API_VERSIONS_KEY, 0),
        error_code=35,
        api_keys=supported_api_keys(extra),
    )
    return encode_response(correlation_id, body)


def supported_api_keys(extra: Mapping[int, tuple[int, int]] | None = None) -> list[dict[str, int]]:
    """The ApiVersions `api_keys` list: every supported API with its version range."""
    ranges = dict(SUPPORTED_VERSIONS)
    if extra:
        ranges.update(extra)
    return [
        {"api_key": key, "min_version": low, "max_version": high}
        for key, (low, high) in sorted(ranges.items())
    ]


# --------------------------------------------------------------------------- building


def build(entity_class: type[Any], /, **values: Any) -> Any:
    """An entity of `entity_class` from plain values, keeping only the fields it has.

    Nested entities are given as dicts (or lists of dicts) and built with the nested class of
    the same version; ints become error codes, `timedelta`s or `UUID`s where the field wants
    one. A field that is absent and has no default is an error (a handler bug).
    """
    converters = _converters(entity_class)  # type: ignore[arg-type]  # classes are hashable
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        convert = converters.get(name)
        plain = value.value if type(value) is Encoded else value
        if convert is not None:
            kwargs[name] = None if plain is None else convert(plain)
    return entity_class(**kwargs)


def _build_dict(nested: type[Any]) -> Callable[[dict[str, Any]], Any]:
    def build_one(value: dict[str, Any]) -> Any:
        return build(nested, **value)

    return build_one


@cache
def _converters(entity_class: type[Any]) -> dict[str, Callable[[Any], Any]]:
    """Per field, the conversion of a non-null plain value (chosen once per class)."""
    return {
        name: _converter(kind, nested)
        for name, (kind, nested) in _field_kinds(entity_class).items()  # type: ignore[arg-type]
    }


def _converter(kind: int, nested: type[Any] | None) -> Callable[[Any], Any]:
    if kind == _ERROR:
        return _error_code
    if kind == _DELTA:
        return _delta
    if kind == _UUID:
        return _uuid
    if kind in (_ENTITY, _ENTITIES):
        assert nested is not None
        one = _build_dict(nested)
        if kind == _ENTITY:
            return lambda value: one(value) if type(value) is dict else value

        def many(value: Any) -> Any:
            if type(value) is tuple and not any(type(v) is dict for v in value):
                return value  # built already: kept as the same object (the writer may know it)
            return tuple(one(v) if type(v) is dict else v for v in value)

        return many
    return _plain


def nested_class(entity_class: type[Any], field: str) -> type[Any]:
    """The entity class of a nested field (an entity or an array of entities)."""
    _, nested = _field_kinds(entity_class)[field]  # type: ignore[arg-type]  # hashable
    if nested is None:
        raise TypeError(f"{entity_class.__name__}.{field} holds no entities")
    return nested


_PLAIN, _ERROR, _DELTA, _UUID, _ENTITY, _ENTITIES = range(6)

_ERROR_CODES: dict[int, KioErrorCode] = {int(code): code for code in KioErrorCode}


def _error_code(value: Any) -> KioErrorCode:
    code = _ERROR_CODES.get(value)  # ints and IntEnums hash and compare as their value
    return code if code is not None else KioErrorCode(int(value))


def _delta(value: Any) -> Any:
    if not isinstance(value, datetime.timedelta):
        value = datetime.timedelta(milliseconds=int(value))
    return i32Timedelta.parse(value)


def _uuid(value: Any) -> uuid.UUID:
    return value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=bytes(value))


def _plain(value: Any) -> Any:
    return tuple(value) if type(value) is list else value


@cache
def _field_kinds(entity_class: type[Any]) -> dict[str, tuple[int, type[Any] | None]]:
    hints = typing.get_type_hints(entity_class)
    kinds: dict[str, tuple[int, type[Any] | None]] = {}
    for field in dataclasses.fields(entity_class):
        kinds[field.name] = _kind(hints[field.name])
    return kinds


def _kind(hint: Any) -> tuple[int, type[Any] | None]:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _kind(args[0])
    if origin is tuple and args and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
        return _ENTITIES, args[0]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _ENTITY, hint
    if hint is KioErrorCode:
        return _ERROR, None
    if hint is i32Timedelta:
        return _DELTA, None
    if hint is uuid.UUID:
        return _UUID, None
    return _PLAIN, None


def _name(api_key: int) -> str:
    return API_NAMES.get(api_key, f"API {api_key}")
