r"""`mlog kafka-features`: kafka-features.sh's verbs, flags and output.

`describe` prints Kafka's `Feature: NAME\tSupportedMinVersion: ...` lines (levels as numbers:
mlog's metadata.version levels are its own, not Kafka's release names); `upgrade`,
`downgrade` and `disable` send UpdateFeatures through the client `mlog features` uses and
print one line a feature, as Kafka's (`kraft.version was upgraded to 1.`). Kafka's
`--release-version`, `version-mapping` and `feature-dependencies` name Kafka's releases,
which mlog's levels do not follow: they are refused, saying so.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, NoReturn, TextIO

from api.cli.common import EXIT_OK, CliError
from api.cli.kafka_tools.flags import add_connection_options, refuse, require_server
from api.cli.targets import client_security
from replay.features import FeatureResult, FeatureUpdate, UpgradeType
from replay.image import METADATA_VERSION

if TYPE_CHECKING:
    from api.service.settings import Settings
    from api.targets import RemoteTarget

TOOL = "kafka-features"
NOT_KAFKA_RELEASES = (
    "mlog's feature levels do not follow Kafka's releases; give --feature NAME=LEVEL "
    "(`mlog kafka-features --bootstrap-server B describe` shows the levels)"
)


def _target(settings: Settings, args: argparse.Namespace) -> RemoteTarget:
    from api.targets import RemoteTarget

    require_server(settings, TOOL)
    assert settings.bootstrap_server is not None  # required just above
    return RemoteTarget(settings.bootstrap_server, security=client_security(args))


def cmd_describe(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Each feature the server supports: its levels, the finalized one and the epoch."""
    target = _target(settings, args)
    try:
        levels = target.wait(target.client.describe_features)
    finally:
        target.close()
    epoch = "-" if levels.epoch is None or levels.epoch < 0 else levels.epoch
    for name in sorted(levels.supported):
        low, high = levels.supported[name]
        out.write(
            f"Feature: {name}\tSupportedMinVersion: {low}\tSupportedMaxVersion: {high}\t"
            f"FinalizedVersionLevel: {levels.finalized.get(name, 0)}\tEpoch: {epoch}\n"
        )
    return EXIT_OK


def _name_and_level(text: str) -> tuple[str, int]:
    name, sep, level = text.partition("=")
    if not sep:
        raise CliError(f"Can't parse feature=level string {text}: equals sign not found.")
    try:
        value = int(level.strip())
    except ValueError:
        value = None
    if value is None or not -(2**15) <= value < 2**15:
        raise CliError(
            f"Can't parse feature=level string {text}: unable to parse {level.strip()} as a short."
        )
    return name.strip(), value


def _updates(args: argparse.Namespace, op: str, out: TextIO) -> dict[str, int]:
    updates: dict[str, int] = {}
    if op == "disable":
        for name in args.feature or ():
            if name in updates:
                raise CliError(f"Feature {name} was specified more than once.")
            updates[name] = 0
    else:
        if args.metadata is not None:
            out.write(" `metadata` flag is deprecated and may be removed in a future release.\n")
            if not args.metadata.strip().isdigit():
                raise CliError(
                    f"Unknown metadata.version {args.metadata}: mlog's metadata.version levels "
                    "are numbers, not Kafka's releases; give --metadata LEVEL (`describe` shows "
                    "them)"
                )
            updates[METADATA_VERSION] = int(args.metadata)
        for text in args.feature or ():
            name, level = _name_and_level(text)
            if name in updates:
                raise CliError(f"Feature {name} was specified more than once.")
            updates[name] = level
    if not updates:
        raise CliError(f"You must specify at least one feature to {op}")
    return updates


def _update(args: argparse.Namespace, settings: Settings, out: TextIO, op: str) -> int:
    require_server(settings, TOOL)
    if op == "upgrade":
        kind = UpgradeType.UPGRADE
    else:
        kind = UpgradeType.UNSAFE_DOWNGRADE if args.unsafe else UpgradeType.SAFE_DOWNGRADE
    levels = _updates(args, op, out)
    updates = [FeatureUpdate(name=n, level=v, upgrade_type=kind) for n, v in levels.items()]
    dry_run = bool(args.dry_run)
    target = _target(settings, args)
    try:
        client = target.client
        results: list[FeatureResult] = target.write(
            lambda: client.update_features(updates, validate_only=dry_run)
        )
    finally:
        target.close()
    by_name = {r.name: r for r in results}
    failures = 0
    for name in sorted(levels):
        result = by_name.get(name)
        did = "disabled." if op == "disable" else f"{op}d to {levels[name]}."
        what = f"disable {name}" if op == "disable" else f"{op} {name} to {levels[name]}"
        if result is not None and result.error_code:
            failures += 1
            message = result.error_message or f"error {result.error_code}"
            out.write(f"{'Can not' if dry_run else 'Could not'} {what}. {message}\n")
        else:
            out.write(f"{name}{' can be ' if dry_run else ' was '}{did}\n")
    if failures:
        raise CliError(f"{failures} out of {len(levels)} operation(s) failed.")
    return EXIT_OK


def cmd_upgrade(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Raise feature levels (UpdateFeatures, UPGRADE)."""
    return _update(args, settings, out, "upgrade")


def cmd_downgrade(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Lower feature levels (SAFE_DOWNGRADE, or UNSAFE_DOWNGRADE with --unsafe)."""
    return _update(args, settings, out, "downgrade")


def cmd_disable(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Lower features to level 0."""
    return _update(args, settings, out, "disable")


def cmd_refused(args: argparse.Namespace, settings: Settings, out: TextIO) -> NoReturn:
    """`version-mapping` and `feature-dependencies`: Kafka's release table, not mlog's."""
    raise CliError(f"{TOOL} {args.verb} is not supported: {NOT_KAFKA_RELEASES}")


def add_verbs(parser: argparse.ArgumentParser) -> None:
    """kafka-features.sh's connection flags and verbs, on the noun's parser."""
    add_connection_options(parser)
    verbs = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    describe = verbs.add_parser("describe", help="Describes the current active feature flags.")
    add_connection_options(describe)
    describe.set_defaults(handler=cmd_describe)
    for name, handler, text in (
        ("upgrade", cmd_upgrade, "Upgrade one or more feature flags."),
        ("downgrade", cmd_downgrade, "Downgrade one or more feature flags."),
        ("disable", cmd_disable, "Disable one or more feature flags (level 0)."),
    ):
        sub = verbs.add_parser(name, help=text)
        add_connection_options(sub)
        sub.add_argument(
            "--feature",
            action="append",
            metavar="NAME=LEVEL" if name != "disable" else "NAME",
            help="a feature and its level, e.g. kraft.version=1 (repeatable)"
            if name != "disable"
            else "a feature to disable (repeatable)",
        )
        if name != "disable":
            sub.add_argument("--metadata", metavar="LEVEL", help="DEPRECATED: metadata.version")
            refuse(sub, "--release-version", NOT_KAFKA_RELEASES)
        if name != "upgrade":
            sub.add_argument("--unsafe", action="store_true", help="even if metadata may be lost")
        sub.add_argument("--dry-run", action="store_true", help="Validate, but do not perform.")
        sub.set_defaults(handler=handler)
    for name in ("version-mapping", "feature-dependencies"):
        sub = verbs.add_parser(name, help="not supported (Kafka's release table)")
        add_connection_options(sub)
        sub.add_argument("--release-version", help=argparse.SUPPRESS)
        sub.add_argument("--feature", action="append", help=argparse.SUPPRESS)
        sub.set_defaults(handler=cmd_refused)
