"""Time travel: the image at any offset or time, what changed between two, an entity's history.

`image_at(log, store, at_offset=N)` loads the newest valid snapshot at or before N and replays
the log from there up to N; `at_time=T` first finds the last entry appended at or before T.
A snapshot is used only if it belongs to this log (the log's entry at its offset has the
snapshot's epoch and timestamp) and its rows match their checksum; otherwise the next older one
is tried, and with none (or no database) the log is replayed from the start. The answer is the
same either way; snapshots only make it faster.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from metadata_log.reads import StoredLog
from records.errors import MetadataLogError
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
    LeaderChangeRecord,
    Mode,
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
)
from records.uuids import Uuid
from replay.changes import Change as Change  # noqa: PLC0414 - re-exported for the Diff API
from replay.image import (
    EMPTY_IMAGE,
    MetadataImage,
    TopicImage,
    qualified_name,
    split_qualified_name,
)
from replay.loader import load_image
from replay.sql.errors import SnapshotContentError, SnapshotStoreError
from replay.timetravel_security import (
    SECURITY_RECORDS,
    describe_security,
    diff_acls,
    diff_scram,
    touches_resource,
    touches_user,
)

if TYPE_CHECKING:
    # Only the caller's store is used: importing SQLAlchemy is left to whoever opens one.
    from replay.sql.store import SnapshotInfo, SnapshotStore

logger = logging.getLogger(__name__)


class TimeTravelError(MetadataLogError):
    """A time-travel request names a point the log does not have, or is malformed."""


# ---------------------------------------------------------------------- points in time


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from ISO-8601 (naive = UTC) or an integer of epoch ms."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    try:
        moment = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise TimeTravelError(
            f"{text!r} is not a time: give ISO-8601 (2026-11-22T08:30:00Z) or milliseconds "
            "since the epoch"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def offset_at_time(log: StoredLog, at_time: int) -> int:
    """Offset of the last entry appended at or before `at_time` (ms); -1 if none was."""
    first_after = log.offset_for_time(at_time + 1)
    return log.end_offset - 1 if first_after is None else first_after - 1


def resolve_offset(
    log: StoredLog, *, at_offset: int | None = None, at_time: int | str | None = None
) -> int:
    """The offset a point in time names (the last entry when neither is given)."""
    if at_offset is not None and at_time is not None:
        raise TimeTravelError("give at_offset or at_time, not both")
    last = log.end_offset - 1
    if at_time is not None:
        return offset_at_time(log, parse_time(at_time) if isinstance(at_time, str) else at_time)
    if at_offset is None:
        return last
    if at_offset < -1:
        raise TimeTravelError(f"offset {at_offset} is not an offset (must be >= -1)")
    if at_offset > last:
        raise TimeTravelError(
            f"offset {at_offset} is past the end of the log (last offset {last}); "
            "`mlog log segments` shows the offsets"
        )
    return at_offset


@dataclass(frozen=True, slots=True, kw_only=True)
class Travel:
    """An image at a point in time and how it was built."""

    image: MetadataImage
    snapshot: SnapshotInfo | None
    """The snapshot it started from (None: replayed from the start of the log)."""
    replayed: int
    """Log entries replayed after the snapshot."""
    load_seconds: float
    replay_seconds: float
    skipped: tuple[str, ...] = field(default=())
    """Why newer snapshots were not used (not of this log, damaged, database down)."""


def snapshot_matches_log(log: StoredLog, info: SnapshotInfo) -> bool:
    """Whether the log's entry at the snapshot's offset is the one the snapshot was taken at.

    A quorum log that starts just after an installed snapshot no longer has that entry: its
    `log-start-snapshot` names the snapshot by offset, epoch, timestamp and checksum instead.
    """
    start = log.start_snapshot
    if start is not None and info.offset == start.offset:
        return (info.epoch, info.timestamp, info.checksum) == (
            start.epoch,
            start.timestamp,
            start.checksum,
        )
    if info.offset >= log.end_offset or info.offset < log.log_start_offset - 1:
        return False
    if info.offset == log.log_start_offset - 1:
        # Trimmed to start just after it (`MetadataLog.trim_before(offset + 1)`) with no
        # `log-start-snapshot` naming it: its entry is gone. What is left to check is that
        # the log goes on from it (epochs never go down); its checksum is checked as it loads.
        for entry in log.read(gt=info.offset, lte=info.offset + 1):
            return entry.epoch >= info.epoch
        return True
    for entry in log.read(gt=info.offset - 1, lte=info.offset):
        return entry.epoch == info.epoch and entry.timestamp == info.timestamp
    return False


def travel(
    log: StoredLog,
    store: SnapshotStore | None,
    *,
    at_offset: int | None = None,
    at_time: int | str | None = None,
    progress: Callable[[int], None] | None = None,
) -> Travel:
    """The image at a point in time (see the module docstring), with how it was built."""
    target = resolve_offset(log, at_offset=at_offset, at_time=at_time)
    log_start = log.log_start_offset
    if log_start > 0 and (target < log_start - 1 or (at_time is not None and target < log_start)):
        if at_time is None:
            kept = _snapshot_exactly_at(store, target)
            if kept is not None:
                return kept
        raise TimeTravelError(_before_start(log, store, target, at_time))
    if target < 0:
        return Travel(
            image=EMPTY_IMAGE, snapshot=None, replayed=0, load_seconds=0, replay_seconds=0
        )
    skipped: list[str] = []
    base, used, load_seconds = _newest_snapshot(log, store, target, skipped)
    start = time.perf_counter()
    image = load_image(log, lte=target, base=base, progress=progress)
    replay_seconds = time.perf_counter() - start
    return Travel(
        image=image,
        snapshot=used,
        replayed=target - base.provenance.offset,
        load_seconds=load_seconds,
        replay_seconds=replay_seconds,
        skipped=tuple(skipped),
    )


def _snapshot_exactly_at(store: SnapshotStore | None, target: int) -> Travel | None:
    """Before a trimmed log's start, only a snapshot taken at that very offset is an answer.

    It cannot be checked against the log (the entry is gone), only against its checksum.
    """
    if store is None or store.missing():
        return None
    start = time.perf_counter()
    try:
        for info in store.snapshots(gt=target - 1, lte=target, desc=True):
            try:
                image = store.load(info.id)
            except SnapshotContentError as exc:
                logger.warning("%s", exc)
                continue
            return Travel(
                image=image,
                snapshot=info,
                replayed=0,
                load_seconds=time.perf_counter() - start,
                replay_seconds=0.0,
            )
    except SnapshotStoreError as exc:
        logger.warning("%s", exc)
    return None


def _before_start(
    log: StoredLog, store: SnapshotStore | None, target: int, at_time: int | str | None
) -> str:
    """Why a point before a trimmed log's start cannot be reached, and what can be."""
    start = log.log_start_offset
    point = f"offset {target}" if at_time is None else f"time {at_time!r}"
    where = "is among" if at_time is None else "falls among"
    older: list[int] = []
    try:
        if store is not None and not store.missing():
            older = [i.offset for i in store.snapshots(lte=start - 2, desc=True, limit=5)]
    except SnapshotStoreError:
        pass
    kept = (
        "snapshots at offsets " + ", ".join(str(o) for o in sorted(older)) + " (newest five)"
        if older
        else "no snapshot"
    )
    return (
        f"{point} {where} the entries trimmed from this log: it starts at offset {start} "
        f"(`mlog log trim`). Before that only the snapshots' own offsets can be shown "
        f"(`--at-offset` of one; `mlog snapshot list`), and the database holds {kept} there"
    )


def image_at(
    log: StoredLog,
    store: SnapshotStore | None = None,
    *,
    at_offset: int | None = None,
    at_time: int | str | None = None,
    progress: Callable[[int], None] | None = None,
) -> MetadataImage:
    """The image after the entry at `at_offset`, or after the last entry at or before `at_time`.

    `at_time` is milliseconds since the epoch or ISO-8601 text. Without either, the image of
    the whole log.
    """
    return travel(log, store, at_offset=at_offset, at_time=at_time, progress=progress).image


def _newest_snapshot(
    log: StoredLog, store: SnapshotStore | None, target: int, skipped: list[str]
) -> tuple[MetadataImage, SnapshotInfo | None, float]:
    if store is None or store.missing():
        return EMPTY_IMAGE, None, 0.0
    start = time.perf_counter()
    try:
        candidates = store.snapshots(lte=target, desc=True)
        for info in candidates:
            if info.offset < log.log_start_offset - 1:
                break  # older than the log: nothing to check it against, nor to replay after
            if not snapshot_matches_log(log, info):
                skipped.append(
                    f"snapshot {info.id} (offset {info.offset}) was not taken from this log"
                )
                continue
            try:
                image = store.load(info.id)
            except SnapshotContentError as exc:
                skipped.append(str(exc))
                continue
            return image, info, time.perf_counter() - start
    except SnapshotStoreError as exc:
        skipped.append(f"{exc}; replaying the log from the start")
    for reason in skipped:
        logger.warning("%s", reason)
    return EMPTY_IMAGE, None, time.perf_counter() - start


# ---------------------------------------------------------------------- diff


def _fields(before: dict[str, Any], after: dict[str, Any]) -> tuple[tuple[str, Any, Any], ...]:
    return tuple((k, before[k], after[k]) for k in before if before[k] != after[k])


def _partition_state(p: PartitionRecord) -> dict[str, Any]:
    return {
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "leader": p.leader,
        "adding_replicas": list(p.adding_replicas),
        "removing_replicas": list(p.removing_replicas),
        "mode": Mode(p.mode).name,
        "leader_epoch": p.leader_epoch,
        "partition_epoch": p.partition_epoch,
    }


def _broker_state(b: RegisterBrokerRecord) -> dict[str, Any]:
    return {
        "incarnation_id": str(b.incarnation_id),
        "epoch": b.broker_epoch,
        "rack": b.rack,
        "fenced": b.fenced,
        "in_controlled_shutdown": b.in_controlled_shutdown,
        "endpoints": [f"{e.host}:{e.port}" for e in b.end_points],
    }


def diff(before: MetadataImage, after: MetadataImage) -> list[Change]:
    """What changed from `before` to `after`, area by area, in a stable order.

    Unchanged parts are shared between images (persistent maps), so comparing two images of a
    million partitions costs time only for the topics that changed.
    """
    changes: list[Change] = []
    changes.extend(_diff_features(before, after))
    changes.extend(_diff_brokers(before, after))
    changes.extend(_diff_namespaces(before, after))
    changes.extend(_diff_topics(before, after))
    changes.extend(_diff_configs(before, after))
    changes.extend(diff_scram(before, after))
    changes.extend(diff_acls(before, after))
    return changes


def _diff_features(before: MetadataImage, after: MetadataImage) -> Iterator[Change]:
    old, new = before.features.levels, after.features.levels
    for name in sorted(set(old) | set(new)):
        if old.get(name) != new.get(name):
            op = "+" if name not in old else "-" if name not in new else "~"
            yield Change(
                op=op, kind="feature", name=name, fields=(("level", old.get(name), new.get(name)),)
            )


def _diff_brokers(before: MetadataImage, after: MetadataImage) -> Iterator[Change]:
    old, new = before.cluster.brokers, after.cluster.brokers
    for broker_id in sorted(set(old) | set(new)):
        a, b = old.get(broker_id), new.get(broker_id)
        if a is b or a == b:
            continue
        if a is None:
            yield Change(op="+", kind="broker", name=str(broker_id))
        elif b is None:
            yield Change(op="-", kind="broker", name=str(broker_id))
        else:
            fields = _fields(_broker_state(a), _broker_state(b))
            yield Change(op="~", kind="broker", name=str(broker_id), fields=fields)


def _diff_namespaces(before: MetadataImage, after: MetadataImage) -> Iterator[Change]:
    old, new = before.namespaces.by_name, after.namespaces.by_name
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a == b:
            continue
        if a is not None:
            yield Change(op="-", kind="namespace", name=name, id=str(a.namespace_id))
        if b is not None:
            yield Change(op="+", kind="namespace", name=name, id=str(b.namespace_id))


def _diff_topics(before: MetadataImage, after: MetadataImage) -> Iterator[Change]:
    old, new = before.topics.by_id, after.topics.by_id
    removed = [t for i, t in old.items() if i not in new]
    added = [t for i, t in new.items() if i not in old]
    for topic in sorted(removed, key=lambda t: t.qualified_name):
        yield Change(op="-", kind="topic", name=topic.qualified_name, id=str(topic.topic_id))
    for topic in sorted(added, key=lambda t: t.qualified_name):
        yield Change(
            op="+",
            kind="topic",
            name=topic.qualified_name,
            id=str(topic.topic_id),
            fields=(("partitions", None, len(topic.partitions)),),
        )
    common = [(old[i], t) for i, t in new.items() if i in old and old[i] is not t]
    for a, b in sorted(common, key=lambda p: p[1].qualified_name):
        yield from _diff_topic(a, b)


def _diff_topic(a: TopicImage, b: TopicImage) -> Iterator[Change]:
    name = b.qualified_name
    if a.qualified_name != name:
        # A move between namespaces: same id, new name (its configs move with it).
        yield Change(
            op="~",
            kind="topic",
            name=name,
            id=str(b.topic_id),
            fields=(("moved", a.qualified_name, name),),
        )
    for p_old, p_new in zip(a.partitions, b.partitions, strict=False):
        if p_old is p_new or p_old == p_new:
            continue
        fields = _fields(_partition_state(p_old), _partition_state(p_new))
        yield Change(op="~", kind="partition", name=f"{name}-{p_new.partition_id}", fields=fields)
    for p in b.partitions[len(a.partitions) :]:
        yield Change(
            op="+",
            kind="partition",
            name=f"{name}-{p.partition_id}",
            fields=(("replicas", None, list(p.replicas)),),
        )
    for p in a.partitions[len(b.partitions) :]:
        yield Change(op="-", kind="partition", name=f"{name}-{p.partition_id}")
    if a.pending_deletion != b.pending_deletion:
        count_old = None if a.pending_deletion is None else a.pending_deletion.partition_count
        count_new = None if b.pending_deletion is None else b.pending_deletion.partition_count
        op = "+" if count_old is None else "-" if count_new is None else "~"
        yield Change(
            op=op,
            kind="pending_deletion",
            name=name,
            id=str(b.topic_id),
            fields=(("keep_partitions", count_old, count_new),),
        )


def _diff_configs(before: MetadataImage, after: MetadataImage) -> Iterator[Change]:
    old, new = before.configs.resources, after.configs.resources
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a is b or a == b:
            continue
        resource_type, resource_name = key
        shown = f"{ConfigResourceType(resource_type).name.lower()} {resource_name or '<cluster>'}"
        values_a: Mapping[str, str] = a or {}
        values_b: Mapping[str, str] = b or {}
        for name in sorted(set(values_a) | set(values_b)):
            va, vb = values_a.get(name), values_b.get(name)
            if va != vb:
                op = "+" if va is None else "-" if vb is None else "~"
                yield Change(
                    op=op, kind="config", name=f"{shown} {name}", fields=(("value", va, vb),)
                )


# ---------------------------------------------------------------------- history


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryEntry:
    """One log entry that touched an entity."""

    offset: int
    timestamp: int
    principal: str | None
    record_type: str
    description: str
    topic_id: str | None = None
    """The incarnation of a topic the entry belongs to (names can be reused)."""


@dataclass(slots=True)
class _Names:
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
        return self.topics.get(topic_id, f"<unknown topic {topic_id}>")


def _ints(values: tuple[int, ...] | None) -> str:
    return "[" + ",".join(str(v) for v in values or ()) + "]"


def describe(record: Record, names: _Names) -> str:
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
                f"{Mode(record.mode).name}"
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
                parts.append(f"mode -> {Mode(record.mode).name}")
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Entity:
    """What `history` follows: exactly one of the fields is set."""

    topic: str | None = None
    topic_id: Uuid | None = None
    namespace: str | None = None
    broker: int | None = None
    user: str | None = None
    """A user: its SCRAM credentials and the ACLs for it (or for every user, `User:*`)."""

    def __post_init__(self) -> None:
        given = [
            v
            for v in (self.topic, self.topic_id, self.namespace, self.broker, self.user)
            if v is not None
        ]
        if len(given) != 1:
            raise TimeTravelError(
                "history follows one entity: a topic, a topic id, a namespace, a broker or a user"
            )
        if self.user is not None and not self.user:
            raise TimeTravelError("a user to follow needs a name, e.g. alice")


def history(log: StoredLog, entity: Entity, *, lte: int | None = None) -> Iterator[HistoryEntry]:
    """Every entry (up to offset `lte`) that touched `entity`, oldest first.

    A topic followed by name is followed through every incarnation (delete and recreate give a
    new id; each entry names its incarnation's id). A broker is touched by its registrations,
    by configs of it, and by partition records and changes that name it as leader, replica or
    ISR member. A topic or a namespace is also touched by the ACLs granted and revoked on it
    (literal, prefixed or `*`); a user by its credentials and the ACLs for it or `User:*`.
    """
    names = _Names()
    followed: set[Uuid] = set()
    if entity.topic_id is not None:
        followed.add(entity.topic_id)
    if log.log_start_offset > 0:
        logger.warning(
            "the log starts at offset %d (trimmed with `mlog log trim`): the history before it "
            "is gone, and names of what was created before it may not be known",
            log.log_start_offset,
        )
    for block in log.read_records(lte=lte):
        for index, record in enumerate(block.records):
            touched, topic_id = _touches(record, entity, names, followed)
            _learn(record, names)  # before describing: a new topic's entries name it
            if touched:
                yield HistoryEntry(
                    offset=block.first_offset + index,
                    timestamp=block.timestamps[index],
                    principal=block.principals[index],
                    record_type=type(record).__name__,
                    description=describe(record, names),
                    topic_id=None if topic_id is None else str(topic_id),
                )


def _learn(record: Record, names: _Names) -> None:
    """Track names; ids keep their names after a delete, so old entries still read well."""
    if isinstance(record, TopicRecord):
        qualified = qualified_name(record.namespace, record.name)
        names.topics[record.topic_id] = qualified
        names.topic_namespaces[record.topic_id] = record.namespace
        names.live[qualified] = record.topic_id
    elif isinstance(record, RemoveTopicRecord):
        names.live.pop(names.topics.get(record.topic_id, ""), None)
    elif isinstance(record, MoveTopicRecord):
        old = names.topics.get(record.topic_id)
        if old is not None:
            # Namespaces nest ("org:apache") and topic names hold no ':', so the topic's own
            # name is what follows the last separator.
            moved = qualified_name(record.namespace, split_qualified_name(old)[1])
            names.previous[record.topic_id] = old
            names.live.pop(old, None)
            names.topics[record.topic_id] = moved
            names.topic_namespaces[record.topic_id] = record.namespace
            names.live[moved] = record.topic_id
    elif isinstance(record, NamespaceRecord):
        names.namespaces[record.namespace_id] = record.name
    elif isinstance(record, AccessControlEntryRecord):
        names.acls[record.id] = record


def _touches(
    record: Record, entity: Entity, names: _Names, followed: set[Uuid]
) -> tuple[bool, Uuid | None]:
    """(whether `record` touches the entity, the topic id it concerns if any)."""
    if isinstance(record, SECURITY_RECORDS):
        return _touches_security(record, entity, names), None
    if entity.topic is not None or entity.topic_id is not None:
        return _touches_topic(record, entity, names, followed)
    if entity.namespace is not None:
        return _touches_namespace(record, entity.namespace, names)
    return _touches_broker(record, entity.broker), None


def _touches_security(record: Record, entity: Entity, names: _Names) -> bool:
    if entity.user is not None:
        return touches_user(record, entity.user, names.acls)
    if entity.namespace is not None:
        return touches_resource(record, ResourceType.NAMESPACE, entity.namespace, names.acls)
    topic = entity.topic
    if entity.topic_id is not None:
        topic = names.topics.get(entity.topic_id)
    return topic is not None and touches_resource(record, ResourceType.TOPIC, topic, names.acls)


def _touches_topic(
    record: Record, entity: Entity, names: _Names, followed: set[Uuid]
) -> tuple[bool, Uuid | None]:
    if isinstance(record, TopicRecord):
        if (
            entity.topic is not None
            and qualified_name(record.namespace, record.name) == entity.topic
        ):
            followed.add(record.topic_id)
        return record.topic_id in followed, record.topic_id
    if isinstance(record, MoveTopicRecord) and entity.topic is not None:
        # By name, a topic is followed while it has that name: from a move to the name on,
        # and up to (and with) a move away from it.
        old = names.topics.get(record.topic_id)
        if old is not None:
            new = qualified_name(record.namespace, split_qualified_name(old)[1])
            if new == entity.topic:
                followed.add(record.topic_id)
                return True, record.topic_id
            if old == entity.topic and record.topic_id in followed:
                followed.discard(record.topic_id)
                return True, record.topic_id
        return record.topic_id in followed, record.topic_id
    if isinstance(
        record,
        PartitionRecord
        | PartitionChangeRecord
        | RemoveTopicRecord
        | DeleteTopicPartitionsRecord
        | PurgeTopicPartitionsRecord
        | CancelTopicPartitionsDeletionRecord
        | MoveTopicRecord,
    ):
        return record.topic_id in followed, record.topic_id
    if isinstance(record, ConfigRecord) and record.resource_type == ConfigResourceType.TOPIC:
        live = names.live.get(record.resource_name)
        return record.resource_name == entity.topic or live in followed, live
    return False, None


def _touches_namespace(record: Record, namespace: str, names: _Names) -> tuple[bool, Uuid | None]:
    if isinstance(record, NamespaceRecord):
        return record.name == namespace, None
    if isinstance(record, RemoveNamespaceRecord):
        return names.namespaces.get(record.namespace_id) == namespace, None
    if isinstance(record, TopicRecord):
        return record.namespace == namespace, record.topic_id
    if isinstance(record, RemoveTopicRecord):
        return names.topic_namespaces.get(record.topic_id) == namespace, record.topic_id
    if isinstance(record, MoveTopicRecord):
        moved_from = names.topic_namespaces.get(record.topic_id)
        return namespace in (moved_from, record.namespace), record.topic_id
    if isinstance(record, ConfigRecord):
        return (
            record.resource_type == ConfigResourceType.NAMESPACE
            and record.resource_name == namespace,
            None,
        )
    return False, None


def _touches_broker(record: Record, broker: int | None) -> bool:
    if broker is None:
        return False  # a user: only security records touch it
    if isinstance(
        record, RegisterBrokerRecord | UnregisterBrokerRecord | BrokerRegistrationChangeRecord
    ):
        return record.broker_id == broker
    if isinstance(record, ConfigRecord):
        return record.resource_type == ConfigResourceType.BROKER and record.resource_name == str(
            broker
        )
    if isinstance(record, PartitionRecord):
        return broker in record.replicas or record.leader == broker
    if isinstance(record, PartitionChangeRecord):
        return (
            record.leader == broker
            or broker in (record.isr or ())
            or broker in (record.replicas or ())
            or broker in (record.adding_replicas or ())
            or broker in (record.removing_replicas or ())
        )
    return False


def point_offset(log: StoredLog, text: str) -> int:
    """An offset from an argument: an integer is an offset, anything else an ISO-8601 time."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return resolve_offset(log, at_offset=int(stripped))
    try:
        at_time = parse_time(stripped)
    except TimeTravelError:
        # Not parse_time's message: it offers epoch milliseconds, which here read as an offset.
        raise TimeTravelError(
            f"{text!r} is neither an offset (an integer) nor an ISO-8601 time "
            "(2026-11-22T08:30:00Z); an integer here is always an offset, not milliseconds"
        ) from None
    return resolve_offset(log, at_time=at_time)


def diff_points(
    log: StoredLog, store: SnapshotStore | None, from_point: str, to_point: str | None
) -> tuple[int, int, list[Change]]:
    """(from offset, to offset, changes) between two points; `to_point` None is the end.

    The later image is built on the earlier one, so both share everything unchanged and the
    comparison only visits what changed between them.
    """
    start = point_offset(log, from_point)
    end = point_offset(log, to_point) if to_point is not None else log.end_offset - 1
    low, high = sorted((start, end))
    earlier = travel(log, store, at_offset=low).image
    later = load_image(log, lte=high, base=earlier)
    return start, end, diff(earlier, later) if start <= end else diff(later, earlier)


def history_range(
    log: StoredLog,
    entity: Entity,
    *,
    gt: int | None = None,
    lte: int | None = None,
    limit: int | None = None,
) -> list[HistoryEntry]:
    """The entries that touched `entity` with `gt < offset <= lte`, at most `limit`."""
    items: list[HistoryEntry] = []
    if limit == 0:
        return items
    for entry in history(log, entity, lte=lte):
        if gt is not None and entry.offset <= gt:
            continue
        items.append(entry)
        if limit is not None and len(items) >= limit:
            break
    return items
