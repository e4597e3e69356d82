"""Controller links against a real server on loopback, and the server's quorum dispatch.

The server here is `MetadataServer` with a test `QuorumEndpoint` (answers every request at
once, or holds them all while `hold` is clear); the links are `QuorumLinks` of a node 2 whose
only other voter is that server (node 1). Waits are bounded polls for an outcome, never timing
assertions.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trustme

from api.protocol import codec
from api.protocol.quorum.apis import (
    ADD_RAFT_VOTER_KEY,
    DESCRIBE_QUORUM_KEY,
    FETCH_KEY,
    QUORUM_VERSIONS,
    REMOVE_RAFT_VOTER_KEY,
    VOTE_KEY,
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    DescribeQuorumRequest,
    QuorumRequest,
    QuorumResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    VoterChangeRequest,
    VoterChangeResponse,
    VoterEndpoint,
)
from api.protocol.quorum.errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    INCONSISTENT_CLUSTER_ID,
    INVALID_REQUEST,
    INVALID_VOTER_KEY,
    RaftWireRefusal,
)
from api.protocol.quorum.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    EntryKind,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    ReplicaState,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from api.protocol.quorum.requests import (
    encode_request,
)
from api.protocol.quorum.responses import (
    decode_response,
)
from api.raft.clock import now_ms
from api.raft.core import Batch
from api.raft.core.config import QuorumConfig, VoterAddress
from api.raft.transport.links import LinkStats, QuorumLinks, controller_client_security
from api.security.client_config import SecurityProtocol
from api.security.errors import SecurityConfigError
from api.security.principal import PrincipalMapper
from api.server.config import ListenerConfig, TlsConfig
from api.server.listeners import server_listener
from api.server.server import MetadataServer, ServerListener
from api.service.service import MetadataService
from replay.controller.authorizer import AuthorizerConfig
from tests.support.protocol_frames import exchange_frames
from tests.support.sasl_users import USERS, seed_users

CLUSTER = "test-cluster"


class TestEndpoint:
    """A quorum endpoint for these tests: answers at once, or holds every request."""

    __test__ = False  # not a test class

    def __init__(self) -> None:
        self.seen: list[tuple[int, QuorumRequest]] = []
        self.hold = asyncio.Event()
        self.hold.set()

    async def handle(self, sender_id: int, message: QuorumRequest) -> QuorumResponse:
        self.seen.append((sender_id, message))
        await self.hold.wait()
        return answer(message)


def answer(message: QuorumRequest) -> QuorumResponse:
    """What the test endpoint answers to each request."""
    leader = LeaderIdAndEpoch(leader_id=1, leader_epoch=5)
    ok = ErrorCode.NONE
    if isinstance(message, VoteRequest):
        return VoteResponse(
            correlation_id=message.correlation_id,
            error_code=ok,
            leader_id=-1,
            leader_epoch=message.replica_epoch,
            vote_granted=message.pre_vote,
        )
    if isinstance(message, BeginQuorumEpochRequest):
        return BeginQuorumEpochResponse(
            correlation_id=message.correlation_id, error_code=ok, leader_id=1, leader_epoch=5
        )
    if isinstance(message, EndQuorumEpochRequest):
        return EndQuorumEpochResponse(
            correlation_id=message.correlation_id,
            error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
            leader_id=1,
            leader_epoch=5,
        )
    if isinstance(message, FetchRequest):
        return FetchResponse(
            correlation_id=message.correlation_id,
            error_code=ok,
            high_watermark=message.fetch_offset,
            current_leader=leader,
            records=(Entry(offset=message.fetch_offset, epoch=5, payload=b"block", count=2),),
        )
    if isinstance(message, AddRaftVoterRequest):
        return AddRaftVoterResponse(correlation_id=message.correlation_id, error_code=0)
    if isinstance(message, RemoveRaftVoterRequest):
        return RemoveRaftVoterResponse(
            correlation_id=message.correlation_id, error_code=127, error_message="not a voter"
        )
    if isinstance(message, FetchSnapshotRequest):
        return FetchSnapshotResponse(
            correlation_id=message.correlation_id,
            error_code=ok,
            snapshot_id=message.snapshot_id,
            current_leader=leader,
            size=10,
            position=message.position,
            unaligned_records=b"chunk",
        )
    return DescribeQuorumResponse(
        error_code=ok,
        leader_id=1,
        leader_epoch=5,
        high_watermark=7,
        current_voters=(
            ReplicaState(
                replica_id=1, log_end_offset=9, last_fetch_timestamp=-1, last_caught_up_timestamp=3
            ),
        ),
        observers=(),
    )


REQUESTS: Sequence[QuorumRequest] = (
    VoteRequest(
        correlation_id=101,
        replica_epoch=6,
        replica_id=2,
        last_offset_epoch=5,
        last_offset=40,
        pre_vote=True,
    ),
    BeginQuorumEpochRequest(correlation_id=102, leader_id=2, leader_epoch=6),
    EndQuorumEpochRequest(
        correlation_id=103, leader_id=2, leader_epoch=6, preferred_successors=(1, 3)
    ),
    FetchRequest(
        correlation_id=104,
        replica_id=2,
        current_leader_epoch=5,
        fetch_offset=40,
        last_fetched_epoch=5,
        max_wait_ms=0,
    ),
    FetchSnapshotRequest(
        correlation_id=105,
        replica_id=2,
        current_leader_epoch=5,
        snapshot_id=SnapshotId(end_offset=30, epoch=4),
        position=0,
        max_bytes=1024,
    ),
)


def _vote(correlation_id: int) -> VoteRequest:
    return VoteRequest(
        correlation_id=correlation_id,
        replica_epoch=6,
        replica_id=2,
        last_offset_epoch=5,
        last_offset=40,
        pre_vote=True,
    )


@asynccontextmanager
async def serving(
    log_dir: Path,
    endpoint: TestEndpoint | None,
    *,
    listeners: list[ServerListener] | None = None,
    authorizer: AuthorizerConfig | None = None,
    port: int = 0,
    quorum_listeners: list[str] | None = None,
    controller_principals: list[str] | None = None,
) -> AsyncIterator[MetadataServer]:
    """A server of node 1 with `endpoint` (None: no quorum APIs) until the block ends."""
    service = MetadataService.open(log_dir)
    server = MetadataServer(
        service,
        host="127.0.0.1",
        port=port,
        node_id=1,
        cluster_id=CLUSTER,
        listeners=listeners,
        authorizer=authorizer,
        quorum=endpoint,
        # In process, PLAINTEXT peers as the controllers (`mlog serve` requires mTLS there).
        quorum_listeners=quorum_listeners or [(listeners or [ServerListener()])[0].name],
        controller_principals=controller_principals or ["User:ANONYMOUS"],
        run_scheduler=False,
        failed_authentication_delay_ms=1,
    )
    await server.start()
    try:
        yield server
    finally:
        if endpoint is not None:
            endpoint.hold.set()  # requests held are answered: the server can stop
        await server.stop()


class Collected:
    """The answers `on_response` got, in order."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, QuorumResponse]] = []

    def __call__(self, source: int, message: QuorumResponse) -> None:
        self.answers.append((source, message))


def links_to(
    port: int,
    answers: Collected,
    *,
    request_timeout_ms: int = 10_000,
    retry_backoff_ms: int = 20,
    **options: Any,
) -> QuorumLinks:
    """Links of node 2 to node 1 at 127.0.0.1:`port`."""
    config = QuorumConfig(
        node_id=2,
        voters=frozenset({1, 2}),
        addresses={
            1: VoterAddress(host="127.0.0.1", port=port),
            2: VoterAddress(host="127.0.0.1", port=1),
        },
        request_timeout_ms=request_timeout_ms,
        retry_backoff_ms=retry_backoff_ms,
    )
    return QuorumLinks(config, on_response=answers, cluster_id=CLUSTER, **options)


async def until(condition: Callable[[], bool], what: str, seconds: float = 15) -> None:
    """Wait for `condition` (polling); fail naming `what` if it never holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not condition():
        assert loop.time() < deadline, f"never: {what}"
        await asyncio.sleep(0.01)


# --------------------------------------------------------------------------- links


async def test_every_request_is_answered_and_handed_back_in_order(tmp_path: Path) -> None:
    endpoint = TestEndpoint()
    answers = Collected()
    async with serving(tmp_path / "log", endpoint) as server:
        links = links_to(server.port, answers)
        try:
            for request in REQUESTS:
                assert links.send(1, request)
            await until(lambda: len(answers.answers) == len(REQUESTS), "every answer")
            assert answers.answers == [(1, answer(request)) for request in REQUESTS]
            assert endpoint.seen == [(2, request) for request in REQUESTS]
            stats = links.stats(1)
            assert (stats.connects, stats.sent, stats.answered) == (1, 5, 5)
            assert links.in_flight(1) == 0
            # DescribeQuorum too (a tool's request; its answer has no correlation id).
            assert links.send(1, DescribeQuorumRequest(correlation_id=106))
            await until(lambda: len(answers.answers) == 6, "the DescribeQuorum answer")
            assert answers.answers[-1] == (1, answer(DescribeQuorumRequest(correlation_id=1)))
            assert endpoint.seen[-1] == (-1, DescribeQuorumRequest(correlation_id=106))
        finally:
            await links.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_a_peer_down_then_up_is_reconnected(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="api.server.quorum.links")
    port = _free_port()
    answers = Collected()
    # A backoff long enough that the send right after the failure falls inside it on a
    # loaded host (the loop may not run for tens of milliseconds there).
    links = links_to(port, answers, retry_backoff_ms=1000, reconnect_backoff_max_ms=1000)
    try:
        assert links.lost_at_ms(1) is None  # never tried
        assert links.lost_at_ms(7) is None  # no link to that node
        before_failure = now_ms()
        assert links.send(1, _vote(1))  # taken: the connection is being made
        await until(lambda: links.stats(1).connect_failures == 1, "a failed connection")
        failed_at = links.lost_at_ms(1)
        assert failed_at is not None and before_failure <= failed_at <= now_ms()
        assert links.stats(1).dropped_lost == 1
        assert links.in_flight(1) == 0
        assert not links.send(1, _vote(2))  # down: dropped during the backoff
        assert links.stats(1).dropped_down == 1
        # Sends go on while the peer is away, and so do the attempts to connect (one each
        # backoff): one warning, not one per attempt.
        sent = 10

        def tried_again() -> bool:
            nonlocal sent
            sent += 1
            links.send(1, _vote(sent))
            return links.stats(1).connect_failures >= 2

        await until(tried_again, "another failed connection")
        downs = [r for r in caplog.records if "is down" in r.getMessage()]
        assert len(downs) == 1
        assert f"127.0.0.1:{port}" in downs[0].getMessage()
        endpoint = TestEndpoint()
        async with serving(tmp_path / "log", endpoint, port=port):
            correlation = 100

            def answered() -> bool:
                nonlocal correlation
                if answers.answers:
                    return True
                correlation += 1
                links.send(1, _vote(correlation))
                return False

            await until(answered, "an answer once the peer is up")
            assert links.connected(1)
            assert links.lost_at_ms(1) is None  # up again
            assert "is up again" in caplog.text
            source, message = answers.answers[0]
            assert source == 1 and isinstance(message, VoteResponse)
            stopped_at = now_ms()
        # The peer stops: the link notices and reconnects to the next peer on that port.
        await until(lambda: not links.connected(1), "the link noticing the peer is gone")
        lost_at = links.lost_at_ms(1)
        assert lost_at is not None and stopped_at <= lost_at <= now_ms()
        async with serving(tmp_path / "log", TestEndpoint(), port=port):
            before = len(answers.answers)

            def answered_again() -> bool:
                nonlocal correlation
                if len(answers.answers) > before:
                    return True
                correlation += 1
                links.send(1, _vote(correlation))
                return False

            await until(answered_again, "an answer from the restarted peer")
            assert links.stats(1).connects == 2
    finally:
        await links.close()


async def test_a_request_never_answered_is_dropped_after_the_request_timeout(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="api.server.quorum.links")
    endpoint = TestEndpoint()
    endpoint.hold.clear()
    answers = Collected()
    async with serving(tmp_path / "log", endpoint) as server:
        links = links_to(server.port, answers, request_timeout_ms=300)
        try:
            assert links.send(1, _vote(1))
            await until(lambda: links.stats(1).timed_out == 1, "the request timing out")
            assert links.in_flight(1) == 0
            assert not links.connected(1)  # closed: the answers behind it would wait as long
            assert answers.answers == []
            assert "no answer to Vote within 300 ms" in caplog.text
            # The next send connects again; the held request is answered on a connection
            # that is gone, and never handed back.
            endpoint.hold.set()
            await until(lambda: links.send(1, _vote(2)), "a send taken again")
            await until(lambda: len(answers.answers) == 1, "the answer to the second request")
            assert answers.answers[0][1].correlation_id == 2  # type: ignore[union-attr]
            assert links.stats(1).connects == 2
        finally:
            await links.close()


async def test_a_slow_peer_bounds_the_requests_in_flight(tmp_path: Path) -> None:
    endpoint = TestEndpoint()
    endpoint.hold.clear()
    answers = Collected()
    async with serving(tmp_path / "log", endpoint) as server:
        links = links_to(server.port, answers, max_in_flight=3)
        try:
            taken = [links.send(1, _vote(n)) for n in range(10)]
            assert taken == [True] * 3 + [False] * 7
            assert links.stats(1).dropped_full == 7
            await until(lambda: len(endpoint.seen) == 1, "the server holding the first")
            assert links.in_flight(1) == 3
            assert not links.send(1, _vote(99))
            endpoint.hold.set()
            await until(lambda: len(answers.answers) == 3, "the three answers")
            assert [m.correlation_id for _, m in answers.answers] == [0, 1, 2]  # type: ignore[union-attr]
            assert links.in_flight(1) == 0
            assert links.send(1, _vote(100))
            await until(lambda: len(answers.answers) == 4, "a fourth answer")
        finally:
            await links.close()


async def test_send_never_waits_and_unknown_destinations_are_refused(tmp_path: Path) -> None:
    answers = Collected()
    links = links_to(_free_port(), answers)
    try:
        with pytest.raises(ValueError, match="node 3 is not another voter"):
            links.send(3, _vote(1))
        with pytest.raises(ValueError, match="node 2 is not another voter"):
            links.send(2, _vote(1))
        assert isinstance(links.stats(1), LinkStats)
    finally:
        await links.close()
    assert not links.send(1, _vote(2))  # closed links take nothing


async def test_links_follow_the_voter_set(tmp_path: Path) -> None:
    answers = Collected()
    async with serving(tmp_path / "log", TestEndpoint()) as server:
        links = links_to(_free_port(), answers)
        try:
            # Node 4 added (at the server's address), node 1 removed: KIP-853's voter changes.
            links.set_addresses(
                {
                    2: VoterAddress(host="127.0.0.1", port=1),
                    4: VoterAddress(host="127.0.0.1", port=server.port),
                }
            )
            assert links.send(4, REQUESTS[3])  # a Fetch: it names no voter it is meant for
            await until(lambda: len(answers.answers) == 1, "node 4's answer")
            assert answers.answers[0] == (4, answer(REQUESTS[3]))
            assert not links.send(1, _vote(2))  # removed: the core's request is dropped
            with pytest.raises(ValueError, match="node 3 is not another voter"):
                links.send(3, _vote(3))  # never a voter: a caller's bug
        finally:
            await links.close()


async def test_voter_changes_need_alter_on_the_cluster_and_reach_the_endpoint(
    tmp_path: Path,
) -> None:
    add = AddRaftVoterRequest(
        correlation_id=7,
        voter_id=4,
        voter_directory_id="AAAAAAAAQACAAAAAAAAABA",
        endpoints=(VoterEndpoint(name="CONTROLLER", host="127.0.0.1", port=9094),),
    )
    remove = RemoveRaftVoterRequest(correlation_id=8, voter_id=9, voter_directory_id="")
    frames = [
        encode_request(add, destination=-1, cluster_id=CLUSTER),
        encode_request(remove, destination=-1, cluster_id=CLUSTER),
    ]
    endpoint = TestEndpoint()
    async with serving(
        tmp_path / "a",
        endpoint,
        authorizer=AuthorizerConfig(super_users=frozenset()),
        controller_principals=["User:controller"],
    ) as server:
        added, removed = await exchange_frames(server.port, frames)
    assert added is not None and removed is not None
    refused = decode_response(added, api_key=ADD_RAFT_VOTER_KEY, version=1)
    assert isinstance(refused, AddRaftVoterResponse)
    assert refused.error_code == CLUSTER_AUTHORIZATION_FAILED
    assert "is not a controller" in (refused.error_message or "")
    assert endpoint.seen == []
    async with serving(tmp_path / "b", endpoint) as server:
        added, removed = await exchange_frames(server.port, frames)
    assert added is not None and removed is not None
    assert decode_response(added, api_key=ADD_RAFT_VOTER_KEY, version=1) == answer(add)
    assert decode_response(removed, api_key=REMOVE_RAFT_VOTER_KEY, version=0) == answer(remove)
    # An admin's request: no sender replica, and node 4 is the voter to add, not a misroute.
    assert endpoint.seen == [(-1, add), (-1, remove)]


async def test_a_peer_without_the_quorum_apis_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="api.server.quorum.links")
    answers = Collected()
    async with serving(tmp_path / "log", None) as server:
        links = links_to(server.port, answers)
        try:
            links.send(1, _vote(1))
            await until(lambda: links.stats(1).connect_failures == 1, "the refused link")
            assert "does not serve Vote v2" in caplog.text
            assert "controller.quorum.voters" in caplog.text
        finally:
            await links.close()


# --------------------------------------------------------------------------- security


def _sasl_listener() -> ServerListener:
    return ServerListener(
        name="CONTROLLER",
        security_protocol="SASL_PLAINTEXT",
        host="127.0.0.1",
        port=0,
        sasl_mechanisms=("SCRAM-SHA-256", "SCRAM-SHA-512"),
    )


def _scram_props(user: str, mechanism: str = "SCRAM-SHA-256") -> dict[str, str]:
    module = "org.apache.kafka.common.security.scram.ScramLoginModule"
    password = USERS[user].replace("\\", "\\\\").replace('"', '\\"')
    return {
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "sasl.mechanism.controller.protocol": mechanism,
        f"listener.name.controller.{mechanism.lower()}.sasl.jaas.config": (
            f'{module} required username="{user}" password="{password}";'
        ),
    }


async def test_links_log_in_with_scram_and_a_non_super_user_is_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    log_dir = tmp_path / "log"
    seed_users(log_dir)
    endpoint = TestEndpoint()
    async with serving(
        log_dir,
        endpoint,
        listeners=[_sasl_listener()],
        authorizer=AuthorizerConfig(super_users=frozenset({"User:alice"})),
        controller_principals=["User:alice"],
    ) as server:
        alice_answers, bob_answers = Collected(), Collected()
        alice = links_to(
            server.port, alice_answers, security=controller_client_security(_scram_props("alice"))
        )
        bob = links_to(
            server.port,
            bob_answers,
            security=controller_client_security(_scram_props("bob", "SCRAM-SHA-512")),
        )
        try:
            assert alice.send(1, _vote(1))
            await until(lambda: len(alice_answers.answers) == 1, "alice's answer")
            assert endpoint.seen == [(2, _vote(1))]
            assert bob.send(1, _vote(2))
            assert bob.send(1, DescribeQuorumRequest(correlation_id=3))
            await until(lambda: bob.stats(1).refused == 2, "bob's refusals")
            assert bob_answers.answers == []
            assert endpoint.seen == [(2, _vote(1))]  # the endpoint never saw bob's
            assert bob.connected(1)  # a refusal keeps the connection
            refusals = [
                r.getMessage()
                for r in caplog.records
                if r.name == "api.server.quorum.links" and "answer dropped" in r.getMessage()
            ]
            assert len(refusals) == 2
            assert "VoteResponse refused: CLUSTER_AUTHORIZATION_FAILED (31)" in refusals[0]
            assert "add it to controller.principals there" in refusals[0]
            assert "User:bob may not Describe the cluster" in refusals[1]
            # The same refusal again is not logged again.
            assert bob.send(1, _vote(4))
            await until(lambda: bob.stats(1).refused == 3, "bob's third refusal")
            await asyncio.sleep(0)
            assert (
                sum(
                    "VoteResponse refused" in r.getMessage()
                    for r in caplog.records
                    if r.name == "api.server.quorum.links"
                )
                == 1
            )
        finally:
            await alice.close()
            await bob.close()


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("quorum-pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(
        str(folder / "controller.pem")
    )
    return {"ca": folder / "ca.pem", "keystore": folder / "controller.pem"}


async def test_links_over_tls_with_the_listeners_ssl_keys(
    tmp_path: Path, pki: dict[str, Path]
) -> None:
    listener = server_listener(
        ListenerConfig(
            name="CONTROLLER",
            security_protocol="SSL",
            host="127.0.0.1",
            port=0,
            tls=TlsConfig(
                keystore_location=pki["keystore"],
                truststore_location=pki["ca"],
                client_auth="required",
            ),
        )
    )
    props = {
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:SSL",
        "listener.name.controller.ssl.truststore.location": str(pki["ca"]),
        "listener.name.controller.ssl.keystore.location": str(pki["keystore"]),
    }
    security = controller_client_security(props)
    assert security.protocol is SecurityProtocol.SSL
    endpoint = TestEndpoint()
    answers = Collected()
    subject = ssl._ssl._test_decode_cert(str(pki["keystore"]))["subject"]  # type: ignore[attr-defined]
    principal = PrincipalMapper().principal(subject)
    async with serving(
        tmp_path / "log", endpoint, listeners=[listener], controller_principals=[principal]
    ) as server:
        links = links_to(server.port, answers, security=security)
        try:
            assert links.send(1, REQUESTS[3])
            await until(lambda: len(answers.answers) == 1, "the answer over TLS")
            assert answers.answers == [(1, answer(REQUESTS[3]))]
        finally:
            await links.close()
        # Without the CA the server's certificate is not trusted: the link stays down.
        untrusted = links_to(
            server.port,
            Collected(),
            security=controller_client_security(
                {
                    **props,
                    "listener.name.controller.ssl.truststore.location": str(_other_ca(tmp_path)),
                }
            ),
        )
        try:
            untrusted.send(1, REQUESTS[0])
            await until(lambda: untrusted.stats(1).connect_failures == 1, "the refused TLS link")
            assert untrusted.stats(1).answered == 0
        finally:
            await untrusted.close()


def _other_ca(folder: Path) -> Path:
    path = folder / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(path))
    return path


@pytest.mark.parametrize(
    ("props", "error"),
    [
        ({}, "controller.listener.names is not set"),
        (
            {"controller.listener.names": "CONTROLLER"},
            "add CONTROLLER:SASL_SSL .* to listener.security.protocol.map",
        ),
        (
            {
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:TLS",
            },
            "'TLS' .* is not one of",
        ),
        (
            {
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:SASL_SSL",
            },
            "set sasl.mechanism.controller.protocol",
        ),
        (
            {
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
                "sasl.mechanism.controller.protocol": "PLAIN",
            },
            "set listener.name.controller.plain.sasl.jaas.config",
        ),
        (
            {
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT",
                "sasl.mechanism.controller.protocol": "GSSAPI",
                "listener.name.controller.gssapi.sasl.jaas.config": "x required;",
            },
            "sasl.mechanism=GSSAPI is not supported",
        ),
    ],
)
def test_controller_security_settings_say_what_is_missing(
    props: dict[str, str], error: str
) -> None:
    with pytest.raises(SecurityConfigError, match=error):
        controller_client_security(props)


def test_controller_security_reads_kafkas_broker_side_keys() -> None:
    props = {
        "controller.listener.names": " controller ,PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="ctl" password="s3cret";'
        ),
        "ssl.truststore.location": "/etc/ca.pem",
        "listener.name.controller.ssl.truststore.location": "/etc/controller-ca.pem",
        "ssl.endpoint.identification.algorithm": "",
    }
    security = controller_client_security(props)
    assert security.protocol is SecurityProtocol.SASL_SSL
    assert (security.mechanism, security.username, security.password) == ("PLAIN", "ctl", "s3cret")
    assert security.ca_location == "/etc/controller-ca.pem"  # the listener's key first
    assert security.check_hostname is False
    assert "s3cret" not in repr(security)
    plain = controller_client_security({"controller.listener.names": "PLAINTEXT"})
    assert plain.protocol is SecurityProtocol.PLAINTEXT


# --------------------------------------------------------------------------- the server side


def _api_versions_frame() -> bytes:
    body = codec.build(
        codec.request_class(18, 3), client_software_name="t", client_software_version="1"
    )
    return codec.encode_request(body, correlation_id=1)


def _served(answer_frame: bytes | None) -> dict[int, tuple[int, int]]:
    assert answer_frame is not None
    _, body = codec.decode_response(18, 3, answer_frame)
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in body.api_keys}


async def test_without_an_endpoint_only_describe_quorum_is_served(tmp_path: Path) -> None:
    # A single server is a one-voter quorum (tests/api/server/test_sole_voter.py): it
    # answers DescribeQuorum, and none of the APIs voters speak to each other.
    async with serving(tmp_path / "log", None) as server:
        versions, vote = await exchange_frames(
            server.port,
            [_api_versions_frame(), encode_request(_vote(2), destination=1, cluster_id=None)],
        )
        assert set(QUORUM_VERSIONS) & set(_served(versions)) == {DESCRIBE_QUORUM_KEY}
        assert vote is None  # closed, as for any unknown API


async def test_with_an_endpoint_api_versions_lists_the_quorum_apis(tmp_path: Path) -> None:
    async with serving(tmp_path / "log", TestEndpoint()) as server:
        (versions,) = await exchange_frames(server.port, [_api_versions_frame()])
        served = _served(versions)
        for key, versions_served in QUORUM_VERSIONS.items():
            assert served[key] == versions_served
        assert served[3] == codec.SUPPORTED_VERSIONS[3]  # the others are still there


async def test_the_quorum_apis_are_served_only_on_the_controller_listeners(
    tmp_path: Path,
) -> None:
    listeners = [
        ServerListener(name="CONTROLLER", host="127.0.0.1", port=0),
        ServerListener(name="CLIENTS", host="127.0.0.1", port=0),
    ]
    async with serving(
        tmp_path / "log", TestEndpoint(), listeners=listeners, quorum_listeners=["CONTROLLER"]
    ) as server:
        ports = {listener.name: listener.port for listener in server.listeners}
        (controller,) = await exchange_frames(ports["CONTROLLER"], [_api_versions_frame()])
        clients, vote = await exchange_frames(
            ports["CLIENTS"],
            [_api_versions_frame(), encode_request(_vote(2), destination=1, cluster_id=None)],
        )
        assert VOTE_KEY in _served(controller)
        assert VOTE_KEY not in _served(clients)
        assert vote is None


def _refusal(answer_frame: bytes | None, api_key: int, version: int) -> RaftWireRefusal:
    assert answer_frame is not None
    with pytest.raises(RaftWireRefusal) as caught:
        decode_response(answer_frame, api_key=api_key, version=version)
    return caught.value


async def test_requests_for_another_cluster_voter_or_partition_are_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="api.server")
    endpoint = TestEndpoint()
    wrong_partition = codec.build(
        codec.request_class(DESCRIBE_QUORUM_KEY, 2),
        topics=[{"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 1}]}],
    )
    async with serving(tmp_path / "log", endpoint) as server:
        frames = [
            encode_request(_vote(1), destination=1, cluster_id="another-cluster"),
            encode_request(_vote(2), destination=3, cluster_id=CLUSTER),
            codec.encode_request(wrong_partition, correlation_id=3),
            encode_request(REQUESTS[3], destination=1, cluster_id=CLUSTER),
        ]
        cluster, voter, partition, fetch = await exchange_frames(server.port, frames)
        refusal = _refusal(cluster, VOTE_KEY, 2)
        assert refusal.error_code == INCONSISTENT_CLUSTER_ID
        # Vote answers have no message field: the server's log says it.
        assert "Vote refused: Vote from cluster 'another-cluster' reached cluster" in caplog.text
        assert _refusal(voter, VOTE_KEY, 2).error_code == INVALID_VOTER_KEY
        refusal = _refusal(partition, DESCRIBE_QUORUM_KEY, 2)
        assert refusal.error_code == INVALID_REQUEST
        assert "__cluster_metadata-1" in str(refusal)
        # The connection stayed open and the endpoint saw only the good request.
        assert fetch is not None
        assert decode_response(fetch, api_key=FETCH_KEY, version=17) == answer(REQUESTS[3])
        assert endpoint.seen == [(2, REQUESTS[3])]


async def test_a_quorum_request_before_a_sasl_login_closes_the_connection(
    tmp_path: Path,
) -> None:
    endpoint = TestEndpoint()
    async with serving(tmp_path / "log", endpoint, listeners=[_sasl_listener()]) as server:
        (vote,) = await exchange_frames(
            server.port, [encode_request(_vote(1), destination=1, cluster_id=CLUSTER)]
        )
        assert vote is None
        assert endpoint.seen == []


def test_refused_codes_are_kafkas() -> None:
    assert (CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST) == (31, 42)
    assert (INCONSISTENT_CLUSTER_ID, INVALID_VOTER_KEY) == (104, 125)


async def test_a_peer_answering_garbage_is_dropped_with_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="api.server.quorum.links")
    garbage = [b"\x00\x01", b"\xff" * 40]

    async def peer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                request = codec.decode_request(await reader.readexactly(size))
                correlation = request.header.correlation_id
                if request.header.api_key == 18:
                    versions = [{"api_key": 18, "min_version": 0, "max_version": 3}] + [
                        {"api_key": k, "min_version": low, "max_version": high}
                        for k, (low, high) in QUORUM_VERSIONS.items()
                    ]
                    body = codec.build(
                        codec.response_class(18, request.header.api_version),
                        error_code=0,
                        api_keys=versions,
                        throttle_time=0,
                    )
                    writer.write(codec.encode_response(correlation, body))
                else:
                    data = struct.pack(">i", correlation) + b"\x00" + garbage.pop(0)
                    writer.write(struct.pack(">i", len(data)) + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    fake = await asyncio.start_server(peer, "127.0.0.1", 0)
    answers = Collected()
    links = links_to(int(fake.sockets[0].getsockname()[1]), answers)
    try:
        assert links.send(1, _vote(1))
        assert links.send(1, REQUESTS[3])
        await until(lambda: links.stats(1).refused == 2, "both answers refused")
        assert answers.answers == []
        lines = [r.getMessage() for r in caplog.records if "answer dropped" in r.getMessage()]
        assert len(lines) == 2
        assert "malformed VoteResponse v2" in lines[0]
        assert "malformed FetchResponse v17" in lines[1]
        assert all("\n" not in line for line in lines)
        assert links.connected(1)
    finally:
        await links.close()
        fake.close()
        await fake.wait_closed()


async def test_describe_quorum_is_answered_in_every_served_version(tmp_path: Path) -> None:
    async with serving(tmp_path / "log", TestEndpoint()) as server:
        low, high = QUORUM_VERSIONS[DESCRIBE_QUORUM_KEY]
        frames = [
            codec.encode_request(
                codec.build(
                    codec.request_class(DESCRIBE_QUORUM_KEY, version),
                    topics=[
                        {"topic_name": "__cluster_metadata", "partitions": [{"partition_index": 0}]}
                    ],
                ),
                correlation_id=version,
            )
            for version in range(low, high + 1)
        ]
        answers = await exchange_frames(server.port, frames)
        for version, frame in zip(range(low, high + 1), answers, strict=True):
            assert frame is not None
            decoded = decode_response(frame, api_key=DESCRIBE_QUORUM_KEY, version=version)
            assert isinstance(decoded, DescribeQuorumResponse)
            assert (decoded.leader_id, decoded.high_watermark) == (1, 7)
            caught_up = decoded.current_voters[0].last_caught_up_timestamp
            assert caught_up == (-1 if version == 0 else 3)  # v0 has no timestamps


async def test_a_too_new_api_versions_lists_the_quorum_apis_in_its_v0_answer(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path / "log", TestEndpoint()) as server:
        frame = bytearray(_api_versions_frame())
        struct.pack_into(">h", frame, 6, 99)  # ApiVersions v99 (KIP-511)
        (reply,) = await exchange_frames(server.port, [bytes(frame)])
        assert reply is not None
        _, body = codec.decode_response(18, 0, reply)
        assert int(body.error_code) == 35
        assert VOTE_KEY in {int(k.api_key) for k in body.api_keys}


class WrongEndpoint(TestEndpoint):
    """An endpoint with a bug: it answers a Vote with a BeginQuorumEpochResponse."""

    async def handle(self, sender_id: int, message: QuorumRequest) -> QuorumResponse:
        return answer(REQUESTS[1])


async def test_an_endpoint_answering_the_wrong_api_closes_that_connection_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="api.server")
    async with serving(tmp_path / "log", WrongEndpoint()) as server:
        (vote,) = await exchange_frames(
            server.port, [encode_request(_vote(1), destination=1, cluster_id=CLUSTER)]
        )
        assert vote is None
        assert "closing" in caplog.text and "Vote v2 failed" in caplog.text
        assert "answered a VoteRequest with a BeginQuorumEpochResponse" in caplog.text


# --------------------------------------------------------------------------- three real cores


class MiniShell:
    """The smallest shell of a `RaftCore` over real sockets: an in-memory log, no fsync.

    Enough to show the wire, the server dispatch and the links carry what the core says: the
    server's requests wait for the core's answer of the same correlation id; requests the
    core sends go out through the links, whose answers are stepped into the core.
    """

    def __init__(self, node_id: int, config: QuorumConfig) -> None:
        import random

        from api.raft.core.core import RaftCore
        from api.raft.core.log_view import LogView
        from api.raft.core.quorum_state import QuorumState

        self.loop = asyncio.get_running_loop()
        self.id = node_id
        self.core = RaftCore(
            config,
            state=QuorumState(leader_epoch=0, voters=config.voters),
            log=LogView.from_log(end_offset=0, epochs=[]),
            rng=random.Random(node_id),
            now_ms=self.now_ms(),
        )
        self.entries: list[Entry] = []
        self.high_watermark = 0
        self.waiting: dict[tuple[int, int], asyncio.Future[QuorumResponse]] = {}
        self.links: QuorumLinks | None = None
        self.ticker: asyncio.Task[None] | None = None

    def now_ms(self) -> int:
        return int(self.loop.time() * 1000)

    async def handle(self, sender_id: int, message: QuorumRequest) -> QuorumResponse:
        if isinstance(message, DescribeQuorumRequest):
            return self.core.describe_quorum()
        if isinstance(message, FetchSnapshotRequest):
            raise NotImplementedError("no snapshots here")
        if isinstance(message, VoterChangeRequest):
            raise NotImplementedError("no voter changes here")
        future = self.loop.create_future()
        self.waiting[(sender_id, message.correlation_id)] = future
        self.core.step(sender_id, message)
        self.pump()
        try:
            return await asyncio.wait_for(future, 30)
        finally:
            self.waiting.pop((sender_id, message.correlation_id), None)

    def on_response(self, source: int, message: QuorumResponse) -> None:
        if not isinstance(
            message, DescribeQuorumResponse | FetchSnapshotResponse | VoterChangeResponse
        ):
            self.core.step(source, message)
            self.pump()

    def pump(self) -> None:
        from dataclasses import replace

        from api.raft.core.ready import ReadyDone

        while not (ready := self.core.ready()).empty:
            if ready.truncate_to is not None:
                del self.entries[ready.truncate_to :]
            self.entries.extend(ready.append)
            if ready.high_watermark is not None:
                self.high_watermark = ready.high_watermark
            for out in ready.messages:
                message: Any = out.message
                if isinstance(message, FetchResponse) and out.read_until > out.read_from:
                    records = tuple(self.entries[out.read_from : out.read_until])
                    message = replace(message, records=records)
                if type(message).__name__.endswith("Response"):
                    future = self.waiting.get((out.destination, message.correlation_id))
                    if future is not None and not future.done():
                        future.set_result(message)
                elif self.links is not None:
                    self.links.send(out.destination, message)
            self.core.advance(ReadyDone(flushed_offset=len(self.entries)))

    async def tick(self) -> None:
        while True:
            self.core.tick(self.now_ms())
            self.pump()
            wait = (self.core.next_deadline_ms() - self.now_ms()) / 1000
            await asyncio.sleep(min(max(wait, 0.001), 0.05))


async def test_three_cores_elect_a_leader_and_commit_over_loopback(tmp_path: Path) -> None:
    from api.raft.core.ready import OffsetRange

    ports = {node: _free_port() for node in (1, 2, 3)}
    config_of = {
        node: QuorumConfig(
            node_id=node,
            voters=frozenset(ports),
            addresses={n: VoterAddress(host="127.0.0.1", port=p) for n, p in ports.items()},
            election_timeout_ms=300,
            fetch_timeout_ms=600,
            request_timeout_ms=1000,
        )
        for node in ports
    }
    shells = {node: MiniShell(node, config_of[node]) for node in ports}
    servers: list[MetadataServer] = []
    try:
        for node, shell in shells.items():
            service = MetadataService.open(tmp_path / f"log{node}")
            server = MetadataServer(
                service,
                host="127.0.0.1",
                port=ports[node],
                node_id=node,
                cluster_id=CLUSTER,
                quorum=shell,
                quorum_listeners=["PLAINTEXT"],
                controller_principals=["User:ANONYMOUS"],
                run_scheduler=False,
            )
            await server.start()
            servers.append(server)
            shell.links = QuorumLinks(
                config_of[node], on_response=shell.on_response, cluster_id=CLUSTER
            )
            shell.ticker = asyncio.create_task(shell.tick())

        def leader() -> MiniShell | None:
            leaders = [s for s in shells.values() if s.core.current_leader().leader_id == s.id]
            return leaders[0] if len(leaders) == 1 else None

        await until(lambda: leader() is not None, "a leader elected over the wire", 30)
        chief = leader()
        assert chief is not None
        placed = chief.core.propose([Batch(payload=b"first"), Batch(payload=b"second")])
        assert isinstance(placed, OffsetRange)
        chief.pump()
        await until(
            lambda: all(s.high_watermark > placed.last for s in shells.values()),
            "the proposal committed on every node",
            30,
        )
        logs = [s.entries[: placed.last + 1] for s in shells.values()]
        assert logs[0] == logs[1] == logs[2]
        assert [e.payload for e in logs[0][-2:]] == [b"first", b"second"]
        # The LeaderChange marker came through the Fetch records.
        assert logs[0][0].kind is EntryKind.LEADER_CHANGE
        # DescribeQuorum over the wire from a tool: the leader's view of the voters.
        (frame,) = await exchange_frames(
            ports[chief.id],
            [
                encode_request(
                    DescribeQuorumRequest(correlation_id=9), destination=0, cluster_id=None
                )
            ],
        )
        assert frame is not None
        described = decode_response(frame, api_key=DESCRIBE_QUORUM_KEY, version=2)
        assert isinstance(described, DescribeQuorumResponse)
        assert described.leader_id == chief.id
        assert {r.replica_id for r in described.current_voters} == {1, 2, 3}
    finally:
        for shell in shells.values():
            if shell.ticker is not None:
                shell.ticker.cancel()
            if shell.links is not None:
                await shell.links.close()
            for future in shell.waiting.values():
                future.cancel()  # parked Fetches end: a server stops once its requests do
        for server in servers:
            await server.stop()


async def test_a_peer_that_accepts_but_never_speaks_is_a_failed_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="api.server.quorum.links")
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # accepted (as a stopped process's kernel does), never answered

    fake = await asyncio.start_server(silent, "127.0.0.1", 0)
    answers = Collected()
    links = links_to(int(fake.sockets[0].getsockname()[1]), answers, request_timeout_ms=300)
    try:
        assert links.send(1, _vote(1))
        assert links.send(1, _vote(2))
        await until(lambda: links.stats(1).connect_failures == 1, "the connection given up")
        assert links.in_flight(1) == 0
        assert links.stats(1).dropped_lost == 2
        assert "no connection within 300 ms" in caplog.text
        assert answers.answers == []
    finally:
        await links.close()
        for writer in held:
            writer.close()
        fake.close()
        await fake.wait_closed()
