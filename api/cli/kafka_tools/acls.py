"""`mlog kafka-acls`: kafka-acls.sh's flags and output over `mlog acls`' handlers.

`--add`, `--remove` and `--list` are `mlog acls add|remove|list` (the same checks, calls and
Kafka-shaped listing); the convenience roles are Kafka's: `--producer` is Write, Describe and
Create on the topics (Write and Describe on `--transactional-id`s, IdempotentWrite on the
cluster with `--idempotent`), `--consumer` Read and Describe on the topics and Read on the
groups. `--list --principal P` prints "ACLs for principal `P`" before that principal's ACLs.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING, TextIO

from api.cli.acls import (
    FILTER_PATTERNS,
    add_resource_options,
    cmd_acls_add,
    cmd_acls_remove,
    describe,
    operation_arg,
    pattern_arg,
    print_acls,
    resource_names,
)
from api.cli.common import EXIT_OK, CliError
from api.cli.kafka_tools.flags import add_connection_options, refuse, require_target
from api.cli.targets import open_target
from records.model import AclOperation, PatternType
from replay.controller.commands import AclFilter

if TYPE_CHECKING:
    from api.service.settings import Settings

RESOURCE_FLAGS = ("topic", "group", "namespace", "transactional_id")

PRODUCER = {
    "topic": [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE],
    "transactional_id": [AclOperation.WRITE, AclOperation.DESCRIBE],
}
CONSUMER = {
    "topic": [AclOperation.READ, AclOperation.DESCRIBE],
    "group": [AclOperation.READ],
}


def _roles(args: argparse.Namespace) -> list[argparse.Namespace]:
    """One argument set per resource kind of `--producer` / `--consumer`, with its operations."""
    if args.operation:
        raise CliError("--operation cannot be used with --producer or --consumer")
    parts: list[argparse.Namespace] = []
    for role, flag in ((PRODUCER, "producer"), (CONSUMER, "consumer")):
        if not getattr(args, flag):
            continue
        if not args.topic:
            raise CliError(f"With --{flag} you must specify a --topic")
        if flag == "consumer" and not args.group:
            raise CliError("With --consumer you must specify a --group")
        for kind, operations in role.items():
            if getattr(args, kind):
                part = argparse.Namespace(**vars(args))
                for other in RESOURCE_FLAGS:
                    setattr(part, other, getattr(args, other) if other == kind else None)
                part.cluster = False
                part.operation = list(operations)
                parts.append(part)
    if args.producer and args.idempotent:
        part = argparse.Namespace(**vars(args))
        for other in RESOURCE_FLAGS:
            setattr(part, other, None)
        part.cluster = True
        part.operation = [AclOperation.IDEMPOTENT_WRITE]
        parts.append(part)
    return parts


def cmd_kafka_acls(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Run kafka-acls.sh's `--add`, `--remove` or `--list`."""
    require_target(settings, "kafka-acls")
    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        raise CliError("Command must include exactly one action: --list, --add, --remove.")
    if (args.producer or args.consumer) and actions[0] == "list":
        raise CliError("--producer and --consumer go with --add or --remove")
    if args.idempotent and not args.producer:
        raise CliError("--idempotent goes with --producer")
    args.principal = None  # the server records the connection's principal
    settings = dataclasses.replace(settings, output="table")  # Kafka's output, always
    if actions[0] == "list":
        return _list(args, settings, out)
    if args.principal_filter:
        raise CliError("--principal goes with --list (use --allow-principal/--deny-principal)")
    parts = _roles(args) if args.producer or args.consumer else [args]
    handler = cmd_acls_add if actions[0] == "add" else cmd_acls_remove
    if actions[0] == "add" and args.resource_pattern_type is None:
        args.resource_pattern_type = PatternType.LITERAL
    for part in parts:
        part.resource_pattern_type = args.resource_pattern_type or PatternType.LITERAL
        if part.resource_pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED) and (
            actions[0] == "add"
        ):
            raise CliError(
                "A '--resource-pattern-type' value of 'literal' or 'prefixed' is required "
                "to add ACLs"
            )
        handler(part, settings, out)
    return EXIT_OK


def _list(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Kafka's `--list`: the ACLs of the resources named (every ACL without one)."""
    named = resource_names(args)
    pattern_type = args.resource_pattern_type
    if pattern_type is None:
        pattern_type = PatternType.LITERAL if named else PatternType.ANY
    filters = [
        AclFilter(resource_type=kind, resource_name=name, pattern_type=pattern_type)
        for kind, name in named
    ] or [AclFilter()]
    with open_target(settings, args) as target:
        found = list(dict.fromkeys(b for f in filters for b in describe(target, f)))
    if not args.principal_filter:
        print_acls(found, out)
        return EXIT_OK
    for principal in args.principal_filter:
        out.write(f"ACLs for principal `{principal}`\n")
        print_acls([b for b in found if b.principal == principal], out)
    return EXIT_OK


def add_verbs(parser: argparse.ArgumentParser) -> None:
    """kafka-acls.sh's flags, on the noun's parser (the action is a flag)."""
    add_connection_options(parser)
    parser.add_argument("--add", action="store_true", help="Indicates you are trying to add ACLs.")
    parser.add_argument(
        "--remove", action="store_true", help="Indicates you are trying to remove ACLs."
    )
    parser.add_argument("--list", action="store_true", help="List ACLs (of the resources named).")
    add_resource_options(parser)
    parser.add_argument(
        "--resource-pattern-type",
        type=pattern_arg(FILTER_PATTERNS),
        default=None,
        metavar="ANY|MATCH|LITERAL|PREFIXED",
        help="The type of the resource pattern or pattern filter (default literal).",
    )
    parser.add_argument("--allow-principal", action="append", metavar="User:NAME")
    parser.add_argument("--deny-principal", action="append", metavar="User:NAME")
    parser.add_argument("--allow-host", action="append", metavar="HOST", help="default *")
    parser.add_argument("--deny-host", action="append", metavar="HOST", help="default *")
    parser.add_argument(
        "--operation", action="append", type=operation_arg, metavar="OP", help="default All"
    )
    parser.add_argument(
        "--principal",
        dest="principal_filter",
        action="append",
        metavar="User:NAME",
        help="List ACLs for the specified principal (--list).",
    )
    parser.add_argument("--producer", action="store_true", help="ACLs of the producer role.")
    parser.add_argument("--consumer", action="store_true", help="ACLs of the consumer role.")
    parser.add_argument(
        "--idempotent", action="store_true", help="with --producer: IdempotentWrite too"
    )
    parser.add_argument("--force", action="store_true", help="Assume Yes to all queries.")
    tokens = "mlog has no delegation tokens"
    refuse(parser, "--delegation-token", tokens)
    refuse(parser, "--user-principal", tokens)
    refuse(parser, "--authorizer-properties", "give --bootstrap-server: ACLs go through a server")
    refuse(parser, "--authorizer", "mlog's authorizer is built in: give --bootstrap-server")
    parser.set_defaults(handler=cmd_kafka_acls)
