"""`mlog serve`'s configuration under Kafka's keys: a `server.properties`, with flags laid over it.

`server_config(values)` turns the key/value pairs of a Java-properties file (flags already laid
over them by `mlog serve`) into one typed `ServerConfig`, checking every value: a bad one is a
`ServerConfigError` of one line naming the key. A real Kafka `server.properties` works: the keys
this server has no use for are listed once in `ServerConfig.notes` (one line), never an error.

Listeners are Kafka's (listener_config.py: `listeners`, `advertised.listeners`, the protocol
map, TLS and SASL keys per listener); this module reads every other key and names the listener
parts it builds on in `__all__` as well, so that a config user imports from one place.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from api.raft.core.config import QuorumConfig, VoterAddress
from api.raft.core.errors import RaftConfigError
from api.security.principal import ANONYMOUS
from api.server.broker_bindings import (
    BROKER_PRINCIPALS_KEY,
    NO_BINDINGS,
    BrokerBindings,
    BrokerBindingsError,
    parse_broker_principals,
)
from api.server.config_error import ServerConfigError, Take
from api.server.event_loop import EVENT_LOOP_KEY, EVENT_LOOPS
from api.server.limits import SPECS, LimitSpec
from api.server.listener_config import (
    DEFAULT_LISTENERS,
    DEFAULT_MECHANISMS,
    MAX_PORT,
    SASL_PROTOCOLS,
    SUPPORTED_MECHANISMS,
    ListenerConfig,
    TlsConfig,
    format_listener,
    listener_configs,
    parse_listeners,
)
from api.service.archiving import ARCHIVE_INTERVAL_KEY, ARCHIVE_URL_KEY, ArchiveConfig
from api.service.broker_liveness import DEFAULT_HEARTBEAT_INTERVAL_MS, DEFAULT_SESSION_TIMEOUT_MS
from api.service.retention import MAX_RETENTION_BYTES_KEY, MAX_RETENTION_MS_KEY, RetentionConfig
from metadata_log.archive import ArchiveError, ArchiveLocation
from metadata_log.config import MIN_SEGMENT_BYTES
from records.fields import INT32_MAX
from replay.controller.authorizer import STANDARD_AUTHORIZER, AuthorizerConfig
from replay.controller.config_defs import SNAPSHOT_BYTES_KEY, SNAPSHOT_INTERVAL_KEY

__all__ = [
    "BOOTSTRAP_SERVERS_KEY",
    "CONTROLLER_LISTENER_NAMES_KEY",
    "CONTROLLER_PRINCIPALS_KEY",
    "DEFAULT_FAILED_AUTHENTICATION_DELAY_MS",
    "DEFAULT_LISTENERS",
    "DEFAULT_MECHANISMS",
    "LONG_MAX",
    "METRICS_LISTEN_KEY",
    "QUORUM_KEYS",
    "SEGMENT_BYTES_KEY",
    "SEGMENT_MS_KEY",
    "SNAPSHOT_BYTES_KEY",
    "SNAPSHOT_INTERVAL_KEY",
    "SUPPORTED_MECHANISMS",
    "DynamicQuorum",
    "ListenerConfig",
    "ServerConfig",
    "ServerConfigError",
    "Take",
    "TlsConfig",
    "check_controller_listener",
    "format_listener",
    "parse_bootstrap_servers",
    "parse_listeners",
    "parse_principals",
    "server_config",
]

CONTROLLER_LISTENER_NAMES_KEY = "controller.listener.names"
"""Kafka's key: the listeners the controllers talk to each other on."""


CONTROLLER_PRINCIPALS_KEY = "controller.principals"
"""Our key (Kafka has none): the controllers' principals, `;`-separated as `super.users`."""


DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100
"""Kafka's `connection.failed.authentication.delay.ms` default."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# Keys of a Kafka server.properties that have no meaning for this server, reported together.
_JAAS = re.compile(r"^(listener\.name\.[^.]+\.)?([a-z0-9-]+\.)?sasl\.jaas\.config$")
_IGNORED_WITH_REASON = {
    "sasl.mechanism.inter.broker.protocol": "there are no other brokers to talk to",
    "security.inter.broker.protocol": "there are no other brokers to talk to",
    "inter.broker.listener.name": "there are no other brokers to talk to",
    "ssl.endpoint.identification.algorithm": "it checks servers' names, for clients",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """Everything `mlog serve` takes from its config file and flags, checked."""

    listeners: tuple[ListenerConfig, ...]
    failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS
    authorizer: AuthorizerConfig | None = None
    """The authorizer's settings when `authorizer.class.name` turns it on, else None."""
    limits: Mapping[str, int] = field(default_factory=dict)
    """Connection limits given (`queued.max.request.bytes`, ...), by key."""
    socket_request_max_bytes: int | None = None
    node_id: int | None = None
    data_dir: Path | None = None
    """From `metadata.log.dir`, else the first of `log.dirs` (or `log.dir`)."""
    notes: tuple[str, ...] = ()
    """Lines for the log at start: keys ignored, mechanisms left out."""
    quorum: QuorumConfig | None = None
    """The controller quorum this node belongs to (`controller.quorum.voters`), else None."""
    dynamic_quorum: DynamicQuorum | None = None
    """A dynamic quorum's node (`controller.quorum.bootstrap.servers`, KIP-853), else None."""
    metrics_listen: tuple[str, int] | None = None
    """`metrics.listen=HOST:PORT`: where `/metrics`, `/healthz` and `/readyz` are served."""
    retention: RetentionConfig = field(default_factory=RetentionConfig)
    """Online retention and the snapshot cadence (`metadata.max.retention.*`, ...)."""
    archive: ArchiveConfig | None = None
    """`metadata.log.archive.url` and its interval: where sealed segments are archived."""
    segment_bytes: int | None = None
    """`metadata.log.segment.bytes`: the log's segment size (None: the default)."""
    segment_ms: int | None = None
    """`metadata.log.segment.ms`: how old a segment's first entry gets before a roll."""
    # Broker liveness (docs/brokers.md), Kafka's keys and defaults.
    broker_session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    """`broker.session.timeout.ms`: a broker silent this long is fenced."""
    broker_heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    """`broker.heartbeat.interval.ms`: how often brokers are expected to heartbeat."""
    event_loop: str = "auto"
    """`event.loop`: `auto` (uvloop if installed), `uvloop` or `asyncio` (`event_loop.py`)."""
    broker_bindings: BrokerBindings = NO_BINDINGS
    """`broker.principals`: the broker ids each broker principal may act for."""
    controller_listener_names: tuple[str, ...] = ()
    """`controller.listener.names` (upper-case): where the quorum's own APIs are served."""
    controller_principals: frozenset[str] | None = None
    """`controller.principals`: who may use them (None: this node's own controller principal,
    `api.server.listeners.controller_principals`)."""

    @property
    def in_quorum(self) -> bool:
        """Whether this node is a member of a controller quorum (static or dynamic)."""
        return self.quorum is not None or self.dynamic_quorum is not None

    def controller_listeners(self) -> tuple[ListenerConfig, ...]:
        """The listeners of `controller.listener.names`, in that order."""
        by_name = {listener.name: listener for listener in self.listeners}
        return tuple(by_name[n] for n in self.controller_listener_names if n in by_name)


def server_config(values: Mapping[str, str]) -> ServerConfig:
    """The checked configuration of `values` (a properties file's keys, flags laid over them)."""
    used: set[str] = set()
    notes: list[str] = []

    def take(key: str) -> str | None:
        value = values.get(key)
        if value is None:
            return None
        used.add(key)
        _check_text(key, value)
        return value.strip()

    listeners = listener_configs(values, take, notes)
    delay = _int(take, "connection.failed.authentication.delay.ms", 0, INT32_MAX)
    limits: dict[str, int] = {}
    for spec in SPECS:
        given = _limit(take, spec)
        if given is not None:
            limits[spec.key] = given
    idle = limits.get("connections.max.idle.ms")
    if delay is not None and idle is not None and delay >= idle:
        raise ServerConfigError(
            f"connection.failed.authentication.delay.ms={delay} must be below "
            f"connections.max.idle.ms={idle}; lower the delay"
        )
    node_id = _int(take, "node.id", 0, INT32_MAX)
    broker_id = _int(take, "broker.id", -1, INT32_MAX)
    if node_id is None and broker_id is not None and broker_id >= 0:
        node_id = broker_id
    elif node_id is not None and broker_id is not None and broker_id not in (-1, node_id):
        raise ServerConfigError(
            f"broker.id={broker_id} differs from node.id={node_id}; remove broker.id"
        )
    for key, reason in _IGNORED_WITH_REASON.items():
        if take(key) is not None:
            notes.append(f"{key} is ignored: {reason}")
    jaas = sorted(key for key in values if _JAAS.match(key))
    if jaas:
        used.update(jaas)
        notes.append(
            f"ignoring {', '.join(jaas)}: users and their SCRAM credentials are records in the "
            "log (mlog users scram-set), not JAAS entries"
        )
    dynamic_quorum = _dynamic_quorum(take, node_id)
    quorum = _quorum(take, node_id, dynamic=dynamic_quorum is not None)
    if quorum is not None and dynamic_quorum is not None:
        raise ServerConfigError(
            "controller.quorum.voters and controller.quorum.bootstrap.servers are both set; "
            "set one: the voters (a static quorum) or the bootstrap servers (voters in the log)"
        )
    session_ms, heartbeat_ms = _broker_liveness(take)
    bindings = _broker_bindings(take)
    authorizer = _authorizer(take)
    max_request_bytes = _int(take, "socket.request.max.bytes", 1024, INT32_MAX)
    data_dir = _data_dir(take, notes)
    metrics_listen = _host_port(take, METRICS_LISTEN_KEY)
    retention, archive = _retention(take), _archive(take)
    segment_bytes = _int(take, SEGMENT_BYTES_KEY, MIN_SEGMENT_BYTES, INT32_MAX)
    segment_ms = _optional_long(take, SEGMENT_MS_KEY, 1)
    controller_names = tuple(
        name.strip().upper()
        for name in (take(CONTROLLER_LISTENER_NAMES_KEY) or "").split(",")
        if name.strip()
    )
    controller_principals = _controller_principals(take)
    event_loop = (take(EVENT_LOOP_KEY) or "auto").lower()
    if event_loop not in EVENT_LOOPS:
        raise ServerConfigError(
            f"{EVENT_LOOP_KEY}: {event_loop!r} is not one of {', '.join(EVENT_LOOPS)}"
        )
    unused = sorted(key for key in values if key not in used)
    if unused:
        notes.append(
            f"ignoring {len(unused)} key{'' if len(unused) == 1 else 's'} mlog serve does not "
            f"use: {', '.join(unused)}"
        )
    return ServerConfig(
        listeners=listeners,
        failed_authentication_delay_ms=(
            DEFAULT_FAILED_AUTHENTICATION_DELAY_MS if delay is None else delay
        ),
        authorizer=authorizer,
        limits=limits,
        socket_request_max_bytes=max_request_bytes,
        node_id=node_id,
        data_dir=data_dir,
        notes=tuple(notes),
        quorum=quorum,
        dynamic_quorum=dynamic_quorum,
        metrics_listen=metrics_listen,
        retention=retention,
        archive=archive,
        segment_bytes=segment_bytes,
        segment_ms=segment_ms,
        broker_session_timeout_ms=session_ms,
        broker_heartbeat_interval_ms=heartbeat_ms,
        event_loop=event_loop,
        broker_bindings=bindings,
        controller_listener_names=controller_names,
        controller_principals=controller_principals,
    )


def _controller_principals(take: Take) -> frozenset[str] | None:
    """`controller.principals`, checked; None when not set (the node's own is the default)."""
    text = take(CONTROLLER_PRINCIPALS_KEY)
    if text is None:
        return None
    try:
        principals = parse_principals(CONTROLLER_PRINCIPALS_KEY, text)
    except ValueError as exc:
        raise ServerConfigError(str(exc)) from None
    if not principals:
        raise ServerConfigError(
            f"{CONTROLLER_PRINCIPALS_KEY} is empty; name the controllers' principals "
            "(User:controller;...) or remove the key for this node's own certificate's"
        )
    if ANONYMOUS in principals:
        raise ServerConfigError(
            f"{CONTROLLER_PRINCIPALS_KEY} names {ANONYMOUS}: a peer that did not authenticate "
            "is never a controller; name the controllers' certificate principals"
        )
    return principals


def parse_principals(key: str, text: str) -> frozenset[str]:
    """The principals of a `;`-separated list (`Type:name` each); ValueError naming `key`."""
    principals = {item.strip() for item in text.split(";") if item.strip()}
    for principal in principals:
        kind, sep, name = principal.partition(":")
        if not sep or not kind or not name:
            raise ValueError(
                f"{key}: {principal!r} is not a principal; write Type:name (e.g. User:controller)"
            )
    return frozenset(principals)


def check_controller_listener(config: ServerConfig) -> None:
    """Refuse a quorum member whose controllers could not authenticate each other.

    Kafka requires `controller.listener.names` in KRaft mode; here the listener must also
    authenticate its peers with certificates (SSL, `ssl.client.auth=required`): the quorum's
    APIs and Envelopes are served to the controllers' principals only (`api.server.edge`).
    SASL cannot be that listener's protocol: its users are records in the log, which a new
    quorum's controllers do not have before they have elected a leader.
    """
    if not config.in_quorum:
        return
    if not config.controller_listener_names:
        raise ServerConfigError(
            f"a quorum member needs {CONTROLLER_LISTENER_NAMES_KEY}: add a listener the "
            "controllers talk to each other on, e.g. listeners=...,CONTROLLER://host:9093, "
            "listener.security.protocol.map=...,CONTROLLER:SSL, "
            "controller.listener.names=CONTROLLER (docs/replication.md)"
        )
    names = {listener.name for listener in config.listeners}
    for name in config.controller_listener_names:
        if name not in names:
            raise ServerConfigError(
                f"{CONTROLLER_LISTENER_NAMES_KEY} names {name}, which is not in listeners "
                f"({', '.join(sorted(names))}); add {name}://host:port to listeners"
            )
    for listener in config.controller_listeners():
        protocol = listener.security_protocol
        if protocol in SASL_PROTOCOLS:
            raise ServerConfigError(
                f"controller listener {listener.name} is {protocol}: controllers cannot log in "
                "with SASL, whose users are records in the log a new quorum does not have yet; "
                f"map {listener.name}:SSL and set listener.name.{listener.name.lower()}."
                "ssl.client.auth=required (mTLS)"
            )
        if listener.tls is None or listener.tls.client_auth != "required":
            raise ServerConfigError(
                f"controller listener {listener.name} ({protocol}) does not authenticate its "
                f"peers; map {listener.name}:SSL and set listener.name."
                f"{listener.name.lower()}.ssl.client.auth=required with a truststore (mTLS)"
            )


def _broker_liveness(take: Take) -> tuple[int, int]:
    """`broker.session.timeout.ms` and `broker.heartbeat.interval.ms`, the first the larger."""
    session = _int(take, "broker.session.timeout.ms", 1, INT32_MAX)
    heartbeat = _int(take, "broker.heartbeat.interval.ms", 1, INT32_MAX)
    session = DEFAULT_SESSION_TIMEOUT_MS if session is None else session
    heartbeat = DEFAULT_HEARTBEAT_INTERVAL_MS if heartbeat is None else heartbeat
    if heartbeat >= session:
        raise ServerConfigError(
            f"broker.heartbeat.interval.ms={heartbeat} must be below "
            f"broker.session.timeout.ms={session}, or every broker is fenced between two "
            "heartbeats; lower the interval"
        )
    return session, heartbeat


def _broker_bindings(take: Take) -> BrokerBindings:
    """`broker.principals` (`api.server.broker_bindings`), unset: no bindings."""
    text = take(BROKER_PRINCIPALS_KEY)
    try:
        return NO_BINDINGS if text is None else parse_broker_principals(text)
    except BrokerBindingsError as exc:
        raise ServerConfigError(str(exc)) from None


# --------------------------------------------------------------------------- other keys


def _authorizer(take: Take) -> AuthorizerConfig | None:
    name = take("authorizer.class.name")
    super_text = take("super.users")
    allow_text = take("allow.everyone.if.no.acl.found")
    allow = _bool("allow.everyone.if.no.acl.found", allow_text) if allow_text else False
    super_users: set[str] = set()
    for item in (part.strip() for part in (super_text or "").split(";")):
        if not item:
            continue
        kind, sep, user = item.partition(":")
        if kind != "User" or not sep or not user:
            raise ServerConfigError(
                f"super.users: {item!r} is not a principal User:<name> (several are separated "
                "by ';', e.g. User:admin;User:ops)"
            )
        super_users.add(item)
    if not name:
        return None
    if name != STANDARD_AUTHORIZER:
        raise ServerConfigError(
            f"authorizer.class.name={name} is not supported; use {STANDARD_AUTHORIZER} (or "
            "leave it empty for no authorization)"
        )
    return AuthorizerConfig(
        super_users=frozenset(super_users), allow_everyone_if_no_acl_found=allow
    )


QUORUM_KEYS = (
    "controller.quorum.voters",
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "controller.quorum.election.backoff.max.ms",
    "controller.quorum.append.linger.ms",
    "controller.quorum.request.timeout.ms",
    "controller.quorum.retry.backoff.ms",
)
"""The controller quorum's keys (Kafka's names and defaults, docs/replication.md)."""


BOOTSTRAP_SERVERS_KEY = "controller.quorum.bootstrap.servers"
"""KIP-853: where a node of a dynamic quorum finds the others (`host:port,...`, no ids)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DynamicQuorum:
    """A node of a dynamic quorum: its voters come from the log (KIP-853).

    A node whose log holds no voter set yet finds the others through
    `controller.quorum.bootstrap.servers`.
    """

    node_id: int
    bootstrap_servers: tuple[tuple[str, int], ...]
    timers: Mapping[str, str] = field(default_factory=dict)
    """The `controller.quorum.*` timer keys given."""

    def quorum_config(self, voters: Mapping[int, VoterAddress]) -> QuorumConfig:
        """The node's quorum config once its voters are known (from its log or the others)."""
        return QuorumConfig(
            node_id=self.node_id,
            voters=frozenset(voters),
            addresses=dict(voters),
            **{_TIMER_FIELDS[key]: int(value) for key, value in self.timers.items()},
        )


_TIMER_FIELDS = {
    "controller.quorum.election.timeout.ms": "election_timeout_ms",
    "controller.quorum.fetch.timeout.ms": "fetch_timeout_ms",
    "controller.quorum.election.backoff.max.ms": "election_backoff_max_ms",
    "controller.quorum.append.linger.ms": "append_linger_ms",
    "controller.quorum.request.timeout.ms": "request_timeout_ms",
    "controller.quorum.retry.backoff.ms": "retry_backoff_ms",
}


def parse_bootstrap_servers(text: str) -> tuple[tuple[str, int], ...]:
    """`host:port,host:port` (an IPv6 host in brackets); `ServerConfigError` otherwise."""
    servers: list[tuple[str, int]] = []
    for raw in text.split(","):
        item = raw.strip()
        match = _HOST_PORT.match(item)
        if match is None or not 1 <= int(match["port"]) <= MAX_PORT:
            raise ServerConfigError(
                f"{BOOTSTRAP_SERVERS_KEY}: {item[:60]!r} is not host:port; write it like "
                "controller1:9093,controller2:9093"
            )
        servers.append((match["host"].strip("[]"), int(match["port"])))
    return tuple(servers)


def _dynamic_quorum(take: Take, node_id: int | None) -> DynamicQuorum | None:
    """The dynamic quorum of `controller.quorum.bootstrap.servers`, None without it."""
    text = take(BOOTSTRAP_SERVERS_KEY)
    if text is None:
        return None
    if node_id is None:
        raise ServerConfigError(
            f"{BOOTSTRAP_SERVERS_KEY} needs node.id: set node.id to this controller's id"
        )
    servers = parse_bootstrap_servers(text)
    timers: dict[str, str] = {}
    for key in _TIMER_FIELDS:
        value = take(key)
        if value is None:
            continue
        if not value.strip().isdigit():
            raise ServerConfigError(f"{key} must be a whole number of ms, got {value[:40]!r}")
        timers[key] = value.strip()
    config = DynamicQuorum(node_id=node_id, bootstrap_servers=servers, timers=timers)
    try:
        config.quorum_config({node_id: VoterAddress(host=servers[0][0], port=servers[0][1])})
    except RaftConfigError as exc:
        raise ServerConfigError(str(exc)) from None
    return config


def _quorum(take: Take, node_id: int | None, *, dynamic: bool = False) -> QuorumConfig | None:
    """The quorum of `controller.quorum.voters` (with its timers), None without it."""
    given = {key: value for key in QUORUM_KEYS if (value := take(key)) is not None}
    if "controller.quorum.voters" not in given:
        if given and not dynamic:
            raise ServerConfigError(
                f"{', '.join(given)} set without controller.quorum.voters; name the voters "
                "(1@host:port,2@host:port,3@host:port) or remove the quorum keys"
            )
        return None
    if node_id is None:
        raise ServerConfigError(
            "controller.quorum.voters needs node.id: set node.id to this controller's id"
        )
    try:
        return QuorumConfig.from_properties({**given, "node.id": str(node_id)})
    except RaftConfigError as exc:
        raise ServerConfigError(str(exc)) from None


def _retention(take: Take) -> RetentionConfig:
    """`metadata.max.retention.*` and the snapshot cadence's keys."""
    return RetentionConfig(
        max_bytes=_long(take, MAX_RETENTION_BYTES_KEY, -1),
        max_ms=_long(take, MAX_RETENTION_MS_KEY, -1),
        snapshot_bytes=_optional_long(take, SNAPSHOT_BYTES_KEY, 1),
        snapshot_interval_ms=_optional_long(take, SNAPSHOT_INTERVAL_KEY, 0),
    )


def _archive(take: Take) -> ArchiveConfig | None:
    """`metadata.log.archive.url` (checked, not contacted) and its interval; None without it."""
    url = take(ARCHIVE_URL_KEY)
    interval = _int(take, ARCHIVE_INTERVAL_KEY, 100, INT32_MAX)
    if url is None or not url:
        if interval is not None:
            raise ServerConfigError(
                f"{ARCHIVE_INTERVAL_KEY} is set without {ARCHIVE_URL_KEY}; set the archive's "
                "URL (file:///var/lib/mlog-archive, s3://BUCKET/PREFIX) or remove the interval"
            )
        return None
    try:
        location = ArchiveLocation.open(url)
    except ArchiveError as exc:
        raise ServerConfigError(f"{ARCHIVE_URL_KEY}: {exc}") from None
    if location.url.startswith("memory://"):
        # Retention would remove segments held only in this process's memory.
        raise ServerConfigError(
            f"{ARCHIVE_URL_KEY}: {url!r} keeps objects in this process's memory only, lost "
            "when it stops; give a lasting store (file:///var/lib/mlog-archive, s3://BUCKET/...)"
        )
    if interval is None:
        return ArchiveConfig(url=url)
    return ArchiveConfig(url=url, interval_ms=interval)


def _data_dir(take: Take, notes: list[str]) -> Path | None:
    metadata_dir = take("metadata.log.dir")
    dirs = [d.strip() for d in (take("log.dirs") or "").split(",") if d.strip()]
    single = take("log.dir")
    if metadata_dir:
        return Path(metadata_dir)
    if dirs:
        if len(dirs) > 1:
            notes.append(f"log.dirs names {len(dirs)} directories; the data directory is {dirs[0]}")
        return Path(dirs[0])
    return Path(single) if single else None


METRICS_LISTEN_KEY = "metrics.listen"
SEGMENT_BYTES_KEY = "metadata.log.segment.bytes"
SEGMENT_MS_KEY = "metadata.log.segment.ms"
LONG_MAX = 2**63 - 1
_HOST_PORT = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-_]*):(?P<port>\d{1,5})$")


def _host_port(take: Take, key: str) -> tuple[str, int] | None:
    text = take(key)
    if not text:
        return None
    match = _HOST_PORT.match(text)
    if match is None or int(match["port"]) > MAX_PORT:
        raise ServerConfigError(
            f"{key}: {text!r} is not HOST:PORT (e.g. 127.0.0.1:9308, an IPv6 host in brackets, "
            "port 0..65535)"
        )
    return match["host"].strip("[]"), int(match["port"])


def _long(take: Take, key: str, default: int) -> int:
    """A Kafka LONG key where -1 means "no bound"."""
    value = _int(take, key, -1, LONG_MAX)
    return default if value is None else value


def _optional_long(take: Take, key: str, low: int) -> int | None:
    return _int(take, key, low, LONG_MAX)


def _limit(take: Take, spec: LimitSpec) -> int | None:
    text = take(spec.key)
    if text is None:
        return None
    try:
        return spec.parse(text)
    except ValueError as exc:
        raise ServerConfigError(f"{spec.key}: {exc}") from None


def _int(take: Take, key: str, low: int, high: int) -> int | None:
    text = take(key)
    if text is None:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ServerConfigError(f"{key}: {text!r} is not an integer") from None
    if not low <= value <= high:
        raise ServerConfigError(f"{key}: {value} is outside {low}..{high}")
    return value


def _bool(key: str, text: str) -> bool:
    lowered = text.lower()
    if lowered not in ("true", "false"):
        raise ServerConfigError(f"{key}: {text!r} is not true or false")
    return lowered == "true"


def _check_text(key: str, value: str) -> None:
    if _CONTROL.search(value):
        raise ServerConfigError(f"{key}: the value holds a control character; remove it")
