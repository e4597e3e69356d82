"""The broker-facing APIs: BrokerRegistration, BrokerHeartbeat, UnregisterBroker, AlterPartition.

What a KRaft broker process sends its controller, with Kafka's schemas. Each asks
CLUSTER_ACTION on the cluster (`dispatch.CLUSTER_CHECKS`), as Kafka's controller does; beyond
Kafka, BrokerRegistration, BrokerHeartbeat and AlterPartition act only for the broker ids bound
to the principal (`broker.principals`, `api.server.broker_bindings`), checked before anything
is written. UnregisterBroker is an operator's (ALTER), for any id.
Registrations and heartbeats go to the service's `BrokerLiveness` (the sessions of the active
controller); AlterPartition is a controller command, answered once committed.
"""

from __future__ import annotations

from typing import Any

from api.protocol.codec import KafkaRequest
from api.server.broker_bindings import NO_BINDINGS, BrokerBindings
from api.server.kafka.authorization import Gate
from api.server.kafka.base import HandlerGroup, Listener, Session, uuid_of
from api.service.broker_liveness import BrokerLiveness
from api.service.service import MetadataService
from records.model import BrokerEndpoint, BrokerFeature
from records.uuids import Uuid
from replay.controller.commands import BrokerRegistration, ControllerResult, IsrChange, IsrResult
from replay.controller.errors import ApiError, ErrorCode
from replay.image import MetadataImage


class BrokerApis(HandlerGroup):
    """The four APIs a broker process uses to join, stay in and leave the cluster."""

    def __init__(
        self,
        service: MetadataService,
        listener: Listener,
        gate: Gate,
        liveness: BrokerLiveness,
        bindings: BrokerBindings = NO_BINDINGS,
    ) -> None:
        super().__init__(service, listener, gate)
        self.liveness = liveness
        self.bindings = bindings

    async def broker_registration(self, request: KafkaRequest, session: Session) -> Any:
        """Register a broker process: fenced until its heartbeats show it caught up."""
        body = request.body
        self.bindings.require(self.gate, session, int(body.broker_id))
        incarnation = uuid_of(body.incarnation_id)
        if incarnation is None or incarnation == Uuid.ZERO:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"broker {body.broker_id} sent no incarnation id; a broker picks a random one "
                "at every start",
            )
        registration = BrokerRegistration(
            broker_id=int(body.broker_id),
            cluster_id=body.cluster_id,
            incarnation_id=incarnation,
            listeners=tuple(
                BrokerEndpoint(
                    name=item.name,
                    host=item.host,
                    port=int(item.port),
                    security_protocol=int(item.security_protocol),
                )
                for item in body.listeners
            ),
            features=tuple(
                BrokerFeature(
                    name=item.name,
                    min_supported_version=int(item.min_supported_version),
                    max_supported_version=int(item.max_supported_version),
                )
                for item in body.features
            ),
            rack=body.rack,
        )
        result = await self.liveness.register(
            registration, cluster_id=self.listener.cluster_id, principal=session.principal
        )
        self._log_change(session.principal, "register broker", [(str(result.broker_id), 0)])
        return self._answer(
            request, throttle_time=0, error_code=0, broker_epoch=result.broker_epoch
        )

    async def broker_heartbeat(self, request: KafkaRequest, session: Session) -> Any:
        """A broker's heartbeat: its metadata offset and wishes; its state in the answer."""
        body = request.body
        self.bindings.require(self.gate, session, int(body.broker_id))
        answer = await self.liveness.heartbeat(
            int(body.broker_id),
            int(body.broker_epoch),
            int(body.current_metadata_offset),
            want_fence=bool(body.want_fence),
            want_shut_down=bool(body.want_shut_down),
            principal=session.principal,
        )
        return self._answer(
            request,
            throttle_time=0,
            error_code=0,
            is_caught_up=answer.is_caught_up,
            is_fenced=answer.is_fenced,
            should_shut_down=answer.should_shut_down,
        )

    async def unregister_broker(self, request: KafkaRequest, session: Session) -> Any:
        """Remove a broker's registration (its leaderships and ISR places move first)."""
        broker_id = int(request.body.broker_id)
        await self.liveness.unregister(broker_id, principal=session.principal)
        self._log_change(session.principal, "unregister broker", [(str(broker_id), 0)])
        return self._answer(request, throttle_time=0, error_code=0, error_message=None)

    async def alter_partition(self, request: KafkaRequest, session: Session) -> Any:
        """ISR changes asked by a partition leader, checked against its epochs."""
        body = request.body
        self.bindings.require(self.gate, session, int(body.broker_id))
        changes: list[IsrChange] = []
        for topic in body.topics:
            topic_id = uuid_of(topic.topic_id) or Uuid.ZERO
            for item in topic.partitions:
                with_epochs = getattr(item, "new_isr_with_epochs", None)
                if with_epochs is not None:
                    isr = tuple((int(b.broker_id), int(b.broker_epoch)) for b in with_epochs)
                else:
                    isr = tuple((int(b), -1) for b in item.new_isr)
                changes.append(
                    IsrChange(
                        topic_id=topic_id,
                        partition=int(item.partition_index),
                        leader_epoch=int(item.leader_epoch),
                        partition_epoch=int(item.partition_epoch),
                        new_isr=isr,
                        leader_recovery_state=int(getattr(item, "leader_recovery_state", 0)),
                    )
                )
        broker_id, broker_epoch = int(body.broker_id), int(body.broker_epoch)
        controller = self.service.controller

        def alter(image: MetadataImage) -> ControllerResult[list[IsrResult]]:
            return controller.alter_partition(image, broker_id, broker_epoch, changes)

        results = await self.service.submit(alter, principal=session.principal)
        self._log_change(
            session.principal,
            "alter ISR of",
            ((f"{r.topic_id}-{r.partition}", r.error_code) for r in results),
        )
        grouped: dict[Uuid, list[IsrResult]] = {}
        for result in results:
            grouped.setdefault(result.topic_id, []).append(result)
        return self._answer(
            request,
            throttle_time=0,
            error_code=0,
            topics=[
                {
                    "topic_id": topic_id.bytes,
                    "partitions": [
                        {
                            "partition_index": r.partition,
                            "error_code": int(r.error_code),
                            "leader_id": r.leader,
                            "leader_epoch": r.leader_epoch,
                            "isr": list(r.isr),
                            "leader_recovery_state": 0,
                            "partition_epoch": r.partition_epoch,
                        }
                        for r in group
                    ],
                }
                for topic_id, group in grouped.items()
            ],
        )
