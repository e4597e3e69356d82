"""`mlog serve`'s TCP server: a thin asyncio shell over the sans-IO protocol core.

Each connection is a `Channel` (channel.py): its requests are answered in order, one at a time
(as a Kafka broker mutes a channel while its request is processed), with bounded read-ahead
and bounded unsent answers, and a pipelined burst gives the event loop to the other
connections between requests. Writes from all connections meet in the service's group commit
and reads are answered from the committed image without waiting on writes. A request that
cannot be decoded closes only its own connection, with a logged reason; connections over a
limit (limits.py: queued.max.request.bytes, connections.max.idle.ms, max.connections,
max.connections.per.ip) are closed and summed up in one log line per interval.

Shutdown (`stop`, or SIGTERM/SIGINT under `serve`): stop accepting, let every connection finish
the requests it has already received, close the connections, then close the service (which
waits for appends in flight: everything acknowledged is fsynced).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from api.controller.authorizer import Authorizer, AuthorizerConfig
from api.protocol.codec import API_NAMES, encode_response
from api.protocol.connection import (
    DEFAULT_MAX_REQUEST_BYTES,
    Close,
    Event,
    PrivateRequest,
    Reply,
    Request,
)
from api.protocol.private import PRIVATE_APIS
from api.server.channel import Channel, ChannelContext
from api.server.kafka.base import ANONYMOUS, Listener, Session
from api.server.kafka.dispatch import KafkaApis
from api.server.limits import (
    CONNECTIONS_MAX_IDLE_MS,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    QUEUED_MAX_REQUEST_BYTES,
    CloseSummary,
    ConnectionCounts,
    RequestMemory,
    ServerLimits,
    connection_capacity,
)
from api.server.private_apis import PrivateApis
from api.service.service import MetadataService

logger = logging.getLogger("api.server")


class MetadataServer:
    """Serves a `MetadataService` on a TCP listener."""

    def __init__(
        self,
        service: MetadataService,
        *,
        host: str = "127.0.0.1",
        port: int = 9092,
        advertised_host: str | None = None,
        advertised_port: int | None = None,
        node_id: int = 0,
        cluster_id: str = "",
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        limits: ServerLimits | None = None,
        run_scheduler: bool = True,
        authorizer: AuthorizerConfig | None = None,
    ) -> None:
        self.service = service
        self.host = host
        self.port = port
        self._advertised = (advertised_host, advertised_port)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.max_request_bytes = max_request_bytes
        self.limits = limits or ServerLimits()
        # One authorizer for both kinds of API: they share its ACL index.
        self.authorizer = None if authorizer is None else Authorizer(authorizer)
        """Decides every request when `authorizer.class.name` is set; None allows everything."""
        self.private_apis = PrivateApis(service, self.authorizer)
        self._run_scheduler = run_scheduler
        self._server: asyncio.Server | None = None
        self._channels: ChannelContext | None = None
        self._scheduler: asyncio.Task[None] | None = None
        self.apis: KafkaApis | None = None
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        """Listen (port 0 picks a free port; `port` is then the one picked)."""
        limits = self.limits
        capacity = connection_capacity(limits)
        self._channels = ChannelContext(
            answer=self._answer,
            max_request_bytes=self.max_request_bytes,
            idle_seconds=limits.connections_max_idle_ms / 1000,
            memory=RequestMemory(limits.queued_max_request_bytes),
            counts=ConnectionCounts(
                max_connections=capacity, max_per_ip=limits.max_connections_per_ip
            ),
            summary=CloseSummary(
                logger,
                {
                    QUEUED_MAX_REQUEST_BYTES.key: limits.queued_max_request_bytes,
                    CONNECTIONS_MAX_IDLE_MS.key: limits.connections_max_idle_ms,
                    MAX_CONNECTIONS.key: capacity,
                    MAX_CONNECTIONS_PER_IP.key: limits.max_connections_per_ip,
                },
            ),
            principal=ANONYMOUS,
        )
        channels = self._channels
        loop = asyncio.get_running_loop()
        # A deep accept queue: a burst of new connections waits in the kernel, not in SYN
        # retries (the limits, not the backlog, decide who is served).
        self._server = await loop.create_server(
            lambda: Channel(channels), self.host, self.port, backlog=1024
        )
        sockets = self._server.sockets
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        host = self._advertised[0] or self.host
        port = self._advertised[1] or self.port
        self.apis = KafkaApis(
            self.service,
            Listener(host=host, port=port, node_id=self.node_id, cluster_id=self.cluster_id),
            self.authorizer,
        )
        if self._run_scheduler:
            self._scheduler = asyncio.create_task(self._scheduled_purges())
        if self.authorizer is not None:
            config = self.authorizer.config
            logger.info(
                "authorizer on: super.users=%s, allow.everyone.if.no.acl.found=%s",
                ";".join(sorted(config.super_users)) or "(none)",
                str(config.allow_everyone_if_no_acl_found).lower(),
            )
        logger.info(
            "serving on %s:%d (advertised %s:%d), node %d, log offset %d; "
            "max.connections=%d, max.connections.per.ip=%d, connections.max.idle.ms=%d, "
            "queued.max.request.bytes=%d",
            self.host,
            self.port,
            host,
            port,
            self.node_id,
            self.service.log.end_offset,
            capacity,
            limits.max_connections_per_ip,
            limits.connections_max_idle_ms,
            limits.queued_max_request_bytes,
        )

    @property
    def address(self) -> str:
        """`host:port` of the listener."""
        return f"{self.host}:{self.port}"

    async def wait_stopped(self) -> None:
        """Return once `stop` has finished."""
        await self._stopped.wait()

    async def stop(self, reason: str = "stop requested") -> None:
        """Stop accepting, finish requests already received, close connections and service.

        `reason` (say, the signal's name) goes into the one line logged when it is done.
        """
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        if self._scheduler is not None:
            self._scheduler.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._scheduler
        self.service.release_waiters()  # long-polling FetchLogs answer now
        channels = self._channels.channels if self._channels is not None else set()
        for channel in list(channels):
            channel.closing = True
            if not channel.processing and channel.task is not None:
                channel.task.cancel()
        tasks = [c.task for c in channels if c.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._channels is not None:
            self._channels.summary.flush()
        await server.wait_closed()
        await self.service.aclose()
        logger.info("stopped (%s); log end offset %d", reason, self.service.log.end_offset)
        self._stopped.set()

    async def _scheduled_purges(self) -> None:
        try:
            await self.service.run_scheduler()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("the pending partition deletion scheduler stopped")

    # ------------------------------------------------------------------ answering

    @property
    def limit_closes(self) -> dict[str, int]:
        """Connections closed over each limit since the start, by the limit's key."""
        if self._channels is None:
            return {}
        return dict(self._channels.summary.closed_total)

    @property
    def open_connections(self) -> int:
        """Connections admitted and not yet closed."""
        return 0 if self._channels is None else self._channels.counts.total

    @property
    def queued_request_bytes(self) -> int:
        """Request bytes held (or claimed by frames being read) across all connections."""
        return 0 if self._channels is None else self._channels.memory.used

    @property
    def unsent_answer_bytes(self) -> int:
        """Answer bytes written to connections and not yet taken by their clients' sockets."""
        if self._channels is None:
            return 0
        return sum(c.unsent_bytes for c in self._channels.channels)

    async def _answer(self, event: Event, channel: Channel) -> bool:
        """Answer one event on `channel`; False when the connection must close."""
        if isinstance(event, Request):
            assert self.apis is not None  # set by start(), before any connection
            header = event.request.header
            try:
                body = await self.apis.handle(
                    event.request, Session(principal=channel.principal, host=channel.ip)
                )
            except Exception:
                logger.exception(
                    "closing %s: %s v%d failed",
                    channel.peer,
                    API_NAMES.get(header.api_key, header.api_key),
                    header.api_version,
                )
                return False
            channel.write(encode_response(header.correlation_id, body))
        elif isinstance(event, Reply):
            channel.write(event.data)
        elif isinstance(event, PrivateRequest):
            header = event.header
            try:
                session = Session(principal=channel.principal, host=channel.ip)
                channel.write(await self.private_apis.handle(header, event.body, session))
            except Exception:
                logger.exception(
                    "closing %s: %s v%d failed",
                    channel.peer,
                    PRIVATE_APIS[header.api_key].name,
                    header.api_version,
                )
                return False
        elif isinstance(event, Close):
            logger.warning("closing connection from %s: %s", channel.peer, event.reason)
            return False
        return True
