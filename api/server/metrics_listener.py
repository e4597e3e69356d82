"""The metrics listener (`metrics.listen=HOST:PORT`): `/metrics`, `/healthz`, `/readyz` over HTTP.

A small asyncio HTTP/1.1 responder in the server's own event loop: one GET per connection
(answered, then closed), a request head of at most `MAX_HEAD_BYTES`, a few seconds to send it.
`/metrics` is the Prometheus text format of the server's registry; `/healthz` answers 200 while
the process serves; `/readyz` answers 200 or 503 with the readiness as JSON (api/server/health.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from api.server.health import Health

logger = logging.getLogger("api.server")

MAX_HEAD_BYTES = 8192
"""The largest request head read; a longer one is answered 431 and closed."""

HEAD_TIMEOUT_S = 5.0
"""How long a client may take to send its request head."""


class MetricsListener:
    """Serves the registry and the health probes on one TCP address."""

    def __init__(
        self,
        registry: CollectorRegistry,
        health: Callable[[], Health],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.registry = registry
        self.health = health
        self.host = host
        self.port = port
        """The bound port once started (0 picks a free one)."""
        self._server: asyncio.Server | None = None

    @property
    def address(self) -> str:
        """`host:port` to scrape."""
        host = self.host or "127.0.0.1"
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    async def start(self) -> None:
        """Bind and serve."""
        self._server = await asyncio.start_server(
            self._serve, self.host or None, self.port, limit=MAX_HEAD_BYTES
        )
        if self._server.sockets:
            self.port = int(self._server.sockets[0].getsockname()[1])
        logger.info(
            "metrics and health probes on http://%s/metrics (/healthz, /readyz)", self.address
        )

    async def stop(self) -> None:
        """Stop serving."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                async with asyncio.timeout(HEAD_TIMEOUT_S):
                    head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.LimitOverrunError:
                await self._reply(writer, 431, "text/plain", b"request head too large\n")
                return
            except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
                return
            status, content_type, body = self.answer(head)
            await self._reply(writer, status, content_type, body)
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    def answer(self, head: bytes) -> tuple[int, str, bytes]:
        """(status, content type, body) for a request head (sans-IO: tests feed bytes)."""
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = line.split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return 400, "text/plain", b"bad request line\n"
        method, target, _ = parts
        if method != "GET":
            return 405, "text/plain", b"only GET is served\n"
        path = target.split("?", 1)[0]
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if path == "/healthz":
            return 200, "text/plain", b"ok\n"
        if path == "/readyz":
            state = self.health()
            body = (json.dumps(state.to_json(), sort_keys=True) + "\n").encode()
            return (200 if state.ready else 503), "application/json", body
        return 404, "text/plain", b"not found: try /metrics, /healthz or /readyz\n"

    @staticmethod
    async def _reply(
        writer: asyncio.StreamWriter, status: int, content_type: str, body: bytes
    ) -> None:
        reason = _REASONS.get(status, "")
        head = (
            f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        with contextlib.suppress(ConnectionError, OSError):
            writer.write(head + body)
            await writer.drain()


_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}
