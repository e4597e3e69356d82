"""Attacks of issue #31 on config inheritance: finding 8 (a DENY below a namespace).

Before the fix a principal allowed AlterConfigs on namespace `org` changed what the topics of
`org:secret` (where it is denied) resolve, as `org:secret` inherits `org`'s configs. Now a
namespace's config change needs ALTER_CONFIGS on every namespace below it that inherits a
changed key; otherwise it is refused (TOPIC_AUTHORIZATION_FAILED) naming that namespace.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from api.server.server import MetadataServer
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    ConfigResourceType,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.authorizer import AuthorizerConfig
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    ConfigResource,
    ControllerResult,
    CreateNamespace,
)
from tests.support.attacks import Wire
from tests.support.server_thread import running_server

NAMESPACE = int(ConfigResourceType.NAMESPACE)
TOPIC_DENIED = 29


def _acl(name: str, permission: AclPermissionType) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=Uuid.random(),
        resource_type=ResourceType.NAMESPACE,
        resource_name=name,
        pattern_type=PatternType.LITERAL,
        principal="User:ANONYMOUS",
        host="*",
        operation=AclOperation.ALTER_CONFIGS,
        permission_type=permission,
    )


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "log"
    with MetadataService.open(folder) as service:
        for name in ("org", "org:secret", "org:open"):
            create = functools.partial(
                service.controller.create_namespace, request=CreateNamespace(name=name)
            )
            service.execute(create)
        acls = (_acl("org", AclPermissionType.ALLOW), _acl("org:secret", AclPermissionType.DENY))
        service.execute(lambda image: ControllerResult(records=acls, response=None))
    return folder


def _alter(server: MetadataServer, namespace: str, key: str, value: str) -> tuple[int, str]:
    """IncrementalAlterConfigs v1 setting one key of a namespace: (code, message)."""
    wire = Wire(server, "PLAINTEXT")
    try:
        answer = wire.ask(
            44,
            1,
            resources=[
                {
                    "resource_type": NAMESPACE,
                    "resource_name": namespace,
                    "configs": [{"name": key, "config_operation": 0, "value": value}],
                }
            ],
            validate_only=False,
        )
    finally:
        wire.close()
    (result,) = answer.responses
    return int(result.error_code), str(result.error_message)


def _configs(server: MetadataServer, namespace: str) -> Any:
    return dict(server.service.image.configs.get(ConfigResourceType.NAMESPACE, namespace))


def test_a_namespace_change_needs_the_permission_where_it_is_inherited(log_dir: Path) -> None:
    with running_server(log_dir, brokers=1, authorizer=AuthorizerConfig()) as server:
        code, message = _alter(server, "org", "retention.ms", "1000")
        assert code == TOPIC_DENIED
        assert "namespace 'org:secret'" in message and "inherits" in message
        assert "\n" not in message
        assert _configs(server, "org") == {}
        # org:secret cannot be changed directly either (the DENY), and it decides alone
        assert _alter(server, "org:secret", "retention.ms", "5000")[0] == TOPIC_DENIED
        # a key org:open inherits but org:secret overrides is org's to change
        assert _alter(server, "org:open", "retention.ms", "7000")[0] == 0


def test_a_key_the_denied_namespace_overrides_is_not_inherited(log_dir: Path) -> None:
    with MetadataService.open(log_dir) as service:
        resource = ConfigResource(type=ConfigResourceType.NAMESPACE, name="org:secret")
        change = [AlterConfig(name="retention.ms", op=AlterConfigOp.SET, value="5000")]
        service.execute(
            lambda image: service.controller.incremental_alter_configs(
                image, [(resource, change)], validate_only=False
            )
        )
    with running_server(log_dir, brokers=1, authorizer=AuthorizerConfig()) as server:
        assert _alter(server, "org", "retention.ms", "1000")[0] == 0
        assert _configs(server, "org") == {"retention.ms": "1000"}
        assert _configs(server, "org:secret") == {"retention.ms": "5000"}
        assert _alter(server, "org", "segment.ms", "3600000")[0] == TOPIC_DENIED
