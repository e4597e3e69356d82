"""SCRAM users seeded into a service, and raw SASL frames, for the authentication tests."""

from __future__ import annotations

import socket
import struct
from pathlib import Path
from typing import Any

from api.protocol import codec
from api.server.server import MetadataServer, ServerListener
from api.service.service import MetadataService
from records.model import ScramMechanism, UserScramCredentialRecord
from replay.controller.commands import ControllerResult
from replay.security.scram_keys import new_credential
from replay.security.scram_rules import DEFAULT_ITERATIONS

USERS = {"alice": "alice-secret", "bob": "b=b,\u00e9"}
"""Test users and their passwords (bob's name-like password has SCRAM's special characters)."""


def seed_users(
    log_dir: Path, users: dict[str, str] = USERS, *, iterations: int = DEFAULT_ITERATIONS
) -> None:
    """Append both SCRAM credentials of each user to the log at `log_dir`."""
    records = []
    for name, password in users.items():
        for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            credential = new_credential(mechanism, password, iterations=iterations)
            records.append(
                UserScramCredentialRecord(
                    name=name,
                    mechanism=mechanism,
                    salt=credential.salt,
                    stored_key=credential.stored_key,
                    server_key=credential.server_key,
                    iterations=credential.iterations,
                )
            )
    with MetadataService.open(log_dir) as service:
        service.execute(lambda image: ControllerResult(records=tuple(records), response=None))


SASL = ServerListener(
    name="SASL_PLAINTEXT",
    security_protocol="SASL_PLAINTEXT",
    host="127.0.0.1",
    port=0,
    sasl_mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"),
)


class Raw:
    """A blocking client connection speaking raw frames."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=10)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, body: Any) -> int:
        self.correlation += 1
        self.sock.sendall(codec.encode_request(body, correlation_id=self.correlation))
        return self.correlation

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def frame(self) -> bytes | None:
        """The next frame's payload, or None if the server closed the connection."""
        head = self._exactly(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._exactly(size)

    def answer(self, body: Any) -> Any:
        correlation = self.send(body)
        payload = self.frame()
        assert payload is not None, "the server closed the connection"
        got, answer = codec.decode_response(int(body.__api_key__), int(body.__version__), payload)
        assert got == correlation
        return answer

    def closed(self) -> bool:
        """The server closed the connection (EOF or reset), having sent nothing more."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _exactly(self, size: int) -> bytes | None:
        data = b""
        while len(data) < size:
            try:
                chunk = self.sock.recv(size - len(data))
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            data += chunk
        return data


def created_by(server: MetadataServer, topic: str) -> str | None:
    for entry in server.service.log.read():
        if getattr(entry.record, "name", None) == topic:
            return entry.principal
    raise AssertionError(f"no record names {topic}")
