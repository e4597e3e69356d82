"""Random but valid sequences of metadata record batches, for replay and snapshot tests.

Every batch is one the controller could write (replay/controller): a broker fenced, shut down or
unregistered moves leadership off it and drops it from ISRs (keeping the last member), an
elected leader is live, a reassignment writes Kafka's start and completing changes, modes move
only under a pending partition deletion. Replay refuses anything else, so the generator keeps
the image its batches build (replayed batch by batch) and reads its choices from it; a batch
that did not replay would fail here, where it was made.
"""

from __future__ import annotations

import random

from records.model import (
    LEADER_UNCHANGED,
    NO_LEADER,
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    BrokerRegistrationChangeRecord,
    CancelTopicPartitionsDeletionRecord,
    ClientWriteRecord,
    ConfigRecord,
    ConfigResourceType,
    ControlledShutdownChange,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    FencingChange,
    KRaftVersionRecord,
    LeaderChangeRecord,
    Mode,
    MoveTopicRecord,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    PatternType,
    PurgeTopicPartitionsRecord,
    QuorumVoter,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveNamespaceRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    ResourceType,
    ScramMechanism,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    VotersRecord,
)
from records.uuids import Uuid
from replay.delta import MetadataDelta, merge_partition_change
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance, TopicImage


def partition_record(
    topic_id: Uuid, partition_id: int, replicas: tuple[int, ...]
) -> PartitionRecord:
    """A partition whose ISR is all its replicas and whose leader is the first."""
    return PartitionRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        replicas=replicas,
        isr=replicas,
        leader=replicas[0],
    )


def _uuid(rng: random.Random) -> Uuid:
    while True:
        candidate = Uuid(rng.randbytes(16))
        if candidate not in Uuid.RESERVED:
            return candidate


class LogGenerator:
    """Emits only batches that replay cleanly, choosing from the image they build."""

    def __init__(
        self,
        seed: int,
        *,
        cancels: bool = False,
        security: bool = False,
        quorum: bool = False,
        client_writes: bool = False,
    ) -> None:
        self.rng = random.Random(seed)
        self.image: MetadataImage = EMPTY_IMAGE
        # Cancelled deletions are opt-in: an extra action would change every seed's log, and
        # other tests rely on what a seed's log holds (namespaces, a pending deletion, ...).
        self.cancels = cancels
        self.security = security
        """Also ACLs and SCRAM credentials (opt-in for the same reason)."""
        self.quorum = quorum
        """Also controller quorum leader changes: one first, as in a quorum's log, then now and
        then between the other batches, drawn from a generator of their own, so the other
        batches are the same as without them."""
        self.quorum_rng = random.Random(seed)
        self.client_writes = client_writes
        """Also idempotent writes' ClientWriteRecords, added to batches from a generator of
        their own (a few client ids, so entries are replaced), the other records unchanged."""
        self.client_rng = random.Random(seed + 1)
        self.client_sequences: dict[Uuid, int] = {}
        self.epoch = 0
        self.counter = 0

    def batches(self, count: int) -> list[list[Record]]:
        """`count` batches, starting with the feature level and three brokers."""
        out = [self._replayed([FeatureLevelRecord(name="metadata.version", feature_level=1)])]
        out.extend(self._replayed(self._register(b)) for b in range(3))
        actions = [
            (self._create_topic, 6),
            (self._change_partition, 6),
            (self._config, 3),
            (self._remove_topic, 2),
            (self._recreate_topic, 1),
            (self._register_or_fence, 2),
            (self._namespace, 1),
            (self._remove_namespace, 1),
            (self._delete_partitions, 1),
            (self._purge_partitions, 1),
            (self._move_topic, 1),
        ]
        if self.cancels:
            actions.append((self._cancel_partition_deletion, 1))
        if self.security:
            actions.extend(
                [(self._acl, 2), (self._remove_acl, 1), (self._scram, 1), (self._remove_scram, 1)]
            )
        funcs = [f for f, _ in actions]
        weights = [w for _, w in actions]
        first = (
            [self._replayed(self._leader_change()), self._replayed(self._voters())]
            if self.quorum
            else []
        )
        markers = 0
        while len(out) - markers < count:
            batch = self.rng.choices(funcs, weights)[0]()
            if batch:
                if self.client_writes and self.client_rng.random() < 0.1:
                    batch = [*batch, self._client_write()]
                out.append(self._replayed(batch))
                if self.quorum and self.quorum_rng.random() < 0.02:
                    out.append(self._replayed(self._leader_change()))
                    markers += 1
        return [*first, *out]

    def _replayed(self, batch: list[Record]) -> list[Record]:
        delta = MetadataDelta(self.image)
        delta.replay_all(batch)
        delta.finish_batch()
        offset = self.image.provenance.offset + len(batch)
        self.image = delta.apply(Provenance(offset=offset, epoch=1, timestamp=0))
        return batch

    # ------------------------------------------------------------------ lookups

    def _topics(self) -> list[TopicImage]:
        return self.image.topics.sorted()  # sorted: map order follows salted hashes

    def _live(self, broker_id: int) -> bool:
        broker = self.image.cluster.get(broker_id)
        return broker is not None and not broker.fenced and not broker.in_controlled_shutdown

    # ------------------------------------------------------------------ brokers

    def _register(self, broker_id: int) -> list[Record]:
        self.epoch += 1
        fenced = self.rng.random() < 0.3
        record = RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=_uuid(self.rng),
            broker_epoch=self.epoch,
            rack=f"r{broker_id % 2}",
            fenced=fenced,
        )
        records: list[Record] = [record]
        if not fenced:
            records.extend(self._elect_leaderless(broker_id))
        return records

    def _elect_leaderless(self, broker_id: int) -> list[Record]:
        """Leaders for leaderless partitions whose ISR holds a broker that just came up."""
        changes: list[Record] = []
        for topic in self._topics():
            for partition in topic.partitions:
                if partition.leader == NO_LEADER and broker_id in partition.isr:
                    changes.append(
                        PartitionChangeRecord(
                            partition_id=partition.partition_id,
                            topic_id=topic.topic_id,
                            leader=broker_id,
                        )
                    )
        return changes

    def _move_off(self, broker_id: int) -> list[Record]:
        """Leadership off a broker going down, and the broker out of ISRs (not the last)."""
        changes: list[Record] = []
        for topic in self._topics():
            for partition in topic.partitions:
                if broker_id not in partition.isr and partition.leader != broker_id:
                    continue
                isr = tuple(b for b in partition.isr if b != broker_id) or partition.isr
                leader = next((b for b in isr if b != broker_id and self._live(b)), NO_LEADER)
                change = PartitionChangeRecord(
                    partition_id=partition.partition_id,
                    topic_id=topic.topic_id,
                    isr=isr if isr != partition.isr else None,
                    leader=leader if leader != partition.leader else LEADER_UNCHANGED,
                )
                if change.isr is not None or change.leader != LEADER_UNCHANGED:
                    changes.append(change)
        return changes

    def _register_or_fence(self) -> list[Record]:
        broker_id = self.rng.randrange(5)
        current = self.image.cluster.get(broker_id)
        if current is None or self.rng.random() < 0.3:
            return self._register(broker_id)
        epoch = current.broker_epoch
        if self.rng.random() < 0.1 and broker_id >= 3:
            return [
                UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch),
                *self._move_off(broker_id),
            ]
        if current.in_controlled_shutdown:
            return self._register(broker_id)  # the way back from a controlled shutdown
        if self.rng.random() < 0.15:
            return [
                BrokerRegistrationChangeRecord(
                    broker_id=broker_id,
                    broker_epoch=epoch,
                    in_controlled_shutdown=ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN,
                ),
                *self._move_off(broker_id),
            ]
        if current.fenced:
            return [
                BrokerRegistrationChangeRecord(
                    broker_id=broker_id, broker_epoch=epoch, fenced=FencingChange.UNFENCE
                ),
                *self._elect_leaderless(broker_id),
            ]
        return [
            BrokerRegistrationChangeRecord(
                broker_id=broker_id, broker_epoch=epoch, fenced=FencingChange.FENCE
            ),
            *self._move_off(broker_id),
        ]

    # ------------------------------------------------------------------ topics

    def _topic_records(self, name: str, namespace: str) -> list[Record]:
        live = [b.broker_id for b in self.image.cluster.usable()]
        if not live:
            return []  # every broker is down: the controller refuses the topic
        registered = [b.broker_id for b in self.image.cluster.sorted()]
        topic_id = _uuid(self.rng)
        partitions = self.rng.randint(1, 6)
        records: list[Record] = [TopicRecord(name=name, topic_id=topic_id, namespace=namespace)]
        for p in range(partitions):
            # A manual assignment may name any registered broker; at least one must be live.
            replicas = tuple(self.rng.sample(registered, min(len(registered), 2)))
            if not any(b in live for b in replicas):
                replicas = (self.rng.choice(live),)
            isr = tuple(b for b in replicas if b in live)
            records.append(
                PartitionRecord(
                    partition_id=p,
                    topic_id=topic_id,
                    replicas=replicas,
                    isr=isr,
                    leader=isr[0],
                )
            )
        return records

    def _create_topic(self) -> list[Record]:
        self.counter += 1
        namespaces = sorted(self.image.namespaces.by_name)
        namespace = self.rng.choice(["", *namespaces]) if namespaces else ""
        return self._topic_records(f"t{self.counter}", namespace)

    def _recreate_topic(self) -> list[Record]:
        topics = self._topics()
        if not topics:
            return []
        victim = self.rng.choice(topics)
        created = self._topic_records(victim.name, victim.namespace)
        if not created:
            return []
        return [RemoveTopicRecord(topic_id=victim.topic_id), *created]

    def _remove_topic(self) -> list[Record]:
        topics = self._topics()
        if not topics:
            return []
        return [RemoveTopicRecord(topic_id=self.rng.choice(topics).topic_id)]

    # ------------------------------------------------------------------ partitions

    def _change_partition(self) -> list[Record]:
        topics = self._topics()
        if not topics:
            return []
        topic = self.rng.choice(topics)
        partition = self.rng.choice(topic.partitions)
        p = partition.partition_id
        kind = self.rng.randrange(4)
        if kind == 0:  # preferred leader election
            preferred = partition.replicas[0]
            if (
                partition.leader == preferred
                or preferred not in partition.isr
                or not self._live(preferred)
            ):
                return []
            return [
                PartitionChangeRecord(partition_id=p, topic_id=topic.topic_id, leader=preferred)
            ]
        if kind == 1:  # unclean election of a leaderless (or led-by-a-dead-broker) partition
            if partition.leader != NO_LEADER and self._live(partition.leader):
                return []
            leader = next((b for b in partition.replicas if self._live(b)), None)
            if leader is None:
                return []
            return [
                PartitionChangeRecord(
                    partition_id=p, topic_id=topic.topic_id, leader=leader, isr=(leader,)
                )
            ]
        if kind == 2:
            return self._reassign(topic, partition)
        # A change that states its partition epoch, as Kafka's records may.
        return [
            PartitionChangeRecord(
                partition_id=p,
                topic_id=topic.topic_id,
                partition_epoch=partition.partition_epoch + self.rng.randint(1, 5),
            )
        ]

    def _reassign(self, topic: TopicImage, partition: PartitionRecord) -> list[Record]:
        """Kafka's KIP-455 records: start (adding/removing), and completion if every adding
        replica is live; a reassignment in progress is cancelled instead."""
        if topic.pending_deletion is not None:
            return []
        p = partition.partition_id
        live = self._live
        if partition.adding_replicas or partition.removing_replicas:
            original = tuple(b for b in partition.replicas if b not in partition.adding_replicas)
            isr = tuple(b for b in partition.isr if b in original) or original[:1]
            return [self._settle(topic, partition, original, isr)]
        registered = [b.broker_id for b in self.image.cluster.sorted()]
        target = tuple(self.rng.sample(registered, min(len(registered), len(partition.replicas))))
        if target == partition.replicas:
            return []
        adding = tuple(b for b in target if b not in partition.replicas)
        removing = tuple(b for b in partition.replicas if b not in target)
        records: list[Record] = []
        current = partition
        if adding or removing:
            start = PartitionChangeRecord(
                partition_id=p,
                topic_id=topic.topic_id,
                replicas=target + removing,
                adding_replicas=adding,
                removing_replicas=removing,
            )
            current = merge_partition_change(current, start)
            records.append(start)
        if all(live(b) for b in adding):
            isr = tuple(b for b in target if b in current.isr or b in adding) or target
            records.append(self._settle(topic, current, target, isr))
        return records

    def _settle(
        self,
        topic: TopicImage,
        partition: PartitionRecord,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
    ) -> PartitionChangeRecord:
        """The change that ends a reassignment at `replicas` and `isr` (completed or cancelled).

        The leader stays if it is in the new ISR, else the first live member leads (or none).
        """
        leader = (
            partition.leader
            if partition.leader in isr
            else next((b for b in isr if self._live(b)), NO_LEADER)
        )
        return PartitionChangeRecord(
            partition_id=partition.partition_id,
            topic_id=topic.topic_id,
            replicas=replicas,
            isr=isr,
            leader=leader if leader != partition.leader else LEADER_UNCHANGED,
            adding_replicas=(),
            removing_replicas=(),
        )

    # ------------------------------------------------------------------ configs, namespaces

    def _config(self) -> list[Record]:
        topics = self._topics()
        if topics and self.rng.random() < 0.7:
            resource = (ConfigResourceType.TOPIC, self.rng.choice(topics).qualified_name)
        else:
            resource = (ConfigResourceType.BROKER, "")
        value = None if self.rng.random() < 0.2 else str(self.rng.randrange(1000))
        return [
            ConfigRecord(
                resource_type=resource[0],
                resource_name=resource[1],
                name=self.rng.choice(["retention.ms", "segment.bytes", "num.partitions"]),
                value=value,
            )
        ]

    def _namespace(self) -> list[Record]:
        self.counter += 1
        namespaces = self.image.namespaces
        parent = self.rng.choice(["", *sorted(namespaces.by_name)])
        name = f"{parent}:n{self.counter}" if parent else f"n{self.counter}"
        parent_record = namespaces.get(parent)
        return [
            NamespaceRecord(
                namespace_id=_uuid(self.rng),
                name=name,
                parent_id=None if parent_record is None else parent_record.namespace_id,
            )
        ]

    def _remove_namespace(self) -> list[Record]:
        namespaces = self.image.namespaces
        leaves = [n for n in sorted(namespaces.by_name) if not namespaces.children(n)]
        if not leaves:
            return []
        name = self.rng.choice(leaves)
        records: list[Record] = [
            RemoveTopicRecord(topic_id=t.topic_id) for t in self._topics() if t.namespace == name
        ]
        record = namespaces.get(name)
        assert record is not None
        records.append(RemoveNamespaceRecord(namespace_id=record.namespace_id))
        return records

    def _move_topic(self) -> list[Record]:
        """A topic moves to another namespace where its name is free (keeps id and configs)."""
        topics = self._topics()
        if not topics:
            return []
        topic = self.rng.choice(topics)
        targets = [
            n
            for n in ["", *sorted(self.image.namespaces.by_name)]
            if n != topic.namespace
            and self.image.topics.get_by_name(f"{n}:{topic.name}" if n else topic.name) is None
        ]
        if not targets:
            return []
        return [MoveTopicRecord(topic_id=topic.topic_id, namespace=self.rng.choice(targets))]

    # ------------------------------------------------------------------ partition deletion

    def _delete_partitions(self) -> list[Record]:
        candidates = [
            t
            for t in self._topics()
            if len(t.partitions) > 1
            and t.pending_deletion is None
            and not any(p.adding_replicas or p.removing_replicas for p in t.partitions)
        ]
        if not candidates:
            return []
        topic = self.rng.choice(candidates)
        keep = self.rng.randint(1, len(topic.partitions) - 1)
        records: list[Record] = [
            DeleteTopicPartitionsRecord(
                topic_id=topic.topic_id, partition_count=keep, delete_after_ms=1000, created_ms=0
            )
        ]
        records.extend(
            PartitionChangeRecord(partition_id=p, topic_id=topic.topic_id, mode=Mode.READ_ONLY)
            for p in range(keep, len(topic.partitions))
        )
        return records

    def _purge_partitions(self) -> list[Record]:
        """A pending deletion completes: its partitions go to mode NONE, then are purged."""
        pending = [t for t in self._topics() if t.pending_deletion is not None]
        if not pending:
            return []
        topic = self.rng.choice(pending)
        assert topic.pending_deletion is not None
        keep = topic.pending_deletion.partition_count
        records: list[Record] = [
            PartitionChangeRecord(partition_id=p, topic_id=topic.topic_id, mode=Mode.NONE)
            for p in range(keep, len(topic.partitions))
        ]
        records.append(PurgeTopicPartitionsRecord(topic_id=topic.topic_id, partition_count=keep))
        return records

    def _cancel_partition_deletion(self) -> list[Record]:
        """A pending deletion is cancelled: its partitions are READ_WRITE again."""
        pending = [t for t in self._topics() if t.pending_deletion is not None]
        if not pending:
            return []
        topic = self.rng.choice(pending)
        assert topic.pending_deletion is not None
        keep = topic.pending_deletion.partition_count
        records: list[Record] = [
            PartitionChangeRecord(partition_id=p, topic_id=topic.topic_id, mode=Mode.READ_WRITE)
            for p in range(keep, len(topic.partitions))
        ]
        records.append(
            CancelTopicPartitionsDeletionRecord(topic_id=topic.topic_id, partition_count=keep)
        )
        return records

    def _client_write(self) -> ClientWriteRecord:
        rng = self.client_rng
        client = Uuid(bytes([rng.randrange(4)] * 16))
        sequence = self.client_sequences.get(client, -1) + 1
        self.client_sequences[client] = sequence
        return ClientWriteRecord(
            client_id=client,
            sequence=sequence,
            principal=rng.choice((None, "User:alice")),
            api_key=rng.choice((19, 20, 10000)),
            response=rng.randbytes(rng.randrange(0, 40)),
        )

    def _leader_change(self) -> list[Record]:
        voters = (1000, 1001, 1002)
        rng = self.quorum_rng
        leader = rng.choice(voters)
        others = [v for v in voters if v != leader]
        granted = sorted([leader, *rng.sample(others, rng.randrange(1, 3))])
        return [LeaderChangeRecord(leader_id=leader, voters=voters, granting_voters=tuple(granted))]

    def _voters(self) -> list[Record]:
        """A dynamic quorum's voters (KIP-853): kraft.version 1 and the voter set."""
        voters = tuple(
            QuorumVoter(voter_id=v, voter_directory_id=f"dir-{v}", host="c", port=9093 + v)
            for v in (1000, 1001, 1002)
        )
        return [KRaftVersionRecord(kraft_version=1), VotersRecord(voters=voters)]

    # ------------------------------------------------------------------ security

    def _acl(self) -> list[Record]:
        rng = self.rng
        resource_type = rng.choice(
            [ResourceType.TOPIC, ResourceType.NAMESPACE, ResourceType.CLUSTER]
        )
        if resource_type == ResourceType.CLUSTER:
            name, pattern = "kafka-cluster", PatternType.LITERAL
        else:
            name = rng.choice(["*", "t", "org", "org:a", f"n{rng.randrange(20)}"])
            pattern = PatternType.LITERAL if name == "*" else rng.choice(list(PatternType)[3:])
        return [
            AccessControlEntryRecord(
                id=_uuid(rng),
                resource_type=resource_type,
                resource_name=name,
                pattern_type=pattern,
                principal=rng.choice(["User:*", "User:alice", "User:bob"]),
                host=rng.choice(["*", "127.0.0.1"]),
                operation=rng.choice(list(AclOperation)[2:]),
                permission_type=rng.choice([AclPermissionType.ALLOW, AclPermissionType.DENY]),
            )
        ]

    def _remove_acl(self) -> list[Record]:
        acls = self.image.acls.sorted()
        if not acls:
            return []
        return [RemoveAccessControlEntryRecord(id=self.rng.choice(acls).id)]

    def _scram(self) -> list[Record]:
        rng = self.rng
        mechanism = rng.choice([ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512])
        size = 32 if mechanism == ScramMechanism.SCRAM_SHA_256 else 64
        return [
            UserScramCredentialRecord(
                name=rng.choice(["alice", "bob", "carol"]),
                mechanism=mechanism,
                salt=rng.randbytes(16),
                stored_key=rng.randbytes(size),
                server_key=rng.randbytes(size),
                iterations=rng.choice([4096, 8192]),
            )
        ]

    def _remove_scram(self) -> list[Record]:
        keys = sorted(self.image.scram.credentials)
        if not keys:
            return []
        name, mechanism = self.rng.choice(keys)
        return [RemoveUserScramCredentialRecord(name=name, mechanism=mechanism)]
