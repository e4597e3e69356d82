"""Topics: creating them (placed or manually assigned), deleting them, adding partitions.

Validation follows Kafka's `ReplicationControlManager`: the same checks, in the same order, with
the same error codes and messages. Placement itself is `placement` (Kafka's
`assignReplicasToBrokers`); this module feeds it the usable brokers and checks manual
assignments. Creating is the hot path of the service, so `TopicCreator` keeps what consecutive
creates share (the usable brokers, the resolved configs) while the image parts they come from
are the same objects.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from records.model import (
    ConfigRecord,
    ConfigResourceType,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from records.slots import preset_constructor
from records.uuids import Uuid
from replay.controller.commands import (
    ControllerResult,
    CreatableTopic,
    CreatedConfig,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteTopicResult,
    Outcome,
    TopicRef,
    finished,
)
from replay.controller.config_defs import (
    ResolvedConfig,
    cluster_bool,
    cluster_int,
    resolve_topic_configs,
    validate_topic_config,
)
from replay.controller.config_values import InvalidConfigError
from replay.controller.configs import namespace_configs
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import INT16_MAX
from replay.controller.names import (
    colliding_name,
    empty_tier_error,
    partition_name,
    refuse_reserved_name,
    resolve_unseen_topic,
    validate_topic_name,
)
from replay.controller.namespaces import require_namespace
from replay.controller.partition_reduction import under_changes
from replay.controller.placement import (
    BrokerPlacementInfo,
    PlacementPlan,
    assign_added_partitions,
)
from replay.controller.states import check_change, is_live
from replay.delta import MetadataDelta
from replay.image import ClusterImage, MetadataImage, TopicImage, split_qualified_name

MAX_PARTITIONS_PER_REQUEST = 10_000
"""The most partitions one request may create in one topic.

Kafka's controller writes at most 10,000 records for one user operation
(`QuorumController.MAX_RECORDS_PER_USER_OP`); without a bound, a request for 2^31-1 partitions
would try to place them all in memory. Larger topics are grown with further create-partitions.
"""


class _ClusterDerived:
    """What topic creation derives from one cluster image, each part worked out when needed."""

    __slots__ = ("_plan", "_usable", "cluster", "isrs")

    def __init__(self, cluster: ClusterImage) -> None:
        self.cluster = cluster
        self.isrs: dict[tuple[int, ...], tuple[int, ...]] = {}
        """The ISR of each replica list seen (its live brokers, in order); bounded by
        `_new_partitions`."""
        self._usable: list[BrokerPlacementInfo] | None = None
        self._plan: PlacementPlan | None = None

    def usable(self) -> list[BrokerPlacementInfo]:
        """The brokers new replicas may go to (do not change the list)."""
        if self._usable is None:
            self._usable = _placement_info(self.cluster.usable())
        return self._usable

    def plan(self) -> PlacementPlan:
        """Placement over `usable()`, prepared once."""
        if self._plan is None:
            self._plan = PlacementPlan(self.usable())
        return self._plan


class TopicCreator:
    """Creates topics and adds partitions, reusing what consecutive requests share."""

    def __init__(
        self, *, fixed_start_index: int, new_id: Callable[[], Uuid], rng: random.Random
    ) -> None:
        self._fixed_start_index = fixed_start_index
        self._new_id = new_id
        self._rng = rng
        self._last_created: tuple[Any, ...] | None = None
        self._last_cluster: _ClusterDerived | None = None

    def create_topics(
        self, image: MetadataImage, topics: Sequence[CreatableTopic], *, validate_only: bool
    ) -> ControllerResult[list[CreateTopicResult]]:
        """Create a batch of topics (KIP-4): one result per topic; failures do not spread.

        Every topic's records are validated against the image as left by the topics before
        it in the batch, so two new names that collide are caught too.
        """
        counts: dict[str, int] = {}
        for topic in topics:
            counts[topic.name] = counts.get(topic.name, 0) + 1
        results: list[CreateTopicResult] = []
        records: list[Record] = []
        working = image
        last = len(topics) - 1
        for index, topic in enumerate(topics):
            if counts[topic.name] > 1:
                results.append(
                    CreateTopicResult(
                        name=topic.name,
                        outcome=Outcome(
                            error_code=ErrorCode.INVALID_REQUEST,
                            error_message="Duplicate topic name.",
                        ),
                    )
                )
                continue
            try:
                topic_records, result = self._create_topic(working, topic, validate_only)
            except ApiError as exc:
                results.append(CreateTopicResult(name=topic.name, outcome=Outcome.from_error(exc)))
                continue
            results.append(result)
            if topic_records:
                records.extend(topic_records)
                if index == last:
                    break  # no topic left to check against it: the service replays the batch
                delta = MetadataDelta(working)
                delta.replay_all(topic_records)
                working = delta.apply(working.provenance)
        return finished(tuple(records), results)

    def _create_topic(
        self, image: MetadataImage, request: CreatableTopic, validate_only: bool
    ) -> tuple[list[Record], CreateTopicResult]:
        qualified = request.name
        refuse_reserved_name(qualified)
        invalid = empty_tier_error(qualified)
        if invalid is not None:
            raise invalid
        namespace, name = split_qualified_name(qualified)
        validate_topic_name(name)
        require_namespace(image, namespace)
        if image.topics.get_by_name(qualified) is not None:
            raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{qualified}' already exists.")
        collision = colliding_name(
            qualified,
            lambda n: n in image.topics.by_name,
            lambda: list(image.topics.by_name),
        )
        if collision is not None:
            raise ApiError(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                f"Topic '{qualified}' collides with existing topic: {collision}",
            )
        configs = _topic_configs(request.configs)
        assignment: Sequence[Sequence[int]]
        if request.assignments:
            assignment = _manual_assignment(image, request)
        else:
            assignment = self._placed_assignment(image, request, self._derived(image.cluster))
        replication_factor = len(assignment[0])
        topic_id = self._new_id()
        result = _new_result(
            qualified,
            topic_id,
            _SUCCEEDED,
            len(assignment),
            replication_factor,
            self._created_configs(
                configs, image.configs.cluster(), namespace_configs(image, namespace)
            ),
        )
        if validate_only:
            return [], result
        records: list[Record] = [_new_topic_record(name, topic_id, namespace)]
        if configs:
            records.extend(
                ConfigRecord(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name=qualified,
                    name=key,
                    value=value,
                )
                for key, value in sorted(configs.items())
            )
        records.extend(
            _new_partitions(image, topic_id, 0, assignment, self._derived(image.cluster).isrs)
        )
        return records, result

    def _created_configs(
        self,
        overrides: Mapping[str, str],
        cluster: Mapping[str, str],
        chain: Sequence[tuple[str, Mapping[str, str]]],
    ) -> tuple[CreatedConfig, ...]:
        """Every key of a new topic with its value and source (CreateTopics v5+ answers).

        Consecutive creates mostly resolve the same way (no overrides, same cluster and
        namespace configs), so the last answer is kept and reused while its inputs are the
        same objects (the image's config maps are immutable, replaced on every change).
        """
        key = tuple(sorted(overrides.items())) if overrides else ()
        last = self._last_created
        if (
            last is not None
            and last[0] is cluster
            and last[1] == key
            and len(last[2]) == len(chain)
            and (not chain or _same_chain(last[2], chain))
        ):
            created: tuple[CreatedConfig, ...] = last[3]
            return created
        resolved = resolve_topic_configs(overrides, cluster, chain)
        created = tuple(_created_config(c) for c in resolved)
        self._last_created = (cluster, key, tuple(chain), created)
        return created

    def _placed_assignment(
        self,
        image: MetadataImage,
        request: CreatableTopic,
        derived: _ClusterDerived,
    ) -> tuple[tuple[int, ...], ...]:
        usable = derived.usable()
        partitions = request.num_partitions
        if partitions == -1:
            partitions = cluster_int(image.configs.cluster(), "num.partitions")
        replication = request.replication_factor
        if replication == -1:
            replication = cluster_int(image.configs.cluster(), "default.replication.factor")
        if partitions <= 0:
            raise ApiError(
                ErrorCode.INVALID_PARTITIONS,
                "Number of partitions was set to an invalid non-positive value.",
            )
        _check_partition_count(partitions)
        if replication <= 0:
            raise ApiError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.",
            )
        if replication > INT16_MAX:  # an int16 in Kafka's CreateTopics
            raise ApiError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor {replication} is more than {INT16_MAX}, the largest "
                "Kafka's protocol carries.",
            )
        if replication > len(usable):
            raise ApiError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication} time(s): The target "
                f"replication factor of {replication} cannot be reached because only "
                f"{len(usable)} broker(s) are registered and usable (unfenced, not in "
                "controlled shutdown).",
            )
        # PlacementError is an ApiError: it carries Kafka's code for the client.
        return derived.plan().replica_tuples(
            partitions,
            replication,
            fixed_start_index=self._fixed_start_index,
            rng=self._rng,
        )

    def _derived(self, cluster: ClusterImage) -> _ClusterDerived:
        """What new topics derive from `cluster`, kept while the cluster image is the same object.

        The image's cluster part is immutable and replaced on every broker change, so
        consecutive creates reuse it and a fence or a registration starts afresh.
        """
        last = self._last_cluster
        if last is None or last.cluster is not cluster:
            last = self._last_cluster = _ClusterDerived(cluster)
        return last

    def create_partitions(
        self,
        image: MetadataImage,
        requests: Sequence[CreatePartitionsTopic],
        *,
        validate_only: bool,
    ) -> ControllerResult[list[CreatePartitionsResult]]:
        """Raise partition counts; new partitions are placed as Kafka places added ones."""
        results: list[CreatePartitionsResult] = []
        records: list[Record] = []
        seen: set[Uuid] = set()
        for request in requests:
            try:
                topic = resolve_unseen_topic(image, request.topic, seen)
                new = self._added_partitions(image, topic, request)
            except ApiError as exc:
                results.append(
                    CreatePartitionsResult(name=str(request.topic), outcome=Outcome.from_error(exc))
                )
                continue
            seen.add(topic.topic_id)
            if not validate_only:
                records.extend(new)
            results.append(CreatePartitionsResult(name=topic.qualified_name))
        return finished(tuple(records), results)

    def _added_partitions(
        self, image: MetadataImage, topic: TopicImage, request: CreatePartitionsTopic
    ) -> list[Record]:
        current = len(topic.partitions)
        if topic.pending_deletion is not None:
            raise under_changes(topic, "adding partitions")
        if request.count < current:
            raise ApiError(
                ErrorCode.INVALID_PARTITIONS,
                f"The topic {topic.qualified_name} currently has {current} partition(s); "
                f"{request.count} would not be an increase.",
            )
        if request.count == current:
            raise ApiError(
                ErrorCode.INVALID_PARTITIONS,
                f"Topic already has {current} partition(s).",
            )
        added = request.count - current
        _check_partition_count(added)
        if request.assignments is not None:
            if len(request.assignments) != added:
                raise ApiError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Attempted to add {added} additional partition(s), but only "
                    f"{len(request.assignments)} assignment(s) were specified.",
                )
            assignment = [list(r) for r in request.assignments]
            check_replica_lists(image, assignment, expected=len(topic.partitions[0].replicas))
        else:
            usable = self._derived(image.cluster).usable()
            existing = {p.partition_id: list(p.replicas) for p in topic.partitions}
            replication = len(topic.partitions[0].replicas)
            if replication > len(usable):
                raise ApiError(
                    ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"Unable to replicate the partition {replication} time(s): only "
                    f"{len(usable)} broker(s) are registered and usable.",
                )
            placed = assign_added_partitions(usable, existing, request.count)
            assignment = [list(placed[p]) for p in range(current, request.count)]
        return _new_partitions(
            image, topic.topic_id, current, assignment, self._derived(image.cluster).isrs
        )


def delete_topics(
    image: MetadataImage, refs: Sequence[TopicRef]
) -> ControllerResult[list[DeleteTopicResult]]:
    """Delete topics by name or id; each result stands alone, deletion is immediate."""
    enabled = cluster_bool(image.configs.cluster(), "delete.topic.enable")
    results: list[DeleteTopicResult] = []
    records: list[Record] = []
    seen: set[Uuid] = set()
    for ref in refs:
        try:
            if not enabled:
                raise ApiError(
                    ErrorCode.TOPIC_DELETION_DISABLED,
                    "Topic deletion is disabled; set delete.topic.enable=true "
                    "(`mlog configs alter --cluster --set delete.topic.enable=true`)",
                )
            topic = resolve_unseen_topic(image, ref, seen)
        except ApiError as exc:
            results.append(
                DeleteTopicResult(
                    name=ref.name,
                    topic_id=ref.topic_id or Uuid.ZERO,
                    outcome=Outcome.from_error(exc),
                )
            )
            continue
        seen.add(topic.topic_id)
        for partition in topic.partitions:
            check_change(
                partition_name(topic, partition.partition_id),
                partition,
                None,
                image.cluster,
                image.cluster,
            )
        records.append(_new_remove_record(topic.topic_id))
        results.append(_new_deleted(topic.qualified_name, topic.topic_id, _SUCCEEDED))
    return finished(tuple(records), results)


def check_replica_lists(
    image: MetadataImage, assignment: Sequence[Sequence[int]], *, expected: int | None
) -> None:
    """Kafka's checks of a manual assignment (INVALID_REPLICA_ASSIGNMENT)."""
    for replicas in assignment:
        if not replicas:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty replica list.",
            )
        seen: set[int] = set()
        for broker_id in replicas:
            if broker_id in seen:
                raise ApiError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes the broker {broker_id} more "
                    "than once.",
                )
            seen.add(broker_id)
            if image.cluster.get(broker_id) is None:
                raise ApiError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"The manual partition assignment includes broker {broker_id}, but no such "
                    "broker is registered.",
                )
        if expected is not None and len(replicas) != expected:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes a partition with {len(replicas)} "
                f"replica(s), but this is not consistent with previous partitions, which have "
                f"{expected} replica(s).",
            )


def _new_partitions(
    image: MetadataImage,
    topic_id: Uuid,
    first_id: int,
    assignment: Sequence[Sequence[int]],
    isrs: dict[tuple[int, ...], tuple[int, ...]] | None = None,
) -> list[Record]:
    """A `PartitionRecord` per replica list from partition `first_id`, led by the first live one.

    `isrs` caches each replica list's ISR (its live brokers, in order) for `image.cluster`
    (the caller keeps it while that cluster image is the same object); without it, a cache
    for this call.
    """
    records: list[Record] = []
    cluster = image.cluster
    if isrs is None:
        isrs = {}
    for partition_id, assigned in enumerate(assignment, start=first_id):
        replicas = tuple(assigned)  # the very tuple if it is one (placement shares them)
        isr = isrs.get(replicas)
        if isr is None:
            isr = _live_replicas(cluster, replicas)
            if not isr:
                raise ApiError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"All brokers specified in the manual partition assignment for partition "
                    f"{partition_id} are fenced or in controlled shutdown.",
                )
            if len(isrs) >= _ISR_CACHE_LIMIT:
                isrs.clear()
            isrs[replicas] = isr
        # No `check_change`: creating a partition is legal from every state (it checks only a
        # partition that exists before and after), and replay checks the record itself.
        records.append(_new_partition(partition_id, topic_id, replicas, isr, isr[0]))
    return records


_ISR_CACHE_LIMIT = 65_536
"""Replica lists an ISR cache holds before it starts again."""


def _live_replicas(cluster: ClusterImage, replicas: tuple[int, ...]) -> tuple[int, ...]:
    """The live brokers of `replicas`, in order.

    `replicas` itself when all are (the usual case): one tuple for a new partition's replicas
    and ISR.
    """
    live = [b for b in replicas if is_live(cluster, b)]
    return replicas if len(live) == len(replicas) else tuple(live)


def _same_chain(
    a: Sequence[tuple[str, Mapping[str, str]]], b: Sequence[tuple[str, Mapping[str, str]]]
) -> bool:
    """Whether two namespace config chains (as long as each other) are the same objects."""
    return all(x[0] == y[0] and x[1] is y[1] for x, y in zip(a, b, strict=True))


_SUCCEEDED = Outcome()
"""The outcome of a topic created or deleted (immutable, so every result shares it)."""

_new_result: Callable[
    [str, Uuid, Outcome, int, int, tuple[CreatedConfig, ...]], CreateTopicResult
] = preset_constructor(
    CreateTopicResult,
    ("name", "topic_id", "outcome", "num_partitions", "replication_factor", "configs"),
)
"""`CreateTopicResult(...)` of every field, positionally, through the slots (one a topic)."""

_new_deleted: Callable[[str, Uuid, Outcome], DeleteTopicResult] = preset_constructor(
    DeleteTopicResult, ("name", "topic_id", "outcome")
)
"""`DeleteTopicResult(...)` of a topic deleted, through the slots (one a topic)."""

_new_remove_record: Callable[[Uuid], RemoveTopicRecord] = preset_constructor(
    RemoveTopicRecord, ("topic_id",)
)
"""`RemoveTopicRecord(topic_id=)` of a topic just resolved in the image, through the slots."""

_new_topic_record: Callable[[str, Uuid, str], TopicRecord] = preset_constructor(
    TopicRecord, ("name", "topic_id", "namespace")
)
"""`TopicRecord(name=, topic_id=, namespace=)` of checked values (the codec and replay check
it again), through the slots."""

_new_partition: Callable[[int, Uuid, tuple[int, ...], tuple[int, ...], int], PartitionRecord] = (
    preset_constructor(PartitionRecord, ("partition_id", "topic_id", "replicas", "isr", "leader"))
)
"""`PartitionRecord(partition_id=, topic_id=, replicas=, isr=, leader=)`, the rest at their
defaults, without the dataclass's `__init__`: ten of them a topic, all from checked values
(the codec and replay check each record again)."""


def _check_partition_count(count: int) -> None:
    if count > MAX_PARTITIONS_PER_REQUEST:
        raise ApiError(
            ErrorCode.INVALID_PARTITIONS,
            f"{count} partitions in one request is more than the {MAX_PARTITIONS_PER_REQUEST:,} "
            "one request may create; create fewer and add the rest with create-partitions "
            f"requests of at most {MAX_PARTITIONS_PER_REQUEST:,} each.",
        )


def _topic_configs(pairs: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for key, value in pairs:
        if key in configs:
            raise ApiError(ErrorCode.INVALID_CONFIG, f"Config {key} is given twice; give it once")
        if value is None:
            raise ApiError(
                ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {key}"
            )
        try:
            configs[key] = validate_topic_config(key, value)
        except InvalidConfigError as exc:
            raise ApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    return configs


def _manual_assignment(image: MetadataImage, request: CreatableTopic) -> list[list[int]]:
    if request.replication_factor != -1:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not "
            "set to -1.",
        )
    if request.num_partitions != -1:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    _check_partition_count(len(request.assignments))
    by_id = dict(request.assignments)
    if len(by_id) != len(request.assignments) or sorted(by_id) != list(range(len(by_id))):
        raise ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Partitions should be a consecutive 0-based integer sequence",
        )
    assignment = [list(by_id[p]) for p in range(len(by_id))]
    check_replica_lists(image, assignment, expected=len(assignment[0]))
    return assignment


def _placement_info(brokers: Sequence[RegisterBrokerRecord]) -> list[BrokerPlacementInfo]:
    return [BrokerPlacementInfo(broker_id=b.broker_id, rack=b.rack) for b in brokers]


def _created_config(config: ResolvedConfig) -> CreatedConfig:
    return CreatedConfig(
        name=config.name,
        value=None if config.sensitive else config.value,
        read_only=config.read_only,
        source=int(config.source),
        sensitive=config.sensitive,
    )
