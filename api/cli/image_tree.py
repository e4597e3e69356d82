"""The image as a tree of paths, like Kafka's metadata shell (`/topics/byName/x/0`, `/brokers/1`).

Directories are built lazily from the image, so listing `/topics/byName` of a million-partition
image does not build a node per partition. Leaves hold JSON-able values.
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from records.json_form import record_to_json
from records.model import ConfigResourceType, PartitionRecord
from records.uuids import Uuid
from replay.controller.states import partition_state, replica_state
from replay.image import MetadataImage, TopicImage


class PathError(LookupError):
    """A path does not name a node of the image tree."""


@dataclass(frozen=True, slots=True)
class Directory:
    """A node with named children, produced on demand."""

    list_children: Callable[[], list[str]]
    child: Callable[[str], Node | None]


@dataclass(frozen=True, slots=True)
class Leaf:
    """A node holding a value."""

    value: Any


Node = Directory | Leaf


def _dir(children: Mapping[str, Callable[[], Node]]) -> Directory:
    def child(name: str) -> Node | None:
        make = children.get(name)
        return None if make is None else make()

    return Directory(lambda: list(children), child)


def _partition_value(image: MetadataImage, partition: PartitionRecord) -> dict[str, Any]:
    value: dict[str, Any] = record_to_json(partition)["data"]
    value["state"] = partition_state(partition, image.cluster).value
    value["replica_states"] = {
        str(b): replica_state(partition, b, image.cluster).value for b in partition.replicas
    }
    return value


def _topic_node(image: MetadataImage, topic: TopicImage) -> Directory:
    partitions = topic.partitions

    def child(name: str) -> Node | None:
        if name == "id":
            return Leaf(str(topic.topic_id))
        if name == "name":
            return Leaf(topic.name)
        if name == "namespace":
            return Leaf(topic.namespace)
        if name == "pendingDeletion" and topic.pending_deletion is not None:
            return Leaf(record_to_json(topic.pending_deletion)["data"])
        if name.isdigit() and int(name) < len(partitions):
            return Leaf(_partition_value(image, partitions[int(name)]))
        return None

    def names() -> list[str]:
        extra = ["pendingDeletion"] if topic.pending_deletion is not None else []
        return ["id", "name", "namespace", *extra, *(str(i) for i in range(len(partitions)))]

    return Directory(names, child)


def _topics_by_name(image: MetadataImage) -> Directory:
    def child(name: str) -> Node | None:
        topic = image.topics.get_by_name(name)
        return None if topic is None else _topic_node(image, topic)

    return Directory(lambda: sorted(image.topics.by_name), child)


def _topics_by_id(image: MetadataImage) -> Directory:
    def child(name: str) -> Node | None:
        try:
            topic = image.topics.get(Uuid.parse(name))
        except ValueError:
            return None
        return None if topic is None else _topic_node(image, topic)

    return Directory(lambda: sorted(str(i) for i in image.topics.by_id), child)


def _brokers(image: MetadataImage) -> Directory:
    def child(name: str) -> Node | None:
        broker = image.cluster.get(int(name)) if name.isdigit() else None
        if broker is None:
            return None
        return Leaf(record_to_json(broker)["data"])

    return Directory(lambda: [str(b) for b in sorted(image.cluster.brokers)], child)


def _namespaces(image: MetadataImage) -> Directory:
    def child(name: str) -> Node | None:
        record = image.namespaces.get(name)
        if record is None:
            return None
        return Leaf(
            {
                "id": str(record.namespace_id),
                "name": record.name,
                "topics": image.namespaces.topic_counts.get(name, 0),
                "children": image.namespaces.children(name),
                "configs": dict(
                    sorted(image.configs.get(ConfigResourceType.NAMESPACE, name).items())
                ),
            }
        )

    return Directory(lambda: sorted(image.namespaces.by_name), child)


def _configs(image: MetadataImage) -> Directory:
    def by_type(resource_type: ConfigResourceType) -> Directory:
        def names() -> list[str]:
            return sorted(name for t, name in image.configs.resources if t == resource_type)

        def resource(name: str) -> Node | None:
            values = image.configs.resources.get((resource_type, name))
            if values is None:
                return None
            return _dir({k: functools.partial(Leaf, v) for k, v in sorted(values.items())})

        return Directory(names, resource)

    return _dir({t.name: functools.partial(by_type, t) for t in ConfigResourceType if t.value})


def _acls(image: MetadataImage) -> Directory:
    def child(name: str) -> Node | None:
        try:
            acl = image.acls.get(Uuid.parse(name))
        except ValueError:
            return None
        return None if acl is None else Leaf(record_to_json(acl)["data"])

    # In the order `mlog acls list` shows them: by resource, then principal.
    return Directory(lambda: [str(a.id) for a in image.acls.sorted()], child)


def path_name(name: str) -> str:
    """A name as one path component: '%' and '/' escaped, and the names '.' and '..'."""
    escaped = name.replace("%", "%25").replace("/", "%2F")
    return escaped.replace(".", "%2E") if escaped in (".", "..") else escaped


def _users(image: MetadataImage) -> Directory:
    """Users by name, with each credential's mechanism and iterations: never salt or keys."""

    def child(name: str) -> Node | None:
        user = urllib.parse.unquote(name)
        credentials = [
            {"mechanism": mechanism.mechanism_name, "iterations": credential.iterations}
            for (holder, mechanism), credential in sorted(image.scram.credentials.items())
            if holder == user
        ]
        if not credentials or path_name(user) != name:
            return None
        return Leaf({"name": user, "credentials": credentials})

    return Directory(lambda: [path_name(u) for u in image.scram.users()], child)


def root(image: MetadataImage) -> Directory:
    """The root directory of an image's tree."""
    provenance = image.provenance
    return _dir(
        {
            "provenance": lambda: Leaf(
                {
                    "offset": provenance.offset,
                    "epoch": provenance.epoch,
                    "timestamp": provenance.timestamp,
                }
            ),
            "features": lambda: _dir(
                {k: functools.partial(Leaf, v) for k, v in sorted(image.features.levels.items())}
            ),
            "brokers": lambda: _brokers(image),
            "namespaces": lambda: _namespaces(image),
            "topics": lambda: _dir(
                {"byName": lambda: _topics_by_name(image), "byId": lambda: _topics_by_id(image)}
            ),
            "configs": lambda: _configs(image),
            "acls": lambda: _acls(image),
            "users": lambda: _users(image),
        }
    )


def split_path(path: str) -> list[str]:
    """The components of an absolute or relative path ("" and "." skipped)."""
    return [part for part in path.split("/") if part not in ("", ".")]


def lookup(image: MetadataImage, path: str) -> Node:
    """The node at `path` (absolute, '/'-separated); raises PathError if there is none."""
    node: Node = root(image)
    walked: list[str] = []
    for part in split_path(path):
        if part == "..":
            walked = walked[:-1]
            node = root(image)
            for step in walked:
                found = node.child(step) if isinstance(node, Directory) else None
                node = found if found is not None else node
            continue
        found = node.child(part) if isinstance(node, Directory) else None
        if found is None:
            shown = "/" + "/".join([*walked, part])
            raise PathError(f"{shown} does not exist in the image; try `mlog image show /`")
        node = found
        walked.append(part)
    return node


def walk(node: Node, prefix: str, depth: int | None = None) -> Iterator[tuple[str, Any]]:
    """(path, value) of every leaf under `node` (value None for an empty directory)."""
    if isinstance(node, Leaf):
        yield prefix or "/", node.value
        return
    names = node.list_children()
    if not names:
        yield (prefix or "/") + "/", None
        return
    for name in names:
        child = node.child(name)
        if child is None:
            continue
        path = f"{prefix}/{name}"
        if depth == 0 and isinstance(child, Directory):
            yield path + "/", None
            continue
        yield from walk(child, path, None if depth is None else depth - 1)
