"""`mlog features describe|upgrade|downgrade`: feature levels, in the manner of kafka-features.

`describe` lists each feature with the levels the node supports, the level the log's
FeatureLevelRecords finalized and the epoch of that answer (the offset of the image it was
read from): from the data directory, or from a server's ApiVersions with `--bootstrap-server`
(any node of a quorum; a follower's finalized levels may trail the leader's by a moment).

`upgrade --feature NAME=LEVEL` (or `--metadata LEVEL` for `metadata.version`) raises levels;
`downgrade` lowers them, safely unless `--unsafe`; `--dry-run` checks without writing. With
`--bootstrap-server` it is UpdateFeatures (API 57), sent to the quorum's leader, which refuses
a level that any voter does not support; on a data directory it appends the records there.
Raise a level only once every node runs a version that supports it (docs/operating.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from api.cli.common import EXIT_OK, CliError, add_global_options
from api.cli.output import emit, print_table
from api.cli.targets import open_target
from api.targets import LocalTarget, RemoteTarget
from replay.features import (
    KNOWN_FEATURES,
    FeatureResult,
    FeatureUpdate,
    UpgradeType,
    finalized_level,
    update_features,
)
from replay.image import METADATA_VERSION

if TYPE_CHECKING:
    from api.service.settings import Settings

HEADERS = (
    "Feature",
    "SupportedMinVersion",
    "SupportedMaxVersion",
    "FinalizedVersionLevel",
    "Epoch",
)


def cmd_features_describe(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Each known feature: supported levels, the finalized one and its epoch."""
    with open_target(settings, args) as target:
        if isinstance(target, RemoteTarget):
            levels = target.wait(target.client.describe_features)
            supported, finalized, epoch = levels.supported, levels.finalized, levels.epoch
        else:
            image = target.image()
            supported = {n: (k.min_level, k.max_level) for n, k in KNOWN_FEATURES.items()}
            finalized = {n: finalized_level(image, n) for n in KNOWN_FEATURES}
            epoch = image.provenance.offset
    items: list[dict[str, Any]] = [
        {
            "feature": name,
            "supported_min_level": supported[name][0] if name in supported else None,
            "supported_max_level": supported[name][1] if name in supported else None,
            "finalized_level": finalized.get(name, 0),
            "epoch": epoch,
        }
        for name in sorted({*supported, *finalized})
    ]
    if settings.output == "json":
        emit(settings, out, items, "")
        return EXIT_OK
    print_table([["-" if v is None else v for v in item.values()] for item in items], HEADERS, out)
    return EXIT_OK


def _update(text: str) -> tuple[str, int]:
    name, sep, level = text.partition("=")
    if not sep or not name.strip() or not level.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=LEVEL (e.g. metadata.version=2)")
    return name.strip(), int(level)


def _updates(args: argparse.Namespace, kind: UpgradeType) -> list[FeatureUpdate]:
    pairs: list[tuple[str, int]] = list(args.feature or ())
    if args.metadata is not None:
        pairs.append((METADATA_VERSION, args.metadata))
    if not pairs:
        raise CliError("nothing to change: give --feature NAME=LEVEL or --metadata LEVEL")
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise CliError("a feature is named twice; name each feature once")
    return [FeatureUpdate(name=name, level=level, upgrade_type=kind) for name, level in pairs]


def _change(args: argparse.Namespace, settings: Settings, out: TextIO, kind: UpgradeType) -> int:
    """Upgrade or downgrade: UpdateFeatures on a server, the records on a data directory."""
    updates = _updates(args, kind)
    dry_run = bool(args.dry_run)
    with open_target(settings, args) as target:
        if isinstance(target, RemoteTarget):
            client = target.client
            results = target.write(lambda: client.update_features(updates, validate_only=dry_run))
        else:
            results = _local(target, updates, dry_run)
    _check(results)
    verb = "upgraded" if kind == UpgradeType.UPGRADE else "downgraded"
    done = f"would be {verb}" if dry_run else verb
    text = "; ".join(f"{u.name} {done} to level {u.level}" for u in updates)
    emit(
        settings,
        out,
        {"updates": {u.name: u.level for u in updates}, "type": kind.name, "dry_run": dry_run},
        text,
    )
    return EXIT_OK


def _local(target: LocalTarget, updates: Sequence[FeatureUpdate], dry_run: bool) -> list[Any]:
    """The update on the data directory (nothing written on a dry run or a refusal)."""
    if dry_run:
        return update_features(target.image(), updates, validate_only=True).response
    response: list[FeatureResult] = target.run(
        lambda _ctl, working: update_features(working, updates)
    )
    return response


def _check(results: Sequence[FeatureResult]) -> None:
    """Raise the first refusal (one that is not only "another was refused")."""
    refused = [r for r in results if r.error_code]
    if not refused:
        return
    first = next((r for r in refused if not r.blocked), refused[0])
    raise CliError(first.error_message or f"{first.name}: error {first.error_code}")


def cmd_features_upgrade(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Raise feature levels: one FeatureLevelRecord each, in one batch."""
    return _change(args, settings, out, UpgradeType.UPGRADE)


def cmd_features_downgrade(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Lower feature levels: safely, or with `--unsafe` where a level allows it."""
    kind = UpgradeType.UNSAFE_DOWNGRADE if args.unsafe else UpgradeType.SAFE_DOWNGRADE
    return _change(args, settings, out, kind)


def _level(text: str) -> int:
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a level (e.g. 2)")
    return int(text)


def _add_change_options(parser: argparse.ArgumentParser) -> None:
    add_global_options(parser)
    parser.add_argument(
        "--feature",
        type=_update,
        action="append",
        metavar="NAME=LEVEL",
        help="a feature and its new level (repeatable), e.g. metadata.version=2",
    )
    parser.add_argument(
        "--metadata",
        type=_level,
        metavar="LEVEL",
        help="the new metadata.version level (as --feature metadata.version=LEVEL)",
    )
    parser.add_argument("--dry-run", action="store_true", help="check only; write nothing")


def add_verbs(features: argparse.ArgumentParser) -> None:
    """The verbs of `mlog features` and their flags, on the noun's parser."""
    verbs = features.add_subparsers(dest="verb", metavar="VERB", required=True)
    describe = verbs.add_parser(
        "describe", help="each feature's supported and finalized levels, and their epoch"
    )
    add_global_options(describe)
    describe.set_defaults(handler=cmd_features_describe)
    upgrade = verbs.add_parser("upgrade", help="raise feature levels (FeatureLevelRecords)")
    _add_change_options(upgrade)
    upgrade.set_defaults(handler=cmd_features_upgrade)
    downgrade = verbs.add_parser("downgrade", help="lower feature levels (refused if unsafe)")
    _add_change_options(downgrade)
    downgrade.add_argument(
        "--unsafe",
        action="store_true",
        help="allow a downgrade that may lose metadata (refused where a level forbids it)",
    )
    downgrade.set_defaults(handler=cmd_features_downgrade)
