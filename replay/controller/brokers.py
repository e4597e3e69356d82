"""Brokers: registration, fencing, unfencing, controlled shutdown, and the leaders they move.

A broker going away (fenced, unregistered, in controlled shutdown) takes leadership and ISR
membership with it, as Kafka's `handleBrokerFenced` does; a broker coming up (registered
unfenced, unfenced) gives leaderless partitions whose ISR holds it a leader again. Both are
`PartitionChangeRecord`s in the same batch as the broker's own record.
"""

from __future__ import annotations

from collections.abc import Callable

from records.model import (
    LEADER_UNCHANGED,
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    ControlledShutdownChange,
    FencingChange,
    PartitionChangeRecord,
    Record,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from records.uuids import Uuid
from replay.controller.commands import BrokerAction, BrokerResult, ControllerResult, RegisterBroker
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import INT16_MAX, INT32_MAX, check_int, check_label, clip
from replay.controller.names import partition_name
from replay.controller.states import checked_change, is_live
from replay.delta import MetadataDelta
from replay.image import ClusterImage, MetadataImage


def register_broker(
    image: MetadataImage, request: RegisterBroker, new_id: Callable[[], Uuid]
) -> ControllerResult[BrokerResult]:
    """Register a broker (a new incarnation, id from `new_id`, if it was registered before).

    The broker epoch is the offset the registration record gets, as in Kafka, so every
    incarnation has a larger one.
    """
    _check_registration(request)
    epoch = image.provenance.offset + 1
    record = RegisterBrokerRecord(
        broker_id=request.broker_id,
        incarnation_id=new_id(),
        broker_epoch=epoch,
        end_points=request.endpoints,
        rack=request.rack,
        fenced=request.fenced,
    )
    records: list[Record] = [record]
    changed = 0
    if not request.fenced:
        cluster_after = _cluster_with(image.cluster, record)
        moves = _elect_leaderless(image, cluster_after, {request.broker_id})
        records.extend(moves)
        changed = len(moves)
    return ControllerResult(
        records=tuple(records),
        response=BrokerResult(
            broker_id=request.broker_id, broker_epoch=epoch, partitions_changed=changed
        ),
    )


def _check_registration(request: RegisterBroker) -> None:
    """Refuse what a registration record cannot hold, or what would break the broker tables."""
    check_int(
        request.broker_id,
        what="broker id",
        low=0,
        high=INT32_MAX,
        code=ErrorCode.INVALID_REQUEST,
    )
    if request.rack is not None:
        check_label(request.rack, what="a rack name")
    seen: set[tuple[str, int]] = set()
    for endpoint in request.endpoints:
        check_label(endpoint.name, what="a listener name")
        check_label(endpoint.host, what="an endpoint host")
        if (
            isinstance(endpoint.port, bool)
            or not isinstance(endpoint.port, int)
            or not (0 < endpoint.port < 65536)
        ):
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"endpoint {clip(endpoint.host)}:{clip(endpoint.port)} is not HOST:PORT with "
                "a port in 1..65535",
            )
        check_int(
            endpoint.security_protocol,
            what="an endpoint's security protocol",
            low=0,
            high=INT16_MAX,
            code=ErrorCode.INVALID_REQUEST,
        )
        # By address, not by listener name: `mlog brokers register --endpoint` names every
        # endpoint PLAINTEXT.
        address = (endpoint.host, endpoint.port)
        if address in seen:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"endpoint {clip(endpoint.host)}:{endpoint.port} is given twice; give it once",
            )
        seen.add(address)


def change_broker(
    image: MetadataImage, broker_id: int, action: BrokerAction
) -> ControllerResult[BrokerResult]:
    """Unregister, fence, unfence, or start a controlled shutdown of a broker.

    Fencing, unregistering and controlled shutdown move leadership off the broker and drop
    it from ISRs (keeping the last ISR member, leaderless, as Kafka does); unfencing gives
    leaderless partitions whose ISR holds the broker a leader again.
    """
    current = image.cluster.get(broker_id)
    if current is None:
        raise ApiError(
            ErrorCode.BROKER_ID_NOT_REGISTERED,
            f"Broker {broker_id} is not registered; see `mlog brokers list`",
        )
    epoch = current.broker_epoch
    already = {
        BrokerAction.FENCE: current.fenced,
        BrokerAction.UNFENCE: not current.fenced,
        BrokerAction.CONTROLLED_SHUTDOWN: current.in_controlled_shutdown,
    }
    if already.get(action, False):
        # Idempotent, as a repeated heartbeat is in Kafka: nothing to write.
        return ControllerResult(
            records=(),
            response=BrokerResult(broker_id=broker_id, broker_epoch=epoch, changed=False),
        )
    record: Record
    if action == BrokerAction.UNREGISTER:
        record = UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch)
    elif action == BrokerAction.FENCE:
        record = BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=epoch, fenced=FencingChange.FENCE
        )
    elif action == BrokerAction.UNFENCE:
        if current.in_controlled_shutdown:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"Broker {broker_id} is in controlled shutdown; register it again "
                "(a new incarnation) to bring it back",
            )
        record = BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=epoch, fenced=FencingChange.UNFENCE
        )
    else:
        record = BrokerRegistrationChangeRecord(
            broker_id=broker_id,
            broker_epoch=epoch,
            in_controlled_shutdown=ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN,
        )
    delta = MetadataDelta(image)
    delta.replay(record)
    cluster_after = delta.apply(image.provenance).cluster
    if action == BrokerAction.UNFENCE:
        moves = _elect_leaderless(image, cluster_after, {broker_id})
    else:
        moves = _move_off(image, cluster_after, broker_id)
    return ControllerResult(
        records=(record, *moves),
        response=BrokerResult(
            broker_id=broker_id, broker_epoch=epoch, partitions_changed=len(moves)
        ),
    )


def _move_off(image: MetadataImage, cluster_after: ClusterImage, broker_id: int) -> list[Record]:
    """Changes taking a broker out of ISRs and leadership (Kafka's `handleBrokerFenced`)."""
    changes: list[Record] = []
    for topic in image.topics.sorted():
        for partition in topic.partitions:
            if broker_id not in partition.isr and partition.leader != broker_id:
                continue
            isr = tuple(b for b in partition.isr if b != broker_id)
            if not isr:
                isr = partition.isr  # the last member stays (leaderless), as in Kafka
            leader = next((b for b in isr if is_live(cluster_after, b)), NO_LEADER)
            change = PartitionChangeRecord(
                partition_id=partition.partition_id,
                topic_id=topic.topic_id,
                isr=isr if isr != partition.isr else None,
                leader=leader if leader != partition.leader else LEADER_UNCHANGED,
            )
            if change.isr is None and change.leader == LEADER_UNCHANGED:
                continue
            where = partition_name(topic, partition.partition_id)
            checked_change(where, partition, change, image.cluster, cluster_after)
            changes.append(change)
    return changes


def _elect_leaderless(
    image: MetadataImage, cluster_after: ClusterImage, brokers: set[int]
) -> list[Record]:
    """Leaders for leaderless partitions whose ISR holds a broker that just came up."""
    changes: list[Record] = []
    for topic in image.topics.sorted():
        for partition in topic.partitions:
            if partition.leader != NO_LEADER or not brokers.intersection(partition.isr):
                continue
            leader = next((b for b in partition.isr if is_live(cluster_after, b)), NO_LEADER)
            if leader == NO_LEADER:
                continue
            change = PartitionChangeRecord(
                partition_id=partition.partition_id, topic_id=topic.topic_id, leader=leader
            )
            where = partition_name(topic, partition.partition_id)
            checked_change(where, partition, change, image.cluster, cluster_after)
            changes.append(change)
    return changes


def _cluster_with(cluster: ClusterImage, registration: RegisterBrokerRecord) -> ClusterImage:
    return ClusterImage(brokers=cluster.brokers.set(registration.broker_id, registration))
