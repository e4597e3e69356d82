"""`mlog acls add|list|remove`: ACLs from the CLI, with kafka-acls.sh's flags and output.

`add` makes one ACL per principal, host and operation (`--allow-principal` with
`--allow-host`, `--deny-principal` with `--deny-host`; hosts default to `*`) on each resource
named (`--topic`, `--group`, `--namespace`, `--transactional-id`, `--cluster`), then prints the
resource's ACLs as kafka-acls.sh does ("Current ACLs for resource `ResourcePattern(...)`:").
Every ACL is checked before anything is written, so a bad one writes nothing. `list` and
`remove` take the same resources with `--resource-pattern-type` any|match|literal|prefixed;
`remove` asks before it removes unless `--force`. On a data directory writes are appended as
the local principal; with `--bootstrap-server` they go through the server's Kafka APIs.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_OK, CliError, add_global_options, add_writer_options, check
from api.cli.targets import open_target
from api.targets import LocalTarget, Target
from records.model import AclOperation, AclPermissionType, PatternType, ResourceType
from replay.controller.acls import CLUSTER_NAME, resources, validate_binding
from replay.controller.authorizer import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from replay.controller.commands import AclBinding, AclFilter

if TYPE_CHECKING:
    from api.service.settings import Settings


def _key(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


_OPERATIONS = {
    _key(op.name): op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)
}

_TOPIC_OPERATIONS = frozenset({*TOPIC_OPERATIONS, AclOperation.ALL})

RESOURCE_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: _TOPIC_OPERATIONS,
    ResourceType.NAMESPACE: _TOPIC_OPERATIONS,  # a namespace ACL applies to its topics
    ResourceType.GROUP: frozenset(
        {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALL}
    ),
    ResourceType.CLUSTER: frozenset({*CLUSTER_OPERATIONS, AclOperation.ALL}),
    ResourceType.TRANSACTIONAL_ID: frozenset(
        {AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.ALL}
    ),
}
"""The operations kafka-acls.sh accepts on each resource type (NAMESPACE: a topic's)."""


def operation_arg(text: str) -> AclOperation:
    """Argument type: an operation as kafka-acls.sh spells it (Read, DescribeConfigs, ...)."""
    found = _OPERATIONS.get(_key(text.strip()))
    if found is None:
        names = ", ".join(_camel(op) for op in _OPERATIONS.values())
        raise argparse.ArgumentTypeError(f"unknown operation {text!r}; use one of {names}")
    return found


def _camel(op: AclOperation) -> str:
    return "".join(part.capitalize() for part in op.name.split("_"))


def pattern_arg(choices: Sequence[PatternType]) -> Any:
    """Argument type: a resource pattern type among `choices` (any case)."""

    def parse(text: str) -> PatternType:
        for pattern in choices:
            if pattern.name.lower() == text.strip().lower():
                return pattern
        names = "|".join(p.name.lower() for p in choices)
        raise argparse.ArgumentTypeError(f"unknown resource pattern type {text!r}; use {names}")

    return parse


# ---------------------------------------------------------------------- Kafka's words


def pattern_text(resource_type: int, name: str | None, pattern_type: int) -> str:
    """Kafka's `ResourcePattern.toString` (`ResourcePatternFilter` with `<any>` for no name)."""
    return (
        f"ResourcePattern(resourceType={_enum_name(ResourceType, resource_type)}, "
        f"name={'<any>' if name is None else name}, "
        f"patternType={_enum_name(PatternType, pattern_type)})"
    )


def entry_text(binding: AclBinding) -> str:
    """Kafka's `AccessControlEntry.toString`."""
    return (
        f"(principal={binding.principal}, host={binding.host}, "
        f"operation={_enum_name(AclOperation, binding.operation)}, "
        f"permissionType={_enum_name(AclPermissionType, binding.permission_type)})"
    )


def _enum_name(enum: Any, code: int) -> str:
    try:
        return str(enum(code).name)
    except ValueError:
        return str(code)


def binding_json(binding: AclBinding) -> dict[str, Any]:
    """An ACL as `--output json` shows it (names of Kafka's enums)."""
    return {
        "resource_type": _enum_name(ResourceType, binding.resource_type),
        "resource_name": binding.resource_name,
        "pattern_type": _enum_name(PatternType, binding.pattern_type),
        "principal": binding.principal,
        "host": binding.host,
        "operation": _enum_name(AclOperation, binding.operation),
        "permission_type": _enum_name(AclPermissionType, binding.permission_type),
    }


def print_acls(bindings: Iterable[AclBinding], out: TextIO) -> None:
    """kafka-acls.sh's listing: per resource, its header line and one tab-indented line per ACL."""
    print_groups("Current ACLs for resource", bindings, out)


def print_groups(title: str, bindings: Iterable[AclBinding], out: TextIO) -> None:
    """Per resource, `TITLE `pattern`: ` and its ACLs, as kafka-acls.sh prints them.

    Kafka's own spacing: a space before the first ACL's tab, one after the last ACL.
    """
    for (resource_type, name, pattern_type), group in resources(bindings):
        entries = "\n".join(f"\t{entry_text(binding)}" for binding in group)
        out.write(f"{title} `{pattern_text(resource_type, name, pattern_type)}`: \n {entries} \n\n")


# ---------------------------------------------------------------------- the target's calls


def describe(target: Target, acl_filter: AclFilter) -> list[AclBinding]:
    """The ACLs a filter matches, from the data directory's image or through DescribeAcls."""
    if isinstance(target, LocalTarget):
        from replay.controller.controller import Controller

        return Controller.describe_acls(target.image(), acl_filter)
    return target.wait(lambda: target.client.describe_acls(acl_filter))


def _describe_all(target: Target, filters: Sequence[AclFilter]) -> list[AclBinding]:
    found: dict[AclBinding, None] = {}
    for acl_filter in filters:
        found.update(dict.fromkeys(describe(target, acl_filter)))
    return list(found)


def resource_names(args: argparse.Namespace) -> list[tuple[ResourceType, str]]:
    """The resources `--topic`, `--group`, `--namespace`, `--transactional-id`, `--cluster` name."""
    named: list[tuple[ResourceType, str]] = []
    for flag, resource_type in (
        ("topic", ResourceType.TOPIC),
        ("group", ResourceType.GROUP),
        ("namespace", ResourceType.NAMESPACE),
        ("transactional_id", ResourceType.TRANSACTIONAL_ID),
    ):
        named += [(resource_type, name) for name in getattr(args, flag) or ()]
    if args.cluster:
        named.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return named


def _entries(
    args: argparse.Namespace,
) -> list[tuple[str, AclPermissionType, list[str]]]:
    """(principal, permission, hosts) of `--allow-principal` and `--deny-principal`."""
    allow_hosts = args.allow_host or ["*"]
    deny_hosts = args.deny_host or ["*"]
    entries = [(p, AclPermissionType.ALLOW, allow_hosts) for p in args.allow_principal or ()]
    entries += [(p, AclPermissionType.DENY, deny_hosts) for p in args.deny_principal or ()]
    return entries


def cmd_acls_add(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Add ACLs: every principal, host and operation on every resource named."""
    named = resource_names(args)
    if not named:
        raise CliError(
            "name a resource: --topic T, --group G, --namespace N, --transactional-id T or "
            "--cluster"
        )
    entries = _entries(args)
    if not entries:
        raise CliError("name who: --allow-principal User:NAME or --deny-principal User:NAME")
    if not args.operation:
        args.operation = [AclOperation.ALL]  # kafka-acls.sh's default
    for resource_type, _ in named:
        allowed = RESOURCE_OPERATIONS[resource_type]
        for op in args.operation:
            if op not in allowed:
                names = ",".join(sorted(_camel(o) for o in allowed))
                raise CliError(
                    f"ResourceType {resource_type.name} only supports operations {names}"
                )
    bindings = [
        validate_binding(
            AclBinding(
                resource_type=resource_type,
                resource_name=name,
                pattern_type=args.resource_pattern_type,
                principal=principal,
                host=host,
                operation=op,
                permission_type=permission,
            )
        )
        for resource_type, name in named
        for principal, permission, hosts in entries
        for host in hosts
        for op in args.operation
    ]
    unique = list(dict.fromkeys(bindings))
    with open_target(settings, args) as target:
        if isinstance(target, LocalTarget):
            local = target
            results = local.run(lambda ctl, image: ctl.create_acls(image, unique))
        else:
            remote = target
            results = remote.write(lambda: remote.client.create_acls(unique))
        for result in results:
            check(result.outcome)
        current = _describe_all(target, _filters_of(named, args.resource_pattern_type))
    if settings.output == "json":
        import json

        data = {
            "added": [binding_json(b) for b in unique],
            "current": [binding_json(b) for b in current],
        }
        out.write(json.dumps(data, separators=(",", ":")) + "\n")
        return EXIT_OK
    print_groups("Adding ACLs for resource", unique, out)
    print_acls(current, out)
    return EXIT_OK


def _filters_of(
    named: Sequence[tuple[ResourceType, str]], pattern_type: PatternType
) -> list[AclFilter]:
    """One filter per named resource (every ACL when none is named)."""
    if not named:
        return [AclFilter()]
    return [
        AclFilter(resource_type=t, resource_name=name, pattern_type=pattern_type)
        for t, name in named
    ]


def cmd_acls_list(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """List ACLs: of the resources named (all without one), optionally of some principals."""
    named = resource_names(args)
    pattern_type = args.resource_pattern_type
    if pattern_type is None:
        pattern_type = PatternType.LITERAL if named else PatternType.ANY
    base = _filters_of(named, pattern_type)
    principals = args.filter_principal or [None]
    filters = [
        AclFilter(
            resource_type=f.resource_type,
            resource_name=f.resource_name,
            pattern_type=f.pattern_type,
            principal=principal,
            host=args.host,
        )
        for f in base
        for principal in principals
    ]
    hint = ""
    with open_target(settings, args) as target:
        found = _describe_all(target, filters)
        if not found and named and args.resource_pattern_type is None:
            hint = _other_patterns_hint(target, filters)
    if settings.output == "json":
        import json

        out.write(json.dumps([binding_json(b) for b in found], separators=(",", ":")) + "\n")
        if hint:
            print(f"mlog: {hint}", file=sys.stderr)
        return EXIT_OK
    if not found:
        out.write(f"no ACLs match; {hint or 'add one with `mlog acls add`'}\n")
        return EXIT_OK
    print_acls(found, out)
    return EXIT_OK


def _other_patterns_hint(target: Target, filters: Sequence[AclFilter]) -> str:
    """What `--resource-pattern-type` would find when LITERAL (the default) found nothing.

    A PREFIXED ACL on `org` (or on a prefix of the name) is not LITERAL: Kafka's tool lists
    it only with `--resource-pattern-type any` (same name) or `match` (every ACL that applies).
    """
    for pattern_type, flag in ((PatternType.ANY, "any"), (PatternType.MATCH, "match")):
        wider = [dataclasses.replace(f, pattern_type=pattern_type) for f in filters]
        found = _describe_all(target, wider)
        if found:
            kinds = sorted({PatternType(b.pattern_type).name for b in found})
            return (
                f"no LITERAL ACL names it, but {len(found)} {'/'.join(kinds)} ACL(s) do: "
                f"add --resource-pattern-type {flag} to list them"
            )
    return ""


def _remove_filters(
    args: argparse.Namespace, named: Sequence[tuple[ResourceType, str]]
) -> list[AclFilter]:
    """The filters of `remove`: per resource, every ACL, or those of the principals named."""
    pattern_type = args.resource_pattern_type
    operations: list[AclOperation] = args.operation or [AclOperation.ANY]
    entries: list[tuple[str | None, AclPermissionType, list[str | None]]] = [
        (p, AclPermissionType.ALLOW, list(args.allow_host or [None]))
        for p in args.allow_principal or ()
    ]
    entries += [
        (p, AclPermissionType.DENY, list(args.deny_host or [None]))
        for p in args.deny_principal or ()
    ]
    if not entries:
        entries = [(None, AclPermissionType.ANY, [None])]
    return [
        AclFilter(
            resource_type=resource_type,
            resource_name=name,
            pattern_type=pattern_type,
            principal=principal,
            host=host,
            operation=op,
            permission_type=permission,
        )
        for resource_type, name in named
        for principal, permission, hosts in entries
        for host in hosts
        for op in operations
    ]


def _confirm(question: str) -> None:
    """Ask on stderr, read the answer from stdin; anything but y/yes stops the command."""
    sys.stderr.write(f"{question} (y/n)\n")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise CliError("not confirmed, nothing removed; answer y, or give --force")


def cmd_acls_remove(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Remove the ACLs of the resources named (those of the principals named, if any)."""
    named = resource_names(args)
    if not named:
        raise CliError(
            "name the resource whose ACLs to remove: --topic T, --group G, --namespace N, "
            "--transactional-id T or --cluster"
        )
    filters = _remove_filters(args, named)
    if not args.force:
        which = ", ".join(
            f"`{pattern_text(t, name, args.resource_pattern_type)}`" for t, name in named
        )
        whose = "all ACLs" if filters[0].principal is None else "the ACLs named"
        _confirm(f"Are you sure you want to delete {whose} for resource filter {which}?")
    with open_target(settings, args) as target:
        if isinstance(target, LocalTarget):
            local = target
            results = local.run(lambda ctl, image: ctl.delete_acls(image, filters))
        else:
            remote = target
            results = remote.write(lambda: remote.client.delete_acls(filters))
        for result in results:
            check(result.outcome)
        removed = list(dict.fromkeys(b for r in results for b in r.matching))
        current = _describe_all(target, _filters_of(named, args.resource_pattern_type))
    if settings.output == "json":
        import json

        data = {
            "removed": [binding_json(b) for b in removed],
            "current": [binding_json(b) for b in current],
        }
        out.write(json.dumps(data, separators=(",", ":")) + "\n")
        return EXIT_OK
    if not removed:
        out.write("no ACLs matched; nothing removed\n")
    print_groups("Removed ACLs from resource", removed, out)
    print_acls(current, out)
    return EXIT_OK


# ---------------------------------------------------------------------- the parser


def add_resource_options(parser: argparse.ArgumentParser) -> None:
    """--topic, --group, --namespace, --transactional-id, --cluster (kafka-acls.sh's too)."""
    parser.add_argument("--topic", action="append", metavar="T", help="a topic (qualified name)")
    parser.add_argument("--group", action="append", metavar="G", help="a consumer group")
    parser.add_argument(
        "--namespace", action="append", metavar="N", help="a namespace (full name, org:apache)"
    )
    parser.add_argument(
        "--transactional-id", action="append", metavar="T", help="a transactional id"
    )
    parser.add_argument("--cluster", action="store_true", help="the cluster (kafka-cluster)")


FILTER_PATTERNS = (PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED)


def add_verbs(acls: argparse.ArgumentParser) -> None:
    """The verbs of `mlog acls` and their flags, on the noun's parser."""
    verbs = acls.add_subparsers(dest="verb", metavar="VERB", required=True)

    add = verbs.add_parser("add", help="add ACLs (kafka-acls.sh --add)")
    add_writer_options(add)
    add_resource_options(add)
    add.add_argument(
        "--resource-pattern-type",
        type=pattern_arg((PatternType.LITERAL, PatternType.PREFIXED)),
        default=PatternType.LITERAL,
        metavar="literal|prefixed",
        help="how the resource name matches (default literal)",
    )
    add.add_argument(
        "--allow-principal",
        action="append",
        metavar="User:NAME",
        help="allow this principal (User:* for every one; repeatable)",
    )
    add.add_argument(
        "--deny-principal",
        action="append",
        metavar="User:NAME",
        help="deny this principal (repeatable)",
    )
    add.add_argument(
        "--allow-host",
        action="append",
        metavar="IP",
        help="the allowed principals' client address (default *: any; repeatable)",
    )
    add.add_argument(
        "--deny-host",
        action="append",
        metavar="IP",
        help="the denied principals' client address (default *: any; repeatable)",
    )
    add.add_argument(
        "--operation",
        action="append",
        type=operation_arg,
        metavar="OP",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens or All (repeatable; "
        "default All, as kafka-acls.sh)",
    )
    add.set_defaults(handler=cmd_acls_add)

    listing = verbs.add_parser("list", help="list ACLs (kafka-acls.sh --list)")
    add_global_options(listing)
    add_resource_options(listing)
    listing.add_argument(
        "--resource-pattern-type",
        type=pattern_arg(FILTER_PATTERNS),
        default=None,
        metavar="any|match|literal|prefixed",
        help="which ACLs of the resource (default literal; any without a resource)",
    )
    listing.add_argument(
        "--principal",
        dest="filter_principal",
        action="append",
        metavar="User:NAME",
        help="only this principal's ACLs (repeatable)",
    )
    listing.add_argument("--host", metavar="IP", help="only ACLs with this host")
    listing.set_defaults(handler=cmd_acls_list)

    remove = verbs.add_parser("remove", help="remove ACLs (kafka-acls.sh --remove)")
    add_writer_options(remove)
    add_resource_options(remove)
    remove.add_argument(
        "--resource-pattern-type",
        type=pattern_arg(FILTER_PATTERNS),
        default=PatternType.LITERAL,
        metavar="any|match|literal|prefixed",
        help="which ACLs of the resource (default literal)",
    )
    remove.add_argument(
        "--allow-principal",
        action="append",
        metavar="User:NAME",
        help="only this principal's ALLOW ACLs (repeatable; default: every ACL)",
    )
    remove.add_argument(
        "--deny-principal",
        action="append",
        metavar="User:NAME",
        help="only this principal's DENY ACLs (repeatable)",
    )
    remove.add_argument(
        "--allow-host", action="append", metavar="IP", help="only this host (default any)"
    )
    remove.add_argument(
        "--deny-host", action="append", metavar="IP", help="only this host (default any)"
    )
    remove.add_argument(
        "--operation",
        action="append",
        type=operation_arg,
        metavar="OP",
        help="only ACLs of this operation (repeatable; default any)",
    )
    remove.add_argument("--force", action="store_true", help="do not ask for confirmation")
    remove.set_defaults(handler=cmd_acls_remove)
