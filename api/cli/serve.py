"""`mlog serve`: run the metadata service on a TCP listener (Kafka admin protocol).

The server, the protocol and kio (the Kafka schemas) are imported when `mlog serve` runs, not
when the parser is built: every other command starts without them.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_OK, CliError, add_global_options
from api.cli.targets import open_service
from api.server.limits import SPECS, LimitSpec, raise_open_file_limit, resolve_limits
from records.uuids import Uuid

if TYPE_CHECKING:
    from api.server.server import MetadataServer
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
    if not 0 <= value <= 2**31 - 1:
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
    if not MIN_REQUEST_BYTES <= value <= 2**31 - 1:
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
}


def add_verbs(serve: argparse.ArgumentParser) -> None:
    """The flags of `mlog serve`, on its parser."""
    add_global_options(serve)
    serve.add_argument(
        "--listen",
        type=host_port,
        default=host_port(DEFAULT_LISTEN),
        metavar="HOST:PORT",
        help=f"address to listen on (default {DEFAULT_LISTEN}; port 0 picks a free one)",
    )
    serve.add_argument(
        "--advertised-listener",
        type=host_port,
        metavar="HOST:PORT",
        help="address clients are told to use (Kafka's advertised.listeners; default --listen)",
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
        default=DEFAULT_MAX_REQUEST_BYTES,
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


def cluster_identity(data_dir: Path, node_id: int | None) -> tuple[str, int]:
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
                f"--node-id {node_id} differs from node.id={stored} in {path}; "
                "a data directory keeps its node id"
            )
        return values["cluster.id"], stored
    cluster_id = str(Uuid.random())
    chosen = 0 if node_id is None else node_id
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"cluster.id={cluster_id}\nnode.id={chosen}\n", encoding="utf-8")
    tmp.replace(path)
    return cluster_id, chosen


def cmd_serve(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Serve until SIGTERM or SIGINT; exit 0 after a clean shutdown."""
    from api.server.server_log import server_log

    # One timestamped line per start, stop and admin change, on stderr, written by a thread.
    with server_log(logging.getLogger("api.server"), sys.stderr):
        return _run_server(args, settings)


def _run_server(args: argparse.Namespace, settings: Settings) -> int:
    import asyncio

    from api.server.server import MetadataServer

    limits = resolve_limits(
        {spec.key: getattr(args, spec.key) for spec in SPECS},
        os.environ,
        max_request_bytes=args.socket_request_max_bytes,
    )
    raise_open_file_limit()  # each connection is a file; the default limit is often 1024
    cluster_id, node_id = cluster_identity(settings.data_dir, args.node_id)
    service = open_service(settings)
    host, port = args.listen
    advertised_host, advertised_port = args.advertised_listener or (None, None)
    server = MetadataServer(
        service,
        host=host,
        port=port,
        advertised_host=advertised_host,
        advertised_port=advertised_port,
        node_id=node_id,
        cluster_id=cluster_id,
        max_request_bytes=args.socket_request_max_bytes,
        limits=limits,
    )
    try:
        asyncio.run(_serve(server))
    except OSError as exc:
        service.close()
        raise CliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return EXIT_OK


async def _serve(server: MetadataServer) -> None:
    import asyncio
    import signal

    await server.start()
    # Everything loaded so far (the image, modules, compiled codecs) lives as long as the
    # server: move it out of the cyclic collector's view, so a full collection scans only
    # what requests allocate since (a stall of tens of ms otherwise shows in p99 latency).
    gc.collect()
    gc.freeze()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _stop, server, signum.name)
    await server.wait_stopped()


def _stop(server: MetadataServer, name: str) -> None:
    import asyncio

    asyncio.get_running_loop().create_task(server.stop(name))
