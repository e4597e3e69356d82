"""Attack of issue #54, finding 4: unfinished pre-login frames starving every new login.

Before the fix 70 connections that each sent an unfinished 512 KiB frame filled a SASL
listener's 32 MiB pre-login pool; every later connection waited unread, and a SCRAM login timed
out for as long as the sockets were held (up to connections.max.idle.ms, 10 min). Now a full
pool makes the idlest connection of the address holding the most give way, never the one that
needs room, and a login must end within `sasl.server.authentication.timeout.ms`.

A real server on 127.0.0.1 in this process; the attacker is 127.0.0.1, the other client
127.0.0.2. Every wait is bounded; nothing asserts how fast anything is.
"""

from __future__ import annotations

import resource
import select
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from api.protocol.connection import DEFAULT_MAX_REQUEST_BYTES
from api.server.limits import resolve_limits
from api.server.server import ServerListener
from tests.support.attacks import ADMIN, ADMIN_PASSWORD, WAIT, Wire, seed_user
from tests.support.server_thread import running_server

SASL = ServerListener(
    name="SASL_PLAINTEXT",
    security_protocol="SASL_PLAINTEXT",
    host="127.0.0.1",
    port=0,
    sasl_mechanisms=("SCRAM-SHA-256",),
)
ATTACKER = "127.0.0.1"
OTHER = "127.0.0.2"
FRAME = 512 * 1024 - 4
"""A frame's claimed size: the largest `sasl.server.max.receive.size` takes, with its size."""
UNSENT = 100
"""Bytes of each held frame never sent: it stays unfinished."""


@contextmanager
def _open_files(wanted: int) -> Iterator[None]:
    """The soft open-file limit raised to `wanted` (within the hard limit) for the block."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        yield
        return
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"needs {wanted} open files; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _hold(address: str, count: int) -> list[socket.socket]:
    """`count` sockets from `ATTACKER`, each with an unfinished frame sent as far as it goes."""
    host, port = address.rsplit(":", 1)
    frame = struct.pack(">i", FRAME) + bytes(FRAME - UNSENT)
    held: list[tuple[socket.socket, memoryview]] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(
                (host, int(port)), timeout=WAIT, source_address=(ATTACKER, 0)
            )
            sock.setblocking(False)
            held.append((sock, memoryview(frame)))
        # Round-robin until nothing more goes for a while (the server stopped reading them,
        # read all, or closed them); bounded by the deadline whatever happens.
        deadline = time.monotonic() + 4 * WAIT
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 1.0 and time.monotonic() < deadline:
            moved = False
            for index, (sock, rest) in enumerate(held):
                if not rest:
                    continue
                try:
                    sent = sock.send(rest)
                except BlockingIOError:
                    continue
                except OSError:
                    held[index] = (sock, rest[:0])
                    continue
                held[index] = (sock, rest[sent:])
                moved = True
            if moved:
                quiet_since = time.monotonic()
            else:
                time.sleep(0.05)
    except BaseException:
        for sock, _ in held:
            sock.close()
        raise
    return [sock for sock, _ in held]


def _logs_in(server: object, source: str) -> int:
    wire = Wire(server, "SASL_PLAINTEXT", source=source)  # type: ignore[arg-type]
    try:
        return wire.scram_login(ADMIN, ADMIN_PASSWORD)
    finally:
        wire.close()


@pytest.mark.parametrize("count", [70, 1000])
def test_held_unfinished_frames_stop_no_login(tmp_path: Path, count: int) -> None:
    log_dir = tmp_path / "log"
    seed_user(log_dir, ADMIN, ADMIN_PASSWORD, iterations=4096)
    with (
        _open_files(2 * count + 512),
        running_server(log_dir, brokers=1, listeners=[SASL]) as server,
    ):
        held = _hold(server.address, count)
        try:
            # The pool is full of the attacker's bytes (it sent more than the pool holds).
            assert server.queued_request_bytes >= 30 * 1024 * 1024
            assert _logs_in(server, OTHER) == 0  # another address logs in
            assert _logs_in(server, ATTACKER) == 0  # and so does a client of the same one
            assert _logs_in(server, OTHER) == 0
            # What gave way were the attacker's idlest sockets, summed up in the limits' line.
            assert server.limit_closes.get("prelogin.pool.bytes", 0) >= 1
            assert server.queued_request_bytes <= 32 * 1024 * 1024
        finally:
            for sock in held:
                sock.close()


def _closed_within(sock: socket.socket, wait: float) -> bool:
    readable, _, _ = select.select([sock], [], [], wait)
    if not readable:
        return False
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_login_not_ended_in_time_is_closed(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    seed_user(log_dir, ADMIN, ADMIN_PASSWORD, iterations=4096)
    limits = resolve_limits(
        {"sasl.server.authentication.timeout.ms": 500},
        {},
        max_request_bytes=DEFAULT_MAX_REQUEST_BYTES,
    )
    with running_server(log_dir, brokers=1, listeners=[SASL], limits=limits) as server:
        silent = Wire(server, "SASL_PLAINTEXT", source=OTHER)
        talker = Wire(server, "SASL_PLAINTEXT", source=OTHER)
        partial = Wire(server, "SASL_PLAINTEXT", source=OTHER)
        admin = Wire(server, "SASL_PLAINTEXT", source=OTHER)
        try:
            assert admin.scram_login(ADMIN, ADMIN_PASSWORD) == 0
            assert talker.api_versions().api_keys  # something, but no login
            partial.sock.sendall(struct.pack(">i", 1000) + bytes(10))  # a frame never finished
            # Each is closed by the deadline (connections.max.idle.ms is 10 minutes).
            for wire in (silent, talker, partial):
                assert _closed_within(wire.sock, WAIT)
            # A connection that logged in is not: it is answered past the deadline.
            time.sleep(1.0)
            assert admin.metadata().brokers
            assert server.limit_closes.get("sasl.server.authentication.timeout.ms") == 3
        finally:
            for wire in (silent, talker, partial, admin):
                wire.close()


def test_sasl_server_max_receive_size_bounds_a_frame_before_login(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    seed_user(log_dir, ADMIN, ADMIN_PASSWORD, iterations=4096)
    limits = resolve_limits(
        {"sasl.server.max.receive.size": 2048}, {}, max_request_bytes=DEFAULT_MAX_REQUEST_BYTES
    )
    with running_server(log_dir, brokers=1, listeners=[SASL], limits=limits) as server:
        big = Wire(server, "SASL_PLAINTEXT", source=OTHER)
        try:
            big.sock.sendall(struct.pack(">i", 4000))
            assert _closed_within(big.sock, WAIT)  # over Kafka's key, as Kafka closes it
            assert _logs_in(server, OTHER) == 0  # a login's frames are far below it
        finally:
            big.close()
