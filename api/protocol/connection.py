"""A connection's byte stream as events, sans-IO (in the style of h11).

Feed received bytes to `receive`; it returns the events they complete, in order:
`Request` (a decoded Kafka request), `PrivateRequest` (one of our own APIs, body still Avro
bytes), `Reply` (bytes to send at once: Kafka's answer to a request it cannot parse but must
answer, such as an ApiVersions of an unknown version) or `Close` (the connection must be
closed; the reason is for the log). After a `Close` nothing more is decoded. Kafka closes a
connection on a request it cannot parse, an unknown API key or an unsupported version, and so
does this one; nothing that arrives on one connection affects another.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from api.protocol.codec import (
    API_VERSIONS_KEY,
    SUPPORTED_VERSIONS,
    KafkaRequest,
    ProtocolError,
    RequestHeader,
    api_versions_error,
    decode_request,
    peek_header,
)

DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024
"""Kafka's `socket.request.max.bytes` default (100 MiB)."""

_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded Kafka request, to be answered in order."""

    request: KafkaRequest


@dataclass(frozen=True, slots=True)
class PrivateRequest:
    """A request of one of our own APIs: header v1 fields and the Avro body bytes."""

    header: RequestHeader
    body: bytes


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete response frame to send in order with the others."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Close:
    """The connection must be closed; `reason` says why (for the log)."""

    reason: str


Event = Request | PrivateRequest | Reply | Close


class Connection:
    """Splits a byte stream into request frames and decodes them."""

    def __init__(
        self,
        *,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        private_versions: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        self.max_request_bytes = max_request_bytes
        self._private = dict(private_versions or {})
        self._buffer = bytearray()
        self.closed = False

    def receive(self, data: bytes) -> list[Event]:
        """Events completed by `data` (possibly none, when a frame is still partial)."""
        if self.closed:
            return []
        self._buffer += data
        events: list[Event] = []
        while len(self._buffer) >= _SIZE.size:
            (size,) = _SIZE.unpack_from(self._buffer, 0)
            if size < 0 or size > self.max_request_bytes:
                return [
                    *events,
                    self._close(
                        f"request size {size} is outside 0..{self.max_request_bytes} "
                        "(socket.request.max.bytes)"
                    ),
                ]
            end = _SIZE.size + size
            if len(self._buffer) < end:
                break
            frame = bytes(self._buffer[_SIZE.size : end])
            del self._buffer[:end]
            event = self._event(frame)
            events.append(event)
            if isinstance(event, Close):
                self.closed = True
                break
        return events

    def _close(self, reason: str) -> Close:
        self.closed = True
        self._buffer.clear()
        return Close(reason)

    def _event(self, frame: bytes) -> Event:
        try:
            api_key, version, correlation_id = peek_header(frame)
        except ProtocolError as exc:
            return Close(str(exc))
        if api_key in self._private:
            return self._private_event(frame, api_key, version, correlation_id)
        supported = SUPPORTED_VERSIONS.get(api_key)
        if supported is None:
            return Close(f"unknown API key {api_key}")
        low, high = supported
        if not low <= version <= high:
            if api_key == API_VERSIONS_KEY and version > high:
                # KIP-511: a newer client learns what this server speaks from a v0 answer.
                return Reply(api_versions_error(correlation_id))
            return Close(f"unsupported version {version} of API key {api_key} ({low}..{high})")
        try:
            return Request(decode_request(frame))
        except ProtocolError as exc:
            return Close(str(exc))

    def _private_event(
        self, frame: bytes, api_key: int, version: int, correlation_id: int
    ) -> Event:
        low, high = self._private[api_key]
        if not low <= version <= high:
            return Close(f"unsupported version {version} of API key {api_key} ({low}..{high})")
        # Header v1: key, version, correlation id, then a nullable int16-length client id.
        if len(frame) < 10:
            return Close(f"a request of {len(frame)} bytes is too short for a header")
        (length,) = struct.unpack_from(">h", frame, 8)
        start = 10 + max(length, 0)
        if length < -1 or start > len(frame):
            return Close("malformed request header: bad client id length")
        try:
            client_id = None if length < 0 else frame[10:start].decode()
        except UnicodeDecodeError:
            return Close("malformed request header: the client id is not UTF-8")
        header = RequestHeader(
            api_key=api_key, api_version=version, correlation_id=correlation_id, client_id=client_id
        )
        return PrivateRequest(header, frame[start:])
