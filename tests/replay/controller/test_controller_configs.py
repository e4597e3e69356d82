"""Broker configs and list operations through the controller (IncrementalAlterConfigs' way)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from api.service.service import MetadataService
from records.model import ConfigResourceType
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    ConfigResource,
    CreatableTopic,
    RegisterBroker,
)
from replay.controller.config_defs import ConfigSource
from replay.controller.controller import Controller, ControllerOptions
from replay.controller.errors import ApiError, ErrorCode

BROKER = ConfigResourceType.BROKER
TOPIC = ConfigResourceType.TOPIC


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MetadataService]:
    controller = Controller(options=ControllerOptions(fixed_start_index=0), rng=random.Random(1))
    with MetadataService.open(tmp_path / "log", controller=controller) as svc:
        svc.execute(
            lambda image: svc.controller.register_broker(image, RegisterBroker(broker_id=1))
        )
        svc.execute(
            lambda image: svc.controller.create_topics(
                image, [CreatableTopic(name="t", num_partitions=1, replication_factor=1)]
            )
        )
        yield svc


def alter(
    svc: MetadataService, kind: ConfigResourceType, name: str, *ops: AlterConfig
) -> tuple[ErrorCode, str]:
    resource = ConfigResource(type=kind, name=name)
    (result,) = svc.execute(
        lambda image: svc.controller.incremental_alter_configs(image, [(resource, ops)])
    )
    return result.outcome.error_code, result.outcome.error_message or ""


def described(
    svc: MetadataService, kind: ConfigResourceType, name: str
) -> dict[str, tuple[str | None, ConfigSource]]:
    resource = ConfigResource(type=kind, name=name)
    return {
        c.name: (c.value, c.source) for c in svc.controller.describe_configs(svc.image, resource)
    }


def test_broker_configs_resolve_broker_then_cluster_then_default(service: MetadataService) -> None:
    key = "log.retention.ms"
    assert described(service, BROKER, "")[key] == ("604800000", ConfigSource.DEFAULT_CONFIG)
    set_cluster = AlterConfig(name=key, op=AlterConfigOp.SET, value="1000")
    assert alter(service, BROKER, "", set_cluster) == (ErrorCode.NONE, "")
    assert described(service, BROKER, "")[key] == (
        "1000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert described(service, BROKER, "1")[key] == (
        "1000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    set_broker = AlterConfig(name=key, op=AlterConfigOp.SET, value="2000")
    assert alter(service, BROKER, "1", set_broker) == (ErrorCode.NONE, "")
    assert described(service, BROKER, "1")[key] == ("2000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert described(service, BROKER, "")[key][0] == "1000"


@pytest.mark.parametrize("name", ["7", "x", "-1", " 1", "\u00b2"])
def test_a_broker_resource_must_be_a_registered_id(service: MetadataService, name: str) -> None:
    with pytest.raises(ApiError) as info:
        described(service, BROKER, name)
    assert info.value.error_code == ErrorCode.INVALID_REQUEST
    assert "is not registered" in info.value.message
    op = AlterConfig(name="log.retention.ms", op=AlterConfigOp.SET, value="1")
    code, text = alter(service, BROKER, name, op)
    assert code == ErrorCode.INVALID_REQUEST and "is not registered" in text


def test_an_unknown_key_and_a_null_set_are_refused(service: MetadataService) -> None:
    code, text = alter(
        service, TOPIC, "t", AlterConfig(name="colour", op=AlterConfigOp.SET, value="x")
    )
    assert code == ErrorCode.INVALID_CONFIG
    assert text.startswith("Unknown topic config name: colour")
    code, text = alter(service, BROKER, "", AlterConfig(name="colour", op=AlterConfigOp.DELETE))
    assert code == ErrorCode.INVALID_CONFIG and "Unknown broker config name" in text
    code, text = alter(service, TOPIC, "t", AlterConfig(name="retention.ms", op=AlterConfigOp.SET))
    assert code == ErrorCode.INVALID_REQUEST and "use DELETE" in text


def test_a_topic_key_on_a_broker_resource_is_taken_as_kafka_takes_it(
    service: MetadataService,
) -> None:
    """Kafka's controller stores any key on a BROKER resource: a topic key is kept there
    and sets no topic's default (the broker-level key does: log.cleanup.policy)."""
    for name in ("", "1"):
        op = AlterConfig(name="cleanup.policy", op=AlterConfigOp.SET, value="compact")
        assert alter(service, BROKER, name, op) == (ErrorCode.NONE, "")
        assert service.image.configs.get(BROKER, name)["cleanup.policy"] == "compact"
    assert described(service, TOPIC, "t")["cleanup.policy"] == (
        "delete",
        ConfigSource.DEFAULT_CONFIG,
    )
    # Its value is checked by the topic key's rule; a key of neither kind is still refused.
    bad = AlterConfig(name="cleanup.policy", op=AlterConfigOp.SET, value="sometimes")
    code, text = alter(service, BROKER, "", bad)
    assert code == ErrorCode.INVALID_CONFIG and "cleanup.policy" in text
    gone = AlterConfig(name="cleanup.policy", op=AlterConfigOp.DELETE)
    assert alter(service, BROKER, "", gone) == (ErrorCode.NONE, "")
    assert "cleanup.policy" not in service.image.configs.get(BROKER, "")


def test_append_and_subtract_work_on_lists_only(service: MetadataService) -> None:
    key = "cleanup.policy"
    append = AlterConfig(name=key, op=AlterConfigOp.APPEND, value="compact, delete")
    assert alter(service, TOPIC, "t", append) == (ErrorCode.NONE, "")
    assert described(service, TOPIC, "t")[key][0] == "delete,compact"
    subtract = AlterConfig(name=key, op=AlterConfigOp.SUBTRACT, value="delete")
    assert alter(service, TOPIC, "t", subtract) == (ErrorCode.NONE, "")
    assert described(service, TOPIC, "t")[key][0] == "compact"
    not_a_list = AlterConfig(name="retention.ms", op=AlterConfigOp.APPEND, value="1")
    code, text = alter(service, TOPIC, "t", not_a_list)
    assert code == ErrorCode.INVALID_CONFIG and "it is not a list" in text


def test_a_key_given_twice_and_an_unknown_resource_type_are_refused(
    service: MetadataService,
) -> None:
    ops = [AlterConfig(name="retention.ms", op=AlterConfigOp.SET, value=v) for v in ("1", "2")]
    code, text = alter(service, TOPIC, "t", *ops)
    assert code == ErrorCode.INVALID_REQUEST and "duplicate config keys" in text
    with pytest.raises(ApiError) as info:
        described(service, ConfigResourceType.UNKNOWN, "x")
    assert info.value.error_code == ErrorCode.INVALID_REQUEST
    assert "use TOPIC, NAMESPACE or BROKER" in info.value.message
    code, text = alter(service, ConfigResourceType.UNKNOWN, "x", ops[0])
    assert code == ErrorCode.INVALID_REQUEST and "cannot be altered" in text
