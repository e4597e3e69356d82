"""`mlog serve`: run the metadata service on its listeners (Kafka admin protocol).

`--config server.properties` takes Kafka's server keys (api/server/config.py); flags override
the file: `--override KEY=VALUE` any key (as Kafka's `kafka-server-start.sh --override`), and
`--listen`, `--advertised-listener`, `--node-id`, `--socket-request-max-bytes` and the limits'
flags their keys. The limits' `MLOG_*` variables sit between the flags and the file.

The server, the protocol and kio (the Kafka schemas) are imported when `mlog serve` runs, not
when the parser is built: every other command starts without them.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import logging
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_OK, CliError, add_global_options
from api.cli.created_paths import removed_on_failure
from api.cli.interrupts import EXIT_INTERRUPTED
from api.server.limits import SPECS, LimitSpec, raise_open_file_limit, resolve_limits
from api.targets import open_service
from metadata_log.private_files import create_private, loose_paths, make_dirs
from records.fields import INT32_MAX
from records.uuids import Uuid

if TYPE_CHECKING:
    from api.raft.core.config import QuorumConfig, VoterAddress
    from api.raft.node import QuorumNode
    from api.security.client_config import ClientSecurity
    from api.server.config import DynamicQuorum, ServerConfig
    from api.server.event_loop import LoopChoice
    from api.server.listeners import ServerListener
    from api.server.server import MetadataServer
    from api.service.replicated import ReplicatedService
    from api.service.service import MetadataService
    from api.service.settings import Settings

DEFAULT_LISTEN = "127.0.0.1:9092"

DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024
"""Kafka's `socket.request.max.bytes` default (100 MiB): `--socket-request-max-bytes`'s default.

The same value as `api.protocol.connection.DEFAULT_MAX_REQUEST_BYTES` (a test checks it),
spelled here so that building the parser does not import the protocol and kio.
"""

META_PROPERTIES = "meta.properties"
"""The data directory's identity file (as Kafka's): `cluster.id` and `node.id`."""

_HOST_PORT = re.compile(r"^(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.\-_]+):(?P<port>\d{1,5})$")


def host_port(text: str) -> tuple[str, int]:
    """`HOST:PORT` (an IPv6 host in brackets) -> (host, port); port 0 = any free port."""
    match = _HOST_PORT.match(text)
    if match is None or int(match["port"]) > 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:9092; port 0..65535)"
        )
    return match["host"].strip("[]"), int(match["port"])


def _node_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a node id (an integer)") from None
    if not 0 <= value <= INT32_MAX:
        raise argparse.ArgumentTypeError(f"node id {value} is outside 0..2147483647")
    return value


MIN_REQUEST_BYTES = 1024
"""The smallest `--socket-request-max-bytes` taken: below it not even a CreateTopics fits."""


def _max_request_bytes(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a byte count (an integer, e.g. {DEFAULT_MAX_REQUEST_BYTES})"
        ) from None
    if not MIN_REQUEST_BYTES <= value <= INT32_MAX:
        raise argparse.ArgumentTypeError(
            f"{value} is outside {MIN_REQUEST_BYTES}..2147483647 (Kafka's default is "
            f"{DEFAULT_MAX_REQUEST_BYTES}, 100 MiB)"
        )
    return value


def _limit(spec: LimitSpec) -> Any:
    def parse(text: str) -> int:
        try:
            return spec.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{exc} ({spec.key})") from None

    return parse


_LIMIT_HELP = {
    "queued.max.request.bytes": "request bytes all connections together may hold while "
    "reading (a frame counts at its claimed size); a connection past it is closed "
    "(default 536870912, 512 MiB; at least --socket-request-max-bytes)",
    "connections.max.idle.ms": "close a connection that completes no request for this long, "
    "partial frames included (default 600000, 10 minutes)",
    "max.connections": "connections open at once; more are closed on arrival (default: the "
    "open-file limit less 256)",
    "max.connections.per.ip": "connections open at once from one address; more are closed "
    "on arrival (default 2147483647)",
    "sasl.server.max.receive.size": "largest frame taken before a SASL login ends (default 524288)",
    "sasl.server.authentication.timeout.ms": "close a connection whose SASL login has not "
    "ended this long after it arrived (default 10000; not a Kafka key)",
}


def add_verbs(serve: argparse.ArgumentParser) -> None:
    """The flags of `mlog serve`, on its parser."""
    add_global_options(serve)
    serve.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="server config file (Java properties, Kafka's keys: listeners, "
        "listener.security.protocol.map, sasl.enabled.mechanisms, ssl.*, super.users, ...); "
        "flags override it",
    )
    serve.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set one config key over the file (repeatable), as kafka-server-start.sh's",
    )
    serve.add_argument(
        "--listen",
        type=host_port,
        default=None,
        metavar="HOST:PORT",
        help=f"one PLAINTEXT listener there instead of the config's listeners (default "
        f"{DEFAULT_LISTEN} without a config; port 0 picks a free one)",
    )
    serve.add_argument(
        "--advertised-listener",
        type=host_port,
        metavar="HOST:PORT",
        help="address clients are told to use (Kafka's advertised.listeners; default the "
        "listener's; with several listeners set advertised.listeners in the config)",
    )
    serve.add_argument(
        "--metrics-listen",
        type=host_port,
        default=None,
        metavar="HOST:PORT",
        help="serve /metrics (Prometheus), /healthz and /readyz over HTTP there (the "
        "config's metrics.listen; port 0 picks a free one; default: not served)",
    )
    serve.add_argument(
        "--node-id",
        type=_node_id,
        default=None,
        help="this server's node id in Metadata answers (default from meta.properties, else 0)",
    )
    serve.add_argument(
        "--socket-request-max-bytes",
        type=_max_request_bytes,
        default=None,
        metavar="BYTES",
        help="largest request frame taken; a connection sending a larger one is closed "
        f"(Kafka's socket.request.max.bytes; default {DEFAULT_MAX_REQUEST_BYTES}, 100 MiB)",
    )
    for spec in SPECS:
        serve.add_argument(
            spec.flag,
            type=_limit(spec),
            default=None,
            dest=spec.key,
            metavar=spec.unit.upper() or "N",
            help=f"{_LIMIT_HELP[spec.key]} (Kafka's {spec.key}; env {spec.env})",
        )
    serve.set_defaults(handler=cmd_serve)


def cluster_identity(
    data_dir: Path, node_id: int | None, *, cluster_id: str | None = None
) -> tuple[str, int]:
    """The data directory's cluster id and node id, created on first use.

    `meta.properties` holds `cluster.id` (a topic-id style 22-char id) and `node.id`; a
    `--node-id` different from the stored one is refused, as Kafka refuses it.
    """
    path = data_dir / META_PROPERTIES
    values: dict[str, str] = {}
    if path.exists():
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if not sep:
                raise CliError(
                    f"{path}:{number}: expected key=value, got {line!r}; fix or remove it"
                )
            values[key.strip()] = value.strip()
        try:
            Uuid.parse(values["cluster.id"])
            stored = int(values["node.id"])
        except (KeyError, ValueError):
            raise CliError(
                f"{path} must hold cluster.id (a 22-character id) and node.id (an integer); "
                "fix or remove it"
            ) from None
        if node_id is not None and node_id != stored:
            raise CliError(
                f"node id {node_id} (--node-id or node.id in the config) differs from "
                f"node.id={stored} in {path}; a data directory keeps its node id"
            )
        return values["cluster.id"], stored
    cluster_id = cluster_id or str(Uuid.random())
    chosen = 0 if node_id is None else node_id
    make_dirs(data_dir)
    tmp = path.with_suffix(".tmp")
    create_private(tmp, f"cluster.id={cluster_id}\nnode.id={chosen}\n".encode())
    tmp.replace(path)
    return cluster_id, chosen


DIRECTORY_ID_KEY = "directory.id"
"""The data directory's id in `meta.properties` (Kafka's key; KIP-853's voter directory id)."""


def directory_id(data_dir: Path, *, create: str | None = None) -> str:
    """The data directory's id from `meta.properties` ("" if it has none and no `create`).

    `mlog quorum format` writes it (`create`: a Kafka Uuid's text): a voter of a dynamic
    quorum is known by its node id and this id, so a wiped directory formatted again is
    another voter.
    """
    path = data_dir / META_PROPERTIES
    if not path.exists():
        return ""
    text = path.read_text(encoding="utf-8")
    for raw in text.splitlines():
        key, sep, value = raw.strip().partition("=")
        if sep and key.strip() == DIRECTORY_ID_KEY:
            try:
                return str(Uuid.parse(value.strip()))
            except ValueError:
                raise CliError(
                    f"{path}: directory.id={value.strip()[:40]!r} is not a Kafka Uuid; fix it"
                ) from None
    if create is None:
        return ""
    made = str(Uuid.parse(create))
    tmp = path.with_suffix(".tmp")
    body = text if text.endswith("\n") or not text else text + "\n"
    create_private(tmp, f"{body}{DIRECTORY_ID_KEY}={made}\n".encode())
    tmp.replace(path)
    return made


def cmd_serve(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Serve until SIGTERM (exit 0 after a clean shutdown) or Ctrl-C (the same shutdown, 130)."""
    from api.server.server_log import server_log

    # One timestamped line per start, stop and admin change, on stderr, written by a thread;
    # the service's and the log's own lines (snapshots, retention, broker sessions, segments,
    # recovery) in the same form and stream.
    also = [logging.getLogger(name) for name in SERVING_LOGGERS]
    with server_log(logging.getLogger("api.server"), sys.stderr, also=also), ExitStack() as guards:
        return _run_server(args, settings, guards)


SERVING_LOGGERS = ("api.service", "metadata_log", "replay")
"""The loggers whose lines a serving process writes beside its own (`api.server`)."""


def _run_server(args: argparse.Namespace, settings: Settings, guards: ExitStack) -> int:
    import asyncio

    from api.service.gc_policy import image_frozen_as_loaded

    # The whole start up to the loaded image runs with the collector off, and what it made
    # (modules, the image) is frozen at its end: no collection walks a fresh image.
    with image_frozen_as_loaded():
        started = _start_server(args, settings, guards)
    server, loop = started.server, started.loop
    quorum = server.quorum_node
    logging.getLogger("api.server").info(
        "event loop: %s (%s)", loop.name, "event.loop=" + started.config.event_loop
    )
    try:
        with asyncio.Runner(loop_factory=loop.factory) as runner:
            stopped_by = runner.run(_serve(server, started.keep))
    except OSError as exc:
        server.service.close()
        bound = [(item.host, item.port) for item in started.listeners]
        if started.config.metrics_listen is not None:
            bound.append(started.config.metrics_listen)
        where = ", ".join(f"{host or '*'}:{port}" for host, port in bound)
        raise CliError(f"cannot listen on {where}: {exc.strerror or exc}") from None
    if quorum is not None and quorum.failed is not None:
        # `failed` already says what to do (restart): the line says it once.
        raise CliError(f"the quorum node stopped: {quorum.failed}")
    # SIGTERM is how a service manager stops it: exit 0. SIGINT is a Ctrl-C: 130, as every
    # command, after the same clean shutdown (its log line already said why it stopped).
    return EXIT_INTERRUPTED if stopped_by == "SIGINT" else EXIT_OK


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Started:
    """A server over its loaded image, not yet listening, and what serving it needs."""

    server: MetadataServer
    loop: LoopChoice
    config: ServerConfig
    listeners: list[ServerListener]
    keep: Callable[[], None]
    """Keeps the data directory once it serves (`removed_on_failure`)."""


def _start_server(args: argparse.Namespace, settings: Settings, guards: ExitStack) -> _Started:
    """The configuration read, the image loaded (the service opened), the server made."""
    from api.server.config import server_config
    from api.server.event_loop import EventLoopUnavailable, choose_loop
    from api.server.listeners import server_listeners
    from api.server.server import MetadataServer
    from api.service.archiving import serving_archive

    values = config_values(args)
    config = server_config(values)
    principals = _controller_principals(config)
    try:
        loop = choose_loop(config.event_loop, tls=any(item.uses_tls for item in config.listeners))
    except EventLoopUnavailable as exc:
        raise CliError(str(exc)) from None
    server_logger = logging.getLogger("api.server")
    for note in config.notes:
        server_logger.warning("%s", note)
    if (
        config.data_dir is not None
        and args.data_dir is None
        and not os.environ.get("MLOG_DATA_DIR")
    ):
        settings = dataclasses.replace(settings, data_dir=config.data_dir)
    settings = _with_log_keys(settings, config)
    # A start that fails removes the data directory it made; one that served keeps it.
    keep = guards.enter_context(removed_on_failure(settings.data_dir))
    max_request_bytes = (
        args.socket_request_max_bytes
        or config.socket_request_max_bytes
        or DEFAULT_MAX_REQUEST_BYTES
    )
    limits = resolve_limits(
        _limit_flags(args, config, os.environ), os.environ, max_request_bytes=max_request_bytes
    )
    listeners = server_listeners(config)
    raise_open_file_limit()  # each connection is a file; the default limit is often 1024
    if config.in_quorum and not (settings.data_dir / META_PROPERTIES).exists():
        raise CliError(
            f"{settings.data_dir} is not formatted for the quorum: run `mlog quorum format "
            "--config FILE` (a new cluster's voter) or `mlog quorum format --rejoin --config "
            "FILE` (a voter whose data directory was lost, or an observer) first"
        )
    warn_loose_files(settings.data_dir, server_logger)
    cluster_id, node_id = cluster_identity(settings.data_dir, config.node_id)
    quorum = None
    if config.dynamic_quorum is not None:
        service, quorum = _dynamic_quorum_node(config.dynamic_quorum, settings, values, cluster_id)
    elif config.quorum is None:
        from api.service.snapshot_runners import ForkedRunner

        service = open_service(settings, runner=ForkedRunner())
    else:
        service, quorum = _quorum_node(config.quorum, settings, values, cluster_id)
    server = MetadataServer(
        service,
        listeners=listeners,
        node_id=node_id,
        cluster_id=cluster_id,
        max_request_bytes=max_request_bytes,
        limits=limits,
        failed_authentication_delay_ms=config.failed_authentication_delay_ms,
        authorizer=config.authorizer,
        quorum_node=quorum,
        quorum_listeners=config.controller_listener_names,
        controller_principals=principals,
        metrics_listen=config.metrics_listen,
        broker_session_timeout_ms=config.broker_session_timeout_ms,
        broker_heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
        controller_security=_controller_security(values) if quorum is not None else None,
        broker_bindings=config.broker_bindings,
        archiving=serving_archive(config.archive, settings, cluster_id, service.retention),
    )
    return _Started(server=server, loop=loop, config=config, listeners=listeners, keep=keep)


def _controller_principals(config: ServerConfig) -> frozenset[str] | None:
    """Who may use a quorum member's own APIs (None: not a quorum member).

    A member whose controller listener does not authenticate its peers stops here, in one
    line naming the key to set (`check_controller_listener`).
    """
    from api.server.config import check_controller_listener
    from api.server.listeners import controller_principals

    check_controller_listener(config)
    return controller_principals(config) if config.in_quorum else None


def _with_log_keys(settings: Settings, config: ServerConfig) -> Settings:
    """The settings with the server file's log keys: segments, snapshot cadence, retention."""
    log = settings.log
    if config.segment_bytes is not None:
        log = dataclasses.replace(log, segment_bytes=config.segment_bytes)
    if config.segment_ms is not None:
        log = dataclasses.replace(log, segment_ms=config.segment_ms)
    return dataclasses.replace(settings, log=log, retention=config.retention)


def warn_loose_files(data_dir: Path, server_logger: logging.Logger) -> None:
    """One warning if the data directory holds files others may read (the credentials).

    New files are 0600 and directories 0700 (`metadata_log.private_files`); older ones are
    not changed behind the operator's back: the warning says how to close them.
    """
    loose = loose_paths(data_dir)
    if loose:
        names = ", ".join(str(p) for p in loose[:3]) + (", ..." if len(loose) > 3 else "")
        server_logger.warning(
            "%s holds files or directories group or others may read (%s); they hold the "
            "SCRAM credentials and ACLs: chmod -R go-rwx %s",
            data_dir,
            names,
            data_dir,
        )


SOLE_VOTER_WITHOUT_STATE = (
    "node {node} is the quorum's only voter and has no quorum-state: there is no other voter "
    "to catch up from, so it could never vote again (it may have led an epoch it no longer "
    "knows). Restore quorum-state from a backup of this data directory, or, for a new "
    "cluster, run `mlog quorum format` on an empty data directory"
)
"""Why a sole voter without its quorum-state does not start (it would wait for ever)."""


BOOTSTRAP_WAIT_S = 30.0
"""How long a new node of a dynamic quorum tries its bootstrap servers for the voters."""


def _dynamic_quorum_node(
    dynamic: DynamicQuorum, settings: Settings, values: Mapping[str, str], cluster_id: str
) -> tuple[MetadataService, QuorumNode]:
    """The service and quorum node of a dynamic quorum's member (KIP-853).

    Its voters are the latest VotersRecord of its log; a node whose log holds none yet (a
    new controller formatted with --no-initial-controllers) asks its bootstrap servers for
    them (their Metadata names every voter) and starts as an observer: it fetches the log,
    voters included, until `mlog quorum add-controller` makes it a voter.
    """
    from api.raft.core.config import VoterAddress
    from api.raft.core.voters import VoterSet
    from api.raft.voter_blocks import voter_history
    from api.service.replicated import ReplicatedService
    from api.service.snapshot_runners import ForkedRunner
    from api.service.snapshots import open_snapshotter

    make_dirs(settings.data_dir)
    service = ReplicatedService.open_replicated(
        settings.log_dir,
        config=settings.log,
        snapshots=open_snapshotter(settings, runner=ForkedRunner()),
    )
    try:
        latest = voter_history(service.replica_log, VoterSet()).latest
        voters = {v.id: VoterAddress(host=v.host, port=v.port) for v in latest.voters}
        if not voters:
            voters = asyncio.run(
                _bootstrap_voters(dynamic.bootstrap_servers, _controller_security(values))
            )
        return service, _make_node(
            service, dynamic.quorum_config(voters), settings, values, cluster_id, dynamic=True
        )
    except BaseException:
        service.close()
        raise


async def _bootstrap_voters(
    servers: Sequence[tuple[str, int]], security: ClientSecurity | None
) -> dict[int, VoterAddress]:
    """The voters a dynamic quorum's nodes name (Metadata), asked of the bootstrap servers."""
    from api.client.admin import AdminClient
    from api.client.connection import ClientError
    from api.raft.core.config import VoterAddress

    loop = asyncio.get_running_loop()
    deadline = loop.time() + BOOTSTRAP_WAIT_S
    reasons: dict[str, str] = {}
    while True:
        for host, port in servers:
            address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
            try:
                async with asyncio.timeout(5.0):
                    client = await AdminClient.connect(
                        address, client_id="mlog-bootstrap", security=security
                    )
                try:
                    answer = await client.metadata([])
                finally:
                    await client.close()
            except (ClientError, OSError, TimeoutError) as exc:
                reasons[address] = str(exc) or type(exc).__name__
                continue
            voters = {
                int(b.node_id): VoterAddress(host=str(b.host), port=int(b.port))
                for b in answer.brokers
            }
            if voters:
                return voters
            reasons[address] = "it names no voters"
        if loop.time() >= deadline:
            said = "; ".join(f"{a}: {r}" for a, r in reasons.items())
            raise CliError(
                "no controller.quorum.bootstrap.servers answered with the quorum's voters "
                f"within {BOOTSTRAP_WAIT_S:.0f} s ({said}); start the quorum's voters first"
            )
        await asyncio.sleep(0.5)


def _quorum_node(
    quorum: QuorumConfig, settings: Settings, values: Mapping[str, str], cluster_id: str
) -> tuple[MetadataService, QuorumNode]:
    """The service and the quorum node of a controller quorum's member.

    The links to the other voters are secured as `controller.listener.names` says (PLAINTEXT
    without it). A data directory without `quorum-state` is a voter that lost its state (or
    was never formatted): it catches up as an observer before it votes (docs/replication.md).
    """
    from api.raft.quorum_state_file import QUORUM_STATE_NAME
    from api.service.replicated import ReplicatedService
    from api.service.snapshot_runners import ForkedRunner
    from api.service.snapshots import open_snapshotter

    _controller_security(values)  # a bad controller listener config stops here, before any I/O
    if quorum.is_voter and not (settings.data_dir / QUORUM_STATE_NAME).exists():
        if quorum.voters == {quorum.node_id}:
            raise CliError(SOLE_VOTER_WITHOUT_STATE.format(node=quorum.node_id))
        logging.getLogger("api.server").warning(
            "%s has no quorum-state: node %d catches up from the leader before it votes; "
            "a new cluster's voters are formatted first (mlog quorum format)",
            settings.data_dir,
            quorum.node_id,
        )
    make_dirs(settings.data_dir)
    service = ReplicatedService.open_replicated(
        settings.log_dir,
        config=settings.log,
        snapshots=open_snapshotter(settings, runner=ForkedRunner()),
    )
    try:
        node = _make_node(service, quorum, settings, values, cluster_id, dynamic=False)
    except BaseException:
        service.close()
        raise
    return service, node


def _make_node(
    service: ReplicatedService,
    quorum: QuorumConfig,
    settings: Settings,
    values: Mapping[str, str],
    cluster_id: str,
    *,
    dynamic: bool,
) -> QuorumNode:
    """The quorum node over an opened service, linked to the other voters."""
    from api.raft.node import QuorumNode
    from api.raft.transport.links import QuorumLinks

    security = _controller_security(values)
    return QuorumNode(
        service,
        quorum,
        state_dir=settings.data_dir,
        transport=lambda deliver: QuorumLinks(
            quorum, on_response=deliver, security=security, cluster_id=cluster_id
        ),
        dynamic=dynamic,
        directory_id=directory_id(settings.data_dir),
    )


def _controller_security(values: Mapping[str, str]) -> ClientSecurity | None:
    """How this controller connects to the others (PLAINTEXT without controller.listener.names)."""
    from api.raft.transport.links import controller_client_security

    if not values.get("controller.listener.names"):
        return None
    return controller_client_security(values)


def file_values(args: argparse.Namespace) -> dict[str, str]:
    """`--config FILE`'s keys with each `--override KEY=VALUE` laid over them."""
    from api.security.properties import load_properties

    values = load_properties(args.config) if args.config is not None else {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--override {item!r} is not KEY=VALUE (e.g. --override node.id=1)")
        values[key.strip()] = value
    return values


def config_values(args: argparse.Namespace) -> dict[str, str]:
    """The config file's keys with `--override` and the flags that name a key laid over them."""
    from api.server.config import DEFAULT_LISTENERS, format_listener, parse_listeners

    values = file_values(args)
    if args.listen is not None:
        values["listeners"] = format_listener("PLAINTEXT", *args.listen)
        values["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT"
        values.pop("advertised.listeners", None)
    if args.advertised_listener is not None:
        bound = parse_listeners("listeners", values.get("listeners", DEFAULT_LISTENERS))
        if len(bound) != 1:
            raise CliError(
                "--advertised-listener applies to one listener, and the config has "
                f"{len(bound)}; set advertised.listeners in the config instead"
            )
        values["advertised.listeners"] = format_listener(bound[0][0], *args.advertised_listener)
    if args.node_id is not None:
        values["node.id"] = str(args.node_id)
    if getattr(args, "metrics_listen", None) is not None:
        host, port = args.metrics_listen
        values["metrics.listen"] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return values


def _limit_flags(
    args: argparse.Namespace, config: ServerConfig, env: Mapping[str, str]
) -> dict[str, int | None]:
    """Per limit: its flag, else (with no `MLOG_*` variable for it) the config file's value."""
    flags: dict[str, int | None] = {}
    for spec in SPECS:
        value = getattr(args, spec.key)
        if value is None and not env.get(spec.env):
            value = config.limits.get(spec.key)
        flags[spec.key] = value
    return flags


async def _serve(server: MetadataServer, keep: Callable[[], None]) -> str | None:
    """Serve until stopped; the signal that stopped it (None: a failure stopped it).

    `keep` is called once it serves: from then on its data directory holds acknowledged
    writes, and stays whatever follows.
    """
    import asyncio
    import signal

    from api.server.heap import return_free_memory
    from api.service.gc_policy import freeze_loaded_image
    from api.service.interpreter_lock import share_the_interpreter_lock

    await server.start()
    keep()
    # At once: the start's last line says the server serves, and whoever reads it may stop it
    # (SIGTERM's default action would end it without the clean shutdown).
    loop = asyncio.get_running_loop()
    stopped_by: list[str] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _stop, server, signum.name, stopped_by)
    node = server.quorum_node
    if node is not None:
        # A quorum node whose log failed stops, as KRaft's controllers do: the others elect a
        # leader at once, and a restart recovers the log (the exit code says it failed).
        node.on_failure = lambda reason: _stop(server, "the quorum node failed")
    # A snapshot's load leaves the per-broker index to its first reader (a fence): it is
    # built now, on a thread while the loop serves (`replay/broker_index.py`); a fence
    # meanwhile waits for it.
    await asyncio.to_thread(server.service.image.topics.replica_index.map)
    snapshots = server.service.snapshots
    if snapshots is not None:
        # Its first snapshot comes under load (docs/snapshots.md): the store's imports go
        # first, but after the server answers (they were half of a start's CPU before it
        # did) and on the snapshots' thread, while the loop serves; before the freeze below.
        await asyncio.wrap_future(snapshots.warm_up())
    # What the load freed (the rows or blocks it built the image from) back to the system,
    # not kept by glibc for the server's life (`api/server/heap.py`).
    await asyncio.to_thread(return_free_memory)
    # What was made since the image was frozen (the listeners, the store's modules) lives as
    # long as the server too: out of the cyclic collector's view with it, so a full
    # collection scans only what requests allocate since (a stall of tens of ms otherwise
    # shows in p99 latency), and the young generation collected less often
    # (`api/service/gc_policy.py`). The collection first walks only what was made since that
    # freeze (the image is not in its view): a few milliseconds, whatever the image's size.
    gc.collect()
    freeze_loaded_image()
    share_the_interpreter_lock()  # the threads beside the loop (api/service/interpreter_lock)
    await server.wait_stopped()
    return stopped_by[0] if stopped_by else None


def _stop(server: MetadataServer, name: str, stopped_by: list[str] | None = None) -> None:
    import asyncio

    if stopped_by is not None:
        stopped_by.append(name)
    asyncio.get_running_loop().create_task(server.stop(name))
