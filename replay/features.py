"""The feature flags this code knows (Kafka's `kafka-features` table) and updates of them.

A feature's finalized level is what the log's `FeatureLevelRecord`s say (`image.features`);
this code supports levels `min_level..max_level` of each feature it knows. An update is a
FeatureLevelRecord appended like any write (UpdateFeatures, API 57, or `mlog features`), with
Kafka's upgrade types: an UPGRADE may only raise a level (or leave it as it is: nothing is
written), a SAFE_DOWNGRADE or UNSAFE_DOWNGRADE may only lower it. Every refusal is Kafka's
INVALID_UPDATE_VERSION, naming the feature and what to do. Neither feature here can be
lowered: each level switches on something older code cannot read (`FeatureRange.downgrade`).

Whether the other nodes of a quorum support a new level is asked of them by the server
(`api.server.feature_support`); this module checks this node's code only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum

from records.model import FeatureLevelRecord
from replay.controller.commands import ControllerResult
from replay.controller.errors import ApiError, ErrorCode
from replay.image import METADATA_VERSION, MetadataImage

KRAFT_VERSION = "kraft.version"
CHAINED_METADATA_VERSION = 2
"""The `metadata.version` from which a quorum keeps the log's hash chain (metadata_log.chain)."""

DYNAMIC_VOTERS_KRAFT_VERSION = 1
"""The `kraft.version` from which a quorum writes VotersRecord and KRaftVersionRecord (KIP-853)."""


class UpgradeType(IntEnum):
    """How an update may move a level (UpdateFeatures v1+ `upgrade_type`, Kafka's values)."""

    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureRange:
    """The levels of one feature this code supports, and what each level brings."""

    min_level: int
    max_level: int
    levels: Mapping[int, str]
    downgrade: str
    """Why the finalized level cannot be lowered (every level here brings a format)."""


KNOWN_FEATURES: Mapping[str, FeatureRange] = {
    METADATA_VERSION: FeatureRange(
        min_level=1,
        max_level=CHAINED_METADATA_VERSION,
        levels={
            1: "the log format of the first release",
            2: "quorum nodes keep the hash chain over the log's blocks (digests, proofs)",
        },
        downgrade="blocks written at its level carry a format older code cannot read",
    ),
    KRAFT_VERSION: FeatureRange(
        min_level=0,
        max_level=DYNAMIC_VOTERS_KRAFT_VERSION,
        levels={0: "static voters (controller.quorum.voters)", 1: "dynamic voters (KIP-853)"},
        downgrade="the log may hold VotersRecords that static-voter code cannot read",
    ),
}
"""Every feature this code knows, by name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureUpdate:
    """One feature's requested level and how it may move (an UpdateFeatures item)."""

    name: str
    level: int
    upgrade_type: UpgradeType = UpgradeType.UPGRADE


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureResult:
    """The outcome of one update: its error code (0: done, or would be) and why."""

    name: str
    error_code: int = 0
    error_message: str | None = None
    blocked: bool = False
    """Refused only because another update of the same request was (nothing is written)."""


class FeatureUpgradeError(ApiError):
    """An update that cannot be made; the message says why (INVALID_UPDATE_VERSION)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_UPDATE_VERSION, message)


def finalized_level(image: MetadataImage, name: str) -> int:
    """The finalized level of `name` (0 when the log never set it)."""
    return image.features.levels.get(name, 0)


def kraft_version(image: MetadataImage) -> int:
    """The quorum's finalized `kraft.version`: VotersRecord/KRaftVersionRecord need >= 1."""
    return finalized_level(image, KRAFT_VERSION)


def capped_features(caps: Mapping[str, int]) -> Mapping[str, FeatureRange]:
    """`KNOWN_FEATURES` with the highest supported level of some features lowered to `caps`.

    What a node of an older release would support: the server's test hook
    (`api.service.feature_support.SUPPORTED_FEATURES_ENV`). A cap outside a feature's
    range, or of a feature this code does not know, is a `ValueError`.
    """
    supported = dict(KNOWN_FEATURES)
    for name, cap in caps.items():
        known = supported.get(name)
        if known is None or not known.min_level <= cap <= known.max_level:
            raise ValueError(f"no supported level {name}={cap} to cap at")
        supported[name] = replace(known, max_level=cap)
    return supported


def check_update(
    image: MetadataImage,
    update: FeatureUpdate,
    supported: Mapping[str, FeatureRange] = KNOWN_FEATURES,
) -> FeatureLevelRecord | None:
    """The record making `update` (None: the level is already that); `FeatureUpgradeError`."""
    name, level = update.name, update.level
    known = supported.get(name)
    if known is None:
        raise FeatureUpgradeError(
            f"unknown feature {name!r}; this version knows {', '.join(sorted(supported))}"
        )
    current = finalized_level(image, name)
    if level == current:
        return None
    if not known.min_level <= level <= known.max_level:
        raise FeatureUpgradeError(
            f"{name} level {level} is not supported by this version (it supports "
            f"{known.min_level}..{known.max_level}); upgrade every node first"
        )
    if update.upgrade_type == UpgradeType.UPGRADE:
        if level < current:
            raise FeatureUpgradeError(
                f"{name} is at level {current}; lowering it to {level} needs a downgrade "
                "(mlog features downgrade), not an upgrade"
            )
        return FeatureLevelRecord(name=name, feature_level=level)
    if level > current:
        raise FeatureUpgradeError(
            f"{name} is at level {current}; raising it to {level} is an upgrade, not a downgrade"
        )
    kind = "safely" if update.upgrade_type == UpgradeType.SAFE_DOWNGRADE else "even unsafely"
    raise FeatureUpgradeError(
        f"{name} cannot be downgraded {kind} from level {current} to {level}: {known.downgrade}"
    )


def update_features(
    image: MetadataImage,
    updates: Sequence[FeatureUpdate],
    *,
    supported: Mapping[str, FeatureRange] = KNOWN_FEATURES,
    validate_only: bool = False,
) -> ControllerResult[list[FeatureResult]]:
    """FeatureLevelRecords making every update, or none when one is refused (Kafka's rule).

    One result per update in order: a refused update carries its own error; when any is
    refused nothing is written, and the others carry INVALID_UPDATE_VERSION naming the
    refusal. `validate_only` checks and writes nothing.
    """
    records: list[FeatureLevelRecord] = []
    errors: list[FeatureUpgradeError | None] = []
    seen: set[str] = set()
    for update in updates:
        try:
            if update.name in seen:
                raise FeatureUpgradeError(f"{update.name} is named twice; name each feature once")
            seen.add(update.name)
            record = check_update(image, update, supported)
        except FeatureUpgradeError as exc:
            errors.append(exc)
            continue
        errors.append(None)
        if record is not None:
            records.append(record)
    first = next((error for error in errors if error is not None), None)
    results = [
        _blocked(update, first) if error is None and first is not None else _result(update, error)
        for update, error in zip(updates, errors, strict=True)
    ]
    if first is not None or validate_only:
        return ControllerResult(records=(), response=results)
    return ControllerResult(records=tuple(records), response=results)


def _blocked(update: FeatureUpdate, first: FeatureUpgradeError) -> FeatureResult:
    """The result of an update that was fine but not made, because another one was refused."""
    return FeatureResult(
        name=update.name,
        error_code=int(first.error_code),
        error_message=f"{update.name} not updated: another update was refused ({first.message})",
        blocked=True,
    )


def _result(update: FeatureUpdate, error: ApiError | None) -> FeatureResult:
    if error is None:
        return FeatureResult(name=update.name)
    return FeatureResult(
        name=update.name, error_code=int(error.error_code), error_message=error.message
    )
