"""Broker epochs and incarnation ids only for DESCRIBE on the cluster: issue #54, finding 3.

A broker epoch (and the incarnation id) is all a forged BrokerHeartbeat needs besides the right
to send one. Before the fix the anonymous ImageAt answer carried every broker's, and FetchLog,
Diff and History carried them to every log reader. Now ImageAt (now and past), FetchLog, Diff
and History hide them from a principal that may not DESCRIBE the cluster (epoch -1, the zero
incarnation id, "(hidden)"), the way credentials are redacted there.
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

import pytest

from api.client.admin import AdminClient
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    BrokerRegistrationChangeRecord,
    PatternType,
    Record,
    RegisterBrokerRecord,
    ResourceType,
    UnregisterBrokerRecord,
)
from records.uuids import Uuid
from replay.controller.authorizer import CLUSTER_NAME, AuthorizerConfig
from replay.controller.commands import BrokerAction, ControllerResult, RegisterBroker
from replay.timetravel import Entity
from tests.support.server_thread import running_server

ANONYMOUS = "User:ANONYMOUS"
BROKER_RECORDS = (RegisterBrokerRecord, UnregisterBrokerRecord, BrokerRegistrationChangeRecord)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    """A log where broker 1 registered, was fenced and registered again, and broker 2 once."""
    folder = tmp_path / "log"
    with MetadataService.open(folder) as service:
        controller = service.controller
        for broker_id in (1, 2):
            request = RegisterBroker(broker_id=broker_id)
            service.execute(partial(controller.register_broker, request=request))
        service.execute(lambda image: controller.change_broker(image, 1, BrokerAction.FENCE))
        service.execute(partial(controller.register_broker, request=RegisterBroker(broker_id=1)))
    return folder


def _keys(log_dir: Path) -> tuple[set[int], set[Uuid]]:
    """Every broker epoch and incarnation id stored in the log."""
    with MetadataService.open(log_dir) as service:
        records = [entry.record for entry in service.log.read()]
    epochs = {r.broker_epoch for r in records if isinstance(r, BROKER_RECORDS)}
    incarnations = {r.incarnation_id for r in records if isinstance(r, RegisterBrokerRecord)}
    return epochs, incarnations


def _grant(log_dir: Path, *operations: AclOperation) -> None:
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


def _brokers(records: list[Record]) -> list[Record]:
    return [r for r in records if isinstance(r, BROKER_RECORDS)]


def _shown(records: list[Record]) -> tuple[set[int], set[Uuid]]:
    brokers = _brokers(records)
    assert brokers  # the brokers themselves are shown
    epochs = {r.broker_epoch for r in brokers if isinstance(r, BROKER_RECORDS)}
    incarnations = {r.incarnation_id for r in brokers if isinstance(r, RegisterBrokerRecord)}
    return epochs, incarnations


def _read(address: str, *, log: bool) -> tuple[list[Record], list[Record], list[Record], str]:
    """ImageAt now; with `log` also FetchLog, ImageAt at offset 3, Diff and History as text."""

    async def read() -> tuple[list[Record], list[Record], list[Record], str]:
        async with await AdminClient.connect(address) as client:
            now = list((await client.image_at()).write())
            if not log:
                return now, [], [], ""
            entries, _ = await client.fetch_log(0)
            past = list((await client.image_at(at_offset=3)).write())
            _, _, changes = await client.diff("1")  # after both registrations
            history = await client.history(Entity(broker=1))
            text = repr([c.text() for c in changes]) + repr([h.description for h in history])
            return now, [e.record for e in entries], past, text

    return asyncio.run(read())


def _no_key_in(text: str, epochs: set[int], incarnations: set[Uuid]) -> None:
    for incarnation in incarnations:
        assert str(incarnation) not in text
    for epoch in epochs:
        assert f"epoch {epoch}" not in text and f"{epoch} -> " not in text


def test_anonymous_image_at_shows_brokers_without_their_keys(log_dir: Path) -> None:
    epochs, incarnations = _keys(log_dir)
    with running_server(log_dir, brokers=0, authorizer=AuthorizerConfig()) as server:
        now, _, _, _ = _read(server.address, log=False)
    shown_epochs, shown_incarnations = _shown(now)
    assert {r.broker_id for r in _brokers(now) if isinstance(r, RegisterBrokerRecord)} == {1, 2}
    assert shown_epochs == {-1} and shown_incarnations == {Uuid.ZERO}
    assert not shown_epochs & epochs and not shown_incarnations & incarnations


def test_a_log_reader_without_describe_gets_no_broker_keys(log_dir: Path) -> None:
    epochs, incarnations = _keys(log_dir)
    _grant(log_dir, AclOperation.CLUSTER_ACTION)  # a broker's principal: reads the log
    with running_server(log_dir, brokers=0, authorizer=AuthorizerConfig()) as server:
        now, fetched, past, text = _read(server.address, log=True)
    for records in (now, fetched, past):
        assert _shown(records) == ({-1}, {Uuid.ZERO})
    _no_key_in(text, epochs, incarnations)
    assert "epoch (hidden)" in text and "incarnation_id (hidden) -> (hidden)" in text


def test_a_principal_with_describe_sees_the_broker_keys(log_dir: Path) -> None:
    epochs, incarnations = _keys(log_dir)
    _grant(log_dir, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE)
    with running_server(log_dir, brokers=0, authorizer=AuthorizerConfig()) as server:
        now, fetched, past, text = _read(server.address, log=True)
    assert _shown(fetched) == (epochs, incarnations)
    for records in (now, past):
        shown_epochs, shown_incarnations = _shown(records)
        assert shown_epochs <= epochs and shown_incarnations <= incarnations
    (broker_1,) = [r for r in now if isinstance(r, RegisterBrokerRecord) and r.broker_id == 1]
    assert f"epoch {broker_1.broker_epoch}" in text and str(broker_1.incarnation_id) in text
    assert "(hidden)" not in text
