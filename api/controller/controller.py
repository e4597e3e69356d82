"""The controller: validates commands against an image and answers with the records to append.

Nothing changes here: a command returns `ControllerResult(records, response)`, and only the
replay of those records (after they are appended) changes the image. Validation follows Kafka's
controller (`ReplicationControlManager`, `ConfigurationControlManager`, `ClusterControlManager`):
the same checks, in the same order, with the same error codes and messages where Kafka has one.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.controller import namespaces as namespace_commands
from api.controller import partition_reduction
from api.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    AlterConfigsResult,
    BrokerAction,
    BrokerResult,
    ConfigResource,
    ControllerResult,
    CreatableTopic,
    CreatedConfig,
    CreateNamespace,
    CreateNamespaceResult,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteNamespace,
    DeleteNamespaceResult,
    DeletePartitionsResult,
    DeletePartitionsTopic,
    DeleteTopicResult,
    ElectionType,
    MoveTopic,
    MoveTopicResult,
    NamespaceInfo,
    Outcome,
    PartitionResult,
    PurgeResult,
    Reassignment,
    RegisterBroker,
    TopicPartition,
    TopicRef,
)
from api.controller.config_defs import (
    CLUSTER_CONFIGS,
    TOPIC_CONFIGS,
    ResolvedConfig,
    cluster_value,
    resolve_cluster_configs,
    resolve_topic_configs,
    validate_cluster_config,
    validate_topic_config,
)
from api.controller.config_values import ConfigType, InvalidConfigError
from api.controller.errors import ApiError, ErrorCode
from api.controller.names import colliding_name, validate_topic_name
from api.controller.placement import (
    BrokerPlacementInfo,
    assign_added_partitions,
    assign_replicas_to_brokers,
)
from api.controller.states import check_change, is_live
from records.model import (
    LEADER_UNCHANGED,
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    ControlledShutdownChange,
    FencingChange,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from records.uuids import Uuid
from replay.delta import MetadataDelta, merge_partition_change
from replay.image import (
    ClusterImage,
    MetadataImage,
    TopicImage,
    enclosing_namespaces,
    split_qualified_name,
)

MAX_PARTITIONS_PER_REQUEST = 10_000
"""The most partitions one request may create in one topic.

Kafka's controller writes at most 10,000 records for one user operation
(`QuorumController.MAX_RECORDS_PER_USER_OP`); without a bound, a request for 2^31-1 partitions
would try to place them all in memory. Larger topics are grown with further create-partitions.
"""


def _check_partition_count(count: int) -> None:
    if count > MAX_PARTITIONS_PER_REQUEST:
        raise ApiError(
            ErrorCode.INVALID_PARTITIONS,
            f"{count} partitions in one request is more than the {MAX_PARTITIONS_PER_REQUEST:,} "
            "one request may create; create fewer and add the rest with create-partitions "
            f"requests of at most {MAX_PARTITIONS_PER_REQUEST:,} each.",
        )


def _ok() -> Outcome:
    return Outcome()


def _failed(error: ApiError) -> Outcome:
    return Outcome(error_code=error.error_code, error_message=error.message)


def _partition_where(topic: TopicImage, partition_id: int) -> str:
    return f"{topic.qualified_name}-{partition_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerOptions:
    """Knobs for reproducible placement and ids (tests, benchmarks); defaults are random."""

    fixed_start_index: int = -1
    """Kafka's `fixedStartIndex` for replica placement; -1 = random, as Kafka does."""


class Controller:
    """Turns commands into records, validating them against an image the way Kafka does."""

    def __init__(
        self,
        *,
        options: ControllerOptions | None = None,
        new_id: Callable[[], Uuid] = Uuid.random,
        rng: random.Random | None = None,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.options = options or ControllerOptions()
        self._new_id = new_id
        self._rng = rng or random.Random()
        self._clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._last_created: tuple[Any, ...] | None = None
        self._last_usable: tuple[ClusterImage, list[BrokerPlacementInfo]] | None = None

    # ------------------------------------------------------------------ lookups

    @staticmethod
    def resolve_topic(image: MetadataImage, ref: TopicRef) -> TopicImage:
        """The live topic a reference names; Kafka's errors if there is none or they disagree."""
        if ref.name is not None:
            topic = image.topics.get_by_name(ref.name)
            if topic is None:
                raise ApiError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"This server does not host this topic-partition: topic {ref.name!r} "
                    "does not exist",
                )
            if ref.topic_id is not None and ref.topic_id != topic.topic_id:
                raise ApiError(
                    ErrorCode.INCONSISTENT_TOPIC_ID,
                    f"The topic id {ref.topic_id} does not match the topic {ref.name!r}, "
                    f"whose id is {topic.topic_id}",
                )
            return topic
        if ref.topic_id is None:
            raise ApiError(ErrorCode.INVALID_REQUEST, "name a topic by name or by topic id")
        found = image.topics.get(ref.topic_id)
        if found is None:
            raise ApiError(
                ErrorCode.UNKNOWN_TOPIC_ID,
                f"This server does not host this topic ID: {ref.topic_id}",
            )
        return found

    @staticmethod
    def _cluster_int(image: MetadataImage, name: str) -> int:
        value = cluster_value(image.configs.cluster(), name)
        return int(value)  # type: ignore[arg-type]  # int-typed keys give ints

    @staticmethod
    def _cluster_bool(image: MetadataImage, name: str) -> bool:
        return bool(cluster_value(image.configs.cluster(), name))

    # ------------------------------------------------------------------ brokers

    def register_broker(
        self, image: MetadataImage, request: RegisterBroker
    ) -> ControllerResult[BrokerResult]:
        """Register a broker (a new incarnation if it was registered before).

        The broker epoch is the offset the registration record gets, as in Kafka, so every
        incarnation has a larger one.
        """
        if request.broker_id < 0:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"broker id must be >= 0, got {request.broker_id}",
            )
        if request.rack is not None and not request.rack.strip():
            raise ApiError(ErrorCode.INVALID_REQUEST, "a rack name cannot be empty")
        for endpoint in request.endpoints:
            if not 0 < endpoint.port < 65536 or not endpoint.host:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST,
                    f"endpoint {endpoint.host}:{endpoint.port} is not HOST:PORT with a port "
                    "in 1..65535",
                )
        epoch = image.provenance.offset + 1
        record = RegisterBrokerRecord(
            broker_id=request.broker_id,
            incarnation_id=self._new_id(),
            broker_epoch=epoch,
            end_points=request.endpoints,
            rack=request.rack,
            fenced=request.fenced,
        )
        records: list[Record] = [record]
        changed = 0
        if not request.fenced:
            cluster_after = _cluster_with(image.cluster, record)
            moves = self._elect_leaderless(image, cluster_after, {request.broker_id})
            records.extend(moves)
            changed = len(moves)
        return ControllerResult(
            records=tuple(records),
            response=BrokerResult(
                broker_id=request.broker_id, broker_epoch=epoch, partitions_changed=changed
            ),
        )

    def change_broker(
        self, image: MetadataImage, broker_id: int, action: BrokerAction
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
            moves = self._elect_leaderless(image, cluster_after, {broker_id})
        else:
            moves = self._move_off(image, cluster_after, broker_id)
        return ControllerResult(
            records=(record, *moves),
            response=BrokerResult(
                broker_id=broker_id, broker_epoch=epoch, partitions_changed=len(moves)
            ),
        )

    def _move_off(
        self, image: MetadataImage, cluster_after: ClusterImage, broker_id: int
    ) -> list[Record]:
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
                where = _partition_where(topic, partition.partition_id)
                _checked(where, partition, change, image.cluster, cluster_after)
                changes.append(change)
        return changes

    def _elect_leaderless(
        self, image: MetadataImage, cluster_after: ClusterImage, brokers: set[int]
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
                where = _partition_where(topic, partition.partition_id)
                _checked(where, partition, change, image.cluster, cluster_after)
                changes.append(change)
        return changes

    # ------------------------------------------------------------------ create topics

    def create_topics(
        self,
        image: MetadataImage,
        topics: Sequence[CreatableTopic],
        *,
        validate_only: bool = False,
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
                results.append(CreateTopicResult(name=topic.name, outcome=_failed(exc)))
                continue
            results.append(result)
            if topic_records:
                records.extend(topic_records)
                if index == last:
                    break  # no topic left to check against it: the service replays the batch
                delta = MetadataDelta(working)
                delta.replay_all(topic_records)
                working = delta.apply(working.provenance)
        return ControllerResult(records=tuple(records), response=results)

    def _create_topic(
        self, image: MetadataImage, request: CreatableTopic, validate_only: bool
    ) -> tuple[list[Record], CreateTopicResult]:
        qualified = request.name
        namespace, name = split_qualified_name(qualified)
        validate_topic_name(name)
        namespace_commands.require_namespace(image, namespace)
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
        configs = self._topic_configs(request.configs)
        if request.assignments:
            assignment = self._manual_assignment(image, request)
        else:
            assignment = self._placed_assignment(image, request, self._usable(image.cluster))
        replication_factor = len(assignment[0])
        topic_id = self._new_id()
        result = CreateTopicResult(
            name=qualified,
            topic_id=topic_id,
            num_partitions=len(assignment),
            replication_factor=replication_factor,
            configs=self._created_configs(
                configs, image.configs.cluster(), self.namespace_configs(image, namespace)
            ),
        )
        if validate_only:
            return [], result
        records: list[Record] = [TopicRecord(name=name, topic_id=topic_id, namespace=namespace)]
        records.extend(
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC,
                resource_name=qualified,
                name=key,
                value=value,
            )
            for key, value in sorted(configs.items())
        )
        for partition_id, replicas in enumerate(assignment):
            isr = tuple(b for b in replicas if is_live(image.cluster, b))
            if not isr:
                raise ApiError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"All brokers specified in the manual partition assignment for partition "
                    f"{partition_id} are fenced or in controlled shutdown.",
                )
            partition = PartitionRecord(
                partition_id=partition_id,
                topic_id=topic_id,
                replicas=tuple(replicas),
                isr=isr,
                leader=isr[0],
            )
            check_change(
                f"{qualified}-{partition_id}", None, partition, image.cluster, image.cluster
            )
            records.append(partition)
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
        key = tuple(sorted(overrides.items()))
        last = self._last_created
        if (
            last is not None
            and last[0] is cluster
            and last[1] == key
            and len(last[2]) == len(chain)
            and all(a[0] == b[0] and a[1] is b[1] for a, b in zip(last[2], chain, strict=True))
        ):
            created: tuple[CreatedConfig, ...] = last[3]
            return created
        resolved = resolve_topic_configs(overrides, cluster, chain)
        created = tuple(_created_config(c) for c in resolved)
        self._last_created = (cluster, key, tuple(chain), created)
        return created

    @staticmethod
    def _topic_configs(pairs: Iterable[tuple[str, str | None]]) -> dict[str, str]:
        configs: dict[str, str] = {}
        for key, value in pairs:
            if key in configs:
                raise ApiError(
                    ErrorCode.INVALID_CONFIG, f"Config {key} is given twice; give it once"
                )
            if value is None:
                raise ApiError(
                    ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {key}"
                )
            try:
                configs[key] = validate_topic_config(key, value)
            except InvalidConfigError as exc:
                raise ApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        return configs

    def _placed_assignment(
        self,
        image: MetadataImage,
        request: CreatableTopic,
        usable: Sequence[BrokerPlacementInfo],
    ) -> list[list[int]]:
        partitions = request.num_partitions
        if partitions == -1:
            partitions = self._cluster_int(image, "num.partitions")
        replication = request.replication_factor
        if replication == -1:
            replication = self._cluster_int(image, "default.replication.factor")
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
        if replication > len(usable):
            raise ApiError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication} time(s): The target "
                f"replication factor of {replication} cannot be reached because only "
                f"{len(usable)} broker(s) are registered and usable (unfenced, not in "
                "controlled shutdown).",
            )
        # PlacementError is an ApiError: it carries Kafka's code for the client.
        placed = assign_replicas_to_brokers(
            usable,
            partitions,
            replication,
            fixed_start_index=self.options.fixed_start_index,
            rng=self._rng,
        )
        return [list(placed[p]) for p in range(partitions)]

    def _usable(self, cluster: ClusterImage) -> list[BrokerPlacementInfo]:
        """The brokers new replicas may go to, kept while the cluster image is the same object.

        The image's cluster part is immutable and replaced on every broker change, so
        consecutive creates reuse the list (do not change it).
        """
        last = self._last_usable
        if last is None or last[0] is not cluster:
            last = (cluster, _placement_info(cluster.usable()))
            self._last_usable = last
        return last[1]

    @staticmethod
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
        _check_replica_lists(image, assignment, expected=len(assignment[0]))
        return assignment

    # ------------------------------------------------------------------ delete topics

    def delete_topics(
        self, image: MetadataImage, refs: Sequence[TopicRef]
    ) -> ControllerResult[list[DeleteTopicResult]]:
        """Delete topics by name or id; each result stands alone, deletion is immediate."""
        enabled = self._cluster_bool(image, "delete.topic.enable")
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
                topic = self.resolve_topic(image, ref)
                if topic.topic_id in seen:
                    raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic in the request.")
            except ApiError as exc:
                results.append(
                    DeleteTopicResult(
                        name=ref.name, topic_id=ref.topic_id or Uuid.ZERO, outcome=_failed(exc)
                    )
                )
                continue
            seen.add(topic.topic_id)
            for partition in topic.partitions:
                check_change(
                    _partition_where(topic, partition.partition_id),
                    partition,
                    None,
                    image.cluster,
                    image.cluster,
                )
            records.append(RemoveTopicRecord(topic_id=topic.topic_id))
            results.append(DeleteTopicResult(name=topic.qualified_name, topic_id=topic.topic_id))
        return ControllerResult(records=tuple(records), response=results)

    # ------------------------------------------------------------------ create partitions

    def create_partitions(
        self,
        image: MetadataImage,
        requests: Sequence[CreatePartitionsTopic],
        *,
        validate_only: bool = False,
    ) -> ControllerResult[list[CreatePartitionsResult]]:
        """Raise partition counts; new partitions are placed as Kafka places added ones."""
        results: list[CreatePartitionsResult] = []
        records: list[Record] = []
        seen: set[Uuid] = set()
        for request in requests:
            try:
                topic = self.resolve_topic(image, request.topic)
                if topic.topic_id in seen:
                    raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic in the request.")
                new = self._added_partitions(image, topic, request)
            except ApiError as exc:
                results.append(
                    CreatePartitionsResult(name=str(request.topic), outcome=_failed(exc))
                )
                continue
            seen.add(topic.topic_id)
            if not validate_only:
                records.extend(new)
            results.append(CreatePartitionsResult(name=topic.qualified_name))
        return ControllerResult(records=tuple(records), response=results)

    def _added_partitions(
        self, image: MetadataImage, topic: TopicImage, request: CreatePartitionsTopic
    ) -> list[Record]:
        current = len(topic.partitions)
        if topic.pending_deletion is not None:
            raise partition_reduction.under_changes(topic, "adding partitions")
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
            _check_replica_lists(image, assignment, expected=len(topic.partitions[0].replicas))
        else:
            usable = self._usable(image.cluster)
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
        records: list[Record] = []
        for offset, replicas in enumerate(assignment):
            partition_id = current + offset
            isr = tuple(b for b in replicas if is_live(image.cluster, b))
            if not isr:
                raise ApiError(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"All brokers specified in the manual partition assignment for partition "
                    f"{partition_id} are fenced or in controlled shutdown.",
                )
            partition = PartitionRecord(
                partition_id=partition_id,
                topic_id=topic.topic_id,
                replicas=tuple(replicas),
                isr=isr,
                leader=isr[0],
            )
            check_change(
                _partition_where(topic, partition_id), None, partition, image.cluster, image.cluster
            )
            records.append(partition)
        return records

    # ------------------------------------------------------------------ configs

    def describe_configs(
        self, image: MetadataImage, resource: ConfigResource
    ) -> list[ResolvedConfig]:
        """Every known key of a resource with its value and where the value comes from."""
        cluster = image.configs.cluster()
        if resource.type == ConfigResourceType.TOPIC:
            topic = self.resolve_topic(image, TopicRef(name=resource.name))
            overrides = image.configs.get(ConfigResourceType.TOPIC, topic.qualified_name)
            return resolve_topic_configs(
                overrides, cluster, self.namespace_configs(image, topic.namespace)
            )
        if resource.type == ConfigResourceType.NAMESPACE:
            self._check_namespace_resource(image, resource.name)
            # A namespace's own values show as NAMESPACE_CONFIG with its own name as source.
            return resolve_topic_configs({}, cluster, self.namespace_configs(image, resource.name))
        if resource.type == ConfigResourceType.BROKER:
            self._check_broker_resource(image, resource.name)
            if not resource.name:
                return resolve_cluster_configs(cluster)
            broker = image.configs.get(ConfigResourceType.BROKER, resource.name)
            return resolve_cluster_configs(cluster, broker)
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"config resource type {resource.type.name} is not supported; use TOPIC, NAMESPACE "
            "or BROKER",
        )

    @staticmethod
    def namespace_configs(
        image: MetadataImage, namespace: str
    ) -> list[tuple[str, Mapping[str, str]]]:
        """The configs of a namespace and of those enclosing it, nearest first."""
        chain: list[tuple[str, Mapping[str, str]]] = []
        for name in enclosing_namespaces(namespace):
            values = image.configs.get(ConfigResourceType.NAMESPACE, name)
            if values:
                chain.append((name, values))
        return chain

    @staticmethod
    def _check_namespace_resource(image: MetadataImage, name: str) -> None:
        if name == "":
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                'The default namespace "" takes its configs from the cluster; use --cluster',
            )
        namespace_commands.require_namespace(image, name)

    @staticmethod
    def _check_broker_resource(image: MetadataImage, name: str) -> None:
        if name == "":
            return
        if not name.isdigit() or image.cluster.get(int(name)) is None:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f'broker {name!r} is not registered; use a registered broker id, or "" for '
                "the cluster-wide default",
            )

    def incremental_alter_configs(
        self,
        image: MetadataImage,
        changes: Sequence[tuple[ConfigResource, Sequence[AlterConfig]]],
        *,
        validate_only: bool = False,
    ) -> ControllerResult[list[AlterConfigsResult]]:
        """Set, delete, append to or subtract from config keys; one result per resource."""
        results: list[AlterConfigsResult] = []
        records: list[Record] = []
        for resource, ops in changes:
            try:
                resource_records = self._alter_resource(image, resource, ops)
            except ApiError as exc:
                results.append(AlterConfigsResult(resource=resource, outcome=_failed(exc)))
                continue
            if not validate_only:
                records.extend(resource_records)
            results.append(AlterConfigsResult(resource=resource))
        return ControllerResult(records=tuple(records), response=results)

    def _alter_resource(
        self, image: MetadataImage, resource: ConfigResource, ops: Sequence[AlterConfig]
    ) -> list[Record]:
        if resource.type == ConfigResourceType.TOPIC:
            topic = self.resolve_topic(image, TopicRef(name=resource.name))
            name = topic.qualified_name
            definitions = TOPIC_CONFIGS
            validate = validate_topic_config
        elif resource.type == ConfigResourceType.BROKER:
            self._check_broker_resource(image, resource.name)
            name = resource.name
            definitions = CLUSTER_CONFIGS
            validate = validate_cluster_config
        elif resource.type == ConfigResourceType.NAMESPACE:
            self._check_namespace_resource(image, resource.name)
            name = resource.name
            definitions = TOPIC_CONFIGS
            validate = validate_topic_config
        else:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"config resource type {resource.type.name} cannot be altered; use TOPIC, "
                "NAMESPACE or BROKER",
            )
        current = dict(image.configs.get(resource.type, name))
        names = [op.name for op in ops]
        if len(set(names)) != len(names):
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                "Error due to duplicate config keys: give each key once per resource",
            )
        records: list[Record] = []
        for op in ops:
            definition = definitions.get(op.name)
            if definition is None:
                raise ApiError(
                    ErrorCode.INVALID_CONFIG,
                    f"Unknown {resource.type.name.lower()} config name: {op.name} "
                    "(`mlog configs describe --all` lists the known keys)",
                )
            value: str | None
            if op.op == AlterConfigOp.DELETE:
                value = None
            elif op.op == AlterConfigOp.SET:
                if op.value is None:
                    raise ApiError(
                        ErrorCode.INVALID_REQUEST,
                        f"Null value not supported for SET of {op.name}; use DELETE",
                    )
                value = op.value
            else:
                if definition.type != ConfigType.LIST:
                    raise ApiError(
                        ErrorCode.INVALID_CONFIG,
                        f"Config value append/subtract is not allowed for config key "
                        f"{op.name} (it is not a list)",
                    )
                existing = current.get(op.name, definition.default or "")
                items = [v.strip() for v in existing.split(",") if v.strip()]
                given = [v.strip() for v in (op.value or "").split(",") if v.strip()]
                if op.op == AlterConfigOp.APPEND:
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                value = ",".join(items)
            if value is not None:
                try:
                    value = validate(op.name, value)
                except InvalidConfigError as exc:
                    raise ApiError(ErrorCode.INVALID_CONFIG, str(exc)) from None
            records.append(
                ConfigRecord(
                    resource_type=resource.type, resource_name=name, name=op.name, value=value
                )
            )
        return records

    # ------------------------------------------------------------------ namespaces

    def create_namespace(
        self, image: MetadataImage, request: CreateNamespace
    ) -> ControllerResult[CreateNamespaceResult]:
        """Create a namespace and every missing tier above it, in one batch."""
        records, result = namespace_commands.create_namespace(image, request, self._new_id)
        return ControllerResult(records=tuple(records), response=result)

    def delete_namespace(
        self, image: MetadataImage, request: DeleteNamespace
    ) -> ControllerResult[DeleteNamespaceResult]:
        """Delete a namespace with its topics (and, if recursive, its subtree) in one batch."""
        records, result = namespace_commands.delete_namespace(
            image, request, topic_deletion_enabled=self._cluster_bool(image, "delete.topic.enable")
        )
        return ControllerResult(records=tuple(records), response=result)

    def move_topic(
        self, image: MetadataImage, request: MoveTopic
    ) -> ControllerResult[MoveTopicResult]:
        """Move a topic to another namespace; it keeps its id, partitions and configs."""
        topic = self.resolve_topic(image, request.topic)
        records, result = namespace_commands.move_topic(image, request, topic)
        return ControllerResult(records=tuple(records), response=result)

    @staticmethod
    def list_namespaces(
        image: MetadataImage, parent: str = "", *, recursive: bool = False
    ) -> list[NamespaceInfo]:
        """The namespaces directly below `parent` (or every one below it), with topic counts."""
        return namespace_commands.list_namespaces(image, parent, recursive=recursive)

    # ------------------------------------------------------------------ partition deletion

    def delete_partitions(
        self,
        image: MetadataImage,
        requests: Sequence[DeletePartitionsTopic],
        *,
        validate_only: bool = False,
    ) -> ControllerResult[list[DeletePartitionsResult]]:
        """Lower partition counts with a delayed (or immediate) deletion; one result per topic."""
        enabled = self._cluster_bool(image, partition_reduction.ENABLE_KEY)
        now = self._clock_ms()
        results: list[DeletePartitionsResult] = []
        records: list[Record] = []
        seen: set[Uuid] = set()
        for request in requests:
            try:
                topic = self.resolve_topic(image, request.topic)
                if topic.topic_id in seen:
                    raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic in the request.")
                topic_records, result = partition_reduction.delete_partitions(
                    image, topic, request, enabled=enabled, now_ms=now
                )
            except ApiError as exc:
                results.append(
                    DeletePartitionsResult(name=str(request.topic), outcome=_failed(exc))
                )
                continue
            seen.add(topic.topic_id)
            if not validate_only:
                records.extend(topic_records)
            results.append(result)
        return ControllerResult(records=tuple(records), response=results)

    @staticmethod
    def purge_partitions(image: MetadataImage, now_ms: int) -> ControllerResult[list[PurgeResult]]:
        """One check of pending partition deletions at `now_ms`: the next step of each due one."""
        records, results = partition_reduction.purge_due(image, now_ms)
        return ControllerResult(records=tuple(records), response=results)

    # ------------------------------------------------------------------ leaders

    def elect_leaders(
        self,
        image: MetadataImage,
        partitions: Sequence[TopicPartition] | None,
        election: ElectionType = ElectionType.PREFERRED,
    ) -> ControllerResult[list[PartitionResult]]:
        """Preferred (or unclean) leader election; None = every partition of every topic.

        When every partition is asked for, those that need no election are left out of the
        answer, as Kafka does.
        """
        targets: list[tuple[TopicPartition, TopicImage | ApiError]] = []
        if partitions is None:
            for topic in image.topics.sorted():
                ref = TopicRef(name=topic.qualified_name)
                targets.extend(
                    (TopicPartition(topic=ref, partition=p.partition_id), topic)
                    for p in topic.partitions
                )
        else:
            for tp in partitions:
                try:
                    targets.append((tp, self.resolve_topic(image, tp.topic)))
                except ApiError as exc:
                    targets.append((tp, exc))
        results: list[PartitionResult] = []
        records: list[Record] = []
        for tp, found in targets:
            name = str(tp.topic)
            try:
                if isinstance(found, ApiError):
                    raise found
                change = self._election(image, found, tp.partition, election)
            except ApiError as exc:
                if partitions is None and exc.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                    continue
                results.append(
                    PartitionResult(topic=name, partition=tp.partition, outcome=_failed(exc))
                )
                continue
            records.append(change)
            results.append(PartitionResult(topic=found.qualified_name, partition=tp.partition))
        return ControllerResult(records=tuple(records), response=results)

    def _election(
        self, image: MetadataImage, topic: TopicImage, partition_id: int, election: ElectionType
    ) -> PartitionChangeRecord:
        if not 0 <= partition_id < len(topic.partitions):
            raise ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"Partition {partition_id} of {topic.qualified_name} does not exist",
            )
        partition = topic.partitions[partition_id]
        where = _partition_where(topic, partition_id)
        if election == ElectionType.PREFERRED:
            preferred = partition.replicas[0]
            if partition.leader == preferred:
                raise ApiError(
                    ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
                )
            if preferred not in partition.isr or not is_live(image.cluster, preferred):
                raise ApiError(
                    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                    f"Failed to elect leader for partition {where} under strategy "
                    f"PreferredReplicaPartitionLeaderElectionStrategy: broker {preferred} is "
                    "not in the ISR or not live",
                )
            change = PartitionChangeRecord(
                partition_id=partition_id, topic_id=topic.topic_id, leader=preferred
            )
        else:
            if partition.leader != NO_LEADER and is_live(image.cluster, partition.leader):
                raise ApiError(
                    ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
                )
            leader = next((b for b in partition.replicas if is_live(image.cluster, b)), None)
            if leader is None:
                raise ApiError(
                    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    f"Failed to elect leader for partition {where}: no replica is live",
                )
            change = PartitionChangeRecord(
                partition_id=partition_id, topic_id=topic.topic_id, leader=leader, isr=(leader,)
            )
        _checked(where, partition, change, image.cluster, image.cluster)
        return change

    # ------------------------------------------------------------------ reassignments

    def alter_reassignments(
        self, image: MetadataImage, reassignments: Sequence[Reassignment]
    ) -> ControllerResult[list[PartitionResult]]:
        """Start (or cancel) partition reassignments, as Kafka's KIP-455 controller does.

        Starting writes the PartitionChangeRecord Kafka writes (target replicas first, then
        the ones leaving, with `adding`/`removing` set). This service keeps metadata only, so
        there is no data to copy: a live new replica is in sync at once, and when every adding
        replica is live the completing change (replicas = target, adding/removing cleared,
        leader moved if it left) follows in the same batch.
        """
        results: list[PartitionResult] = []
        records: list[Record] = []
        working = image
        for item in reassignments:
            tp = item.partition
            try:
                topic = self.resolve_topic(working, tp.topic)
                changes = self._reassign(working, topic, tp.partition, item.replicas)
            except ApiError as exc:
                results.append(
                    PartitionResult(
                        topic=str(tp.topic), partition=tp.partition, outcome=_failed(exc)
                    )
                )
                continue
            records.extend(changes)
            delta = MetadataDelta(working)
            delta.replay_all(changes)
            working = delta.apply(working.provenance)
            results.append(PartitionResult(topic=topic.qualified_name, partition=tp.partition))
        return ControllerResult(records=tuple(records), response=results)

    def _reassign(
        self,
        image: MetadataImage,
        topic: TopicImage,
        partition_id: int,
        target: tuple[int, ...] | None,
    ) -> list[Record]:
        if not 0 <= partition_id < len(topic.partitions):
            raise ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"Partition {partition_id} of {topic.qualified_name} does not exist",
            )
        if topic.pending_deletion is not None:
            raise partition_reduction.under_changes(topic, "a reassignment")
        partition = topic.partitions[partition_id]
        where = _partition_where(topic, partition_id)
        cluster = image.cluster
        in_progress = bool(partition.adding_replicas or partition.removing_replicas)
        if target is None:
            if not in_progress:
                raise ApiError(
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    f"No ongoing reassignment for partition {where}.",
                )
            original = tuple(b for b in partition.replicas if b not in partition.adding_replicas)
            isr = tuple(b for b in partition.isr if b in original) or original[:1]
            leader = partition.leader if partition.leader in isr else _first_live(cluster, isr)
            change = PartitionChangeRecord(
                partition_id=partition_id,
                topic_id=topic.topic_id,
                replicas=original,
                isr=isr,
                leader=leader if leader != partition.leader else LEADER_UNCHANGED,
                adding_replicas=(),
                removing_replicas=(),
            )
            _checked(where, partition, change, cluster, cluster)
            return [change]
        _check_replica_lists(image, [list(target)], expected=None)
        if in_progress:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"Partition {where} is already being reassigned; cancel it first",
            )
        if tuple(target) == partition.replicas:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"Partition {where} already has replicas {list(target)}",
            )
        adding = tuple(b for b in target if b not in partition.replicas)
        removing = tuple(b for b in partition.replicas if b not in target)
        records: list[Record] = []
        current = partition
        if adding or removing:
            start = PartitionChangeRecord(
                partition_id=partition_id,
                topic_id=topic.topic_id,
                replicas=tuple(target) + removing,
                adding_replicas=adding,
                removing_replicas=removing,
            )
            current = _checked(where, current, start, cluster, cluster)
            records.append(start)
        if all(is_live(cluster, b) for b in adding):
            isr = tuple(b for b in target if b in current.isr or b in adding)
            if not isr:
                isr = tuple(target)
            leader = current.leader if current.leader in isr else _first_live(cluster, isr)
            complete = PartitionChangeRecord(
                partition_id=partition_id,
                topic_id=topic.topic_id,
                replicas=tuple(target),
                isr=isr,
                leader=leader if leader != current.leader else LEADER_UNCHANGED,
                adding_replicas=(),
                removing_replicas=(),
            )
            _checked(where, current, complete, cluster, cluster)
            records.append(complete)
        return records

    def list_reassignments(self, image: MetadataImage) -> list[tuple[TopicImage, PartitionRecord]]:
        """Partitions with a reassignment in progress."""
        return [
            (topic, p)
            for topic in image.topics.sorted()
            for p in topic.partitions
            if p.adding_replicas or p.removing_replicas
        ]


# ---------------------------------------------------------------------- helpers


def _first_live(cluster: ClusterImage, brokers: Iterable[int]) -> int:
    return next((b for b in brokers if is_live(cluster, b)), NO_LEADER)


def _cluster_with(cluster: ClusterImage, registration: RegisterBrokerRecord) -> ClusterImage:
    return ClusterImage(brokers=cluster.brokers.set(registration.broker_id, registration))


def _checked(
    where: str,
    partition: PartitionRecord,
    change: PartitionChangeRecord,
    cluster_before: ClusterImage,
    cluster_after: ClusterImage,
) -> PartitionRecord:
    """The partition after `change`, refused unless every state moves along a legal transition."""
    after = merge_partition_change(partition, change)
    check_change(where, partition, after, cluster_before, cluster_after)
    return after


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


def _check_replica_lists(
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
