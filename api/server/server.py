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
logs in first (login.py, over sasl.py's mechanisms); a failed login is answered after
`connection.failed.authentication.delay.ms` and closed, holding up no other connection.

The server is the shell over its listeners and their lifecycle; each event of a connection is
answered by `Answers` (answering.py: the edge, the listener's handlers, metrics per answer),
and a quorum node's forwarding of writes to the leader is `WriteForwarding`'s
(forwarded_writes.py).

Shutdown (`stop`, or SIGTERM/SIGINT under `serve`): stop accepting, let every connection finish
the requests it has already received, close the connections, then close the service (which
waits for appends in flight: everything acknowledged is fsynced).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from api.cancellation import cancel_and_wait
from api.protocol.connection import (
    DEFAULT_MAX_REQUEST_BYTES,
)
from api.raft.transport.endpoint import NodeEndpoint
from api.server.answering import Answers
from api.server.archive_reads import ArchiveReads
from api.server.broker_bindings import NO_BINDINGS, BrokerBindings
from api.server.channel import PRELOGIN_POOL_KEY, Channel, ChannelContext, ChannelSecurity
from api.server.config import DEFAULT_FAILED_AUTHENTICATION_DELAY_MS
from api.server.edge import Edge, quorum_edge
from api.server.feature_support import FeatureSupport, LocalSupport, QuorumSupport
from api.server.forwarded_writes import WriteForwarding
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
from api.server.listeners import ServerListener, describe_listener
from api.server.login import Logins
from api.server.login_guard import (
    HandshakeSlots,
    PreloginMemory,
    SummarizedWarnings,
)
from api.server.metrics import ServerMetrics
from api.server.metrics_listener import MetricsListener
from api.server.private_apis import PrivateApis
from api.service.archiving import LogArchiving, run_rounds
from api.service.broker_liveness import (
    DEFAULT_HEARTBEAT_INTERVAL_MS,
    DEFAULT_SESSION_TIMEOUT_MS,
    BrokerLiveness,
)
from api.service.purges import PurgeScheduler
from api.service.service import MetadataService
from records.model import AclOperation
from replay.controller.authorizer import Authorizer, AuthorizerConfig

if TYPE_CHECKING:
    from api.raft.node import QuorumNode
    from api.security.client_config import ClientSecurity

__all__ = ["MetadataServer", "ServerListener"]
"""`ServerListener` (listeners.py) is named here too: the server is made of them."""

logger = logging.getLogger("api.server")

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
        archiving: LogArchiving | None = None,
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

        With `archiving` (`metadata.log.archive.url`) the server runs its rounds while it
        serves: the active controller (this server, or the quorum's leader) uploads sealed
        committed segments, every node follows the archive's end (api/service/archiving.py).
        """
        self.service = service
        self.quorum_node = quorum_node
        self.archiving = archiving
        self._archive_rounds: asyncio.Task[None] | None = None
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
        """The listeners, with the ports bound once started."""
        # One authorizer for both kinds of API: they share its ACL index.
        self.authorizer = None if authorizer is None else Authorizer(authorizer)
        """Decides every request when `authorizer.class.name` is set; None allows everything."""
        # Which listener serves the quorum APIs to whom (None: a single server).
        self.edge: Edge | None = (
            None
            if self.quorum is None
            else self._edge(service, quorum_listeners, controller_principals)
        )
        self.host = self.listeners[0].host
        self.port = self.listeners[0].port
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
        self.private_apis = PrivateApis(
            service,
            self.authorizer,
            self.liveness,
            broker_bindings,
            archive=None if archiving is None else ArchiveReads(archiving),
        )
        self._sessions: asyncio.Task[None] | None = None
        self.metrics: ServerMetrics | None = None
        """The server's metrics registry (None: `metrics.listen` not set, nothing counted)."""
        self.metrics_listener: MetricsListener | None = None
        if metrics_listen is not None:
            self._serve_metrics(metrics_listen)
        self._apis: dict[str, KafkaApis] = {}
        self.logins, self.forwarding, self._answers = self._answering(
            controller_security, failed_authentication_delay_ms
        )
        """The SASL logins (login.py); forwarding (KIP-590); what answers each event."""
        self.failed_logins = self.logins.failed_logins
        """Failed logins, logged at most once per interval with a summary of the rest."""
        self.forwarder = self.forwarding.forwarder
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
        self._stopped = asyncio.Event()
        self._prelogin: list[PreloginMemory] = []
        self._handshakes = HandshakeSlots(TLS_HANDSHAKES_PER_IP)
        self._tls_failures = SummarizedWarnings(logger, "TLS handshake failed")

    def _answering(
        self, security: ClientSecurity | None, failed_authentication_delay_ms: int
    ) -> tuple[Logins, WriteForwarding, Answers]:
        """The logins, the forwarding of writes and the answering of every event, wired."""
        service = self.service
        logins = Logins(
            lambda: service.image, failed_authentication_delay_ms=failed_authentication_delay_ms
        )
        apis = self._apis
        forwarding = WriteForwarding(
            node=self.quorum_node,
            edge=self.edge,
            security=security,
            kafka=lambda name: apis[name].handle,
            private=self.private_apis.handle,
            metrics=self.metrics,
        )
        answers = Answers(
            apis=apis,
            logins=logins,
            edge=self.edge,
            forwarding=forwarding,
            private_apis=self.private_apis,
            metrics=self.metrics,
        )
        return logins, forwarding, answers

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
            archiving=self.archiving,
        )
        self.metrics_listener = MetricsListener(
            self.metrics.registry, self.health, host=listen[0], port=listen[1]
        )

    async def start(self) -> None:
        """Listen (port 0 picks a free port; `port` is then the one picked)."""
        limits = self.limits
        capacity = connection_capacity(limits)
        self._channels = ChannelContext(
            answer=self._answers.answer,
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
        self.logins.start()
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
                advertised.append(describe_listener(bound, host, port))
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
        if self.archiving is not None:
            self._archive_rounds = asyncio.create_task(self._run_archiving(self.archiving))
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
            controllers=(
                self.edge.controller_principals
                if self.edge is not None and self.edge.is_controller_listener(name)
                else frozenset()
            ),
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
            new_authenticator=self.logins.authenticators(mechanisms) if mechanisms else None,
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
            # Writes that come now are answered NOT_CONTROLLER at once (the client goes to
            # the next leader), not held here waiting for the election.
            await self.forwarding.close()
            await self.quorum_node.resign()
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        await self.purges.stop()
        if self._archive_rounds is not None:
            await cancel_and_wait(self._archive_rounds)
        self.private_apis.threads.close()
        if self.private_apis.archive is not None:
            await asyncio.to_thread(self.private_apis.archive.close)
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
        self.logins.close()
        self._tls_failures.flush()
        for server in servers:
            await server.wait_closed()
        await self.forwarding.close()
        if self.quorum_node is not None:
            await self.quorum_node.aclose()
        await self.service.aclose()
        logger.info("stopped (%s); log end offset %d", reason, self.service.log.end_offset)
        self._stopped.set()

    async def _run_archiving(self, archiving: LogArchiving) -> None:
        """The archive's rounds: this server uploads if it is the active controller."""
        node = self.quorum_node
        service = self.service
        try:
            await run_rounds(
                archiving,
                uploads=lambda: node is None or node.leading,
                committed_end=(
                    (lambda: service.log.end_offset)
                    if node is None
                    else (lambda: node.core.high_watermark)
                ),
                # Read through `service.log`: a failed log is replaced by a reader.
                segments=lambda: service.log.segments(),  # noqa: PLW0108
            )
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("the archive's rounds stopped")

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

    @property
    def unsent_answer_bytes(self) -> int:
        """Answer bytes written to connections and not yet taken by their clients' sockets."""
        if self._channels is None:
            return 0
        return sum(c.unsent_bytes for c in self._channels.channels)
