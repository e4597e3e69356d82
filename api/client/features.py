"""`AdminClient`'s feature levels: ApiVersions' feature fields and UpdateFeatures (57).

`mlog features` and kafka-features use them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from api.client.apis import INT16_RANGE, ClientApis, fits
from api.client.connection import RemoteError
from api.protocol import codec
from replay.features import FeatureResult, FeatureUpdate, UpgradeType


class FeatureApis(ClientApis):
    """Describe and update the cluster's feature levels."""

    # UpdateFeatures (57) and ApiVersions' feature fields: `mlog features`, kafka-features.

    async def describe_features(self) -> FeatureLevels:
        """The server's supported and finalized feature levels (ApiVersions v3+)."""
        answer = await self.request(
            codec.API_VERSIONS_KEY,
            client_software_name="metadata-log",
            client_software_version="1",
        )
        if int(answer.error_code) != 0:
            raise RemoteError(int(answer.error_code), "ApiVersions was refused")
        return FeatureLevels(
            supported={
                str(k.name): (int(k.min_version), int(k.max_version))
                for k in answer.supported_features
            },
            finalized={str(k.name): int(k.max_version_level) for k in answer.finalized_features},
            epoch=int(answer.finalized_features_epoch),
        )

    async def update_features(
        self, updates: Sequence[FeatureUpdate], *, validate_only: bool = False
    ) -> list[FeatureResult]:
        """UpdateFeatures: one result per update (a refusal as a whole: on every one).

        Sent like a write (to the leader, again after NOT_CONTROLLER): an update to the
        level a feature already has writes nothing, so a retry is harmless.
        """
        for update in updates:
            fits(update.level, INT16_RANGE, f"the level of {update.name}")
        response = await self.write(
            57,
            timeout=60_000,
            feature_updates=[
                {
                    "feature": u.name,
                    "max_version_level": u.level,
                    "upgrade_type": int(u.upgrade_type),
                    "allow_downgrade": u.upgrade_type != UpgradeType.UPGRADE,
                }
                for u in updates
            ],
            validate_only=validate_only,
        )
        top = int(response.error_code)
        results = getattr(response, "results", None)
        if results is None:  # v2: the top-level error only
            return [
                FeatureResult(name=u.name, error_code=top, error_message=response.error_message)
                for u in updates
            ]
        return [
            FeatureResult(
                name=str(r.feature), error_code=int(r.error_code), error_message=r.error_message
            )
            for r in results
        ]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FeatureLevels:
    """What a server says of feature levels: its supported ranges and the finalized levels."""

    supported: dict[str, tuple[int, int]]
    finalized: dict[str, int]
    epoch: int
    """The finalized levels' epoch: the offset of the image they were read from (-1: none)."""
