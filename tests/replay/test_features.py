"""Feature updates as the controller computes them: Kafka's upgrade types, all or nothing."""

from __future__ import annotations

import pytest

from records.model import FeatureLevelRecord
from replay.delta.metadata import MetadataDelta
from replay.features import (
    KRAFT_VERSION,
    FeatureUpdate,
    UpgradeType,
    capped_features,
    kraft_version,
    update_features,
)
from replay.image import EMPTY_IMAGE, METADATA_VERSION, MetadataImage, Provenance


def _image(*levels: tuple[str, int]) -> MetadataImage:
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay_all(FeatureLevelRecord(name=n, feature_level=v) for n, v in levels)
    return delta.apply(Provenance(offset=len(levels) - 1, epoch=0, timestamp=0))


def test_kraft_version_is_zero_until_a_record_raises_it() -> None:
    assert kraft_version(_image((METADATA_VERSION, 2))) == 0
    assert kraft_version(_image((METADATA_VERSION, 2), (KRAFT_VERSION, 1))) == 1


def test_an_upgrade_writes_one_record_per_raised_feature_and_none_for_a_kept_one() -> None:
    image = _image((METADATA_VERSION, 1))
    result = update_features(
        image,
        [
            FeatureUpdate(name=METADATA_VERSION, level=2),
            FeatureUpdate(name=KRAFT_VERSION, level=0),
        ],
    )
    assert result.records == (FeatureLevelRecord(name=METADATA_VERSION, feature_level=2),)
    assert [r.error_code for r in result.response] == [0, 0]
    checked = update_features(
        image, [FeatureUpdate(name=METADATA_VERSION, level=2)], validate_only=True
    )
    assert checked.records == () and checked.response[0].error_code == 0


def test_one_refusal_blocks_every_update_of_the_request() -> None:
    result = update_features(
        _image((METADATA_VERSION, 2)),
        [
            FeatureUpdate(name=KRAFT_VERSION, level=1),
            FeatureUpdate(
                name=METADATA_VERSION, level=1, upgrade_type=UpgradeType.UNSAFE_DOWNGRADE
            ),
            FeatureUpdate(name=KRAFT_VERSION, level=1),
        ],
    )
    assert result.records == ()
    first, refused, twice = result.response
    assert first.blocked and "another update was refused" in (first.error_message or "")
    assert not refused.blocked and refused.error_code == 95
    assert "cannot be downgraded even unsafely" in (refused.error_message or "")
    assert not twice.blocked and "named twice" in (twice.error_message or "")


def test_capping_only_lowers_supported_levels() -> None:
    assert capped_features({KRAFT_VERSION: 0})[KRAFT_VERSION].max_level == 0
    with pytest.raises(ValueError, match="no supported level"):
        capped_features({KRAFT_VERSION: 2})
