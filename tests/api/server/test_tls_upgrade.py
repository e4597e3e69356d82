"""The server's TLS layer (issue #54, finding 5): a small read buffer, whole requests still."""

from __future__ import annotations

import socket
import ssl
import struct
from pathlib import Path

import trustme

from api.protocol import codec
from api.server.server import ServerListener
from api.server.tls_upgrade import READ_BUFFER, ServerTls
from tests.support.attacks import WAIT
from tests.support.server_thread import running_server


def _exactly(sock: ssl.SSLSocket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "closed by the server"
        data += chunk
    return bytes(data)


def test_the_read_buffer_is_one_record_not_asyncios_256_kib() -> None:
    assert ServerTls.max_size == READ_BUFFER == 16 * 1024


def test_a_request_larger_than_the_read_buffer_is_answered(tmp_path: Path) -> None:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)
    listener = ServerListener(
        name="SSL", security_protocol="SSL", host="127.0.0.1", port=0, ssl_context=server_context
    )
    names = [{"name": f"topic-{index:05d}-" + "x" * 20} for index in range(3000)]
    body = codec.build(codec.request_class(3, 1), topics=names)
    frame = codec.encode_request(body, correlation_id=5)
    assert len(frame) > 4 * READ_BUFFER
    with (
        running_server(tmp_path / "log", brokers=1, listeners=[listener]) as server,
        socket.create_connection((server.host, server.port), timeout=WAIT) as raw,
        client_context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        for _ in range(2):  # and the next one on the same connection
            tls.sendall(frame)
            (size,) = struct.unpack(">i", _exactly(tls, 4))
            correlation, answer = codec.decode_response(3, 1, _exactly(tls, size))
            assert correlation == 5
            assert len(answer.topics) == len(names)
