"""A connection's frames of every size are answered: the read-ahead bound never starves one.

The server holds at most `READ_AHEAD` bytes of a connection's pipelined requests before it
stops reading; a single request larger than that must still be read to its end and answered,
alone or behind smaller ones. Real sockets against `tests/support/server_thread.py`'s server; every
wait is bounded, nothing asserts how fast anything is.
"""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from api.protocol import codec
from api.server.channel import READ_AHEAD
from api.server.limits import ServerLimits
from tests.support.protocol_frames import recv_frame
from tests.support.server_thread import running_server

WAIT = 20.0


def _create_topics(correlation_id: int, names: list[str]) -> bytes:
    """CreateTopics v7, validate only (nothing is created, every topic is answered)."""
    topics = [
        {
            "name": name,
            "num_partitions": 1,
            "replication_factor": 1,
            "assignments": (),
            "configs": (),
        }
        for name in names
    ]
    body = codec.build(
        codec.request_class(19, 7), topics=topics, timeout=30_000, validate_only=True
    )
    return codec.encode_request(body, correlation_id=correlation_id, client_id="t")


def _api_versions(correlation_id: int) -> bytes:
    body = codec.build(
        codec.request_class(18, 3), client_software_name="t", client_software_version="1"
    )
    return codec.encode_request(body, correlation_id=correlation_id, client_id="t")


def _answer(sock: socket.socket) -> tuple[int, bytes]:
    """The correlation id and the body of the next answer on `sock`."""
    frame = recv_frame(sock)
    return int(struct.unpack_from(">i", frame, 0)[0]), frame


def _big_request(correlation_id: int, size: int) -> tuple[bytes, int]:
    """A CreateTopics frame of at least `size` bytes, and how many topics it names."""
    count = size // 200 + 1
    names = [f"t{i:05d}-" + "x" * 190 for i in range(count)]
    frame = _create_topics(correlation_id, names)
    assert len(frame) >= size
    return frame, count


def test_a_request_larger_than_the_read_ahead_is_answered(tmp_path: Path) -> None:
    frame, count = _big_request(1, 4 * READ_AHEAD)
    with running_server(tmp_path / "log") as server:
        sock = socket.create_connection((server.host, server.port), timeout=WAIT)
        with sock:
            sock.sendall(frame)
            correlation, answer = _answer(sock)
            assert correlation == 1
            assert answer.count(b"-" + b"x" * 190) == count  # every topic answered
            sock.sendall(_api_versions(2))  # and the connection goes on
            assert _answer(sock)[0] == 2
        assert server.queued_request_bytes == 0


def test_a_large_request_behind_a_pipelined_burst_is_answered(tmp_path: Path) -> None:
    """Small requests fill the read-ahead (reading stops), then a large one arrives in parts."""
    small = b"".join(_api_versions(i) for i in range(1, READ_AHEAD // 30))
    burst = small.count(b"\x00\x12\x00\x03")  # one ApiVersions v3 header per request
    frame, _ = _big_request(burst + 1, 3 * READ_AHEAD)
    with running_server(tmp_path / "log") as server:
        sock = socket.create_connection((server.host, server.port), timeout=WAIT)
        with sock:
            sock.sendall(small + frame + _api_versions(burst + 2))
            answered = [_answer(sock)[0] for _ in range(burst + 2)]
            assert answered == list(range(1, burst + 3))
        assert server.queued_request_bytes == 0


def test_a_request_over_the_global_cap_still_closes_its_connection(tmp_path: Path) -> None:
    """The large frame's whole claim counts against queued.max.request.bytes while it is read."""
    frame, _ = _big_request(1, 4 * READ_AHEAD)
    limits = ServerLimits(queued_max_request_bytes=2 * READ_AHEAD)
    with running_server(tmp_path / "log", limits=limits) as server:
        sock = socket.create_connection((server.host, server.port), timeout=WAIT)
        with sock:
            try:
                sock.sendall(frame)
                closed = sock.recv(1) == b""
            except ConnectionError:
                closed = True
            assert closed
        assert server.limit_closes == {"queued.max.request.bytes": 1}
        assert server.queued_request_bytes == 0
