"""A connection's byte stream as events, sans-IO (in the style of h11).

Feed received bytes to `feed` and take events one at a time from `next_event` (or both at once
with `receive`, which returns every event the bytes complete, in order):
`Request` (a decoded Kafka request), `PrivateRequest` (one of our own APIs, body still Avro
bytes), `Reply` (bytes to send at once: Kafka's answer to a request it cannot parse but must
answer, such as an ApiVersions of an unknown version), `SaslToken` (a raw SASL token: after a
SaslHandshake v0 a client sends its tokens framed by a size only, with no Kafka header, until
authentication ends; the server sets `raw_tokens` for that time) or `Close` (the connection must
be closed; the reason is for the log). After a `Close` nothing more is decoded. Kafka closes a
connection on a request it cannot parse, an unknown API key or an unsupported version, and so
does this one; nothing that arrives on one connection affects another.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from api.protocol.codec import (
    API_VERSIONS_KEY,
    HEADER_PREFIX_BYTES,
    SUPPORTED_VERSIONS,
    KafkaRequest,
    ProtocolError,
    RequestHeader,
    api_versions_error,
    decode_known_request,
    peek_header,
)
from api.protocol.private import PRIVATE_VERSIONS, private_header
from records.slots import preset_constructor

DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024
"""Kafka's `socket.request.max.bytes` default (100 MiB)."""

_SIZE = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded Kafka request, to be answered in order."""

    request: KafkaRequest
    frame: bytes = b""
    """The request's bytes as received (header and body, without the size): what a
    controller that does not lead forwards to the leader inside an Envelope (KIP-590)."""


@dataclass(frozen=True, slots=True)
class PrivateRequest:
    """A request of one of our own APIs: header v1 fields and the Avro body bytes."""

    header: RequestHeader
    body: bytes
    frame: bytes = b""
    """The request's bytes as received (see `Request.frame`)."""


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete response frame to send in order with the others."""

    data: bytes


@dataclass(frozen=True, slots=True)
class SaslToken:
    """A raw SASL token (a frame read while `Connection.raw_tokens` is set): no Kafka header."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Close:
    """The connection must be closed; `reason` says why (for the log)."""

    reason: str


Event = Request | PrivateRequest | Reply | SaslToken | Close

_new_request = preset_constructor(Request, ("request", "frame"))
"""`Request(request, frame)` through its slots, not the frozen dataclass's `__init__` (one is
made per request)."""

_SERVED: dict[bytes, tuple[int, int]] = {}
"""(API key, version) by a frame's first four bytes, for the supported versions of Kafka's
APIs seen so far (a few hundred at most: unsupported ones are not kept)."""

_KEY_VERSION = struct.Struct(">hh")


def _served(head: bytes) -> tuple[int, int] | None:
    """(key, version) if a frame starting `head` is a supported version of a Kafka API."""
    if len(head) < _KEY_VERSION.size:
        return None
    api_key, version = _KEY_VERSION.unpack(head)
    if api_key in PRIVATE_VERSIONS:
        return None
    supported = SUPPORTED_VERSIONS.get(api_key)
    if supported is None or not supported[0] <= version <= supported[1]:
        return None
    found = _SERVED[head] = (api_key, version)
    return found


class Connection:
    """Splits a byte stream into request frames and decodes them, one frame at a time.

    `feed` only stores bytes; `next_event` decodes the next complete frame. A server that
    answers one request before decoding the next (as Kafka mutes a channel while its request is
    processed) thus never holds more than the bytes it has read, however many requests a client
    pipelines; `claimed_bytes` says how much that is, counting the whole of a frame whose size
    has arrived but whose body has not (what a frame asks the server to buffer).
    """

    def __init__(
        self,
        *,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        extra_versions: Mapping[int, tuple[int, int]] | None = None,
    ) -> None:
        self.max_request_bytes = max_request_bytes
        self.extra_versions: Mapping[int, tuple[int, int]] = extra_versions or {}
        """Kafka APIs served beyond `SUPPORTED_VERSIONS` (the quorum's, on a controller)."""
        self.max_request_key = "socket.request.max.bytes"
        """The setting `max_request_bytes` comes from, named when a frame is refused."""
        """The largest frame taken; the server lowers it while a connection authenticates."""
        self.raw_tokens = False
        """Frames are raw SASL tokens (`SaslToken`), not requests: set after a SaslHandshake v0
        has been answered, cleared when authentication ends (the answer to the token before
        is written first, as a connection's frames are answered in order)."""
        self._buffer = bytearray()
        self.closed = False

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet decoded."""
        return len(self._buffer)

    @property
    def claimed_bytes(self) -> int:
        """Bytes buffered, or the whole size of the frame at the head if that is more."""
        buffered = len(self._buffer)
        if buffered < _SIZE.size:
            return buffered
        size: int = _SIZE.unpack_from(self._buffer, 0)[0]
        if size < 0 or size > self.max_request_bytes:
            return buffered  # refused by the next `next_event`, never buffered to its end
        return max(buffered, _SIZE.size + size)

    def feed(self, data: bytes) -> None:
        """Store received bytes (nothing is decoded; see `next_event`)."""
        if not self.closed:
            self._buffer += data

    def next_event(self) -> Event | None:
        """The event of the next complete frame, or None until more bytes arrive."""
        if self.closed or len(self._buffer) < _SIZE.size:
            return None
        (size,) = _SIZE.unpack_from(self._buffer, 0)
        if size < 0 or size > self.max_request_bytes:
            return self._close(
                f"request size {size} is outside 0..{self.max_request_bytes} "
                f"({self.max_request_key})"
            )
        end = _SIZE.size + size
        if len(self._buffer) < end:
            return None
        frame = bytes(self._buffer[_SIZE.size : end])
        del self._buffer[:end]  # bytearray deletes from the front in O(1)
        if self.raw_tokens:
            return SaslToken(frame)
        event = self._event(frame)
        if isinstance(event, Close):
            self._close(event.reason)
        return event

    def receive(self, data: bytes) -> list[Event]:
        """Feed `data` and return every event it completes (possibly none), in order."""
        self.feed(data)
        events: list[Event] = []
        while (event := self.next_event()) is not None:
            events.append(event)
        return events

    def _close(self, reason: str) -> Close:
        self.closed = True
        self._buffer.clear()
        return Close(reason)

    def _event(self, frame: bytes) -> Event:
        head = frame[:4]
        served = _SERVED.get(head) or _served(head)
        if served is not None and len(frame) >= HEADER_PREFIX_BYTES:
            # A supported version of a Kafka API: what the checks below would find, found in
            # one lookup (the compiled reader reads it first, `decode_known_request`).
            try:
                request = decode_known_request(frame, *served)
            except ProtocolError as exc:
                return Close(str(exc))
            return _new_request(request, frame)  # type: ignore[no-any-return]
        try:
            api_key, version, correlation_id = peek_header(frame)
        except ProtocolError as exc:
            return Close(str(exc))
        private = PRIVATE_VERSIONS.get(api_key)
        if private is not None:
            return self._private_event(frame, private, api_key, version, correlation_id)
        supported = SUPPORTED_VERSIONS.get(api_key) or self.extra_versions.get(api_key)
        if supported is None:
            return Close(f"unknown API key {api_key}")
        low, high = supported
        if not low <= version <= high:
            if api_key == API_VERSIONS_KEY and version > high:
                # KIP-511: a newer client learns what this server speaks from a v0 answer.
                extra = {**PRIVATE_VERSIONS, **self.extra_versions}
                return Reply(api_versions_error(correlation_id, extra))
            return Close(f"unsupported version {version} of API key {api_key} ({low}..{high})")
        try:
            request = decode_known_request(frame, api_key, version)
        except ProtocolError as exc:
            return Close(str(exc))
        return _new_request(request, frame)  # type: ignore[no-any-return]

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
        return PrivateRequest(header, body, frame)
