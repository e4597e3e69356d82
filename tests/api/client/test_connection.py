"""The client connection: a request after the server has closed the connection fails at once."""

from __future__ import annotations

import asyncio
import contextlib
import struct

import pytest

from api.client.connection import ClientConnection, ConnectionLost

_SIZE = struct.Struct(">i")


async def _answer_once_then_close(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    """Answer one request (its correlation id back, nothing more), then close."""
    (size,) = _SIZE.unpack(await reader.readexactly(4))
    frame = await reader.readexactly(size)
    correlation = frame[4:8]  # after the request's api key and version
    writer.write(_SIZE.pack(4) + correlation)
    await writer.drain()
    writer.close()


def _request(correlation: int, api_key: int = 18) -> bytes:
    body = struct.pack(">hhi", api_key, 0, correlation)
    return _SIZE.pack(len(body)) + body


async def _closed_after_one_answer(api_key: int = 18) -> str:
    server = await asyncio.start_server(_answer_once_then_close, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client = ClientConnection(reader, writer, timeout_ms=60_000)
    try:
        answer = await asyncio.wait_for(client.send_frame(_request(1, api_key), 1, bytes), 10)
        assert answer == _SIZE.pack(1)
        while not client.closed:  # the server's close reaches the reader
            await asyncio.sleep(0.01)
        # A node stopping (a leader handing over) closes connections between answers; a
        # request sent then was neither answered nor failed, and waited out its timeout.
        with pytest.raises(ConnectionLost) as raised:
            client.send_frame(_request(2), 2, bytes)
        return str(raised.value)
    finally:
        await client.close()
        server.close()
        await server.wait_closed()


def test_a_request_after_the_server_closed_the_connection_fails_at_once() -> None:
    assert "closed the connection" in asyncio.run(_closed_after_one_answer())


def test_a_close_after_answers_blames_no_tls_or_login() -> None:
    # The server answered a Metadata request (3), so it took this client: a close after that
    # is the server going away (a killed leader), not a listener that wants TLS or a login.
    text = asyncio.run(_closed_after_one_answer(3))
    assert "TLS" not in text and "--command-config" not in text, text
    assert "stopped or dropped this client" in text and "connect again" in text, text


def test_a_close_after_only_api_versions_still_hints_at_tls_or_a_login() -> None:
    # A SASL listener answers ApiVersions before any login, then closes a client that sends
    # anything else without one: the hint at a client config stays.
    assert "--command-config" in asyncio.run(_closed_after_one_answer(18))


async def _cancelled_in_close() -> bool:
    """Whether a task cancelled while it closes a connection ends cancelled."""
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    client = ClientConnection(reader, writer, timeout_ms=60_000)
    try:
        closing = asyncio.ensure_future(client.close())
        await asyncio.sleep(0)  # it cancelled its receiver and waits for it to end
        closing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await closing
        return closing.cancelled()
    finally:
        server.close()
        await server.wait_closed()


def test_a_task_cancelled_while_closing_a_connection_stays_cancelled() -> None:
    # A reader task cancelled in its `finally: await client.close()` went on running when
    # the close swallowed the cancellation: the process it belonged to never stopped.
    assert asyncio.run(_cancelled_in_close())
