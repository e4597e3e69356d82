"""`mlog kafka-configs`: kafka-configs.sh's flags and output over mlog's config calls.

`--entity-type topics|brokers|users` with `--entity-name N` or `--entity-default` (or the
shortcuts `--topic`, `--broker`, `--broker-defaults`, `--user`), then `--describe [--all]` or
`--alter --add-config k=v,k2=[a,b] --delete-config k`. Topics' and brokers' configs go
through `mlog configs`' calls (IncrementalAlterConfigs, DescribeConfigs on the image), users'
SCRAM credentials (`SCRAM-SHA-256=[iterations=8192,password=...]`) through `mlog users`'.
mlog keeps no client quotas: `clients`, `ips` and quota keys are refused, naming the flag.
"""

from __future__ import annotations

import argparse
import re
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from api.cli.common import EXIT_OK, CliError, check
from api.cli.kafka_tools.flags import add_connection_options, refuse, require_target
from api.cli.targets import open_target
from api.cli.users import SALT_BYTES
from api.cli.users import alter as alter_scram
from api.cli.users import describe as describe_scram
from records.model import ConfigResourceType, ScramMechanism
from replay.controller.commands import AlterConfig, AlterConfigOp, ConfigResource
from replay.controller.config_defs import ConfigSource
from replay.security.scram_keys import salted_password
from replay.security.scram_rules import MAX_ITERATIONS, MIN_ITERATIONS, mechanism_by_name

if TYPE_CHECKING:
    from api.service.settings import Settings
    from api.targets import Target
    from replay.controller.config_defs import ResolvedConfig
    from replay.image import MetadataImage

ENTITY_TYPES = ("topics", "brokers", "users")
"""The entity types mlog has configs for."""

NO_QUOTAS = "mlog keeps no client quotas; users take SCRAM credentials only"

KAFKA_SOURCE_NAMES = {ConfigSource.TOPIC_CONFIG: "DYNAMIC_TOPIC_CONFIG"}
"""Kafka's name of a config source where it differs from ours."""

SCRAM_ITERATIONS_DEFAULT = 4096
"""kafka-configs.sh's iterations when `iterations=` is left out."""

_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_add_config(text: str) -> list[tuple[str, str]]:
    """Kafka's `--add-config`: `k=v` pairs split by commas outside `[...]`, brackets dropped."""
    pairs = []
    for item in re.split("," + _OUTSIDE_BRACKETS, text):
        parts = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
        if len(parts) != 2:
            raise CliError(
                'Invalid entity config: all configs to be added must be in the format "key=val" '
                f"(got {item!r}; group values with commas in [...])"
            )
        key = parts[0].strip()
        if not re.fullmatch(r"[a-zA-Z0-9._-]*", key):
            raise CliError(f"Invalid character found for config key: {key}")
        pairs.append((key, re.sub(r"\[?\]?", "", parts[1]).strip()))
    return pairs


def _configs_to_add(args: argparse.Namespace) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    if args.add_config_file:
        from api.security.properties import load_properties

        pairs += list(load_properties(Path(args.add_config_file)).items())
    if args.add_config:
        pairs += parse_add_config(args.add_config)
    return pairs


def _configs_to_delete(args: argparse.Namespace) -> list[str]:
    return [k.strip() for value in args.delete_config or () for k in value.split(",")]


def _entity(args: argparse.Namespace) -> tuple[str, str | None]:
    """(entity type, name: "" for the default, None for every one) of the flags given."""
    shortcuts = [
        (kind, value)
        for kind, value in (
            ("topics", args.topic),
            ("brokers", args.broker),
            ("brokers", "" if args.broker_defaults else None),
            ("users", args.user),
        )
        if value is not None
    ]
    if shortcuts and (args.entity_type or args.entity_name is not None or args.entity_default):
        raise CliError(
            "--entity-{type,name,default} should not be used in conjunction with specific "
            "entity flags"
        )
    if len(shortcuts) > 1:
        raise CliError("name one entity: --topic, --broker, --broker-defaults or --user")
    if shortcuts:
        return shortcuts[0]
    types = args.entity_type or []
    if len(types) != 1:
        raise CliError(
            "give one --entity-type: topics, brokers or users (mlog has no client quotas, so "
            "users and clients never go together)"
        )
    kind = types[0]
    if kind not in ENTITY_TYPES:
        why = NO_QUOTAS if kind in ("clients", "ips") else "mlog has no such configs"
        raise CliError(
            f"--entity-type {kind} is not supported: {why}; use topics, brokers or users"
        )
    if args.entity_name is not None and args.entity_default:
        raise CliError("give --entity-name or --entity-default, not both")
    if args.entity_default:
        if kind != "brokers":
            raise CliError(f"--entity-default is not supported for {kind}: {NO_QUOTAS}")
        return kind, ""
    return kind, args.entity_name


def cmd_kafka_configs(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Run kafka-configs.sh's `--describe` or `--alter`."""
    require_target(settings, "kafka-configs")
    if args.alter == args.describe:
        raise CliError("Command must include exactly one action: --describe, --alter")
    kind, name = _entity(args)
    if kind == "brokers" and name and not name.isdigit():
        raise CliError(
            f"The entity name for brokers must be a valid integer broker id, but it is: {name}"
        )
    if args.alter:
        if name is None:
            raise CliError("An entity name must be specified with --alter (--entity-name N)")
        if args.all:
            raise CliError("--all goes with --describe")
        adds, deletes = _configs_to_add(args), _configs_to_delete(args)
        if not adds and not deletes:
            raise CliError("nothing to alter: give --add-config k=v or --delete-config k")
        with open_target(settings, args) as target:
            if kind == "users":
                _alter_user(target, name, adds, deletes)
            else:
                _alter_resource(target, kind, name, adds, deletes)
        if name:
            out.write(f"Completed updating config for {kind[:-1]} {name}.\n")
        else:
            out.write(f"Completed updating default config for {kind} in the cluster.\n")
        return EXIT_OK
    if args.add_config or args.delete_config or args.add_config_file:
        raise CliError("--add-config and --delete-config go with --alter")
    with open_target(settings, args) as target:
        if kind == "users":
            _describe_users(target, name, out)
        else:
            _describe_resources(target.image(), kind, name, args.all, out)
    return EXIT_OK


# ---------------------------------------------------------------------- topics and brokers


def _resource(kind: str, name: str) -> ConfigResource:
    if kind == "topics":
        return ConfigResource(type=ConfigResourceType.TOPIC, name=name)
    return ConfigResource(type=ConfigResourceType.BROKER, name=name)


def _dynamic_source(kind: str, name: str) -> ConfigSource:
    if kind == "topics":
        return ConfigSource.TOPIC_CONFIG
    return (
        ConfigSource.DYNAMIC_BROKER_CONFIG if name else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    )


def _described(image: MetadataImage, kind: str, name: str) -> list[ResolvedConfig]:
    from replay.controller.controller import Controller

    if kind == "topics" and image.topics.get_by_name(name) is None:
        raise CliError(f"UNKNOWN_TOPIC_OR_PARTITION: topic {name!r} does not exist")
    return sorted(Controller().describe_configs(image, _resource(kind, name)), key=lambda c: c.name)


def _alter_resource(
    target: Target, kind: str, name: str, adds: list[tuple[str, str]], deletes: list[str]
) -> None:
    image = target.image()
    dynamic = {
        c.name for c in _described(image, kind, name) if c.source == _dynamic_source(kind, name)
    }
    missing = [k for k in deletes if k not in dynamic]
    if missing:
        raise CliError(
            f"Invalid config(s): {','.join(missing)} (only keys set on this entity can be "
            "deleted; --describe lists them)"
        )
    ops = [AlterConfig(name=k, op=AlterConfigOp.SET, value=v) for k, v in adds]
    ops += [AlterConfig(name=k, op=AlterConfigOp.DELETE) for k in deletes]
    check(target.alter_configs(_resource(kind, name), ops, validate_only=False).outcome)


def _describe_resources(
    image: MetadataImage, kind: str, name: str | None, describe_all: bool, out: TextIO
) -> None:
    if name is not None:
        names = [name]
    elif kind == "topics":
        names = [t.qualified_name for t in image.topics.sorted()]
    else:
        names = [str(b.broker_id) for b in image.cluster.sorted()] + [""]
    for entity in names:
        if kind == "brokers" and entity == "":
            out.write("Default configs for brokers in the cluster are:\n")
        else:
            out.write(
                f"{'All' if describe_all else 'Dynamic'} configs for {kind[:-1]} {entity} are:\n"
            )
        source = _dynamic_source(kind, entity)
        for c in _described(image, kind, entity):
            if describe_all or c.source == source:
                out.write(f"  {config_line(c)}\n")


def config_line(c: ResolvedConfig) -> str:
    """Kafka's line of one config: `k=v sensitive=false synonyms={SOURCE:k=v}`."""
    value = "null" if c.sensitive else c.value
    source = KAFKA_SOURCE_NAMES.get(c.source, c.source.name)
    synonym = f"{source}:{c.source_name or c.name}={value}"
    return f"{c.name}={value} sensitive={str(c.sensitive).lower()} synonyms={{{synonym}}}"


# ---------------------------------------------------------------------- users


def _scram_credential(mechanism: ScramMechanism, text: str) -> tuple[int, str]:
    """`[iterations=N,]password=P` (brackets already dropped) as (iterations, password)."""
    found = re.fullmatch(r"(?:iterations=(-?[0-9]*),)?password=(.*)", text, re.DOTALL)
    if found is None:
        raise CliError(
            f"{mechanism.mechanism_name}: give [iterations=N,]password=P, e.g. "
            f"'{mechanism.mechanism_name}=[iterations=8192,password=alice-secret]'"
        )
    raw, password = found.group(1), found.group(2)
    iterations = SCRAM_ITERATIONS_DEFAULT if raw in (None, "", "-1") else int(raw)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise CliError(f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, got {iterations}")
    if not password:
        raise CliError(f"{mechanism.mechanism_name}: the password is empty")
    return iterations, password


def _mechanism(key: str) -> ScramMechanism:
    try:
        return mechanism_by_name(key.upper())
    except ValueError:
        raise CliError(
            f"Only SCRAM credential configs can be altered for 'users' in mlog ({NO_QUOTAS}); "
            f"unexpected config name: {key}"
        ) from None


def _alter_user(target: Target, user: str, adds: list[tuple[str, str]], deletes: list[str]) -> None:
    from replay.controller.commands import ScramDeletion, ScramUpsertion

    if not user:
        raise CliError("give the user with --entity-name NAME")
    upsertions = []
    for key, value in adds:
        mechanism = _mechanism(key)
        iterations, password = _scram_credential(mechanism, value)
        salt = secrets.token_bytes(SALT_BYTES)
        upsertions.append(
            ScramUpsertion(
                name=user,
                mechanism=mechanism,
                iterations=iterations,
                salt=salt,
                salted_password=salted_password(
                    mechanism, password.encode("utf-8"), salt, iterations
                ),
            )
        )
    deletions = [ScramDeletion(name=user, mechanism=_mechanism(k)) for k in deletes]
    # One request a credential: a request may not name its user twice (Kafka's rule).
    for upsertion in upsertions:
        for result in alter_scram(target, [], [upsertion]):
            check(result.outcome)
    for deletion in deletions:
        for result in alter_scram(target, [deletion], []):
            check(result.outcome)


def _describe_users(target: Target, user: str | None, out: TextIO) -> None:
    for result in describe_scram(target, [user] if user else None):
        if not result.outcome.ok and user is None:
            continue
        check(result.outcome)
        text = ", ".join(
            f"{ScramMechanism(c.mechanism).mechanism_name}=iterations={c.iterations}"
            for c in result.credentials
        )
        out.write(f"SCRAM credential configs for user-principal '{result.user}' are {text}\n")


# ---------------------------------------------------------------------- the parser


def add_verbs(parser: argparse.ArgumentParser) -> None:
    """kafka-configs.sh's flags, on the noun's parser (the action is a flag)."""
    add_connection_options(parser)
    parser.add_argument(
        "--alter", action="store_true", help="Alter the configuration for the entity."
    )
    parser.add_argument(
        "--describe", action="store_true", help="List configs for the given entity."
    )
    parser.add_argument(
        "--all", action="store_true", help="List all configs for the given entity (--describe)."
    )
    parser.add_argument(
        "--entity-type", action="append", metavar="topics|brokers|users", help="Type of entity."
    )
    parser.add_argument(
        "--entity-name", metavar="NAME", help="Name of entity (topic name, broker id, user)."
    )
    parser.add_argument(
        "--entity-default", action="store_true", help="The default (brokers: cluster-wide)."
    )
    parser.add_argument("--topic", help="The topic's name (as --entity-type topics).")
    parser.add_argument("--broker", help="The broker's ID (as --entity-type brokers).")
    parser.add_argument(
        "--broker-defaults", action="store_true", help="The config defaults for all brokers."
    )
    parser.add_argument("--user", help="The user's principal name (SCRAM credentials).")
    parser.add_argument(
        "--add-config",
        metavar="k1=v1,k2=[v1,v2,v2],k3=v3",
        help="Key Value pairs of configs to add; [] groups values that contain commas.",
    )
    parser.add_argument("--add-config-file", metavar="FILE", help="A properties file of configs.")
    parser.add_argument(
        "--delete-config", action="append", metavar="k1,k2", help="config keys to remove"
    )
    parser.add_argument("--force", action="store_true", help="Suppress console prompts.")
    for flag in ("--client", "--ip"):
        refuse(parser, flag, NO_QUOTAS)
    for flag in ("--client-defaults", "--user-defaults", "--ip-defaults"):
        refuse(parser, flag, NO_QUOTAS, takes_value=False)
    refuse(parser, "--broker-logger", "mlog's log levels are not set through the admin API")
    refuse(parser, "--group", "mlog keeps no group configs")
    refuse(parser, "--client-metrics", "mlog keeps no client-metrics configs")
    refuse(parser, "--zookeeper", "there is no ZooKeeper: give --bootstrap-server")
    refuse(parser, "--zk-tls-config-file", "there is no ZooKeeper: give --bootstrap-server")
    parser.set_defaults(handler=cmd_kafka_configs)
