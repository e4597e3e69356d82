"""Attacks of issue #31 on SCRAM secrets: finding 1 (the log-reading APIs served them).

Before the fix FetchLog and ImageAt (and so `mlog log dump --bootstrap-server`) returned every
`UserScramCredentialRecord` as stored, salt, StoredKey and ServerKey, to anyone with DESCRIBE on
the cluster and to anonymous clients of a server without an authorizer; `mlog log dump --output
json` printed them too. Now no API sends them to anyone (credentials carry mechanism and
iterations, their salt and keys zeroed), reading the log needs CLUSTER_ACTION on the cluster,
and the local dump shows them only with `--show-secrets`.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterable
from pathlib import Path

import pytest

from api.client.admin import AdminClient
from api.client.connection import RemoteError
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    Record,
    ResourceType,
    UserScramCredentialRecord,
)
from records.uuids import Uuid
from replay.controller.authorizer import CLUSTER_NAME, AuthorizerConfig
from replay.controller.commands import ControllerResult
from replay.timetravel import Entity
from tests.support.attacks import ADMIN, ADMIN_PASSWORD, seed_user
from tests.support.cli import mlog
from tests.support.server_thread import running_server

ANONYMOUS = "User:ANONYMOUS"


def _secrets(log_dir: Path) -> list[bytes]:
    """Every salt and key stored in the log at `log_dir`."""
    with MetadataService.open(log_dir) as service:
        return [
            secret
            for entry in service.log.read()
            if isinstance(entry.record, UserScramCredentialRecord)
            for secret in (entry.record.salt, entry.record.stored_key, entry.record.server_key)
        ]


def _grant(log_dir: Path, *operations: AclOperation) -> None:
    """ALLOW `User:ANONYMOUS` each of `operations` on the cluster."""
    records = tuple(
        AccessControlEntryRecord(
            id=Uuid.random(),
            resource_type=ResourceType.CLUSTER,
            resource_name=CLUSTER_NAME,
            pattern_type=PatternType.LITERAL,
            principal=ANONYMOUS,
            host="*",
            operation=op,
            permission_type=AclPermissionType.ALLOW,
        )
        for op in operations
    )
    with MetadataService.open(log_dir) as service:
        service.execute(lambda image: ControllerResult(records=records, response=None))


def _no_secret(text: str, secrets: Iterable[bytes]) -> None:
    for secret in secrets:
        assert secret.hex() not in text
        assert base64.b64encode(secret).decode() not in text
        assert repr(secret)[2:-1] not in text


def _credentials(records: Iterable[Record]) -> list[UserScramCredentialRecord]:
    return [r for r in records if isinstance(r, UserScramCredentialRecord)]


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "log"
    seed_user(folder, ADMIN, ADMIN_PASSWORD)
    seed_user(folder, "alice", "alice-secret", iterations=4096)
    return folder


def _read_everything(address: str) -> tuple[list[Record], list[Record], str]:
    """FetchLog's records, ImageAt's records, and Diff and History as text, anonymously."""

    async def read() -> tuple[list[Record], list[Record], str]:
        async with await AdminClient.connect(address) as client:
            entries, _ = await client.fetch_log(0)
            image = await client.image_at()
            _, _, changes = await client.diff("0")
            history = await client.history(Entity(user=ADMIN))
            return [e.record for e in entries], list(image.write()), repr((changes, history))

    return asyncio.run(read())


def test_no_api_sends_a_salt_or_key_to_an_anonymous_client(log_dir: Path) -> None:
    secrets = _secrets(log_dir)
    assert len(secrets) == 12
    with running_server(log_dir, brokers=1) as server:  # no authorizer: everyone may read
        fetched, imaged, text = _read_everything(server.address)
    for records in (fetched, imaged):
        credentials = _credentials(records)
        assert sorted((c.name, c.mechanism.name, c.iterations) for c in credentials) == [
            ("admin", "SCRAM_SHA_256", 8192),
            ("admin", "SCRAM_SHA_512", 8192),
            ("alice", "SCRAM_SHA_256", 4096),
            ("alice", "SCRAM_SHA_512", 4096),
        ]
        for credential in credentials:
            assert credential.salt == b"\x00"
            assert set(credential.stored_key) == set(credential.server_key) == {0}
        assert not {c.salt for c in credentials} & set(secrets)
    _no_secret(repr(fetched) + repr(imaged) + text, secrets)


def test_reading_the_log_needs_cluster_action(log_dir: Path) -> None:
    _grant(log_dir, AclOperation.DESCRIBE)
    with running_server(log_dir, brokers=1, authorizer=AuthorizerConfig()) as server:

        async def refused() -> None:
            async with await AdminClient.connect(server.address) as client:
                for read in (
                    lambda: client.fetch_log(0),
                    lambda: client.image_at(at_offset=0),
                    lambda: client.diff("0"),
                    lambda: client.history(Entity(user=ADMIN)),
                ):
                    with pytest.raises(RemoteError, match="CLUSTER_AUTHORIZATION_FAILED"):
                        await read()

        asyncio.run(refused())
    _grant(log_dir, AclOperation.CLUSTER_ACTION)
    with running_server(log_dir, brokers=1, authorizer=AuthorizerConfig()) as server:
        fetched, imaged, text = _read_everything(server.address)
    assert len(_credentials(fetched)) == len(_credentials(imaged)) == 4
    _no_secret(repr(fetched) + repr(imaged) + text, _secrets(log_dir))


def test_the_local_dump_shows_secrets_only_when_asked(log_dir: Path) -> None:
    data_dir = log_dir.parent
    secrets = _secrets(log_dir)
    for output in ("table", "json"):
        code, text = mlog(data_dir, "--output", output, "log", "dump")
        assert code == 0, text
        _no_secret(text, secrets)
    code, text = mlog(data_dir, "--output", "json", "log", "dump", "--show-secrets")
    assert code == 0, text
    shown = [json.loads(line)["record"] for line in text.splitlines()]
    salts = [r["data"]["salt"] for r in shown if "stored_key" in r["data"]]
    assert len(salts) == 4 and "AA==" not in salts
