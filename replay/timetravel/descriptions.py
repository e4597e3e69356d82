"""One-line descriptions of records, with names resolved as of the entry that holds them."""

from __future__ import annotations

from dataclasses import dataclass, field

from records.model import (
    NO_LEADER,
    AccessControlEntryRecord,
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
    TopicRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
    VotersRecord,
    mode_name,
)
from records.uuids import Uuid
from replay.image import qualified_name
from replay.timetravel.security import describe_security


@dataclass(slots=True)
class Names:
    """What the scan knows so far: topic ids -> qualified names, namespace ids -> names."""

    topics: dict[Uuid, str] = field(default_factory=dict)
    topic_namespaces: dict[Uuid, str] = field(default_factory=dict)
    previous: dict[Uuid, str] = field(default_factory=dict)
    """Topic id -> its qualified name before its latest move."""
    namespaces: dict[Uuid, str] = field(default_factory=dict)
    live: dict[str, Uuid] = field(default_factory=dict)
    """Qualified name -> id of the live topic of that name."""
    acls: dict[Uuid, AccessControlEntryRecord] = field(default_factory=dict)
    """ACL id -> the ACL it named last (kept after its removal, so the removal reads well)."""

    def topic(self, topic_id: Uuid) -> str:
        """The qualified name a topic id had last, or a placeholder naming the id."""
        name = self.topics.get(topic_id)
        # Not `get(id, f"...")`: that default would print the id (base64) on every call.
        return name if name is not None else f"<unknown topic {topic_id}>"


_INTS_TEXT: dict[tuple[int, ...], str] = {}
"""Broker id lists already written out (`_ints`): a cluster has few, and a page of the
console's timeline writes tens of thousands."""

_INTS_TEXT_MAX = 4096


def _ints(values: tuple[int, ...] | None) -> str:
    if not values:
        return "[]"
    if type(values) is not tuple:
        return "[" + ",".join(map(str, values)) + "]"
    text = _INTS_TEXT.get(values)
    if text is None:
        if len(_INTS_TEXT) >= _INTS_TEXT_MAX:
            _INTS_TEXT.clear()
        text = _INTS_TEXT[values] = "[" + ",".join(map(str, values)) + "]"
    return text


def describe(record: Record, names: Names) -> str:
    """A one-line description of a record, with names resolved as of the entry."""
    match record:
        case TopicRecord():
            shown = qualified_name(record.namespace, record.name)
            return f"created topic {shown} with id {record.topic_id}"
        case RemoveTopicRecord():
            return f"deleted topic {names.topic(record.topic_id)} (id {record.topic_id})"
        case PartitionRecord():
            leader = record.leader if record.leader != NO_LEADER else "none"
            return (
                f"partition {names.topic(record.topic_id)}-{record.partition_id}: replicas "
                f"{_ints(record.replicas)}, isr {_ints(record.isr)}, leader {leader}, mode "
                f"{mode_name(record.mode)}"
            )
        case PartitionChangeRecord():
            parts = []
            if record.leader >= NO_LEADER:
                parts.append(f"leader -> {record.leader if record.leader >= 0 else 'none'}")
            for label, value in (
                ("isr", record.isr),
                ("replicas", record.replicas),
                ("adding", record.adding_replicas),
                ("removing", record.removing_replicas),
            ):
                if value is not None:
                    parts.append(f"{label} -> {_ints(value)}")
            if record.mode is not None:
                parts.append(f"mode -> {mode_name(record.mode)}")
            if record.partition_epoch is not None:
                parts.append(f"partition epoch -> {record.partition_epoch}")
            what = ", ".join(parts) or "no field changed"
            return f"partition {names.topic(record.topic_id)}-{record.partition_id}: {what}"
        case DeleteTopicPartitionsRecord():
            return (
                f"reduce {names.topic(record.topic_id)} to {record.partition_count} partitions "
                f"(purge at {record.delete_after_ms})"
            )
        case MoveTopicRecord():
            moved_from = names.previous.get(record.topic_id, "<unknown>")
            return (
                f"moved topic {moved_from} to {names.topic(record.topic_id)} (id {record.topic_id})"
            )
        case PurgeTopicPartitionsRecord():
            return (
                f"removed partitions {record.partition_count} and above of "
                f"{names.topic(record.topic_id)} (pending deletion done)"
            )
        case CancelTopicPartitionsDeletionRecord():
            return (
                f"cancelled the pending deletion of {names.topic(record.topic_id)} to "
                f"{record.partition_count} partitions"
            )
        case ConfigRecord():
            resource = f"{ConfigResourceType(record.resource_type).name.lower()} "
            resource += record.resource_name or "<cluster>"
            if record.value is None:
                return f"config {resource}: delete {record.name}"
            return f"config {resource}: {record.name}={record.value}"
        case NamespaceRecord():
            return f"created namespace {record.name} with id {record.namespace_id}"
        case RemoveNamespaceRecord():
            shown = names.namespaces.get(record.namespace_id, f"<unknown {record.namespace_id}>")
            return f"deleted namespace {shown} (id {record.namespace_id})"
        case RegisterBrokerRecord():
            state = "fenced" if record.fenced else "unfenced"
            return (
                f"registered broker {record.broker_id} (epoch {record.broker_epoch}, rack "
                f"{record.rack or '-'}, {state})"
            )
        case UnregisterBrokerRecord():
            return f"unregistered broker {record.broker_id}"
        case BrokerRegistrationChangeRecord():
            change = []
            if record.fenced == FencingChange.FENCE:
                change.append("fenced")
            elif record.fenced == FencingChange.UNFENCE:
                change.append("unfenced")
            if record.in_controlled_shutdown == ControlledShutdownChange.IN_CONTROLLED_SHUTDOWN:
                change.append("in controlled shutdown")
            return f"broker {record.broker_id}: {', '.join(change) or 'no change'}"
        case FeatureLevelRecord():
            return f"feature {record.name} level {record.feature_level}"
        case ClientWriteRecord():
            return (
                f"client {record.client_id} write {record.sequence} applied "
                f"(API {record.api_key}, answer of {len(record.response)} bytes kept)"
            )
        case VotersRecord():
            return "controller quorum voters: " + ", ".join(
                f"{v.voter_id} ({v.voter_directory_id})" for v in record.voters
            )
        case KRaftVersionRecord():
            return f"controller quorum kraft.version {record.kraft_version}"
        case LeaderChangeRecord():
            return (
                f"node {record.leader_id} leads the controller quorum (voters "
                f"{_ints(record.voters)}, granted by {_ints(record.granting_voters)})"
            )
        case (
            AccessControlEntryRecord()
            | RemoveAccessControlEntryRecord()
            | UserScramCredentialRecord()
            | RemoveUserScramCredentialRecord()
        ):
            return describe_security(record, names.acls)
    return type(record).__name__  # pragma: no cover - every record type is matched above
