"""Attacks on TLS handshakes: issue #31's finding 5, and issue #54's finding 5 (one NAT address).

Before #31 each connection that never finished its handshake held a TLS object and its buffers
(about 300 KB) for up to 60 s, as many as the connection limits allowed. Now one address has
at most `TLS_HANDSHAKES_PER_IP` handshakes under way, a handshake has `TLS_HANDSHAKE_TIMEOUT`
seconds, and nothing of a connection's TLS state outlives it.

Before #54 the address's next connections were closed at once: every client behind one NAT
address was refused while 32 handshakes of that address were under way, for up to 10 s when
they stalled. Now they wait their turn (costing no TLS object), and a handshake under way for
`login_guard.HANDSHAKE_STALL` seconds while others wait gives way to them.

A real server on 127.0.0.1 in this process; the attackers and clients come from other loopback
addresses. Every wait is bounded; nothing asserts how fast anything is.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import gc
import select
import socket
import ssl
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
import trustme

import api.server.server
from api.protocol import codec
from api.server.login_guard import HandshakeSlots
from api.server.server import ServerListener
from tests.support.attacks import WAIT
from tests.support.server_thread import running_server

TLS_HANDSHAKES_PER_IP = 32
"""api.server.server.TLS_HANDSHAKES_PER_IP (docs/security.md), spelled here so that the test
runs, and fails, against the code before the fix too."""

TLS_HANDSHAKE_TIMEOUT = 10.0
"""api.server.server.TLS_HANDSHAKE_TIMEOUT (docs/security.md), checked by the test."""

HANDSHAKE_TIMEOUT_HERE = 3.0
"""The handshake timeout the test's server runs with (patched): the held handshakes are closed
by it, as by the 10 s one, without the test waiting 10 s for that."""
ATTACKER = "127.0.0.2"
SOCKETS = 3 * TLS_HANDSHAKES_PER_IP
CLIENT_HELLO_START = b"\x16\x03\x01\x02\x00\x01"  # a record header, then nothing more


def _until(condition: Callable[[], bool], wait: float = WAIT) -> bool:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def _closed(sock: socket.socket) -> bool:
    """The server closed `sock` (it reads as EOF or a reset now; it never sends anything)."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _live_tls_protocols() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, asyncio.sslproto.SSLProtocol))


def test_never_finished_handshakes_are_bounded_per_address_and_in_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert api.server.server.TLS_HANDSHAKE_TIMEOUT == TLS_HANDSHAKE_TIMEOUT
    # Shorter than connections.max.idle.ms (10 min by default): the handshake's own timeout,
    # not the idle limit, closes what is held.
    monkeypatch.setattr(api.server.server, "TLS_HANDSHAKE_TIMEOUT", HANDSHAKE_TIMEOUT_HERE)
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    listener = ServerListener(
        name="SSL", security_protocol="SSL", host="127.0.0.1", port=0, ssl_context=server_context
    )
    with running_server(tmp_path / "log", brokers=1, listeners=[listener]) as server:
        before = _live_tls_protocols()
        attack = []
        for _ in range(SOCKETS):
            sock = socket.create_connection(
                (server.host, server.port), timeout=WAIT, source_address=(ATTACKER, 0)
            )
            sock.sendall(CLIENT_HELLO_START)
            attack.append(sock)
        try:
            # Past its bound, the address's connections wait without a TLS object.
            time.sleep(0.5)
            assert _live_tls_protocols() - before <= TLS_HANDSHAKES_PER_IP
            # Another address still gets its handshake and its answers.
            with (
                socket.create_connection((server.host, server.port), timeout=WAIT) as raw,
                client_context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
            ):
                body = codec.build(
                    codec.request_class(18, 3),
                    client_software_name="t",
                    client_software_version="1",
                )
                tls.sendall(codec.encode_request(body, correlation_id=7))
                assert len(tls.recv(4)) == 4
            # The held ones are closed when their handshake (or their wait) times out.
            # Long before connections.max.idle.ms (10 min) could close them instead.
            assert _until(lambda: all(_closed(s) for s in attack), HANDSHAKE_TIMEOUT_HERE + 60)
        finally:
            for sock in attack:
                sock.close()
        assert _until(lambda: server.open_connections == 0)
        assert _until(lambda: _live_tls_protocols() <= before)  # no TLS state outlives them


def _tls_listener() -> tuple[ServerListener, ssl.SSLContext]:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    listener = ServerListener(
        name="SSL", security_protocol="SSL", host="127.0.0.1", port=0, ssl_context=server_context
    )
    return listener, client_context


async def _served(port: int, context: ssl.SSLContext, source: str) -> bool:
    """One TLS connection from `source`: handshake, an ApiVersions answered; False if refused."""
    try:
        async with asyncio.timeout(WAIT):
            reader, writer = await asyncio.open_connection(
                "127.0.0.1",
                port,
                ssl=context,
                server_hostname="127.0.0.1",
                local_addr=(source, 0),
                ssl_handshake_timeout=WAIT,
            )
            try:
                body = codec.build(
                    codec.request_class(18, 3),
                    client_software_name="t",
                    client_software_version="1",
                )
                writer.write(codec.encode_request(body, correlation_id=1))
                size = int.from_bytes(await reader.readexactly(4), "big")
                await reader.readexactly(size)
            finally:
                writer.close()
        return True
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError):
        return False


def test_prompt_handshakes_from_one_address_are_never_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crowd behind one NAT address: twice the bound at once, all of them served.

    A handshake is prompt here whatever the host's load: under way longer than the stall
    (`HANDSHAKE_STALL`, 2 s) while others wait is the rule of the next tests, not this one's,
    and a loaded host's handshake took longer (one of 256 closed). So the stall is a minute.
    """
    monkeypatch.setattr(api.server.server, "HandshakeSlots", partial(HandshakeSlots, stall=60.0))
    listener, client_context = _tls_listener()
    crowd = 2 * TLS_HANDSHAKES_PER_IP
    with running_server(tmp_path / "log", brokers=1, listeners=[listener]) as server:

        async def clients() -> list[bool]:
            gate = asyncio.Semaphore(crowd)

            async def one() -> bool:
                async with gate:
                    return await _served(server.port, client_context, "127.0.0.3")

            return await asyncio.gather(*(one() for _ in range(4 * crowd)))

        served = asyncio.run(clients())
        assert all(served), f"{served.count(False)} of {len(served)} refused"
        assert "tls.handshakes.per.ip" not in server.limit_closes


def test_stalled_handshakes_do_not_lock_their_address_out(tmp_path: Path) -> None:
    """Stalled handshakes of an address (the bound's worth) give way to a client behind it."""
    listener, client_context = _tls_listener()
    nat = "127.0.0.4"
    with running_server(tmp_path / "log", brokers=1, listeners=[listener]) as server:
        stalled = []
        try:
            for _ in range(TLS_HANDSHAKES_PER_IP):
                sock = socket.create_connection(
                    (server.host, server.port), timeout=WAIT, source_address=(nat, 0)
                )
                sock.sendall(CLIENT_HELLO_START)
                stalled.append(sock)
            time.sleep(0.2)  # they have their slots
            # The handshake timeout (10 s) is left as it is: the stalled ones give way sooner.
            assert asyncio.run(_served(server.port, client_context, nat))
            assert asyncio.run(_served(server.port, client_context, nat))
            assert sum(_closed(s) for s in stalled) >= 1  # what gave way
        finally:
            for sock in stalled:
                sock.close()
