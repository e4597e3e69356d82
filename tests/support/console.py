"""A data directory with a small history for the console's tests, a signed-in client, and a
quorum of `mlog serve` processes a console signs in to."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient

from api import Metadata
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    ClientWriteRecord,
    ConfigRecord,
    ConfigResourceType,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.authorizer import CLUSTER_NAME
from replay.controller.commands import ControllerResult
from tests.support.quorum_processes import TIMERS, Quorum, mlog
from tests.support.sasl_users import seed_users

Client = TestClient[web.Request, web.Application]
"""aiohttp's test client of a console."""

PASSWORD = "alice-secret"
"""alice's password (`tests.support.sasl_users.USERS`)."""

HOSTILE = '"><img src=x onerror=alert(1)><script>alert(2)</script>'
"""Markup that would run if a page did not escape it."""

HOSTILE_PRINCIPAL = f"User:{HOSTILE}"

CLIENT_ID = Uuid.parse("6f1c2b3a-0000-4000-8000-000000000001")
"""The client id of the idempotent write in the history's last batch."""


def build_history(data_dir: Path) -> None:
    """Three brokers, topics with config changes, a hostile principal and config value, users.

    Offsets: 0 the feature level, 1-3 the brokers, 4-7 `orders` (3 partitions), 8 its
    retention set and 9 changed, 10-11 `payments` by the hostile principal, 12-15 the users'
    credentials, 16-18 one batch by the hostile principal: a hostile config value, an ACL for
    the hostile principal and the `ClientWriteRecord` of client `CLIENT_ID`.
    """
    with Metadata.open(data_dir, principal="User:alice") as md:
        for broker in (1, 2, 3):
            md.register_broker(broker, rack=f"r{broker}")
        md.create_topic("orders", partitions=3, replication_factor=2)
        md.alter_configs(ConfigResourceType.TOPIC, "orders", set={"retention.ms": "86400000"})
        md.alter_configs(ConfigResourceType.TOPIC, "orders", set={"retention.ms": "3600000"})
    with Metadata.open(data_dir, principal=HOSTILE_PRINCIPAL) as md:
        md.create_topic("payments", partitions=1, replication_factor=1)
    seed_users(data_dir / "log")
    with Metadata.open(data_dir, principal=HOSTILE_PRINCIPAL) as md:
        # Raw records (replay's rules, not the controller's): values no command would take.
        md.append(
            [
                ConfigRecord(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name="payments",
                    name="x.note",
                    value=HOSTILE,
                ),
                AccessControlEntryRecord(
                    id=Uuid.random(),
                    resource_type=ResourceType.TOPIC,
                    resource_name="payments",
                    pattern_type=PatternType.LITERAL,
                    principal=HOSTILE_PRINCIPAL,
                    host="*",
                    operation=AclOperation.READ,
                    permission_type=AclPermissionType.ALLOW,
                ),
                ClientWriteRecord(
                    client_id=CLIENT_ID,
                    sequence=0,
                    principal=HOSTILE_PRINCIPAL,
                    api_key=44,
                    response=b"",
                ),
            ]
        )


async def sign_in(client: Client, user: str = "alice", password: str = PASSWORD) -> int:
    """Sign in through the login form; the status of the form's answer (303 when it worked)."""
    form = await client.get("/login")
    token = re.search(r'name="csrf" value="([^"]+)"', await form.text())
    assert token is not None
    answer = await client.post(
        "/login",
        data={"csrf": token.group(1), "user": user, "password": password, "next": "/timeline"},
        allow_redirects=False,
    )
    return answer.status


DENIED_NAMESPACE, DENIED_TOPIC = "covert", "covert:vault"
"""The namespace bob is denied DESCRIBE on, and its topic (`build_denied_history`)."""

DENIED_VALUE = "4242424"
"""The denied topic's retention.ms: shown only where the topic is."""


def _acl(
    principal: str,
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=Uuid.random(),
        resource_type=resource_type,
        resource_name=name,
        pattern_type=PatternType.LITERAL,
        principal=principal,
        host="*",
        operation=operation,
        permission_type=permission,
    )


def build_denied_history(data_dir: Path) -> str:
    """`build_history`, then namespace `covert` with topic `covert:vault` and ACLs for a
    server with an authorizer; returns the topic's id.

    alice may read the log (CLUSTER_ACTION on the cluster); bob may DESCRIBE (and
    DESCRIBE_CONFIGS) every topic and namespace but `covert`, which he is denied.
    """
    build_history(data_dir)
    with Metadata.open(data_dir, principal="User:alice") as md:
        md.create_namespace(DENIED_NAMESPACE)
        md.create_topic(DENIED_TOPIC, partitions=2, replication_factor=2)
        md.alter_configs(ConfigResourceType.TOPIC, DENIED_TOPIC, set={"retention.ms": DENIED_VALUE})
        vault = md.image().topics.get_by_name(DENIED_TOPIC)
        assert vault is not None
    acls = (
        _acl("User:alice", ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION),
        _acl("User:bob", ResourceType.TOPIC, "*", AclOperation.DESCRIBE),
        _acl("User:bob", ResourceType.TOPIC, "*", AclOperation.DESCRIBE_CONFIGS),
        _acl("User:bob", ResourceType.NAMESPACE, "*", AclOperation.DESCRIBE),
        _acl(
            "User:bob",
            ResourceType.NAMESPACE,
            DENIED_NAMESPACE,
            AclOperation.DESCRIBE,
            AclPermissionType.DENY,
        ),
    )
    with MetadataService.open(data_dir / "log") as service:
        service.execute(lambda image: ControllerResult(records=acls, response=None))
    return str(vault.topic_id)


def quorum_leader(quorum: Quorum) -> int:
    """The quorum's leader, asked from a thread of its own (callers may run an event loop:
    Playwright's sync API does)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, quorum.leader()).result()


@contextlib.contextmanager
def scram_quorum(root: Path) -> Iterator[tuple[Quorum, Path]]:
    """Three `mlog serve` controllers with SASL_PLAINTEXT client listeners, alice a SCRAM user.

    alice's credential is set through the leader's CONTROLLER listener with the controllers'
    certificate (`mlog users scram-set`, as an operator bootstraps the first user); the
    quorum and the client config that logs in as alice (`--command-config`) are yielded.
    Every node is stopped after.
    """
    quorum = Quorum(
        root,
        timers={**TIMERS, "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256"},
        protocol="SASL_PLAINTEXT",
    )
    quorum.start_all()
    try:
        leader = quorum_leader(quorum)
        mlog(
            *("users", "scram-set", "--name", "alice", "--mechanism", "SCRAM-SHA-512"),
            "--password-stdin",
            *("--bootstrap-server", quorum.nodes[leader].controller_address),
            *("--command-config", str(quorum.controller_command_config())),
            stdin=PASSWORD + "\n",
        )
        alice = root / "alice.properties"
        alice.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
            f"sasl.username=alice\nsasl.password={PASSWORD}\n"
        )
        yield quorum, alice
    finally:
        quorum.stop_all()
