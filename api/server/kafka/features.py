"""Feature levels on the wire: UpdateFeatures (API 57) and ApiVersions' feature fields.

UpdateFeatures is Kafka's (KIP-584, KIP-778): each item names a feature, its new level and,
from v1, how it may move (`replay.features.UpgradeType`; v0's `allow_downgrade` means a safe
downgrade). It needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise, on every
item), is checked against this node's supported levels and, in a quorum, against every
voter's (`api.server.feature_support`), then written through the service as one atomic batch
of FeatureLevelRecords, or not at all when one item is refused (INVALID_UPDATE_VERSION, the
item naming why; the others say they were not made). `validate_only` checks and writes
nothing. A quorum node that does not lead forwards it to the leader (`forwarding.py`); where
it cannot, it answers NOT_CONTROLLER and asks no voter.

ApiVersions v3+ carries `supported_features` (this node's ranges), `finalized_features` and
`finalized_features_epoch` (the committed image's levels, at its offset; -1 while nothing is
replayed, Kafka's "unknown"), as Kafka's does; in v3, as in Kafka, a feature whose lowest
level is 0 is reported from 1, and a finalized level 0 is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.protocol.codec import KafkaRequest
from api.server.feature_support import (
    FeatureSupport,
    LocalSupport,
    node_supported_features,
    shortfall,
)
from api.server.kafka.authorization import Gate
from api.server.kafka.base import HandlerGroup, Listener, QuorumView, Session
from api.service.service import MetadataService
from replay.controller.commands import ControllerResult
from replay.controller.errors import ApiError, ErrorCode
from replay.features import (
    DYNAMIC_VOTERS_KRAFT_VERSION,
    KNOWN_FEATURES,
    KRAFT_VERSION,
    FeatureRange,
    FeatureResult,
    FeatureUpdate,
    FeatureUpgradeError,
    UpgradeType,
    finalized_level,
    update_features,
)
from replay.image import MetadataImage

UPDATE_FEATURES_KEY = 57

NOT_LEADER_OR_FOLLOWER = 6
"""The quorum's answer on a node that no longer leads (Kafka's code)."""


def api_versions_features(
    image: MetadataImage, version: int, supported: Mapping[str, FeatureRange]
) -> dict[str, Any]:
    """ApiVersions' feature fields for a response of `version` (none before v3)."""
    if version < 3:
        return {}
    alter_level_0 = version < 4  # Kafka's v0-v3 clients cannot take a level 0
    keys = []
    for name, known in sorted(supported.items()):
        low = known.min_level
        if alter_level_0 and low == 0:
            if known.max_level == 0:
                continue
            low = 1
        keys.append({"name": name, "min_version": low, "max_version": known.max_level})
    finalized = []
    for name in sorted(image.features.levels):
        level = finalized_level(image, name)
        if alter_level_0 and level == 0:
            continue
        finalized.append({"name": name, "max_version_level": level, "min_version_level": level})
    return {
        "supported_features": keys,
        "finalized_features_epoch": image.provenance.offset,  # -1: nothing replayed yet
        "finalized_features": finalized,
    }


class FeatureApis(HandlerGroup):
    """UpdateFeatures, and the feature fields of ApiVersions."""

    def __init__(
        self,
        service: MetadataService,
        listener: Listener,
        gate: Gate | None = None,
        *,
        support: FeatureSupport | None = None,
        supported: Mapping[str, FeatureRange] | None = None,
    ) -> None:
        super().__init__(service, listener, gate)
        self.support: FeatureSupport = support or LocalSupport()
        """Asks the other voters whether they support a new level (none on a single server)."""
        self.supported = node_supported_features() if supported is None else supported
        """The levels this node supports (its code's, lowered by the test hook)."""

    def feature_fields(self, version: int) -> dict[str, Any]:
        """ApiVersions' feature fields for a response of `version`, from the committed image."""
        return api_versions_features(self.service.image, version, self.supported)

    async def update_features(self, request: KafkaRequest, session: Session) -> Any:
        """Upgrade or downgrade finalized levels; one result per feature (see the module)."""
        body = request.body
        version = request.header.api_version
        # ALTER on the cluster was checked before this ran (`dispatch.CLUSTER_CHECKS`).
        updates = [_update(item, version) for item in body.feature_updates]
        validate_only = bool(getattr(body, "validate_only", False))
        supported = self.supported
        quorum = self.listener.quorum
        if quorum is not None and quorum.leader_id != self.listener.node_id:
            # Not forwarded (no leader reachable): never asked of the voters from here.
            raise ApiError(
                ErrorCode.NOT_CONTROLLER,
                f"this node does not lead (leader: {quorum.leader_id}); send it to the leader",
            )
        if quorum is not None and not quorum.dynamic and _moves_voters(updates):
            return await self._upgrade_voters(request, updates, quorum, session, validate_only)
        image = self.service.image
        # In a quorum this node is one of the voters asked: its own (possibly lowered)
        # support is checked as theirs, so a refusal names it as it would name another.
        checked = update_features(
            image,
            updates,
            supported=KNOWN_FEATURES if quorum is not None else supported,
            validate_only=True,
        ).response
        if all(r.error_code == 0 for r in checked):
            raised = {
                u.name: u.level
                for u in updates
                if u.upgrade_type == UpgradeType.UPGRADE
                and u.level > finalized_level(image, u.name)
            }
            try:
                if quorum is not None:
                    own = {n: (k.min_level, k.max_level) for n, k in supported.items()}
                    refused = shortfall(self.listener.node_id, own, raised)
                    if refused is not None:
                        raise refused
                await self.support.check(raised)
            except ApiError as exc:
                checked = [_failed(u.name, exc) for u in updates]
                return self._respond(request, checked, exc)

        def command(image: MetadataImage) -> ControllerResult[list[FeatureResult]]:
            return update_features(image, updates, supported=supported, validate_only=validate_only)

        results: list[FeatureResult] = await self.service.submit(
            command, principal=session.principal
        )
        if not validate_only:
            self._log_change(
                session.principal,
                "update feature",
                (
                    (f"{r.name}={u.level}", r.error_code)
                    for r, u in zip(results, updates, strict=True)
                ),
            )
        first = next((r for r in results if r.error_code and not r.blocked), None)
        top = (
            None
            if first is None
            else ApiError(ErrorCode(first.error_code), first.error_message or "refused")
        )
        return self._respond(request, results, top)

    async def _upgrade_voters(
        self,
        request: KafkaRequest,
        updates: list[FeatureUpdate],
        quorum: QuorumView,
        session: Session,
        validate_only: bool,
    ) -> Any:
        """kraft.version 1 on a static quorum: its voters into the log, in place (KIP-853).

        As Kafka's leader does on `kafka-features upgrade --feature kraft.version=1`: refused
        unless every voter supports the level (asked as for any upgrade); then the leader
        appends one block of the level's records and a VotersRecord of the static voters
        (`QuorumNode.upgrade_voters`), answered once committed. From then on every node takes
        its voters from the log, and `mlog quorum add-controller` / `remove-controller` work.
        """
        level = {KRAFT_VERSION: DYNAMIC_VOTERS_KRAFT_VERSION}
        try:
            if len(updates) > 1:
                raise FeatureUpgradeError(
                    "kraft.version 1 moves this static quorum's voters into the log: upgrade it "
                    "in a request of its own, then the other features"
                )
            own = {n: (k.min_level, k.max_level) for n, k in self.supported.items()}
            refused = shortfall(self.listener.node_id, own, level)
            if refused is not None:
                raise refused
            await self.support.check(level)
            if not validate_only:
                code, message = await quorum.upgrade_voters()
                if code:
                    raise _upgrade_refusal(code, message)
        except ApiError as exc:
            self._log_change(
                session.principal, "update feature", ((KRAFT_VERSION, int(exc.error_code)),)
            )
            return self._respond(request, [_failed(u.name, exc) for u in updates], exc)
        if not validate_only:
            self._log_change(session.principal, "update feature", ((f"{KRAFT_VERSION}=1", 0),))
        return self._respond(request, [FeatureResult(name=KRAFT_VERSION)], None)

    def _respond(
        self, request: KafkaRequest, results: list[FeatureResult], top: ApiError | None
    ) -> Any:
        """The response: per-feature results (v0-1); v2 has the top-level error only."""
        return self._answer(
            request,
            throttle_time=0,
            error_code=0 if top is None else int(top.error_code),
            error_message=None if top is None else top.message,
            results=[
                {"feature": r.name, "error_code": r.error_code, "error_message": r.error_message}
                for r in results
            ],
        )


def _moves_voters(updates: list[FeatureUpdate]) -> bool:
    """Whether an update upgrades kraft.version to 1 (on a static quorum: its voters move)."""
    return any(
        u.name == KRAFT_VERSION
        and u.level == DYNAMIC_VOTERS_KRAFT_VERSION
        and u.upgrade_type == UpgradeType.UPGRADE
        for u in updates
    )


def _upgrade_refusal(code: int, message: str | None) -> ApiError:
    """The quorum's refusal of the upgrade as UpdateFeatures answers it.

    NOT_LEADER_OR_FOLLOWER is NOT_CONTROLLER there (the client finds the leader again); a
    code UpdateFeatures does not know is INVALID_UPDATE_VERSION, with the quorum's message.
    """
    if code == NOT_LEADER_OR_FOLLOWER:
        return ApiError(ErrorCode.NOT_CONTROLLER, message or "this node no longer leads")
    try:
        known = ErrorCode(code)
    except ValueError:
        known = ErrorCode.INVALID_UPDATE_VERSION
    return ApiError(known, message or f"the quorum refused the upgrade (error {code})")


def _failed(name: str, error: ApiError) -> FeatureResult:
    return FeatureResult(name=name, error_code=int(error.error_code), error_message=error.message)


def _update(item: Any, version: int) -> FeatureUpdate:
    """One request item as an update (v0: `allow_downgrade` is a safe downgrade)."""
    if version == 0:
        kind = UpgradeType.SAFE_DOWNGRADE if item.allow_downgrade else UpgradeType.UPGRADE
        return FeatureUpdate(
            name=item.feature, level=int(item.max_version_level), upgrade_type=kind
        )
    try:
        kind = UpgradeType(int(item.upgrade_type))
    except ValueError:
        raise ApiError(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"unknown upgrade type {int(item.upgrade_type)} for {item.feature}; use 1 "
            "(upgrade), 2 (safe downgrade) or 3 (unsafe downgrade)",
        ) from None
    return FeatureUpdate(name=item.feature, level=int(item.max_version_level), upgrade_type=kind)
