"""An entity's history: every log entry that touched a topic, namespace, broker or user."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from immutables import Map

from metadata_log.stored_log import StoredLog
from records.errors import MetadataLogError
from records.model import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    CancelTopicPartitionsDeletionRecord,
    ConfigRecord,
    ConfigResourceType,
    DeleteTopicPartitionsRecord,
    MoveTopicRecord,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    PurgeTopicPartitionsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveNamespaceRecord,
    RemoveTopicRecord,
    ResourceType,
    TopicRecord,
    UnregisterBrokerRecord,
)
from records.uuids import Uuid
from replay.image import MetadataImage, TopicImage, qualified_name, split_qualified_name
from replay.timetravel.descriptions import Names, describe
from replay.timetravel.errors import TimeTravelError
from replay.timetravel.rebuild import snapshot_matches_log, travel

if TYPE_CHECKING:
    from replay.sql.store import SnapshotStore
from replay.timetravel.security import (
    SECURITY_RECORDS,
    touches_resource,
    touches_user,
)

logger = logging.getLogger(__name__)


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


def history(
    log: StoredLog,
    entity: Entity,
    *,
    lte: int | None = None,
    start: MetadataImage | None = None,
) -> Iterator[HistoryEntry]:
    """Every entry (up to offset `lte`) that touched `entity`, oldest first.

    A topic followed by name is followed through every incarnation (delete and recreate give a
    new id; each entry names its incarnation's id). A broker is touched by its registrations,
    by configs of it, and by partition records and changes that name it as leader, replica or
    ISR member. A topic or a namespace is also touched by the ACLs granted and revoked on it
    (literal, prefixed or `*`); a user by its credentials and the ACLs for it or `User:*`.

    `start` is the image where a trimmed log starts (from its snapshot, `start_image`): the names
    of what was created before the trim are known from it, and a topic followed by name is
    followed from its id there.
    """
    names = Names()
    followed: set[Uuid] = set()
    if entity.topic_id is not None:
        followed.add(entity.topic_id)
    if start is not None:
        learn_image(start, names)
        if entity.topic is not None and entity.topic in names.live:
            followed.add(names.live[entity.topic])
    elif log.log_start_offset > 0:
        logger.warning(
            "the log starts at offset %d (trimmed with `mlog log trim`): the history before it "
            "is gone, and names of what was created before it may not be known",
            log.log_start_offset,
        )
    for block in log.read_records(lte=lte):
        for index, record in enumerate(block.records):
            touched, topic_id = _touches(record, entity, names, followed)
            learn(record, names)  # before describing: a new topic's entries name it
            if touched:
                yield HistoryEntry(
                    offset=block.first_offset + index,
                    timestamp=block.timestamps[index],
                    principal=block.principals[index],
                    record_type=type(record).__name__,
                    description=describe(record, names),
                    topic_id=None if topic_id is None else str(topic_id),
                )


def learn_image(image: MetadataImage, names: Names) -> None:
    """Know the names of an image: its live topics, its namespaces and its ACLs."""
    _learn_namespaces_and_acls(image, names)
    for topic in image.topics.by_id.values():
        qualified = topic.qualified_name
        names.topics[topic.topic_id] = qualified
        names.topic_namespaces[topic.topic_id] = topic.namespace
        names.live[qualified] = topic.topic_id


def _learn_namespaces_and_acls(image: MetadataImage, names: Names) -> None:
    for record in image.namespaces.by_name.values():
        names.namespaces[record.namespace_id] = record.name
    names.acls.update(image.acls.by_id.items())


class _TopicNamesOf(dict[Uuid, str]):
    """Topic ids' qualified names: learnt from entries, else the image's (kept once asked)."""

    __slots__ = ("_by_id",)

    def __init__(self, by_id: Map[Uuid, TopicImage]) -> None:
        super().__init__()
        self._by_id = by_id

    def get(self, key: Uuid, default: str | None = None) -> str | None:  # type: ignore[override]
        name = dict.get(self, key)
        if name is not None:
            return name
        topic = self._by_id.get(key)
        if topic is None:
            return default
        name = self[key] = topic.qualified_name
        return name

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self._by_id

    def __missing__(self, key: Uuid) -> str:
        name = self.get(key)
        if name is None:
            raise KeyError(key)
        return name


def image_names(image: MetadataImage) -> Names:
    """The names of an image for describing entries after it (`describe`, `learn`).

    What `learn_image` knows, but a topic's name is looked up in the image when first asked:
    `learn_image` writes every topic's (150 ms at 100,000 topics) where a page of the console's
    timeline names a few hundred. Its `live` and `topic_namespaces` hold only what entries
    taught (no describer reads them; `history` uses `learn_image`).
    """
    names = Names(topics=_TopicNamesOf(image.topics.by_id))
    _learn_namespaces_and_acls(image, names)
    return names


def start_image(log: StoredLog, store: SnapshotStore | None) -> MetadataImage | None:
    """The image whose names a trimmed log's history starts from, from a snapshot.

    The image at the log's first entry when a snapshot answers it (one at or just below the
    start). A trim keeps the segment that holds its snapshot, and online retention leaves the
    log starting at a segment's base, so the start is usually below every snapshot: then the
    oldest snapshot the log holds, which knows every topic, namespace and ACL alive there
    (those created after the start are also learnt from their entries; a topic created before
    the start and deleted before that snapshot stays unnamed). None for a whole log, or when
    no usable snapshot is there (`history` then warns that names may be unknown).
    """
    if log.log_start_offset <= 0:
        return None
    try:
        return travel(log, store, at_offset=log.log_start_offset).image
    except MetadataLogError as exc:
        logger.debug("no snapshot where the log starts: %s", exc)
    if store is None or store.missing():
        return None
    for info in store.snapshots(gt=log.log_start_offset, lte=log.end_offset - 1):
        if not snapshot_matches_log(log, info):
            continue
        try:
            return travel(log, store, at_offset=info.offset).image
        except MetadataLogError as exc:
            logger.debug("snapshot %d does not answer its offset: %s", info.id, exc)
    return None


def learn(record: Record, names: Names) -> None:
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
    record: Record, entity: Entity, names: Names, followed: set[Uuid]
) -> tuple[bool, Uuid | None]:
    """(whether `record` touches the entity, the topic id it concerns if any)."""
    if isinstance(record, SECURITY_RECORDS):
        return _touches_security(record, entity, names), None
    if entity.topic is not None or entity.topic_id is not None:
        return _touches_topic(record, entity, names, followed)
    if entity.namespace is not None:
        return _touches_namespace(record, entity.namespace, names)
    return _touches_broker(record, entity.broker), None


def _touches_security(record: Record, entity: Entity, names: Names) -> bool:
    if entity.user is not None:
        return touches_user(record, entity.user, names.acls)
    if entity.namespace is not None:
        return touches_resource(record, ResourceType.NAMESPACE, entity.namespace, names.acls)
    topic = entity.topic
    if entity.topic_id is not None:
        topic = names.topics.get(entity.topic_id)
    return topic is not None and touches_resource(record, ResourceType.TOPIC, topic, names.acls)


def _touches_topic(
    record: Record, entity: Entity, names: Names, followed: set[Uuid]
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


def _touches_namespace(record: Record, namespace: str, names: Names) -> tuple[bool, Uuid | None]:
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


def history_range(
    log: StoredLog,
    entity: Entity,
    *,
    gt: int | None = None,
    lte: int | None = None,
    limit: int | None = None,
    start: MetadataImage | None = None,
) -> list[HistoryEntry]:
    """The entries that touched `entity` with `gt < offset <= lte`, at most `limit`.

    `start`: the image a trimmed log starts after (`history`).
    """
    items: list[HistoryEntry] = []
    if limit == 0:
        return items
    for entry in history(log, entity, lte=lte, start=start):
        if gt is not None and entry.offset <= gt:
            continue
        items.append(entry)
        if limit is not None and len(items) >= limit:
            break
    return items
