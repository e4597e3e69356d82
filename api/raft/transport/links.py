"""Outbound controller links: one connection per other voter, carrying the core's requests.

`QuorumLinks.send(destination, request)` hands a request of the consensus core to the voter
`destination` and returns at once; the answer, when it comes, goes to
`on_response(source_id, message)`. Raft tolerates lost messages (the core sends again), so a
link never waits and never queues without bound:

- one persistent connection per other voter (`controller.quorum.voters`), made on the first
  send to it; after a failed connection the link is down for a backoff, from
  `controller.quorum.retry.backoff.ms` doubling up to `reconnect.backoff.max.ms` (Kafka's
  keys), and sends to it meanwhile are dropped;
- at most `max_in_flight` requests per voter are unanswered (Kafka's
  `max.in.flight.requests.per.connection`, 5), counting those waiting for the connection
  being made; a send beyond that is dropped;
- a request unanswered after `controller.quorum.request.timeout.ms` is dropped and the
  connection closed, as Kafka's network client does (answers come in order, so the ones
  behind it would wait as long); the next send reconnects;
- an answer the core cannot take (a refusal such as CLUSTER_AUTHORIZATION_FAILED, a malformed
  frame) is dropped with a warning, logged once until an answer gets through again.

Connections are secured as Kafka's controllers secure them, from the server's own keys
(`controller_client_security`): the first of `controller.listener.names`, its protocol from
`listener.security.protocol.map`, `sasl.mechanism.controller.protocol` and
`listener.name.<name>.<mechanism>.sasl.jaas.config` for SASL, the listener's `ssl.*` keys
for TLS. The connection itself is the client's (`api.client.connection`: TLS, ApiVersions,
SASL login), which also tells whether the peer serves the quorum APIs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from api.client.connection import ClientConnection, ClientError
from api.protocol.quorum.apis import (
    QUORUM_API_NAMES,
    QUORUM_VERSIONS,
    QuorumRequest,
    QuorumResponse,
    api_key_of,
    send_version,
)
from api.protocol.quorum.errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    RaftWireError,
)
from api.protocol.quorum.requests import (
    encode_request,
)
from api.protocol.quorum.responses import (
    decode_response,
)
from api.raft.clock import now_ms
from api.raft.core.config import QuorumConfig, VoterAddress
from api.security.client_config import ClientSecurity, client_security
from api.security.errors import SecurityConfigError

logger = logging.getLogger("api.server.quorum.links")
"""Under the server's logger: a link's state changes are lines of `mlog serve`'s log."""

MAX_IN_FLIGHT = 5
"""Unanswered requests per voter (Kafka's `max.in.flight.requests.per.connection`)."""

RECONNECT_BACKOFF_MAX_MS = 1000
"""The longest wait between connection attempts (Kafka's `reconnect.backoff.max.ms`)."""

_REFUSALS_REMEMBERED = 16

_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def controller_client_security(values: Mapping[str, str]) -> ClientSecurity:
    """How this controller connects to the others, from its server properties (Kafka's keys).

    `SecurityConfigError` (one line, naming the key to set) when the keys do not say enough.
    """
    names = [n.strip() for n in values.get("controller.listener.names", "").split(",")]
    names = [n for n in names if n]
    if not names:
        raise SecurityConfigError(
            "controller.listener.names is not set; name the listener controllers talk to each "
            "other on (e.g. controller.listener.names=CONTROLLER)"
        )
    name = names[0].upper()
    protocol = _listener_protocol(values.get("listener.security.protocol.map", ""), name)
    props: dict[str, str] = {"security.protocol": protocol}
    prefix = f"listener.name.{name.lower()}."
    if protocol.startswith("SASL_"):
        mechanism = values.get("sasl.mechanism.controller.protocol", "").strip().upper()
        if not mechanism:
            raise SecurityConfigError(
                f"controller listener {name} is {protocol}: set sasl.mechanism.controller.protocol"
                " (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"
            )
        jaas_key = f"{prefix}{mechanism.lower()}.sasl.jaas.config"
        jaas = values.get(jaas_key)
        if not jaas:
            raise SecurityConfigError(
                f"controller listener {name} logs in with {mechanism}: set {jaas_key} "
                "(the login module with username=... password=...)"
            )
        props["sasl.mechanism"] = mechanism
        props["sasl.jaas.config"] = jaas
    if protocol.endswith("SSL"):
        for key in (
            "ssl.truststore.location",
            "ssl.truststore.type",
            "ssl.keystore.location",
            "ssl.keystore.type",
            "ssl.key.password",
            "ssl.endpoint.identification.algorithm",
        ):
            value = values.get(prefix + key, values.get(key))
            if value is not None:
                props[key] = value
    return client_security(props, source=f"controller listener {name}")


def _listener_protocol(text: str, name: str) -> str:
    """The security protocol of listener `name` in `listener.security.protocol.map`."""
    for item in text.split(","):
        listener, sep, protocol = (part.strip() for part in item.partition(":"))
        if sep and listener.upper() == name:
            if protocol.upper() not in _SECURITY_PROTOCOLS:
                raise SecurityConfigError(
                    f"listener.security.protocol.map: {protocol!r} (for {name}) is not one of "
                    f"{', '.join(_SECURITY_PROTOCOLS)}"
                )
            return protocol.upper()
    if name in _SECURITY_PROTOCOLS:
        return name
    raise SecurityConfigError(
        f"controller listener {name} has no security protocol; add {name}:SASL_SSL (or "
        "PLAINTEXT, SSL, SASL_PLAINTEXT) to listener.security.protocol.map"
    )


# --------------------------------------------------------------------------- connections


class _LinkConnection(ClientConnection):
    """The client's connection, with the raw request exchange the links need."""

    def missing_quorum_apis(self) -> list[str]:
        """The quorum APIs the peer does not serve in the version this node sends."""
        missing = []
        for key in QUORUM_VERSIONS:
            version = send_version(key)
            theirs = self._versions.get(key)
            if theirs is None or not theirs[0] <= version <= theirs[1]:
                missing.append(f"{QUORUM_API_NAMES[key]} v{version}")
        return missing

    @property
    def receiver(self) -> asyncio.Task[None]:
        """The task reading answers: it ends when the connection does."""
        return self._receiver


@dataclass(slots=True)
class LinkStats:
    """What happened to the requests sent to one voter (for tests and `quorum describe`)."""

    sent: int = 0
    """Requests written to the connection."""
    answered: int = 0
    """Answers handed to `on_response`."""
    dropped_down: int = 0
    """Sends dropped because the link was down (backing off after a failed connection)."""
    dropped_full: int = 0
    """Sends dropped because `max_in_flight` requests were unanswered."""
    dropped_lost: int = 0
    """Requests lost with their connection (closed, failed, or its connection never came)."""
    timed_out: int = 0
    """Requests unanswered after `controller.quorum.request.timeout.ms`."""
    refused: int = 0
    """Answers the core cannot take (refusals, malformed frames)."""
    connects: int = 0
    """Connections made."""
    connect_failures: int = 0
    """Connection attempts that failed."""


@dataclass(slots=True, eq=False)
class _Waiting:
    frame: bytes
    correlation_id: int
    api_key: int
    deadline: float


@dataclass(slots=True, eq=False)
class _InFlight:
    """A request written to a connection: its answer's future and its deadline's timer."""

    link: _Link
    connection: _LinkConnection
    api_key: int
    answer: asyncio.Future[Any]
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True, eq=False)
class _Link:
    destination: int
    address: VoterAddress
    stats: LinkStats = field(default_factory=LinkStats)
    connection: _LinkConnection | None = None
    connecting: asyncio.Task[None] | None = None
    waiting: list[_Waiting] = field(default_factory=list)
    in_flight: int = 0
    retry_at: float = 0.0
    backoff_ms: int = 0
    down_reason: str | None = None
    """Why the link is down, once logged (None: up, or never tried)."""
    lost_at_ms: int | None = None
    """When (monotonic ms) the connection was lost or a connect failed; None once connected."""
    refusals: set[str] = field(default_factory=set)
    """The refusals logged since the last good answer (each is logged once)."""

    @property
    def bootstrap(self) -> str:
        host = self.address.host
        return f"[{host}]:{self.address.port}" if ":" in host else f"{host}:{self.address.port}"


class QuorumLinks:
    """The links of this controller to the other voters (see the module docstring).

    Made and used on one event loop; `send` never waits. `close` ends every link.
    """

    def __init__(
        self,
        config: QuorumConfig,
        *,
        on_response: Callable[[int, QuorumResponse], None],
        security: ClientSecurity | None = None,
        cluster_id: str | None = None,
        max_in_flight: int = MAX_IN_FLIGHT,
        reconnect_backoff_max_ms: int = RECONNECT_BACKOFF_MAX_MS,
    ) -> None:
        """Links to every voter of `config.addresses` but `config.node_id`.

        `security` None is PLAINTEXT; `cluster_id` goes into every request (a peer of
        another cluster refuses them).
        """
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.node_id = config.node_id
        self.on_response = on_response
        self.security = security
        self.cluster_id = cluster_id
        self.max_in_flight = max_in_flight
        self.request_timeout_ms = config.request_timeout_ms
        self.retry_backoff_ms = config.retry_backoff_ms
        self.reconnect_backoff_max_ms = max(reconnect_backoff_max_ms, config.retry_backoff_ms)
        self.client_id = f"raft-client-{config.node_id}"
        self._links: dict[int, _Link] = {
            voter: _Link(destination=voter, address=address)
            for voter, address in config.addresses.items()
            if voter != config.node_id
        }
        self._removed: set[int] = set()
        """Nodes unlinked by `set_addresses`: requests to them are dropped, not refused."""
        self._in_flight: set[_InFlight] = set()
        """Requests written and not yet answered, timed out or lost."""
        self._closing: set[asyncio.Task[None]] = set()
        self._closed = False

    # ------------------------------------------------------------------ the interface

    def send(self, destination: int, request: QuorumRequest) -> bool:
        """Hand `request` to voter `destination`; whether it was taken (False: dropped).

        Never waits. `ValueError` for a destination that is not another voter;
        `RaftWireError` for a request whose values the wire cannot carry (a caller's bug).
        """
        link = self._links.get(destination)
        if link is None:
            if destination in self._removed:
                return False  # removed from the voters: the core's request is dropped
            raise ValueError(f"node {destination} is not another voter of this quorum")
        frame = encode_request(
            request, destination=destination, cluster_id=self.cluster_id, client_id=self.client_id
        )
        if self._closed:
            link.stats.dropped_lost += 1
            return False
        if link.in_flight >= self.max_in_flight:
            link.stats.dropped_full += 1
            return False
        loop = asyncio.get_running_loop()
        now = loop.time()
        item = _Waiting(
            frame=frame,
            correlation_id=request.correlation_id,
            api_key=api_key_of(request),
            deadline=now + self.request_timeout_ms / 1000,
        )
        connection = link.connection
        if connection is not None:
            link.in_flight += 1
            self._write(link, connection, item)
            return True
        if link.connecting is None:
            if now < link.retry_at:
                link.stats.dropped_down += 1
                return False
            link.connecting = loop.create_task(self._connect(link))
        link.in_flight += 1
        link.waiting.append(item)
        return True

    def set_addresses(self, addresses: Mapping[int, VoterAddress]) -> None:
        """Link to exactly these nodes: the voter set changed (KIP-853).

        A new voter gets a link (connected on its first request); a removed one's link is
        closed and later requests to it are dropped; a voter whose address changed is
        linked anew. This node's own id is ignored.
        """
        wanted = {i: a for i, a in addresses.items() if i != self.node_id}
        for destination in [d for d in self._links if d not in wanted]:
            self._unlink(destination)
        for destination, address in wanted.items():
            link = self._links.get(destination)
            if link is not None and link.address == address:
                continue
            if link is not None:
                self._unlink(destination)
            self._links[destination] = _Link(destination=destination, address=address)
            self._removed.discard(destination)
            logger.info("controller link to node %d at %s added", destination, address)

    def _unlink(self, destination: int) -> None:
        link = self._links.pop(destination)
        self._removed.add(destination)
        if link.connecting is not None:
            link.connecting.cancel()
        connection, link.connection = link.connection, None
        if connection is not None and not self._closed:
            self._close_later(connection)
        link.waiting.clear()
        logger.info(
            "controller link to node %d (%s) closed: no longer a voter", destination, link.bootstrap
        )

    def stats(self, destination: int) -> LinkStats:
        """What happened so far to the requests sent to `destination`."""
        return self._links[destination].stats

    def in_flight(self, destination: int) -> int:
        """Requests to `destination` taken and not yet answered, timed out or dropped."""
        return self._links[destination].in_flight

    def connected(self, destination: int) -> bool:
        """Whether the connection to `destination` is up."""
        return self._links[destination].connection is not None

    def lost_at_ms(self, destination: int) -> int | None:
        """When (monotonic ms) the link to `destination` last went down, if it is down.

        None while connected, before the first connect, and for a node this one has no link
        to. A node that stops closes its connections and refuses new ones, so a link lost after
        that node's last fetch says it is gone (a stopping leader needs no successor from it).
        """
        link = self._links.get(destination)
        return None if link is None or link.connection is not None else link.lost_at_ms

    async def close(self) -> None:
        """Close every connection and drop every request in flight."""
        self._closed = True
        tasks: list[asyncio.Task[None]] = []
        for link in self._links.values():
            if link.connecting is not None:
                tasks.append(link.connecting)
        for task in tasks:
            task.cancel()
        for request in self._in_flight:
            if request.timer is not None:
                request.timer.cancel()
        self._in_flight.clear()
        # gather, not a suppressing loop: a cancellation of `close` itself still propagates.
        await asyncio.gather(*tasks, *self._closing, return_exceptions=True)
        for link in self._links.values():
            connection, link.connection = link.connection, None
            if connection is not None:
                await connection.close()
            link.stats.dropped_lost += len(link.waiting)
            link.waiting.clear()
            link.in_flight = 0

    # ------------------------------------------------------------------ connecting

    def _close_later(self, connection: _LinkConnection) -> None:
        """Close a connection in its own task (never cancelled: `close` waits for it)."""
        task = asyncio.get_running_loop().create_task(connection.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _connect(self, link: _Link) -> None:
        loop = asyncio.get_running_loop()
        timeout = self.request_timeout_ms / 1000
        connection: _LinkConnection | None = None
        try:
            try:
                async with asyncio.timeout(timeout):
                    connection = await _LinkConnection.connect(
                        link.bootstrap,
                        client_id=self.client_id,
                        # The whole connect is bounded just above; its own steps' bound is
                        # longer, so the one reason given is always that one.
                        timeout_ms=self.request_timeout_ms + 1000,
                        security=self.security,
                    )
            except TimeoutError:
                raise ClientError(f"no connection within {self.request_timeout_ms} ms") from None
            missing = connection.missing_quorum_apis()
            if missing:
                raise ClientError(
                    f"it does not serve {', '.join(missing)}; is it a controller of this "
                    "release, started with controller.quorum.voters?"
                )
        except (ClientError, OSError, SecurityConfigError) as exc:
            if connection is not None:
                await connection.close()
            self._connect_failed(link, str(exc), loop.time())
            return
        finally:
            link.connecting = None
        link.connection = connection
        link.stats.connects += 1
        link.backoff_ms = 0
        link.lost_at_ms = None
        if link.down_reason is not None:
            logger.info(
                "controller link to node %d (%s) is up again", link.destination, link.bootstrap
            )
        link.down_reason = None
        connection.receiver.add_done_callback(lambda _: self._lost(link, connection))
        waiting, link.waiting = link.waiting, []
        now = loop.time()
        for item in waiting:
            if item.deadline <= now:
                link.in_flight -= 1
                link.stats.timed_out += 1
            else:
                self._write(link, connection, item)

    def _connect_failed(self, link: _Link, reason: str, now: float) -> None:
        link.stats.connect_failures += 1
        link.lost_at_ms = now_ms()
        link.backoff_ms = (
            self.retry_backoff_ms
            if link.backoff_ms == 0
            else min(link.backoff_ms * 2, self.reconnect_backoff_max_ms)
        )
        link.retry_at = now + link.backoff_ms / 1000
        link.stats.dropped_lost += len(link.waiting)
        link.in_flight -= len(link.waiting)
        link.waiting.clear()
        self._down(link, f"cannot connect: {reason}")

    def _down(self, link: _Link, reason: str) -> None:
        """Log a link going down once, not every attempt while it stays down."""
        if link.down_reason is None:
            logger.warning(
                "controller link to node %d (%s) is down: %s; retrying every %d ms at most",
                link.destination,
                link.bootstrap,
                reason,
                self.reconnect_backoff_max_ms,
            )
        else:
            logger.debug("controller link to node %d still down: %s", link.destination, reason)
        link.down_reason = reason

    def _lost(self, link: _Link, connection: _LinkConnection) -> None:
        """The connection ended (closed by either side, or failed)."""
        if link.connection is not connection:
            return
        link.connection = None
        link.lost_at_ms = now_ms()
        # The next attempt waits the first backoff: a peer that closed may be restarting.
        link.retry_at = asyncio.get_running_loop().time() + self.retry_backoff_ms / 1000
        if not self._closed:
            self._close_later(connection)
            if link.down_reason is None:
                logger.info(
                    "controller link to node %d (%s) closed; reconnecting on the next request",
                    link.destination,
                    link.bootstrap,
                )

    # ------------------------------------------------------------------ requests

    def _write(self, link: _Link, connection: _LinkConnection, item: _Waiting) -> None:
        """Write a request on the connection now; its answer comes back by callback.

        No task per request: the frame is on the socket before `send` returns, and the
        answer is handed to `on_response` from the connection's reader.
        """
        api_key = item.api_key
        version = send_version(api_key)

        def decode(data: bytes) -> QuorumResponse | RaftWireError:
            try:
                return decode_response(data, api_key=api_key, version=version)
            except RaftWireError as exc:
                return exc

        link.stats.sent += 1
        try:
            answer = connection.send_frame(item.frame, item.correlation_id, decode)
        except ClientError:
            link.in_flight -= 1
            link.stats.dropped_lost += 1
            return
        request = _InFlight(link=link, connection=connection, api_key=api_key, answer=answer)
        self._in_flight.add(request)
        request.timer = asyncio.get_running_loop().call_at(item.deadline, self._expired, request)
        answer.add_done_callback(lambda _: self._settled(request))

    def _expired(self, request: _InFlight) -> None:
        """No answer by the request's deadline: dropped, and its connection closed."""
        if request not in self._in_flight:
            return
        self._in_flight.discard(request)
        link = request.link
        link.in_flight -= 1
        link.stats.timed_out += 1
        self._timed_out(link, request.connection, request.api_key)

    def _settled(self, request: _InFlight) -> None:
        """The request's answer came, or its connection failed."""
        if request not in self._in_flight:
            return  # timed out already, or the links closed
        self._in_flight.discard(request)
        if request.timer is not None:
            request.timer.cancel()
        link = request.link
        link.in_flight -= 1
        answer = request.answer
        if answer.cancelled() or answer.exception() is not None:
            link.stats.dropped_lost += 1
            return
        self._answered(link, answer.result())

    def _answered(self, link: _Link, result: QuorumResponse | RaftWireError) -> None:
        """Hand an answer to `on_response`, or drop a refusal with a warning (once)."""
        if isinstance(result, RaftWireError):
            link.stats.refused += 1
            text = str(result)
            if getattr(result, "error_code", None) == CLUSTER_AUTHORIZATION_FAILED:
                text += (
                    "; the peer does not take this controller's principal as a controller's: "
                    "add it to controller.principals there"
                )
            if text not in link.refusals:
                if len(link.refusals) >= _REFUSALS_REMEMBERED:
                    link.refusals.clear()
                link.refusals.add(text)
                logger.warning(
                    "controller link to node %d: answer dropped: %s", link.destination, text
                )
            return
        link.refusals.clear()
        link.stats.answered += 1
        try:
            self.on_response(link.destination, result)
        except Exception:
            logger.exception(
                "controller link to node %d: on_response failed on a %s",
                link.destination,
                type(result).__name__,
            )

    def _timed_out(self, link: _Link, connection: _LinkConnection, api_key: int) -> None:
        """Close a connection whose request went unanswered: the answers behind it would wait."""
        if link.connection is connection:
            self._down(
                link,
                f"no answer to {QUORUM_API_NAMES[api_key]} within "
                f"{self.request_timeout_ms} ms (controller.quorum.request.timeout.ms)",
            )
            link.connection = None
            link.retry_at = asyncio.get_running_loop().time() + self.retry_backoff_ms / 1000
            self._close_later(connection)
