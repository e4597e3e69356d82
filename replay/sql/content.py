"""A snapshot's content: the image as table rows, rows back into an image, and their checksum.

Rows here are the content columns of each table in declaration order, without `snapshot_id`
(the store adds it). The checksum covers exactly these rows, so it does not depend on which
snapshot id or which database holds them: two snapshots of one state have the same checksum.

The checksum is a SHA-256 over, per table, the row count and the sum (mod 2**128) of a BLAKE2b
digest of each row -- a multiset hash, so rows can be read back in any order the database likes.
A row is serialized with `marshal` format version 0 (ints, strings and bytes: a credential's
salt and keys, read back as bytes whatever the driver gives; unlike later versions it has no
back-references or interning flags, so equal values give equal bytes whatever their object
identity), 2.4x cheaper than `repr`. Partitions are hashed per topic (the
topic's partition rows in id order, as one item), which costs one digest per topic instead of one
per partition. Booleans are stored and hashed as 0/1, so every driver reads back the values that
were hashed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from immutables import Map

from records.model import (
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerFeature,
    ClientWriteRecord,
    ConfigResourceType,
    Mode,
    NamespaceRecord,
    RegisterBrokerRecord,
    UserScramCredentialRecord,
)
from records.uuids import Uuid
from replay.image import (
    AclsImage,
    ClientWritesImage,
    ClusterImage,
    ConfigsImage,
    FeaturesImage,
    MetadataImage,
    NamespacesImage,
    Provenance,
    ScramImage,
    ScramKey,
    TopicImage,
    TopicsImage,
)
from replay.sql import security_rows
from replay.sql.checksum import (
    ACLS,
    BROKER_FEATURES,
    BROKERS,
    CLIENT_WRITES,
    COLUMNS,
    CONFIGS,
    ENDPOINTS,
    FEATURES,
    NAMESPACES,
    PARTITIONS,
    PENDING,
    SCRAM,
    TOPICS,
    ContentChecksum,
    Row,
    record_count,
)
from replay.sql.errors import SnapshotContentError
from replay.sql.ids import parse_id
from replay.sql.topic_builder import PartitionRowsUnsorted, topics_from_rows

_MODE_NAMES = {int(m): m.name for m in Mode}
_RESOURCE_TYPES = {t.name: t for t in ConfigResourceType}


# ---------------------------------------------------------------------------- image -> rows


class _ArrayText(dict[tuple[int, ...], str]):
    """Replica tuple -> its JSON text; few distinct lists exist, so this is mostly a lookup."""

    def __missing__(self, key: tuple[int, ...]) -> str:
        text = "[" + ",".join(str(i) for i in key) + "]"
        self[key] = text
        return text


def image_rows(image: MetadataImage, checksum: ContentChecksum) -> dict[str, Iterator[Row]]:
    """Per table, a lazy iterator of its rows; each row is added to `checksum` as it is made.

    Topics and partitions come in topic id order (the primary key order, so index inserts are
    appends); the three tables keyed by topic share one ordering, made as the first is written.
    """
    ordered = _TopicsInIdOrder(image.topics)
    return {
        FEATURES: _counted(checksum, FEATURES, sorted(image.features.levels.items())),
        BROKERS: _counted(checksum, BROKERS, _broker_rows(image.cluster)),
        ENDPOINTS: _counted(checksum, ENDPOINTS, _endpoint_rows(image.cluster)),
        BROKER_FEATURES: _counted(checksum, BROKER_FEATURES, _broker_feature_rows(image.cluster)),
        NAMESPACES: _counted(checksum, NAMESPACES, _namespace_rows(image.namespaces)),
        TOPICS: _counted(checksum, TOPICS, _topic_rows(ordered)),
        PARTITIONS: _partition_rows(ordered, checksum),
        PENDING: _counted(checksum, PENDING, _pending_rows(ordered)),
        CONFIGS: _counted(checksum, CONFIGS, _config_rows(image.configs)),
        SCRAM: _counted(checksum, SCRAM, security_rows.scram_rows(image.scram)),
        ACLS: _counted(checksum, ACLS, security_rows.acl_rows(image.acls)),
        CLIENT_WRITES: _counted(checksum, CLIENT_WRITES, _client_write_rows(image.client_writes)),
    }


def _client_write_rows(table: ClientWritesImage) -> Iterator[Row]:
    for position, write in enumerate(table.ordered()):
        yield (
            str(write.client_id),
            position,
            write.sequence,
            write.principal,
            write.api_key,
            write.response,
        )


def _counted(checksum: ContentChecksum, table: str, rows: Iterable[Row]) -> Iterator[Row]:
    add = checksum.add
    for row in rows:
        add(table, row)
        yield row


def _broker_rows(cluster: ClusterImage) -> Iterator[Row]:
    for b in cluster.sorted():
        yield (
            b.broker_id,
            str(b.incarnation_id),
            b.broker_epoch,
            b.rack,
            int(b.fenced),
            int(b.in_controlled_shutdown),
        )


def _endpoint_rows(cluster: ClusterImage) -> Iterator[Row]:
    for b in cluster.sorted():
        for position, e in enumerate(b.end_points):
            yield (b.broker_id, position, e.name, e.host, e.port, e.security_protocol)


def _broker_feature_rows(cluster: ClusterImage) -> Iterator[Row]:
    for b in cluster.sorted():
        for position, f in enumerate(b.features):
            yield (b.broker_id, position, f.name, f.min_supported_version, f.max_supported_version)


def _namespace_rows(namespaces: NamespacesImage) -> Iterator[Row]:
    for record in namespaces.by_name.values():
        parent = None if record.parent_id is None else str(record.parent_id)
        yield (str(record.namespace_id), record.name, parent)


_BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_FIRST_CHARACTERS = sorted(range(64), key=_BASE64URL.__getitem__)
"""The 64 values of an id's first six bits, in the order of the character they begin its text
with (`str(Uuid)` is URL-safe base64, whose alphabet is not in ASCII order)."""


class _TopicsInIdOrder:
    """An image's topics in the order of their ids' text, each id made text once for all tables.

    Sorted one first character at a time, 1/64th of the topics each: one sort of every id is a
    single call that keeps the interpreter lock from every other thread until it returns (about
    50-90 ms at 160,000 topics), and a snapshot written beside an event loop must leave it
    gaps. The ids' text and each group's order are kept (a few objects per group, none per
    topic), so the topics, partitions and pending-deletion rows share them.
    """

    def __init__(self, topics: TopicsImage) -> None:
        self._topics = topics
        self._groups: list[tuple[list[str], dict[str, TopicImage]]] | None = None

    def __iter__(self) -> Iterator[tuple[str, TopicImage]]:
        groups = self._groups
        if groups is None:
            yield from self._sort()
            return
        for ids, by_id in groups:
            for tid in ids:
                yield tid, by_id[tid]

    def _sort(self) -> Iterator[tuple[str, TopicImage]]:
        by_first: list[list[TopicImage]] = [[] for _ in range(64)]
        for topic in self._topics.by_id.values():
            by_first[topic.topic_id.bytes[0] >> 2].append(topic)
        groups = []
        for first in _FIRST_CHARACTERS:
            by_id = {str(t.topic_id): t for t in by_first[first]}
            ids = sorted(by_id)
            groups.append((ids, by_id))
            for tid in ids:
                yield tid, by_id[tid]
        self._groups = groups


def _topic_rows(topics: _TopicsInIdOrder) -> Iterator[Row]:
    for tid, topic in topics:
        yield (tid, topic.namespace, topic.name)


def _partition_rows(topics: _TopicsInIdOrder, checksum: ContentChecksum) -> Iterator[Row]:
    text = _ArrayText()
    add_group = checksum.add_group
    for tid, topic in topics:
        rows = _topic_partition_rows(tid, topic, text)
        add_group(PARTITIONS, rows)
        yield from rows


def _topic_partition_rows(tid: str, topic: TopicImage, text: _ArrayText) -> list[Row]:
    modes = _MODE_NAMES
    return [
        (
            tid,
            p.partition_id,
            text[p.replicas],
            text[p.isr],
            text[p.removing_replicas],
            text[p.adding_replicas],
            p.leader,
            p.leader_epoch,
            p.partition_epoch,
            modes[p.mode],
        )
        for p in topic.partitions
    ]


class TopicRows:
    """One topic's rows, as a full snapshot writes them (an increment's unit of change)."""

    def __init__(self) -> None:
        self._text = _ArrayText()

    def of(self, tid: str, topic: TopicImage) -> tuple[Row, list[Row], Row | None]:
        """The topic's `snapshot_topics` row, its partition rows in id order, its pending row."""
        pending = topic.pending_deletion
        return (
            (tid, topic.namespace, topic.name),
            _topic_partition_rows(tid, topic, self._text),
            None
            if pending is None
            else (tid, pending.partition_count, pending.delete_after_ms, pending.created_ms),
        )


def _pending_rows(topics: _TopicsInIdOrder) -> Iterator[Row]:
    for tid, topic in topics:
        pending = topic.pending_deletion
        if pending is not None:
            yield (tid, pending.partition_count, pending.delete_after_ms, pending.created_ms)


def _config_rows(configs: ConfigsImage) -> Iterator[Row]:
    for (resource_type, resource_name), values in sorted(configs.resources.items()):
        type_name = ConfigResourceType(resource_type).name
        for name in sorted(values):
            yield (type_name, resource_name, name, values[name])


# ---------------------------------------------------------------------------- rows -> image


def _normalized_brokers(rows: Iterable[Row]) -> list[Row]:
    # Drivers read booleans back as bool (psycopg) or int (sqlite3); 0/1 were hashed.
    return [(r[0], r[1], r[2], r[3], int(r[4]), int(r[5])) for r in rows]


def image_from_rows(
    provenance: Provenance,
    rows: Mapping[str, Iterable[Row]],
    checksum: ContentChecksum,
    *,
    partitions_sorted: bool = False,
) -> MetadataImage:
    """The image held by `rows`, adding every row to `checksum`.

    Each table's rows may come in any order but the partitions', which come grouped by topic
    as they were written (`PartitionRowsUnsorted` when they are not), or sorted by topic id
    and partition id (`partitions_sorted`). Raises SnapshotContentError when the rows cannot
    form an image (a partition id gap, an unknown mode, a partition of a missing topic): a
    damaged or hand-edited snapshot.
    """
    levels: dict[str, int] = {}
    for row in rows[FEATURES]:
        checksum.add(FEATURES, row)
        levels[row[0]] = row[1]
    namespaces, namespace_ids = _namespaces(rows, checksum)
    topics, topic_counts = topics_from_rows(rows, checksum, partitions_sorted=partitions_sorted)
    return MetadataImage(
        provenance=provenance,
        features=FeaturesImage(levels=Map(levels)),
        cluster=ClusterImage(brokers=Map(_brokers(rows, checksum))),
        namespaces=NamespacesImage(
            by_name=Map(namespaces), by_id=Map(namespace_ids), topic_counts=Map(topic_counts)
        ),
        topics=topics,
        configs=_configs(rows, checksum),
        acls=_acls(rows, checksum),
        scram=_scram(rows, checksum),
        client_writes=_client_writes(rows, checksum),
    )


def _brokers(
    rows: Mapping[str, Iterable[Row]], checksum: ContentChecksum
) -> dict[int, RegisterBrokerRecord]:
    add = checksum.add
    endpoints: dict[int, list[Row]] = {}
    for row in rows[ENDPOINTS]:
        add(ENDPOINTS, row)
        endpoints.setdefault(row[0], []).append(row)
    features: dict[int, list[Row]] = {}
    for row in rows[BROKER_FEATURES]:
        add(BROKER_FEATURES, row)
        features.setdefault(row[0], []).append(row)
    brokers: dict[int, RegisterBrokerRecord] = {}
    for row in _normalized_brokers(rows[BROKERS]):
        add(BROKERS, row)
        broker_id = row[0]
        brokers[broker_id] = RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=parse_id(row[1], "incarnation id"),
            broker_epoch=row[2],
            end_points=tuple(
                BrokerEndpoint(name=e[2], host=e[3], port=e[4], security_protocol=e[5])
                for e in sorted(endpoints.pop(broker_id, ()), key=lambda e: e[1])
            ),
            features=tuple(
                BrokerFeature(name=f[2], min_supported_version=f[3], max_supported_version=f[4])
                for f in sorted(features.pop(broker_id, ()), key=lambda f: f[1])
            ),
            rack=row[3],
            fenced=bool(row[4]),
            in_controlled_shutdown=bool(row[5]),
        )
    if endpoints or features:
        orphans = sorted({*endpoints, *features})
        raise SnapshotContentError(f"endpoints or features of unknown brokers {orphans}")
    return brokers


def _namespaces(
    rows: Mapping[str, Iterable[Row]], checksum: ContentChecksum
) -> tuple[dict[str, NamespaceRecord], dict[Uuid, str]]:
    namespaces: dict[str, NamespaceRecord] = {}
    namespace_ids: dict[Uuid, str] = {}
    for row in rows[NAMESPACES]:
        checksum.add(NAMESPACES, row)
        namespace_id = parse_id(row[0], "namespace id")
        parent = None if row[2] is None else parse_id(row[2], "parent namespace id")
        namespaces[row[1]] = NamespaceRecord(
            namespace_id=namespace_id, name=row[1], parent_id=parent
        )
        namespace_ids[namespace_id] = row[1]
    return namespaces, namespace_ids


def _configs(rows: Mapping[str, Iterable[Row]], checksum: ContentChecksum) -> ConfigsImage:
    resources: dict[tuple[ConfigResourceType, str], dict[str, str]] = {}
    for row in rows[CONFIGS]:
        checksum.add(CONFIGS, row)
        resource_type = _RESOURCE_TYPES.get(row[0])
        if resource_type is None:
            raise SnapshotContentError(f"unknown config resource type {row[0]!r}")
        resources.setdefault((resource_type, row[1]), {})[row[2]] = row[3]
    return ConfigsImage(resources=Map({k: Map(v) for k, v in resources.items()}))


def _acls(rows: Mapping[str, Iterable[Row]], checksum: ContentChecksum) -> AclsImage:
    by_id: dict[Uuid, AccessControlEntryRecord] = {}
    for row in rows[ACLS]:
        checksum.add(ACLS, row)
        acl = security_rows.acl_from_row(row)
        if acl.id in by_id:
            raise SnapshotContentError(f"ACL {row[0]} appears twice")
        by_id[acl.id] = acl
    return AclsImage(by_id=Map(by_id))


def _scram(rows: Mapping[str, Iterable[Row]], checksum: ContentChecksum) -> ScramImage:
    credentials: dict[ScramKey, UserScramCredentialRecord] = {}
    for raw in rows[SCRAM]:
        row = security_rows.normalized_scram_row(raw)
        checksum.add(SCRAM, row)
        credential = security_rows.scram_from_row(row)
        key = (credential.name, credential.mechanism)
        if key in credentials:
            raise SnapshotContentError(
                f"user {credential.name!r} has two {credential.mechanism.mechanism_name} "
                "credentials"
            )
        credentials[key] = credential
    return ScramImage(credentials=Map(credentials))


def _client_writes(
    rows: Mapping[str, Iterable[Row]], checksum: ContentChecksum
) -> ClientWritesImage:
    ordered: list[tuple[int, ClientWriteRecord]] = []
    seen: set[Uuid] = set()
    for raw in rows[CLIENT_WRITES]:
        response = raw[5]
        if isinstance(response, bytearray | memoryview):
            response = bytes(response)  # drivers may give either for a binary column
        row = (raw[0], raw[1], raw[2], raw[3], raw[4], response)
        checksum.add(CLIENT_WRITES, row)
        client_id = parse_id(row[0], "client id")
        if client_id in seen:
            raise SnapshotContentError(f"client {row[0]} has two last writes")
        seen.add(client_id)
        for index in (1, 2, 4):
            if not isinstance(row[index], int) or isinstance(row[index], bool):
                raise SnapshotContentError(f"client {row[0]} has a non-integer column")
        if not isinstance(response, bytes) or not isinstance(row[3], str | None):
            raise SnapshotContentError(f"client {row[0]} has a column of the wrong type")
        ordered.append(
            (
                row[1],
                ClientWriteRecord(
                    client_id=client_id,
                    sequence=row[2],
                    principal=row[3],
                    api_key=row[4],
                    response=response,
                ),
            )
        )
    ordered.sort(key=lambda item: item[0])
    # No eviction here: the snapshot holds at most the bound it was written with.
    return ClientWritesImage().with_writes([w for _, w in ordered], limit=len(ordered))


__all__ = [
    "ACLS",
    "BROKERS",
    "BROKER_FEATURES",
    "CLIENT_WRITES",
    "COLUMNS",
    "CONFIGS",
    "ENDPOINTS",
    "FEATURES",
    "NAMESPACES",
    "PARTITIONS",
    "PENDING",
    "SCRAM",
    "TOPICS",
    "ContentChecksum",
    "PartitionRowsUnsorted",
    "Row",
    "TopicRows",
    "image_from_rows",
    "image_rows",
    "record_count",
]
