"""Broker liveness on the active controller: heartbeats, sessions, and the fences they cause.

Kafka's `BrokerHeartbeatManager`: the controller keeps, in memory only, when each broker last
heartbeated and the metadata offset it reported. A heartbeat that changes nothing is answered
from that memory and the committed image, without touching the log; one that changes a
broker's state (caught up: unfence; WantFence: fence; WantShutDown: controlled shutdown) runs
the broker command through the service, and is answered once it is committed. A broker whose
session (`broker.session.timeout.ms`) expires is fenced by `check_sessions`, which the server
runs every twentieth of the timeout; its leaderships and ISR places move in bounded batches.

Only brokers that registered with BrokerRegistration (or heartbeat) have sessions; one an
operator registered by hand (`mlog brokers register`) is fenced and unfenced by hand.

Only the active controller acts. A node that becomes active starts every such broker's
session afresh (a grace period of one session timeout): it cannot know when they last
heartbeated to the previous leader, and fencing them all at once would be wrong; a broker
that really is gone is fenced one timeout later.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from api.service.service import MetadataService
from records.model import RegisterBrokerRecord
from replay.controller.commands import BrokerAction, BrokerRegistration, BrokerResult
from replay.controller.errors import ApiError, ErrorCode
from replay.image import MetadataImage

logger = logging.getLogger(__name__)

DEFAULT_SESSION_TIMEOUT_MS = 9000
"""Kafka's `broker.session.timeout.ms` default."""

DEFAULT_HEARTBEAT_INTERVAL_MS = 2000
"""Kafka's `broker.heartbeat.interval.ms` default (what brokers are told to use)."""

SERVICE_PRINCIPAL = "metadata-log"
"""The principal of the fences a session expiry writes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatAnswer:
    """What a BrokerHeartbeat is answered (Kafka's fields)."""

    is_caught_up: bool
    is_fenced: bool
    should_shut_down: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerContact:
    """What the active controller knows of a broker's liveness (`mlog brokers list`)."""

    broker_id: int
    last_heartbeat_ms: int
    """Wall-clock time of the last heartbeat (or of the session's start), ms since the epoch."""
    metadata_offset: int
    """The metadata offset the broker last reported; -1 before its first heartbeat."""
    fenced_reason: str | None
    """Why this controller fenced the broker, or None."""


class _Session:
    """One broker's session: mutable, touched by every heartbeat."""

    __slots__ = ("last_ms", "offset", "wall_ms")

    def __init__(self, last_ms: int, wall_ms: int, offset: int) -> None:
        self.last_ms = last_ms
        self.wall_ms = wall_ms
        self.offset = offset


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


class BrokerLiveness:
    """Heartbeats and sessions of the brokers, for the service's active controller."""

    def __init__(
        self,
        service: MetadataService,
        *,
        session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS,
        clock_ms: Callable[[], int] = _monotonic_ms,
        wall_ms: Callable[[], int] = _wall_ms,
    ) -> None:
        self.service = service
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self._clock_ms = clock_ms
        self._wall_ms = wall_ms
        self._sessions: dict[int, _Session] = {}
        self._reasons: dict[int, str] = {}
        self._active = False
        self._fencing: set[int] = set()

    # ------------------------------------------------------------------ activity

    def _sync_active(self) -> bool:
        """Whether this node is the active controller; a node that just became it re-arms."""
        active = self.service.is_active_controller
        if active and not self._active:
            now, wall = self._clock_ms(), self._wall_ms()
            # The grace period: every registered broker's session starts now.
            self._sessions = {
                broker.broker_id: _Session(now, wall, -1)
                for broker in self.service.image.cluster.brokers.values()
                if heartbeats(broker)
            }
            self._reasons.clear()
            logger.info(
                "active controller: %d broker sessions start now (%d ms to heartbeat)",
                len(self._sessions),
                self.session_timeout_ms,
            )
        elif not active and self._active:
            self._sessions.clear()
            self._reasons.clear()
        self._active = active
        return active

    def _require_active(self) -> None:
        if not self._sync_active():
            raise ApiError(
                ErrorCode.NOT_CONTROLLER,
                "this node is not the active controller; send broker requests to the leader",
            )

    def has_live_session(self, broker_id: int) -> bool:
        """Whether the broker heartbeated within the session timeout (to this controller)."""
        session = self._sessions.get(broker_id)
        return session is not None and self._clock_ms() - session.last_ms < self.session_timeout_ms

    def contacts(self) -> list[BrokerContact]:
        """What this controller knows of each broker's liveness, by broker id."""
        self._sync_active()
        registered = self.service.image.cluster.brokers
        return [
            BrokerContact(
                broker_id=broker_id,
                last_heartbeat_ms=session.wall_ms,
                metadata_offset=session.offset,
                fenced_reason=self._reasons.get(broker_id),
            )
            for broker_id, session in sorted(self._sessions.items())
            if broker_id in registered  # an operator may have unregistered it meanwhile
        ]

    def _touch(self, broker_id: int, offset: int) -> None:
        session = self._sessions.get(broker_id)
        if session is None:
            self._sessions[broker_id] = _Session(self._clock_ms(), self._wall_ms(), offset)
        else:
            session.last_ms = self._clock_ms()
            session.wall_ms = self._wall_ms()
            session.offset = offset

    # ------------------------------------------------------------------ the APIs

    async def register(
        self, request: BrokerRegistration, *, cluster_id: str, principal: str | None
    ) -> BrokerResult:
        """BrokerRegistration: the broker starts fenced, its session starts now."""
        self._require_active()
        controller = self.service.controller
        result = await self.service.submit(
            lambda image: controller.broker_registration(
                image, request, cluster_id=cluster_id, session_alive=self.has_live_session
            ),
            principal=principal,
        )
        self._touch(request.broker_id, -1)
        self._reasons[request.broker_id] = "registered; not caught up with the metadata yet"
        return result

    async def heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        metadata_offset: int,
        *,
        want_fence: bool,
        want_shut_down: bool,
        principal: str | None,
    ) -> HeartbeatAnswer:
        """BrokerHeartbeat: the broker's next state, written only if it changes.

        Caught up means the broker's metadata offset has reached its own registration
        (Kafka's rule): from then on it has seen every record that names it.
        """
        self._require_active()
        broker = self._registered(self.service.image, broker_id, broker_epoch)
        self._touch(broker_id, metadata_offset)
        caught_up = metadata_offset >= broker.broker_epoch
        action: BrokerAction | None = None
        if broker.in_controlled_shutdown:
            pass
        elif want_shut_down:
            if broker.fenced:
                return HeartbeatAnswer(
                    is_caught_up=caught_up, is_fenced=True, should_shut_down=True
                )
            action = BrokerAction.CONTROLLED_SHUTDOWN
            self._reasons[broker_id] = "controlled shutdown (WantShutDown)"
        elif broker.fenced:
            if not want_fence and caught_up and broker_id not in self._fencing:
                action = BrokerAction.UNFENCE
        elif want_fence:
            action = BrokerAction.FENCE
            self._reasons[broker_id] = "asked to be fenced (WantFence)"
        if action is not None:
            await self._change(broker_id, action, principal)
            if action == BrokerAction.UNFENCE:
                self._reasons.pop(broker_id, None)
        image = self.service.image
        now = self._registered(image, broker_id, broker_epoch)
        shutting = now.in_controlled_shutdown
        return HeartbeatAnswer(
            is_caught_up=caught_up,
            is_fenced=now.fenced or shutting,
            should_shut_down=shutting and not _leads_any(image, broker_id),
        )

    async def unregister(self, broker_id: int, *, principal: str | None) -> BrokerResult:
        """UnregisterBroker: the registration goes, and the session with it."""
        self._require_active()
        result = await self._change(broker_id, BrokerAction.UNREGISTER, principal)
        self._sessions.pop(broker_id, None)
        self._reasons.pop(broker_id, None)
        return result

    async def _change(
        self, broker_id: int, action: BrokerAction, principal: str | None
    ) -> BrokerResult:
        controller = self.service.controller
        return await self.service.submit(
            lambda image: controller.change_broker(image, broker_id, action), principal=principal
        )

    @staticmethod
    def _registered(
        image: MetadataImage, broker_id: int, broker_epoch: int
    ) -> RegisterBrokerRecord:
        broker = image.cluster.get(broker_id)
        if broker is None:
            raise ApiError(
                ErrorCode.BROKER_ID_NOT_REGISTERED,
                f"broker {broker_id} is not registered; send BrokerRegistration first",
            )
        if broker.broker_epoch != broker_epoch:
            raise ApiError(
                ErrorCode.STALE_BROKER_EPOCH,
                f"broker {broker_id} is registered with epoch {broker.broker_epoch}, not "
                f"{broker_epoch}; register again",
            )
        return broker

    # ------------------------------------------------------------------ sessions

    async def check_sessions(self) -> list[int]:
        """Fence every unfenced broker whose session expired; the ids fenced (active only).

        One broker at a time, each fence's moves in bounded batches, as Kafka's
        `maybeFenceOneStaleBroker` does on each of its periodic checks.
        """
        if not self._sync_active():
            return []
        now = self._clock_ms()
        image = self.service.image
        expired: list[int] = []
        for broker in image.cluster.brokers.values():
            if broker.fenced or broker.broker_id in self._fencing:
                continue
            session = self._sessions.get(broker.broker_id)
            if session is None:
                if heartbeats(broker):
                    # Registered through another controller meanwhile: its session starts now.
                    self._sessions[broker.broker_id] = _Session(now, self._wall_ms(), -1)
            elif now - session.last_ms >= self.session_timeout_ms:
                expired.append(broker.broker_id)
        fenced: list[int] = []
        for broker_id in sorted(expired):
            self._fencing.add(broker_id)
            try:
                self._reasons[broker_id] = (
                    f"session expired (no heartbeat for {self.session_timeout_ms} ms)"
                )
                result = await self._change(broker_id, BrokerAction.FENCE, SERVICE_PRINCIPAL)
                logger.warning(
                    "broker %d fenced: no heartbeat for %d ms; %d partitions moved",
                    broker_id,
                    self.session_timeout_ms,
                    result.partitions_changed,
                )
                fenced.append(broker_id)
            except ApiError as exc:
                if exc.error_code != ErrorCode.BROKER_ID_NOT_REGISTERED:
                    logger.warning("fencing broker %d failed: %s", broker_id, exc)
            finally:
                self._fencing.discard(broker_id)
        return fenced

    async def run(
        self,
        *,
        interval_s: float | None = None,
        sleep: Callable[[float], Awaitable[object]] | None = None,
    ) -> None:
        """`check_sessions` every `interval_s` (default: a twentieth of the session timeout)."""
        pause = sleep or asyncio.sleep
        every = self.session_timeout_ms / 20_000 if interval_s is None else interval_s
        refused: str | None = None  # the last check's refusal, logged once while it lasts
        while True:
            try:
                await self.check_sessions()
                refused = None
            except ApiError as exc:  # NOT_CONTROLLER mid-way, storage: the next check retries
                if str(exc) != refused:
                    refused = str(exc)
                    logger.info("broker session check: %s (retried until it passes)", exc)
            await pause(every)


def heartbeats(broker: RegisterBrokerRecord) -> bool:
    """Whether a broker is expected to heartbeat: it registered with BrokerRegistration.

    Kafka's brokers always register with the features they support (`metadata.version` at
    least); an operator's registration (`mlog brokers register`, RegisterBroker) carries none:
    that broker is managed by hand and no session fences it, unless it heartbeats.
    """
    return bool(broker.features)


def _leads_any(image: MetadataImage, broker_id: int) -> bool:
    """Whether a broker leads any partition (from its index: O(what it holds))."""
    held = image.topics.by_broker.get(broker_id)
    if held is None:
        return False
    by_id = image.topics.by_id
    for topic_id, ids in held.items():
        partitions = by_id[topic_id].partitions
        if any(partitions[p].leader == broker_id for p in ids):
            return True
    return False
