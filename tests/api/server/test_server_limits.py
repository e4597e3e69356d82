"""Fair service per connection and limits on hostile ones, over real sockets (issue #18, item 3).

The server runs in a thread of this process (`tests/support/server_thread.py`); clients are blocking
sockets speaking the wire protocol. Every wait is bounded; nothing asserts how fast anything is.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from api.protocol import codec
from api.protocol.connection import Close, Connection, Request
from api.server.channel import READ_AHEAD, WRITE_HIGH
from api.server.limits import (
    CloseSummary,
    ConnectionCounts,
    LimitsError,
    RequestMemory,
    ServerLimits,
    resolve_limits,
)
from api.server.server import MetadataServer
from tests.support.protocol_frames import recv_frame
from tests.support.server_thread import running_server

WAIT = 20.0  # seconds any single wait may take before the test fails


def _api_versions(correlation_id: int) -> bytes:
    body = codec.build(
        codec.request_class(18, 3), client_software_name="t", client_software_version="1"
    )
    return codec.encode_request(body, correlation_id=correlation_id, client_id="t")


def _metadata_all(correlation_id: int) -> bytes:
    """Metadata v12 for every topic (the expensive answer on a large image)."""
    body = codec.build(
        codec.request_class(3, 12),
        topics=None,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    return codec.encode_request(body, correlation_id=correlation_id, client_id="t")


def _create_topics(correlation_id: int, names: list[str]) -> bytes:
    topics = [
        {
            "name": name,
            "num_partitions": 3,
            "replication_factor": 1,
            "assignments": (),
            "configs": (),
        }
        for name in names
    ]
    body = codec.build(
        codec.request_class(19, 7), topics=topics, timeout=30_000, validate_only=False
    )
    return codec.encode_request(body, correlation_id=correlation_id, client_id="t")


def _answer(sock: socket.socket) -> tuple[int, int]:
    """The correlation id and size of the next answer on `sock` (its body is dropped)."""
    frame = recv_frame(sock)
    return int(struct.unpack_from(">i", frame, 0)[0]), len(frame)


def _answer_id(sock: socket.socket) -> int:
    return _answer(sock)[0]


def _ask(sock: socket.socket, frame: bytes, correlation_id: int) -> int:
    """Send one request and read its answer; the answer's size."""
    sock.sendall(frame)
    answered, size = _answer(sock)
    assert answered == correlation_id
    return size


def _connect(server: MetadataServer, *, source: str | None = None) -> socket.socket:
    sock = socket.create_connection(
        (server.host, server.port), timeout=WAIT, source_address=(source, 0) if source else None
    )
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed `sock` (reads until EOF or a reset, within WAIT)."""
    sock.settimeout(WAIT)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False
    return True


def _until(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


# ---------------------------------------------------------------------------------- fairness


def test_a_never_reading_pipeliner_is_held_to_bounds_and_does_not_starve_another(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path / "log") as server:
        probe = _connect(server)
        # A large enough image that each Metadata answer is tens of KiB.
        _ask(probe, _create_topics(1, [f"topic-{i:03d}" for i in range(150)]), 1)
        pipeliner = socket.socket()
        pipeliner.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        pipeliner.connect((server.host, server.port))
        pipeliner.settimeout(0.5)
        burst = b"".join(_metadata_all(i) for i in range(1000))
        sent = 0
        blocked = False
        probe_answers = 0
        answer_size = _ask(probe, _metadata_all(4), 4)
        assert answer_size > 10_000  # the image is as large as meant
        highest_unsent = 0
        highest_queued = 0
        # Pipeline Metadata without ever reading, until the server stops reading from us; the
        # probe asks on its own connection all along.
        while sent < 256 * 1024 * 1024:
            try:
                pipeliner.sendall(burst)
            except TimeoutError:
                blocked = True
                break
            sent += len(burst)
            _ask(probe, _api_versions(2), 2)
            _ask(probe, _metadata_all(3), 3)
            probe_answers += 2
            highest_unsent = max(highest_unsent, server.unsent_answer_bytes)
            highest_queued = max(highest_queued, server.queued_request_bytes)
        assert blocked, f"the server read all {sent} bytes of requests nobody read answers to"
        # Still answered while the pipeliner's requests wait, and still after it blocked.
        for round_ in range(20):
            _ask(probe, _api_versions(10 + round_), 10 + round_)
            _ask(probe, _metadata_all(100 + round_), 100 + round_)
            highest_unsent = max(highest_unsent, server.unsent_answer_bytes)
            highest_queued = max(highest_queued, server.queued_request_bytes)
        probe_answers += 40
        # What the server holds for the pipeliner is bounded, however much it sent: its
        # unsent answers stop at the high-water mark plus the one answer that crossed it.
        assert highest_unsent <= WRITE_HIGH + answer_size, highest_unsent
        assert highest_queued <= READ_AHEAD + 256 * 1024, highest_queued
        assert probe_answers >= 42
        pipeliner.close()
        probe.close()


def test_pipelined_requests_are_all_answered_in_order_even_after_the_client_shuts_down_writing(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path / "log") as server:
        sock = _connect(server)
        frames = [_api_versions(i) if i % 2 else _metadata_all(i) for i in range(3000)]
        sock.sendall(b"".join(frames))
        sock.shutdown(socket.SHUT_WR)
        assert [_answer_id(sock) for _ in range(3000)] == list(range(3000))
        assert _closed_by_server(sock)
        sock.close()


# ---------------------------------------------------------------------------------- idleness


def test_idle_and_slowloris_connections_are_closed_and_active_ones_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    limits = ServerLimits(connections_max_idle_ms=300)
    with (
        caplog.at_level(logging.WARNING, "api.server"),
        running_server(tmp_path / "log", limits=limits) as server,
    ):
        idle = _connect(server)
        slowloris = _connect(server)
        active = _connect(server)
        slowloris.sendall(struct.pack(">i", 1000))  # a frame that never completes
        trickled = 0
        slowloris_closed = False
        start = time.monotonic()
        while time.monotonic() - start < WAIT:
            # One byte of the frame every 50 ms: arriving bytes are not progress.
            try:
                slowloris.sendall(b"x")
                trickled += 1
            except OSError:
                slowloris_closed = True
                break
            if trickled % 2 == 0:
                _ask(active, _api_versions(trickled), trickled)  # completes requests: kept
            if server.limit_closes.get("connections.max.idle.ms", 0) >= 2:
                break
            time.sleep(0.05)
        assert slowloris_closed or _closed_by_server(slowloris)
        assert _closed_by_server(idle)
        _ask(active, _api_versions(99999), 99999)
        assert server.limit_closes == {"connections.max.idle.ms": 2}
        assert server.open_connections == 1
        assert server.queued_request_bytes == 0  # the slowloris's claim went with it
        for sock in (idle, slowloris, active):
            sock.close()
    lines = [r.getMessage() for r in caplog.records if "over limits" in r.getMessage()]
    # Two closes: one line at the first, the rest summed up (here when the server stopped).
    assert 1 <= len(lines) <= 2, lines
    assert sum(int(line.split()[1]) for line in lines) == 2
    assert all("over connections.max.idle.ms=300" in line for line in lines)


# ---------------------------------------------------------------------------------- connections


def test_connections_over_the_per_ip_limit_are_closed_and_summed_up_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    limits = ServerLimits(max_connections_per_ip=3)
    with (
        caplog.at_level(logging.WARNING, "api.server"),
        running_server(tmp_path / "log", limits=limits) as server,
    ):
        kept = [_connect(server) for _ in range(3)]
        for sock in kept:
            _ask(sock, _api_versions(1), 1)
        excess = [_connect(server) for _ in range(40)]
        assert all(_closed_by_server(sock) for sock in excess)
        # Another address has its own count.
        other = _connect(server, source="127.0.0.2")
        _ask(other, _api_versions(2), 2)
        for sock in kept:
            _ask(sock, _api_versions(3), 3)
        assert server.limit_closes == {"max.connections.per.ip": 40}
        assert server.open_connections == 4
        # A closed connection frees its place.
        kept.pop().close()
        assert _until(lambda: server.open_connections == 3)
        again = _connect(server)
        _ask(again, _api_versions(4), 4)
        for sock in [*kept, *excess, other, again]:
            sock.close()
    lines = [r.getMessage() for r in caplog.records if "over limits" in r.getMessage()]
    assert 1 <= len(lines) <= 2, lines  # not one per connection
    assert sum(int(line.split()[1]) for line in lines) == 40


def test_connections_over_max_connections_are_closed(tmp_path: Path) -> None:
    with running_server(tmp_path / "log", limits=ServerLimits(max_connections=5)) as server:
        kept = [_connect(server, source=f"127.0.0.{i}") for i in range(1, 6)]
        for sock in kept:
            _ask(sock, _api_versions(1), 1)
        excess = [_connect(server, source="127.0.0.9") for _ in range(3)]
        assert all(_closed_by_server(sock) for sock in excess)
        assert server.limit_closes == {"max.connections": 3}
        for sock in kept:
            _ask(sock, _api_versions(2), 2)
            sock.close()
        for sock in excess:
            sock.close()


# ---------------------------------------------------------------------------------- request bytes


def test_a_claimed_size_costs_nothing_and_a_connection_over_the_pool_waits_unclosed(
    tmp_path: Path,
) -> None:
    """Bytes count as they arrive; past queued.max.request.bytes a connection waits (issue #31)."""
    mib = 1024 * 1024
    limits = ServerLimits(queued_max_request_bytes=2 * mib)
    with running_server(tmp_path / "log", limits=limits, max_request_bytes=2 * mib) as server:
        claimer = _connect(server)
        claimer.sendall(struct.pack(">i", 2 * mib - 4) + bytes(100))  # 100 bytes of 2 MiB
        assert _until(lambda: server.queued_request_bytes == 104)  # the claim itself is free
        filler = _connect(server)  # real bytes up to the pool's capacity, exactly
        filler.sendall(struct.pack(">i", 2 * mib - 4) + bytes(2 * mib - 108))
        assert _until(lambda: server.queued_request_bytes == 2 * mib)
        small = _connect(server)
        _ask(small, _api_versions(1), 1)  # read before the pool was found full: answered
        small.sendall(_api_versions(2))  # now it waits, unread, and is not closed
        small.settimeout(0.5)
        with pytest.raises(TimeoutError):
            small.recv(1)
        small.settimeout(WAIT)
        claimer.close()  # memory released: the waiting connection is read and answered
        assert _answer_id(small) == 2
        assert server.limit_closes == {}
        for sock in (small, filler):
            sock.close()
        assert _until(lambda: server.queued_request_bytes == 0)


# ---------------------------------------------------------------------------------- parts


def test_request_memory_refuses_growth_past_its_capacity_and_always_takes_shrinking() -> None:
    memory = RequestMemory(100)
    assert memory.change(0, 60)
    assert not memory.change(0, 41)
    assert memory.used == 60
    assert memory.change(0, 40)
    assert memory.change(60, 10)
    assert memory.used == 50


def test_request_memory_holds_what_arrived_and_wakes_waiters_in_order_on_release() -> None:
    memory = RequestMemory(100)
    woken: list[str] = []
    assert memory.hold(0, 100)  # exactly full is within
    assert not memory.hold(0, 30)  # counted all the same: the bytes are in memory
    assert memory.used == 130
    memory.wait(lambda: woken.append("a"))
    memory.wait(lambda: woken.append("b"))
    assert memory.hold(30, 0) is True and woken == []  # back at the capacity: no room yet
    memory.hold(100, 99)
    assert woken == ["a"]  # one byte of room wakes one waiter (at least one)
    memory.hold(99, 0)
    assert woken == ["a", "b"]
    assert memory.waiting == 0


def test_connection_counts_by_address() -> None:
    counts = ConnectionCounts(max_connections=3, max_per_ip=2)
    assert counts.admit("a") is None
    assert counts.admit("a") is None
    assert counts.admit("a") == "max.connections.per.ip"
    assert counts.admit("b") is None
    assert counts.admit("c") == "max.connections"
    counts.release("a")
    assert counts.admit("c") is None
    assert counts.total == 3


def test_close_summary_logs_once_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.close_summary")

    async def run() -> None:
        summary = CloseSummary(logger, {"max.connections": 5}, interval=0.2)
        for _ in range(100):
            summary.count("max.connections")
        await asyncio.sleep(0.5)
        summary.count("max.connections")
        summary.flush()

    with caplog.at_level(logging.WARNING, "test.close_summary"):
        asyncio.run(run())
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "closed 1 connection over limits: 1 over max.connections=5",
        "closed 99 connections over limits: 99 over max.connections=5",
        "closed 1 connection over limits: 1 over max.connections=5",
    ]


def test_limits_come_from_flags_then_environment_then_defaults() -> None:
    env = {"MLOG_MAX_CONNECTIONS": "50", "MLOG_CONNECTIONS_MAX_IDLE_MS": "1000"}
    limits = resolve_limits({"max.connections": 7}, env, max_request_bytes=1024)
    assert limits == ServerLimits(max_connections=7, connections_max_idle_ms=1000)
    assert resolve_limits({}, {}, max_request_bytes=1024) == ServerLimits()
    with pytest.raises(LimitsError, match="MLOG_MAX_CONNECTIONS_PER_IP"):
        resolve_limits({}, {"MLOG_MAX_CONNECTIONS_PER_IP": "0"}, max_request_bytes=1024)
    with pytest.raises(LimitsError, match="could never be read"):
        resolve_limits({"queued.max.request.bytes": 2048}, {}, max_request_bytes=4096)


def test_a_connection_claims_the_whole_of_the_frame_at_its_head() -> None:
    connection = Connection(max_request_bytes=1 << 20)
    small = _api_versions(1)
    connection.feed(small + struct.pack(">i", 5000) + b"ab")
    # A complete frame at the head: what is buffered.
    assert connection.claimed_bytes == len(small) + 6
    assert isinstance(connection.next_event(), Request)
    # Now the partial frame is at the head: all of it, as claimed.
    assert connection.claimed_bytes == 5004
    assert connection.next_event() is None
    assert connection.buffered_bytes == 6
    # A size outside the limit is refused, not claimed.
    refused = Connection(max_request_bytes=1024)
    refused.feed(struct.pack(">i", 1 << 30))
    assert refused.claimed_bytes == 4
    assert isinstance(refused.next_event(), Close)
