"""Partition reduction: lowering a topic's partition count with a delayed deletion.

A reduction removes the highest partition ids, so ids stay contiguous. It is one batch: a
`DeleteTopicPartitionsRecord` (new count, purge time = now + delay, creation time) and a
`PartitionChangeRecord` per removed partition setting its mode, READ_ONLY (readable, not
writable) while the purge time is ahead. Later, a check of pending deletions (the service's
scheduler) moves them on, one step per check:

1. the purge time has passed: the partitions go to mode NONE (neither readable nor writable;
   the partition goes Offline, its replicas OfflineReplica);
2. the next check: a `PurgeTopicPartitionsRecord` removes them (Offline -> NonExistent,
   replicas ReplicaDeletionStarted -> ReplicaDeletionSuccessful -> NonExistentReplica).

With a delay of 0 all of it is the one batch. Every step is records in the log, so a restart in
the middle resumes where the log says it was, and nothing is removed before its purge time.
"""

from __future__ import annotations

from collections.abc import Sequence

from records.model import (
    CancelTopicPartitionsDeletionRecord,
    DeleteTopicPartitionsRecord,
    Mode,
    PartitionChangeRecord,
    PurgeTopicPartitionsRecord,
    Record,
)
from records.uuids import Uuid
from replay.controller.commands import (
    CancelPartitionDeletion,
    CancelPartitionDeletionResult,
    ControllerResult,
    DeletePartitionsResult,
    DeletePartitionsTopic,
    Outcome,
    PurgeResult,
    PurgeStep,
)
from replay.controller.config_defs import cluster_bool
from replay.controller.config_values import LONG_MAX
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.names import resolve_unseen_topic
from replay.controller.states import check_change
from replay.delta import merge_partition_change
from replay.image import MetadataImage, TopicImage

ENABLE_KEY = "delete.topic.partition.enable"
INTERVAL_KEY = "delete.topic.partition.interval.delay.ms"

MAX_DELAY_MS = 365 * 24 * 60 * 60 * 1000
"""The longest partition-deletion delay: 365 days.

A pending deletion holds the topic "under changes" (no added partitions, no other decrease,
no reassignment) until it completes or is cancelled, so a delay is a grace period a person
waits out, not storage for later. A year is well past any such wait, and it refuses the usual
slip of a unit: a delay of 12 hours or more given in microseconds instead of milliseconds is
already past it, as is 10^14 ms (the year 5195).
"""


def under_changes(topic: TopicImage, what: str) -> ApiError:
    """The error for a partition change refused while a deletion of the topic is pending."""
    pending = topic.pending_deletion
    assert pending is not None  # only asked for topics with a pending deletion
    return ApiError(
        ErrorCode.INVALID_PARTITIONS,
        f"The topic is currently under changes: {topic.qualified_name} is reducing to "
        f"{pending.partition_count} partition(s), so {what} is refused; retry after the "
        "deletion completes (`mlog topics describe` shows its purge time)",
    )


def delete_partitions(
    image: MetadataImage,
    requests: Sequence[DeletePartitionsTopic],
    *,
    now_ms: int,
    validate_only: bool,
) -> ControllerResult[list[DeletePartitionsResult]]:
    """Lower partition counts with a delayed (or immediate) deletion; one result per topic."""
    enabled = cluster_bool(image.configs.cluster(), ENABLE_KEY)
    results: list[DeletePartitionsResult] = []
    records: list[Record] = []
    seen: set[Uuid] = set()
    for request in requests:
        try:
            topic = resolve_unseen_topic(image, request.topic, seen)
            topic_records, result = _reduce(image, topic, request, enabled=enabled, now_ms=now_ms)
        except ApiError as exc:
            results.append(
                DeletePartitionsResult(name=str(request.topic), outcome=Outcome.from_error(exc))
            )
            continue
        seen.add(topic.topic_id)
        if not validate_only:
            records.extend(topic_records)
        results.append(result)
    return ControllerResult(records=tuple(records), response=results)


def _reduce(
    image: MetadataImage,
    topic: TopicImage,
    request: DeletePartitionsTopic,
    *,
    enabled: bool,
    now_ms: int,
) -> tuple[list[Record], DeletePartitionsResult]:
    """The batch that lowers `topic` to `request.count` partitions (see the module doc)."""
    current = len(topic.partitions)
    if not enabled:
        raise ApiError(
            ErrorCode.INVALID_PARTITIONS,
            "partition deletion is disabled; set delete.topic.partition.enable=true "
            "(`mlog configs alter --cluster --set delete.topic.partition.enable=true`)",
        )
    if topic.pending_deletion is not None:
        raise under_changes(topic, "another partition deletion")
    if request.count <= 0:
        raise ApiError(
            ErrorCode.INVALID_PARTITIONS,
            "Number of partitions was set to an invalid non-positive value.",
        )
    if request.count >= current:
        raise ApiError(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic {topic.qualified_name} currently has {current} partition(s); "
            f"{request.count} would not be a decrease.",
        )
    longest = min(MAX_DELAY_MS, LONG_MAX - now_ms)
    if not 0 <= request.delay_ms <= longest:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"The partition deletion delay must be between 0 and {longest} ms (365 days), "
            f"got {request.delay_ms}; give it in milliseconds",
        )
    moving = [p.partition_id for p in topic.partitions if p.adding_replicas or p.removing_replicas]
    if moving:
        raise ApiError(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic is currently under changes: partition(s) {moving} of "
            f"{topic.qualified_name} are being reassigned; wait for the reassignment or cancel "
            "it (`mlog partitions reassign --cancel`)",
        )
    removed = tuple(range(request.count, current))
    immediate = request.delay_ms == 0
    records: list[Record] = [
        DeleteTopicPartitionsRecord(
            topic_id=topic.topic_id,
            partition_count=request.count,
            delete_after_ms=now_ms + request.delay_ms,
            created_ms=now_ms,
        )
    ]
    mode = Mode.NONE if immediate else Mode.READ_ONLY
    records.extend(_mode_changes(image, topic, removed, mode))
    if immediate:
        records.extend(_purge(image, topic, request.count))
    return records, DeletePartitionsResult(
        name=topic.qualified_name,
        removed=removed,
        purge_at_ms=now_ms + request.delay_ms,
        immediate=immediate,
    )


def cancel_deletions(
    image: MetadataImage, requests: Sequence[CancelPartitionDeletion], *, now_ms: int
) -> ControllerResult[list[CancelPartitionDeletionResult]]:
    """Cancel pending partition deletions whose purge time is ahead; one result per topic.

    The partitions go back to READ_WRITE and a `CancelTopicPartitionsDeletionRecord` clears
    the pending deletion, in one batch per topic. Once the purge time has come the deletion
    goes on: nothing is removed before its purge time, and nothing comes back after it.
    """
    results: list[CancelPartitionDeletionResult] = []
    records: list[Record] = []
    seen: set[Uuid] = set()
    for request in requests:
        try:
            topic = resolve_unseen_topic(image, request.topic, seen)
            topic_records, restored = _cancel(image, topic, now_ms=now_ms)
        except ApiError as exc:
            results.append(
                CancelPartitionDeletionResult(
                    name=str(request.topic), outcome=Outcome.from_error(exc)
                )
            )
            continue
        seen.add(topic.topic_id)
        records.extend(topic_records)
        results.append(CancelPartitionDeletionResult(name=topic.qualified_name, restored=restored))
    return ControllerResult(records=tuple(records), response=results)


def _cancel(
    image: MetadataImage, topic: TopicImage, *, now_ms: int
) -> tuple[list[Record], tuple[int, ...]]:
    pending = topic.pending_deletion
    if pending is None:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"Topic {topic.qualified_name} has no partition deletion pending; nothing to cancel",
        )
    removed = tuple(range(pending.partition_count, len(topic.partitions)))
    gone = [p for p in removed if topic.partitions[p].mode == Mode.NONE]
    if gone or now_ms >= pending.delete_after_ms:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"The partition deletion of {topic.qualified_name} reached its purge time "
            f"({pending.delete_after_ms} ms since the epoch) and cannot be cancelled; it "
            "completes at the next check of pending deletions",
        )
    records = _mode_changes(image, topic, removed, Mode.READ_WRITE)
    records.append(
        CancelTopicPartitionsDeletionRecord(
            topic_id=topic.topic_id, partition_count=pending.partition_count
        )
    )
    return records, removed


def _mode_changes(
    image: MetadataImage, topic: TopicImage, partition_ids: tuple[int, ...], mode: Mode
) -> list[Record]:
    changes: list[Record] = []
    for partition_id in partition_ids:
        partition = topic.partitions[partition_id]
        if partition.mode == mode:
            continue
        change = PartitionChangeRecord(
            partition_id=partition_id, topic_id=topic.topic_id, mode=mode
        )
        check_change(
            f"{topic.qualified_name}-{partition_id}",
            partition,
            merge_partition_change(partition, change),
            image.cluster,
            image.cluster,
        )
        changes.append(change)
    return changes


def _purge(image: MetadataImage, topic: TopicImage, count: int) -> list[Record]:
    """The removal of partitions >= count; their state moves are checked from mode NONE."""
    for partition in topic.partitions[count:]:
        after_mode = merge_partition_change(
            partition,
            PartitionChangeRecord(
                partition_id=partition.partition_id, topic_id=topic.topic_id, mode=Mode.NONE
            ),
        )
        check_change(
            f"{topic.qualified_name}-{partition.partition_id}",
            after_mode,
            None,
            image.cluster,
            image.cluster,
        )
    return [PurgeTopicPartitionsRecord(topic_id=topic.topic_id, partition_count=count)]


def purge_due(image: MetadataImage, now_ms: int) -> ControllerResult[list[PurgeResult]]:
    """One check of every pending deletion at time `now_ms`.

    The records of the next step of each deletion whose purge time has passed: mode NONE
    first, the removal at the next check.
    """
    records: list[Record] = []
    results: list[PurgeResult] = []
    # One pass without sorting every topic (this runs before every embedded write); only the
    # due ones are put in name order.
    due = [
        topic
        for topic in image.topics.by_id.values()
        if topic.pending_deletion is not None and topic.pending_deletion.delete_after_ms <= now_ms
    ]
    for topic in sorted(due, key=lambda t: t.qualified_name):
        pending = topic.pending_deletion
        assert pending is not None  # selected above
        removed = tuple(range(pending.partition_count, len(topic.partitions)))
        changes = _mode_changes(image, topic, removed, Mode.NONE)
        if changes:
            records.extend(changes)
            step = PurgeStep.MODE_NONE
        else:
            records.extend(_purge(image, topic, pending.partition_count))
            step = PurgeStep.REMOVED
        results.append(
            PurgeResult(
                name=topic.qualified_name, topic_id=topic.topic_id, step=step, partitions=removed
            )
        )
    return ControllerResult(records=tuple(records), response=results)
