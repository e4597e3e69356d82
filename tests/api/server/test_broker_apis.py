"""The broker-facing APIs driven as a foreign broker drives them, with Kafka's schemas (kio).

BrokerRegistration, BrokerHeartbeat, UnregisterBroker and AlterPartition frames are built
from kio's request classes, answered by `KafkaApis` in process, checked against kio's writer
and read back as the broker would. Session time is a fake clock; the active controller is a
flag the tests turn off and on again (a failover, as the quorum's leadership change shows it).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.client.admin import AdminClient
from api.protocol import codec
from api.protocol.connection import Connection, Request
from api.server.broker_bindings import NO_BINDINGS, BrokerBindings, parse_broker_principals
from api.server.kafka.base import Listener, Session
from api.server.kafka.dispatch import KafkaApis
from api.service.broker_liveness import BrokerLiveness
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PartitionRecord,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.authorizer import CLUSTER_NAME, Authorizer, AuthorizerConfig
from replay.controller.commands import ControllerResult, CreatableTopic
from replay.controller.errors import ErrorCode
from tests.support.cli import as_json, ok
from tests.support.server_thread import running_server

CLUSTER_ID = "c1"
BROKER = Session(principal="User:broker", host="10.0.0.1")
TIMEOUT_MS = 9000


class FailoverService(MetadataService):
    """A service whose active-controller flag a test turns off and on (a failover)."""

    active = True

    @property
    def is_active_controller(self) -> bool:
        return self.active


class Fleet:
    """A controller (service, liveness with a fake clock, Kafka APIs) and brokers talking to it."""

    def __init__(
        self,
        path: Path,
        authorizer: Authorizer | None = None,
        bindings: BrokerBindings = NO_BINDINGS,
    ) -> None:
        service = FailoverService.open(path)
        assert isinstance(service, FailoverService)
        self.service = service
        self.now = 1_000_000
        self.liveness = BrokerLiveness(
            self.service, session_timeout_ms=TIMEOUT_MS, clock_ms=lambda: self.now
        )
        listener = Listener(host="127.0.0.1", port=9092, cluster_id=CLUSTER_ID)
        self.kafka = KafkaApis(
            self.service, listener, authorizer, liveness=self.liveness, broker_bindings=bindings
        )
        self.epochs: dict[int, int] = {}
        self.loop = asyncio.new_event_loop()

    def close(self) -> None:
        self.loop.close()
        self.service.close()

    def ask(self, api_key: int, version: int, session: Session = BROKER, **values: Any) -> Any:
        """A request built from kio's schema, answered, checked against kio and read back."""
        entity = codec.build(codec.request_class(api_key, version), **values)
        frame = codec.encode_request(entity, correlation_id=3, client_id="broker")
        (event,) = Connection().receive(frame)
        assert isinstance(event, Request)
        answer = self.loop.run_until_complete(self.kafka.handle(event.request, session))
        data = codec.encode_response(3, answer)
        assert data == codec.encode_response_with_kio(3, answer)
        return codec.decode_response(api_key, version, data[4:])[1]

    def register(
        self, broker_id: int, *, cluster_id: str = CLUSTER_ID, incarnation: uuid.UUID | None = None
    ) -> Any:
        answer = self.ask(
            62,
            4,
            broker_id=broker_id,
            cluster_id=cluster_id,
            incarnation_id=incarnation or uuid.uuid4(),
            listeners=[
                {
                    "name": "PLAINTEXT",
                    "host": f"b{broker_id}",
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

    def heartbeat(
        self,
        broker_id: int,
        *,
        offset: int | None = None,
        fence: bool = False,
        shut_down: bool = False,
        epoch: int | None = None,
    ) -> Any:
        return self.ask(
            63,
            1,
            broker_id=broker_id,
            broker_epoch=self.epochs[broker_id] if epoch is None else epoch,
            current_metadata_offset=self.service.image.provenance.offset
            if offset is None
            else offset,
            want_fence=fence,
            want_shut_down=shut_down,
        )

    def up(self, *broker_ids: int) -> None:
        """Register and heartbeat brokers until they are unfenced."""
        for broker_id in broker_ids:
            assert self.register(broker_id).error_code == 0
            assert self.heartbeat(broker_id).is_fenced is False

    def topic(self, name: str, assignments: tuple[tuple[int, tuple[int, ...]], ...]) -> None:
        wanted = [CreatableTopic(name=name, assignments=assignments)]
        (result,) = self.service.execute(
            lambda image: self.service.controller.create_topics(image, wanted)
        )
        assert result.outcome.ok

    def partition(self, name: str, index: int = 0) -> PartitionRecord:
        topic = self.service.image.topics.get_by_name(name)
        assert topic is not None
        return topic.partitions[index]

    def topic_id(self, name: str) -> uuid.UUID:
        topic = self.service.image.topics.get_by_name(name)
        assert topic is not None
        return uuid.UUID(bytes=topic.topic_id.bytes)

    def alter(self, broker_id: int, name: str, isr: list[int], **epochs: int) -> Any:
        p = self.partition(name)
        return self.ask(
            56,
            3,
            broker_id=broker_id,
            broker_epoch=epochs.get("broker_epoch", self.epochs[broker_id]),
            topics=[
                {
                    "topic_id": self.topic_id(name),
                    "partitions": [
                        {
                            "partition_index": 0,
                            "leader_epoch": epochs.get("leader_epoch", p.leader_epoch),
                            "new_isr_with_epochs": [
                                {"broker_id": b, "broker_epoch": self.epochs.get(b, -1)}
                                for b in isr
                            ],
                            "leader_recovery_state": 0,
                            "partition_epoch": epochs.get("partition_epoch", p.partition_epoch),
                        }
                    ],
                }
            ],
        )

    def pass_time(self, ms: int, *, heartbeating: tuple[int, ...] = ()) -> list[int]:
        """Let `ms` pass in heartbeat intervals of 2 s; the session checks run after each."""
        fenced: list[int] = []
        step = 2000
        for _ in range(ms // step):
            self.now += step
            for broker_id in heartbeating:
                self.heartbeat(broker_id)
            fenced += self.loop.run_until_complete(self.liveness.check_sessions())
        return fenced

    def fenced(self, broker_id: int) -> bool:
        broker = self.service.image.cluster.get(broker_id)
        assert broker is not None
        return broker.fenced


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    made = Fleet(tmp_path / "log")
    yield made
    made.close()


def test_a_new_broker_is_fenced_until_its_heartbeat_shows_it_caught_up(fleet: Fleet) -> None:
    answer = fleet.register(1)
    assert answer.error_code == 0 and answer.broker_epoch > 0
    behind = fleet.heartbeat(1, offset=fleet.epochs[1] - 1)
    assert (behind.is_caught_up, behind.is_fenced) == (False, True)
    assert fleet.fenced(1)
    caught_up = fleet.heartbeat(1, offset=fleet.epochs[1])
    assert (caught_up.is_caught_up, caught_up.is_fenced, caught_up.should_shut_down) == (
        True,
        False,
        False,
    )
    assert not fleet.fenced(1)
    end = fleet.service.log.end_offset
    assert fleet.heartbeat(1).is_fenced is False
    assert fleet.service.log.end_offset == end  # a heartbeat that changes nothing writes nothing
    (contact,) = fleet.liveness.contacts()
    assert contact.metadata_offset == fleet.service.image.provenance.offset


def test_registration_checks_the_cluster_and_the_incarnation(fleet: Fleet) -> None:
    wrong = fleet.register(1, cluster_id="other")
    assert wrong.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    fleet.up(1)
    twin = fleet.register(1)  # another process with the same id while the first is alive
    assert twin.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    fleet.pass_time(TIMEOUT_MS + 1000)
    assert fleet.fenced(1)  # the first one's session expired
    assert fleet.register(1).error_code == 0  # now the new one is welcome


def test_a_silent_broker_is_fenced_after_the_session_timeout_and_its_leaders_move(
    fleet: Fleet,
) -> None:
    fleet.up(1, 2, 3)
    fleet.topic("t", ((0, (3, 1, 2)),))
    assert fleet.partition("t").leader == 3
    assert fleet.pass_time(8000, heartbeating=(1, 2)) == []  # within the timeout
    fenced = fleet.pass_time(2000, heartbeating=(1, 2))
    assert fenced == [3]
    assert fleet.fenced(3) and not fleet.fenced(1) and not fleet.fenced(2)
    p = fleet.partition("t")
    assert p.leader == 1 and p.isr == (1, 2)
    (reason,) = [c.fenced_reason for c in fleet.liveness.contacts() if c.broker_id == 3]
    assert reason is not None and "session expired" in reason
    back = fleet.heartbeat(3)  # it comes back: caught up, so unfenced again
    assert back.is_fenced is False and not fleet.fenced(3)


def test_alter_partition_is_accepted_and_refused_by_epoch(fleet: Fleet) -> None:
    fleet.up(1, 2, 3)
    fleet.topic("t", ((0, (1, 2, 3)),))
    before = fleet.partition("t")
    shrunk = fleet.alter(1, "t", [1, 2])
    (topic,) = shrunk.topics
    (item,) = topic.partitions
    assert item.error_code == 0 and list(item.isr) == [1, 2]
    assert item.partition_epoch == before.partition_epoch + 1
    assert fleet.partition("t").isr == (1, 2)

    def code(answer: Any) -> int:
        return int(answer.topics[0].partitions[0].error_code)

    stale = before.partition_epoch
    assert code(fleet.alter(1, "t", [1, 2, 3], partition_epoch=stale)) == (
        ErrorCode.INVALID_UPDATE_VERSION
    )
    assert code(fleet.alter(1, "t", [1, 2, 3], leader_epoch=before.leader_epoch - 1)) == (
        ErrorCode.FENCED_LEADER_EPOCH
    )
    assert code(fleet.alter(2, "t", [1, 2, 3])) == ErrorCode.INVALID_REQUEST  # not the leader
    assert code(fleet.alter(1, "t", [2, 3])) == ErrorCode.INVALID_REQUEST  # drops the leader
    fleet.heartbeat(3, fence=True)
    assert fleet.fenced(3)
    assert code(fleet.alter(1, "t", [1, 2, 3])) == ErrorCode.INELIGIBLE_REPLICA
    wrong = fleet.alter(1, "t", [1, 2], broker_epoch=fleet.epochs[1] + 1000)
    assert wrong.error_code == ErrorCode.STALE_BROKER_EPOCH
    fleet.heartbeat(3)
    grown = fleet.alter(1, "t", [1, 2, 3])
    assert code(grown) == 0 and fleet.partition("t").isr == (1, 2, 3)


def test_alter_partition_speaks_kafka_4s_versions_and_keeps_every_partition_recovered(
    fleet: Fleet,
) -> None:
    # Kafka 4.0 removed AlterPartition v0-1 (topics by name); v2 names topics by id and sends
    # the ISR as bare ids. Leader recovery state is not stored: RECOVERING is refused.
    assert codec.SUPPORTED_VERSIONS[56] == (2, 3)
    fleet.up(1, 2, 3)
    fleet.topic("t", ((0, (1, 2, 3)),))

    def v2(isr: list[int], recovery: int) -> Any:
        p = fleet.partition("t")
        partition = {
            "partition_index": 0,
            "leader_epoch": p.leader_epoch,
            "new_isr": isr,
            "leader_recovery_state": recovery,
            "partition_epoch": p.partition_epoch,
        }
        answer = fleet.ask(
            56,
            2,
            broker_id=1,
            broker_epoch=fleet.epochs[1],
            topics=[{"topic_id": fleet.topic_id("t"), "partitions": [partition]}],
        )
        (topic,) = answer.topics
        (item,) = topic.partitions
        return item

    refused = v2([1, 2], recovery=1)
    assert refused.error_code == ErrorCode.INVALID_REQUEST
    assert fleet.partition("t").isr == (1, 2, 3)
    shrunk = v2([1, 2], recovery=0)
    assert shrunk.error_code == 0 and list(shrunk.isr) == [1, 2]
    assert shrunk.leader_recovery_state == 0
    assert fleet.partition("t").isr == (1, 2)


def test_controlled_shutdown_moves_leaders_off_before_saying_shut_down(fleet: Fleet) -> None:
    fleet.up(1, 2)
    fleet.topic("t", ((0, (1, 2)),))
    fleet.topic("u", ((0, (1,)),))
    answer = fleet.heartbeat(1, shut_down=True)
    assert answer.should_shut_down is True
    assert fleet.partition("t").leader == 2
    assert fleet.partition("u").leader == -1  # no other replica: leaderless, as in Kafka
    broker = fleet.service.image.cluster.get(1)
    assert broker is not None and broker.in_controlled_shutdown
    assert fleet.register(1).error_code == 0  # it restarts: a new incarnation is welcome
    gone = fleet.ask(64, 0, broker_id=2)
    assert gone.error_code == 0 and fleet.service.image.cluster.get(2) is None


def test_a_failover_neither_fences_live_brokers_nor_forgets_dead_ones(fleet: Fleet) -> None:
    fleet.up(1, 2, 3, 4)
    fleet.topic("t", ((0, (4, 1)),))
    assert fleet.pass_time(TIMEOUT_MS + 1000, heartbeating=(1, 2, 3)) == [4]  # dead before
    fleet.service.active = False  # leadership moves away ...
    assert fleet.heartbeat(1).error_code == ErrorCode.NOT_CONTROLLER
    assert fleet.pass_time(20_000) == []  # ... a follower fences nobody
    fleet.service.active = True  # ... and comes back after 20 s without a heartbeat here
    fleet.liveness.contacts()  # the node notices (any request or check does)
    assert fleet.pass_time(6000, heartbeating=(1, 2)) == []  # the grace period: 3 not fenced
    assert not fleet.fenced(3)
    assert fleet.fenced(4)  # the dead one stays fenced: it is in the log
    assert fleet.pass_time(4000, heartbeating=(1, 2)) == [3]  # silent since the failover
    assert not fleet.fenced(1) and not fleet.fenced(2)


def test_the_broker_apis_ask_cluster_action(tmp_path: Path) -> None:
    authorizer = Authorizer(AuthorizerConfig(super_users=frozenset({"User:root"})))
    # The broker's principal acts for its own id (`broker.principals`): CLUSTER_ACTION decides.
    bindings = parse_broker_principals(f"{BROKER.principal}=1")
    fleet = Fleet(tmp_path / "log", authorizer, bindings)
    try:
        refused = fleet.register(1)
        assert refused.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        grant = AccessControlEntryRecord(
            id=Uuid.random(),
            resource_type=ResourceType.CLUSTER,
            resource_name=CLUSTER_NAME,
            pattern_type=PatternType.LITERAL,
            principal=BROKER.principal,
            host="*",
            operation=AclOperation.CLUSTER_ACTION,
            permission_type=AclPermissionType.ALLOW,
        )
        fleet.service.execute(lambda image: ControllerResult(records=(grant,), response=None))
        fleet.up(1)
        unregister = fleet.ask(64, 0, broker_id=1)
        assert unregister.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED  # ALTER, as Kafka
    finally:
        fleet.close()


def test_a_broker_over_the_network_shows_its_liveness_in_mlog_brokers_list(
    tmp_path: Path,
) -> None:
    with running_server(tmp_path / "log", brokers=0) as server:
        address = f"127.0.0.1:{server.port}"

        async def broker() -> None:
            client = await AdminClient.connect_controller(address)
            try:
                registered = await client.request(
                    62,
                    broker_id=5,
                    cluster_id="test-cluster",
                    incarnation_id=uuid.uuid4(),
                    listeners=[],
                    features=[
                        {
                            "name": "metadata.version",
                            "min_supported_version": 1,
                            "max_supported_version": 2,
                        }
                    ],
                    rack="r1",
                )
                assert registered.error_code == 0
                answer = await client.request(
                    63,
                    broker_id=5,
                    broker_epoch=registered.broker_epoch,
                    current_metadata_offset=registered.broker_epoch,
                    want_fence=False,
                    want_shut_down=False,
                )
                assert (answer.is_caught_up, answer.is_fenced) == (True, False)
            finally:
                await client.close()

        asyncio.run(broker())
        (listed,) = as_json(tmp_path / "cli", "--bootstrap-server", address, "brokers", "list")
        assert listed["broker_id"] == 5 and listed["fenced"] is False
        assert listed["metadata_offset"] >= 1 and listed["last_heartbeat_ms"] > 0
        table = ok(tmp_path / "cli", "--bootstrap-server", address, "brokers", "list")
        assert "s ago" in table


def test_a_broker_registered_by_hand_has_no_session(fleet: Fleet) -> None:
    from replay.controller.commands import RegisterBroker

    fleet.up(1)
    controller = fleet.service.controller
    fleet.service.execute(
        lambda image: controller.register_broker(image, RegisterBroker(broker_id=9, fenced=False))
    )
    assert not fleet.fenced(9)
    # No BrokerRegistration, no heartbeat: managed by hand, never fenced by a session,
    # neither by this controller nor by one that takes over.
    assert fleet.pass_time(3 * TIMEOUT_MS, heartbeating=(1,)) == []
    fleet.service.active = False
    fleet.liveness.contacts()
    fleet.service.active = True
    assert fleet.pass_time(3 * TIMEOUT_MS, heartbeating=(1,)) == []
    assert not fleet.fenced(9) and not fleet.fenced(1)
    assert 9 not in {c.broker_id for c in fleet.liveness.contacts()}
