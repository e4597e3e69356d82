"""FeaturesDelta: feature levels changed by FeatureLevelRecords."""

from __future__ import annotations

from records.model import FeatureLevelRecord
from replay.errors import FeatureReplayError
from replay.image import FeaturesImage


class FeaturesDelta:
    """Feature levels set since the base image (level 0 removes the feature)."""

    __slots__ = ("_levels", "image")

    def __init__(self, image: FeaturesImage) -> None:
        self.image = image
        self._levels: dict[str, int] = {}

    def replay_feature_level(self, record: FeatureLevelRecord) -> None:
        """Set a feature's level; a negative level breaks `feature.level-nonnegative`."""
        if record.feature_level < 0:
            raise FeatureReplayError(
                "feature.level-nonnegative",
                f"feature {record.name!r} cannot have level {record.feature_level}",
            )
        self._levels[record.name] = record.feature_level

    def apply(self) -> FeaturesImage:
        """The features image with the changes applied (the base itself if none)."""
        if not self._levels:
            return self.image
        with self.image.levels.mutate() as levels:
            for name, level in self._levels.items():
                if level == 0:
                    levels.pop(name, None)
                else:
                    levels[name] = level
            finished = levels.finish()
        return FeaturesImage(levels=finished)
