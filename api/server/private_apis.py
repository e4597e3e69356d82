"""Our own APIs (`api.protocol.private`), answered by the service.

Writes go through `MetadataService.submit` like the Kafka APIs' (group-committed, answered
once durable) and are logged one line each. Reads of the present are answered from the
committed image; the log and time travel (FetchLog, ImageAt at a past point, Diff, History)
read the segment files on a worker thread, so a long replay never holds up other
connections. With an archive (`metadata.log.archive.url`) the reads that reach below the
local log start read it through the server's view of it (`api.server.archive_reads`), as on a
log never trimmed; the others read the local log as without one. A request that cannot be
answered gets a status with the error the embedded CLI would print; the connection stays
open. A write in a flexible version may carry a write id (`codec.WRITE_ID_TAG`): the service
then answers a retry of it from the stored answer, as for the Kafka writes
(`api.server.write_ids`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, Protocol, TypeVar

from api.protocol import private
from api.protocol.avro_bind import BindError
from api.protocol.codec import RequestHeader
from api.protocol.private import (
    MAX_FETCH_ENTRIES,
    MAX_FETCH_WAIT_MS,
    PRIVATE_APIS,
    PrivateApi,
    PrivateStatus,
)
from api.server.archive_reads import ArchiveReads, needs_archive, point_needs_archive
from api.server.broker_bindings import NO_BINDINGS, BrokerBindings
from api.server.history_threads import HistoryThreads
from api.server.image_views import hides_brokers, sees_everything, visible_records
from api.server.kafka.authorization import Gate, name_of, run_gated
from api.server.kafka.base import Session
from api.server.namespace_views import require_creatable, visible_namespaces
from api.server.time_travel import (
    entity_of,
    image_response,
    log_block,
    wire_change,
    wire_history_entry,
)
from api.server.write_ids import pending_write
from api.service.broker_liveness import BrokerLiveness
from api.service.client_writes import CURRENT_WRITE
from api.service.service import MetadataService
from metadata_log.stored_log import StoredLog
from records.errors import MetadataLogError
from records.model import AclOperation
from records.uuids import Uuid
from replay.controller.authorizer import Authorizer
from replay.controller.commands import (
    BrokerResult,
    CancelPartitionDeletion,
    CancelPartitionDeletionResult,
    ControllerResult,
    CreateNamespace,
    DeleteNamespace,
    DeletePartitionsResult,
    DeletePartitionsTopic,
    MoveTopic,
    Outcome,
    RegisterBroker,
    TopicRef,
)
from replay.controller.controller import Controller
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.namespaces import validate_namespace_name
from replay.image import (
    MetadataImage,
    qualified_name,
    split_qualified_name,
)
from replay.timetravel import (
    Change,
    HistoryEntry,
    diff_points,
    history_range,
    image_at,
    start_image,
)
from replay.timetravel.image_cache import ImageCache
from replay.timetravel.points import offset_at_time, parse_time

T = TypeVar("T")
R = TypeVar("R")


INLINE_FETCH_ENTRIES = 1_000
"""A FetchLog starting within this many entries of the committed end is read on the event
loop's thread: the blocks just written, from the page cache, walked for credentials without
decoding (well under a millisecond). An older start reads on the worker thread, where the
loop goes on answering meanwhile. (A hop costs more than such a read: the worker runs Python
under the interpreter lock the loop is waiting for.)"""

_BROKER_OPERATIONS = (AclOperation.CLUSTER_ACTION, AclOperation.ALTER)
"""What a broker change needs on the cluster, either one: Kafka's brokers register and
heartbeat with CLUSTER_ACTION, and an operator unregisters one with ALTER."""


class _Topical(Protocol):
    """A per-topic item of a request (a partition deletion or its cancellation)."""

    @property
    def topic(self) -> TopicRef: ...


TopicalT = TypeVar("TopicalT", bound=_Topical)


def _ref_name(ref: TopicRef) -> str:
    return ref.name if ref.name is not None else str(ref.topic_id)


def plain_fields(request: Any) -> str:
    """A request's fields as `name=value` words for a log line, without Python's reprs.

    `topics=[topic=orders count=3 delay_ms=600000]` rather than
    `topics=(DeletePartitionsTopic(topic=TopicRef(name='orders', topic_id=None), ...),)`:
    a topic reference is its name (or id), an enum its name, a nested value its fields.
    """
    return " ".join(
        f"{f.name}={_plain(getattr(request, f.name))}" for f in dataclasses.fields(request)
    )


def _plain(value: Any) -> str:
    if isinstance(value, TopicRef | Uuid):
        return _plain(str(value))
    if isinstance(value, enum.Enum):
        return value.name.lower()
    if isinstance(value, str):
        return value if value and not any(c.isspace() for c in value) else json.dumps(value)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_plain(v) for v in value) + "]"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain_fields(value)
    return str(value)


logger = logging.getLogger("api.server")

PrivateHandler = Callable[[Any, Session], Awaitable[Any]]


IMAGES_KEPT = 4
PARTITIONS_KEPT = 1_000_000
"""A server keeps at most these many images of past points between ImageAt answers (a next
point after one replays only the gap: a console paging forward through a server), of at most
these many partitions in all (counted as if they shared nothing: about 225 MiB at most)."""


class PrivateApis:
    """Answers the private APIs from a service (and its snapshot store, for time travel).

    With an `authorizer` the checks of docs/security.md (else none); with `archive` the past
    below the log start from there (`api.server.archive_reads`). History reads: `threads`.
    """

    def __init__(
        self,
        service: MetadataService,
        authorizer: Authorizer | None = None,
        liveness: BrokerLiveness | None = None,
        bindings: BrokerBindings = NO_BINDINGS,
        archive: ArchiveReads | None = None,
    ) -> None:
        self.service = service
        self.archive = archive
        self.threads = HistoryThreads()
        self.images = ImageCache(max_images=IMAGES_KEPT, max_partitions=PARTITIONS_KEPT)
        self.gate = Gate(authorizer)
        self.liveness = liveness or BrokerLiveness(service)
        self.bindings = bindings
        """`broker.principals`: a broker's principal (CLUSTER_ACTION, not ALTER) changes only
        the brokers bound to it."""
        self._handlers: dict[int, PrivateHandler] = {
            private.CREATE_NAMESPACE.key: self.create_namespace,
            private.DELETE_NAMESPACE.key: self.delete_namespace,
            private.LIST_NAMESPACES.key: self.list_namespaces,
            private.MOVE_TOPIC.key: self.move_topic,
            private.DELETE_PARTITIONS.key: self.delete_partitions,
            private.PURGE_PENDING.key: self.purge_pending,
            private.CANCEL_PARTITION_DELETIONS.key: self.cancel_partition_deletions,
            private.REGISTER_BROKER.key: self.register_broker,
            private.CHANGE_BROKER.key: self.change_broker,
            private.FETCH_LOG.key: self.fetch_log,
            private.IMAGE_AT.key: self.image_at,
            private.DIFF.key: self.diff,
            private.HISTORY.key: self.history,
            private.DESCRIBE_BROKER_LIVENESS.key: self.describe_broker_liveness,
            private.DESCRIBE_LOG_DIGEST.key: self.describe_log_digest,
        }
        self._codec = service.log.codec

    async def handle(self, header: RequestHeader, body: bytes, session: Session) -> bytes:
        """The response frame for one private request from `session`."""
        api = PRIVATE_APIS[header.api_key]
        principal = session.principal
        try:
            request = private.decode_request_body(api, body, header.api_version)
        except (BindError, MetadataLogError, ValueError) as exc:
            return self._error(header, api, ErrorCode.INVALID_REQUEST, str(exc))
        # Only around a write that carries an id: the service reads it in its first submit.
        pending = None if header.write_id is None else pending_write(header, principal)
        token = None if pending is None else CURRENT_WRITE.set(pending)
        try:
            response = await self._handlers[api.key](request, session)
        except ApiError as exc:
            self._log(principal, api, request, exc.error_code.name)
            return self._error(header, api, exc.error_code, str(exc))
        except MetadataLogError as exc:
            return self._error(header, api, ErrorCode.INVALID_REQUEST, str(exc))
        finally:
            if token is not None:
                CURRENT_WRITE.reset(token)
        self._log(principal, api, request, "ok")
        return private.encode_response(
            header.correlation_id, api, response, version=header.api_version
        )

    @staticmethod
    def _error(header: RequestHeader, api: PrivateApi, code: ErrorCode, text: str) -> bytes:
        status = PrivateStatus(error_code=int(code), error_message=text)
        return private.encode_response(
            header.correlation_id, api, status=status, version=header.api_version
        )

    @staticmethod
    def _log(principal: str, api: PrivateApi, request: Any, outcome: str) -> None:
        if api.writes:
            logger.info("%s %s %s: %s", principal, api.name, plain_fields(request), outcome)

    # ------------------------------------------------------------------ writes

    async def _submit(
        self, session: Session, call: Callable[[Controller, MetadataImage], ControllerResult[T]]
    ) -> T:
        """Run a controller call through the service's group commit.

        The call gets the working image, the one the command runs on: its authorization
        checks, made inside the call, see the ACLs and names the command sees.
        """
        controller = self.service.controller
        return await self.service.submit(
            lambda image: call(controller, image), principal=session.principal
        )

    async def create_namespace(self, request: CreateNamespace, session: Session) -> Any:
        """Create a namespace and its missing parents: CREATE on each namespace created."""
        gate = self.gate

        def create(c: Controller, image: MetadataImage) -> ControllerResult[Any]:
            validate_namespace_name(request.name)  # canonical before any check: no `:x`
            if gate.on:
                # The parents first: creating `org:apache` creates a missing `org` too.
                require_creatable(gate, image, session, request.name)
            return c.create_namespace(image, request)

        return await self._submit(session, create)

    async def delete_namespace(self, request: DeleteNamespace, session: Session) -> Any:
        """Delete a namespace (and its topics; its children with `recursive`).

        DELETE on the namespace, and on everything the deletion takes with it: each namespace
        below it and each topic in them (a DENY on one of them refuses the whole deletion).
        """
        gate = self.gate

        def delete(c: Controller, image: MetadataImage) -> ControllerResult[Any]:
            validate_namespace_name(request.name)  # canonical before any check: no `:x`
            if gate.on:
                gate.require_namespace(image, session, AclOperation.DELETE, request.name)
                # DESCRIBE too, as Kafka's DeleteTopics: "does not exist" only to those who
                # may see that it does (DELETE implies it, unless DESCRIBE is denied)
                gate.require_namespace(image, session, AclOperation.DESCRIBE, request.name)
                self._require_subtree_deletion(image, session, request)
            return c.delete_namespace(image, request)

        return await self._submit(session, delete)

    def _require_subtree_deletion(
        self, image: MetadataImage, session: Session, request: DeleteNamespace
    ) -> None:
        name = request.name
        if not name or not image.namespaces.exists(name):
            return  # the controller refuses it
        below = image.namespaces.descendants(name) if request.recursive else []
        for namespace in below:
            self.gate.require_namespace(image, session, AclOperation.DELETE, namespace)
        inside = {name, *below}
        for topic in image.topics.by_id.values():
            if topic.namespace in inside:
                self.gate.require_topic(image, session, AclOperation.DELETE, topic.qualified_name)

    async def move_topic(self, request: MoveTopic, session: Session) -> Any:
        """Move a topic to another namespace (same id).

        ALTER on the topic, and CREATE on its new name (so in the target namespace).
        """
        gate = self.gate

        def move(c: Controller, image: MetadataImage) -> ControllerResult[Any]:
            name = name_of(image, request.topic)
            if gate.on and name is not None:
                gate.require_topic(image, session, AclOperation.ALTER, name)
                new_name = qualified_name(request.to_namespace, split_qualified_name(name)[1])
                gate.require_topic(image, session, AclOperation.CREATE, new_name)
            return c.move_topic(image, request)

        return await self._submit(session, move)

    async def delete_partitions(
        self, request: private.DeletePartitions, session: Session
    ) -> private.DeletePartitionsResponse:
        """Lower partition counts; each topic has its own outcome (ALTER on it)."""
        validate_only = request.validate_only

        def delete(
            c: Controller, image: MetadataImage
        ) -> ControllerResult[list[DeletePartitionsResult]]:
            def run(
                allowed: list[DeletePartitionsTopic],
            ) -> ControllerResult[list[DeletePartitionsResult]]:
                return c.delete_partitions(image, allowed, validate_only=validate_only)

            return self._per_topic(
                image,
                session,
                request.topics,
                run,
                lambda t, error: DeletePartitionsResult(
                    name=_ref_name(t.topic), outcome=Outcome.from_error(error)
                ),
            )

        results = await self._submit(session, delete)
        return private.DeletePartitionsResponse(results=tuple(results))

    async def cancel_partition_deletions(
        self, request: private.CancelPartitionDeletions, session: Session
    ) -> private.CancelPartitionDeletionsResponse:
        """Cancel pending partition deletions; each topic has its own outcome (ALTER on it)."""

        def cancel(
            c: Controller, image: MetadataImage
        ) -> ControllerResult[list[CancelPartitionDeletionResult]]:
            def run(
                allowed: list[CancelPartitionDeletion],
            ) -> ControllerResult[list[CancelPartitionDeletionResult]]:
                return c.cancel_partition_deletions(image, allowed)

            return self._per_topic(
                image,
                session,
                request.topics,
                run,
                lambda t, error: CancelPartitionDeletionResult(
                    name=_ref_name(t.topic), outcome=Outcome.from_error(error)
                ),
            )

        results = await self._submit(session, cancel)
        return private.CancelPartitionDeletionsResponse(results=tuple(results))

    def _per_topic(
        self,
        image: MetadataImage,
        session: Session,
        items: Sequence[TopicalT],
        run: Callable[[list[TopicalT]], ControllerResult[list[R]]],
        refused: Callable[[TopicalT, ApiError], R],
    ) -> ControllerResult[list[R]]:
        """Run a per-topic command on the topics the session may ALTER; the others are refused."""
        gate = self.gate
        if not gate.on:
            return run(list(items))

        def refusal(item: TopicalT) -> ApiError | None:
            name = name_of(image, item.topic)
            if name is None:
                return None  # an unknown id: the controller answers UNKNOWN_TOPIC_ID
            return gate.topic_refusal(image, session, AclOperation.ALTER, name)

        return run_gated(items, refusal, run, refused)

    async def purge_pending(
        self, request: private.PurgePending, session: Session
    ) -> private.PurgePendingResponse:
        """One check of pending partition deletions (as the scheduler runs).

        ALTER on the cluster, or on every topic with a pending deletion: a purge takes the
        next step of each deletion that is due, whoever asked for it.
        """
        gate = self.gate
        image = self.service.image
        if gate.on and not gate.allows_cluster(image, session, AclOperation.ALTER):
            for topic in image.topics.by_id.values():
                if topic.pending_deletion is not None:
                    gate.require_topic(image, session, AclOperation.ALTER, topic.qualified_name)
        return private.PurgePendingResponse(results=tuple(await self.service.purge_now()))

    async def register_broker(self, request: RegisterBroker, session: Session) -> BrokerResult:
        """Register a broker (a new incarnation): ALTER, or CLUSTER_ACTION for a bound id."""

        def register(c: Controller, image: MetadataImage) -> ControllerResult[BrokerResult]:
            self._require_broker_change(image, session, request.broker_id)
            return c.register_broker(image, request)

        return await self._submit(session, register)

    async def change_broker(self, request: private.ChangeBroker, session: Session) -> BrokerResult:
        """Fence, unfence, shut down or unregister a broker: as `register_broker`."""

        def change(c: Controller, image: MetadataImage) -> ControllerResult[BrokerResult]:
            self._require_broker_change(image, session, request.broker_id)
            return c.change_broker(image, request.broker_id, request.action)

        return await self._submit(session, change)

    def _require_broker_change(
        self, image: MetadataImage, session: Session, broker_id: int
    ) -> None:
        """An operator (ALTER) changes any broker; a broker's principal its bound ids only."""
        gate = self.gate
        if not gate.on:
            return  # no authorizer: everyone is an operator (docs/security.md)
        gate.require_cluster(image, session, *_BROKER_OPERATIONS)
        if not gate.allows_cluster(image, session, AclOperation.ALTER):
            self.bindings.require(gate, session, broker_id)

    # ------------------------------------------------------------------ reads

    def _require_log_reader(self, session: Session) -> None:
        """FetchLog, past ImageAt, Diff and History reveal everything: CLUSTER_ACTION.

        As Kafka's `__cluster_metadata`, readable only through the quorum's Fetch. The present
        image is served filtered instead (`image_at`, docs/security.md).
        """
        self.gate.require_cluster(self.service.image, session, AclOperation.CLUSTER_ACTION)

    async def describe_broker_liveness(
        self, request: private.DescribeBrokerLiveness, session: Session
    ) -> private.BrokerLivenessList:
        """The brokers' sessions on this node (DESCRIBE on the cluster, as DescribeCluster)."""
        self.gate.require_cluster(self.service.image, session, AclOperation.DESCRIBE)
        wanted = set(request.broker_ids)
        contacts = self.liveness.contacts()
        return private.BrokerLivenessList(
            active=self.service.is_active_controller,
            brokers=tuple(
                private.BrokerLivenessItem(
                    broker_id=c.broker_id,
                    last_heartbeat_ms=c.last_heartbeat_ms,
                    metadata_offset=c.metadata_offset,
                    fenced_reason=c.fenced_reason,
                )
                for c in contacts
                if not wanted or c.broker_id in wanted
            ),
        )

    async def list_namespaces(
        self, request: private.ListNamespaces, session: Session
    ) -> private.NamespaceList:
        """Namespaces under one, from the committed image: those the session may DESCRIBE."""
        infos = visible_namespaces(
            self.gate,
            self.service.image,
            session,
            request.namespace or "",
            recursive=request.recursive,
        )
        return private.NamespaceList(namespaces=tuple(infos))

    async def describe_log_digest(
        self, request: private.DescribeLogDigest, session: Session
    ) -> private.LogDigestResponse:
        """The hash chain's digest at an offset, by default at the committed offset.

        As FetchLog, CLUSTER_ACTION on the cluster: the digest is a fingerprint of the log.
        """
        self._require_log_reader(session)
        committed = self.service.image.provenance.offset
        if request.offset < -1 or request.offset > committed:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"offset {request.offset} is not committed (the committed offset is "
                f"{committed}); ask for -1 (the committed offset) or an offset up to it",
            )
        log = self.service.log
        if request.offset == -1:
            digest = self.service.committed_digest()
        elif self.archive is not None and request.offset < log.log_start_offset:
            offset = request.offset
            digest = await asyncio.to_thread(self.archive.read, lambda view: view.digest(offset))
        else:
            digest = log.digest(request.offset)
        if digest is None:
            return private.LogDigestResponse(
                offset=-1, chain=b"", token="", committed_offset=committed
            )
        return private.LogDigestResponse(
            offset=digest.offset,
            chain=digest.chain,
            token=digest.token(),
            committed_offset=committed,
        )

    async def fetch_log(
        self, request: private.FetchLog, session: Session
    ) -> private.FetchLogResponse:
        """Committed entries from `offset`; long-polls while there are none yet."""
        self._require_log_reader(session)
        if request.offset < 0 or request.max_entries < 1 or request.max_wait_ms < 0:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                "FetchLog needs offset >= 0, max_entries >= 1 and max_wait_ms >= 0",
            )
        committed = self.service.image.provenance.offset
        if request.offset > committed + 1:
            raise ApiError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"offset {request.offset} is past the end of the log (next offset {committed + 1})",
            )
        if request.offset == committed + 1 and request.max_wait_ms:
            wait = min(request.max_wait_ms, MAX_FETCH_WAIT_MS) / 1000
            await self.service.wait_committed(request.offset, wait)
            # Again before answering: an ACL removed while it waited holds for what it sends.
            self._require_log_reader(session)
            committed = self.service.image.provenance.offset
        limit = min(request.max_entries, MAX_FETCH_ENTRIES)
        log = self.service.log
        hide = hides_brokers(self.gate, self.service.image, session)
        codec = self._codec

        def read_from(source: StoredLog) -> private.EntryBlock:
            # The blocks as stored (the client trims them), credentials redacted.
            schema, count, body = source.block_bodies(
                start=request.offset, last=committed, max_entries=limit
            )
            return log_block(codec, schema, count, body, request.schema_id, hide_brokers=hide)

        def read() -> private.EntryBlock:
            return read_from(log)

        if self.archive is not None and request.offset < log.log_start_offset:
            archive = self.archive
            block = await asyncio.to_thread(archive.read, read_from)  # waits on the network
        elif committed - request.offset >= INLINE_FETCH_ENTRIES:
            block = await self.threads.fetch(read)
        else:
            block = read()  # the newest blocks (or none yet): cheaper than a hop
        return private.FetchLogResponse(end_offset=committed + 1, entries=block)

    async def image_at(self, request: private.ImageAt, session: Session) -> private.ImageResponse:
        """The image now (the committed one) or at a past point (time travel).

        Now: what the session may DESCRIBE of it (`api.server.image_views`). A past point is
        the log's past: CLUSTER_ACTION, as FetchLog.
        """
        current = self.service.image
        at_offset, at_time = request.at_offset, request.at_time
        hide = hides_brokers(self.gate, current, session)
        if at_offset is None and at_time is None:
            # Filtered here, where every authorization check runs (Metadata's are per topic
            # on the loop too); the whole image is written on the worker thread.
            records = (
                None
                if sees_everything(self.gate, current, session)
                else list(visible_records(self.gate, current, session))
            )
            return await self.threads.build(
                partial(image_response, hide_brokers=hide),
                current,
                self._codec,
                request.schema_id,
                records,
            )
        self._require_log_reader(session)

        def build() -> private.ImageResponse:
            store = self.service.snapshot_store
            log = self.service.log

            def travel(source: StoredLog) -> MetadataImage:
                # As the CLI does: a point inside an atomic batch answers the batch's end.
                return image_at(
                    source, store, at_offset=at_offset, at_time=at_time, cache=self.images
                )

            if self.archive is not None and (
                needs_archive(log, store, at_offset)
                if at_offset is not None
                else needs_archive(log, store, _time_offset(log, at_time), at_time=True)
            ):
                image = self.archive.read(travel)
            else:
                image = travel(log)
            return image_response(image, self._codec, request.schema_id, hide_brokers=hide)

        return await self.threads.build(build)

    async def diff(self, request: private.Diff, session: Session) -> private.DiffResponse:
        """What changed between two points of the log."""
        self._require_log_reader(session)
        hide = hides_brokers(self.gate, self.service.image, session)
        store = self.service.snapshot_store
        log, archive = self.service.log, self.archive

        def compare() -> tuple[int, int, list[Change]]:
            def between(source: StoredLog) -> tuple[int, int, list[Change]]:
                return diff_points(source, store, *points, cache=self.images)

            points = (request.from_point, request.to_point)
            if archive is not None and any(
                point_needs_archive(log, store, p) for p in points if p is not None
            ):
                return archive.read(between)
            return between(log)

        start, end, changes = await self.threads.build(compare)
        wire = tuple(wire_change(change, hide_brokers=hide) for change in changes)
        return private.DiffResponse(from_offset=start, to_offset=end, changes=wire)

    async def history(self, request: private.History, session: Session) -> private.HistoryResponse:
        """Every entry that touched an entity."""
        # Checked before authorization, as when the wire decoded replay's Entity itself: a
        # malformed entity is an invalid request whoever asks.
        entity = entity_of(request.entity)
        self._require_log_reader(session)
        hide = hides_brokers(self.gate, self.service.image, session)
        committed = self.service.image.provenance.offset
        lte = committed if request.lte is None else min(request.lte, committed)
        log, store, archive = self.service.log, self.service.snapshot_store, self.archive

        def read_from(source: StoredLog) -> list[HistoryEntry]:
            # A trimmed log: the names it starts with come from its snapshot.
            start = start_image(source, store) if source.log_start_offset > 0 else None
            return history_range(
                source, entity, gt=request.gt, lte=lte, limit=request.limit, start=start
            )

        def read() -> list[HistoryEntry]:
            gt = -1 if request.gt is None else request.gt
            if archive is not None and gt < log.log_start_offset - 1:
                return archive.read(read_from)
            return read_from(log)

        entries = await self.threads.build(read)
        wire = tuple(wire_history_entry(entry, hide_brokers=hide) for entry in entries)
        return private.HistoryResponse(entries=wire)


def _time_offset(log: StoredLog, at_time: int | str | None) -> int:
    """The local log's offset at `at_time` (before its start: the entry before the start)."""
    if at_time is None:
        return log.end_offset - 1
    return offset_at_time(log, parse_time(at_time) if isinstance(at_time, str) else at_time)
