"""`AdminClient`: an asyncio client for every API `mlog serve` answers.

One TCP connection, asyncio streams only. Requests may be pipelined: the server answers a
connection's requests in order, so answers are matched to requests by correlation id in the
order they were sent. On connect the client asks ApiVersions and then uses, for each API, the
newest version both sides speak.

Kafka APIs are built and read with the protocol core's kio codec. The methods the CLI uses
return the same result dataclasses the embedded controller returns (`api.controller.commands`), so a
command prints the same thing whichever it runs against; the others return kio's response
entity. Our own APIs (`api.protocol.private`) return their Avro-bound dataclasses; a refused
request raises `RemoteError` with the code and the text the embedded CLI would print.

    async with await AdminClient.connect("127.0.0.1:9092") as client:
        (result,) = await client.create_topics([CreatableTopic(name="orders")])
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import struct
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from api.controller.commands import (
    AlterConfig,
    AlterConfigsResult,
    BrokerAction,
    BrokerResult,
    ConfigResource,
    CreatableTopic,
    CreateNamespace,
    CreateNamespaceResult,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteNamespace,
    DeleteNamespaceResult,
    DeletePartitionsResult,
    DeletePartitionsTopic,
    DeleteTopicResult,
    ElectionType,
    MoveTopic,
    MoveTopicResult,
    NamespaceInfo,
    Outcome,
    PartitionResult,
    PurgeResult,
    Reassignment,
    RegisterBroker,
    TopicPartition,
    TopicRef,
)
from api.controller.errors import ApiError, ErrorCode
from api.protocol import codec, private
from api.protocol.codec import SUPPORTED_VERSIONS, ProtocolError, build, request_class
from api.protocol.private import PRIVATE_VERSIONS, EntryDecoder, PrivateApi
from records.entry import LogEntry
from records.errors import MetadataLogError
from records.model import ConfigResourceType
from records.uuids import Uuid
from replay.image import MetadataImage
from replay.timetravel import Change, Entity, HistoryEntry

DEFAULT_TIMEOUT_MS = 30_000
"""The `timeout_ms` sent with writes, and how long the client waits for any answer."""

_SIZE = struct.Struct(">i")


def _seen(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


class ClientError(MetadataLogError):
    """The connection failed or the server answered something this client cannot read."""


class RemoteError(ApiError):
    """The server refused a request; `str()` is what the embedded CLI prints for it."""

    def __init__(self, error_code: int, text: str) -> None:
        code = _error_code(error_code)
        super().__init__(code, text)
        self.args = (text,)
        self.text = text

    def __str__(self) -> str:
        return self.text


def _error_code(value: int) -> ErrorCode:
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR


def _outcome(code: Any, message: str | None) -> Outcome:
    error = _error_code(int(code))
    return Outcome(error_code=error, error_message=message if error else None)


def _uuid(value: Any) -> Uuid:
    """A kio UUID field (None for the zero id) as our Uuid."""
    return Uuid.ZERO if value is None else Uuid(value.bytes)


def parse_bootstrap(text: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 as `[::1]:9092`) -> (host, port); `ClientError` says what is wrong."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ClientError(
            f"bootstrap server {text!r} is not HOST:PORT (for example 127.0.0.1:9092)"
        )
    return host, int(port_text)


@dataclass(slots=True)
class _Pending:
    correlation_id: int
    decode: Callable[[bytes], Any]
    future: asyncio.Future[Any]


class AdminClient:
    """An asyncio admin client over one connection (see the module docstring)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        client_id: str = "mlog",
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.client_id = client_id
        self.timeout_ms = timeout_ms
        self._ids = itertools.count(1)
        self._pending: deque[_Pending] = deque()
        self._versions: dict[int, tuple[int, int]] = {}
        self._receiver = asyncio.create_task(self._receive())
        self._closed = False
        self._entries = EntryDecoder()

    @classmethod
    async def connect(
        cls, bootstrap: str, *, client_id: str = "mlog", timeout_ms: int = DEFAULT_TIMEOUT_MS
    ) -> AdminClient:
        """Connect to `HOST:PORT` and learn the server's API versions."""
        host, port = parse_bootstrap(bootstrap)
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port), timeout_ms / 1000
            )
        except (OSError, TimeoutError) as exc:
            raise ClientError(
                f"cannot connect to {host}:{port} ({exc or 'timed out'}); is `mlog serve` "
                "running there?"
            ) from None
        client = cls(reader, writer, client_id=client_id, timeout_ms=timeout_ms)
        try:
            await client._negotiate()
        except BaseException:
            await client.close()
            raise
        return client

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection; requests still waiting fail with `ClientError`."""
        if self._closed:
            return
        self._closed = True
        self._receiver.cancel()
        with contextlib.suppress(BaseException):
            await self._receiver
        self._fail_pending(ClientError("the connection is closed"))
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()

    # ------------------------------------------------------------------ transport

    async def _negotiate(self) -> None:
        body = build(
            request_class(codec.API_VERSIONS_KEY, 3),
            client_software_name="metadata-log",
            client_software_version="1",
        )
        response = await self._kafka(body)
        if int(response.error_code) != 0:
            raise ClientError(f"ApiVersions failed with error {int(response.error_code)}")
        self._versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in response.api_keys
        }

    def version(self, api_key: int) -> int:
        """The newest version of an API both this client and the server speak."""
        ours = SUPPORTED_VERSIONS.get(api_key) or PRIVATE_VERSIONS.get(api_key)
        theirs = self._versions.get(api_key)
        if ours is None or theirs is None or max(ours[0], theirs[0]) > min(ours[1], theirs[1]):
            raise ClientError(
                f"the server does not answer API {codec.API_NAMES.get(api_key, api_key)} in a "
                "version this client speaks; is it `mlog serve` of a matching release?"
            )
        return min(ours[1], theirs[1])

    async def _send(
        self,
        frame: bytes,
        correlation_id: int,
        decode: Callable[[bytes], Any],
        timeout_ms: int | None = None,
    ) -> Any:
        timeout_ms = self.timeout_ms if timeout_ms is None else timeout_ms
        if self._closed:
            raise ClientError("the connection is closed")
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        # Its waiter may be gone (a timeout, an interrupt) when the answer or a failure comes:
        # mark the outcome seen, so asyncio does not report it as never retrieved.
        future.add_done_callback(_seen)
        self._pending.append(_Pending(correlation_id, decode, future))
        self._writer.write(frame)
        try:
            await self._writer.drain()
            return await asyncio.wait_for(asyncio.shield(future), timeout_ms / 1000)
        except TimeoutError:
            raise ClientError(f"no answer within {timeout_ms} ms") from None
        except ConnectionError as exc:
            raise ClientError(f"the connection failed: {exc}") from None

    async def _kafka(self, body: Any) -> Any:
        """Send a kio request entity; its kio response entity."""
        correlation_id = next(self._ids)
        api_key, version = int(body.__api_key__), int(body.__version__)
        frame = codec.encode_request(body, correlation_id=correlation_id, client_id=self.client_id)

        def decode(data: bytes) -> Any:
            _, response = codec.decode_response(api_key, version, data)
            return response

        return await self._send(frame, correlation_id, decode)

    async def request(self, api_key: int, **values: Any) -> Any:
        """Any Kafka API this server answers, at the newest common version (kio entities)."""
        return await self._kafka(build(request_class(api_key, self.version(api_key)), **values))

    async def call(self, api: PrivateApi, request: Any, *, timeout_ms: int | None = None) -> Any:
        """One of our own APIs; raises `RemoteError` when the server refuses it."""
        self.version(api.key)
        correlation_id = next(self._ids)
        frame = private.encode_request(
            api, request, correlation_id=correlation_id, client_id=self.client_id
        )
        _, status, body = await self._send(
            frame,
            correlation_id,
            lambda data: private.decode_response(api, data),
            max(self.timeout_ms, timeout_ms or 0),
        )
        if status.error_code != 0:
            raise RemoteError(status.error_code, status.error_message or api.name + " failed")
        return body

    async def _receive(self) -> None:
        try:
            while True:
                size = _SIZE.unpack(await self._reader.readexactly(4))[0]
                data = await self._reader.readexactly(size)
                if not self._pending:
                    raise ClientError("the server sent an answer to no request")
                pending = self._pending.popleft()
                (correlation_id,) = _SIZE.unpack_from(data, 0)
                if correlation_id != pending.correlation_id:
                    raise ClientError(
                        f"answer for request {correlation_id}, expected {pending.correlation_id}"
                    )
                if pending.future.done():
                    continue
                try:
                    pending.future.set_result(pending.decode(data))
                except (ProtocolError, MetadataLogError, ValueError, KeyError) as exc:
                    pending.future.set_exception(ClientError(f"unreadable answer: {exc}"))
        except asyncio.IncompleteReadError:
            self._fail_pending(ClientError("the server closed the connection"))
        except (ConnectionError, OSError) as exc:
            self._fail_pending(ClientError(f"the connection failed: {exc}"))
        except ClientError as exc:
            self._fail_pending(exc)

    def _fail_pending(self, exc: Exception) -> None:
        while self._pending:
            pending = self._pending.popleft()
            if not pending.future.done():
                pending.future.set_exception(exc)

    # ------------------------------------------------------------------ Kafka APIs

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        """Every API the server answers, with its version range (from the connect)."""
        return dict(self._versions)

    async def metadata(
        self, topics: Sequence[str] | None = None, *, topic_ids: Sequence[Uuid] = ()
    ) -> Any:
        """Brokers, controller and topics (all, or by name, or by id)."""
        wanted: list[dict[str, Any]] | None = None
        if topics is not None or topic_ids:
            wanted = [{"name": n, "topic_id": Uuid.ZERO.bytes} for n in topics or ()]
            wanted += [{"name": None, "topic_id": i.bytes} for i in topic_ids]
        return await self.request(
            3,
            topics=wanted,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )

    async def topic_name(self, ref: TopicRef) -> str:
        """The name of a topic given by name or id (Metadata by id)."""
        if ref.name is not None:
            return ref.name
        assert ref.topic_id is not None
        (topic,) = (await self.metadata(topic_ids=[ref.topic_id])).topics
        if int(topic.error_code) != 0 or topic.name is None:
            raise RemoteError(
                int(topic.error_code),
                f"UNKNOWN_TOPIC_ID ({int(topic.error_code)}): no topic has id {ref.topic_id}",
            )
        return str(topic.name)

    async def create_topics(
        self, topics: Sequence[CreatableTopic], *, validate_only: bool = False
    ) -> list[CreateTopicResult]:
        """CreateTopics: one result per topic."""
        response = await self.request(
            19,
            topics=[
                {
                    "name": t.name,
                    "num_partitions": t.num_partitions,
                    "replication_factor": t.replication_factor,
                    "assignments": [
                        {"partition_index": p, "broker_ids": list(b)} for p, b in t.assignments
                    ],
                    "configs": [{"name": k, "value": v} for k, v in t.configs],
                }
                for t in topics
            ],
            timeout=self.timeout_ms,
            validate_only=validate_only,
        )
        return [
            CreateTopicResult(
                name=t.name,
                topic_id=_uuid(t.topic_id),
                outcome=_outcome(t.error_code, t.error_message),
                num_partitions=int(t.num_partitions),
                replication_factor=int(t.replication_factor),
            )
            for t in response.topics
        ]

    async def delete_topics(self, refs: Sequence[TopicRef]) -> list[DeleteTopicResult]:
        """DeleteTopics (v6: by name or id)."""
        response = await self.request(
            20,
            topics=[{"name": r.name, "topic_id": (r.topic_id or Uuid.ZERO).bytes} for r in refs],
            topic_names=[r.name for r in refs if r.name is not None],
            timeout=self.timeout_ms,
        )
        return [
            DeleteTopicResult(
                name=r.name,
                topic_id=_uuid(getattr(r, "topic_id", None)),
                outcome=_outcome(r.error_code, r.error_message),
            )
            for r in response.responses
        ]

    async def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], *, validate_only: bool = False
    ) -> list[CreatePartitionsResult]:
        """CreatePartitions: raise partition counts."""
        response = await self.request(
            37,
            topics=[
                {
                    "name": await self.topic_name(t.topic),
                    "count": t.count,
                    "assignments": None
                    if t.assignments is None
                    else [{"broker_ids": list(b)} for b in t.assignments],
                }
                for t in topics
            ],
            timeout=self.timeout_ms,
            validate_only=validate_only,
        )
        return [
            CreatePartitionsResult(name=r.name, outcome=_outcome(r.error_code, r.error_message))
            for r in response.results
        ]

    async def describe_configs(
        self, resources: Sequence[ConfigResource], *, include_synonyms: bool = False
    ) -> Any:
        """DescribeConfigs (kio response entity)."""
        return await self.request(
            32,
            resources=[
                {"resource_type": int(r.type), "resource_name": r.name, "configuration_keys": None}
                for r in resources
            ],
            include_synonyms=include_synonyms,
            include_documentation=False,
        )

    async def alter_configs(
        self,
        resource: ConfigResource,
        values: dict[str, str | None],
        *,
        validate_only: bool = False,
    ) -> Any:
        """AlterConfigs (legacy: replaces every override of the resource; kio entity)."""
        return await self.request(
            33,
            resources=[
                {
                    "resource_type": int(resource.type),
                    "resource_name": resource.name,
                    "configs": [{"name": k, "value": v} for k, v in values.items()],
                }
            ],
            validate_only=validate_only,
        )

    async def incremental_alter_configs(
        self,
        changes: Sequence[tuple[ConfigResource, Sequence[AlterConfig]]],
        *,
        validate_only: bool = False,
    ) -> list[AlterConfigsResult]:
        """IncrementalAlterConfigs: set, delete, append, subtract; one result per resource."""
        response = await self.request(
            44,
            resources=[
                {
                    "resource_type": int(resource.type),
                    "resource_name": resource.name,
                    "configs": [
                        {"name": o.name, "config_operation": int(o.op), "value": o.value}
                        for o in ops
                    ],
                }
                for resource, ops in changes
            ],
            validate_only=validate_only,
        )
        return [
            AlterConfigsResult(
                resource=ConfigResource(
                    type=ConfigResourceType(int(r.resource_type)), name=r.resource_name
                ),
                outcome=_outcome(r.error_code, r.error_message),
            )
            for r in response.responses
        ]

    async def describe_cluster(self, *, include_fenced_brokers: bool = False) -> Any:
        """DescribeCluster (kio response entity)."""
        return await self.request(
            60,
            include_cluster_authorized_operations=False,
            endpoint_type=1,
            include_fenced_brokers=include_fenced_brokers,
        )

    async def describe_topic_partitions(self, topics: Sequence[str], *, limit: int = 2000) -> Any:
        """DescribeTopicPartitions, first page (kio response entity)."""
        return await self.request(
            75, topics=[{"name": n} for n in topics], response_partition_limit=limit, cursor=None
        )

    async def elect_leaders(
        self, partitions: Sequence[TopicPartition] | None, election: ElectionType
    ) -> list[PartitionResult]:
        """ElectLeaders (None: every partition not led by its preferred replica)."""
        wanted: list[dict[str, Any]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for p in partitions:
                by_topic.setdefault(await self.topic_name(p.topic), []).append(p.partition)
            wanted = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
        response = await self.request(
            43, election_type=int(election), topic_partitions=wanted, timeout=self.timeout_ms
        )
        if int(response.error_code) != 0:
            raise RemoteError(
                int(response.error_code), f"ElectLeaders failed ({int(response.error_code)})"
            )
        return [
            PartitionResult(
                topic=t.topic,
                partition=int(p.partition_id),
                outcome=_outcome(p.error_code, p.error_message),
            )
            for t in response.replica_election_results
            for p in t.partition_result
        ]

    async def alter_partition_reassignments(
        self, reassignments: Sequence[Reassignment]
    ) -> list[PartitionResult]:
        """AlterPartitionReassignments (replicas None cancels); one result per partition."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for r in reassignments:
            name = await self.topic_name(r.partition.topic)
            by_topic.setdefault(name, []).append(
                {
                    "partition_index": r.partition.partition,
                    "replicas": None if r.replicas is None else list(r.replicas),
                }
            )
        response = await self.request(
            45,
            topics=[{"name": n, "partitions": ps} for n, ps in by_topic.items()],
            timeout=self.timeout_ms,
        )
        if int(response.error_code) != 0:
            raise RemoteError(
                int(response.error_code),
                response.error_message or f"reassignment failed ({int(response.error_code)})",
            )
        return [
            PartitionResult(
                topic=t.name,
                partition=int(p.partition_index),
                outcome=_outcome(p.error_code, p.error_message),
            )
            for t in response.responses
            for p in t.partitions
        ]

    async def list_partition_reassignments(self) -> Any:
        """ListPartitionReassignments of every partition (kio response entity)."""
        return await self.request(46, topics=None, timeout=self.timeout_ms)

    async def describe_acls(self) -> Any:
        """DescribeAcls of everything (always empty until ACLs exist; kio response entity)."""
        return await self.request(
            29,
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        )

    # ------------------------------------------------------------------ our APIs

    async def create_namespace(self, name: str) -> CreateNamespaceResult:
        """Create a namespace and its missing parents."""
        result: CreateNamespaceResult = await self.call(
            private.CREATE_NAMESPACE, CreateNamespace(name=name)
        )
        return result

    async def delete_namespace(
        self, name: str, *, recursive: bool = False
    ) -> DeleteNamespaceResult:
        """Delete a namespace and its topics (and its children with `recursive`)."""
        result: DeleteNamespaceResult = await self.call(
            private.DELETE_NAMESPACE, DeleteNamespace(name=name, recursive=recursive)
        )
        return result

    async def list_namespaces(
        self, namespace: str = "", *, recursive: bool = False
    ) -> list[NamespaceInfo]:
        """The namespaces under one (all below it with `recursive`), with topic counts."""
        response = await self.call(
            private.LIST_NAMESPACES,
            private.ListNamespaces(namespace=namespace, recursive=recursive),
        )
        return list(response.namespaces)

    async def move_topic(self, request: MoveTopic) -> MoveTopicResult:
        """Move a topic to another namespace (it keeps its id)."""
        result: MoveTopicResult = await self.call(private.MOVE_TOPIC, request)
        return result

    async def delete_partitions(
        self, topics: Sequence[DeletePartitionsTopic], *, validate_only: bool = False
    ) -> list[DeletePartitionsResult]:
        """Lower partition counts (READ_ONLY for the delay, then NONE, then removed)."""
        response = await self.call(
            private.DELETE_PARTITIONS,
            private.DeletePartitions(topics=tuple(topics), validate_only=validate_only),
        )
        return list(response.results)

    async def purge_pending(self) -> list[PurgeResult]:
        """Run one check of pending partition deletions now."""
        response = await self.call(private.PURGE_PENDING, private.PurgePending())
        return list(response.results)

    async def register_broker(self, request: RegisterBroker) -> BrokerResult:
        """Register a broker (a new incarnation)."""
        result: BrokerResult = await self.call(private.REGISTER_BROKER, request)
        return result

    async def change_broker(self, broker_id: int, action: BrokerAction) -> BrokerResult:
        """Fence, unfence, shut down or unregister a broker."""
        result: BrokerResult = await self.call(
            private.CHANGE_BROKER, private.ChangeBroker(broker_id=broker_id, action=action)
        )
        return result

    async def fetch_log(
        self, offset: int, *, max_entries: int = 10_000, max_wait_ms: int = 0
    ) -> tuple[list[LogEntry], int]:
        """(entries from `offset`, the log's next offset); waits up to `max_wait_ms` for one."""
        response = await self.call(
            private.FETCH_LOG,
            private.FetchLog(
                offset=offset,
                max_entries=max_entries,
                max_wait_ms=max_wait_ms,
                schema_id=self._entries.known,
            ),
            timeout_ms=max_wait_ms + self.timeout_ms,
        )
        end = int(response.end_offset)
        entries = self._entries.decode(response.entries, lo=offset, hi=end - 1)
        return entries[:max_entries], end

    async def follow(
        self, offset: int = 0, *, max_wait_ms: int = 10_000
    ) -> AsyncIterator[LogEntry]:
        """Every entry from `offset` on, then each new one as it is committed (forever)."""
        while True:
            entries, end = await self.fetch_log(offset, max_wait_ms=max_wait_ms)
            for entry in entries:
                yield entry
            offset = entries[-1].offset + 1 if entries else min(offset, end)

    async def image_at(
        self, *, at_offset: int | None = None, at_time: str | None = None
    ) -> MetadataImage:
        """The image now, or after an offset, or at a time (ISO-8601 or epoch ms)."""
        request = private.ImageAt(
            at_offset=at_offset, at_time=at_time, schema_id=self._entries.known
        )
        response = await self.call(private.IMAGE_AT, request)
        return private.image_from_response(response, self._entries)

    async def diff(
        self, from_point: str, to_point: str | None = None
    ) -> tuple[int, int, list[Change]]:
        """(from offset, to offset, changes) between two points of the log."""
        response = await self.call(
            private.DIFF, private.Diff(from_point=from_point, to_point=to_point)
        )
        return int(response.from_offset), int(response.to_offset), list(response.changes)

    async def history(
        self,
        entity: Entity,
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
    ) -> list[HistoryEntry]:
        """Every entry that touched `entity`, oldest first."""
        response = await self.call(
            private.HISTORY, private.History(entity=entity, gt=gt, lte=lte, limit=limit)
        )
        return list(response.entries)
