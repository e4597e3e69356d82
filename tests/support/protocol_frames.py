"""Request frames for the protocol tests: API versions and Metadata frames, raw exchanges."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from collections.abc import Sequence
from typing import Any

from api.protocol import codec


def _request(api_key: int, version: int, **values: Any) -> Any:
    return codec.build(codec.request_class(api_key, version), **values)


def ApiVersionsRequest(**values: Any) -> Any:  # noqa: N802 - reads as the kio class it builds
    return _request(18, 3, **values)


def MetadataRequest(**values: Any) -> Any:  # noqa: N802
    return _request(3, 12, **values)


def CreateTopicsRequest(**values: Any) -> Any:  # noqa: N802
    return _request(19, 7, **values)


def CreatableTopic(**values: Any) -> dict[str, Any]:  # noqa: N802
    return values


def _frame(body: object, correlation_id: int = 7) -> bytes:
    return codec.encode_request(body, correlation_id=correlation_id, client_id="test")


API_VERSIONS = _frame(ApiVersionsRequest(client_software_name="test", client_software_version="1"))


SEEDS = [
    API_VERSIONS,
    _frame(
        MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
    ),
    _frame(
        CreateTopicsRequest(
            topics=(
                CreatableTopic(
                    name="f", num_partitions=1, replication_factor=1, assignments=(), configs=()
                ),
            ),
            validate_only=True,
        )
    ),
]


def metadata_frame() -> bytes:
    body = codec.build(
        codec.request_class(3, 12),
        topics=[{"name": "x", "topic_id": bytes(16)}],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return codec.encode_request(body, correlation_id=9)[4:]


async def exchange_frames(
    port: int, frames: Sequence[bytes], tls: ssl.SSLContext | None = None
) -> list[bytes | None]:
    """Send frames on one connection (over TLS with `tls`); each answer (without its size),
    None once closed."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=tls, server_hostname="127.0.0.1" if tls is not None else None
    )
    out: list[bytes | None] = []
    try:
        for frame in frames:
            writer.write(frame)
            try:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                out.append(await reader.readexactly(size))
            except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                out.append(None)
    finally:
        writer.close()
    return out


def recv_frame(sock: socket.socket) -> bytes:
    """The next answer on a blocking socket, without its size; ConnectionError once closed."""
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    return recv_exactly(sock, size)


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    """`size` bytes from a blocking socket; ConnectionError if it closes first."""
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed by the server")
        data += chunk
    return bytes(data)
