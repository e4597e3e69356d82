"""`mlog serve`'s TCP server: a thin asyncio shell over the sans-IO protocol core.

Each connection is read by its own task: requests on a connection are answered in order, one
at a time (as a Kafka broker does), while writes from all connections meet in the service's
group commit and reads are answered from the committed image without waiting on writes. A
request that cannot be decoded closes only its own connection, with a logged reason.

Shutdown (`stop`, or SIGTERM/SIGINT under `serve`): stop accepting, let every connection finish
the requests it has already received, close the connections, then close the service (which
waits for appends in flight: everything acknowledged is fsynced).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from api.protocol.codec import API_NAMES, encode_response
from api.protocol.connection import (
    DEFAULT_MAX_REQUEST_BYTES,
    Close,
    Connection,
    Event,
    PrivateRequest,
    Reply,
    Request,
)
from api.protocol.private import PRIVATE_APIS
from api.server.kafka.base import ANONYMOUS, Listener
from api.server.kafka.dispatch import KafkaApis
from api.server.private_apis import PrivateApis
from api.service.service import MetadataService

logger = logging.getLogger("api.server")


@dataclass(slots=True, eq=False)
class ConnectionState:
    """What the server keeps per connection."""

    peer: str
    principal: str = ANONYMOUS
    busy: bool = False
    closing: bool = False
    task: asyncio.Task[None] | None = field(default=None, repr=False)


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
        run_scheduler: bool = True,
    ) -> None:
        self.service = service
        self.host = host
        self.port = port
        self._advertised = (advertised_host, advertised_port)
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.max_request_bytes = max_request_bytes
        self.private_apis = PrivateApis(service)
        self._run_scheduler = run_scheduler
        self._server: asyncio.Server | None = None
        self._connections: set[ConnectionState] = set()
        self._scheduler: asyncio.Task[None] | None = None
        self.apis: KafkaApis | None = None
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        """Listen (port 0 picks a free port; `port` is then the one picked)."""
        self._server = await asyncio.start_server(self._serve_connection, self.host, self.port)
        sockets = self._server.sockets
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        host = self._advertised[0] or self.host
        port = self._advertised[1] or self.port
        self.apis = KafkaApis(
            self.service,
            Listener(host=host, port=port, node_id=self.node_id, cluster_id=self.cluster_id),
        )
        if self._run_scheduler:
            self._scheduler = asyncio.create_task(self._scheduled_purges())
        logger.info(
            "serving on %s:%d (advertised %s:%d), node %d, log offset %d",
            self.host,
            self.port,
            host,
            port,
            self.node_id,
            self.service.log.end_offset,
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
        for state in list(self._connections):
            state.closing = True
            if not state.busy and state.task is not None:
                state.task.cancel()
        tasks = [s.task for s in self._connections if s.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
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

    # ------------------------------------------------------------------ connections

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        peer = writer.get_extra_info("peername")
        state = ConnectionState(peer=f"{peer[0]}:{peer[1]}" if peer else "?")
        state.task = asyncio.current_task()
        self._connections.add(state)
        connection = Connection(max_request_bytes=self.max_request_bytes)
        transport = writer.transport
        try:
            while not state.closing:
                data = await reader.read(256 * 1024)
                if not data:
                    break
                state.busy = True
                try:
                    if not await self._answer(connection.receive(data), writer, state):
                        break
                    if transport.get_write_buffer_size():  # the socket took less than all
                        await writer.drain()
                finally:
                    state.busy = False
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self._connections.discard(state)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(
        self, events: Sequence[Event], writer: asyncio.StreamWriter, state: ConnectionState
    ) -> bool:
        """Answer events in order; False when the connection must close."""
        for event in events:
            if isinstance(event, Request):
                assert self.apis is not None
                header = event.request.header
                try:
                    body = await self.apis.handle(event.request, state.principal)
                except Exception:
                    logger.exception(
                        "closing %s: %s v%d failed",
                        state.peer,
                        API_NAMES.get(header.api_key, header.api_key),
                        header.api_version,
                    )
                    return False
                writer.write(encode_response(header.correlation_id, body))
            elif isinstance(event, Reply):
                writer.write(event.data)
            elif isinstance(event, PrivateRequest):
                header = event.header
                try:
                    writer.write(
                        await self.private_apis.handle(header, event.body, state.principal)
                    )
                except Exception:
                    logger.exception(
                        "closing %s: %s v%d failed",
                        state.peer,
                        PRIVATE_APIS[header.api_key].name,
                        header.api_version,
                    )
                    return False
            elif isinstance(event, Close):
                logger.warning("closing connection from %s: %s", state.peer, event.reason)
                return False
        return True
