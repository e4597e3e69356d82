"""A server connection's TLS layer: asyncio's SSL protocol with a one-record read buffer.

asyncio's `SSLProtocol` (the one `loop.start_tls` makes; TLS listeners run on asyncio's loop,
event_loop.py) allocates a 256 KiB read buffer per connection (`max_size`) and keeps it for the
connection's life: an idle TLS connection cost the server about 285 KB, 2,000 of them 570 MB.
`ServerTls` reads at most one TLS record's plaintext (16 KiB) per socket read instead; a
request larger than that is read in more reads, each a whole record at most, as the TLS
library hands them over anyway. `upgrade` is `loop.start_tls(..., server_side=True)` with it.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import ssl

READ_BUFFER = 16 * 1024
"""Bytes a server TLS connection reads from its socket at once (TLS's largest record payload)."""


class ServerTls(asyncio.sslproto.SSLProtocol):
    """asyncio's SSL protocol with a `READ_BUFFER` read buffer (server connections only)."""

    max_size = READ_BUFFER

    @property
    def app_transport(self) -> asyncio.Transport:
        """The transport the application writes to, once the handshake is done."""
        # The base keeps it as `_app_transport` (what `loop.start_tls` returns), set when the
        # handshake completes.
        return self._app_transport


async def upgrade(
    transport: asyncio.Transport,
    protocol: asyncio.BaseProtocol,
    context: ssl.SSLContext,
    *,
    handshake_timeout: float,
) -> asyncio.Transport:
    """The server side of a TLS handshake on `transport`; the TLS transport once it is done.

    What `loop.start_tls(transport, protocol, context, server_side=True)` does, with `ServerTls`
    as the protocol. A failed or timed-out handshake raises (as `start_tls` does) and closes
    the transport.
    """
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    tls = ServerTls(
        loop,
        protocol,
        context,
        waiter,
        server_side=True,
        call_connection_made=False,
        ssl_handshake_timeout=handshake_timeout,  # type: ignore[arg-type] # seconds, a float
    )
    # Paused first so that no byte reaches the TLS protocol before its connection_made.
    transport.pause_reading()
    transport.set_protocol(tls)
    made = loop.call_soon(tls.connection_made, transport)
    resume = loop.call_soon(transport.resume_reading)
    try:
        await waiter
    except BaseException:
        transport.close()
        made.cancel()
        resume.cancel()
        raise
    return tls.app_transport
