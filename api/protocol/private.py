"""Our own APIs on private API keys: Kafka framing, Avro bodies (sans-IO, shared by both ends).

A private request is a Kafka frame: int32 size, request header v1 (API key, version,
correlation id, client id), then the request's Avro body. The response is int32 size,
response header v0 (correlation id), a `PrivateStatus` body, and, when its `error_code` is 0,
the response's Avro body. The write APIs' newer versions (`PrivateApi.flexible_from` on) are
flexible, as Kafka's are: request header v2 (header v1 and tagged fields, where an idempotent
write carries its id in `codec.WRITE_ID_TAG`) and response header v1 (correlation id and
tagged fields, none so far); their bodies are the same Avro as the version before.

The bodies are the dataclasses the controller itself takes and returns
(`replay.controller.commands`) or the few defined here, bound to Avro by `avro_bind`; their
schemas are listed in docs/server.md and pinned by a golden test.

Keys start at 10,000, far above Kafka's own (below 100 today), so a future Kafka API cannot
collide with them. ApiVersions advertises them with their versions.

Log entries (FetchLog) and image records (ImageAt) travel as one Avro block body of log
entries in the server's entry schema, the same bytes a segment holds. The schema (about 8 KB)
is sent only when the request's `schema_id` is not the server's, so a follower pays for it
once.

The wire carries records and plain values only: the server turns an image into its records,
the client replays them into an image, and the time-travel values (`Change`, `Entity`,
`HistoryEntry`) are plain forms of replay's, converted at both ends (`api.server.time_travel`,
`api.client.time_travel`). So the codec imports none of replay's image, delta or time travel,
only the domain's commands and errors (`replay.controller`).
"""

from __future__ import annotations

import functools
import hashlib
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from api.protocol.avro_bind import BindError, binding
from api.protocol.codec import WRITE_ID_TAG, ProtocolError, RequestHeader, parse_write_id
from api.protocol.generated_reader_runtime import Refused, read_uvarint
from api.protocol.generated_writer import uvarint
from records.codec import RecordCodec
from records.entry import LogEntry, make_entry
from records.errors import MetadataLogError
from records.model import Record
from records.uuids import Uuid
from replay.controller.commands import (
    BrokerAction,
    BrokerResult,
    CancelPartitionDeletion,
    CancelPartitionDeletionResult,
    CreateNamespace,
    CreateNamespaceResult,
    DeleteNamespace,
    DeleteNamespaceResult,
    DeletePartitionsResult,
    DeletePartitionsTopic,
    MoveTopic,
    MoveTopicResult,
    NamespaceInfo,
    PurgeResult,
    RegisterBroker,
)

# ---------------------------------------------------------------------- bodies


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivateStatus:
    """The first part of every private response: the error (0 and None when it succeeded)."""

    error_code: int = 0
    error_message: str | None = None
    """The text the embedded CLI prints for this error (`mlog: error: <text>`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListNamespaces:
    """The namespaces directly under `namespace` (all below it with `recursive`)."""

    namespace: str | None = None
    recursive: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class NamespaceList:
    """The answer to ListNamespaces."""

    namespaces: tuple[NamespaceInfo, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletePartitions:
    """Lower topics' partition counts (the partition reduction: READ_ONLY, NONE, removed)."""

    topics: tuple[DeletePartitionsTopic, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DeletePartitionsResponse:
    """One result per topic of a DeletePartitions."""

    results: tuple[DeletePartitionsResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelPartitionDeletions:
    """Cancel topics' pending partition deletions (before their purge time)."""

    topics: tuple[CancelPartitionDeletion, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelPartitionDeletionsResponse:
    """One result per topic of a CancelPartitionDeletions."""

    results: tuple[CancelPartitionDeletionResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgePending:
    """Run one check of pending partition deletions now."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PurgePendingResponse:
    """What one check of pending deletions did, one result per topic."""

    results: tuple[PurgeResult, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeBroker:
    """Fence, unfence, shut down or unregister a broker."""

    broker_id: int
    action: BrokerAction


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchLog:
    """Entries from `offset` on; waits up to `max_wait_ms` when there is none yet."""

    offset: int
    max_entries: int = 10_000
    max_wait_ms: int = 0
    schema_id: str | None = None
    """The id of the entry schema the client already has (the schema is then not sent)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryBlock:
    """Log entries as one Avro block body, with the schema they are written in."""

    schema_id: str
    schema: str | None
    """The entry schema's JSON, or None when the request named it by `schema_id`."""
    count: int
    body: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchLogResponse:
    """The answer to FetchLog: entries (possibly none) and the log's end."""

    end_offset: int
    """The offset the next appended entry gets (the log's end when answered)."""
    entries: EntryBlock


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageAt:
    """The image after offset `at_offset`, or at `at_time` (ISO-8601 or epoch ms); else now."""

    at_offset: int | None = None
    at_time: str | None = None
    schema_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageResponse:
    """An image as the records that rebuild it from empty, and where in the log it stands."""

    offset: int
    epoch: int
    timestamp: int
    records: EntryBlock


@dataclass(frozen=True, slots=True, kw_only=True)
class Diff:
    """What changed between two points (offsets or ISO-8601 times); `to` None is the end."""

    from_point: str
    to_point: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One difference between two images, as the Diff API carries `replay.changes.Change`."""

    op: str
    kind: str
    name: str
    id: str | None = None
    fields: tuple[tuple[str, Any, Any], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Entity:
    """What History follows (`replay.timetravel.Entity`, checked there): one field is set."""

    topic: str | None = None
    topic_id: Uuid | None = None
    namespace: str | None = None
    broker: int | None = None
    user: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryEntry:
    """One log entry that touched an entity (`replay.timetravel.HistoryEntry`)."""

    offset: int
    timestamp: int
    principal: str | None
    record_type: str
    description: str
    topic_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffResponse:
    """The changes between two offsets (`from_offset` may be after `to_offset`)."""

    from_offset: int
    to_offset: int
    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class History:
    """Every entry that touched `entity`, with `gt < offset <= lte`, at most `limit`."""

    entity: Entity
    gt: int | None = None
    lte: int | None = None
    limit: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryResponse:
    """The entries that touched an entity, oldest first."""

    entries: tuple[HistoryEntry, ...]


# ---------------------------------------------------------------------- older versions


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeLogDigest:
    """The hash chain's digest at `offset` (a block's last offset; -1: the committed offset)."""

    offset: int = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class LogDigestResponse:
    """The answer to DescribeLogDigest: the digest (docs/verifiable-history.md)."""

    offset: int
    """The last offset the digest covers: a block's last offset (-1: nothing committed)."""
    chain: bytes
    """The chain value after that block (32 bytes; empty when nothing is committed)."""
    token: str
    """The digest's text form, `mlog-digest:v1:<offset>:<hex>` (empty when none)."""
    committed_offset: int
    """The node's committed offset when it answered."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _EntityV0:
    """`Entity` as History v0 carries it: before users could be followed."""

    topic: str | None = None
    topic_id: Uuid | None = None
    namespace: str | None = None
    broker: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _HistoryV0:
    """History v0's request body."""

    entity: _EntityV0
    gt: int | None = None
    lte: int | None = None
    limit: int | None = None


def _history_from_v0(old: _HistoryV0) -> History:
    entity = old.entity
    return History(
        entity=Entity(
            topic=entity.topic,
            topic_id=entity.topic_id,
            namespace=entity.namespace,
            broker=entity.broker,
        ),
        gt=old.gt,
        lte=old.lte,
        limit=old.limit,
    )


def _history_to_v0(new: History) -> _HistoryV0:
    entity = new.entity
    if entity.user is not None:
        raise OlderVersionError(
            "the server answers History v0 only, which cannot follow a user; upgrade the server"
        )
    return _HistoryV0(
        entity=_EntityV0(
            topic=entity.topic,
            topic_id=entity.topic_id,
            namespace=entity.namespace,
            broker=entity.broker,
        ),
        gt=new.gt,
        lte=new.lte,
        limit=new.limit,
    )


class OlderVersionError(ValueError):
    """A request that the older version of its API the server speaks cannot carry."""


@dataclass(frozen=True, slots=True)
class OlderRequest:
    """An older version's request body, and the conversions to and from the current one."""

    cls: type[Any]
    up: Callable[[Any], Any]
    """Older body -> the current request (what the handlers take)."""
    down: Callable[[Any], Any]
    """Current request -> older body; `OlderVersionError` if the older one cannot say it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeBrokerLiveness:
    """What the active controller knows of the brokers' sessions (`mlog brokers list`)."""

    broker_ids: tuple[int, ...] = ()
    """The brokers to describe; empty: every one with a session."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerLivenessItem:
    """One broker's session on the active controller."""

    broker_id: int
    last_heartbeat_ms: int
    """Wall-clock time of its last heartbeat (or of the session's start), ms since the epoch."""
    metadata_offset: int
    """The metadata offset it last reported; -1 before its first heartbeat."""
    fenced_reason: str | None = None
    """Why this controller fenced it, or None."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerLivenessList:
    """The answer to DescribeBrokerLiveness."""

    active: bool
    """Whether the answering node is the active controller (only it keeps sessions)."""
    brokers: tuple[BrokerLivenessItem, ...]


# ---------------------------------------------------------------------- the APIs


@dataclass(frozen=True, slots=True)
class PrivateApi:
    """One private API: key, name, versions, request and response classes."""

    key: int
    name: str
    request: type[Any]
    response: type[Any]
    writes: bool
    """Whether it appends records (answered after they are durable)."""
    min_version: int = 0
    max_version: int = 0
    older: Mapping[int, OlderRequest] = field(default_factory=dict)
    """Request bodies of versions below `max_version` that differ from the current one
    (responses are the same in every version so far)."""
    flexible_from: int | None = None
    """The first flexible version (request header v2, response header v1), or None."""

    def flexible(self, version: int) -> bool:
        """Whether `version`'s headers have tagged fields (and so can carry a write id)."""
        return self.flexible_from is not None and version >= self.flexible_from


def _write_api(key: int, name: str, request: type[Any], response: type[Any]) -> PrivateApi:
    """A write API: v0 with request header v1; v1, the same bodies, flexible (a write id)."""
    return PrivateApi(key, name, request, response, True, max_version=1, flexible_from=1)


# Every write API: v1 is v0 with flexible headers, so an idempotent write carries its id.
CREATE_NAMESPACE = _write_api(10000, "CreateNamespace", CreateNamespace, CreateNamespaceResult)
DELETE_NAMESPACE = _write_api(10001, "DeleteNamespace", DeleteNamespace, DeleteNamespaceResult)
LIST_NAMESPACES = PrivateApi(10002, "ListNamespaces", ListNamespaces, NamespaceList, False)
MOVE_TOPIC = _write_api(10003, "MoveTopic", MoveTopic, MoveTopicResult)
DELETE_PARTITIONS = _write_api(
    10004, "DeletePartitions", DeletePartitions, DeletePartitionsResponse
)
PURGE_PENDING = _write_api(10005, "PurgePending", PurgePending, PurgePendingResponse)
REGISTER_BROKER = _write_api(10006, "RegisterBroker", RegisterBroker, BrokerResult)
CHANGE_BROKER = _write_api(10007, "ChangeBroker", ChangeBroker, BrokerResult)
CANCEL_PARTITION_DELETIONS = _write_api(
    10008,
    "CancelPartitionDeletions",
    CancelPartitionDeletions,
    CancelPartitionDeletionsResponse,
)
FETCH_LOG = PrivateApi(10010, "FetchLog", FetchLog, FetchLogResponse, False)
IMAGE_AT = PrivateApi(10011, "ImageAt", ImageAt, ImageResponse, False)
DIFF = PrivateApi(10012, "Diff", Diff, DiffResponse, False)
HISTORY = PrivateApi(
    10013,
    "History",
    History,
    HistoryResponse,
    False,
    min_version=0,
    max_version=1,  # v1: an entity may be a user
    older={0: OlderRequest(_HistoryV0, _history_from_v0, _history_to_v0)},
)

DESCRIBE_BROKER_LIVENESS = PrivateApi(
    10014, "DescribeBrokerLiveness", DescribeBrokerLiveness, BrokerLivenessList, False
)

DESCRIBE_LOG_DIGEST = PrivateApi(
    10015, "DescribeLogDigest", DescribeLogDigest, LogDigestResponse, False
)

PRIVATE_APIS: Mapping[int, PrivateApi] = {
    api.key: api
    for api in (
        CREATE_NAMESPACE,
        DELETE_NAMESPACE,
        LIST_NAMESPACES,
        MOVE_TOPIC,
        DELETE_PARTITIONS,
        PURGE_PENDING,
        REGISTER_BROKER,
        CHANGE_BROKER,
        CANCEL_PARTITION_DELETIONS,
        FETCH_LOG,
        IMAGE_AT,
        DIFF,
        HISTORY,
        DESCRIBE_BROKER_LIVENESS,
        DESCRIBE_LOG_DIGEST,
    )
}

PRIVATE_VERSIONS: Mapping[int, tuple[int, int]] = {
    key: (api.min_version, api.max_version) for key, api in PRIVATE_APIS.items()
}
"""What ApiVersions advertises for the private APIs."""

MAX_FETCH_ENTRIES = 50_000
"""The most entries one FetchLog answer carries (a larger `max_entries` is capped)."""

MAX_FETCH_WAIT_MS = 60_000
"""The longest a FetchLog waits for new entries (a longer `max_wait_ms` is capped)."""

_STATUS = binding(PrivateStatus)
_SIZE = struct.Struct(">i")


# ---------------------------------------------------------------------- frames


def encode_request(
    api: PrivateApi,
    request: Any,
    *,
    correlation_id: int,
    client_id: str | None = "mlog",
    version: int | None = None,
    write_id: bytes | None = None,
) -> bytes:
    """A private request frame (int32 size first) in `version` (default: newest).

    Header v1, or v2 in a flexible version, whose tagged fields carry `write_id`
    (`codec.write_id_bytes`) when given. Raises `OlderVersionError` if the version cannot
    carry the request or the write id.
    """
    if not isinstance(request, api.request):
        raise TypeError(f"{api.name} takes a {api.request.__name__}, not {type(request).__name__}")
    version = api.max_version if version is None else version
    flexible = api.flexible(version)
    if write_id is not None and not flexible:
        raise OlderVersionError(
            f"{api.name} v{version} has no tagged fields to carry a write id (v"
            f"{api.flexible_from} and later have)"
        )
    older = api.older.get(version)
    body = (
        binding(api.request).encode(request)
        if older is None
        else binding(older.cls).encode(older.down(request))
    )
    client = None if client_id is None else client_id.encode()
    header = struct.pack(
        ">hhih", api.key, version, correlation_id, -1 if client is None else len(client)
    )
    tags = _tags({WRITE_ID_TAG: write_id} if write_id is not None else {}) if flexible else b""
    payload = b"".join((header, client or b"", tags, body))
    return _SIZE.pack(len(payload)) + payload


def _tags(fields: Mapping[int, bytes]) -> bytes:
    """A tagged-fields section (KIP-482): the count, then each tag, size and value by tag."""
    out = bytearray()
    uvarint(out, len(fields))
    for tag, value in sorted(fields.items()):
        uvarint(out, tag)
        uvarint(out, len(value))
        out += value
    return bytes(out)


def _read_tags(frame: bytes, pos: int) -> tuple[dict[int, bytes], int]:
    """The tagged fields at `pos` and the position after them; `ProtocolError` if malformed."""
    try:
        count, pos = read_uvarint(frame, pos)
        fields: dict[int, bytes] = {}
        for _ in range(count):
            tag, pos = read_uvarint(frame, pos)
            size, pos = read_uvarint(frame, pos)
            if pos + size > len(frame):
                raise ProtocolError("malformed header: a tagged field goes past the frame")
            fields[tag] = frame[pos : pos + size]
            pos += size
    except (Refused, IndexError):
        raise ProtocolError("malformed header: its tagged fields are cut short") from None
    return fields, pos


def decode_request_body(api: PrivateApi, body: bytes, version: int | None = None) -> Any:
    """The request of `api` from its Avro body in `version` (default: newest).

    An older version's body comes back as the current request class. Raises `BindError` (or
    a validation error) if the body is bad.
    """
    older = None if version is None else api.older.get(version)
    if older is None:
        return binding(api.request).decode(body)
    return older.up(binding(older.cls).decode(body))


def encode_response(
    correlation_id: int,
    api: PrivateApi,
    response: Any = None,
    *,
    status: PrivateStatus | None = None,
    version: int | None = None,
) -> bytes:
    """A private response frame to a request in `version` (default: newest).

    Header v0 (v1, with no tagged fields, in a flexible version), the status, then the body
    when it succeeded.
    """
    status = status or PrivateStatus()
    version = api.max_version if version is None else version
    header = _SIZE.pack(correlation_id) + (b"\0" if api.flexible(version) else b"")
    parts = [header, _STATUS.encode(status)]
    if status.error_code == 0:
        parts.append(binding(api.response).encode(response))
    payload = b"".join(parts)
    return _SIZE.pack(len(payload)) + payload


def decode_response(
    api: PrivateApi, frame: bytes, version: int | None = None
) -> tuple[int, PrivateStatus, Any]:
    """Correlation id, status and body (None on error) of a response frame without its size.

    `version` is the request's (default: newest): a flexible one's header has tagged fields.
    """
    if len(frame) < 4:
        raise ProtocolError(f"a {api.name} response of {len(frame)} bytes has no header")
    (correlation_id,) = _SIZE.unpack_from(frame, 0)
    start = 4
    if api.flexible(api.max_version if version is None else version):
        _, start = _read_tags(frame, start)  # none is defined yet: skipped, as Kafka does
    try:
        status, used = _STATUS.decode_prefix(frame[start:])
    except BindError as exc:
        raise ProtocolError(str(exc)) from None
    if status.error_code != 0:
        return correlation_id, status, None
    try:
        body = binding(api.response).decode(frame[start + used :])
    except BindError as exc:
        raise ProtocolError(str(exc)) from None
    return correlation_id, status, body


def private_header(
    frame: bytes, api_key: int, version: int, correlation_id: int
) -> tuple[RequestHeader, bytes]:
    """The header of a private request frame and its body bytes; `ProtocolError` if malformed.

    Header v1, or v2 in a flexible version: its tagged fields may hold a write id
    (`codec.WRITE_ID_TAG`); tags this server does not know are skipped, as Kafka skips them.
    """
    if len(frame) < 10:
        raise ProtocolError(f"a request of {len(frame)} bytes is too short for a header")
    (length,) = struct.unpack_from(">h", frame, 8)
    start = 10 + max(length, 0)
    if length < -1 or start > len(frame):
        raise ProtocolError("malformed request header: bad client id length")
    try:
        client_id = None if length < 0 else frame[10:start].decode()
    except UnicodeDecodeError:
        raise ProtocolError("malformed request header: the client id is not UTF-8") from None
    write_id = None
    if PRIVATE_APIS[api_key].flexible(version):
        tags, start = _read_tags(frame, start)
        raw = tags.get(WRITE_ID_TAG)
        if raw is not None:
            write_id = parse_write_id(raw, f"{PRIVATE_APIS[api_key].name} v{version}")
    header = RequestHeader(
        api_key=api_key,
        api_version=version,
        correlation_id=correlation_id,
        client_id=client_id,
        write_id=write_id,
    )
    return header, frame[start:]


# ---------------------------------------------------------------------- entries and images


@functools.lru_cache(maxsize=16)
def schema_id(schema_json: str) -> str:
    """A short id of an entry schema (its SHA-256, hex, first 16 characters)."""
    return hashlib.sha256(schema_json.encode()).hexdigest()[:16]


def block_of(schema_json: str, count: int, body: bytes, known: str | None) -> EntryBlock:
    """An `EntryBlock`; the schema is left out when the client knows it (`known`)."""
    ident = schema_id(schema_json)
    return EntryBlock(
        schema_id=ident, schema=None if known == ident else schema_json, count=count, body=body
    )


def entry_block(
    codec: RecordCodec,
    entries: Iterable[tuple[int, int, int, str | None, Record]],
    known: str | None,
) -> EntryBlock:
    """Entries encoded as one `EntryBlock` in the codec's schema."""
    count, body = codec.encode_entries(entries)
    return block_of(codec.entry_schema_json, count, body, known)


class EntryDecoder:
    """Decodes `EntryBlock`s, remembering the schemas it has been sent."""

    def __init__(self, codec: RecordCodec | None = None) -> None:
        self.codec = codec or RecordCodec()
        self._schemas: dict[str, str] = {}
        self.known: str | None = None
        """The id of the last schema seen: send it as `schema_id` in the next request."""

    def decode(self, block: EntryBlock, *, lo: int = 0, hi: int | None = None) -> list[LogEntry]:
        """The entries of a block with `lo <= offset <= hi`.

        Raises `ProtocolError` if the block's schema was never sent or its body does not
        decode. The entries come through the compiled block decoder (no dicts).
        """
        if block.schema is not None:
            self._schemas[block.schema_id] = block.schema
        schema = self._schemas.get(block.schema_id)
        if schema is None:
            raise ProtocolError(f"the server sent entries in schema {block.schema_id}, never sent")
        self.known = block.schema_id
        if block.count == 0 and not block.body:
            return []
        try:
            decoded = self.codec.decode_block(
                block.count, block.body, self.codec.reader_array_schema(schema)
            )
        except MetadataLogError as exc:
            raise ProtocolError(f"entries that do not decode: {exc}") from None
        rows = zip(
            decoded.offsets,
            decoded.epochs,
            decoded.timestamps,
            decoded.principals,
            decoded.records,
            strict=True,
        )
        return [
            make_entry(offset, epoch, timestamp, principal, record)
            for offset, epoch, timestamp, principal, record in rows
            if lo <= offset and (hi is None or offset <= hi)
        ]


def schemas_document() -> dict[str, Any]:
    """Every private API's key, versions and Avro schemas (docs/private_apis.json)."""
    document: dict[str, Any] = {
        api.name: {
            "key": api.key,
            "versions": [api.min_version, api.max_version],
            **({"flexible_from": api.flexible_from} if api.flexible_from is not None else {}),
            "request": binding(api.request).schema,
            "response": binding(api.response).schema,
            **(
                {
                    "older_requests": {
                        str(version): binding(older.cls).schema
                        for version, older in sorted(api.older.items())
                    }
                }
                if api.older
                else {}
            ),
        }
        for api in PRIVATE_APIS.values()
    }
    document["PrivateStatus"] = {"schema": _STATUS.schema}
    return document


if __name__ == "__main__":  # pragma: no cover - regenerates docs/private_apis.json
    import json
    import sys

    json.dump(schemas_document(), sys.stdout, indent=2)
    sys.stdout.write("\n")
