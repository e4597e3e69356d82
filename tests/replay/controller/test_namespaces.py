"""Namespaces: create with missing tiers, list, delete (refused and recursive), topic moves,
config inheritance, their records and replay, and the CLI."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from api.service.service import MetadataService
from metadata_log import MetadataLog
from metadata_log.reader import LogReader
from records.model import (
    ConfigRecord,
    ConfigResourceType,
    DeleteTopicPartitionsRecord,
    Mode,
    MoveTopicRecord,
    NamespaceRecord,
    PartitionChangeRecord,
    PartitionRecord,
    PurgeTopicPartitionsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveNamespaceRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from records.uuids import Uuid
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    ConfigResource,
    ControllerResult,
    CreatableTopic,
    CreateNamespace,
    DeleteNamespace,
    MoveTopic,
    RegisterBroker,
    TopicRef,
)
from replay.controller.config_defs import ConfigSource
from replay.controller.controller import Controller, ControllerOptions
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.namespaces import InvalidNamespaceError
from replay.delta import replay_records
from replay.errors import DuplicateTopicError, NamespaceReplayError, PendingDeletionError
from replay.image import EMPTY_IMAGE, EMPTY_PROVENANCE, MetadataImage, Provenance
from replay.loader import load_image
from tests.support.cli import as_json, error, ok

T = TypeVar("T")


# ---------------------------------------------------------------------- helpers


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MetadataService]:
    controller = Controller(options=ControllerOptions(fixed_start_index=0), rng=random.Random(1))
    with MetadataService.open(tmp_path / "log", controller=controller) as svc:
        for broker_id in (1, 2, 3):
            request = RegisterBroker(broker_id=broker_id)
            svc.execute(functools.partial(svc.controller.register_broker, request=request))
        yield svc


def run(svc: MetadataService, command: Callable[[MetadataImage], ControllerResult[T]]) -> T:
    return svc.execute(command)


def refused(
    svc: MetadataService, command: Callable[[MetadataImage], ControllerResult[Any]]
) -> tuple[ErrorCode, str]:
    """The error code and message of a refused command, checking that nothing was appended."""
    before = svc.log.end_offset
    image = svc.image
    with pytest.raises(ApiError) as info:
        svc.execute(command)
    assert svc.log.end_offset == before
    assert svc.image is image
    return info.value.error_code, info.value.message


def new_namespace(svc: MetadataService, name: str) -> tuple[str, ...]:
    result = run(
        svc, lambda image: svc.controller.create_namespace(image, CreateNamespace(name=name))
    )
    return result.created


def new_topic(svc: MetadataService, name: str, partitions: int = 2, **configs: str) -> Uuid:
    request = CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=2,
        configs=tuple((k.replace("_", "."), v) for k, v in configs.items()),
    )
    (result,) = run(svc, lambda image: svc.controller.create_topics(image, [request]))
    assert result.outcome.ok, result.outcome
    return result.topic_id


def set_configs(
    svc: MetadataService, kind: ConfigResourceType, name: str, **values: str | None
) -> None:
    ops = [
        AlterConfig(name=k.replace("_", "."), op=AlterConfigOp.SET, value=v)
        if v is not None
        else AlterConfig(name=k.replace("_", "."), op=AlterConfigOp.DELETE)
        for k, v in values.items()
    ]
    resource = ConfigResource(type=kind, name=name)
    (result,) = run(
        svc, lambda image: svc.controller.incremental_alter_configs(image, [(resource, ops)])
    )
    assert result.outcome.ok, result.outcome


def described(svc: MetadataService, kind: ConfigResourceType, name: str) -> dict[str, Any]:
    configs = svc.controller.describe_configs(svc.image, ConfigResource(type=kind, name=name))
    return {c.name: (c.value, c.source, c.source_name) for c in configs}


def last_batch(svc: MetadataService, before: int) -> list[Record]:
    return [e.record for e in svc.log.read(gt=before - 1)]


# ---------------------------------------------------------------------- create


def test_create_makes_every_missing_tier_in_one_batch(service: MetadataService) -> None:
    before = service.log.end_offset
    assert new_namespace(service, "org:apache:kafka") == ("org", "org:apache", "org:apache:kafka")
    records = last_batch(service, before)
    assert [type(r) for r in records] == [NamespaceRecord] * 3
    assert all(isinstance(r, NamespaceRecord) for r in records)
    # One atomic batch: one append, so every entry carries the same timestamp and epoch.
    entries = list(service.log.read(gt=before - 1))
    assert len({(e.timestamp, e.epoch) for e in entries}) == 1
    org, apache, kafka = (service.image.namespaces.get(n) for n in records_names(records))
    assert org is not None and apache is not None and kafka is not None
    assert org.parent_id is None
    assert apache.parent_id == org.namespace_id and kafka.parent_id == apache.namespace_id
    # Only the missing tiers are created the next time.
    assert new_namespace(service, "org:apache:spark") == ("org:apache:spark",)
    assert new_namespace(service, "org:eclipse") == ("org:eclipse",)


def records_names(records: list[Record]) -> list[str]:
    return [r.name for r in records if isinstance(r, NamespaceRecord)]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", 'The default namespace "" always exists; name another one'),
        (
            "a::b",
            "Namespace 'a::b' has an empty tier; separate non-empty tiers with single ':', "
            "e.g. org:apache:kafka",
        ),
        (
            ":a",
            "Namespace ':a' has an empty tier; separate non-empty tiers with single ':', "
            "e.g. org:apache:kafka",
        ),
        (
            "a:",
            "Namespace 'a:' has an empty tier; separate non-empty tiers with single ':', "
            "e.g. org:apache:kafka",
        ),
        (
            "org:my_team",
            "Namespace 'org:my_team' is illegal: tier 'my_team' contains a character other than "
            "ASCII alphanumerics, '.' and '-'",
        ),
        (
            "a b",
            "Namespace 'a b' is illegal: tier 'a b' contains a character other than ASCII "
            "alphanumerics, '.' and '-'",
        ),
        ("org:..", "Namespace 'org:..' has a tier \"..\"; rename it"),
        ("x" * 250, f"Namespace {'x' * 40!r}... is 250 characters long; the limit is 249"),
    ],
)
def test_malformed_namespaces_are_invalid_request(
    service: MetadataService, name: str, message: str
) -> None:
    code, text = refused(
        service,
        lambda image: service.controller.create_namespace(image, CreateNamespace(name=name)),
    )
    assert (code, text) == (ErrorCode.INVALID_REQUEST, message)


def test_creating_an_existing_namespace_is_refused(service: MetadataService) -> None:
    new_namespace(service, "org:apache")
    for name in ("org", "org:apache"):
        code, text = refused(
            service,
            functools.partial(
                service.controller.create_namespace, request=CreateNamespace(name=name)
            ),
        )
        assert (code, text) == (ErrorCode.INVALID_REQUEST, f"Namespace {name!r} already exists")


def test_invalid_namespace_error_is_invalid_request_on_the_wire() -> None:
    error = InvalidNamespaceError("Namespace 'x' does not exist")
    assert isinstance(error, ApiError)
    assert error.error_code == ErrorCode.INVALID_REQUEST
    assert int(error.error_code) == 42
    assert error.message == "Namespace 'x' does not exist"


def test_a_topic_in_a_missing_namespace_is_refused_without_auto_creation(
    service: MetadataService,
) -> None:
    before = service.log.end_offset
    (result,) = run(
        service,
        lambda image: service.controller.create_topics(image, [CreatableTopic(name="org:t")]),
    )
    assert result.outcome.error_code == ErrorCode.INVALID_REQUEST
    assert result.outcome.error_message == (
        "Namespace 'org' does not exist; create it first with "
        "`mlog namespaces create --namespace org`"
    )
    assert service.log.end_offset == before
    assert not service.image.namespaces.by_name


# ---------------------------------------------------------------------- topics in namespaces


def test_same_topic_name_in_two_namespaces_has_two_ids(service: MetadataService) -> None:
    new_namespace(service, "org:apache")
    new_namespace(service, "org:eclipse")
    ids = [
        new_topic(service, name) for name in ("orders", "org:apache:orders", "org:eclipse:orders")
    ]
    assert len(set(ids)) == 3
    topics = service.image.topics
    for qualified, topic_id in zip(
        ("orders", "org:apache:orders", "org:eclipse:orders"), ids, strict=True
    ):
        topic = topics.get_by_name(qualified)
        assert topic is not None and topic.topic_id == topic_id and topic.name == "orders"
    apache = topics.get_by_name("org:apache:orders")
    assert apache is not None and apache.namespace == "org:apache"
    # A second topic with a taken qualified name is refused; the others are unaffected.
    (again,) = run(
        service,
        lambda image: service.controller.create_topics(
            image, [CreatableTopic(name="org:apache:orders")]
        ),
    )
    assert again.outcome.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert again.outcome.error_message == "Topic 'org:apache:orders' already exists."
    # Deleting one leaves the namesakes alone.
    (deleted,) = run(
        service,
        lambda image: service.controller.delete_topics(image, [TopicRef(name="org:apache:orders")]),
    )
    assert deleted.outcome.ok
    assert topics is not service.image.topics
    assert service.image.topics.get_by_name("orders") is not None
    assert service.image.topics.get_by_name("org:eclipse:orders") is not None
    assert service.image.namespaces.topic_counts.get("org:apache") is None


# ---------------------------------------------------------------------- list


def test_list_children_or_recursive_with_topic_counts(service: MetadataService) -> None:
    for name in ("org:apache:kafka", "org:eclipse", "com"):
        new_namespace(service, name)
    new_topic(service, "org:apache:a")
    new_topic(service, "org:apache:b")
    new_topic(service, "org:apache:kafka:c")
    new_topic(service, "org:d")
    top = Controller.list_namespaces(service.image)
    assert [(i.name, i.topics, i.total_topics, i.children) for i in top] == [
        ("com", 0, 0, 0),
        ("org", 1, 4, 2),
    ]
    under = Controller.list_namespaces(service.image, "org")
    assert [i.name for i in under] == ["org:apache", "org:eclipse"]
    assert [(i.topics, i.total_topics) for i in under] == [(2, 3), (0, 0)]
    everything = Controller.list_namespaces(service.image, "org", recursive=True)
    assert [i.name for i in everything] == ["org:apache", "org:apache:kafka", "org:eclipse"]
    assert [i.name for i in Controller.list_namespaces(service.image, recursive=True)] == [
        "com",
        "org",
        "org:apache",
        "org:apache:kafka",
        "org:eclipse",
    ]
    with pytest.raises(InvalidNamespaceError) as info:
        Controller.list_namespaces(service.image, "nope")
    assert info.value.message == (
        "Namespace 'nope' does not exist; create it first with "
        "`mlog namespaces create --namespace nope`"
    )


# ---------------------------------------------------------------------- delete


def test_delete_removes_the_namespace_its_topics_and_their_configs(
    service: MetadataService,
) -> None:
    new_namespace(service, "org:apache")
    kept = new_topic(service, "org:kept")
    gone = new_topic(service, "org:apache:gone", retention_ms="1000")
    set_configs(service, ConfigResourceType.NAMESPACE, "org:apache", cleanup_policy="compact")
    before = service.log.end_offset
    result = run(
        service,
        lambda image: service.controller.delete_namespace(
            image, DeleteNamespace(name="org:apache")
        ),
    )
    assert result.namespaces == ("org:apache",)
    assert result.topics == ("org:apache:gone",)
    assert service.image.namespaces.get("org") is not None
    records = last_batch(service, before)
    assert records[0] == RemoveTopicRecord(topic_id=gone)
    assert isinstance(records[1], RemoveNamespaceRecord)
    assert len(records) == 2
    image = service.image
    assert image.namespaces.get("org:apache") is None
    assert image.topics.get(gone) is None and image.topics.get(kept) is not None
    assert not image.configs.get(ConfigResourceType.TOPIC, "org:apache:gone")
    assert not image.configs.get(ConfigResourceType.NAMESPACE, "org:apache")
    # Created again, the namespace starts without the old configs.
    new_namespace(service, "org:apache")
    assert not service.image.configs.get(ConfigResourceType.NAMESPACE, "org:apache")


def test_delete_with_children_is_refused_and_lists_them(service: MetadataService) -> None:
    for name in ("org:apache:kafka", "org:eclipse"):
        new_namespace(service, name)
    new_topic(service, "org:t")
    code, text = refused(
        service,
        lambda image: service.controller.delete_namespace(image, DeleteNamespace(name="org")),
    )
    assert code == ErrorCode.INVALID_REQUEST
    assert text == (
        "Namespace 'org' has child namespaces: org:apache, org:eclipse; delete them first, or "
        "delete the whole subtree with --recursive"
    )
    assert service.image.topics.get_by_name("org:t") is not None


def test_recursive_delete_removes_the_subtree_in_one_batch(service: MetadataService) -> None:
    for name in ("org:apache:kafka", "org:eclipse", "orgs"):
        new_namespace(service, name)
    for topic in ("org:a", "org:apache:b", "org:apache:kafka:c", "orgs:d", "e"):
        new_topic(service, topic)
    before = service.log.end_offset
    result = run(
        service,
        lambda image: service.controller.delete_namespace(
            image, DeleteNamespace(name="org", recursive=True)
        ),
    )
    assert result.namespaces == ("org:apache:kafka", "org:apache", "org:eclipse", "org")
    assert result.topics == ("org:a", "org:apache:b", "org:apache:kafka:c")
    entries = list(service.log.read(gt=before - 1))
    assert len(entries) == 7
    assert len({e.timestamp for e in entries}) == 1
    assert [type(e.record) for e in entries] == [RemoveTopicRecord] * 3 + [
        RemoveNamespaceRecord
    ] * 4
    image = service.image
    assert sorted(image.namespaces.by_name) == ["orgs"]
    assert sorted(image.topics.by_name) == ["e", "orgs:d"]


@pytest.mark.parametrize(
    ("request_", "code", "message"),
    [
        (
            DeleteNamespace(name=""),
            ErrorCode.INVALID_REQUEST,
            'The default namespace "" cannot be deleted; delete its topics one by one',
        ),
        (
            DeleteNamespace(name="nope", recursive=True),
            ErrorCode.INVALID_REQUEST,
            "Namespace 'nope' does not exist, so there is nothing to delete; "
            "`mlog namespaces list --recursive` shows the namespaces",
        ),
        (
            DeleteNamespace(name="a::b"),
            ErrorCode.INVALID_REQUEST,
            "Namespace 'a::b' has an empty tier; separate non-empty tiers with single ':', "
            "e.g. org:apache:kafka",
        ),
    ],
)
def test_delete_errors(
    service: MetadataService, request_: DeleteNamespace, code: ErrorCode, message: str
) -> None:
    assert refused(service, lambda image: service.controller.delete_namespace(image, request_)) == (
        code,
        message,
    )


def test_delete_of_a_namespace_with_topics_obeys_delete_topic_enable(
    service: MetadataService,
) -> None:
    new_namespace(service, "org:empty")
    new_topic(service, "org:t")
    set_configs(service, ConfigResourceType.BROKER, "", delete_topic_enable="false")
    code, text = refused(
        service,
        lambda image: service.controller.delete_namespace(
            image, DeleteNamespace(name="org", recursive=True)
        ),
    )
    assert code == ErrorCode.TOPIC_DELETION_DISABLED
    assert text == (
        "Namespace 'org' holds 1 topic(s) and topic deletion is disabled; set "
        "delete.topic.enable=true (`mlog configs alter --cluster --set delete.topic.enable=true`)"
    )
    # A namespace without topics can still go.
    run(
        service,
        lambda image: service.controller.delete_namespace(image, DeleteNamespace(name="org:empty")),
    )
    assert service.image.namespaces.get("org:empty") is None


# ---------------------------------------------------------------------- move


def test_move_keeps_the_id_partitions_and_configs(service: MetadataService) -> None:
    new_namespace(service, "org:apache")
    new_namespace(service, "org:eclipse")
    topic_id = new_topic(service, "org:apache:orders", partitions=3, retention_ms="1000")
    before_topic = service.image.topics.get(topic_id)
    assert before_topic is not None
    before = service.log.end_offset
    result = run(
        service,
        lambda image: service.controller.move_topic(
            image,
            MoveTopic(topic=TopicRef(name="org:apache:orders"), to_namespace="org:eclipse"),
        ),
    )
    assert (result.topic_id, result.from_name, result.to_name) == (
        topic_id,
        "org:apache:orders",
        "org:eclipse:orders",
    )
    assert last_batch(service, before) == [
        MoveTopicRecord(topic_id=topic_id, namespace="org:eclipse")
    ]
    image = service.image
    moved = image.topics.get_by_name("org:eclipse:orders")
    assert moved is not None and moved.topic_id == topic_id
    assert moved.namespace == "org:eclipse" and moved.partitions == before_topic.partitions
    assert image.topics.get_by_name("org:apache:orders") is None
    assert dict(image.configs.get(ConfigResourceType.TOPIC, "org:eclipse:orders")) == {
        "retention.ms": "1000"
    }
    assert not image.configs.get(ConfigResourceType.TOPIC, "org:apache:orders")
    assert image.namespaces.topic_counts.get("org:apache") is None
    assert image.namespaces.topic_counts.get("org:eclipse") == 1
    # And back to the default namespace, by id this time.
    run(
        service,
        lambda image: service.controller.move_topic(
            image, MoveTopic(topic=TopicRef(topic_id=topic_id), to_namespace="")
        ),
    )
    home = service.image.topics.get_by_name("orders")
    assert home is not None and home.topic_id == topic_id and home.namespace == ""
    assert described(service, ConfigResourceType.TOPIC, "orders")["retention.ms"] == (
        "1000",
        ConfigSource.TOPIC_CONFIG,
        "",
    )


@pytest.mark.parametrize(
    ("topic", "target", "code", "message"),
    [
        ("a:t", "b", ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'b:t' already exists."),
        (
            "a:t",
            "nope",
            ErrorCode.INVALID_REQUEST,
            "Namespace 'nope' does not exist; create it first with "
            "`mlog namespaces create --namespace nope`",
        ),
        ("a:t", "a", ErrorCode.INVALID_REQUEST, "Topic 'a:t' is already in namespace 'a'"),
        (
            "a:t",
            "b::c",
            ErrorCode.INVALID_REQUEST,
            "Namespace 'b::c' has an empty tier; separate non-empty tiers with single ':', "
            "e.g. org:apache:kafka",
        ),
        (
            "a:my.topic",
            "b",
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            "Topic 'b:my.topic' collides with existing topic: b:my_topic",
        ),
        (
            "a:missing",
            "b",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "This server does not host this topic-partition: topic 'a:missing' does not exist",
        ),
        (
            "a:__cluster_metadata",
            "",
            ErrorCode.INVALID_REQUEST,
            "Creation of internal topic __cluster_metadata is prohibited.",
        ),
    ],
)
def test_move_errors(
    service: MetadataService, topic: str, target: str, code: ErrorCode, message: str
) -> None:
    for namespace in ("a", "b"):
        new_namespace(service, namespace)
    for name in ("a:t", "b:t", "a:my.topic", "b:my_topic", "a:__cluster_metadata"):
        new_topic(service, name)
    request = MoveTopic(topic=TopicRef(name=topic), to_namespace=target)
    assert refused(service, lambda image: service.controller.move_topic(image, request)) == (
        code,
        message,
    )


def test_restart_after_moves_and_deletes_gives_the_same_image(tmp_path: Path) -> None:
    with MetadataService.open(tmp_path / "log") as svc:
        svc.execute(
            lambda image: svc.controller.register_broker(image, RegisterBroker(broker_id=1))
        )
        new_namespace(svc, "org:apache")
        new_namespace(svc, "org:eclipse")
        topic_id = new_topic_rf1(svc, "org:apache:t")
        set_configs(svc, ConfigResourceType.TOPIC, "org:apache:t", retention_ms="5")
        set_configs(svc, ConfigResourceType.NAMESPACE, "org", retention_ms="7")
        run(
            svc,
            lambda image: svc.controller.move_topic(
                image, MoveTopic(topic=TopicRef(topic_id=topic_id), to_namespace="org:eclipse")
            ),
        )
        run(
            svc,
            lambda image: svc.controller.delete_namespace(
                image, DeleteNamespace(name="org:apache")
            ),
        )
        image = svc.image
    with MetadataService.open(tmp_path / "log") as again:
        assert again.image == image
        assert list(again.image.write()) == list(image.write())
        assert dict(again.image.configs.get(ConfigResourceType.TOPIC, "org:eclipse:t")) == {
            "retention.ms": "5"
        }


def new_topic_rf1(svc: MetadataService, name: str) -> Uuid:
    request = CreatableTopic(name=name, num_partitions=1, replication_factor=1)
    (result,) = run(svc, lambda image: svc.controller.create_topics(image, [request]))
    assert result.outcome.ok
    return result.topic_id


# ---------------------------------------------------------------------- configs


def test_namespace_configs_are_inherited_unless_overridden(service: MetadataService) -> None:
    new_namespace(service, "org:apache:kafka")
    new_topic(service, "org:apache:kafka:t", retention_ms="111")
    new_topic(service, "plain")
    set_configs(
        service, ConfigResourceType.BROKER, "", log_retention_hours="2", log_segment_bytes="2000000"
    )
    set_configs(
        service,
        ConfigResourceType.NAMESPACE,
        "org",
        retention_ms="1000",
        cleanup_policy="compact",
        max_message_bytes="5000",
    )
    set_configs(service, ConfigResourceType.NAMESPACE, "org:apache", cleanup_policy="delete")
    topic = described(service, ConfigResourceType.TOPIC, "org:apache:kafka:t")
    assert topic["retention.ms"] == ("111", ConfigSource.TOPIC_CONFIG, "")
    assert topic["cleanup.policy"] == ("delete", ConfigSource.NAMESPACE_CONFIG, "org:apache")
    assert topic["max.message.bytes"] == ("5000", ConfigSource.NAMESPACE_CONFIG, "org")
    assert topic["segment.bytes"] == (
        "2000000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        "log.segment.bytes",
    )
    assert topic["min.insync.replicas"] == ("1", ConfigSource.DEFAULT_CONFIG, "")
    # Remove the topic override: the nearest namespace value shows through.
    set_configs(service, ConfigResourceType.TOPIC, "org:apache:kafka:t", retention_ms=None)
    topic = described(service, ConfigResourceType.TOPIC, "org:apache:kafka:t")
    assert topic["retention.ms"] == ("1000", ConfigSource.NAMESPACE_CONFIG, "org")
    # Remove the nearer namespace value: the outer one shows through.
    set_configs(service, ConfigResourceType.NAMESPACE, "org:apache", cleanup_policy=None)
    topic = described(service, ConfigResourceType.TOPIC, "org:apache:kafka:t")
    assert topic["cleanup.policy"] == ("compact", ConfigSource.NAMESPACE_CONFIG, "org")
    # Topics outside the namespace are not affected.
    plain = described(service, ConfigResourceType.TOPIC, "plain")
    assert plain["retention.ms"] == (
        str(2 * 3_600_000),
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        "log.retention.hours",
    )
    assert plain["cleanup.policy"] == ("delete", ConfigSource.DEFAULT_CONFIG, "")
    # A namespace describes with its own and inherited values.
    ns = described(service, ConfigResourceType.NAMESPACE, "org:apache")
    assert ns["cleanup.policy"] == ("compact", ConfigSource.NAMESPACE_CONFIG, "org")
    set_configs(service, ConfigResourceType.NAMESPACE, "org:apache", cleanup_policy="delete")
    ns = described(service, ConfigResourceType.NAMESPACE, "org:apache")
    assert ns["cleanup.policy"] == ("delete", ConfigSource.NAMESPACE_CONFIG, "org:apache")


def test_a_created_topic_reports_inherited_configs(service: MetadataService) -> None:
    new_namespace(service, "org")
    set_configs(service, ConfigResourceType.NAMESPACE, "org", retention_ms="42")
    (result,) = run(
        service,
        lambda image: service.controller.create_topics(
            image, [CreatableTopic(name="org:t", num_partitions=1, replication_factor=1)]
        ),
    )
    (retention,) = [c for c in result.configs if c.name == "retention.ms"]
    assert (retention.value, retention.source) == ("42", int(ConfigSource.NAMESPACE_CONFIG))


@pytest.mark.parametrize(
    ("name", "ops", "code", "message"),
    [
        (
            "nope",
            [AlterConfig(name="retention.ms", op=AlterConfigOp.SET, value="1")],
            ErrorCode.INVALID_REQUEST,
            "Namespace 'nope' does not exist; create it first with "
            "`mlog namespaces create --namespace nope`",
        ),
        (
            "",
            [AlterConfig(name="retention.ms", op=AlterConfigOp.SET, value="1")],
            ErrorCode.INVALID_REQUEST,
            'The default namespace "" takes its configs from the cluster; use --cluster',
        ),
        (
            "org",
            [AlterConfig(name="num.partitions", op=AlterConfigOp.SET, value="1")],
            ErrorCode.INVALID_CONFIG,
            "Unknown namespace config name: num.partitions (`mlog configs describe --all` "
            "lists the known keys)",
        ),
        (
            "org",
            [AlterConfig(name="retention.ms", op=AlterConfigOp.SET, value="soon")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value soon for configuration retention.ms: Not a number of type LONG",
        ),
    ],
)
def test_namespace_config_errors_append_nothing(
    service: MetadataService, name: str, ops: list[AlterConfig], code: ErrorCode, message: str
) -> None:
    new_namespace(service, "org")
    before = service.log.end_offset
    resource = ConfigResource(type=ConfigResourceType.NAMESPACE, name=name)
    (result,) = run(
        service,
        lambda image: service.controller.incremental_alter_configs(image, [(resource, ops)]),
    )
    assert (result.outcome.error_code, result.outcome.error_message) == (code, message)
    assert service.log.end_offset == before


# ---------------------------------------------------------------------- replay


T1, T2 = Uuid.random(), Uuid.random()
NS_ORG, NS_A, NS_B = Uuid.random(), Uuid.random(), Uuid.random()


def _partitions(topic_id: Uuid, count: int) -> list[Record]:
    return [
        PartitionRecord(partition_id=p, topic_id=topic_id, replicas=(1, 2), isr=(1, 2), leader=1)
        for p in range(count)
    ]


SCRIPT: list[Record] = [
    RegisterBrokerRecord(broker_id=1, incarnation_id=Uuid.random(), broker_epoch=0, fenced=False),
    RegisterBrokerRecord(broker_id=2, incarnation_id=Uuid.random(), broker_epoch=1, fenced=False),
    NamespaceRecord(namespace_id=NS_ORG, name="org"),
    NamespaceRecord(namespace_id=NS_A, name="org:a", parent_id=NS_ORG),
    NamespaceRecord(namespace_id=NS_B, name="org:b", parent_id=NS_ORG),
    ConfigRecord(
        resource_type=ConfigResourceType.NAMESPACE,
        resource_name="org:a",
        name="retention.ms",
        value="1",
    ),
    TopicRecord(name="t", topic_id=T1, namespace="org:a"),
    *_partitions(T1, 4),
    ConfigRecord(
        resource_type=ConfigResourceType.TOPIC,
        resource_name="org:a:t",
        name="segment.ms",
        value="9",
    ),
    TopicRecord(name="t", topic_id=T2, namespace=""),
    *_partitions(T2, 1),
    DeleteTopicPartitionsRecord(topic_id=T1, partition_count=2, delete_after_ms=50, created_ms=10),
    PartitionChangeRecord(partition_id=2, topic_id=T1, mode=Mode.READ_ONLY),
    PartitionChangeRecord(partition_id=3, topic_id=T1, mode=Mode.READ_ONLY),
    MoveTopicRecord(topic_id=T1, namespace="org:b"),
    ConfigRecord(
        resource_type=ConfigResourceType.TOPIC,
        resource_name="org:b:t",
        name="retention.ms",
        value="3",
    ),
    PartitionChangeRecord(partition_id=2, topic_id=T1, mode=Mode.NONE),
    PartitionChangeRecord(partition_id=3, topic_id=T1, mode=Mode.NONE),
    PurgeTopicPartitionsRecord(topic_id=T1, partition_count=2),
    RemoveTopicRecord(topic_id=T2),
    MoveTopicRecord(topic_id=T1, namespace=""),
    RemoveNamespaceRecord(namespace_id=NS_A),
    RemoveNamespaceRecord(namespace_id=NS_B),
]


def test_every_prefix_of_a_namespace_log_writes_and_replays_to_itself() -> None:
    image = EMPTY_IMAGE
    for offset, record in enumerate(SCRIPT):
        image = replay_records(image, [record], Provenance(offset=offset, epoch=1, timestamp=0))
        again = replay_records(EMPTY_IMAGE, list(image.write()), image.provenance)
        assert again == image, (offset, record)
    whole = replay_records(
        EMPTY_IMAGE, SCRIPT, Provenance(offset=len(SCRIPT) - 1, epoch=1, timestamp=0)
    )
    assert whole == image
    topic = image.topics.get_by_name("t")
    assert topic is not None and topic.topic_id == T1 and len(topic.partitions) == 2
    assert topic.pending_deletion is None
    assert dict(image.configs.get(ConfigResourceType.TOPIC, "t")) == {
        "segment.ms": "9",
        "retention.ms": "3",
    }
    assert sorted(image.namespaces.by_name) == ["org"]
    assert not image.configs.get(ConfigResourceType.NAMESPACE, "org:a")


@pytest.mark.parametrize(
    ("records", "error", "message"),
    [
        ([MoveTopicRecord(topic_id=T1, namespace="org:a")], Exception, "no live topic"),
        (
            [*SCRIPT[:8], MoveTopicRecord(topic_id=T1, namespace="org:a")],
            NamespaceReplayError,
            "already in namespace 'org:a'",
        ),
        (
            [*SCRIPT[:8], MoveTopicRecord(topic_id=T1, namespace="org:zzz")],
            NamespaceReplayError,
            "which does not exist",
        ),
        (
            [
                *SCRIPT[:8],
                TopicRecord(name="t", topic_id=T2, namespace="org:b"),
                MoveTopicRecord(topic_id=T1, namespace="org:b"),
            ],
            DuplicateTopicError,
            "topic 'org:b:t' already exists",
        ),
        (
            [*SCRIPT[:11], PurgeTopicPartitionsRecord(topic_id=T1, partition_count=2)],
            PendingDeletionError,
            "has no partition deletion pending",
        ),
        (
            [*SCRIPT[:15], PurgeTopicPartitionsRecord(topic_id=T1, partition_count=3)],
            PendingDeletionError,
            "keeps 2 partitions, not 3",
        ),
        (
            [*SCRIPT[:15], PurgeTopicPartitionsRecord(topic_id=T1, partition_count=2)],
            PendingDeletionError,
            r"partitions \[2, 3\] are still readable",
        ),
    ],
)
def test_replay_refuses_moves_and_purges_that_do_not_fit(
    records: list[Record], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        replay_records(EMPTY_IMAGE, records, EMPTY_PROVENANCE)


def test_load_image_replays_moves_from_the_log(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path / "log") as log:
        log.append(SCRIPT[:20])
        log.append(SCRIPT[20:])
    with LogReader.open(tmp_path / "log") as log:
        loaded = load_image(log)
    direct = replay_records(EMPTY_IMAGE, SCRIPT, loaded.provenance)
    assert loaded == direct


# ---------------------------------------------------------------------- CLI


@pytest.fixture
def cluster(tmp_path: Path) -> Path:
    for broker_id in (1, 2, 3):
        ok(tmp_path, "brokers", "register", "--id", str(broker_id))
    return tmp_path


def test_cli_namespace_tree(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = ok(cluster, "namespaces", "create", "--namespace", "org:apache:kafka")
    assert text.startswith("created namespace(s) org, org:apache, org:apache:kafka (id of")
    created = as_json(cluster, "namespaces", "create", "--namespace", "org:eclipse")
    assert created["created"] == ["org:eclipse"] and len(created["namespace_id"]) == 22
    ok(
        cluster,
        "topics",
        "create",
        "--topic",
        "orders",
        "--namespace",
        "org:apache",
        "--partitions",
        "2",
    )
    ok(cluster, "topics", "create", "--topic", "orders", "--partitions", "1")
    listed = as_json(cluster, "namespaces", "list", "--recursive")
    assert [(n["namespace"], n["topics"], n["total_topics"]) for n in listed] == [
        ("org", 0, 1),
        ("org:apache", 1, 1),
        ("org:apache:kafka", 0, 0),
        ("org:eclipse", 0, 0),
    ]
    table = ok(cluster, "namespaces", "list", "--namespace", "org")
    assert table.splitlines()[0].split() == [
        "namespace",
        "topics",
        "topics",
        "(subtree)",
        "children",
        "id",
    ]
    assert [line.split()[0] for line in table.splitlines()[1:]] == ["org:apache", "org:eclipse"]
    assert "no namespaces under 'org:eclipse'" in ok(
        cluster, "namespaces", "list", "--namespace", "org:eclipse"
    )
    topics = as_json(cluster, "topics", "list")
    assert [t["topic"] for t in topics] == ["orders", "org:apache:orders"]
    assert topics[0]["topic_id"] != topics[1]["topic_id"]
    only = as_json(cluster, "topics", "list", "--namespace", "org:apache")
    assert [t["topic"] for t in only] == ["org:apache:orders"]
    described = as_json(
        cluster, "topics", "describe", "--topic", "orders", "--namespace", "org:apache"
    )
    assert described[0]["namespace"] == "org:apache" and described[0]["name"] == "orders"
    assert "Namespace 'org:apache' already exists" in error(
        cluster, capsys, "namespaces", "create", "--namespace", "org:apache"
    )
    assert "Namespace 'nope' does not exist" in error(
        cluster, capsys, "topics", "create", "--topic", "t", "--namespace", "nope"
    )
    assert "Namespace 'nope' does not exist" in error(
        cluster, capsys, "topics", "list", "--namespace", "nope"
    )
    assert "already names a namespace" in error(
        cluster, capsys, "topics", "describe", "--topic", "org:x", "--namespace", "org"
    )
    assert "has an empty tier" in error(
        cluster, capsys, "topics", "describe", "--topic", "x", "--namespace", "org::a"
    )
    err = error(cluster, capsys, "namespaces", "delete", "--namespace", "org")
    assert err == (
        "mlog: error: INVALID_REQUEST (42): Namespace 'org' has child namespaces: org:apache, "
        "org:eclipse; delete them first, or delete the whole subtree with --recursive"
    )
    deleted = as_json(cluster, "namespaces", "delete", "--namespace", "org", "--recursive")
    assert deleted == {
        "namespace": "org",
        "deleted_namespaces": ["org:apache:kafka", "org:apache", "org:eclipse", "org"],
        "deleted_topics": ["org:apache:orders"],
    }
    assert as_json(cluster, "namespaces", "list", "--recursive") == []
    assert [t["topic"] for t in as_json(cluster, "topics", "list")] == ["orders"]


def test_cli_move_and_namespace_configs(cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ok(cluster, "namespaces", "create", "--namespace", "org:apache")
    ok(cluster, "namespaces", "create", "--namespace", "org:eclipse")
    created = as_json(
        cluster,
        "topics",
        "create",
        "--topic",
        "orders",
        "--namespace",
        "org:apache",
        "--config",
        "segment.ms=1000",
    )
    ok(cluster, "configs", "alter", "--namespace", "org", "--set", "retention.ms=5000")
    ok(cluster, "configs", "alter", "--namespace", "org:apache", "--set", "cleanup.policy=compact")
    configs = as_json(
        cluster, "configs", "describe", "--topic", "orders", "--namespace", "org:apache"
    )
    by_name = {c["name"]: (c["value"], c["source"], c["source_name"]) for c in configs}
    assert by_name == {
        "cleanup.policy": ("compact", "NAMESPACE_CONFIG", "org:apache"),
        "retention.ms": ("5000", "NAMESPACE_CONFIG", "org"),
        "segment.ms": ("1000", "TOPIC_CONFIG", ""),
    }
    table = ok(cluster, "configs", "describe", "--topic", "org:apache:orders")
    assert "NAMESPACE_CONFIG (org:apache)" in table and "TOPIC_CONFIG" in table
    ns = as_json(cluster, "configs", "describe", "--namespace", "org:apache")
    assert {c["name"] for c in ns} == {"cleanup.policy", "retention.ms"}
    text = ok(
        cluster,
        "topics",
        "move",
        "--topic",
        "orders",
        "--from-namespace",
        "org:apache",
        "--to-namespace",
        "org:eclipse",
    )
    assert text == (
        f"moved topic org:apache:orders to org:eclipse:orders (id {created['topic_id']} "
        "unchanged)\n"
    )
    moved = as_json(cluster, "topics", "describe", "--topic", "org:eclipse:orders")
    assert moved[0]["topic_id"] == created["topic_id"]
    assert moved[0]["configs"] == {"segment.ms": "1000"}
    configs = as_json(
        cluster, "configs", "describe", "--topic", "orders", "--namespace", "org:eclipse"
    )
    assert {c["name"]: c["source_name"] for c in configs} == {
        "retention.ms": "org",
        "segment.ms": "",
    }
    # The namespaces noun moves topics too; onto a taken name it is TOPIC_ALREADY_EXISTS.
    ok(cluster, "topics", "create", "--topic", "orders")
    err = error(
        cluster,
        capsys,
        "namespaces",
        "move",
        "--topic",
        "orders",
        "--from-namespace",
        "org:eclipse",
        "--to-namespace",
        "",
    )
    assert err == "mlog: error: TOPIC_ALREADY_EXISTS (36): Topic 'orders' already exists."
    moved_back = as_json(
        cluster,
        "namespaces",
        "move",
        "--topic",
        "orders",
        "--from-namespace",
        "org:eclipse",
        "--to-namespace",
        "org:apache",
    )
    assert moved_back == {
        "topic_id": created["topic_id"],
        "from": "org:eclipse:orders",
        "to": "org:apache:orders",
    }
    assert "give the bare topic name" in error(
        cluster, capsys, "topics", "move", "--topic", "org:apache:orders", "--to-namespace", "org"
    )
    assert "name one resource" in error(
        cluster, capsys, "configs", "alter", "--namespace", "org", "--cluster", "--set", "a=b"
    )
    assert "does not exist" in error(cluster, capsys, "configs", "describe", "--namespace", "nope")


def test_image_tree_shows_namespaces_with_configs(cluster: Path) -> None:
    ok(cluster, "namespaces", "create", "--namespace", "org:apache")
    ok(cluster, "configs", "alter", "--namespace", "org", "--set", "retention.ms=5")
    ok(cluster, "topics", "create", "--topic", "t", "--namespace", "org")
    shown = as_json(cluster, "image", "show", "/namespaces/org")
    value = shown["/namespaces/org"]
    assert value["name"] == "org" and value["topics"] == 1
    assert value["children"] == ["org:apache"]
    assert value["configs"] == {"retention.ms": "5"}
