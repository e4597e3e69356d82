"""Topic names at the controller: Kafka's rules, the '.'/'_' collision, finding a named topic."""

from __future__ import annotations

import pytest

from records.model import NamespaceRecord, PartitionRecord, Record, TopicRecord
from records.uuids import Uuid
from replay.controller.commands import TopicRef
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.names import (
    CLUSTER_METADATA_TOPIC,
    colliding_name,
    is_internal_topic,
    partition_name,
    refuse_reserved_name,
    resolve_topic,
    resolve_unseen_topic,
    unify_collision_chars,
    validate_topic_name,
)
from replay.controller.namespaces import validate_namespace_name
from replay.delta import replay_records
from replay.image import EMPTY_IMAGE, EMPTY_PROVENANCE, MetadataImage
from replay.rules import MAX_NAME_LENGTH

T1, T2, NS = Uuid.random(), Uuid.random(), Uuid.random()


def _image() -> MetadataImage:
    records: list[Record] = [
        NamespaceRecord(namespace_id=NS, name="org"),
        TopicRecord(name="orders", topic_id=T1),
        PartitionRecord(partition_id=0, topic_id=T1, replicas=(1,), isr=(1,), leader=1),
        TopicRecord(name="t", topic_id=T2, namespace="org"),
        PartitionRecord(partition_id=0, topic_id=T2, replicas=(1,), isr=(1,), leader=1),
    ]
    return replay_records(EMPTY_IMAGE, records, EMPTY_PROVENANCE)


def _code(error: pytest.ExceptionInfo[ApiError]) -> ErrorCode:
    return error.value.error_code


def test_kafkas_internal_topics_are_internal_and_no_other() -> None:
    assert is_internal_topic("__consumer_offsets") is True
    assert is_internal_topic("__transaction_state") is True
    assert is_internal_topic("orders") is False
    assert is_internal_topic(CLUSTER_METADATA_TOPIC) is False
    assert is_internal_topic("org:__consumer_offsets") is False


def test_the_metadata_topic_name_is_reserved() -> None:
    with pytest.raises(ApiError) as info:
        refuse_reserved_name("__cluster_metadata")
    assert _code(info) == ErrorCode.INVALID_REQUEST
    refuse_reserved_name("__cluster_metadata2")
    refuse_reserved_name("org:__cluster_metadata")


def test_a_name_of_the_longest_length_is_legal_and_one_more_is_not() -> None:
    validate_topic_name("a" * MAX_NAME_LENGTH)
    with pytest.raises(ApiError) as info:
        validate_topic_name("a" * (MAX_NAME_LENGTH + 1))
    assert _code(info) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert f"longer than {MAX_NAME_LENGTH}" in str(info.value)


@pytest.mark.parametrize("bad", ["", ".", "..", "a b", "a:b", "é", "a\n"])
def test_illegal_names(bad: str) -> None:
    with pytest.raises(ApiError) as info:
        validate_topic_name(bad)
    assert _code(info) == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_dots_and_underscores_unify() -> None:
    assert unify_collision_chars("a.b_c.") == "a_b_c_"
    assert unify_collision_chars("abc") == "abc"


@pytest.mark.parametrize("k", [1, 3, 12, 13, 20])
def test_a_collision_is_found_by_variants_or_by_a_scan(k: int) -> None:
    """With k '.'/'_' characters, whichever way is used, the colliding name is found."""
    name = "x" + "._" * (k // 2) + "." * (k % 2)
    other = name.replace(".", "_", 1)
    names = ["unrelated", "x" + "-" * k, name, other]
    assert colliding_name(name, lambda n: n in names, lambda: list(names)) == other
    assert colliding_name(other, lambda n: n in names, lambda: list(names)) == name
    # The name itself is never its own collision; without another, there is none.
    alone = ["unrelated", name]
    assert colliding_name(name, lambda n: n in alone, lambda: list(alone)) is None


def test_a_long_name_is_checked_by_a_scan_not_by_2_to_the_k_lookups() -> None:
    name = "a" + "." * 13
    lookups: list[str] = []

    def exists(candidate: str) -> bool:
        lookups.append(candidate)
        return False

    assert colliding_name(name, exists, lambda: ["b", name]) is None
    assert lookups == []
    twelve = "a" + "." * 12
    scans: list[int] = []

    def all_names() -> list[str]:
        scans.append(1)
        return []

    assert colliding_name(twelve, exists, all_names) is None
    assert scans == [] and len(lookups) == 2**12 - 1


def test_a_name_without_dots_or_underscores_collides_with_nothing() -> None:
    assert colliding_name("abc", lambda n: True, lambda: ["abc"]) is None


def test_resolve_by_name_by_id_or_both() -> None:
    image = _image()
    assert resolve_topic(image, TopicRef(name="orders")).topic_id == T1
    assert resolve_topic(image, TopicRef(topic_id=T1)).name == "orders"
    assert resolve_topic(image, TopicRef(name="org:t", topic_id=T2)).topic_id == T2
    with pytest.raises(ApiError) as info:
        resolve_topic(image, TopicRef(name="orders", topic_id=T2))
    assert _code(info) == ErrorCode.INCONSISTENT_TOPIC_ID
    with pytest.raises(ApiError) as info:
        resolve_topic(image, TopicRef(name="nope"))
    assert _code(info) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(ApiError) as info:
        resolve_topic(image, TopicRef(topic_id=Uuid.random()))
    assert _code(info) == ErrorCode.UNKNOWN_TOPIC_ID
    with pytest.raises(ApiError) as info:
        resolve_topic(image, TopicRef())
    assert _code(info) == ErrorCode.INVALID_REQUEST


def test_a_topic_taken_earlier_in_a_request_is_a_duplicate() -> None:
    image = _image()
    assert resolve_unseen_topic(image, TopicRef(name="orders"), {T2}).topic_id == T1
    with pytest.raises(ApiError) as info:
        resolve_unseen_topic(image, TopicRef(topic_id=T1), {T1})
    assert _code(info) == ErrorCode.INVALID_REQUEST


def test_partitions_are_named_by_qualified_topic_name_and_index() -> None:
    image = _image()
    assert partition_name(resolve_topic(image, TopicRef(topic_id=T1)), 0) == "orders-0"
    assert partition_name(resolve_topic(image, TopicRef(topic_id=T2)), 7) == "org:t-7"


def test_a_namespace_name_of_the_longest_length_is_legal_and_one_more_is_not() -> None:
    longest = ":".join(["a" * 100, "b" * 100, "c" * (MAX_NAME_LENGTH - 202)])
    assert len(longest) == MAX_NAME_LENGTH
    validate_namespace_name(longest)
    with pytest.raises(ApiError) as info:
        validate_namespace_name(longest + "c")
    assert _code(info) == ErrorCode.INVALID_REQUEST
    assert f"is {MAX_NAME_LENGTH + 1} characters long; the limit is {MAX_NAME_LENGTH}" in str(
        info.value
    )
