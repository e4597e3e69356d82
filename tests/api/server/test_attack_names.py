"""Attacks of issue #31 on names: finding 3 (a leading ':' slipped past topic ACLs).

Before the fix CreateTopics of `:reserved` was authorized as `:reserved` (which an ALLOW on
LITERAL `*` covers and a DENY on `reserved` does not) and then created `reserved`, the name
split into the default namespace and `reserved`. Now a name with an empty namespace tier is no
topic's name: INVALID_TOPIC_EXCEPTION (17) before any ACL is asked, with or without an
authorizer, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from api.server.server import MetadataServer
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.authorizer import AuthorizerConfig
from replay.controller.commands import ControllerResult
from tests.support.attacks import Wire
from tests.support.server_thread import running_server

INVALID_TOPIC, TOPIC_DENIED, INVALID_REQUEST = 17, 29, 42
HOSTILE = (":reserved", "::reserved", "org::reserved", ":org:reserved")


def _acl(name: str, permission: AclPermissionType) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=Uuid.random(),
        resource_type=ResourceType.TOPIC,
        resource_name=name,
        pattern_type=PatternType.LITERAL,
        principal="User:ANONYMOUS",
        host="*",
        operation=AclOperation.ALL
        if permission == AclPermissionType.ALLOW
        else AclOperation.CREATE,
        permission_type=permission,
    )


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "log"
    records = (
        _acl("*", AclPermissionType.ALLOW),
        _acl("reserved", AclPermissionType.DENY),
    )
    with MetadataService.open(folder) as service:
        service.execute(lambda image: ControllerResult(records=records, response=None))
    return folder


def _create(server: MetadataServer, *names: str) -> dict[str, Any]:
    """CreateTopics v7 of `names` on the PLAINTEXT listener: each name's (code, message)."""
    wire = Wire(server, "PLAINTEXT")
    try:
        topics = [
            {
                "name": name,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": (),
                "configs": (),
            }
            for name in names
        ]
        answer = wire.ask(19, 7, topics=topics, timeout=30_000, validate_only=False)
    finally:
        wire.close()
    return {t.name: (t.error_code, t.error_message) for t in answer.topics}


@pytest.mark.parametrize("authorizer", [AuthorizerConfig(), None], ids=["acls", "open"])
def test_an_empty_namespace_tier_is_no_topic_name(
    log_dir: Path, authorizer: AuthorizerConfig | None
) -> None:
    with running_server(log_dir, brokers=1, authorizer=authorizer) as server:
        answers = _create(server, "fine", *HOSTILE)
        image = server.service.image
    assert answers["fine"][0] == 0
    for name in HOSTILE:
        code, message = answers[name]
        assert code == INVALID_TOPIC, (name, message)
        assert "empty namespace tier" in message and "\n" not in message
    assert image.topics.get_by_name("reserved") is None
    assert sorted(t.qualified_name for t in image.topics.by_id.values()) == ["fine"]


def test_the_deny_holds_on_the_plain_name(log_dir: Path) -> None:
    with running_server(log_dir, brokers=1, authorizer=AuthorizerConfig()) as server:
        assert _create(server, "reserved")["reserved"][0] == TOPIC_DENIED
        assert server.service.image.topics.get_by_name("reserved") is None
