"""What a broker process asks of the controller: registration and ISR changes (KRaft's APIs).

Kafka's `ClusterControlManager.registerBroker` and `ReplicationControlManager.alterPartition`:
a broker registers with its cluster id, an incarnation id chosen at start, its listeners, rack
and the feature ranges it supports, and starts fenced with a new broker epoch (the offset of
its registration record); a partition leader shrinks or expands the ISR, checked against the
leader epoch and the partition epoch it last saw. Heartbeats are not here: they hold no state
of the log until they change a broker's (api/service/broker_liveness.py), and then they are
`brokers.change_broker`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from records.model import (
    NO_LEADER,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
)
from records.uuids import Uuid
from replay.controller.brokers import check_registration, with_moves
from replay.controller.commands import (
    BrokerRegistration,
    BrokerResult,
    ControllerResult,
    IsrChange,
    IsrResult,
    RegisterBroker,
)
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import clip
from replay.controller.names import partition_name
from replay.controller.states import checked_change
from replay.image import METADATA_VERSION, ClusterImage, MetadataImage


def register(
    image: MetadataImage,
    request: BrokerRegistration,
    *,
    cluster_id: str,
    session_alive: Callable[[int], bool],
) -> ControllerResult[BrokerResult]:
    """Register a broker process: fenced, with a new epoch (Kafka's `registerBroker`).

    Refused with INCONSISTENT_CLUSTER_ID for another cluster's broker, with
    DUPLICATE_BROKER_REGISTRATION while another incarnation of the id still has a live
    session (`session_alive`), with UNSUPPORTED_VERSION if the broker does not support the
    cluster's `metadata.version`. A broker that was unfenced loses its leaderships and ISR
    places (the new incarnation has to catch up first).
    """
    if request.cluster_id != cluster_id:
        raise ApiError(
            ErrorCode.INCONSISTENT_CLUSTER_ID,
            f"broker {request.broker_id} belongs to cluster {clip(request.cluster_id)!r}, this "
            f"controller to {cluster_id!r}; point the broker at its own cluster's controllers",
        )
    check_registration(
        RegisterBroker(broker_id=request.broker_id, rack=request.rack, endpoints=request.listeners)
    )
    current = image.cluster.get(request.broker_id)
    if (
        current is not None
        and current.incarnation_id != request.incarnation_id
        and not current.in_controlled_shutdown  # it shut down cleanly: a restart is welcome
        and session_alive(request.broker_id)
    ):
        raise ApiError(
            ErrorCode.DUPLICATE_BROKER_REGISTRATION,
            f"another incarnation of broker {request.broker_id} ({current.incarnation_id}) is "
            "still alive; stop it, or wait for its session to expire "
            "(broker.session.timeout.ms)",
        )
    level = image.features.levels.get(METADATA_VERSION)
    for feature in request.features:
        if (
            feature.name == METADATA_VERSION
            and level is not None
            and not feature.min_supported_version <= level <= feature.max_supported_version
        ):
            raise ApiError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"broker {request.broker_id} supports {METADATA_VERSION} "
                f"{feature.min_supported_version}..{feature.max_supported_version}, the "
                f"cluster is at {level}; upgrade the broker",
            )
    epoch = image.provenance.offset + 1
    record = RegisterBrokerRecord(
        broker_id=request.broker_id,
        incarnation_id=request.incarnation_id,
        broker_epoch=epoch,
        end_points=request.listeners,
        features=request.features,
        rack=request.rack,
        fenced=True,
    )
    after = ClusterImage(brokers=image.cluster.brokers.set(request.broker_id, record))
    return with_moves(image, after, record, request.broker_id, epoch, elect=False)


def alter_partition(
    image: MetadataImage, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange]
) -> ControllerResult[list[IsrResult]]:
    """ISR changes asked by a partition leader, each checked as Kafka's `alterPartition`.

    The requesting broker must be registered with `broker_epoch` (else STALE_BROKER_EPOCH for
    the whole request). Per partition: an older leader epoch is FENCED_LEADER_EPOCH, a
    requester that is not the leader INVALID_REQUEST, a stale partition epoch
    INVALID_UPDATE_VERSION, an ISR that is not replicas holding the leader INVALID_REQUEST, and
    a replica joining the ISR that is fenced, shutting down or of another epoch
    INELIGIBLE_REPLICA. Only leader recovery state 0 (recovered) is kept here.
    """
    broker = image.cluster.get(broker_id)
    if broker is None or broker.broker_epoch != broker_epoch:
        have = "not registered" if broker is None else f"at epoch {broker.broker_epoch}"
        raise ApiError(
            ErrorCode.STALE_BROKER_EPOCH,
            f"broker {broker_id} is {have}, not at epoch {broker_epoch}; register again",
        )
    results: list[IsrResult] = []
    records: list[Record] = []
    changed: dict[tuple[Uuid, int], PartitionRecord] = {}
    for item in changes:
        try:
            partition, change = _isr_change(image, broker_id, item, changed)
        except ApiError as exc:
            results.append(
                IsrResult(
                    topic_id=item.topic_id, partition=item.partition, error_code=exc.error_code
                )
            )
            continue
        if change is not None:
            records.append(change)
            changed[item.topic_id, item.partition] = partition
        results.append(
            IsrResult(
                topic_id=item.topic_id,
                partition=item.partition,
                leader=partition.leader,
                leader_epoch=partition.leader_epoch,
                isr=partition.isr,
                partition_epoch=partition.partition_epoch,
            )
        )
    return ControllerResult(records=tuple(records), response=results)


def _isr_change(
    image: MetadataImage,
    broker_id: int,
    item: IsrChange,
    changed: dict[tuple[Uuid, int], PartitionRecord],
) -> tuple[PartitionRecord, PartitionChangeRecord | None]:
    """(the partition after, the change or None) of one item, or the ApiError refusing it."""
    topic = image.topics.get(item.topic_id)
    if topic is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_ID, f"no topic has id {item.topic_id}")
    if not 0 <= item.partition < len(topic.partitions):
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {item.partition}")
    partition = changed.get((item.topic_id, item.partition), topic.partitions[item.partition])
    where = partition_name(topic, item.partition)
    if item.leader_epoch < partition.leader_epoch:
        raise ApiError(
            ErrorCode.FENCED_LEADER_EPOCH,
            f"{where}: leader epoch {item.leader_epoch} is older than {partition.leader_epoch}",
        )
    if broker_id != partition.leader:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"{where}: broker {broker_id} is not its leader")
    if item.leader_epoch > partition.leader_epoch:
        raise ApiError(
            ErrorCode.NOT_CONTROLLER,
            f"{where}: leader epoch {item.leader_epoch} is newer than this controller's "
            f"{partition.leader_epoch}",
        )
    if item.partition_epoch != partition.partition_epoch:
        raise ApiError(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"{where}: partition epoch {item.partition_epoch} is not {partition.partition_epoch}",
        )
    if item.leader_recovery_state != 0:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"{where}: leader recovery state {item.leader_recovery_state} is not RECOVERED (0); "
            "partitions here never enter RECOVERING",
        )
    new_isr = tuple(b for b, _ in item.new_isr)
    if (
        not new_isr
        or len(set(new_isr)) != len(new_isr)
        or not set(new_isr) <= set(partition.replicas)
        or partition.leader not in new_isr
    ):
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"{where}: ISR {list(new_isr)} is not distinct replicas of "
            f"{list(partition.replicas)} holding the leader {partition.leader}",
        )
    for replica, epoch in item.new_isr:
        if replica in partition.isr:
            continue
        joining = image.cluster.get(replica)
        if (
            joining is None
            or joining.fenced
            or joining.in_controlled_shutdown
            or epoch not in (-1, joining.broker_epoch)
        ):
            raise ApiError(
                ErrorCode.INELIGIBLE_REPLICA,
                f"{where}: replica {replica} cannot join the ISR (not registered, fenced, "
                "shutting down, or of another epoch)",
            )
    if new_isr == partition.isr:
        return partition, None
    change = PartitionChangeRecord(partition_id=item.partition, topic_id=item.topic_id, isr=new_isr)
    after = checked_change(where, partition, change, image.cluster, image.cluster)
    if after.leader == NO_LEADER:  # pragma: no cover - the leader stays in the ISR
        raise ApiError(ErrorCode.INVALID_REQUEST, f"{where}: the change leaves no leader")
    return after, change
