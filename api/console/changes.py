"""A log entry in words: the entity it touched and what it changed, before -> after.

`Reading` walks entries in offset order from a point whose image it is given: names are
resolved as of each entry (`replay.timetravel`'s `Names`, learned from the image, then from
each record, so a deleted topic's old entries still name it), and the values a config
record or a partition change replaces are looked up in the state just before the entry, so
a row says `retention.ms 86400000 -> 3600000`, not only the new value. The one-line texts
are the history's (`replay.timetravel.describe`); secrets never appear (a credential is
described by user, mechanism and iterations).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from records.entry import LogEntry
from records.model import (
    NO_LEADER,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    CancelTopicPartitionsDeletionRecord,
    ClientWriteRecord,
    ConfigRecord,
    ConfigResourceType,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    KRaftVersionRecord,
    LeaderChangeRecord,
    MoveTopicRecord,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    PurgeTopicPartitionsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveNamespaceRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    ResourceType,
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    VotersRecord,
    mode_name,
)
from records.slots import preset_constructor
from records.uuids import Uuid
from replay.image import MetadataImage, qualified_name
from replay.timetravel import describe, image_names, learn

ENTITY_KINDS = (
    "topic",
    "partition",
    "namespace",
    "broker",
    "config",
    "acl",
    "user",
    "feature",
    "quorum",
    "internal",
)
"""The kinds of entity a row can touch (the timeline's entity filter offers these)."""

INTERNAL_KINDS = frozenset({"internal"})
"""Bookkeeping, not a change anyone made: hidden from the timeline unless asked."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Described:
    """What one entry changed, in words."""

    entity_kind: str
    entity: str
    """The entity's name: a topic's qualified name, `orders-3`, a broker id, `topic orders`."""
    kind: str
    """The record's type without `Record` (`PartitionChange`): the kind of change."""
    text: str
    """What changed, with the values before -> after where the record replaces some."""
    client: str | None
    """The client id of an idempotent write (`ClientWriteRecord`), else None."""


_described = preset_constructor(Described, ("entity_kind", "entity", "kind", "text", "client"))
"""`Described(...)` of the values `Reading.read` worked out, without the frozen `__init__`'s
keyword parsing and `__setattr__`s (a timeline page describes up to 50,000 entries)."""

_PARTITION_FIELDS = ("leader", "isr", "replicas", "adding_replicas", "removing_replicas", "mode")
_CHANGE_FIELDS = {
    "leader": "leader",
    "isr": "isr",
    "replicas": "replicas",
    "adding_replicas": "adding",
    "removing_replicas": "removing",
    "mode": "mode",
}


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, tuple | list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


RECORD_ENTITY_KINDS: dict[type[Record], str] = {
    TopicRecord: "topic",
    RemoveTopicRecord: "topic",
    DeleteTopicPartitionsRecord: "topic",
    PurgeTopicPartitionsRecord: "topic",
    CancelTopicPartitionsDeletionRecord: "topic",
    MoveTopicRecord: "topic",
    PartitionRecord: "partition",
    PartitionChangeRecord: "partition",
    NamespaceRecord: "namespace",
    RemoveNamespaceRecord: "namespace",
    RegisterBrokerRecord: "broker",
    UnregisterBrokerRecord: "broker",
    BrokerRegistrationChangeRecord: "broker",
    ConfigRecord: "config",
    AccessControlEntryRecord: "acl",
    RemoveAccessControlEntryRecord: "acl",
    UserScramCredentialRecord: "user",
    RemoveUserScramCredentialRecord: "user",
    FeatureLevelRecord: "feature",
    VotersRecord: "quorum",
    KRaftVersionRecord: "quorum",
    LeaderChangeRecord: "quorum",
    ClientWriteRecord: "internal",
}
"""The kind of entity each record type touches (every type: a test checks)."""


def entity_kind(record: Record) -> str:
    """The kind of entity a record touches (`ENTITY_KINDS`), without naming it."""
    return RECORD_ENTITY_KINDS.get(type(record), "internal")


def kind_of(record: Record) -> str:
    """The kind of change a record is: its type without `Record` (`PartitionChange`)."""
    name = type(record).__name__
    return name.removesuffix("Record")


class Reading:
    """Entries described in order from the state of an image (`image`: the entry before)."""

    def __init__(self, image: MetadataImage) -> None:
        self._image = image
        self.names = image_names(image)
        self._configs: dict[tuple[int, str, str], str | None] = {}
        self._partitions: dict[Uuid, dict[int, dict[str, Any]]] = {}
        """The partitions' states as followed, by topic id and partition (a removed topic's
        go at once: a page of churn removes thousands)."""

    # ---------------------------------------------------------------- state before an entry

    def _config_before(self, record: ConfigRecord) -> str | None:
        key = (int(record.resource_type), record.resource_name, record.name)
        if key in self._configs:
            return self._configs[key]
        values = self._image.configs.get(
            ConfigResourceType(record.resource_type), record.resource_name
        )
        return values.get(record.name)

    def _partition_before(self, topic_id: Uuid, partition_id: int) -> dict[str, Any] | None:
        held = self._partitions.get(topic_id)
        if held is not None and partition_id in held:
            return held[partition_id]
        topic = self._image.topics.get(topic_id)
        if topic is None or partition_id >= len(topic.partitions):
            return None
        state = _partition_state(topic.partitions[partition_id])
        self._partitions.setdefault(topic_id, {})[partition_id] = state
        return state

    # ---------------------------------------------------------------- one entry

    def read(self, entry: LogEntry) -> Described:
        """The entry in words; the reading then knows the state after it."""
        record = entry.record
        # Names first, as `history` does: a move reads "moved topic a to org:a".
        learn(record, self.names)
        entity_kind, entity = self._entity(record)
        text = self._text(record)
        client = str(record.client_id) if isinstance(record, ClientWriteRecord) else None
        described: Described = _described(entity_kind, entity, kind_of(record), text, client)
        return described

    def follow(self, entry: LogEntry) -> None:
        """The state after an entry a filter left out: what `read` records, nothing said.

        No words, no entity's name: a filtered page follows tens of thousands of these.
        """
        record = entry.record
        self._follow(record)
        learn(record, self.names)

    def _follow(self, record: Record) -> None:
        if isinstance(record, ConfigRecord):
            key = (int(record.resource_type), record.resource_name, record.name)
            self._configs[key] = record.value
        elif isinstance(record, PartitionRecord):
            self._keep(record.topic_id, record.partition_id, _partition_state(record))
        elif isinstance(record, PartitionChangeRecord):
            self._partition_after(record)
        elif isinstance(record, RemoveTopicRecord):
            self._forget(record.topic_id)

    def _forget(self, topic_id: Uuid) -> None:
        self._partitions.pop(topic_id, None)

    def _keep(self, topic_id: Uuid, partition_id: int, state: dict[str, Any]) -> None:
        self._partitions.setdefault(topic_id, {})[partition_id] = state

    def _text(self, record: Record) -> str:
        if isinstance(record, ConfigRecord):
            before = self._config_before(record)
            key = (int(record.resource_type), record.resource_name, record.name)
            self._configs[key] = record.value
            resource = ConfigResourceType(record.resource_type).name.lower()
            where = f"{resource} {record.resource_name or '<cluster>'}"
            if record.value is None:
                return f"config {where}: {record.name} {_shown(before)} -> deleted"
            if before is None:
                return f"config {where}: {record.name} set to {record.value}"
            return f"config {where}: {record.name} {before} -> {record.value}"
        if isinstance(record, PartitionRecord):
            self._keep(record.topic_id, record.partition_id, _partition_state(record))
            return describe(record, self.names)
        if isinstance(record, PartitionChangeRecord):
            return self._partition_change(record)
        if isinstance(record, RemoveTopicRecord):
            self._forget(record.topic_id)
        return describe(record, self.names)

    def _partition_after(
        self, record: PartitionChangeRecord
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The partition's fields before and after a change (None if it is not known)."""
        before = self._partition_before(record.topic_id, record.partition_id)
        if before is None:
            return None
        after = dict(before)
        if record.leader >= NO_LEADER:
            after["leader"] = record.leader if record.leader >= 0 else None
        for name in ("isr", "replicas", "adding_replicas", "removing_replicas"):
            value = getattr(record, name)
            if value is not None:
                after[name] = tuple(value)
        if record.mode is not None:
            after["mode"] = mode_name(record.mode)
        self._keep(record.topic_id, record.partition_id, after)
        return before, after

    def _partition_change(self, record: PartitionChangeRecord) -> str:
        states = self._partition_after(record)
        if states is None:
            return describe(record, self.names)
        before, after = states
        where = f"partition {self.names.topic(record.topic_id)}-{record.partition_id}"
        parts = [
            f"{_CHANGE_FIELDS[f]} {_shown(before.get(f))} -> {_shown(after.get(f))}"
            for f in _PARTITION_FIELDS
            if before.get(f) != after.get(f)
        ]
        if record.partition_epoch is not None:
            parts.append(f"partition epoch -> {record.partition_epoch}")
        return f"{where}: {', '.join(parts) or 'no field changed'}"

    # ---------------------------------------------------------------- the entity

    def _entity(self, record: Record) -> tuple[str, str]:
        return entity_kind(record), self._entity_name(record)

    def _entity_name(self, record: Record) -> str:
        names = self.names
        match record:
            case TopicRecord():
                return qualified_name(record.namespace, record.name)
            case (
                RemoveTopicRecord()
                | DeleteTopicPartitionsRecord()
                | PurgeTopicPartitionsRecord()
                | CancelTopicPartitionsDeletionRecord()
            ):
                return names.topic(record.topic_id)
            case MoveTopicRecord():
                return names.topic(record.topic_id)
            case PartitionRecord() | PartitionChangeRecord():
                return f"{names.topic(record.topic_id)}-{record.partition_id}"
            case NamespaceRecord():
                return record.name
            case RemoveNamespaceRecord():
                return names.namespaces.get(record.namespace_id, "<unknown>")
            case RegisterBrokerRecord() | UnregisterBrokerRecord():
                return str(record.broker_id)
            case BrokerRegistrationChangeRecord():
                return str(record.broker_id)
            case ConfigRecord():
                resource = ConfigResourceType(record.resource_type).name.lower()
                return f"{resource} {record.resource_name or '<cluster>'}"
            case AccessControlEntryRecord():
                return _acl_resource(record)
            case RemoveAccessControlEntryRecord():
                known = names.acls.get(record.id)
                return _acl_resource(known) if known is not None else str(record.id)
            case UserScramCredentialRecord() | RemoveUserScramCredentialRecord():
                return record.name
            case FeatureLevelRecord():
                return record.name
            case VotersRecord() | KRaftVersionRecord() | LeaderChangeRecord():
                return "controller quorum"
            case ClientWriteRecord():
                return f"client {record.client_id}"
        return type(record).__name__  # pragma: no cover - every type is matched


def _acl_resource(acl: AccessControlEntryRecord) -> str:
    return f"{ResourceType(acl.resource_type).name.lower()} {acl.resource_name}"


def _partition_state(record: PartitionRecord) -> dict[str, Any]:
    return {
        "leader": record.leader if record.leader != NO_LEADER else None,
        "isr": tuple(record.isr),
        "replicas": tuple(record.replicas),
        "adding_replicas": tuple(record.adding_replicas),
        "removing_replicas": tuple(record.removing_replicas),
        "mode": mode_name(record.mode),
    }
