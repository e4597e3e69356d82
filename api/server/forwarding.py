"""Writes that reach a controller which does not lead go to the leader in an Envelope (KIP-590).

Kafka's brokers forward admin writes to the active controller: the client's request bytes, its
principal and its address travel inside an `EnvelopeRequest` (API 58) over the controllers'
own authenticated link, the controller answers the inner request as if the client had sent it
there, and the broker hands the inner answer back to the client. A quorum node does the same:

- **Follower side** (`Forwarder`): a write (`FORWARDED_KAFKA_APIS`, or one of our private
  APIs that writes), a voter change or a DescribeQuorum (`FORWARDED_QUORUM_VERSIONS`: only
  the leader answers them) on a node that does not lead is sent to the leader it knows, over
  a connection secured as the controller links are (`controller.listener.names`). During an
  election it waits up to `LEADER_WAIT_S` for a leader; if it is the one elected it answers
  itself. Where it cannot forward (no leader in time, the leader unreachable, the leader
  says it no longer leads) the request is answered here, and a node that does not lead
  answers every write NOT_CONTROLLER (`ReplicatedService.submit` checks before it computes
  anything): never from its own, possibly stale, image. A request sent whose answer does not
  come within `FORWARD_TIMEOUT_MS` (or whose leader is replaced meanwhile) is answered
  REQUEST_TIMED_OUT: it may or may not have been applied. Before it relays a write's answer it
  asks the leader's high watermark (DescribeQuorum, on the same connection, so answered after
  the write) and waits, up to `CATCH_UP_WAIT_S`, until its own image holds it: the client's
  next read at this node sees its write (read-your-write), whichever of the leader's two
  answers (the write's, the fetch carrying its commit) came first.
- **Leader side** (`EnvelopeOpener`): Envelope is served only on the controller listeners
  (`controller.listener.names`) and only to the controllers' principals
  (`controller.principals`, `api.server.edge`), whatever the authorizer says: the Envelope
  names the principal the log records, so only a peer that authenticated as a controller
  may name one (Kafka asks CLUSTER_ACTION, which its brokers hold too). Anyone else gets
  CLUSTER_AUTHORIZATION_FAILED. The inner request must be one that is forwarded (no nested
  Envelope, no login, no read, no quorum request but a voter change, which the leader then
  authorizes for the client's principal as if it had come to it: ALTER on the cluster). It
  is answered for the client's principal and address, as the forwarding node authenticated
  and saw them, so the client's ACLs decide and the log's entry names the client; a write id
  in its header travels with it, so a retry through any node is answered once.

The principal travels as its `Type:name` text (UTF-8), the client's address as its 4 or 16
address bytes, as Kafka sends `InetAddress.getAddress()`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from api.cancellation import cancel_and_wait
from api.client.connection import ClientConnection, ClientError, known_error_code
from api.protocol import codec, private
from api.protocol.codec import KafkaRequest, RequestHeader, build, request_class
from api.protocol.connection import Connection, PrivateRequest, Request
from api.protocol.private import PRIVATE_APIS, PrivateStatus
from api.protocol.quorum.apis import (
    ADD_RAFT_VOTER_KEY,
    DESCRIBE_QUORUM_KEY,
    QUORUM_VERSIONS,
    REMOVE_RAFT_VOTER_KEY,
    partition_values,
    send_version,
    topic_values,
)
from api.protocol.quorum.responses import (
    error_answer,
)
from api.security.client_config import ClientSecurity
from api.server.kafka.base import Session
from api.server.kafka.refusals import refusal
from replay.controller.errors import ApiError, ErrorCode

logger = logging.getLogger("api.server.forwarding")

ENVELOPE_KEY = 58
"""Kafka's Envelope API (KIP-590)."""

ENVELOPE_VERSIONS = {ENVELOPE_KEY: (0, 0)}
"""What the quorum listeners serve of Envelope (Kafka's only version)."""

FORWARDED_KAFKA_APIS: frozenset[int] = frozenset({19, 20, 37, 33, 44, 43, 45, 30, 31, 51, 57})
"""The Kafka APIs that write: CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
IncrementalAlterConfigs, ElectLeaders, AlterPartitionReassignments, CreateAcls, DeleteAcls,
AlterUserScramCredentials, UpdateFeatures. Reads are answered by any node from its committed
image."""

VOTER_CHANGE_KEYS: frozenset[int] = frozenset({ADD_RAFT_VOTER_KEY, REMOVE_RAFT_VOTER_KEY})
"""The voter changes (KIP-853): only the leader applies them, and answers once committed."""

FORWARDED_QUORUM_VERSIONS: Mapping[int, tuple[int, int]] = {
    key: QUORUM_VERSIONS[key] for key in (*sorted(VOTER_CHANGE_KEYS), DESCRIBE_QUORUM_KEY)
}
"""The quorum APIs a follower forwards, with their versions: the voter changes, and
DescribeQuorum (as Kafka's brokers forward it), which only the leader answers: so an operator
at any node's client listener is answered, not told to find the leader."""

VOTER_CHANGE_TIMEOUT_MS = 60_000
"""How long a forwarded voter change waits for the leader's answer: the leader answers once the
change is committed, after the new voter caught up (the client's own wait is 30 s)."""

LEADER_WAIT_S = 3.0
"""How long a write on a node without a leader waits for the election before it is answered
here (NOT_CONTROLLER)."""

FORWARD_TIMEOUT_MS = 10_000
"""How long a forwarded request waits for the leader's answer (then REQUEST_TIMED_OUT)."""

CATCH_UP_WAIT_S = 5.0
"""How long a forwarded write's answer waits for this node's image to reach the leader's
commit (read-your-write); a node lagging further answers anyway, and logs it."""

CONNECT_TIMEOUT_MS = 2_000
"""How long connecting to the leader may take (a stopped process's kernel still accepts)."""

MAX_CONNECTIONS = 16
"""Connections to the leader at most: a connection's requests are answered one at a time, so
concurrent writes each take one (and meet in the leader's group commit)."""

_SIZE = struct.Struct(">i")
_VOTER_CHANGE_KEYS = frozenset(struct.pack(">h", key) for key in VOTER_CHANGE_KEYS)
"""A voter change's frame starts with one of these (its API key)."""
_DESCRIBE_QUORUM = struct.pack(">h", DESCRIBE_QUORUM_KEY)
"""A DescribeQuorum's frame starts with this."""


def forwarded(event: Request | PrivateRequest) -> bool:
    """Whether a request is a write (or a voter change) that only the leader answers."""
    if isinstance(event, Request):
        key = event.request.header.api_key
        return key in FORWARDED_KAFKA_APIS or key in FORWARDED_QUORUM_VERSIONS
    api = PRIVATE_APIS.get(event.header.api_key)
    return api is not None and api.writes


def address_bytes(host: str) -> bytes:
    """A client's IP address as Kafka sends it (4 or 16 bytes; empty if not an address)."""
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        return b""


def address_text(raw: bytes) -> str:
    """The text of an address `address_bytes` made; `ApiError` if it is not 4 or 16 bytes."""
    try:
        return str(ipaddress.ip_address(raw))
    except ValueError:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"an Envelope's client_host_address has {len(raw)} bytes (4 or 16 expected)",
        ) from None


def principal_text(raw: bytes) -> str:
    """The principal an Envelope names (`Type:name`); `ApiError` if it is not one."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    kind, sep, name = text.partition(":")
    if not sep or not kind or not name or len(text) > 1024:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            "an Envelope's request_principal is not a principal (Type:name)",
        )
    return text


class LeaderView(Protocol):
    """What forwarding needs of the quorum node (`api.raft.node.QuorumNode`)."""

    @property
    def leading(self) -> bool:
        """Whether this node leads and takes writes."""

    @property
    def leader_id(self) -> int:
        """The live leader's id as this node knows it, -1 during an election."""

    @property
    def node_id(self) -> int:
        """The id of this node."""

    def voter_addresses(self) -> dict[int, tuple[str, int]]:
        """Each voter's `(host, port)`, by node id."""

    async def caught_up(self, high_watermark: int, timeout: float) -> bool:
        """Wait until this node's image holds every entry below `high_watermark`.

        False when `timeout` (seconds) passed first or the node is stopping.
        """


class ForwardFailed(Exception):
    """The request could not be forwarded; nothing was sent (answer it here)."""


class Forwarder:
    """Sends a follower's client writes to the leader (see the module docstring)."""

    def __init__(
        self,
        node: LeaderView,
        *,
        security: ClientSecurity | None = None,
        leader_wait_s: float = LEADER_WAIT_S,
        timeout_ms: int = FORWARD_TIMEOUT_MS,
    ) -> None:
        self.node = node
        self.security = security
        self.leader_wait_s = leader_wait_s
        self.timeout_ms = timeout_ms
        self._idle: dict[int, list[ClientConnection]] = {}
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self._closed = False
        self.forwarded = 0
        """Requests answered by the leader through this node."""

    async def leader(self) -> int | None:
        """The leader to forward to; None when this node leads (or none is known in time).

        None at once once closed (the node is stopping: its clients go elsewhere).
        """
        node = self.node
        deadline = time.monotonic() + self.leader_wait_s
        while True:
            if node.leading or self._closed:
                return None
            leader = node.leader_id
            if leader >= 0 and leader != node.node_id:
                return leader
            if time.monotonic() >= deadline or self._closed:
                return None
            await asyncio.sleep(0.02)

    async def forward(self, frame: bytes, session: Session) -> bytes:
        """The leader's answer (its frame, without the size) to a client's request `frame`.

        `ForwardFailed` when nothing was sent (no leader, leader unreachable, or the leader
        said it does not lead); `ApiError(REQUEST_TIMED_OUT)` when the request was sent and
        no answer came (it may have been applied).
        """
        leader = await self.leader()
        if leader is None:
            raise ForwardFailed("this node leads, or no leader is known")
        envelope = build(
            request_class(ENVELOPE_KEY, 0),
            request_data=frame,
            request_principal=session.principal.encode(),
            client_host_address=address_bytes(session.host),
        )
        timeout_ms = self.timeout_ms
        if frame[:2] in _VOTER_CHANGE_KEYS:  # answered once committed: it may take a while
            timeout_ms = max(timeout_ms, VOTER_CHANGE_TIMEOUT_MS)
        high_watermark: int | None = None
        async with self._slots:
            connection = await self._connection(leader)
            try:
                answer = await self._exchange(connection, envelope, leader, timeout_ms)
                if int(answer.error_code) == 0 and frame[:2] != _DESCRIBE_QUORUM:
                    high_watermark = await self._leader_commit(connection, leader)
            except BaseException:
                await connection.close()
                raise
            self._idle.setdefault(leader, []).append(connection)
        code = int(answer.error_code)
        if code == ErrorCode.NOT_CONTROLLER:
            raise ForwardFailed(f"node {leader} no longer leads")
        if code != 0:
            raise ApiError(
                known_error_code(code),
                f"the leader (node {leader}) refused this node's forwarded request "
                f"(Envelope error {code}); add this node's principal to the leader's "
                "controller.principals",
            )
        self.forwarded += 1
        if high_watermark is not None and not self._closed:
            await self._catch_up(high_watermark)
        return bytes(answer.response_data)

    async def _catch_up(self, high_watermark: int) -> None:
        """Wait (bounded) until this node's image holds the leader's commit: read-your-write."""
        if not await self.node.caught_up(high_watermark, CATCH_UP_WAIT_S):
            logger.info(
                "controller %d answers a forwarded write before its image reached the "
                "leader's commit (offset %d): it lags the leader",
                self.node.node_id,
                high_watermark - 1,
            )

    async def _leader_commit(self, connection: ClientConnection, leader: int) -> int | None:
        """The leader's high watermark now, asked on the connection a write was answered on.

        The leader answers a connection's requests one at a time, so this answer comes after
        the write's: its high watermark covers the write's entries (the leader answers a write
        once committed). None when the leader does not say (it no longer leads, it refused
        DescribeQuorum, or an older leader that does not serve it here).
        """
        spoken = [
            version
            for version in range(send_version(DESCRIBE_QUORUM_KEY), -1, -1)
            if connection.speaks(DESCRIBE_QUORUM_KEY, version)
        ]
        if not spoken:
            return None
        version = spoken[0]
        request = build(
            request_class(DESCRIBE_QUORUM_KEY, version),
            topics=[topic_values(partition_values())],
        )
        try:
            answer = await connection.send_entity(request, timeout_ms=self.timeout_ms)
        except ClientError as exc:
            logger.debug("node %d did not tell its high watermark: %s", leader, exc)
            return None
        try:
            partition = answer.topics[0].partitions[0]
        except (IndexError, AttributeError):
            return None
        if int(answer.error_code) != 0 or int(partition.error_code) != 0:
            return None
        return int(partition.high_watermark)

    async def _exchange(
        self, connection: ClientConnection, envelope: Any, leader: int, timeout_ms: int
    ) -> Any:
        """Send the envelope; give up when the node hears of another leader meanwhile."""
        sent = asyncio.ensure_future(connection.send_entity(envelope, timeout_ms=timeout_ms))
        try:
            while True:
                done, _ = await asyncio.wait({sent}, timeout=0.05)
                if done:
                    break
                if self.node.leader_id != leader:
                    sent.cancel()
                    raise ApiError(
                        ErrorCode.REQUEST_TIMED_OUT,
                        f"node {leader} stopped leading before it answered this forwarded "
                        "write; it may or may not have been applied: look, then retry",
                    )
            return sent.result()
        except ClientError as exc:
            raise ApiError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"the leader (node {leader}) did not answer this forwarded write ({exc}); it "
                "may or may not have been applied: look, then retry",
            ) from None
        finally:
            await cancel_and_wait(sent)

    async def _connection(self, leader: int) -> ClientConnection:
        idle = self._idle.get(leader)
        while idle:
            connection = idle.pop()
            if not connection.closed:
                return connection
        for other in [k for k in self._idle if k != leader]:
            for stale in self._idle.pop(other):
                await stale.close()
        address = self.node.voter_addresses().get(leader)
        if address is None:
            raise ForwardFailed(f"node {leader} is not among the voters")
        host, port = address
        try:
            connection = await ClientConnection.connect(
                f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
                client_id=f"mlog-controller-{self.node.node_id}",
                timeout_ms=CONNECT_TIMEOUT_MS,
                security=self.security,
            )
        except (ClientError, OSError) as exc:
            raise ForwardFailed(f"node {leader} cannot be reached: {exc}") from None
        if not connection.speaks(ENVELOPE_KEY, 0):
            await connection.close()
            raise ForwardFailed(f"node {leader} does not serve Envelope on its controller address")
        return connection

    async def close(self) -> None:
        """Close the connections to the leader."""
        self._closed = True
        idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                await connection.close()


def refused_frame(event: Request | PrivateRequest, error: ApiError) -> bytes | None:
    """The whole response frame refusing a request with `error` (None: no such answer)."""
    if isinstance(event, Request):
        answer = refusal(event.request, error)
        if answer is None:
            return None
        return codec.encode_response(event.request.header.correlation_id, answer)
    header = event.header
    status = PrivateStatus(error_code=int(error.error_code), error_message=str(error))
    return private.encode_response(
        header.correlation_id,
        PRIVATE_APIS[header.api_key],
        status=status,
        version=header.api_version,
    )


KafkaAnswerer = Callable[[KafkaRequest, Session], Awaitable[codec.Answer]]
PrivateAnswerer = Callable[[RequestHeader, bytes, Session], Awaitable[bytes]]


class EnvelopeOpener:
    """Answers Envelope on the leader: the client's request, for the client's principal."""

    def __init__(
        self,
        *,
        node: LeaderView | None,
        admit: Callable[[int, Session, str], None],
        kafka: Callable[[str], KafkaAnswerer],
        private: PrivateAnswerer,
    ) -> None:
        """`kafka(listener)` answers a Kafka request as that listener; `private` ours.

        `admit(api_key, session, listener)` raises `ApiError` unless `session` may send that
        API on `listener` (`api.server.edge.Edge.check`): the Envelope itself (a controller on
        a controller listener), and a voter change inside one for the client it names, as if
        the client had sent it to this listener (the edge's table decides, not the sender).
        """
        self.node = node
        self.admit = admit
        self.kafka = kafka
        self.private = private

    async def open(self, request: KafkaRequest, session: Session, listener: str) -> codec.Answer:
        """The EnvelopeResponse to an Envelope from `session` (a controller) on `listener`."""
        header = request.header
        answer_class = codec.response_class(ENVELOPE_KEY, header.api_version)
        try:
            data = await self._inner(request.body, session, listener)
        except ApiError as exc:
            logger.info("Envelope from %s refused: %s", session.principal, exc)
            return codec.Answer(answer_class, {"error_code": int(exc.error_code)})
        return codec.Answer(answer_class, {"error_code": 0, "response_data": data})

    async def _inner(self, body: Any, session: Session, listener: str) -> bytes:
        self.admit(ENVELOPE_KEY, session, listener)
        if self.node is not None and not self.node.leading:
            raise ApiError(ErrorCode.NOT_CONTROLLER, "this controller does not lead")
        client = Session(
            principal=principal_text(bytes(body.request_principal)),
            host=address_text(bytes(body.client_host_address)),
        )
        frame = bytes(body.request_data)
        events = Connection(extra_versions=FORWARDED_QUORUM_VERSIONS).receive(
            _SIZE.pack(len(frame)) + frame
        )
        event = events[0] if len(events) == 1 else None
        if not isinstance(event, Request | PrivateRequest) or not forwarded(event):
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                "an Envelope carries one write request (not a read, a login or an Envelope)",
            )
        if isinstance(event, Request):
            header = event.request.header
            try:
                if header.api_key in VOTER_CHANGE_KEYS:
                    self.admit(header.api_key, client, listener)
                answer = await self.kafka(listener)(event.request, client)
            except ApiError as exc:
                # The client's request is refused, not the Envelope: the client reads why.
                refused: codec.Answer | None
                if header.api_key in VOTER_CHANGE_KEYS:
                    refused = error_answer(
                        header.api_key, header.api_version, int(exc.error_code), exc.message
                    )
                else:
                    refused = refusal(event.request, exc)
                if refused is None:
                    raise
                answer = refused
            response = codec.encode_response(event.request.header.correlation_id, answer)
        else:
            response = await self.private(event.header, event.body, client)
        return response[_SIZE.size :]
