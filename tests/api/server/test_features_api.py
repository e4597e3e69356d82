"""UpdateFeatures (57) and ApiVersions' feature fields, as a foreign client meets them.

Requests are kio entities written to a real server's socket and answers read back with kio;
the authorization cases drive `KafkaApis` in process with the principal under test. The
voter check (`feature_support`) asks real servers' ApiVersions.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import errors as kerrors
from kafka.admin import KafkaAdminClient

from api.protocol import codec
from api.protocol.connection import Connection, Request
from api.server.feature_support import (
    SUPPORTED_FEATURES_ENV,
    QuorumSupport,
    node_supported_features,
)
from api.server.kafka.base import Listener, Session
from api.server.kafka.dispatch import KafkaApis
from api.server.server import MetadataServer
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    FeatureLevelRecord,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.authorizer import CLUSTER_NAME, Authorizer, AuthorizerConfig
from replay.controller.commands import ControllerResult
from replay.controller.errors import ApiError, ErrorCode
from tests.support.server_thread import running_server

TIMEOUT = datetime.timedelta(seconds=30)
INVALID_UPDATE_VERSION = int(ErrorCode.INVALID_UPDATE_VERSION)


async def _exchange(port: int, api_key: int, version: int, **values: Any) -> Any:
    """One request written with kio to the server's socket; the answer read with kio."""
    entity = codec.build(codec.request_class(api_key, version), **values)
    frame = codec.encode_request(entity, correlation_id=11, client_id="foreign")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(frame)
        await writer.drain()
        size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
        data = await reader.readexactly(size)
    finally:
        writer.close()
        await writer.wait_closed()
    correlation, body = codec.decode_response(api_key, version, data)
    assert correlation == 11
    return body


def ask(port: int, api_key: int, version: int, **values: Any) -> Any:
    return asyncio.run(_exchange(port, api_key, version, **values))


def versions(port: int, version: int = 3) -> Any:
    return ask(port, 18, version, client_software_name="foreign", client_software_version="1")


def update(port: int, version: int, *items: dict[str, Any], validate_only: bool = False) -> Any:
    extra = {} if version == 0 else {"validate_only": validate_only}
    return ask(port, 57, version, timeout=TIMEOUT, feature_updates=list(items), **extra)


def item(name: str, level: int, kind: int = 1, *, allow_downgrade: bool = False) -> dict[str, Any]:
    return {
        "feature": name,
        "max_version_level": level,
        "upgrade_type": kind,
        "allow_downgrade": allow_downgrade,
    }


def finalized(answer: Any) -> dict[str, int]:
    return {str(f.name): int(f.max_version_level) for f in answer.finalized_features}


def supported(answer: Any) -> dict[str, tuple[int, int]]:
    return {
        str(f.name): (int(f.min_version), int(f.max_version)) for f in answer.supported_features
    }


def feature_records(server: MetadataServer) -> list[tuple[str, int]]:
    """The FeatureLevelRecords of the server's log (read while it waits for requests)."""
    records = [entry.record for entry in server.service.log.read()]
    return [(r.name, r.feature_level) for r in records if isinstance(r, FeatureLevelRecord)]


@pytest.fixture
def running(tmp_path: Path) -> Iterator[MetadataServer]:
    with running_server(tmp_path / "log") as started:
        yield started


@pytest.fixture
def server(running: MetadataServer) -> int:
    return running.port


def test_api_versions_carries_supported_and_finalized_features(server: int) -> None:
    v4 = versions(server, 4)
    assert supported(v4) == {"metadata.version": (1, 2), "kraft.version": (0, 1)}
    assert finalized(v4) == {"metadata.version": 2}
    assert int(v4.finalized_features_epoch) >= 0
    # v3, as Kafka answers it: a feature's lowest level 0 is reported as 1.
    assert supported(versions(server, 3))["kraft.version"] == (1, 1)
    assert 57 in {int(k.api_key) for k in v4.api_keys}
    assert not versions(server, 2).__dataclass_fields__.get("supported_features")


def test_an_upgrade_is_validated_then_written_and_shown(
    running: MetadataServer, server: int
) -> None:
    checked = update(server, 1, item("kraft.version", 1), validate_only=True)
    assert int(checked.error_code) == 0
    assert [(r.feature, int(r.error_code)) for r in checked.results] == [("kraft.version", 0)]
    assert "kraft.version" not in finalized(versions(server, 4))
    done = update(server, 1, item("kraft.version", 1))
    assert int(done.error_code) == 0 and int(done.results[0].error_code) == 0
    assert finalized(versions(server, 4))["kraft.version"] == 1
    again = update(server, 1, item("kraft.version", 1))  # the level it has: nothing written
    assert int(again.error_code) == 0
    assert feature_records(running).count(("kraft.version", 1)) == 1


@pytest.mark.parametrize(
    ("version", "items", "said"),
    [
        (1, [item("x.version", 1)], "unknown feature 'x.version'"),
        (1, [item("metadata.version", 3)], "not supported by this version"),
        (1, [item("metadata.version", 1)], "needs a downgrade"),
        (1, [item("metadata.version", 1, 2)], "cannot be downgraded safely"),
        (1, [item("metadata.version", 1, 3)], "cannot be downgraded even unsafely"),
        (1, [item("kraft.version", 1, 2)], "is an upgrade, not a downgrade"),
        (0, [item("metadata.version", 1, allow_downgrade=True)], "downgraded safely"),
        (1, [item("kraft.version", 1), item("metadata.version", 9)], "not supported"),
    ],
)
def test_refused_updates_write_nothing_and_say_why(
    running: MetadataServer, server: int, version: int, items: list[dict[str, Any]], said: str
) -> None:
    before = feature_records(running)
    answer = update(server, version, *items)
    assert int(answer.error_code) == INVALID_UPDATE_VERSION
    assert said in answer.error_message
    assert [int(r.error_code) for r in answer.results] == [INVALID_UPDATE_VERSION] * len(items)
    assert feature_records(running) == before
    assert "kraft.version" not in finalized(versions(server, 4))


def test_version_2_answers_with_the_top_level_error_only(server: int) -> None:
    refused = update(server, 2, item("metadata.version", 5))
    assert int(refused.error_code) == INVALID_UPDATE_VERSION
    assert not hasattr(refused, "results")
    assert int(update(server, 2, item("kraft.version", 1)).error_code) == 0


def test_an_unknown_upgrade_type_is_refused(server: int) -> None:
    answer = update(server, 1, item("kraft.version", 1, 7))
    assert int(answer.results[0].error_code) == INVALID_UPDATE_VERSION
    assert "unknown upgrade type 7" in answer.results[0].error_message


class Apis:
    """KafkaApis with an authorizer (`User:root` super), answering as the server does."""

    def __init__(self, path: Path) -> None:
        self.service = MetadataService.open(path)
        listener = Listener(host="127.0.0.1", port=9092, node_id=0, cluster_id="c")
        config = AuthorizerConfig(super_users=frozenset({"User:root"}))
        self.kafka = KafkaApis(self.service, listener, Authorizer(config))

    def ask(self, session: Session, *items: dict[str, Any]) -> Any:
        entity = codec.build(
            codec.request_class(57, 1), timeout=TIMEOUT, feature_updates=list(items)
        )
        (event,) = Connection().receive(codec.encode_request(entity, correlation_id=3))
        assert isinstance(event, Request)
        answer = asyncio.run(self.kafka.handle(event.request, session))
        data = codec.encode_response(3, answer)
        assert data == codec.encode_response_with_kio(3, answer)
        return codec.decode_response(57, 1, data[4:])[1]


def test_update_features_needs_alter_on_the_cluster(tmp_path: Path) -> None:
    apis = Apis(tmp_path / "log")
    bob = Session(principal="User:bob", host="10.0.0.2")
    try:
        refused = apis.ask(bob, item("kraft.version", 1))
        assert int(refused.error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert int(refused.results[0].error_code) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert "User:bob may not Alter the cluster" in refused.error_message
        assert "kraft.version" not in apis.service.image.features.levels
        grant = AccessControlEntryRecord(
            id=Uuid.random(),
            resource_type=ResourceType.CLUSTER,
            resource_name=CLUSTER_NAME,
            pattern_type=PatternType.LITERAL,
            principal="User:bob",
            host="*",
            operation=AclOperation.ALTER,
            permission_type=AclPermissionType.ALLOW,
        )
        apis.service.execute(lambda image: ControllerResult(records=(grant,), response=None))
        assert int(apis.ask(bob, item("kraft.version", 1)).error_code) == 0
        assert apis.service.image.features.levels["kraft.version"] == 1
    finally:
        apis.service.close()


class Voters:
    """A quorum node's view of its voters: this node (id 1) and the servers given."""

    def __init__(self, others: dict[int, int]) -> None:
        self.node_id = 1
        self._others = others

    def voter_addresses(self) -> dict[int, tuple[str, int]]:
        return {1: ("127.0.0.1", 1), **{n: ("127.0.0.1", p) for n, p in self._others.items()}}


def test_every_voter_is_asked_and_one_that_falls_short_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_server(tmp_path / "a") as current:
        monkeypatch.setenv(SUPPORTED_FEATURES_ENV, "kraft.version=0")
        with running_server(tmp_path / "b") as older:
            monkeypatch.delenv(SUPPORTED_FEATURES_ENV)
            asyncio.run(QuorumSupport(Voters({2: current.port})).check({"kraft.version": 1}))
            with pytest.raises(ApiError) as refused:
                asyncio.run(
                    QuorumSupport(Voters({2: current.port, 3: older.port})).check(
                        {"kraft.version": 1}
                    )
                )
    assert refused.value.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert "voter 3 supports 0..0 of kraft.version, not level 1" in refused.value.message


def test_a_voter_that_does_not_answer_refuses_the_upgrade(tmp_path: Path) -> None:
    with running_server(tmp_path / "a") as gone:
        port = gone.port
    support = QuorumSupport(Voters({2: port}), timeout_ms=1000)
    with pytest.raises(ApiError) as refused:
        asyncio.run(support.check({"metadata.version": 2}))
    assert f"voter 2 (127.0.0.1:{port}) cannot tell" in refused.value.message


def test_the_test_hook_only_lowers_what_this_code_supports() -> None:
    assert node_supported_features({})["metadata.version"].max_level == 2
    capped = node_supported_features({SUPPORTED_FEATURES_ENV: "metadata.version=1"})
    assert capped["metadata.version"].max_level == 1
    for bad in ("metadata.version=3", "x=1", "metadata.version"):
        with pytest.raises(ValueError, match=SUPPORTED_FEATURES_ENV):
            node_supported_features({SUPPORTED_FEATURES_ENV: bad})


def test_kafka_python_describes_and_updates_features(running: MetadataServer) -> None:
    admin = KafkaAdminClient(bootstrap_servers=running.address, request_timeout_ms=10_000)
    try:
        described = admin.describe_features()
        assert described["metadata.version"]["supported"] == (1, 2)
        assert described["metadata.version"]["finalized"] == (2, 2)
        assert admin.update_features({"kraft.version": 1}, validate_only=True) == {
            "kraft.version": "OK"
        }
        assert "finalized" not in admin.describe_features().get("kraft.version", {})
        assert admin.update_features({"kraft.version": 1}) == {"kraft.version": "OK"}
        assert admin.describe_features()["kraft.version"]["finalized"] == (1, 1)
        with pytest.raises(kerrors.InvalidUpdateVersionError):
            admin.update_features({"metadata.version": ("SAFE_DOWNGRADE", 1)})
    finally:
        admin.close()
