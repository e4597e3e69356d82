"""`mlog configs describe|alter`: configs of a topic, namespace, broker or the cluster."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import (
    EXIT_OK,
    CliError,
    add_global_options,
    add_writer_options,
    broker_id_arg,
    check,
    parse_pairs,
)
from api.cli.output import emit, print_table
from api.cli.targets import fetch_image, open_target
from api.cli.topic_options import add_namespace_option, topic_name
from records.model import ConfigResourceType
from replay.controller.commands import AlterConfig, AlterConfigOp, ConfigResource
from replay.controller.config_defs import CLUSTER_CONFIGS, TOPIC_CONFIGS, ConfigSource
from replay.controller.controller import Controller
from replay.controller.namespaces import validate_namespace_name

if TYPE_CHECKING:
    from api.service.settings import Settings
    from replay.controller.config_defs import ResolvedConfig


def _resource(args: argparse.Namespace) -> ConfigResource:
    namespace = args.namespace if args.topic is None else None
    chosen = [
        x for x in (args.topic, namespace, args.broker, args.cluster or None) if x is not None
    ]
    if len(chosen) != 1:
        raise CliError(
            "name one resource: --topic NAME (with --namespace NS for a topic in NS), "
            "--namespace NS, --broker ID or --cluster"
        )
    if args.topic is not None:
        name = topic_name(args)
        assert name is not None  # --topic is given
        return ConfigResource(type=ConfigResourceType.TOPIC, name=name)
    if namespace is not None:
        validate_namespace_name(namespace)
        return ConfigResource(type=ConfigResourceType.NAMESPACE, name=namespace)
    if args.broker is not None:
        return ConfigResource(type=ConfigResourceType.BROKER, name=str(args.broker))
    return ConfigResource(type=ConfigResourceType.BROKER, name="")


def _config_json(config: ResolvedConfig) -> dict[str, Any]:
    return {
        "name": config.name,
        "value": None if config.sensitive else config.value,
        "source": config.source.name,
        "source_name": config.source_name,
        "read_only": config.read_only,
        "sensitive": config.sensitive,
    }


def cmd_configs_describe(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Every known key of a resource, with its value and where it comes from."""
    resource = _resource(args)
    image = fetch_image(settings, args)
    configs = Controller().describe_configs(image, resource)
    if not args.all:
        configs = [c for c in configs if c.source != ConfigSource.DEFAULT_CONFIG]
    if settings.output == "json":
        out.write(json.dumps([_config_json(c) for c in configs]) + "\n")
        return EXIT_OK
    if not configs:
        out.write("no overrides; every key has its default (--all shows them)\n")
        return EXIT_OK
    rows = [
        (
            c.name,
            "<sensitive>" if c.sensitive else c.value,
            c.source.name + (f" ({c.source_name})" if c.source_name else ""),
        )
        for c in configs
    ]
    print_table(rows, ("name", "value", "source"), out)
    return EXIT_OK


def _note_topic_keys(names: Iterable[str]) -> None:
    """Say on stderr when a broker resource took a topic key: stored, it sets no default."""
    for key in dict.fromkeys(names):
        topic_key = TOPIC_CONFIGS.get(key)
        if topic_key is None or key in CLUSTER_CONFIGS:
            continue
        broker_key = topic_key.synonyms[0][0] if topic_key.synonyms else None
        print(
            f"mlog: note: {key} is a topic key: a broker resource stores it as Kafka's does, "
            "and it sets no topic's default"
            + (f"; the cluster-wide default is {broker_key}" if broker_key else ""),
            file=sys.stderr,
        )


def cmd_configs_alter(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Set, delete, append to or subtract from config keys of one resource."""
    resource = _resource(args)
    ops = [
        AlterConfig(name=k, op=AlterConfigOp.SET, value=v)
        for k, v in parse_pairs(args.set, "--set")
    ]
    ops += [AlterConfig(name=k, op=AlterConfigOp.DELETE) for k in args.delete or ()]
    ops += [
        AlterConfig(name=k, op=AlterConfigOp.APPEND, value=v)
        for k, v in parse_pairs(args.append, "--append")
    ]
    ops += [
        AlterConfig(name=k, op=AlterConfigOp.SUBTRACT, value=v)
        for k, v in parse_pairs(args.subtract, "--subtract")
    ]
    if not ops:
        raise CliError(
            "nothing to alter: give --set K=V, --delete K, --append K=V or --subtract K=V"
        )
    with open_target(settings, args) as target:
        result = target.alter_configs(resource, ops, validate_only=args.validate_only)
    check(result.outcome)
    if resource.type == ConfigResourceType.BROKER:
        _note_topic_keys(op.name for op in ops)
    name = resource.name or "<cluster default>"
    emit(
        settings,
        out,
        {"resource_type": resource.type.name, "resource": resource.name, "changes": len(ops)},
        f"{'validated' if args.validate_only else 'altered'} {len(ops)} config(s) of "
        f"{resource.type.name.lower()} {name}",
    )
    return EXIT_OK


def add_verbs(configs: argparse.ArgumentParser) -> None:
    """The verbs of `mlog configs` and their flags, on the noun's parser."""
    verbs = configs.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name, handler, text in (
        ("describe", cmd_configs_describe, "show configs with their sources"),
        ("alter", cmd_configs_alter, "set or delete configs"),
    ):
        sub = verbs.add_parser(name, help=text)
        (add_writer_options if name == "alter" else add_global_options)(sub)
        sub.add_argument("--topic", help="a topic's configs")
        add_namespace_option(sub, "a namespace's configs (with --topic: the topic's namespace)")
        sub.add_argument("--broker", type=broker_id_arg, help="a broker's configs")
        sub.add_argument("--cluster", action="store_true", help="cluster-wide defaults")
        sub.set_defaults(handler=handler)
    verbs.choices["describe"].add_argument(
        "--all", action="store_true", help="include keys left at their defaults"
    )
    alter = verbs.choices["alter"]
    alter.add_argument("--set", action="append", help="KEY=VALUE (repeatable)")
    alter.add_argument("--delete", action="append", help="KEY to reset to its default")
    alter.add_argument("--append", action="append", help="KEY=V1,V2 added to a list key")
    alter.add_argument("--subtract", action="append", help="KEY=V1 removed from a list key")
    alter.add_argument("--validate-only", action="store_true", help="check, change nothing")
