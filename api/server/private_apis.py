"""Our own APIs (`api.protocol.private`), answered by the service.

Writes go through `MetadataService.submit` like the Kafka APIs' (group-committed, answered
once durable) and are logged one line each. Reads of the present are answered from the
committed image; the log and time travel (FetchLog, ImageAt at a past point, Diff, History)
read the segment files on a worker thread, so a long replay never holds up other
connections. A request that cannot be answered gets a status with the error the embedded
CLI would print; the connection stays open.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from api.controller.commands import BrokerResult, ControllerResult, TopicRef
from api.controller.controller import Controller
from api.controller.errors import ApiError, ErrorCode
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
from api.service.service import MetadataService
from records.errors import MetadataLogError
from records.uuids import Uuid
from replay.image import MetadataImage
from replay.timetravel import diff_points, history_range, travel

T = TypeVar("T")


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

PrivateHandler = Callable[[Any, str], Awaitable[Any]]


class PrivateApis:
    """Answers the private APIs from a service (and its snapshot store, for time travel)."""

    def __init__(self, service: MetadataService) -> None:
        self.service = service
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
        }
        self._codec = service.log.codec

    async def handle(self, header: RequestHeader, body: bytes, principal: str) -> bytes:
        """The response frame for one private request."""
        api = PRIVATE_APIS[header.api_key]
        try:
            request = private.decode_request_body(api, body, header.api_version)
        except (BindError, MetadataLogError, ValueError) as exc:
            return self._error(header, api, ErrorCode.INVALID_REQUEST, str(exc))
        try:
            response = await self._handlers[api.key](request, principal)
        except ApiError as exc:
            self._log(principal, api, request, exc.error_code.name)
            return self._error(header, api, exc.error_code, str(exc))
        except MetadataLogError as exc:
            return self._error(header, api, ErrorCode.INVALID_REQUEST, str(exc))
        self._log(principal, api, request, "ok")
        return private.encode_response(header.correlation_id, api, response)

    @staticmethod
    def _error(header: RequestHeader, api: PrivateApi, code: ErrorCode, text: str) -> bytes:
        status = PrivateStatus(error_code=int(code), error_message=text)
        return private.encode_response(header.correlation_id, api, status=status)

    @staticmethod
    def _log(principal: str, api: PrivateApi, request: Any, outcome: str) -> None:
        if api.writes:
            logger.info("%s %s %s: %s", principal, api.name, plain_fields(request), outcome)

    # ------------------------------------------------------------------ writes

    async def _submit(
        self, principal: str, call: Callable[[Controller, MetadataImage], ControllerResult[T]]
    ) -> T:
        """Run a controller call through the service's group commit."""
        controller = self.service.controller
        return await self.service.submit(lambda image: call(controller, image), principal=principal)

    async def create_namespace(self, request: Any, principal: str) -> Any:
        """Create a namespace and its missing parents."""
        return await self._submit(principal, lambda c, image: c.create_namespace(image, request))

    async def delete_namespace(self, request: Any, principal: str) -> Any:
        """Delete a namespace (and its topics; its children with `recursive`)."""
        return await self._submit(principal, lambda c, image: c.delete_namespace(image, request))

    async def move_topic(self, request: Any, principal: str) -> Any:
        """Move a topic to another namespace (same id)."""
        return await self._submit(principal, lambda c, image: c.move_topic(image, request))

    async def delete_partitions(
        self, request: private.DeletePartitions, principal: str
    ) -> private.DeletePartitionsResponse:
        """Lower partition counts; each topic has its own outcome."""
        results = await self._submit(
            principal,
            lambda c, image: c.delete_partitions(
                image, list(request.topics), validate_only=request.validate_only
            ),
        )
        return private.DeletePartitionsResponse(results=tuple(results))

    async def cancel_partition_deletions(
        self, request: private.CancelPartitionDeletions, principal: str
    ) -> private.CancelPartitionDeletionsResponse:
        """Cancel pending partition deletions; each topic has its own outcome."""
        results = await self._submit(
            principal,
            lambda c, image: c.cancel_partition_deletions(image, list(request.topics)),
        )
        return private.CancelPartitionDeletionsResponse(results=tuple(results))

    async def purge_pending(
        self, request: private.PurgePending, principal: str
    ) -> private.PurgePendingResponse:
        """One check of pending partition deletions (as the scheduler runs)."""
        return private.PurgePendingResponse(results=tuple(await self.service.purge_due_async()))

    async def register_broker(self, request: Any, principal: str) -> BrokerResult:
        """Register a broker (a new incarnation)."""
        return await self._submit(principal, lambda c, image: c.register_broker(image, request))

    async def change_broker(self, request: private.ChangeBroker, principal: str) -> BrokerResult:
        """Fence, unfence, shut down or unregister a broker."""
        return await self._submit(
            principal, lambda c, image: c.change_broker(image, request.broker_id, request.action)
        )

    # ------------------------------------------------------------------ reads

    async def list_namespaces(
        self, request: private.ListNamespaces, principal: str
    ) -> private.NamespaceList:
        """Namespaces under one, from the committed image."""
        infos = Controller.list_namespaces(
            self.service.image, request.namespace or "", recursive=request.recursive
        )
        return private.NamespaceList(namespaces=tuple(infos))

    async def fetch_log(
        self, request: private.FetchLog, principal: str
    ) -> private.FetchLogResponse:
        """Committed entries from `offset`; long-polls while there are none yet."""
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
            committed = self.service.image.provenance.offset
        limit = min(request.max_entries, MAX_FETCH_ENTRIES)
        log = self.service.log

        def read() -> private.EntryBlock:
            # The blocks as stored: no decoding and re-encoding here; the client trims them.
            schema, count, body = log.block_bodies(
                start=request.offset, last=committed, max_entries=limit
            )
            return private.block_of(schema, count, body, request.schema_id)

        block = await asyncio.to_thread(read) if committed >= request.offset else read()
        return private.FetchLogResponse(end_offset=committed + 1, entries=block)

    async def image_at(self, request: private.ImageAt, principal: str) -> private.ImageResponse:
        """The image now (the committed one) or at a past point (time travel)."""
        current = self.service.image
        at_offset, at_time = request.at_offset, request.at_time

        def build() -> private.ImageResponse:
            image = current
            if at_offset is not None or at_time is not None:
                store = self.service.snapshot_store
                log = self.service.log
                image = travel(log, store, at_offset=at_offset, at_time=at_time).image
            return private.image_response(image, self._codec, request.schema_id)

        return await asyncio.to_thread(build)

    async def diff(self, request: private.Diff, principal: str) -> private.DiffResponse:
        """What changed between two points of the log."""
        store = self.service.snapshot_store
        start, end, changes = await asyncio.to_thread(
            diff_points, self.service.log, store, request.from_point, request.to_point
        )
        return private.DiffResponse(from_offset=start, to_offset=end, changes=tuple(changes))

    async def history(self, request: private.History, principal: str) -> private.HistoryResponse:
        """Every entry that touched an entity."""
        committed = self.service.image.provenance.offset
        lte = committed if request.lte is None else min(request.lte, committed)
        entries = await asyncio.to_thread(
            history_range,
            self.service.log,
            request.entity,
            gt=request.gt,
            lte=lte,
            limit=request.limit,
        )
        return private.HistoryResponse(entries=tuple(entries))
