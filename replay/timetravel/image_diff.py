"""What changed between two images, area by area, and between two points of a log."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from metadata_log.stored_log import StoredLog
from records.model import ConfigResourceType, PartitionRecord, RegisterBrokerRecord, mode_name
from replay.changes import Change
from replay.image import MetadataImage, TopicImage
from replay.loader import load_image
from replay.timetravel.image_cache import ImageCache
from replay.timetravel.points import point_offset
from replay.timetravel.rebuild import travel
from replay.timetravel.security import diff_acls, diff_scram

if TYPE_CHECKING:
    # Only the caller's store is used: importing SQLAlchemy is left to whoever opens one.
    from replay.sql.store import SnapshotStore


def _fields(before: dict[str, Any], after: dict[str, Any]) -> tuple[tuple[str, Any, Any], ...]:
    return tuple((k, before[k], after[k]) for k in before if before[k] != after[k])


def _partition_state(p: PartitionRecord) -> dict[str, Any]:
    return {
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "leader": p.leader,
        "adding_replicas": list(p.adding_replicas),
        "removing_replicas": list(p.removing_replicas),
        "mode": mode_name(p.mode),
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


def diff_points(
    log: StoredLog,
    store: SnapshotStore | None,
    from_point: str,
    to_point: str | None,
    *,
    cache: ImageCache | None = None,
) -> tuple[int, int, list[Change]]:
    """(from offset, to offset, changes) between two points; `to_point` None is the end.

    The later image is built on the earlier one, so both share everything unchanged and the
    comparison only visits what changed between them. With `cache`, the earlier image is
    built from a kept one when that is nearer than a snapshot (`travel`).
    """
    start = point_offset(log, from_point)
    end = point_offset(log, to_point) if to_point is not None else log.end_offset - 1
    low, high = sorted((start, end))
    earlier = travel(log, store, at_offset=low, cache=cache).image
    later = load_image(log, lte=high, base=earlier)
    return start, end, diff(earlier, later) if start <= end else diff(later, earlier)
