"""Namespaces: name rules and the commands that create, list and delete them and move topics.

A namespace is a name of tiers separated by ':' (`org:apache:kafka`); the default namespace is
"" and always exists. A topic's qualified name is `<namespace>:<topic>`. These functions are the
namespace half of the controller: they validate against an image and return the records to
append, and `Controller` exposes them as methods. Namespace ACLs will check the principal here,
before any record is produced.
"""

from __future__ import annotations

from collections.abc import Callable

from records.model import (
    MoveTopicRecord,
    NamespaceRecord,
    Record,
    RemoveNamespaceRecord,
    RemoveTopicRecord,
)
from records.uuids import Uuid
from replay.controller.commands import (
    ControllerResult,
    CreateNamespace,
    CreateNamespaceResult,
    DeleteNamespace,
    DeleteNamespaceResult,
    MoveTopic,
    MoveTopicResult,
    NamespaceInfo,
)
from replay.controller.config_defs import cluster_bool
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.names import colliding_name, refuse_reserved_name, resolve_topic
from replay.controller.states import check_change
from replay.image import NAMESPACE_SEPARATOR, MetadataImage, TopicImage, qualified_name
from replay.rules import MAX_NAME_LENGTH, NO_TIER_NAMES, namespace_tier_chars


class InvalidNamespaceError(ApiError):
    """A namespace name is malformed or names no namespace (INVALID_REQUEST, 42, on the wire)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_REQUEST, message)


def validate_namespace_name(name: str) -> None:
    """Raise InvalidNamespaceError unless `name` is a well-formed namespace ("" is the default)."""
    if name == "":
        return
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidNamespaceError(
            f"Namespace {name[:40]!r}... is {len(name)} characters long; the limit is "
            f"{MAX_NAME_LENGTH}"
        )
    for tier in name.split(NAMESPACE_SEPARATOR):
        if not tier:
            raise InvalidNamespaceError(
                f"Namespace {name!r} has an empty tier; separate non-empty tiers with single "
                "':', e.g. org:apache:kafka"
            )
        if tier in NO_TIER_NAMES:
            raise InvalidNamespaceError(f'Namespace {name!r} has a tier "{tier}"; rename it')
        if not namespace_tier_chars(tier):
            raise InvalidNamespaceError(
                f"Namespace {name!r} is illegal: tier {tier!r} contains a character other than "
                "ASCII alphanumerics, '.' and '-'"
            )


def require_namespace(image: MetadataImage, name: str) -> None:
    """Raise InvalidNamespaceError unless `name` is well formed and exists."""
    validate_namespace_name(name)
    if not image.namespaces.exists(name):
        raise InvalidNamespaceError(
            f"Namespace {name!r} does not exist; create it first with "
            f"`mlog namespaces create --namespace {name}`"
        )


def _parent(name: str) -> str:
    return name.rpartition(NAMESPACE_SEPARATOR)[0]


def create_namespace(
    image: MetadataImage, request: CreateNamespace, new_id: Callable[[], Uuid]
) -> ControllerResult[CreateNamespaceResult]:
    """NamespaceRecords for `request.name` and every missing tier above it, parents first."""
    name = request.name
    validate_namespace_name(name)
    if name == "":
        raise InvalidNamespaceError('The default namespace "" always exists; name another one')
    if image.namespaces.exists(name):
        raise InvalidNamespaceError(f"Namespace {name!r} already exists")
    tiers = name.split(NAMESPACE_SEPARATOR)
    records: list[Record] = []
    parent_id: Uuid | None = None
    for depth in range(1, len(tiers) + 1):
        tier_name = NAMESPACE_SEPARATOR.join(tiers[:depth])
        existing = image.namespaces.get(tier_name)
        if existing is not None:
            parent_id = existing.namespace_id
            continue
        namespace_id = new_id()
        records.append(
            NamespaceRecord(namespace_id=namespace_id, name=tier_name, parent_id=parent_id)
        )
        parent_id = namespace_id
    created = tuple(r.name for r in records if isinstance(r, NamespaceRecord))
    assert parent_id is not None  # the loop ran at least once: name has a tier
    return ControllerResult(
        records=tuple(records),
        response=CreateNamespaceResult(name=name, namespace_id=parent_id, created=created),
    )


def delete_namespace(
    image: MetadataImage, request: DeleteNamespace
) -> ControllerResult[DeleteNamespaceResult]:
    """The records deleting a namespace: its topics, then the namespaces, deepest first.

    Refused if the namespace has children and `recursive` is not set, or if it holds topics
    and `delete.topic.enable` is false.
    """
    name = request.name
    validate_namespace_name(name)
    if name == "":
        raise InvalidNamespaceError(
            'The default namespace "" cannot be deleted; delete its topics one by one'
        )
    if not image.namespaces.exists(name):
        # Not require_namespace: suggesting to create what is being deleted reads as a joke.
        raise InvalidNamespaceError(
            f"Namespace {name!r} does not exist, so there is nothing to delete; "
            "`mlog namespaces list --recursive` shows the namespaces"
        )
    children = image.namespaces.children(name)
    if children and not request.recursive:
        raise InvalidNamespaceError(
            f"Namespace {name!r} has child namespaces: {', '.join(children)}; delete them "
            "first, or delete the whole subtree with --recursive"
        )
    subtree = [name, *image.namespaces.descendants(name)]
    inside = set(subtree)
    topics = [t for t in image.topics.sorted() if t.namespace in inside]
    if topics and not cluster_bool(image.configs.cluster(), "delete.topic.enable"):
        raise ApiError(
            ErrorCode.TOPIC_DELETION_DISABLED,
            f"Namespace {name!r} holds {len(topics)} topic(s) and topic deletion is disabled; "
            "set delete.topic.enable=true (`mlog configs alter --cluster --set "
            "delete.topic.enable=true`)",
        )
    records: list[Record] = []
    for topic in topics:
        _check_topic_removal(image, topic)
        records.append(RemoveTopicRecord(topic_id=topic.topic_id))
    deepest_first = sorted(subtree, key=lambda n: (-n.count(NAMESPACE_SEPARATOR), n))
    for namespace in deepest_first:
        record = image.namespaces.get(namespace)
        assert record is not None  # listed from the image itself
        records.append(RemoveNamespaceRecord(namespace_id=record.namespace_id))
    return ControllerResult(
        records=tuple(records),
        response=DeleteNamespaceResult(
            name=name,
            namespaces=tuple(deepest_first),
            topics=tuple(t.qualified_name for t in topics),
        ),
    )


def _check_topic_removal(image: MetadataImage, topic: TopicImage) -> None:
    for partition in topic.partitions:
        check_change(
            f"{topic.qualified_name}-{partition.partition_id}",
            partition,
            None,
            image.cluster,
            image.cluster,
        )


def move_topic(image: MetadataImage, request: MoveTopic) -> ControllerResult[MoveTopicResult]:
    """A MoveTopicRecord taking `request.topic` to another namespace."""
    topic = resolve_topic(image, request.topic)
    target = request.to_namespace
    require_namespace(image, target)
    if target == topic.namespace:
        raise InvalidNamespaceError(
            f"Topic {topic.qualified_name!r} is already in namespace {target!r}"
        )
    new_name = qualified_name(target, topic.name)
    refuse_reserved_name(new_name)
    if image.topics.get_by_name(new_name) is not None:
        raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{new_name}' already exists.")
    collision = colliding_name(
        new_name, lambda n: n in image.topics.by_name, lambda: list(image.topics.by_name)
    )
    if collision is not None:
        raise ApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic '{new_name}' collides with existing topic: {collision}",
        )
    record = MoveTopicRecord(topic_id=topic.topic_id, namespace=target)
    return ControllerResult(
        records=(record,),
        response=MoveTopicResult(
            topic_id=topic.topic_id, from_name=topic.qualified_name, to_name=new_name
        ),
    )


def list_namespaces(image: MetadataImage, parent: str, *, recursive: bool) -> list[NamespaceInfo]:
    """The namespaces directly below `parent` ("" = top level), or all below it if `recursive`."""
    require_namespace(image, parent)
    namespaces = image.namespaces
    names = namespaces.descendants(parent) if recursive else namespaces.children(parent)
    totals = _subtree_topic_counts(image)
    child_counts: dict[str, int] = {}
    for other in namespaces.by_name:
        parent_name = _parent(other)
        child_counts[parent_name] = child_counts.get(parent_name, 0) + 1
    infos = []
    for name in names:
        record = namespaces.get(name)
        assert record is not None  # listed from the image itself
        infos.append(
            NamespaceInfo(
                name=name,
                namespace_id=record.namespace_id,
                topics=namespaces.topic_counts.get(name, 0),
                total_topics=totals.get(name, 0),
                children=child_counts.get(name, 0),
            )
        )
    return infos


def _subtree_topic_counts(image: MetadataImage) -> dict[str, int]:
    """Topics in each namespace and below it, from the per-namespace counts."""
    totals: dict[str, int] = {}
    for namespace, count in image.namespaces.topic_counts.items():
        name = namespace
        while name:
            totals[name] = totals.get(name, 0) + count
            name = _parent(name)
    return totals
