"""ClusterDelta: broker registrations changed by register, unregister and change records."""

from __future__ import annotations

from records.model import (
    BrokerRegistrationChangeRecord,
    ControlledShutdownChange,
    FencingChange,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from replay.delta.maps import MISSING, updated
from replay.errors import InvalidBrokerError, UnknownBrokerError
from replay.image import ClusterImage


class ClusterDelta:
    """Broker registrations changed since the base image (None: unregistered)."""

    __slots__ = ("_brokers", "image")

    def __init__(self, image: ClusterImage) -> None:
        self.image = image
        self._brokers: dict[int, RegisterBrokerRecord | None] = {}

    def broker(self, broker_id: int) -> RegisterBrokerRecord | None:
        """A broker's registration as of the records replayed so far."""
        found = self._brokers.get(broker_id, MISSING)
        if found is MISSING:
            return self.image.get(broker_id)
        return found  # type: ignore[return-value]  # MISSING ruled out above

    def _registered(self, broker_id: int, broker_epoch: int, what: str) -> RegisterBrokerRecord:
        current = self.broker(broker_id)
        if current is None:
            raise UnknownBrokerError(
                "broker.registered", f"{what}: broker {broker_id} is not registered"
            )
        if current.broker_epoch != broker_epoch:
            raise UnknownBrokerError(
                "broker.registered",
                f"{what}: broker {broker_id} is registered with epoch {current.broker_epoch}, "
                f"not {broker_epoch}",
            )
        return current

    def replay_register_broker(self, record: RegisterBrokerRecord) -> None:
        """Register a broker, or register it again with a larger epoch."""
        broker_id = record.broker_id
        if broker_id < 0:
            raise InvalidBrokerError("broker.id-nonnegative", f"broker id {broker_id} is negative")
        if record.rack is not None and not record.rack.strip():
            raise InvalidBrokerError(
                "broker.registration-valid", f"broker {broker_id} has a blank rack name"
            )
        for endpoint in record.end_points:
            if not endpoint.host or not 0 < endpoint.port < 65536:
                raise InvalidBrokerError(
                    "broker.registration-valid",
                    f"broker {broker_id} endpoint {endpoint.name!r} is "
                    f"{endpoint.host!r}:{endpoint.port}, not a host and a port in 1..65535",
                )
        current = self.broker(broker_id)
        if current is not None and record.broker_epoch <= current.broker_epoch:
            raise InvalidBrokerError(
                "broker.epoch-increases",
                f"broker {broker_id} registered again with epoch {record.broker_epoch}, not "
                f"above its current epoch {current.broker_epoch}",
            )
        self._brokers[broker_id] = record

    def replay_unregister_broker(self, record: UnregisterBrokerRecord) -> None:
        """Remove the registration the record names."""
        self._registered(record.broker_id, record.broker_epoch, "unregister")
        self._brokers[record.broker_id] = None

    def replay_broker_change(self, record: BrokerRegistrationChangeRecord) -> None:
        """Fence, unfence or start the controlled shutdown of a registered broker."""
        current = self._registered(record.broker_id, record.broker_epoch, "registration change")
        fenced = current.fenced
        shutdown = current.in_controlled_shutdown
        if record.in_controlled_shutdown == ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN:
            shutdown = True
        if record.fenced == FencingChange.FENCE:
            fenced = True
        elif record.fenced == FencingChange.UNFENCE:
            if shutdown:
                raise InvalidBrokerError(
                    "broker.unfence-after-shutdown",
                    f"broker {record.broker_id} is in controlled shutdown and cannot be "
                    "unfenced; it registers again instead",
                )
            fenced = False
        self._brokers[record.broker_id] = RegisterBrokerRecord(
            broker_id=current.broker_id,
            incarnation_id=current.incarnation_id,
            broker_epoch=current.broker_epoch,
            end_points=current.end_points,
            features=current.features,
            rack=current.rack,
            fenced=fenced,
            in_controlled_shutdown=shutdown,
        )

    def apply(self) -> ClusterImage:
        """The cluster image with the changes applied (the base itself if none)."""
        if not self._brokers:
            return self.image
        return ClusterImage(brokers=updated(self.image.brokers, self._brokers))
