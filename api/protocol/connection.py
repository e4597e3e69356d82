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
from api.protocol.private import PRIVATE_VERSIONS, private_header

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

    def __init__(self, *, max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        self.max_request_bytes = max_request_bytes
        self._buffer = bytearray()
        self.closed = False

    def receive(self, data: bytes) -> list[Event]:
        """Events completed by `data` (possibly none, when a frame is still partial)."""
        if self.closed:
            return []
        if not self._buffer and len(data) >= _SIZE.size:
            # The common case: nothing left over, and `data` is exactly one whole frame.
            (size,) = _SIZE.unpack_from(data, 0)
            if len(data) == _SIZE.size + size and 0 <= size <= self.max_request_bytes:
                event = self._event(data[_SIZE.size :])
                if isinstance(event, Close):
                    self.closed = True
                return [event]
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
        private = PRIVATE_VERSIONS.get(api_key)
        if private is not None:
            return self._private_event(frame, private, api_key, version, correlation_id)
        supported = SUPPORTED_VERSIONS.get(api_key)
        if supported is None:
            return Close(f"unknown API key {api_key}")
        low, high = supported
        if not low <= version <= high:
            if api_key == API_VERSIONS_KEY and version > high:
                # KIP-511: a newer client learns what this server speaks from a v0 answer.
                return Reply(api_versions_error(correlation_id, PRIVATE_VERSIONS))
            return Close(f"unsupported version {version} of API key {api_key} ({low}..{high})")
        try:
            return Request(decode_request(frame))
        except ProtocolError as exc:
            return Close(str(exc))

    def _private_event(
        self,
        frame: bytes,
        versions: tuple[int, int],
        api_key: int,
        version: int,
        correlation_id: int,
    ) -> Event:
        low, high = versions
        if not low <= version <= high:
            return Close(f"unsupported version {version} of API key {api_key} ({low}..{high})")
        try:
            header, body = private_header(frame, api_key, version, correlation_id)
        except ProtocolError as exc:
            return Close(str(exc))
        return PrivateRequest(header, body)
