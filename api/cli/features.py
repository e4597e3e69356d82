"""`mlog features describe|upgrade`: the feature levels the log has finalized (kafka-features).

`describe` lists each feature this version knows with the levels it supports and the level the
log's FeatureLevelRecords finalized (from the data directory, or a server's image with
`--bootstrap-server`). `upgrade --feature NAME=LEVEL` appends the FeatureLevelRecord on the
data directory; `metadata.version` 2 makes a quorum keep the hash chain
(docs/verifiable-history.md). Raise a level only once every node runs a version that supports
it: this version refuses levels it does not support.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_OK, CliError, add_global_options
from api.cli.output import emit, print_table
from api.cli.targets import LocalTarget, fetch_image, open_target
from replay.features import KNOWN_FEATURES, finalized_level, upgrade_features

if TYPE_CHECKING:
    from api.service.settings import Settings


def cmd_features_describe(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Each known feature: supported levels and the finalized one."""
    image = fetch_image(settings, args)
    items: list[dict[str, Any]] = [
        {
            "feature": name,
            "supported_min_level": known.min_level,
            "supported_max_level": known.max_level,
            "finalized_level": finalized_level(image, name),
        }
        for name, known in sorted(KNOWN_FEATURES.items())
    ]
    if settings.output == "json":
        emit(settings, out, items, "")
        return EXIT_OK
    print_table(
        [list(item.values()) for item in items],
        ["Feature", "SupportedMinVersion", "SupportedMaxVersion", "FinalizedVersionLevel"],
        out,
    )
    return EXIT_OK


def _update(text: str) -> tuple[str, int]:
    name, sep, level = text.partition("=")
    if not sep or not name or not level.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=LEVEL (e.g. metadata.version=2)")
    return name.strip(), int(level)


def cmd_features_upgrade(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Raise feature levels: one FeatureLevelRecord each, in one batch."""
    updates = dict(args.feature)
    if settings.bootstrap_server:
        raise CliError(
            "mlog features upgrade writes to the data directory (--data-dir) only; run it on "
            "the node's data directory while it is stopped, or on a quorum's leader"
        )
    if args.dry_run:
        upgrade_features(fetch_image(settings, args), updates)  # raises what the upgrade would
        emit(settings, out, {"upgrades": updates, "dry_run": True}, _text(updates, True))
        return EXIT_OK
    with open_target(settings, args) as target:
        assert isinstance(target, LocalTarget)
        target.run(lambda _ctl, working: upgrade_features(working, updates))
    emit(settings, out, {"upgrades": updates, "dry_run": False}, _text(updates, False))
    return EXIT_OK


def _text(updates: dict[str, int], dry_run: bool) -> str:
    done = "would be upgraded" if dry_run else "upgraded"
    return "; ".join(f"{name} {done} to level {level}" for name, level in sorted(updates.items()))


def add_verbs(features: argparse.ArgumentParser) -> None:
    """The verbs of `mlog features` and their flags, on the noun's parser."""
    verbs = features.add_subparsers(dest="verb", metavar="VERB", required=True)
    describe = verbs.add_parser(
        "describe", help="each known feature's supported and finalized levels"
    )
    add_global_options(describe)
    describe.set_defaults(handler=cmd_features_describe)
    upgrade = verbs.add_parser("upgrade", help="raise feature levels (FeatureLevelRecords)")
    add_global_options(upgrade)
    upgrade.add_argument(
        "--feature",
        type=_update,
        action="append",
        required=True,
        metavar="NAME=LEVEL",
        help="a feature and its new level (repeatable), e.g. metadata.version=2",
    )
    upgrade.add_argument("--dry-run", action="store_true", help="check only; write nothing")
    upgrade.set_defaults(handler=cmd_features_upgrade)
