"""`mlog serve`'s TCP server: a thin asyncio shell over the sans-IO protocol core.

Each connection is a `Channel` (channel.py): its requests are answered in order, one at a time
(as a Kafka broker mutes a channel while its request is processed), with bounded read-ahead
and bounded unsent answers, and a pipelined burst gives the event loop to the other
connections between requests. Writes from all connections meet in the service's group commit
and reads are answered from the committed image without waiting on writes. A request that
cannot be decoded closes only its own connection, with a logged reason; connections over a
limit (limits.py: queued.max.request.bytes, connections.max.idle.ms, max.connections,
max.connections.per.ip) are closed and summed up in one log line per interval.

Listeners (`ServerListener`, Kafka's `listeners`): one asyncio server each, PLAINTEXT, SSL,
SASL_PLAINTEXT or SASL_SSL; the connections of all share the limits. Metadata and
DescribeCluster answer with the advertised address of the listener the client came in on, as
Kafka answers with the endpoints of the same listener name. On a SASL listener a connection
logs in first (sasl.py); a failed login is answered after
`connection.failed.authentication.delay.ms` and closed, holding up no other connection.

Shutdown (`stop`, or SIGTERM/SIGINT under `serve`): stop accepting, let every connection finish
the requests it has already received, close the connections, then close the service (which
waits for appends in flight: everything acknowledged is fsynced).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import socket
import ssl
import struct
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from api.protocol import codec
from api.protocol.codec import API_NAMES, SASL_AUTHENTICATE_KEY, KafkaRequest, encode_response
from api.protocol.connection import (
    DEFAULT_MAX_REQUEST_BYTES,
    Close,
    Event,
    PrivateRequest,
    Reply,
    Request,
    SaslToken,
)
from api.protocol.private import PRIVATE_APIS
from api.raft.transport.endpoint import NodeEndpoint
from api.security.derived_keys import DerivedKeys
from api.security.scram import StoredCredential
from api.security.unknown_users import FakeSalts, UnknownIterations
from api.server.broker_bindings import NO_BINDINGS, BrokerBindings
from api.server.channel import PRELOGIN_POOL_KEY, Channel, ChannelContext, ChannelSecurity
from api.server.edge import Edge, quorum_edge, refused_answer
from api.server.feature_support import FeatureSupport, LocalSupport, QuorumSupport
from api.server.forwarding import (
    ENVELOPE_KEY,
    EnvelopeOpener,
    Forwarder,
    ForwardFailed,
    forwarded,
    refused_frame,
)
from api.server.health import Health, health
from api.server.heap import HeapTrimmer
from api.server.kafka.authorization import Gate
from api.server.kafka.base import ANONYMOUS, Listener, Session
from api.server.kafka.dispatch import KafkaApis
from api.server.kafka.quorum import QuorumEndpoint
from api.server.kafka.sole_voter import SOLE_VOTER_VERSIONS, SoleVoter
from api.server.limits import (
    CONNECTIONS_MAX_IDLE_MS,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    QUEUED_MAX_REQUEST_BYTES,
    SASL_SERVER_AUTHENTICATION_TIMEOUT_MS,
    CloseSummary,
    ConnectionCounts,
    RequestMemory,
    ServerLimits,
    connection_capacity,
)
from api.server.login_guard import (
    FailedLogins,
    HandshakeSlots,
    LoginPool,
    PreloginMemory,
    SummarizedWarnings,
)
from api.server.metrics import ServerMetrics, answer_error, envelope_labels, forwarded_labels
from api.server.metrics_listener import MetricsListener
from api.server.private_apis import PrivateApis
from api.server.sasl import LoginCosts, SaslAuthenticator, SaslStep
from api.service.broker_liveness import (
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    DEFAULT_SESSION_TIMEOUT_MS,
    BrokerLiveness,
)
from api.service.purges import PurgeScheduler
from api.service.service import MetadataService
from records.model import AclOperation, ScramMechanism
from replay.controller.authorizer import Authorizer, AuthorizerConfig
from replay.controller.errors import ApiError, ErrorCode

if TYPE_CHECKING:
    from api.raft.node import QuorumNode
    from api.security.client_config import ClientSecurity

logger = logging.getLogger("api.server")

DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100
"""Kafka's `connection.failed.authentication.delay.ms` default."""

TLS_HANDSHAKE_TIMEOUT = 10.0
"""Seconds a TLS handshake may take (at most `connections.max.idle.ms`)."""

TLS_HANDSHAKES_PER_IP = 32
"""TLS handshakes under way from one client address; its next connections wait their turn."""

TLS_HANDSHAKES_KEY = "tls.handshakes.per.ip"
"""How the summary line names connections closed over `TLS_HANDSHAKES_PER_IP`."""


def _quorum_endpoint(
    quorum: QuorumEndpoint | None,
    node: QuorumNode | None,
    quorum_listeners: Collection[str] | None,
    listeners: Sequence[ServerListener],
) -> QuorumEndpoint | None:
    """The endpoint answering the quorum APIs: `quorum` as given, else the node's own."""
    if quorum is not None or node is None:
        return quorum
    # DescribeQuorum names the voters' addresses under the controller listener's name.
    names = list(quorum_listeners or ()) or [listeners[0].name if listeners else ""]
    return NodeEndpoint(node, listener_name=names[0] or "CONTROLLER")


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerListener:
    """One listener: where it binds, what it advertises, how its connections are secured."""

    name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"
    host: str = "127.0.0.1"
    """Address to bind; "" binds every interface."""
    port: int = 9092
    """Port to bind; 0 picks a free one."""
    advertised_host: str | None = None
    """Host told to clients (None: the bound host, this machine's name for "")."""
    advertised_port: int | None = None
    """Port told to clients (None: the bound one)."""
    ssl_context: ssl.SSLContext | None = None
    """TLS server context: required by SSL and SASL_SSL, refused by the others."""
    certificate_principal: Callable[[dict[str, Any]], str] | None = None
    """A client certificate -> principal (`ssl.principal.mapping.rules`; SSL listeners)."""
    sasl_mechanisms: tuple[str, ...] = ()
    """Enabled SASL mechanisms: required by SASL_PLAINTEXT and SASL_SSL, refused by others."""

    def check(self) -> None:
        """ValueError if the listener's parts do not fit its security protocol."""
        protocol = self.security_protocol
        if protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise ValueError(f"listener {self.name}: unknown security protocol {protocol}")
        if (self.ssl_context is not None) != protocol.endswith("SSL"):
            raise ValueError(f"listener {self.name}: {protocol} and ssl_context do not match")
        if bool(self.sasl_mechanisms) != protocol.startswith("SASL_"):
            raise ValueError(f"listener {self.name}: {protocol} and sasl_mechanisms do not match")


def _checked(listeners: Sequence[ServerListener]) -> list[ServerListener]:
    """The listeners, each checked; at least one."""
    if not listeners:
        raise ValueError("a server needs at least one listener")
    for listener in listeners:
        listener.check()
    return list(listeners)


class MetadataServer:
    """Serves a `MetadataService` on a TCP listener."""

    def __init__(
        self,
        service: MetadataService,
        *,
        host: str = "127.0.0.1",
        port: int = 9092,
        advertised_host: str | None = None,
        advertised_port: int | None = None,
        node_id: int = 0,
        cluster_id: str = "",
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        limits: ServerLimits | None = None,
        run_scheduler: bool = True,
        listeners: Sequence[ServerListener] | None = None,
        failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS,
        authorizer: AuthorizerConfig | None = None,
        quorum: QuorumEndpoint | None = None,
        quorum_listeners: Collection[str] | None = None,
        quorum_node: QuorumNode | None = None,
        metrics_listen: tuple[str, int] | None = None,
        broker_session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        broker_heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
        controller_security: ClientSecurity | None = None,
        broker_bindings: BrokerBindings = NO_BINDINGS,
        controller_principals: Collection[str] | None = None,
    ) -> None:
        """`listeners` replaces the one PLAINTEXT listener of `host`/`port`/`advertised_*`.

        With `metrics_listen` (host, port) the server counts its requests and serves
        `/metrics`, `/healthz` and `/readyz` there (`metrics.listen`; port 0: a free one).

        With `quorum_node` the server is a node of a controller quorum: the node starts once
        the listeners are bound (the other voters reach it there), stops before the service,
        and answers the quorum's APIs (`quorum`, an endpoint, answers them without a node:
        tests). They are served on the listeners named in `quorum_listeners` (Kafka's
        `controller.listener.names`, required with a quorum) to `controller_principals` only
        (`edge.py`); the other listeners serve DescribeQuorum alone. A quorum node forwards the
        writes it does not lead to the leader (`forwarding.py`), connecting as the controllers
        connect to each other (`controller_security`, None: PLAINTEXT). Without either, the
        server is a single server: its own quorum of one voter, answering DescribeQuorum as
        such on every listener (`kafka/sole_voter.py`).
        """
        self.service = service
        self.quorum_node = quorum_node
        if listeners is None:
            listeners = [
                ServerListener(
                    host=host,
                    port=port,
                    advertised_host=advertised_host,
                    advertised_port=advertised_port,
                )
            ]
        self.quorum = _quorum_endpoint(quorum, quorum_node, quorum_listeners, listeners)
        self.sole_voter = SoleVoter(service, node_id) if self.quorum is None else None
        """A single server (no quorum): answers DescribeQuorum as a quorum of one voter."""
        self.listeners: list[ServerListener] = _checked(listeners)
        # One authorizer for both kinds of API: they share its ACL index.
        self.authorizer = None if authorizer is None else Authorizer(authorizer)
        """Decides every request when `authorizer.class.name` is set; None allows everything."""
        # Which listener serves the quorum APIs to whom (None: a single server).
        self.edge: Edge | None = (
            None
            if self.quorum is None
            else self._edge(service, quorum_listeners, controller_principals)
        )
        """The listeners, with the ports bound once started."""
        self.host = self.listeners[0].host
        self.port = self.listeners[0].port
        self.failed_authentication_delay = failed_authentication_delay_ms / 1000
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.max_request_bytes = max_request_bytes
        self.limits = limits or ServerLimits()
        self.liveness = BrokerLiveness(
            service,
            session_timeout_ms=broker_session_timeout_ms,
            heartbeat_interval_ms=broker_heartbeat_interval_ms,
        )
        """The brokers' sessions: one table for every listener."""
        self.private_apis = PrivateApis(service, self.authorizer, self.liveness, broker_bindings)
        self._sessions: asyncio.Task[None] | None = None
        self.forwarder, self._envelopes = self._forwarding(
            service, quorum_node, controller_security
        )
        """Sends the writes this node does not lead to the leader (None: a single server)."""
        self.feature_support: FeatureSupport = (
            LocalSupport()
            if quorum_node is None
            else QuorumSupport(quorum_node, security=controller_security)
        )
        """Asks the other voters whether they support a feature level before an upgrade."""
        self._run_scheduler = run_scheduler
        self._servers: list[asyncio.Server] = []
        self._channels: ChannelContext | None = None
        self.purges = PurgeScheduler(service)
        """Checks pending partition deletions every interval (with `run_scheduler`)."""
        self.apis: KafkaApis | None = None
        """The Kafka handlers of the first listener."""
        self._apis: dict[str, KafkaApis] = {}
        self._stopped = asyncio.Event()
        self._prelogin: list[PreloginMemory] = []
        self._login_pool: LoginPool | None = None
        self.failed_logins = FailedLogins(logger)
        """Failed logins, logged at most once per interval with a summary of the rest."""
        self._handshakes = HandshakeSlots(TLS_HANDSHAKES_PER_IP)
        self._tls_failures = SummarizedWarnings(logger, "TLS handshake failed")
        unknown = UnknownIterations()
        self.metrics: ServerMetrics | None = None
        """The server's metrics registry (None: `metrics.listen` not set, nothing counted)."""
        self.metrics_listener: MetricsListener | None = None
        if metrics_listen is not None:
            self._serve_metrics(metrics_listen)
        self._login_costs = LoginCosts(
            keys=DerivedKeys(),
            unknown_iterations=lambda mechanism, name: unknown.of(
                service.image.scram.credentials, mechanism, name
            ),
            unknown_plain=lambda name: unknown.plain_of(service.image.scram.credentials, name),
            fake_salts=FakeSalts(),
        )

    def _edge(
        self,
        service: MetadataService,
        listeners: Collection[str] | None,
        principals: Collection[str] | None,
    ) -> Edge:
        """The edge of a quorum node; ValueError without its listeners or principals."""
        names = {listener.name for listener in self.listeners}
        missing = sorted(set(n.upper() for n in listeners or ()) - names)
        if missing:
            raise ValueError(
                f"controller.listener.names names {', '.join(missing)}, which is not in "
                f"listeners ({', '.join(sorted(names))}); add it to listeners"
            )
        gate = Gate(self.authorizer)

        def operator_allowed(session: Session) -> bool:
            return gate.on and gate.allows_cluster(service.image, session, AclOperation.ALTER)

        return quorum_edge(listeners or (), principals or (), operator_allowed)

    def _serve_metrics(self, listen: tuple[str, int]) -> None:
        """Count requests and serve `/metrics`, `/healthz` and `/readyz` on `listen`."""
        self.metrics = ServerMetrics(
            self.service,
            self.quorum_node,
            node_id=self.node_id,
            connections=lambda: self.open_connections,
            closed=lambda: self.limit_closes,
        )
        self.metrics_listener = MetricsListener(
            self.metrics.registry, self.health, host=listen[0], port=listen[1]
        )

    async def start(self) -> None:
        """Listen (port 0 picks a free port; `port` is then the one picked)."""
        limits = self.limits
        capacity = connection_capacity(limits)
        self._channels = ChannelContext(
            answer=self._answer,
            max_request_bytes=self.max_request_bytes,
            idle_seconds=limits.connections_max_idle_ms / 1000,
            memory=RequestMemory(limits.queued_max_request_bytes),
            counts=ConnectionCounts(
                max_connections=capacity, max_per_ip=limits.max_connections_per_ip
            ),
            summary=CloseSummary(
                logger,
                {
                    QUEUED_MAX_REQUEST_BYTES.key: limits.queued_max_request_bytes,
                    CONNECTIONS_MAX_IDLE_MS.key: limits.connections_max_idle_ms,
                    MAX_CONNECTIONS.key: capacity,
                    MAX_CONNECTIONS_PER_IP.key: limits.max_connections_per_ip,
                    TLS_HANDSHAKES_KEY: TLS_HANDSHAKES_PER_IP,
                    PRELOGIN_POOL_KEY: limits.prelogin_bytes,
                    SASL_SERVER_AUTHENTICATION_TIMEOUT_MS.key: (
                        limits.sasl_server_authentication_timeout_ms
                    ),
                },
            ),
            principal=ANONYMOUS,
            trimmer=HeapTrimmer(),
        )
        shared = self._channels
        self._login_pool = LoginPool()
        advertised: list[str] = []
        try:
            for index, listener in enumerate(self.listeners):
                bound = await self._listen(listener, shared)
                self.listeners[index] = bound
                host = bound.advertised_host or bound.host or socket.getfqdn()
                port = bound.advertised_port or bound.port
                self._apis[bound.name] = self._kafka_apis(
                    Listener(
                        host=host,
                        port=port,
                        node_id=self.node_id,
                        cluster_id=self.cluster_id,
                        quorum=self.quorum_node,
                        controller_listener=self.edge is None
                        or self.edge.is_controller_listener(bound.name),
                    ),
                    name=bound.name,
                    quorum=self.quorum is not None,
                )
                advertised.append(_describe(bound, host, port))
        except BaseException:
            for server in self._servers:
                server.close()
            self._servers = []
            raise
        self.host = self.listeners[0].host
        self.port = self.listeners[0].port
        self.apis = self._apis[self.listeners[0].name]
        if self.metrics_listener is not None:
            try:
                await self.metrics_listener.start()
            except BaseException:
                for server in self._servers:
                    server.close()
                self._servers = []
                raise
        if self.quorum_node is not None:
            await self.quorum_node.start()
        if self._run_scheduler:
            self.purges.start()
            self._sessions = asyncio.create_task(self._session_checks())
        for listener in self.listeners:
            if "PLAIN" in listener.sasl_mechanisms and listener.ssl_context is None:
                logger.warning(
                    "listener %s serves SASL PLAIN without TLS: passwords cross the network "
                    "in clear; use SASL_SSL, or SCRAM only (sasl.enabled.mechanisms)",
                    listener.name,
                )
        if self.authorizer is not None:
            config = self.authorizer.config
            logger.info(
                "authorizer on: super.users=%s, allow.everyone.if.no.acl.found=%s",
                ";".join(sorted(config.super_users)) or "(none)",
                str(config.allow_everyone_if_no_acl_found).lower(),
            )
        logger.info(
            "serving on %s; node %d, log offset %d; "
            "max.connections=%d, max.connections.per.ip=%d, connections.max.idle.ms=%d, "
            "queued.max.request.bytes=%d",
            ", ".join(advertised),
            self.node_id,
            self.service.log.end_offset,
            capacity,
            limits.max_connections_per_ip,
            limits.connections_max_idle_ms,
            limits.queued_max_request_bytes,
        )

    def _kafka_apis(self, listener: Listener, *, name: str, quorum: bool = False) -> KafkaApis:
        """The Kafka handlers answering on listener `name` (advertising its address)."""
        return KafkaApis(
            self.service,
            listener,
            self.authorizer,
            self.quorum if quorum else None,
            liveness=self.liveness,
            feature_support=self.feature_support,
            sole_voter=self.sole_voter,
            broker_bindings=self.private_apis.bindings,
            quorum_served=None if self.edge is None else self.edge.serves(name),
        )

    async def _listen(self, listener: ServerListener, shared: ChannelContext) -> ServerListener:
        """Bind one listener; the listener with its bound port."""
        prelogin = None
        if listener.sasl_mechanisms:
            prelogin = PreloginMemory(self.limits.prelogin_bytes)
            self._prelogin.append(prelogin)
        context = ChannelContext(
            answer=shared.answer,
            max_request_bytes=shared.max_request_bytes,
            idle_seconds=shared.idle_seconds,
            memory=shared.memory,
            counts=shared.counts,
            summary=shared.summary,
            principal=shared.principal,
            channels=shared.channels,
            security=self._channel_security(listener),
            extra_versions=(
                self.edge.serves(listener.name)
                if self.edge is not None
                else SOLE_VOTER_VERSIONS
                if self.sole_voter is not None
                else {}
            ),
            prelogin=prelogin,
            trimmer=shared.trimmer,
        )
        # A deep accept queue: a burst of new connections waits in the kernel, not in SYN
        # retries (the limits, not the backlog, decide who is served).
        server = await asyncio.get_running_loop().create_server(
            lambda: Channel(context), listener.host or None, listener.port, backlog=1024
        )
        self._servers.append(server)
        port = listener.port
        if server.sockets:
            port = int(server.sockets[0].getsockname()[1])
        return dataclasses.replace(listener, port=port)

    def _channel_security(self, listener: ServerListener) -> ChannelSecurity:
        mechanisms = listener.sasl_mechanisms
        service = self.service

        def credentials(name: str, mechanism: ScramMechanism) -> StoredCredential | None:
            # Read from the committed image at each login step, never a copy.
            return service.image.scram.get(name, mechanism)

        costs = self._login_costs

        def new_authenticator() -> SaslAuthenticator:
            return SaslAuthenticator(mechanisms, credentials, costs=costs)

        return ChannelSecurity(
            listener=listener.name,
            ssl_context=listener.ssl_context,
            handshake_timeout=min(
                TLS_HANDSHAKE_TIMEOUT, self.limits.connections_max_idle_ms / 1000
            ),
            handshakes=self._handshakes,
            tls_failures=self._tls_failures,
            handshakes_key=TLS_HANDSHAKES_KEY,
            certificate_principal=listener.certificate_principal,
            new_authenticator=new_authenticator if mechanisms else None,
            max_receive_size=self.limits.sasl_server_max_receive_size,
            login_seconds=self.limits.sasl_server_authentication_timeout_ms / 1000,
        )

    @property
    def address(self) -> str:
        """`host:port` of the first listener."""
        return self.listener_address(self.listeners[0].name)

    def listener_address(self, name: str) -> str:
        """`host:port` a client connects to for the listener `name` (bound or advertised)."""
        for listener in self.listeners:
            if listener.name == name:
                host = listener.host or "127.0.0.1"
                return f"[{host}]:{listener.port}" if ":" in host else f"{host}:{listener.port}"
        raise KeyError(f"no listener {name}")

    async def wait_stopped(self) -> None:
        """Return once `stop` has finished."""
        await self._stopped.wait()

    async def stop(self, reason: str = "stop requested") -> None:
        """Stop accepting, finish requests already received, close connections and service.

        `reason` (say, the signal's name) goes into the one line logged when it is done.
        """
        if not self._servers:
            return
        if self.metrics_listener is not None:
            await self.metrics_listener.stop()  # probes fail from here on: traffic moves away
        if self.quorum_node is not None:
            # Stop voting first (a node that voted on its way out could elect a leader whose
            # marker never commits), then hand leadership over while still serving: the
            # successor fetches here.
            self.quorum_node.stop_voting()
            if self.forwarder is not None:
                # Writes that come now are answered NOT_CONTROLLER at once (the client goes
                # to the next leader), not held here waiting for the election.
                await self.forwarder.close()
            await self.quorum_node.resign()
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        await self.purges.stop()
        if self._sessions is not None:
            self._sessions.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._sessions
        self.service.release_waiters()  # long-polling FetchLogs answer now
        channels = self._channels.channels if self._channels is not None else set()
        for channel in list(channels):
            channel.closing = True
            if channel.task is None:
                channel.abort()  # never sent a whole request: nothing to answer
            elif not channel.processing:
                channel.task.cancel()
        tasks = [c.task for c in channels if c.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._channels is not None:
            self._channels.summary.flush()
            if self._channels.trimmer is not None:
                self._channels.trimmer.cancel()
        self.failed_logins.flush()
        self._tls_failures.flush()
        if self._login_pool is not None:
            self._login_pool.close()
        for server in servers:
            await server.wait_closed()
        if self.forwarder is not None:
            await self.forwarder.close()
        if self.quorum_node is not None:
            await self.quorum_node.aclose()
        await self.service.aclose()
        logger.info("stopped (%s); log end offset %d", reason, self.service.log.end_offset)
        self._stopped.set()

    async def _session_checks(self) -> None:
        try:
            await self.liveness.run()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("the broker session checks stopped")

    # ------------------------------------------------------------------ answering

    def health(self) -> Health:
        """Whether the server is ready (image applied, a leader known) and takes writes."""
        return health(self.service, self.quorum_node, node_id=self.node_id)

    @property
    def limit_closes(self) -> dict[str, int]:
        """Connections closed over each limit since the start, by the limit's key."""
        if self._channels is None:
            return {}
        return dict(self._channels.summary.closed_total)

    @property
    def open_connections(self) -> int:
        """Connections admitted and not yet closed."""
        return 0 if self._channels is None else self._channels.counts.total

    @property
    def queued_request_bytes(self) -> int:
        """Request bytes held by frames being read across all connections (and pre-login pools)."""
        if self._channels is None:
            return 0
        return self._channels.memory.used + sum(pool.used for pool in self._prelogin)

    def _forwarding(
        self,
        service: MetadataService,
        quorum_node: QuorumNode | None,
        security: ClientSecurity | None,
    ) -> tuple[Forwarder | None, EnvelopeOpener]:
        """The forwarder of writes to the leader, and the opener of forwarded ones (KIP-590)."""
        forwarder = None if quorum_node is None else Forwarder(quorum_node, security=security)
        opener = EnvelopeOpener(
            node=quorum_node,
            admit=self._admit_envelope,
            kafka=lambda name: self._apis[name].handle,
            private=self.private_apis.handle,
        )
        return forwarder, opener

    def _admit_envelope(self, api_key: int, session: Session, listener: str) -> None:
        """Refuse an Envelope, or a voter change inside one, that the edge does not admit."""
        if self.edge is None:
            raise ApiError(
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "a single server takes no Envelope"
            )
        self.edge.check(api_key, listener, session)

    @property
    def unsent_answer_bytes(self) -> int:
        """Answer bytes written to connections and not yet taken by their clients' sockets."""
        if self._channels is None:
            return 0
        return sum(c.unsent_bytes for c in self._channels.channels)

    async def _answer(self, event: Event, channel: Channel) -> bool:
        """Answer one event on `channel`; False when the connection must close."""
        if channel.sasl is not None:
            return await self._authenticate(event, channel, channel.sasl)
        if (
            self.forwarder is not None  # a quorum's node (none: no coroutine made per request)
            and isinstance(event, Request | PrivateRequest)
            and await self._forwarded(event, channel)
        ):
            return True
        metrics = self.metrics
        if isinstance(event, Request):
            header = event.request.header
            apis = self._apis[channel.listener]
            started = time.perf_counter() if metrics is not None else 0.0
            try:
                refused = self._refused_at_edge(event.request, channel)
                if refused is not None:
                    body = refused
                elif header.api_key == ENVELOPE_KEY:  # only decoded on the quorum's listeners
                    body = await self._envelopes.open(
                        event.request, channel.session, channel.listener
                    )
                else:
                    body = await apis.handle(event.request, channel.session)
            except Exception:
                name = API_NAMES.get(header.api_key, str(header.api_key))
                if metrics is not None:
                    seconds = time.perf_counter() - started
                    metrics.requests.observe(name, "UNKNOWN_SERVER_ERROR", seconds)
                logger.exception(
                    "closing %s: %s v%d failed", channel.peer, name, header.api_version
                )
                return False
            channel.write(encode_response(header.correlation_id, body))
            if metrics is not None:
                seconds = time.perf_counter() - started
                if header.api_key == ENVELOPE_KEY:  # by the write inside (issue #54, finding 7)
                    labels = envelope_labels(event.request.body, body)
                else:
                    labels = API_NAMES.get(header.api_key, str(header.api_key)), answer_error(body)
                metrics.requests.observe(*labels, seconds)
        elif isinstance(event, Reply):
            channel.write(event.data)
        elif isinstance(event, PrivateRequest):
            header = event.header
            started = time.perf_counter() if metrics is not None else 0.0
            try:
                channel.write(await self.private_apis.handle(header, event.body, channel.session))
                if metrics is not None:
                    seconds = time.perf_counter() - started
                    metrics.requests.observe(PRIVATE_APIS[header.api_key].name, "NONE", seconds)
            except Exception:
                if metrics is not None:
                    seconds = time.perf_counter() - started
                    name = PRIVATE_APIS[header.api_key].name
                    metrics.requests.observe(name, "UNKNOWN_SERVER_ERROR", seconds)
                logger.exception(
                    "closing %s: %s v%d failed",
                    channel.peer,
                    PRIVATE_APIS[header.api_key].name,
                    header.api_version,
                )
                return False
        elif isinstance(event, Close):
            logger.warning("closing connection from %s: %s", channel.peer, event.reason)
            return False
        elif isinstance(event, SaslToken):  # pragma: no cover - only read while logging in
            return False
        return True

    def _refused_at_edge(self, request: KafkaRequest, channel: Channel) -> codec.Answer | None:
        """The refusal of a quorum request the edge does not admit (None: admitted)."""
        edge = self.edge
        if edge is None:
            return None
        try:
            edge.check(request.header.api_key, channel.listener, channel.session)
        except ApiError as exc:
            logger.info(
                "refused %s from %s (%s) on listener %s: %s",
                API_NAMES.get(request.header.api_key, request.header.api_key),
                channel.session.principal,
                channel.peer,
                channel.listener,
                exc.message,
            )
            return refused_answer(request, exc)
        return None

    async def _forwarded(self, event: Request | PrivateRequest, channel: Channel) -> bool:
        """Answer a write on a node that does not lead with the leader's answer (KIP-590).

        False when it is not forwarded (a read, this node leads, or nothing could be sent):
        it is answered here (a write with NOT_CONTROLLER, `ReplicatedService.submit`).
        """
        forwarder = self.forwarder
        node = self.quorum_node
        if forwarder is None or node is None or node.leading or not forwarded(event):
            return False
        if isinstance(event, Request) and self.edge is not None:
            # The edge decides on the node the request reached, before anything is sent: a
            # voter change it refuses here is answered with that refusal (`_answer`).
            try:
                self.edge.check(event.request.header.api_key, channel.listener, channel.session)
            except ApiError:
                return False
        started = time.perf_counter()
        try:
            data = await forwarder.forward(event.frame, channel.session)
        except ForwardFailed as exc:
            logger.debug("write answered here, not forwarded: %s", exc)
            return False
        except ApiError as exc:
            frame = refused_frame(event, exc)
            if frame is None:
                return False
            channel.write(frame)
            self._count_forwarded(event, None, int(exc.error_code), started)
            return True
        channel.write(struct.pack(">i", len(data)) + data)
        self._count_forwarded(event, data, 0, started)
        return True

    def _count_forwarded(
        self, event: Request | PrivateRequest, answer: bytes | None, error: int, started: float
    ) -> None:
        """Count a forwarded write by the API and error of its answer (`forwarded_labels`)."""
        if self.metrics is not None:
            labels = forwarded_labels(event.frame, answer, error)
            self.metrics.requests.observe(*labels, time.perf_counter() - started)

    # ------------------------------------------------------------------ authentication

    async def _authenticate(self, event: Event, channel: Channel, sasl: SaslAuthenticator) -> bool:
        """One frame of a connection that has not logged in; False when it must close."""
        # PLAIN's check derives a key (PBKDF2, thousands of rounds): off the event loop, on
        # the login threads, a bounded number per client address. SCRAM's steps are a few
        # HMACs: on the default executor as before (answering them inline measured slower
        # over TLS: bench/auth_bench.py's logins, interleaved with the code before).
        pool = self._login_pool if sasl.mechanism == "PLAIN" else None
        if isinstance(event, Request):
            if event.request.header.api_key == SASL_AUTHENTICATE_KEY and pool is not None:
                step = await pool.run(channel.ip, functools.partial(sasl.on_request, event.request))
            elif event.request.header.api_key == SASL_AUTHENTICATE_KEY:
                step = await asyncio.to_thread(sasl.on_request, event.request)
            else:
                step = sasl.on_request(event.request)
            if step.handle:
                channel.sasl = None  # ApiVersions is answered as on any connection
                try:
                    return await self._answer(event, channel)
                finally:
                    channel.sasl = sasl
        elif isinstance(event, SaslToken):
            if pool is not None:
                step = await pool.run(channel.ip, functools.partial(sasl.on_token, event.data))
            else:
                step = await asyncio.to_thread(sasl.on_token, event.data)
        elif isinstance(event, PrivateRequest):
            step = sasl.on_private(PRIVATE_APIS[event.header.api_key].name)
        elif isinstance(event, Reply):  # an ApiVersions of a version not served
            channel.write(event.data)
            return True
        else:
            logger.warning("closing connection from %s: %s", channel.peer, event.reason)
            return False
        return await self._sasl_step(step, event, channel, sasl)

    async def _sasl_step(
        self, step: SaslStep, event: Event, channel: Channel, sasl: SaslAuthenticator
    ) -> bool:
        if step.close is not None:
            logger.warning(
                "closing connection from %s on listener %s: %s",
                channel.peer,
                channel.listener,
                step.close,
            )
            channel.authenticated(None)
            return False
        if step.failure is not None:
            self.failed_logins.failed(
                peer=channel.peer,
                ip=channel.ip,
                listener=channel.listener,
                user=step.user,
                reason=step.failure,
            )
            channel.authenticated(None)
            # Kafka answers a failed login only after the delay (slowing password guessing),
            # then closes; the wait is this connection's task only.
            await asyncio.sleep(self.failed_authentication_delay)
            if step.answer is not None and isinstance(event, Request):
                channel.write(encode_response(event.request.header.correlation_id, step.answer))
            return False
        if step.answer is not None and isinstance(event, Request):
            channel.write(encode_response(event.request.header.correlation_id, step.answer))
        if step.raw is not None:
            channel.write(struct.pack(">i", len(step.raw)) + step.raw)
        if step.principal is not None:
            channel.authenticated(step.principal)
            logger.debug(
                "%s authenticated from %s on listener %s with %s",
                step.principal,
                channel.peer,
                channel.listener,
                sasl.mechanism,
            )
        else:
            channel.expect_raw_tokens(sasl.raw_tokens)
        return True


def _describe(listener: ServerListener, host: str, port: int) -> str:
    """A listener for the start line: bound address, protocol, name, mechanisms, advertised."""
    name = listener.security_protocol
    if listener.name != name:
        name = f"{name} as {listener.name}"
    if listener.sasl_mechanisms:
        name = f"{name} with {'/'.join(listener.sasl_mechanisms)}"
    if listener.ssl_context is not None and listener.ssl_context.verify_mode != ssl.CERT_NONE:
        required = listener.ssl_context.verify_mode == ssl.CERT_REQUIRED
        name = f"{name}, client certificates {'required' if required else 'requested'}"
    return f"{listener.host or '*'}:{listener.port} ({name}, advertised {host}:{port})"
