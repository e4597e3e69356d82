"""Issue 54, findings 1-2 at one server: the quorum's APIs and Envelope reach controllers only.

A quorum node's server (a recording quorum endpoint in place of the Raft node) with the three
kinds of listener an attacker meets: OPEN (PLAINTEXT, anonymous), SASL (SCRAM: `alice` an
ordinary user, `broker` holding CLUSTER_ACTION, `viewer` holding DESCRIBE) and CONTROLLER
(SSL, client certificates required, `controller.principals=User:controller`). `mallory` holds
a certificate of the controllers' own CA under another name and is a super user. Whatever
they send (Vote and BeginQuorumEpoch at 2**31-1 and 10**9, Fetch from 0, FetchSnapshot, an
Envelope naming User:admin), the endpoint never sees it and nothing is written.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from api.protocol import codec
from api.protocol.quorum.apis import (
    DESCRIBE_QUORUM_KEY,
    REMOVE_RAFT_VOTER_KEY,
    DescribeQuorumRequest,
    QuorumRequest,
    QuorumResponse,
    send_version,
)
from api.protocol.quorum.errors import CLUSTER_AUTHORIZATION_FAILED
from api.protocol.quorum.requests import encode_request
from api.server.server import MetadataServer, ServerListener
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid
from replay.controller.authorizer import CLUSTER_NAME, AuthorizerConfig
from replay.controller.commands import ControllerResult
from tests.support.attacks import Wire
from tests.support.controller_certs import (
    CONTROLLER_PRINCIPAL,
    ControllerPki,
    make_controller_pki,
)
from tests.support.quorum_attacks import (
    FORGED_TOPIC,
    attack_frames,
    envelope_frame,
    inner_refusal_code,
    refusal_code,
    remove_voter_frame,
    tls_context,
)
from tests.support.sasl_users import seed_users
from tests.support.server_thread import running_server

CLUSTER = "test-cluster"
NODE = 0
"""`running_server`'s node id."""

USERS = {"alice": "alice-pw", "broker": "broker-pw", "viewer": "viewer-pw"}
FRAMES = attack_frames(cluster_id=CLUSTER, destination=NODE, sender=2)


class Recorder:
    """A quorum endpoint that records what reaches it and answers nothing (closes)."""

    def __init__(self) -> None:
        self.seen: list[QuorumRequest] = []

    async def handle(self, sender_id: int, message: QuorumRequest) -> QuorumResponse:
        self.seen.append(message)
        raise AssertionError(f"an attacker's {type(message).__name__} reached the quorum")


def _cluster_acl(principal: str, operation: AclOperation) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=Uuid.random(),
        resource_type=ResourceType.CLUSTER,
        resource_name=CLUSTER_NAME,
        pattern_type=PatternType.LITERAL,
        principal=principal,
        host="*",
        operation=operation,
        permission_type=AclPermissionType.ALLOW,
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> ControllerPki:
    return make_controller_pki(tmp_path_factory.mktemp("pki"))


def _listeners(pki: ControllerPki) -> list[ServerListener]:
    return [
        pki.server_listener(),
        ServerListener(
            name="SASL",
            security_protocol="SASL_PLAINTEXT",
            host="127.0.0.1",
            port=0,
            sasl_mechanisms=("SCRAM-SHA-256",),
        ),
        ServerListener(name="OPEN", host="127.0.0.1", port=0),
    ]


@pytest.fixture
def node(tmp_path: Path, pki: ControllerPki) -> Iterator[tuple[MetadataServer, Recorder]]:
    """The quorum node's server, with the users, their ACLs and a recording endpoint."""
    log_dir = tmp_path / "log"
    seed_users(log_dir, USERS)
    with MetadataService.open(log_dir) as service:
        acls = (
            _cluster_acl("User:broker", AclOperation.CLUSTER_ACTION),
            _cluster_acl("User:viewer", AclOperation.DESCRIBE),
            _cluster_acl("User:alice", AclOperation.CREATE),
            _cluster_acl("User:mallory", AclOperation.ALL),
        )
        service.execute(lambda image: ControllerResult(records=acls, response=None))
    endpoint = Recorder()
    with running_server(
        log_dir,
        listeners=_listeners(pki),
        authorizer=AuthorizerConfig(
            super_users=frozenset({"User:mallory"}), allow_everyone_if_no_acl_found=True
        ),
        quorum=endpoint,
        quorum_listeners=["CONTROLLER"],
        controller_principals=[CONTROLLER_PRINCIPAL],
        failed_authentication_delay_ms=1,
    ) as server:
        yield server, endpoint


def _port(server: MetadataServer, name: str) -> int:
    return next(item.port for item in server.listeners if item.name == name)


def _send(sock: socket.socket, frame: bytes) -> bytes | None:
    """One frame's answer (without its size), None if the server closed the connection."""
    sock.sendall(frame)
    try:
        head = _exactly(sock, 4)
        return _exactly(sock, struct.unpack(">i", head)[0])
    except (ConnectionError, ssl.SSLError):
        return None


def _exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def _as(server: MetadataServer, who: str) -> socket.socket:
    """A connection on a client listener: anonymous on OPEN, else logged in on SASL."""
    if who == "anonymous":
        return socket.create_connection(("127.0.0.1", _port(server, "OPEN")), timeout=20)
    wire = Wire(server, "SASL")
    assert wire.scram_login(who, USERS[who]) == 0
    return wire.sock


def _tls(server: MetadataServer, context: ssl.SSLContext) -> socket.socket:
    raw = socket.create_connection(("127.0.0.1", _port(server, "CONTROLLER")), timeout=20)
    return context.wrap_socket(raw, server_hostname="127.0.0.1")


def _nothing_happened(server: MetadataServer, endpoint: Recorder, end: int) -> None:
    assert endpoint.seen == []
    assert FORGED_TOPIC not in server.service.image.topics.by_name
    assert server.service.log.end_offset == end


@pytest.mark.parametrize("who", ["anonymous", "alice", "broker", "viewer"])
@pytest.mark.parametrize("attack", sorted(FRAMES))
def test_a_client_listener_closes_on_every_quorum_api_and_envelope(
    node: tuple[MetadataServer, Recorder], who: str, attack: str
) -> None:
    server, endpoint = node
    end = server.service.log.end_offset
    sock = _as(server, who)
    try:
        assert _send(sock, FRAMES[attack]) is None  # closed, as for an API it does not serve
    finally:
        sock.close()
    _nothing_happened(server, endpoint, end)


@pytest.mark.parametrize("attack", sorted(FRAMES))
def test_a_certificate_of_the_ca_under_another_name_is_refused_even_for_a_super_user(
    node: tuple[MetadataServer, Recorder], pki: ControllerPki, attack: str
) -> None:
    server, endpoint = node
    end = server.service.log.end_offset
    sock = _tls(server, tls_context(str(pki.ca), str(pki.other_name_cert)))
    try:
        answer = _send(sock, FRAMES[attack])
    finally:
        sock.close()
    assert answer is not None
    assert refusal_code(attack, answer) == CLUSTER_AUTHORIZATION_FAILED
    _nothing_happened(server, endpoint, end)


@pytest.mark.parametrize("keystore", ["none", "other-ca"])
def test_the_controller_listener_refuses_a_peer_without_the_controllers_certificate(
    node: tuple[MetadataServer, Recorder], pki: ControllerPki, keystore: str
) -> None:
    server, endpoint = node
    end = server.service.log.end_offset
    context = tls_context(str(pki.ca), None if keystore == "none" else str(pki.other_ca_cert))
    try:
        sock = _tls(server, context)
    except (ssl.SSLError, ConnectionError):
        pass  # the handshake itself is refused
    else:
        try:
            assert _send(sock, FRAMES["Vote@2147483647"]) is None
        finally:
            sock.close()
    _nothing_happened(server, endpoint, end)


def test_a_controller_reaches_the_quorum_and_its_envelope_records_the_client(
    node: tuple[MetadataServer, Recorder], pki: ControllerPki
) -> None:
    """The positive control: the controllers' certificate passes the edge."""
    server, endpoint = node
    sock = _tls(server, tls_context(str(pki.ca), str(pki.controller)))
    try:
        assert _send(sock, FRAMES["Vote@1000000000"]) is None  # reached the recorder (closes)
    finally:
        sock.close()
    assert len(endpoint.seen) == 1
    sock = _tls(server, tls_context(str(pki.ca), str(pki.controller)))
    try:
        answer = _send(sock, envelope_frame("User:alice", "by-alice"))
    finally:
        sock.close()
    assert answer is not None and refusal_code("Envelope", answer) == 0
    (entry,) = [
        e for e in server.service.log.read() if getattr(e.record, "name", None) == "by-alice"
    ]
    # The principal the forwarding node authenticated, the address it saw.
    assert entry.principal == "User:alice"


@pytest.mark.parametrize(
    ("client", "admitted"), [("User:alice", False), ("User:viewer", False), ("User:mallory", True)]
)
def test_a_voter_change_inside_an_envelope_is_judged_for_the_client_it_names(
    node: tuple[MetadataServer, Recorder], pki: ControllerPki, client: str, admitted: bool
) -> None:
    """A controller forwards an operator's RemoveRaftVoter: the edge's rule for voter changes
    (a controller, or ALTER on the cluster) holds for the client it names, not for the
    controller that carries it; before, the leader ran any voter change a controller carried."""
    server, endpoint = node
    inner = remove_voter_frame(cluster_id=CLUSTER, destination=NODE, voter=2)
    sock = _tls(server, tls_context(str(pki.ca), str(pki.controller)))
    try:
        answer = _send(sock, envelope_frame(client, inner=inner))
    finally:
        sock.close()
    if admitted:  # mallory (ALTER): it reaches the quorum (the recorder closes the connection)
        assert answer is None
        assert len(endpoint.seen) == 1
    else:  # the client's request is refused inside an answered Envelope, as Kafka answers
        assert answer is not None
        assert inner_refusal_code(answer, REMOVE_RAFT_VOTER_KEY) == CLUSTER_AUTHORIZATION_FAILED
        assert endpoint.seen == []


def test_a_quorum_server_without_controller_listeners_or_principals_is_refused(
    tmp_path: Path,
) -> None:
    service = MetadataService.open(tmp_path / "log")
    try:
        make = partial(MetadataServer, service, quorum=Recorder(), host="127.0.0.1", port=0)
        with pytest.raises(ValueError, match=r"controller\.listener\.names"):
            make(controller_principals=["User:controller"])
        with pytest.raises(ValueError, match=r"controller\.principals"):
            make(quorum_listeners=["PLAINTEXT"])
        with pytest.raises(ValueError, match="not in listeners"):
            make(quorum_listeners=["CONTROLLER"], controller_principals=["User:controller"])
    finally:
        service.close()


@pytest.mark.parametrize("attack", sorted(FRAMES))
def test_a_single_server_serves_no_quorum_api_and_no_envelope(tmp_path: Path, attack: str) -> None:
    """A standalone server (no quorum) is its own controller: nothing of the quorum's but
    DescribeQuorum is served, on any listener (already so before the edge)."""
    with running_server(tmp_path / "log") as server:
        end = server.service.log.end_offset
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=20)
        try:
            assert _send(sock, FRAMES[attack]) is None
        finally:
            sock.close()
        assert FORGED_TOPIC not in server.service.image.topics.by_name
        assert server.service.log.end_offset == end


def _describe_quorum_frame() -> bytes:
    return encode_request(DescribeQuorumRequest(correlation_id=5), destination=-1, cluster_id=None)


@pytest.mark.parametrize(
    ("who", "reaches"),
    [("controller", True), ("alice", False), ("anonymous", False), ("viewer", True)],
)
def test_only_the_controllers_describe_the_quorum_without_an_acl(
    node: tuple[MetadataServer, Recorder], pki: ControllerPki, who: str, reaches: bool
) -> None:
    """A follower asks the leader's high watermark (DescribeQuorum) after each write it
    forwarded: the controllers may, on the controller listener, whatever the ACLs; anyone
    else needs DESCRIBE on the cluster (viewer has it, alice and anonymous do not)."""
    server, endpoint = node
    if who == "controller":
        sock = _tls(server, tls_context(str(pki.ca), str(pki.controller)))
    else:
        sock = _as(server, who)
    try:
        answer = _send(sock, _describe_quorum_frame())
    finally:
        sock.close()
    if reaches:  # the recording endpoint closes the connection once it saw the request
        assert answer is None and len(endpoint.seen) == 1
    else:
        assert answer is not None
        version = send_version(DESCRIBE_QUORUM_KEY)
        _, body = codec.decode_response(DESCRIBE_QUORUM_KEY, version, answer)
        assert int(body.error_code) == CLUSTER_AUTHORIZATION_FAILED
        assert endpoint.seen == []
