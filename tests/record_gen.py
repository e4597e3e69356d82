"""Random but valid sequences of metadata record batches, for replay and snapshot tests."""

from __future__ import annotations

import random

from records.model import (
    BrokerRegistrationChangeRecord,
    CancelTopicPartitionsDeletionRecord,
    ConfigRecord,
    ConfigResourceType,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    FencingChange,
    Mode,
    MoveTopicRecord,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    PurgeTopicPartitionsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveNamespaceRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from records.uuids import Uuid


def _uuid(rng: random.Random) -> Uuid:
    while True:
        candidate = Uuid(rng.randbytes(16))
        if candidate not in Uuid.RESERVED:
            return candidate


class LogGenerator:
    """Tracks enough state to emit only batches that replay cleanly."""

    def __init__(self, seed: int, *, cancels: bool = False) -> None:
        self.rng = random.Random(seed)
        # Cancelled deletions are opt-in: an extra action would change every seed's log, and
        # other tests rely on what a seed's log holds (namespaces, a pending deletion, ...).
        self.cancels = cancels
        self.brokers: dict[int, int] = {}  # id -> epoch
        self.epoch = 0
        # name, namespace, partitions, partitions kept by a pending deletion (0: none pending)
        self.topics: dict[Uuid, tuple[str, str, int, int]] = {}
        self.names: set[tuple[str, str]] = set()
        self.namespaces: dict[str, Uuid] = {}
        self.counter = 0

    def batches(self, count: int) -> list[list[Record]]:
        """`count` batches, starting with the feature level and three brokers."""
        out: list[list[Record]] = [
            [FeatureLevelRecord(name="metadata.version", feature_level=1)],
            *[self._register(b) for b in range(3)],
        ]
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
        funcs = [f for f, _ in actions]
        weights = [w for _, w in actions]
        while len(out) < count:
            batch = self.rng.choices(funcs, weights)[0]()
            if batch:
                out.append(batch)
        return out

    def _register(self, broker_id: int) -> list[Record]:
        self.epoch += 1
        self.brokers[broker_id] = self.epoch
        return [
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id=_uuid(self.rng),
                broker_epoch=self.epoch,
                rack=f"r{broker_id % 2}",
                fenced=self.rng.random() < 0.3,
            )
        ]

    def _register_or_fence(self) -> list[Record]:
        broker_id = self.rng.randrange(5)
        if broker_id not in self.brokers or self.rng.random() < 0.3:
            return self._register(broker_id)
        epoch = self.brokers[broker_id]
        if self.rng.random() < 0.1 and broker_id >= 3:
            del self.brokers[broker_id]
            return [UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch)]
        change = self.rng.choice([FencingChange.FENCE, FencingChange.UNFENCE])
        return [
            BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, fenced=change)
        ]

    def _topic_records(self, name: str, namespace: str) -> list[Record]:
        topic_id = _uuid(self.rng)
        partitions = self.rng.randint(1, 6)
        records: list[Record] = [TopicRecord(name=name, topic_id=topic_id, namespace=namespace)]
        brokers = sorted(self.brokers)
        for p in range(partitions):
            replicas = tuple(self.rng.sample(brokers, min(len(brokers), 2)))
            records.append(
                PartitionRecord(
                    partition_id=p,
                    topic_id=topic_id,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                )
            )
        self.topics[topic_id] = (name, namespace, partitions, 0)
        self.names.add((namespace, name))
        return records

    def _create_topic(self) -> list[Record]:
        self.counter += 1
        namespace = self.rng.choice(["", *self.namespaces]) if self.namespaces else ""
        name = f"t{self.counter}"
        return self._topic_records(name, namespace)

    def _recreate_topic(self) -> list[Record]:
        removed = [t for t in self.topics.values()]
        if not removed:
            return []
        name, namespace, _, _ = self.rng.choice(removed)
        victim = next(i for i, t in self.topics.items() if t[:2] == (name, namespace))
        first = self._remove(victim)
        return first + self._topic_records(name, namespace)

    def _remove(self, topic_id: Uuid) -> list[Record]:
        name, namespace, _, _ = self.topics.pop(topic_id)
        self.names.discard((namespace, name))
        return [RemoveTopicRecord(topic_id=topic_id)]

    def _remove_topic(self) -> list[Record]:
        if not self.topics:
            return []
        return self._remove(self.rng.choice(list(self.topics)))

    def _change_partition(self) -> list[Record]:
        if not self.topics:
            return []
        topic_id = self.rng.choice(list(self.topics))
        partitions = self.topics[topic_id][2]
        p = self.rng.randrange(partitions)
        kind = self.rng.randrange(3)
        if kind == 0:
            return [PartitionChangeRecord(partition_id=p, topic_id=topic_id, leader=-1, isr=())]
        if kind == 1:
            mode = self.rng.choice(list(Mode))
            return [PartitionChangeRecord(partition_id=p, topic_id=topic_id, mode=mode)]
        return [
            PartitionChangeRecord(
                partition_id=p, topic_id=topic_id, partition_epoch=self.rng.randrange(100)
            )
        ]

    def _config(self) -> list[Record]:
        if self.topics and self.rng.random() < 0.7:
            name, namespace, _, _ = self.rng.choice(list(self.topics.values()))
            resource = (ConfigResourceType.TOPIC, f"{namespace}:{name}" if namespace else name)
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
        parent = self.rng.choice(["", *self.namespaces])
        name = f"{parent}:n{self.counter}" if parent else f"n{self.counter}"
        namespace_id = _uuid(self.rng)
        parent_id = self.namespaces.get(parent)
        self.namespaces[name] = namespace_id
        return [NamespaceRecord(namespace_id=namespace_id, name=name, parent_id=parent_id)]

    def _remove_namespace(self) -> list[Record]:
        leaves = [
            n for n in self.namespaces if not any(o.startswith(n + ":") for o in self.namespaces)
        ]
        if not leaves:
            return []
        name = self.rng.choice(leaves)
        records: list[Record] = []
        for topic_id in [i for i, t in self.topics.items() if t[1] == name]:
            records.extend(self._remove(topic_id))
        records.append(RemoveNamespaceRecord(namespace_id=self.namespaces.pop(name)))
        return records

    def _delete_partitions(self) -> list[Record]:
        candidates = [i for i, t in self.topics.items() if t[2] > 1 and not t[3]]
        if not candidates:
            return []
        topic_id = self.rng.choice(candidates)
        name, namespace, partitions, _ = self.topics[topic_id]
        keep = self.rng.randint(1, partitions - 1)
        self.topics[topic_id] = (name, namespace, partitions, keep)
        records: list[Record] = [
            DeleteTopicPartitionsRecord(
                topic_id=topic_id, partition_count=keep, delete_after_ms=1000, created_ms=0
            )
        ]
        records.extend(
            PartitionChangeRecord(partition_id=p, topic_id=topic_id, mode=Mode.READ_ONLY)
            for p in range(keep, partitions)
        )
        return records

    def _purge_partitions(self) -> list[Record]:
        """A pending deletion completes: its partitions go to mode NONE, then are purged."""
        pending = [i for i, t in self.topics.items() if t[3]]
        if not pending:
            return []
        topic_id = self.rng.choice(pending)
        name, namespace, partitions, keep = self.topics[topic_id]
        self.topics[topic_id] = (name, namespace, keep, 0)
        records: list[Record] = [
            PartitionChangeRecord(partition_id=p, topic_id=topic_id, mode=Mode.NONE)
            for p in range(keep, partitions)
        ]
        records.append(PurgeTopicPartitionsRecord(topic_id=topic_id, partition_count=keep))
        return records

    def _cancel_partition_deletion(self) -> list[Record]:
        """A pending deletion is cancelled: its partitions are READ_WRITE again."""
        pending = [i for i, t in self.topics.items() if t[3]]
        if not pending:
            return []
        topic_id = self.rng.choice(pending)
        name, namespace, partitions, keep = self.topics[topic_id]
        self.topics[topic_id] = (name, namespace, partitions, 0)
        records: list[Record] = [
            PartitionChangeRecord(partition_id=p, topic_id=topic_id, mode=Mode.READ_WRITE)
            for p in range(keep, partitions)
        ]
        records.append(CancelTopicPartitionsDeletionRecord(topic_id=topic_id, partition_count=keep))
        return records

    def _move_topic(self) -> list[Record]:
        """A topic moves to another namespace where its name is free (keeps id and configs)."""
        if not self.topics:
            return []
        topic_id = self.rng.choice(list(self.topics))
        name, namespace, partitions, keep = self.topics[topic_id]
        targets = [
            n for n in ["", *self.namespaces] if n != namespace and (n, name) not in self.names
        ]
        if not targets:
            return []
        target = self.rng.choice(targets)
        self.names.discard((namespace, name))
        self.names.add((target, name))
        self.topics[topic_id] = (name, target, partitions, keep)
        return [MoveTopicRecord(topic_id=topic_id, namespace=target)]
