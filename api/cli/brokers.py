"""`mlog brokers register|unregister|fence|unfence|shutdown|list`: brokers from the CLI."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO

from api.cli.common import (
    EXIT_OK,
    CliError,
    add_global_options,
    add_writer_options,
    broker_id_arg,
)
from api.cli.output import emit, print_table
from api.cli.targets import open_target
from records.model import BrokerEndpoint
from replay.controller.commands import BrokerAction, RegisterBroker

if TYPE_CHECKING:
    from api.protocol.private import BrokerLivenessItem
    from api.service.settings import Settings


def _endpoint(text: str) -> BrokerEndpoint:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise CliError(f"--endpoint takes HOST:PORT, got {text!r}")
    return BrokerEndpoint(name="PLAINTEXT", host=host, port=int(port))


def cmd_brokers_register(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Register a broker (unfenced unless --fenced)."""
    request = RegisterBroker(
        broker_id=args.id,
        rack=args.rack,
        endpoints=tuple(_endpoint(e) for e in args.endpoint or ()),
        fenced=args.fenced,
    )
    with open_target(settings, args) as target:
        result = target.register_broker(request)
    emit(
        settings,
        out,
        {
            "broker_id": result.broker_id,
            "broker_epoch": result.broker_epoch,
            "partitions_changed": result.partitions_changed,
        },
        f"registered broker {result.broker_id} (epoch {result.broker_epoch})",
    )
    return EXIT_OK


_BROKER_STATE_AFTER = {
    BrokerAction.FENCE: "fenced",
    BrokerAction.UNFENCE: "unfenced",
    BrokerAction.CONTROLLED_SHUTDOWN: "in controlled shutdown",
    BrokerAction.UNREGISTER: "unregistered",
}


def _broker_action(action: BrokerAction, verb: str) -> Callable[..., int]:
    def handler(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
        with open_target(settings, args) as target:
            result = target.change_broker(args.id, action)
        if result.changed:
            text = (
                f"{verb} broker {result.broker_id}; {result.partitions_changed} partition(s) "
                "changed leader or ISR"
            )
        else:
            state = _BROKER_STATE_AFTER[action]
            text = f"broker {result.broker_id} is already {state}; nothing to do"
        emit(
            settings,
            out,
            {
                "broker_id": result.broker_id,
                "changed": result.changed,
                "partitions_changed": result.partitions_changed,
            },
            text,
        )
        return EXIT_OK

    handler.__doc__ = f"{verb.capitalize()} a broker."
    return handler


def cmd_brokers_list(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """List registered brokers, with their liveness on a server's active controller."""
    with open_target(settings, args) as target:
        image = target.image()
        sessions = target.broker_liveness()
    brokers = image.cluster.sorted()
    if settings.output == "json":
        items = []
        for b in brokers:
            session = sessions.get(b.broker_id)
            items.append(
                {
                    "broker_id": b.broker_id,
                    "epoch": b.broker_epoch,
                    "incarnation_id": str(b.incarnation_id),
                    "rack": b.rack,
                    "fenced": b.fenced,
                    "in_controlled_shutdown": b.in_controlled_shutdown,
                    "endpoints": [f"{e.host}:{e.port}" for e in b.end_points],
                    "last_heartbeat_ms": None if session is None else session.last_heartbeat_ms,
                    "metadata_offset": None if session is None else session.metadata_offset,
                    "fenced_reason": None if session is None else session.fenced_reason,
                }
            )
        out.write(json.dumps(items) + "\n")
        return EXIT_OK
    now_ms = time.time_ns() // 1_000_000
    rows = []
    for b in brokers:
        session = sessions.get(b.broker_id)
        state = "fenced" if b.fenced else "shutting down" if b.in_controlled_shutdown else "active"
        rows.append(
            (
                b.broker_id,
                b.rack or "-",
                state,
                b.broker_epoch,
                ",".join(f"{e.host}:{e.port}" for e in b.end_points) or "-",
                "-" if session is None else _ago(now_ms - session.last_heartbeat_ms),
                "-" if session is None or session.metadata_offset < 0 else session.metadata_offset,
                _why(b.fenced or b.in_controlled_shutdown, session),
            )
        )
    header = ("id", "rack", "state", "epoch", "endpoints", "heartbeat", "offset", "why")
    print_table(rows, header, out)
    return EXIT_OK


def _why(down: bool, session: BrokerLivenessItem | None) -> str:
    """Why a broker that is down is down, when this controller put it there."""
    if not down or session is None or session.fenced_reason is None:
        return "-"
    return session.fenced_reason


def _ago(ms: int) -> str:
    """A duration in the past, as a person reads it: `1.2 s ago`."""
    return f"{max(ms, 0) / 1000:.1f} s ago"


def add_verbs(brokers: argparse.ArgumentParser) -> None:
    """The verbs of `mlog brokers` and their flags, on the noun's parser."""
    verbs = brokers.add_subparsers(dest="verb", metavar="VERB", required=True)
    register = verbs.add_parser("register", help="register a broker (a new incarnation)")
    add_writer_options(register)
    register.add_argument("--id", type=broker_id_arg, required=True, help="broker id")
    register.add_argument("--rack", help="rack name (rack-aware placement)")
    register.add_argument("--endpoint", action="append", help="listener HOST:PORT (repeatable)")
    register.add_argument(
        "--fenced", action="store_true", help="register fenced (default: unfenced, usable)"
    )
    register.set_defaults(handler=cmd_brokers_register)
    for name, action, verb, text in (
        ("unregister", BrokerAction.UNREGISTER, "unregistered", "remove a broker"),
        ("fence", BrokerAction.FENCE, "fenced", "fence a broker (no leadership, out of ISRs)"),
        ("unfence", BrokerAction.UNFENCE, "unfenced", "unfence a broker"),
        (
            "shutdown",
            BrokerAction.CONTROLLED_SHUTDOWN,
            "started controlled shutdown of",
            "controlled shutdown: move leadership off a broker",
        ),
    ):
        sub = verbs.add_parser(name, help=text)
        add_writer_options(sub)
        sub.add_argument("--id", type=broker_id_arg, required=True, help="broker id")
        sub.set_defaults(handler=_broker_action(action, verb))
    listing = verbs.add_parser("list", help="list registered brokers")
    add_global_options(listing)
    listing.set_defaults(handler=cmd_brokers_list)
