"""`mlog brokers register|unregister|fence|unfence|shutdown|list`: brokers from the CLI."""

from __future__ import annotations

import argparse
import json
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
from api.cli.targets import fetch_image, open_target
from records.model import BrokerEndpoint
from replay.controller.commands import BrokerAction, RegisterBroker

if TYPE_CHECKING:
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
    """List registered brokers."""
    image = fetch_image(settings, args)
    brokers = image.cluster.sorted()
    if settings.output == "json":
        items = [
            {
                "broker_id": b.broker_id,
                "epoch": b.broker_epoch,
                "incarnation_id": str(b.incarnation_id),
                "rack": b.rack,
                "fenced": b.fenced,
                "in_controlled_shutdown": b.in_controlled_shutdown,
                "endpoints": [f"{e.host}:{e.port}" for e in b.end_points],
            }
            for b in brokers
        ]
        out.write(json.dumps(items) + "\n")
        return EXIT_OK
    rows = [
        (
            b.broker_id,
            b.rack or "-",
            "fenced" if b.fenced else "shutting down" if b.in_controlled_shutdown else "active",
            b.broker_epoch,
            ",".join(f"{e.host}:{e.port}" for e in b.end_points) or "-",
        )
        for b in brokers
    ]
    print_table(rows, ("id", "rack", "state", "epoch", "endpoints"), out)
    return EXIT_OK


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
