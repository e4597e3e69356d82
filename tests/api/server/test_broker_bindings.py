"""Broker ids bound to principals (`broker.principals`): issue #54, finding 3.

Before the binding any holder of CLUSTER_ACTION acted as every broker id: a broker's principal
heartbeated as broker 11 with WantFence and fenced it, and registered broker 20 with the
endpoint `evil.example`, which Metadata then advertised. The requests here are built from kio's
schemas and answered by `KafkaApis` in process, for the session a listener authenticated.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.client.admin import AdminClient
from api.protocol import codec, private
from api.protocol.connection import Connection, Request
from api.server.broker_bindings import NO_BINDINGS, BrokerBindings, parse_broker_principals
from api.server.config import ServerConfigError, server_config
from api.server.kafka.base import Listener, Session
from api.server.kafka.dispatch import KafkaApis
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
from replay.controller.authorizer import CLUSTER_NAME, Authorizer, AuthorizerConfig
from replay.controller.commands import (
    BrokerAction,
    ControllerResult,
    CreatableTopic,
    RegisterBroker,
)
from replay.controller.errors import ApiError, ErrorCode
from tests.support.server_thread import running_server

CLUSTER_ID = "c1"
BROKER_A = Session(principal="User:broker-a", host="10.0.0.1")
BROKER_B = Session(principal="User:broker-b", host="10.0.0.2")
ROOT = Session(principal="User:root", host="10.0.0.3")
BINDINGS = "User:broker-a=1,2;User:broker-b=10-19"


class Controller:
    """A service and its Kafka and private APIs, with an authorizer and broker bindings."""

    def __init__(self, path: Path, bindings: BrokerBindings, *, authorizer: bool = True) -> None:
        self.service = MetadataService.open(path)
        self.authorizer = (
            Authorizer(AuthorizerConfig(super_users=frozenset({ROOT.principal})))
            if authorizer
            else None
        )
        listener = Listener(host="127.0.0.1", port=9092, cluster_id=CLUSTER_ID)
        self.kafka = KafkaApis(self.service, listener, self.authorizer, broker_bindings=bindings)
        self.private = PrivateApis(self.service, self.authorizer, bindings=bindings)
        self.loop = asyncio.new_event_loop()
        self.epochs: dict[int, int] = {}
        # Both brokers' principals hold CLUSTER_ACTION, as docs/brokers.md tells brokers to.
        grants = tuple(
            AccessControlEntryRecord(
                id=Uuid.random(),
                resource_type=ResourceType.CLUSTER,
                resource_name=CLUSTER_NAME,
                pattern_type=PatternType.LITERAL,
                principal=session.principal,
                host="*",
                operation=AclOperation.CLUSTER_ACTION,
                permission_type=AclPermissionType.ALLOW,
            )
            for session in (BROKER_A, BROKER_B)
        )
        self.service.execute(lambda image: ControllerResult(records=grants, response=None))

    def close(self) -> None:
        self.loop.close()
        self.service.close()

    @property
    def end(self) -> int:
        return self.service.log.end_offset

    def ask(self, api_key: int, version: int, session: Session, **values: Any) -> Any:
        entity = codec.build(codec.request_class(api_key, version), **values)
        frame = codec.encode_request(entity, correlation_id=3, client_id="broker")
        (event,) = Connection().receive(frame)
        assert isinstance(event, Request)
        answer = self.loop.run_until_complete(self.kafka.handle(event.request, session))
        return codec.decode_response(api_key, version, codec.encode_response(3, answer)[4:])[1]

    def register(self, broker_id: int, session: Session, host: str | None = None) -> Any:
        answer = self.ask(
            62,
            4,
            session,
            broker_id=broker_id,
            cluster_id=CLUSTER_ID,
            incarnation_id=uuid.uuid4(),
            listeners=[
                {
                    "name": "PLAINTEXT",
                    "host": host or f"b{broker_id}",
                    "port": 9092,
                    "security_protocol": 0,
                }
            ],
            features=[
                {"name": "metadata.version", "min_supported_version": 1, "max_supported_version": 2}
            ],
            rack=None,
        )
        if answer.error_code == 0:
            self.epochs[broker_id] = int(answer.broker_epoch)
        return answer

    def heartbeat(self, broker_id: int, session: Session, *, fence: bool = False) -> Any:
        return self.ask(
            63,
            1,
            session,
            broker_id=broker_id,
            broker_epoch=self.epochs[broker_id],
            current_metadata_offset=self.service.image.provenance.offset,
            want_fence=fence,
            want_shut_down=False,
        )

    def alter(self, broker_id: int, session: Session, name: str, isr: list[int]) -> Any:
        topic = self.service.image.topics.get_by_name(name)
        assert topic is not None
        p = topic.partitions[0]
        return self.ask(
            56,
            3,
            session,
            broker_id=broker_id,
            broker_epoch=self.epochs[broker_id],
            topics=[
                {
                    "topic_id": uuid.UUID(bytes=topic.topic_id.bytes),
                    "partitions": [
                        {
                            "partition_index": 0,
                            "leader_epoch": p.leader_epoch,
                            "new_isr_with_epochs": [
                                {"broker_id": b, "broker_epoch": self.epochs[b]} for b in isr
                            ],
                            "leader_recovery_state": 0,
                            "partition_epoch": p.partition_epoch,
                        }
                    ],
                }
            ],
        )

    def fenced(self, broker_id: int) -> bool:
        broker = self.service.image.cluster.get(broker_id)
        assert broker is not None
        return broker.fenced

    def registered_hosts(self) -> set[str]:
        """Every host a registered broker's endpoints name (what brokers and clients learn)."""
        return {
            endpoint.host
            for broker in self.service.image.cluster.sorted()
            for endpoint in broker.end_points
        }

    def up(self, broker_id: int, session: Session) -> None:
        assert self.register(broker_id, session).error_code == 0
        assert self.heartbeat(broker_id, session).is_fenced is False


@pytest.fixture
def controller(tmp_path: Path) -> Iterator[Controller]:
    made = Controller(tmp_path / "log", parse_broker_principals(BINDINGS))
    yield made
    made.close()


def test_a_broker_principal_cannot_fence_another_broker(controller: Controller) -> None:
    c = controller
    c.up(11, BROKER_B)
    start = c.end
    forged = c.heartbeat(11, BROKER_A, fence=True)  # broker-a knows 11's epoch (the log's)
    assert forged.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert c.end == start and not c.fenced(11)
    assert c.heartbeat(11, BROKER_B, fence=True).error_code == 0  # its own principal may
    assert c.fenced(11)


def test_a_broker_principal_cannot_register_an_unbound_id(controller: Controller) -> None:
    c = controller
    start = c.end
    for broker_id in (20, 11, 3):
        refused = c.register(broker_id, BROKER_A, host="evil.example")
        assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert c.end == start
    assert c.service.image.cluster.get(20) is None
    assert "evil.example" not in c.registered_hosts()
    c.up(1, BROKER_A)
    c.up(12, BROKER_B)
    assert c.registered_hosts() == {"b1", "b12"}


def test_a_broker_principal_changes_isrs_only_as_its_own_ids(controller: Controller) -> None:
    c = controller
    c.up(1, BROKER_A)
    c.up(2, BROKER_A)
    c.up(11, BROKER_B)
    (result,) = c.service.execute(
        lambda image: c.service.controller.create_topics(
            image, [CreatableTopic(name="t", assignments=((0, (11, 1, 2)),))]
        )
    )
    assert result.outcome.ok
    start = c.end
    forged = c.alter(11, BROKER_A, "t", [11])  # broker-a shrinks 11's ISR as its leader
    assert forged.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert c.end == start
    topic = c.service.image.topics.get_by_name("t")
    assert topic is not None and topic.partitions[0].isr == (11, 1, 2)
    shrunk = c.alter(11, BROKER_B, "t", [11, 1])
    assert shrunk.error_code == 0 and int(shrunk.topics[0].partitions[0].error_code) == 0


def test_the_refusal_names_the_key_and_the_bound_ids(controller: Controller) -> None:
    c = controller
    with pytest.raises(ApiError, match=r"its bound broker ids are 1,2 \(broker.principals"):
        c.private.bindings.require(c.kafka.gate, BROKER_A, 11)
    unbound = Session(principal="User:broker-c")
    with pytest.raises(ApiError, match="bound broker ids are none"):
        c.private.bindings.require(c.kafka.gate, unbound, 11)


def test_with_an_authorizer_and_no_bindings_only_super_users_act_as_brokers(
    tmp_path: Path,
) -> None:
    c = Controller(tmp_path / "log", NO_BINDINGS)
    try:
        start = c.end
        refused = c.register(1, BROKER_A)
        assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert c.end == start
        assert c.register(1, ROOT).error_code == 0  # a super user acts for any id
        assert c.heartbeat(1, ROOT).error_code == 0
    finally:
        c.close()


def test_without_an_authorizer_bindings_apply_once_configured(tmp_path: Path) -> None:
    open_ = Controller(tmp_path / "open", NO_BINDINGS, authorizer=False)
    try:
        assert open_.register(20, BROKER_A).error_code == 0  # trusts every client, as before
    finally:
        open_.close()
    bound = Controller(tmp_path / "bound", parse_broker_principals(BINDINGS), authorizer=False)
    try:
        assert bound.register(20, BROKER_A).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert bound.register(1, BROKER_A).error_code == 0
    finally:
        bound.close()


def test_private_broker_changes_need_alter_or_a_bound_id(controller: Controller) -> None:
    c = controller
    c.up(11, BROKER_B)
    start = c.end

    def call(request: Any, session: Session, handler: Any) -> Any:
        return c.loop.run_until_complete(handler(request, session))

    fence = private.ChangeBroker(broker_id=11, action=BrokerAction.FENCE)
    with pytest.raises(ApiError) as refused:
        call(fence, BROKER_A, c.private.change_broker)
    assert refused.value.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(ApiError):
        call(RegisterBroker(broker_id=20), BROKER_A, c.private.register_broker)
    assert c.end == start and not c.fenced(11)
    assert call(fence, BROKER_B, c.private.change_broker).broker_id == 11
    assert call(RegisterBroker(broker_id=20), ROOT, c.private.register_broker).broker_id == 20


def test_unregister_broker_stays_an_operators(controller: Controller) -> None:
    c = controller
    c.up(1, BROKER_A)
    refused = c.ask(64, 0, BROKER_A, broker_id=1)
    assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED  # ALTER, as Kafka


def test_the_key_parses_ids_ranges_and_principals_with_equals_signs() -> None:
    bindings = parse_broker_principals(
        " User:broker-a = 1, 2 ; User:CN=broker-b,O=example=10-19;User:x=0"
    )
    assert bindings.bound("User:broker-a", 2) and not bindings.bound("User:broker-a", 3)
    assert bindings.bound("User:CN=broker-b,O=example", 15)
    assert not bindings.bound("User:CN=broker-b,O=example", 20)
    assert bindings.ids_text("User:CN=broker-b,O=example") == "10-19"
    config = server_config({"broker.principals": BINDINGS})
    assert config.broker_bindings.bound("User:broker-b", 19)
    assert server_config({}).broker_bindings == NO_BINDINGS


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("", "is empty"),
        (";", "is empty"),
        ("User:a=1;;User:b=2", "empty entry"),
        ("User:a", "is not User:<name>=<ids>"),
        ("broker-a=1", "is not User:<name>=<ids>"),
        ("Group:a=1", "is not User:<name>=<ids>"),
        ("User:=1", "is not User:<name>=<ids>"),
        ("User:a=", "is not a broker id"),
        ("User:a=x", "is not a broker id"),
        ("User:a=-1", "is not a broker id"),
        ("User:a=1,,2", "is not a broker id"),
        ("User:a=1-2-3", "is not a broker id"),
        ("User:a=\u0661", "is not a broker id"),
        ("User:a=5-3", "is empty; write it low-high"),
        ("User:a=2147483648", "past the largest broker id"),
        ("User:a=1;User:a=2", "bound twice"),
        ("User:a=1-5;User:b=5", "broker id 5 is bound to both 'User:a' and 'User:b'"),
        ("User:a=1,1", "broker id 1 is bound to both"),
    ],
)
def test_a_bad_value_is_refused_at_start_in_one_line(value: str, says: str) -> None:
    with pytest.raises(ServerConfigError) as refused:
        server_config({"broker.principals": value})
    text = str(refused.value)
    assert text.startswith("broker.principals: ") and says in text and "\n" not in text


def test_a_server_refuses_an_unbound_id_over_the_network(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    anonymous = Session(principal="User:ANONYMOUS")
    Controller(log_dir, NO_BINDINGS).close()  # the brokers' grants, in the log
    grant = AccessControlEntryRecord(
        id=Uuid.random(),
        resource_type=ResourceType.CLUSTER,
        resource_name=CLUSTER_NAME,
        pattern_type=PatternType.LITERAL,
        principal=anonymous.principal,
        host="*",
        operation=AclOperation.CLUSTER_ACTION,
        permission_type=AclPermissionType.ALLOW,
    )
    with MetadataService.open(log_dir) as service:
        service.execute(lambda image: ControllerResult(records=(grant,), response=None))
    config = server_config({"broker.principals": "User:ANONYMOUS=1"})
    with running_server(
        log_dir,
        brokers=0,
        authorizer=AuthorizerConfig(),
        broker_bindings=config.broker_bindings,
    ) as server:

        async def register(broker_id: int) -> int:
            async with await AdminClient.connect(server.address) as client:
                answer = await client.request(
                    62,
                    broker_id=broker_id,
                    cluster_id="test-cluster",
                    incarnation_id=uuid.uuid4(),
                    listeners=[
                        {
                            "name": "PLAINTEXT",
                            "host": "evil.example",
                            "port": 9092,
                            "security_protocol": 0,
                        }
                    ],
                    features=[
                        {
                            "name": "metadata.version",
                            "min_supported_version": 1,
                            "max_supported_version": 2,
                        }
                    ],
                    rack=None,
                )
                return int(answer.error_code)

        assert asyncio.run(register(20)) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert server.service.image.cluster.get(20) is None
        assert asyncio.run(register(1)) == 0
