"""Attacks of issue #31, finding 6: the log-reading APIs showed everything to cluster DESCRIBE.

Before the fix ImageAt (and so `mlog topics list`, `configs describe`, `namespaces list` with
`--bootstrap-server`) sent the whole image, every topic and config, denied namespaces, every
ACL and the clients' stored write answers, to a principal with DESCRIBE on the cluster. Now
the present image is sent filtered to what the principal may DESCRIBE, and the log's past
(FetchLog, ImageAt at a past point, Diff, History) needs CLUSTER_ACTION.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from api.client.admin import AdminClient
from api.client.connection import RemoteError
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    ClientWriteRecord,
    ConfigRecord,
    NamespaceRecord,
    PatternType,
    Record,
    ResourceType,
    TopicRecord,
    UserScramCredentialRecord,
)
from records.uuids import Uuid
from replay.controller.authorizer import CLUSTER_NAME, AuthorizerConfig
from replay.controller.commands import ControllerResult
from replay.image import MetadataImage
from replay.timetravel import Entity
from tests.support.attacks import ADMIN, ADMIN_PASSWORD, seed_user
from tests.support.cli import mlog, ok
from tests.support.server_thread import running_server

ANONYMOUS = "User:ANONYMOUS"


def _acl(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    *,
    pattern: PatternType = PatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=Uuid.random(),
        resource_type=resource_type,
        resource_name=name,
        pattern_type=pattern,
        principal=ANONYMOUS,
        host="*",
        operation=operation,
        permission_type=permission,
    )


def _append(log_dir: Path, *records: AccessControlEntryRecord) -> None:
    with MetadataService.open(log_dir) as service:
        service.execute(lambda image: ControllerResult(records=records, response=None))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """Topics `pub` and `secret`, namespaces `org` and `org:hidden` (a topic in each), configs
    on all of them and the cluster, a SCRAM user and ACLs for someone else."""
    folder = tmp_path / "data"
    seed_user(folder / "log", ADMIN, ADMIN_PASSWORD)
    ok(folder, "brokers", "register", "--id", "1", "--endpoint", "127.0.0.1:9093")
    ok(folder, "brokers", "unfence", "--id", "1")
    ok(folder, "namespaces", "create", "--namespace", "org:hidden")
    for topic, namespace in (("pub", ""), ("secret", ""), ("t", "org"), ("t", "org:hidden")):
        args = ["--namespace", namespace] if namespace else []
        ok(folder, "topics", "create", "--topic", topic, "--partitions", "1", *args)
    for target in (
        ("--topic", "pub"),
        ("--topic", "secret"),
        ("--namespace", "org"),
        ("--namespace", "org:hidden"),
    ):
        ok(folder, "configs", "alter", *target, "--set", "retention.ms=1000")
    ok(folder, "configs", "alter", "--cluster", "--set", "num.partitions=2")
    return folder


def _records(address: str, *, at_offset: int | None = None) -> list[Record]:
    async def read() -> MetadataImage:
        async with await AdminClient.connect(address) as client:
            return await client.image_at(at_offset=at_offset)

    return list(asyncio.run(read()).write())


def _names(records: list[Record]) -> dict[str, list[str]]:
    return {
        "topics": sorted(
            f"{r.namespace}:{r.name}" if r.namespace else r.name
            for r in records
            if isinstance(r, TopicRecord)
        ),
        "namespaces": sorted(r.name for r in records if isinstance(r, NamespaceRecord)),
        "configs": sorted(
            f"{int(r.resource_type)}/{r.resource_name}"
            for r in records
            if isinstance(r, ConfigRecord)
        ),
    }


def test_a_topic_reader_sees_its_topics_and_nothing_else(data_dir: Path) -> None:
    log_dir = data_dir / "log"
    _append(
        log_dir,
        _acl(ResourceType.TOPIC, "pub", AclOperation.DESCRIBE),
        _acl(ResourceType.TOPIC, "pub", AclOperation.DESCRIBE_CONFIGS),
        _acl(ResourceType.TOPIC, "org:t", AclOperation.DESCRIBE),
    )
    with running_server(log_dir, authorizer=AuthorizerConfig()) as server:
        records = _records(server.address)
        assert _names(records) == {
            # org comes with its topic; org:hidden, secret and the namespaces' configs do not.
            "topics": ["org:t", "pub"],
            "namespaces": ["org"],
            "configs": ["2/pub"],  # org:t's configs need DESCRIBE_CONFIGS on it
        }
        for hidden in (AccessControlEntryRecord, UserScramCredentialRecord, ClientWriteRecord):
            assert not any(isinstance(r, hidden) for r in records)
        # The CLI's remote reads give the same view, with no CLUSTER_ACTION.
        remote = ("--bootstrap-server", server.address, "--output", "json")
        code, text = mlog(data_dir, *remote, "topics", "list")
        assert code == 0, text
        assert "secret" not in text and "hidden" not in text
        assert "pub" in text
        code, text = mlog(data_dir, *remote, "configs", "describe", "--topic", "secret")
        assert code != 0 or "1000" not in text


def test_cluster_describe_adds_acls_and_redacted_credentials_only(data_dir: Path) -> None:
    log_dir = data_dir / "log"
    _append(log_dir, _acl(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.DESCRIBE))
    with running_server(log_dir, authorizer=AuthorizerConfig()) as server:
        records = _records(server.address)
        assert _names(records) == {"topics": [], "namespaces": [], "configs": []}
        acls = [r for r in records if isinstance(r, AccessControlEntryRecord)]
        assert len(acls) == 1
        credentials = [r for r in records if isinstance(r, UserScramCredentialRecord)]
        assert credentials and all(set(c.stored_key) == {0} for c in credentials)

        async def refused() -> None:
            async with await AdminClient.connect(server.address) as client:
                for read in (
                    lambda: client.fetch_log(0),
                    lambda: client.image_at(at_offset=0),
                    lambda: client.diff("0"),
                    lambda: client.history(Entity(topic="pub")),
                ):
                    with pytest.raises(RemoteError, match="CLUSTER_AUTHORIZATION_FAILED"):
                        await read()

        asyncio.run(refused())


def test_a_deny_hides_what_an_allow_would_show(data_dir: Path) -> None:
    log_dir = data_dir / "log"
    _append(
        log_dir,
        _acl(ResourceType.NAMESPACE, "org", AclOperation.DESCRIBE),
        _acl(ResourceType.TOPIC, "org", AclOperation.DESCRIBE, pattern=PatternType.PREFIXED),
        _acl(
            ResourceType.NAMESPACE,
            "org:hidden",
            AclOperation.DESCRIBE,
            permission=AclPermissionType.DENY,
        ),
    )
    with running_server(log_dir, authorizer=AuthorizerConfig()) as server:
        names = _names(_records(server.address))
    assert "org:hidden" not in names["namespaces"]
    assert "org:hidden:t" not in names["topics"]
    assert "org:t" in names["topics"]


def test_cluster_action_and_no_authorizer_see_the_whole_image(data_dir: Path) -> None:
    log_dir = data_dir / "log"
    with MetadataService.open(log_dir) as service:
        whole = _names(list(service.image.write()))
    with running_server(log_dir) as server:  # no authorizer: everyone reads everything
        assert _names(_records(server.address)) == whole
    _append(log_dir, _acl(ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION))
    with running_server(log_dir, authorizer=AuthorizerConfig()) as server:
        assert _names(_records(server.address)) == whole
        assert _names(_records(server.address, at_offset=3)) != whole  # the past: allowed
