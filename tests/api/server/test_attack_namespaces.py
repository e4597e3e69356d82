"""Attacks of issue #31 on namespaces: finding 7's existence oracles.

Before the fix anyone told an existing namespace from a missing one: CreateNamespace answered
"already exists" (INVALID_REQUEST) for an existing one and an authorization failure for a
missing one, ListNamespaces under a missing one "does not exist", DeleteNamespace (allowed
DELETE, denied DESCRIBE) "does not exist" or a deletion, and a listing counted the namespaces
and topics its reader is denied. Now a namespace the principal may not DESCRIBE answers as a
missing one would: the same refusal, the same (empty) listing, and counts of what it may see.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.protocol import private
from api.server.kafka.base import Session
from api.server.private_apis import PrivateApis
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.authorizer import Authorizer, AuthorizerConfig
from replay.controller.commands import (
    ControllerResult,
    CreatableTopic,
    CreateNamespace,
    DeleteNamespace,
    RegisterBroker,
)
from replay.controller.errors import ApiError, ErrorCode

MALLORY = Session(principal="User:mallory", host="10.0.0.9")
EXISTING, MISSING = "org:secret", "org:nothere"


def _acl(
    name: str, operation: AclOperation, *, deny: bool = False, prefixed: bool = False
) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=Uuid.random(),
        resource_type=ResourceType.NAMESPACE,
        resource_name=name,
        pattern_type=PatternType.PREFIXED if prefixed else PatternType.LITERAL,
        principal=MALLORY.principal,
        host="*",
        operation=operation,
        permission_type=AclPermissionType.DENY if deny else AclPermissionType.ALLOW,
    )


@pytest.fixture
def service(tmp_path: Path) -> Iterator[MetadataService]:
    """`org`, `org:public` (one topic) and `org:secret` (two topics)."""
    service = MetadataService.open(tmp_path / "log")
    controller = service.controller
    service.execute(
        functools.partial(controller.register_broker, request=RegisterBroker(broker_id=1))
    )
    for name in ("org:public", EXISTING):
        service.execute(
            functools.partial(controller.create_namespace, request=CreateNamespace(name=name))
        )
    topics = [
        CreatableTopic(name=name, num_partitions=1, replication_factor=1)
        for name in ("org:public:a", "org:secret:b", "org:secret:c")
    ]
    service.execute(functools.partial(controller.create_topics, topics=topics))
    yield service
    service.close()


def _grant(service: MetadataService, *acls: AccessControlEntryRecord) -> None:
    service.execute(lambda image: ControllerResult(records=acls, response=None))


def _answer(service: MetadataService, handler: Any, request: Any) -> Any:
    """The handler's answer, or (error code, message with the namespace's name blanked)."""
    try:
        return asyncio.run(handler(request, MALLORY))
    except ApiError as error:
        message = error.message.replace(EXISTING, "NAME").replace(MISSING, "NAME")
        return (error.error_code, message)


def _apis(service: MetadataService) -> PrivateApis:
    return PrivateApis(service, Authorizer(AuthorizerConfig()))


def test_create_answers_alike_for_existing_and_missing(service: MetadataService) -> None:
    apis = _apis(service)
    create = apis.create_namespace
    existing = _answer(service, create, CreateNamespace(name=EXISTING))
    assert existing == _answer(service, create, CreateNamespace(name=MISSING))
    assert existing[0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    # allowed to create below `org` but not to DESCRIBE: refused, never "already exists"
    _grant(service, _acl("org", AclOperation.CREATE, prefixed=True))
    refused = _answer(service, create, CreateNamespace(name=EXISTING))
    assert refused[0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert "already exists" not in refused[1]
    assert _answer(service, create, CreateNamespace(name=MISSING)).created == (MISSING,)


def test_delete_answers_alike_for_existing_and_missing(service: MetadataService) -> None:
    apis = _apis(service)
    _grant(
        service,
        _acl("org", AclOperation.DELETE, prefixed=True),
        _acl("org", AclOperation.DESCRIBE, prefixed=True, deny=True),
    )
    delete = apis.delete_namespace
    existing = _answer(service, delete, DeleteNamespace(name=EXISTING, recursive=True))
    assert existing == _answer(service, delete, DeleteNamespace(name=MISSING))
    assert existing[0] == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert service.image.namespaces.exists(EXISTING)


def test_list_answers_alike_under_existing_and_missing(service: MetadataService) -> None:
    apis = _apis(service)
    listing = apis.list_namespaces
    for recursive in (False, True):
        existing = _answer(
            service, listing, private.ListNamespaces(namespace=EXISTING, recursive=recursive)
        )
        missing = _answer(
            service, listing, private.ListNamespaces(namespace=MISSING, recursive=recursive)
        )
        assert existing == missing == private.NamespaceList(namespaces=())


def test_a_listing_counts_only_what_its_reader_may_see(service: MetadataService) -> None:
    apis = _apis(service)
    _grant(
        service,
        _acl("org", AclOperation.DESCRIBE),
        _acl(EXISTING, AclOperation.DESCRIBE, deny=True),
    )
    listed = _answer(service, apis.list_namespaces, private.ListNamespaces(recursive=True))
    assert [(n.name, n.topics, n.total_topics, n.children) for n in listed.namespaces] == [
        ("org", 0, 1, 1),
        ("org:public", 1, 1, 0),
    ]
    # a super user (no authorizer: everyone is one) still sees and counts everything
    everything = asyncio.run(
        PrivateApis(service, None).list_namespaces(private.ListNamespaces(recursive=True), MALLORY)
    )
    assert [(n.name, n.total_topics, n.children) for n in everything.namespaces] == [
        ("org", 3, 2),
        ("org:public", 1, 0),
        ("org:secret", 2, 0),
    ]
