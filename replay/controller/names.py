"""Topic names: Kafka's rules (`Topic.validate`, the collision check) and finding a named topic."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Set

from records.uuids import Uuid
from replay.controller.commands import TopicRef
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import clip
from replay.image import NAMESPACE_SEPARATOR, MetadataImage, TopicImage
from replay.rules import MAX_NAME_LENGTH, NO_TIER_NAMES, topic_name_chars

_COLLISION_LIMIT = 12
"""Names with more '.'/'_' characters than this are checked by a scan instead of variants."""


CLUSTER_METADATA_TOPIC = "__cluster_metadata"
"""KRaft's own log; Kafka refuses to create a topic of this name (ControllerApis)."""

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Kafka 3.9's `Topic.INTERNAL_TOPICS`: answered with `is_internal` set in Metadata."""


def refuse_reserved_name(qualified: str) -> None:
    """Raise INVALID_REQUEST (42), as Kafka's controller does, for `__cluster_metadata`."""
    if qualified == CLUSTER_METADATA_TOPIC:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.",
        )


def is_internal_topic(qualified: str) -> bool:
    """Whether Kafka treats a topic of this (qualified) name as internal."""
    return qualified in INTERNAL_TOPICS


_EMPTY_TIER = NAMESPACE_SEPARATOR * 2


def empty_tier_error(qualified: str) -> ApiError | None:
    """INVALID_TOPIC_EXCEPTION (17) if a qualified topic name has an empty namespace tier.

    `:t` would otherwise split into the default namespace and `t`, so it named the topic `t`
    while ACLs were asked about `:t` (issue #31, finding 3); `org::t` has an empty tier too. A
    name is checked in this form before any authorization or lookup.
    """
    if NAMESPACE_SEPARATOR not in qualified:
        return None
    if not qualified.startswith(NAMESPACE_SEPARATOR) and _EMPTY_TIER not in qualified:
        return None
    return ApiError(
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        f"Topic name {clip(qualified)} is illegal, it has an empty namespace tier; a "
        "qualified name is <namespace>:<topic> with non-empty tiers, e.g. org:apache:orders",
    )


def validate_topic_name(name: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION (17) unless `name` is a legal Kafka topic name."""
    if not name:
        raise ApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty"
        )
    if name in NO_TIER_NAMES:
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise ApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, "
            f"topic name: {clip(name)}",
        )
    if not topic_name_chars(name):
        raise ApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name {clip(name)} is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'",
        )


def unify_collision_chars(name: str) -> str:
    """Kafka's `Topic.unifyCollisionChars`: '.' and '_' map to the same metric name."""
    return name.replace(".", "_")


def colliding_name(
    name: str, exists: Callable[[str], bool], all_names: Callable[[], list[str]]
) -> str | None:
    """An existing topic whose name differs from `name` only in '.' versus '_', if any.

    Kafka refuses such names because '.' and '_' become the same character in metric names.
    Instead of an index, the variants of `name` are looked up (2^k for k such characters);
    beyond `_COLLISION_LIMIT` of them, the names are scanned.
    """
    if "." not in name and "_" not in name:
        return None  # the usual name: two C-level scans, no list
    positions = [i for i, c in enumerate(name) if c in "._"]
    if len(positions) > _COLLISION_LIMIT:
        unified = unify_collision_chars(name)
        return next(
            (n for n in all_names() if n != name and unify_collision_chars(n) == unified), None
        )
    chars = list(name)
    for choice in itertools.product("._", repeat=len(positions)):
        for position, char in zip(positions, choice, strict=True):
            chars[position] = char
        candidate = "".join(chars)
        if candidate != name and exists(candidate):
            return candidate
    return None


def resolve_topic(image: MetadataImage, ref: TopicRef) -> TopicImage:
    """The live topic a reference names; Kafka's errors if there is none or they disagree."""
    if ref.name is not None:
        topic = image.topics.get_by_name(ref.name)
        if topic is None:
            invalid = empty_tier_error(ref.name)
            if invalid is not None:
                raise invalid
            raise ApiError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"This server does not host this topic-partition: topic {clip(ref.name)} "
                "does not exist",
            )
        if ref.topic_id is not None and ref.topic_id != topic.topic_id:
            raise ApiError(
                ErrorCode.INCONSISTENT_TOPIC_ID,
                f"The topic id {ref.topic_id} does not match the topic {clip(ref.name)}, "
                f"whose id is {topic.topic_id}",
            )
        return topic
    if ref.topic_id is None:
        raise ApiError(ErrorCode.INVALID_REQUEST, "name a topic by name or by topic id")
    found = image.topics.get(ref.topic_id)
    if found is None:
        raise ApiError(
            ErrorCode.UNKNOWN_TOPIC_ID,
            f"This server does not host this topic ID: {ref.topic_id}",
        )
    return found


def resolve_unseen_topic(image: MetadataImage, ref: TopicRef, seen: Set[Uuid]) -> TopicImage:
    """`resolve_topic`, refusing a topic in `seen` (one an earlier item of the request took)."""
    topic = resolve_topic(image, ref)
    if topic.topic_id in seen:
        raise ApiError(ErrorCode.INVALID_REQUEST, "Duplicate topic in the request.")
    return topic


def partition_name(topic: TopicImage, partition_id: int) -> str:
    """A partition as errors name it, Kafka's way: `<qualified topic name>-<partition id>`."""
    return f"{topic.qualified_name}-{partition_id}"
