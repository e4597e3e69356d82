"""The feature flags this code knows (Kafka's `kafka-features` table) and upgrades of them.

A feature's finalized level is what the log's `FeatureLevelRecord`s say (`image.features`);
this code supports levels `min_level..max_level` of each feature it knows. An upgrade is a
FeatureLevelRecord appended like any write, refused when the level is not supported here or
is not higher than the finalized one (downgrades are not offered: a level may have switched
on a format older code cannot read).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from records.model import FeatureLevelRecord
from replay.controller.commands import ControllerResult
from replay.controller.errors import ApiError, ErrorCode
from replay.image import METADATA_VERSION, MetadataImage

KRAFT_VERSION = "kraft.version"
CHAINED_METADATA_VERSION = 2
"""The `metadata.version` from which a quorum keeps the log's hash chain (metadata_log.chain)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureRange:
    """The levels of one feature this code supports, and what each level brings."""

    min_level: int
    max_level: int
    levels: Mapping[int, str]


KNOWN_FEATURES: Mapping[str, FeatureRange] = {
    METADATA_VERSION: FeatureRange(
        min_level=1,
        max_level=CHAINED_METADATA_VERSION,
        levels={
            1: "the log format of the first release",
            2: "quorum nodes keep the hash chain over the log's blocks (digests, proofs)",
        },
    ),
    KRAFT_VERSION: FeatureRange(
        min_level=0,
        max_level=1,
        levels={0: "static voters (controller.quorum.voters)", 1: "dynamic voters (KIP-853)"},
    ),
}
"""Every feature this code knows, by name."""


class FeatureUpgradeError(ApiError):
    """An upgrade that this code cannot make; the message says why (INVALID_REQUEST)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST, message)


def finalized_level(image: MetadataImage, name: str) -> int:
    """The finalized level of `name` (0 when the log never set it)."""
    return image.features.levels.get(name, 0)


def upgrade_features(
    image: MetadataImage, updates: Mapping[str, int]
) -> ControllerResult[dict[str, int]]:
    """FeatureLevelRecords raising each feature of `updates` (validated all before any)."""
    records = []
    for name, level in sorted(updates.items()):
        known = KNOWN_FEATURES.get(name)
        if known is None:
            raise FeatureUpgradeError(
                f"unknown feature {name!r}; this version knows {', '.join(sorted(KNOWN_FEATURES))}"
            )
        current = finalized_level(image, name)
        if not known.min_level <= level <= known.max_level:
            raise FeatureUpgradeError(
                f"{name} level {level} is not supported by this version (it supports "
                f"{known.min_level}..{known.max_level}); upgrade every node first"
            )
        if level <= current:
            raise FeatureUpgradeError(
                f"{name} is already at level {current}; an upgrade must raise it (downgrades "
                "are not supported)"
            )
        records.append(FeatureLevelRecord(name=name, feature_level=level))
    return ControllerResult(records=tuple(records), response=dict(updates))
