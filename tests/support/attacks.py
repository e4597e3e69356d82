"""Blocking wire clients for the attack tests of issue #31 (tests/test_attack_*.py)."""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Any

from api.protocol import codec
from api.security.scram import ScramClient
from api.server.server import MetadataServer
from records.model import ScramMechanism
from tests.support.sasl_users import seed_users

WAIT = 20.0
"""Seconds any single socket wait may take before the test fails."""

ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"


def seed_user(log_dir: Path, name: str, password: str, *, iterations: int = 8192) -> None:
    """Append both SCRAM credentials of one user to the log at `log_dir`."""
    seed_users(log_dir, {name: password}, iterations=iterations)


class Wire:
    """One blocking connection speaking Kafka frames."""

    def __init__(self, server: MetadataServer, listener: str, *, source: str | None = None) -> None:
        host, port = server.listener_address(listener).rsplit(":", 1)
        self.sock = socket.create_connection(
            (host, int(port)), timeout=WAIT, source_address=(source, 0) if source else None
        )
        self.correlation = 0

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()

    def ask(self, api_key: int, version: int, **values: Any) -> Any:
        """Send one request and return its decoded answer."""
        self.correlation += 1
        body = codec.build(codec.request_class(api_key, version), **values)
        self.sock.sendall(codec.encode_request(body, correlation_id=self.correlation))
        (size,) = struct.unpack(">i", self._exactly(4))
        got, answer = codec.decode_response(api_key, version, self._exactly(size))
        assert got == self.correlation
        return answer

    def api_versions(self) -> Any:
        """ApiVersions v3."""
        return self.ask(18, 3, client_software_name="t", client_software_version="1")

    def metadata(self) -> Any:
        """Metadata v1 of no topic (brokers and controller)."""
        return self.ask(3, 1, topics=[])

    def scram_first(self, user: str, password: str) -> tuple[ScramClient, bytes]:
        """SaslHandshake and the client-first message; the client and the server-first."""
        mechanism = ScramMechanism.SCRAM_SHA_256
        assert self.ask(17, 1, mechanism=mechanism.mechanism_name).error_code == 0
        client = ScramClient(user, password, mechanism)
        first = self.ask(36, 2, auth_bytes=client.first())
        assert first.error_code == 0, first.error_message
        return client, bytes(first.auth_bytes)

    def scram_login(self, user: str, password: str) -> int:
        """A whole SCRAM-SHA-256 login; the final answer's error code."""
        client, server_first = self.scram_first(user, password)
        final = self.ask(36, 2, auth_bytes=client.final(server_first))
        if final.error_code == 0:
            client.verify(bytes(final.auth_bytes))
        return int(final.error_code)

    def plain_login(self, user: str, password: str) -> int:
        """A PLAIN login through SaslAuthenticate v2; its error code."""
        assert self.ask(17, 1, mechanism="PLAIN").error_code == 0
        token = f"\x00{user}\x00{password}".encode()
        return int(self.ask(36, 2, auth_bytes=token).error_code)

    def closed_by_server(self, wait: float = WAIT) -> bool:
        """True once the server has closed the connection (EOF or reset within `wait`)."""
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
        finally:
            self.sock.settimeout(WAIT)

    def _exactly(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("closed by the server")
            data += chunk
        return bytes(data)


def p99(samples: list[float]) -> float:
    """The 99th percentile of `samples` (nearest rank)."""
    ordered = sorted(samples)
    return ordered[max(0, -(-len(ordered) * 99 // 100) - 1)]
