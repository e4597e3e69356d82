"""Which feature levels every voter of a quorum supports: asked before an upgrade is written.

An upgrade of `metadata.version` or `kraft.version` switches on a format; a voter whose code
cannot read it must not be shown it, so the leader asks each voter's ApiVersions
(`supported_features`, as Kafka's controller learns them from registrations) at upgrade time
and refuses the upgrade (INVALID_UPDATE_VERSION) naming a voter that does not support the
level, or that does not answer within `ASK_TIMEOUT_MS`: it cannot be known to support it.

`FeatureSupport` is the check; `LocalSupport` (a single server: no other node) asks nobody,
`QuorumSupport` asks the other voters at their `controller.quorum.voters` addresses, over
connections secured as the controllers' own links are.

`SUPPORTED_FEATURES_ENV` is a test hook that makes this node claim less than its code
supports (as a node of an older release would), so the refusal can be shown with real
processes: `MLOG_TEST_SUPPORTED_FEATURES=metadata.version=1`. It only lowers; it is read
once by `node_supported_features`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from api.client.connection import ClientConnection, ClientError
from api.protocol.codec import API_VERSIONS_KEY
from api.security.client_config import ClientSecurity
from replay.controller.errors import ApiError, ErrorCode
from replay.features import KNOWN_FEATURES, FeatureRange, FeatureUpgradeError, capped_features

ASK_TIMEOUT_MS = 3_000
"""How long connecting to one voter and its ApiVersions answer may take, in all (they are
asked at once, so an upgrade waits this long at most for them)."""

SUPPORTED_FEATURES_ENV = "MLOG_TEST_SUPPORTED_FEATURES"
"""Test hook: `NAME=LEVEL[,NAME=LEVEL]`, the highest level this node claims for each."""

Ranges = Mapping[str, tuple[int, int]]
"""Supported `(min, max)` levels by feature name."""


def node_supported_features(env: Mapping[str, str] | None = None) -> Mapping[str, FeatureRange]:
    """The features this node supports: its code's, capped by `SUPPORTED_FEATURES_ENV`."""
    text = (os.environ if env is None else env).get(SUPPORTED_FEATURES_ENV, "").strip()
    if not text:
        return KNOWN_FEATURES
    caps: dict[str, int] = {}
    for part in text.split(","):
        name, sep, level = part.strip().partition("=")
        if not sep or not level.strip().isdigit():
            raise ValueError(f"{SUPPORTED_FEATURES_ENV}: {part!r} is not NAME=LEVEL")
        caps[name.strip()] = int(level)
    try:
        return capped_features(caps)
    except ValueError as exc:
        raise ValueError(f"{SUPPORTED_FEATURES_ENV}: {exc}") from None


class FeatureSupport(Protocol):
    """Refuses an upgrade that a voter of the quorum does not support."""

    async def check(self, levels: Mapping[str, int]) -> None:
        """Return if every voter supports each feature at its new level; else `ApiError`."""


class LocalSupport:
    """A single server: no other node to ask (its own code was checked with the update)."""

    async def check(self, levels: Mapping[str, int]) -> None:
        """Nothing to ask: this node is the only one."""


class VoterView(Protocol):
    """What the check needs of the quorum node (`api.raft.node.QuorumNode`)."""

    @property
    def node_id(self) -> int:
        """The id of this node."""

    def voter_addresses(self) -> dict[int, tuple[str, int]]:
        """Each voter's `(host, port)`, by node id."""


class QuorumSupport:
    """Asks every other voter's ApiVersions for its supported features (see the module)."""

    def __init__(
        self,
        node: VoterView,
        *,
        security: ClientSecurity | None = None,
        timeout_ms: int = ASK_TIMEOUT_MS,
    ) -> None:
        self.node = node
        self.security = security
        self.timeout_ms = timeout_ms

    async def check(self, levels: Mapping[str, int]) -> None:
        """Refuse (INVALID_UPDATE_VERSION) naming the first voter, by id, that falls short."""
        if not levels:
            return
        others = sorted(
            (node_id, address)
            for node_id, address in self.node.voter_addresses().items()
            if node_id != self.node.node_id
        )
        answers = await asyncio.gather(*(self._ask(address) for _, address in others))
        for (node_id, (host, port)), ranges in zip(others, answers, strict=True):
            if isinstance(ranges, str):
                raise FeatureUpgradeError(
                    f"voter {node_id} ({host}:{port}) cannot tell which feature levels it "
                    f"supports ({ranges}); start it and retry, or remove it from the quorum"
                )
            refusal = shortfall(node_id, ranges, levels)
            if refusal is not None:
                raise refusal

    async def _ask(self, address: tuple[str, int]) -> Ranges | str:
        """The voter's supported features, or why they could not be had."""
        host, port = address
        bootstrap = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            async with asyncio.timeout(self.timeout_ms / 1000):
                async with await ClientConnection.connect(
                    bootstrap,
                    client_id="mlog-controller-features",
                    timeout_ms=self.timeout_ms,
                    security=self.security,
                ) as connection:
                    answer = await connection.request(
                        API_VERSIONS_KEY,
                        client_software_name="metadata-log",
                        client_software_version="1",
                    )
        except TimeoutError:
            return f"no answer within {self.timeout_ms} ms"
        except (ClientError, ApiError, OSError) as exc:
            return str(exc)
        if int(answer.error_code) != 0:
            return f"ApiVersions error {int(answer.error_code)}"
        return features_of(answer.supported_features)


def features_of(keys: Sequence[Any]) -> Ranges:
    """ApiVersions `supported_features` (kio entities) as `{name: (min, max)}`."""
    return {str(key.name): (int(key.min_version), int(key.max_version)) for key in keys}


def shortfall(node_id: int, ranges: Ranges, levels: Mapping[str, int]) -> ApiError | None:
    """The refusal naming `node_id` if it does not support every level (None: it does)."""
    for name, level in sorted(levels.items()):
        low, high = ranges.get(name, (0, 0))
        if not low <= level <= high:
            supports = "does not know it" if name not in ranges else f"supports {low}..{high}"
            return ApiError(
                ErrorCode.INVALID_UPDATE_VERSION,
                f"voter {node_id} {supports} of {name}, not level {level}; upgrade it to a "
                "version that supports the level first",
            )
    return None
