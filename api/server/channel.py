"""One client connection of the server: requests read, answered one at a time, with back-pressure.

Kafka's network layer is the model: a channel is muted while its request is processed, so no
connection can make the server hold more of its requests, or more of its answers, than a bound.

- A connection's requests are decoded and answered one at a time, in order; a pipelined burst
  is taken one frame at a time, and the bytes read ahead of it are bounded (`READ_AHEAD`):
  past that the server stops reading from the socket until the requests are answered (a
  frame larger than that is read to its end first: it cannot be answered before).
- Answers the client has not taken stop the answering: above `WRITE_HIGH` unsent bytes the
  channel waits until the socket has taken them down to `WRITE_LOW` (so reading stops too).
- Between the requests of a burst the channel gives the event loop to the other connections
  every `SLICE` seconds, so one busy connection delays another by at most about one request.
- Limits (`limits.py`): the bytes of requests being read count against
  `queued.max.request.bytes`; a connection that would go over stops being read and waits for
  memory (it is not closed, and closes no one else); a connection that completes no request
  for `connections.max.idle.ms` is closed, and so is one over `max.connections(.per.ip)`.
- Before its SASL login ends a connection's bytes count against its listener's pre-login pool
  (`login_guard.PreloginMemory`): when that is full the idlest connection of the address
  holding most gives way, never the one that needs room; and the login must end within
  `sasl.server.authentication.timeout.ms` (its requests being answered aside).

On a TLS listener the handshake runs in the connection's own task (`tls_upgrade.upgrade`,
asyncio's `start_tls` with a 16 KiB read buffer, not blocking the loop), after the connection
is admitted and its address has a handshake slot (`login_guard.HandshakeSlots`: a bounded
number under way per address, the next ones wait their turn); one that fails
(plaintext on a TLS port, a certificate refused) closes that connection only, with one log line
naming the peer. With a client certificate on an SSL listener the principal is mapped from the
certificate's subject. On a SASL listener `sasl` holds the connection's login (sasl.py) until it
ends; until then frames above `sasl.server.max.receive.size` are refused, as Kafka refuses them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from api.protocol.connection import Connection, Event
from api.server.heap import HeapTrimmer
from api.server.kafka.base import Session
from api.server.limits import (
    CONNECTIONS_MAX_IDLE_MS,
    DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE,
    QUEUED_MAX_REQUEST_BYTES,
    SASL_SERVER_AUTHENTICATION_TIMEOUT_MS,
    CloseSummary,
    ConnectionCounts,
    RequestMemory,
)
from api.server.login_guard import HandshakeSlots, PreloginMemory, SummarizedWarnings
from api.server.sasl import SaslAuthenticator
from api.server.tls_upgrade import upgrade

logger = logging.getLogger("api.server")

READ_AHEAD = 64 * 1024
"""Undecoded request bytes above which a connection is not read until it has answered some."""

WRITE_HIGH = 256 * 1024
"""Unsent answer bytes above which a connection's requests wait (the transport's high-water)."""

WRITE_LOW = 64 * 1024
"""Unsent answer bytes below which they go on (the transport's low-water mark)."""

PRELOGIN_POOL_KEY = "prelogin.pool.bytes"
"""How the summary line names connections that gave way in a full pre-login pool."""

SLICE = 0.002
"""Seconds a connection may answer a pipelined burst before it lets the others run."""

_clock = time.monotonic
"""The event loop's clock, called directly: a request reads it once or twice, and the loop's
method would add a Python call each time. asyncio's `loop.time()` is `time.monotonic()`;
uvloop's is the same clock in whole milliseconds (libuv's), so a timer set from this one fires
within a millisecond of its time (`_check_idle` re-arms one that fires early)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelSecurity:
    """How the connections of one listener are secured and authenticated."""

    listener: str = "PLAINTEXT"
    """The listener's name (for the log)."""
    ssl_context: ssl.SSLContext | None = None
    """TLS server context (SSL and SASL_SSL listeners)."""
    handshake_timeout: float = 60.0
    """Seconds a TLS handshake may take."""
    certificate_principal: Callable[[dict[str, Any]], str] | None = None
    """A client certificate (`getpeercert()`) -> the principal (SSL listeners); ValueError if
    no mapping rule applies."""
    new_authenticator: Callable[[], SaslAuthenticator] | None = None
    """A new connection's login (SASL listeners)."""
    handshakes: HandshakeSlots | None = None
    """TLS handshakes under way per client address, against their bound (TLS listeners)."""
    handshakes_key: str = "tls.handshakes.per.ip"
    """The summary line's name for connections closed over that bound (stalled, or waiting
    past the handshake timeout)."""
    max_receive_size: int = DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE
    """`sasl.server.max.receive.size`: the largest frame before the login ends (SASL listeners)."""
    login_seconds: float = 10.0
    """`sasl.server.authentication.timeout.ms` in seconds: the time a login has to end."""
    tls_failures: SummarizedWarnings | None = None
    """Where failed handshakes are logged (one line per listener and reason per interval)."""


@dataclass(slots=True, eq=False)
class ChannelContext:
    """What every channel of one server shares: its limits' state and how to answer."""

    answer: Callable[[Event, Channel], Awaitable[bool]]
    """Answers one event on a channel (writing to it); False when the channel must close."""
    max_request_bytes: int
    idle_seconds: float
    memory: RequestMemory
    """The pool of logged-in connections (`queued.max.request.bytes`), shared by all listeners."""
    counts: ConnectionCounts
    summary: CloseSummary
    principal: str
    """The principal of a new connection (until authentication says otherwise)."""
    channels: set[Channel] = field(default_factory=set)
    security: ChannelSecurity = field(default_factory=ChannelSecurity)
    prelogin: PreloginMemory | None = None
    """The listener's pool for connections whose SASL login has not ended (SASL listeners)."""
    trimmer: HeapTrimmer | None = None
    """Told of every close: returns the heap's free memory once enough connections closed."""
    extra_versions: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    """Kafka APIs this listener serves beyond `codec.SUPPORTED_VERSIONS` (the quorum's)."""
    arrivals: int = 0
    """Reads delivered to any channel so far: when it moved while a request was answered, the
    answer waited and the event loop served the others meanwhile (no need to yield for them)."""


class Channel(asyncio.Protocol):
    """The asyncio protocol of one connection, and the task that answers its requests."""

    def __init__(self, context: ChannelContext) -> None:
        self._context = context
        self.peer = "?"
        self.ip = "?"
        self.session = Session(principal=context.principal, host=self.ip)
        """The `Session` its requests are answered for: made anew only when the principal is
        set (a login, a certificate), not for every request."""
        self.listener = context.security.listener
        self.sasl: SaslAuthenticator | None = None
        """The connection's login while it is under way (SASL listeners); None after it."""
        self.processing = False
        """A request of this connection is being answered."""
        self.closing = False
        """The server is stopping: answer what was received, read nothing more."""
        self.task: asyncio.Task[None] | None = None
        self._transport: asyncio.Transport | None = None
        self._connection = Connection(
            max_request_bytes=context.max_request_bytes, extra_versions=context.extra_versions
        )
        self._admitted = False
        self._held = 0  # bytes of this connection counted in `_memory`
        self._memory = context.memory
        self._memory_paused = False  # not read until its pool has room again
        self._lost = False
        self._eof = False
        self._read_paused = False
        self._write_paused = False
        self._readable: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None
        self._last_progress = 0.0
        self._login_due: float | None = None  # when a login not ended by then closes it
        self._idle_timer: asyncio.TimerHandle | None = None
        self._tls = context.security.ssl_context is not None

    @property
    def principal(self) -> str:
        """Who the connection is: `User:ANONYMOUS` until a login or a certificate says."""
        return self.session.principal

    @principal.setter
    def principal(self, value: str) -> None:
        self.session = Session(principal=value, host=self.ip)

    @property
    def idle_since(self) -> float:
        """When it last completed a request, or had an answer taken (or arrived)."""
        return self._last_progress

    def give_way(self) -> None:
        """Close it to make room in a full pre-login pool (its bytes are released at once)."""
        self._close_over(PRELOGIN_POOL_KEY)

    def _handshake_stalled(self) -> None:
        """Close it: its handshake stalled while others of its address waited for a slot."""
        self._close_over(self._context.security.handshakes_key)

    # ------------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Admit the connection (or close it over a connection limit) and start answering."""
        transport = cast(asyncio.Transport, transport)  # a stream server's transports are
        self._transport = transport
        peer = transport.get_extra_info("peername")
        if peer:
            self.ip = str(peer[0])
            self.peer = f"{peer[0]}:{peer[1]}"
            self.session = Session(principal=self.session.principal, host=self.ip)
        over = self._context.counts.admit(self.ip)
        if over is not None:
            self._lost = True
            transport.abort()
            self._context.summary.count(over)
            return
        self._admitted = True
        self._context.channels.add(self)
        security = self._context.security
        if self._tls:
            transport.pause_reading()  # start_tls takes the bytes from here on
        else:
            transport.set_write_buffer_limits(high=WRITE_HIGH, low=WRITE_LOW)
        if security.new_authenticator is not None:
            self.sasl = security.new_authenticator()
            if self._context.prelogin is not None:
                self._memory = self._context.prelogin
            if self._context.max_request_bytes > security.max_receive_size:
                self._connection.max_request_bytes = security.max_receive_size
                self._connection.max_request_key = "sasl.server.max.receive.size, before login"
        loop = asyncio.get_running_loop()
        self._last_progress = _clock()
        if self.sasl is not None and not self._tls:
            self._login_due = self._last_progress + security.login_seconds
        self._idle_timer = loop.call_at(self._idle_due(), self._check_idle)
        if self._tls:
            self.task = loop.create_task(self._run())  # the handshake is the task's first step
        # Otherwise the answering task starts with the first whole frame (`_start`): a crowd
        # of idle or trickling connections costs no task each, only its protocol object.

    def data_received(self, data: bytes) -> None:
        """Store the bytes; stop reading when enough are waiting; wake the answering task."""
        connection = self._connection
        connection.feed(data)
        context = self._context
        context.arrivals += 1
        buffered = connection.buffered_bytes
        held = self._held
        # Bytes received are counted as they arrive, never a frame's claimed size: a size
        # alone reserves nothing. Over the pool's capacity the connection waits, unread (a
        # pre-login pool first makes room by closing the idlest of the heaviest address).
        if buffered != held:
            self._held = buffered
            if not self._memory.hold(held, buffered, self) and not self._memory_paused:
                self._wait_for_memory()
        claimed = connection.claimed_bytes
        if claimed > buffered:
            # The frame at the head is still partial: nothing to answer, so no task wake-up
            # (a crowd of slowloris connections trickling bytes then costs next to nothing).
            # Reading goes on whatever the read-ahead: the frame is bounded by the request
            # limits, and it cannot be answered before all of it is read.
            if claimed > self._memory.capacity:
                self._close_over(QUEUED_MAX_REQUEST_BYTES.key)  # it could never be read whole
            return
        if buffered >= READ_AHEAD and not self._read_paused:
            self._read_paused = True
            if not self._memory_paused:
                self._pause_reading()
        if self.task is None:
            self._start()
            return
        readable = self._readable
        if readable is not None and not readable.done():
            readable.set_result(None)

    def eof_received(self) -> bool:
        """The client sent all it will: answer what it sent, then close (keep the socket).

        A TLS connection cannot be kept half-open: it closes (asyncio's SSL transport).
        """
        self._eof = True
        if self.task is None and not self._lost:
            self._start()  # it answers what is buffered, then closes
        self._wake_readable()
        return not self._tls

    def pause_writing(self) -> None:
        """The client is not taking answers fast enough: answer nothing more until it does."""
        self._write_paused = True

    def resume_writing(self) -> None:
        """The client took answers: that is progress, and answering goes on."""
        self._write_paused = False
        self._last_progress = _clock()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        """Release what the connection held; the answering task ends."""
        self._lost = True
        if not self._admitted:
            return
        self._admitted = False
        self._context.counts.release(self.ip)
        self._memory.forget(self._memory_free)
        self._memory.hold(self._held, 0, self)
        self._held = 0
        self._context.channels.discard(self)
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self._context.trimmer is not None:
            self._context.trimmer.closed()
        self._wake_readable()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    # ------------------------------------------------------------------ answering

    @property
    def unsent_bytes(self) -> int:
        """Answer bytes written and not yet taken by the socket."""
        if self._transport is None or self._lost:
            return 0
        return self._transport.get_write_buffer_size()

    def write(self, data: bytes) -> None:
        """Send an answer (dropped if the connection is gone)."""
        if not self._lost and self._transport is not None:
            self._transport.write(data)

    def abort(self) -> None:
        """Close at once, dropping unsent answers."""
        if self._transport is not None:
            self._transport.abort()

    def authenticated(self, principal: str | None) -> None:
        """The login ended: the connection's principal (None: it failed) and usual frames."""
        self.sasl = None
        self._login_due = None
        if principal is not None:
            self.principal = principal
        self._connection.max_request_bytes = self._context.max_request_bytes
        self._connection.max_request_key = "socket.request.max.bytes"
        self._connection.raw_tokens = False
        memory = self._context.memory
        if self._memory is not memory:
            # What it holds moves from the listener's pre-login pool to the logged-in one.
            held = self._held
            self._memory.forget(self._memory_free)
            self._memory.hold(held, 0, self)
            self._memory = memory
            if not memory.hold(0, held):
                self._wait_for_memory()
            elif self._memory_paused:
                self._memory_free()

    def expect_raw_tokens(self, raw: bool) -> None:
        """The next frames are raw SASL tokens (after a SaslHandshake v0), or requests again."""
        self._connection.raw_tokens = raw

    def _start(self) -> None:
        """Start the answering task (at the first whole frame, or at the end of input)."""
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        connection = self._connection
        context = self._context
        answer = context.answer
        try:
            if self._tls and not await self._start_tls():
                return
            yield_at = _clock() + SLICE
            while not self._lost:
                event = connection.next_event()
                if event is None:
                    # Nothing was taken, so the claim and the read-ahead are as the last read
                    # left them (reading is paused only while a whole frame waits).
                    if self._eof or self.closing or connection.closed:
                        break
                    self._readable = readable = loop.create_future()
                    await readable
                    self._readable = None
                    yield_at = _clock() + SLICE
                    continue
                self._frame_taken()
                self.processing = True
                arrivals = context.arrivals
                try:
                    keep = await answer(event, self)
                finally:
                    self.processing = False
                self._last_progress = now = _clock()
                if not keep:
                    break
                if self._write_paused and not self.closing:
                    await self._wait_writable()
                    yield_at = _clock() + SLICE
                elif context.arrivals != arrivals:
                    # The answer waited (a write waits for its fsync) and the loop read from
                    # the other connections meanwhile: they had their turn, a new slice starts.
                    yield_at = now + SLICE
                elif now >= yield_at:
                    await _let_others_run()
                    yield_at = _clock() + SLICE
        except (asyncio.CancelledError, ConnectionError):
            pass
        finally:
            if self._transport is not None:
                self._transport.close()

    async def _start_tls(self) -> bool:
        """The TLS handshake; False (logged, connection closed) if it fails."""
        security = self._context.security
        context = security.ssl_context
        raw = self._transport
        assert context is not None and raw is not None  # a TLS listener's admitted connection
        slots = security.handshakes
        if slots is None:
            return await self._handshake(context, raw)
        # Handshakes cost a TLS object and its buffers each: one address gets a bounded number
        # under way at once; its next connections wait their turn (costing no TLS object),
        # within the handshake's time, and a stalled handshake gives way to them.
        try:
            async with asyncio.timeout(security.handshake_timeout):
                await slots.take(self.ip, self._handshake_stalled)
        except TimeoutError:
            self._close_over(security.handshakes_key)
            return False
        try:
            if self._lost:
                return False
            return await self._handshake(context, raw)
        finally:
            slots.give_back(self.ip, self._handshake_stalled)

    async def _handshake(self, context: ssl.SSLContext, raw: asyncio.Transport) -> bool:
        security = self._context.security
        try:
            transport = await upgrade(
                raw, self, context, handshake_timeout=security.handshake_timeout
            )
        except asyncio.CancelledError:
            self.connection_lost(None)
            raise
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as exc:
            if not self._lost:  # not closed by a limit or by the server stopping
                reason = _tls_reason(exc)
                line = (
                    f"closing connection from {self.peer} on listener {security.listener}: "
                    f"TLS handshake failed: {reason}"
                )
                if security.tls_failures is None:
                    logger.warning("%s", line)
                else:
                    security.tls_failures.warn(
                        f"{security.listener} {reason}",
                        line,
                        f"{reason} from {self.ip} on {security.listener}",
                    )
            self.connection_lost(None)
            return False
        if self._lost or transport is None:
            return False
        self._transport = transport
        transport.set_write_buffer_limits(high=WRITE_HIGH, low=WRITE_LOW)
        self._last_progress = _clock()
        if self.sasl is not None:
            # The login's time starts once the handshake is done.
            self._login_due = self._last_progress + security.login_seconds
            if self._idle_timer is not None:
                self._idle_timer.cancel()
            self._idle_timer = asyncio.get_running_loop().call_at(
                self._idle_due(), self._check_idle
            )
        certificate = transport.get_extra_info("peercert")
        if security.certificate_principal is not None and certificate:
            try:
                self.principal = security.certificate_principal(certificate)
            except ValueError as exc:
                logger.warning(
                    "closing connection from %s on listener %s: its certificate maps to no "
                    "principal: %s",
                    self.peer,
                    security.listener,
                    exc,
                )
                return False
        return True

    async def _wait_writable(self) -> None:
        future = asyncio.get_running_loop().create_future()
        self._writable = future
        try:
            await future
        finally:
            self._writable = None

    def _wake_readable(self) -> None:
        if self._readable is not None and not self._readable.done():
            self._readable.set_result(None)

    def _pause_reading(self) -> None:
        if self._transport is not None and not self._lost:
            with contextlib.suppress(RuntimeError):  # closing already
                self._transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._transport is not None and not self._lost:
            with contextlib.suppress(RuntimeError):
                self._transport.resume_reading()

    # ------------------------------------------------------------------ limits

    def _frame_taken(self) -> None:
        """A frame was taken: release its bytes; resume reading when the read-ahead allows.

        Reading resumes when the read-ahead is down to half, or when the frame now at the head
        is partial (it cannot be answered before it is read whole), unless the connection
        waits for memory.
        """
        connection = self._connection
        buffered = connection.buffered_bytes
        if buffered != self._held:
            self._memory.hold(self._held, buffered, self)
            self._held = buffered
        if self._read_paused and (
            buffered < READ_AHEAD // 2 or connection.claimed_bytes > buffered
        ):
            self._read_paused = False
            if not self._memory_paused:
                self._resume_reading()

    def _wait_for_memory(self) -> None:
        """Stop reading until the pool has room (Kafka mutes a channel its pool cannot serve)."""
        self._memory_paused = True
        self._memory.wait(self._memory_free)
        if not self._read_paused:
            self._pause_reading()

    def _memory_free(self) -> None:
        """The pool released memory: read again (unless the read-ahead holds reading)."""
        self._memory_paused = False
        if not self._read_paused:
            self._resume_reading()

    def _idle_due(self) -> float:
        """When the connection is closed unless it makes progress (or its login ends) first."""
        due = self._last_progress + self._context.idle_seconds
        login = self._login_due
        return due if login is None or login > due else login

    def _check_idle(self) -> None:
        self._idle_timer = None
        if self._lost:
            return
        loop = asyncio.get_running_loop()
        idle = self._context.idle_seconds
        now = _clock()
        if self.processing:  # a request being answered (say, a long poll) is not idleness
            due = now + idle
            if self._login_due is not None:
                due = min(due, now + self._context.security.login_seconds)
        else:
            login = self._login_due
            if login is not None and now >= login:
                self._close_over(SASL_SERVER_AUTHENTICATION_TIMEOUT_MS.key)
                return
            due = self._idle_due()
            if now >= due:
                self._close_over(CONNECTIONS_MAX_IDLE_MS.key)
                return
        self._idle_timer = loop.call_at(due, self._check_idle)

    def _close_over(self, key: str) -> None:
        """Close over limit `key`: at once, dropping what is buffered either way."""
        if self._lost:
            return
        self._context.summary.count(key)
        self.abort()
        # abort() reports connection_lost only on the next loop iteration: release now, so the
        # next connection's accounting already sees this one gone.
        self.connection_lost(None)


def _tls_reason(exc: BaseException) -> str:
    """A handshake failure in a few words (the SSL library's reason, not its whole repr)."""
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)  # WRONG_VERSION_NUMBER: not TLS; PEER_DID_NOT_RETURN_A_...
    if isinstance(exc, TimeoutError):
        return "timed out"
    return str(exc) or type(exc).__name__


async def _let_others_run() -> None:
    """Give the event loop to every connection whose bytes have arrived, before going on.

    A pipelined burst yields here (Kafka answers one request per channel per poll). One
    `sleep(0)` is not enough: this task's wake-up is queued before the loop's next poll, while
    the poll's readiness only queues another connection's wake-up after it, so the busy
    connection would run first again. Two let those woken by the poll run before it.
    """
    await asyncio.sleep(0)
    await asyncio.sleep(0)
