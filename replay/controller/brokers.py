"""Brokers: registration, fencing, unfencing, controlled shutdown, and the leaders they move.

A broker going away (fenced, unregistered, in controlled shutdown) takes leadership and ISR
membership with it, as Kafka's `handleBrokerFenced` does; a broker coming up (registered
unfenced, unfenced) gives leaderless partitions whose ISR holds it a leader again. Both are
`PartitionChangeRecord`s, the first ones in the same batch as the broker's own record and
the rest in batches of `MOVES_PER_BATCH` after it; the partitions come from the
broker's index, so a change costs what the broker holds.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from records.model import (
    LEADER_UNCHANGED,
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    ControlledShutdownChange,
    FencingChange,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from records.uuids import Uuid
from replay.controller.commands import (
    MAX_RECORDS_PER_BATCH,
    BrokerAction,
    BrokerResult,
    Continuation,
    ControllerResult,
    RegisterBroker,
)
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import INT16_MAX, INT32_MAX, check_int, check_label, clip
from replay.controller.names import partition_name
from replay.controller.states import ChangeChecker, is_live
from replay.delta import MetadataDelta
from replay.image import ClusterImage, MetadataImage, TopicImage


def register_broker(
    image: MetadataImage, request: RegisterBroker, new_id: Callable[[], Uuid]
) -> ControllerResult[BrokerResult]:
    """Register a broker (a new incarnation, id from `new_id`, if it was registered before).

    The broker epoch is the offset the registration record gets, as in Kafka, so every
    incarnation has a larger one.
    """
    check_registration(request)
    epoch = image.provenance.offset + 1
    record = RegisterBrokerRecord(
        broker_id=request.broker_id,
        incarnation_id=new_id(),
        broker_epoch=epoch,
        end_points=request.endpoints,
        rack=request.rack,
        fenced=request.fenced,
    )
    if request.fenced:
        return ControllerResult(
            records=(record,),
            response=BrokerResult(broker_id=request.broker_id, broker_epoch=epoch),
        )
    cluster_after = _cluster_with(image.cluster, record)
    return with_moves(image, cluster_after, record, request.broker_id, epoch, elect=True)


def check_registration(request: RegisterBroker) -> None:
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
        return with_moves(image, cluster_after, record, broker_id, epoch, elect=True)
    return with_moves(image, cluster_after, record, broker_id, epoch, elect=False)


def with_moves(
    image: MetadataImage,
    cluster_after: ClusterImage,
    record: Record,
    broker_id: int,
    epoch: int,
    *,
    elect: bool,
) -> ControllerResult[BrokerResult]:
    """The broker's record and the partition changes it causes, in batches.

    The partitions to look at come from the broker's index (`TopicsImage.partitions_of`), so
    this costs what the broker holds. The first batch is the broker's record and the first
    changes; the rest follow through `more`, each computed against the image of its time
    (a partition another command changed meanwhile is judged as it is then).
    """
    pending: list[tuple[Uuid, int]] = []
    held = image.topics.by_broker.get(broker_id)
    by_id = image.topics.by_id
    # One tight pass over what the broker holds (a fence at 1M partitions and 6 brokers
    # looks at 500,000): which partitions need a change, in the index's order.
    for topic_id, ids in (held or {}).items():
        partitions = by_id[topic_id].partitions
        for partition_id in ids:
            partition = partitions[partition_id]
            if elect:
                if partition.leader == NO_LEADER and broker_id in partition.isr:
                    pending.append((topic_id, partition_id))
            # the last ISR member stays, leaderless: nothing to write for it then
            elif partition.leader == broker_id or (
                broker_id in partition.isr and len(partition.isr) > 1
            ):
                pending.append((topic_id, partition_id))
    batch = max(2, records_per_batch())
    first = _changes(image, cluster_after, broker_id, pending[: batch - 1], elect=elect)
    rest = pending[batch - 1 :]
    return ControllerResult(
        records=(record, *first),
        response=BrokerResult(
            broker_id=broker_id, broker_epoch=epoch, partitions_changed=len(pending)
        ),
        more=_continuation(broker_id, rest, elect=elect, batch=batch) if rest else None,
    )


MOVES_PER_BATCH = 1_000
"""The records of one batch of broker moves: well under KRaft's cap (`MAX_RECORDS_PER_BATCH`),
so that computing and replaying one batch (~15-30 us a change) holds the event loop ~15-30 ms
at most, and heartbeats and admin requests are answered between batches. Through a quorum a
batch's commit takes a replication round (linger, fsyncs, a follower's fetch): the batches
overlap (`BATCHES_IN_FLIGHT`), so smaller ones do not slow the move."""


def records_per_batch() -> int:
    """The records of one batch of broker moves (`MOVES_PER_BATCH`; tests lower it)."""
    return min(MOVES_PER_BATCH, MAX_RECORDS_PER_BATCH)


def _continuation(
    broker_id: int, pending: list[tuple[Uuid, int]], *, elect: bool, batch: int
) -> Continuation:
    """The next batch of moves of `pending`, and a continuation for the rest."""

    def step(image: MetadataImage) -> ControllerResult[None]:
        live = is_live(image.cluster, broker_id)
        if live != elect:
            # The broker changed state again meanwhile: that change moved what it had to.
            return ControllerResult(records=(), response=None)
        changes = _changes(image, image.cluster, broker_id, pending[:batch], elect=elect)
        rest = pending[batch:]
        return ControllerResult(
            records=tuple(changes),
            response=None,
            more=_continuation(broker_id, rest, elect=elect, batch=batch) if rest else None,
        )

    return step


def _changes(
    image: MetadataImage,
    cluster_after: ClusterImage,
    broker_id: int,
    pending: list[tuple[Uuid, int]],
    *,
    elect: bool,
) -> list[Record]:
    """Checked changes of the `pending` partitions that still need one."""
    changes: list[Record] = []
    by_id = image.topics.by_id
    checker = ChangeChecker(image.cluster, cluster_after)
    for topic_id, partition_id in pending:
        topic = by_id.get(topic_id)
        if topic is None or partition_id >= len(topic.partitions):
            continue  # deleted meanwhile
        partition = topic.partitions[partition_id]
        if elect:
            change = _elected(topic, partition, cluster_after, broker_id)
        else:
            change = _moved_off(topic, partition, cluster_after, broker_id)
        if change is None:
            continue
        checker.check(partial(partition_name, topic, partition_id), partition, change)
        changes.append(change)
    return changes


def _moved_off(
    topic: TopicImage, partition: PartitionRecord, cluster_after: ClusterImage, broker_id: int
) -> PartitionChangeRecord | None:
    """The change taking a broker out of a partition's ISR and leadership (`handleBrokerFenced`)."""
    if broker_id not in partition.isr and partition.leader != broker_id:
        return None
    isr = tuple(b for b in partition.isr if b != broker_id)
    if not isr:
        isr = partition.isr  # the last member stays (leaderless), as in Kafka
    leader = partition.leader
    if leader == broker_id or leader not in isr:
        leader = next((b for b in isr if is_live(cluster_after, b)), NO_LEADER)
    change = PartitionChangeRecord(
        partition_id=partition.partition_id,
        topic_id=topic.topic_id,
        isr=isr if isr != partition.isr else None,
        leader=leader if leader != partition.leader else LEADER_UNCHANGED,
    )
    if change.isr is None and change.leader == LEADER_UNCHANGED:
        return None
    return change


def _elected(
    topic: TopicImage, partition: PartitionRecord, cluster_after: ClusterImage, broker_id: int
) -> PartitionChangeRecord | None:
    """A leader for a leaderless partition whose ISR holds a broker that just came up."""
    if partition.leader != NO_LEADER or broker_id not in partition.isr:
        return None
    leader = next((b for b in partition.isr if is_live(cluster_after, b)), NO_LEADER)
    if leader == NO_LEADER:
        return None
    return PartitionChangeRecord(
        partition_id=partition.partition_id, topic_id=topic.topic_id, leader=leader
    )


def _cluster_with(cluster: ClusterImage, registration: RegisterBrokerRecord) -> ClusterImage:
    return ClusterImage(brokers=cluster.brokers.set(registration.broker_id, registration))
