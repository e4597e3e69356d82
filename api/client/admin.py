"""`AdminClient`: every API `mlog serve` answers, as methods over one `ClientConnection`.

Kafka APIs are built and read with the protocol core's kio codec. The methods the CLI uses
return the same result dataclasses the embedded controller returns (`replay.controller.commands`),
so a command prints the same thing whichever it runs against; the others return kio's response
entity. Our own APIs (`api.protocol.private`) return their Avro-bound dataclasses; a refused
request raises `RemoteError` with the code and the text the embedded CLI would print.

    async with await AdminClient.connect("127.0.0.1:9092") as client:
        (result,) = await client.create_topics([CreatableTopic(name="orders")])

Over TLS and with a SASL login, as a client config file says (`--command-config`):

    security = load_client_security("client.properties")
    async with await AdminClient.connect("broker:9094", security=security) as client:
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from api.client.connection import (
    DEFAULT_TIMEOUT_MS,
    ClientConnection,
    ClientError,
    ConnectionLost,
    RemoteError,
    known_error_code,
)
from api.client.security_apis import SecurityApis
from api.client.time_travel import change_of, history_entry_of, image_from_response, wire_entity
from api.protocol import codec, private
from api.protocol.codec import build, request_class
from api.protocol.private import EntryDecoder, PrivateApi
from records.entry import LogEntry
from records.model import ConfigResourceType
from records.uuids import Uuid
from replay.controller.commands import (
    AlterConfig,
    AlterConfigsResult,
    BrokerAction,
    BrokerResult,
    CancelPartitionDeletion,
    CancelPartitionDeletionResult,
    ConfigResource,
    CreatableTopic,
    CreateNamespace,
    CreateNamespaceResult,
    CreatePartitionsResult,
    CreatePartitionsTopic,
    CreateTopicResult,
    DeleteNamespace,
    DeleteNamespaceResult,
    DeletePartitionsResult,
    DeletePartitionsTopic,
    DeleteTopicResult,
    ElectionType,
    MoveTopic,
    MoveTopicResult,
    NamespaceInfo,
    Outcome,
    PartitionResult,
    PurgeResult,
    Reassignment,
    RegisterBroker,
    TopicPartition,
    TopicRef,
)
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import INT16_MAX, INT32_MAX, INT32_MIN
from replay.features import FeatureResult, FeatureUpdate, UpgradeType
from replay.image import MetadataImage
from replay.timetravel import Change, Entity, HistoryEntry

if TYPE_CHECKING:
    from api.protocol.quorum.messages import DescribeQuorumResponse
    from api.security.client_config import ClientSecurity

T = TypeVar("T")

DESCRIBE_QUORUM_KEY = 55
"""DescribeQuorum: answered by a quorum's nodes, and by a single server as a one-voter quorum."""

VOTE_KEY = 52
"""Vote: only a node of a controller quorum serves it (a single server has no one to ask)."""

NOT_LEADER_OR_FOLLOWER = 6
"""Kafka's answer to a voter change at a node that does not lead (nothing applied)."""

WRITE_ATTEMPTS = 12
"""How many times a write is sent at most: a first attempt and eleven retries (same write id)."""

RETRY_BACKOFF_S = 0.05
"""The pause before a write's first retry; it doubles for each next one, up to
`RETRY_BACKOFF_MAX_S` (Kafka's `retry.backoff.ms` and `retry.backoff.max.ms`, KIP-580)."""

RETRY_BACKOFF_MAX_S = 0.25
"""The longest pause between two attempts of a write. An election takes about the fetch
timeout (2 s); a longer pause would add most of itself to a failover (pauses of 0.8 and 1.6 s
made a kill -9 of the leader cost 3.2 s instead of 2.1 s, `bench/quorum_bench.py`)."""

CONTROLLER_WAIT_S = 5.0
"""How long a client looks for the quorum's leader while an election is under way."""

CONNECT_WAIT_S = 2.0
"""How long connecting to a node the client was sent to (a named leader, a retry) may take,
ApiVersions answered: the kernel accepts connections for a stopped process, which then never
answers, so the request timeout would be waited out in full."""

LEADER_CHECK_S = 1.0
"""How long a write waits for its answer before the client asks the other voters whether its
node still leads; then again every `LEADER_RECHECK_S`. A leader that hangs (SIGSTOP, a
stalled disk) is replaced by an election within about the fetch timeout: the client leaves
it as soon as another leader is named, well before its request timeout."""

LEADER_RECHECK_S = 0.5
"""How often a write still unanswered asks again (see `LEADER_CHECK_S`)."""

ASK_WAIT_S = 0.5
"""How long asking one voter who leads may take while a write waits."""

_INT16 = (-INT16_MAX - 1, INT16_MAX)
_INT32 = (INT32_MIN, INT32_MAX)


def _address(host: Any, port: Any) -> str:
    """`host:port` of a Metadata broker entry (an IPv6 host in brackets)."""
    text = str(host)
    return f"[{text}]:{int(port)}" if ":" in text else f"{text}:{int(port)}"


async def _named_controller(
    client: AdminClient, *, close: bool = False
) -> tuple[str | None, list[str]] | None:
    """The controller a node names (or None) and every node's address; None if it cannot say.

    `close`: the connection was opened just to ask, and is closed after.
    """
    try:
        answer = await client.metadata([])
    except ClientError:
        return None
    finally:
        if close:
            await client.close()
    nodes = {int(b.node_id): _address(b.host, b.port) for b in answer.brokers}
    return nodes.get(int(answer.controller_id)), list(nodes.values())


class LeaderMoved(ConnectionLost):
    """The node a write was sent to did not answer, and the quorum names another leader."""

    def __init__(self, text: str, leader: str) -> None:
        super().__init__(text)
        self.leader = leader
        """`host:port` of the leader the other voters name."""


def _not_controller(
    response: Any, codes: frozenset[int] = frozenset({ErrorCode.NOT_CONTROLLER})
) -> bool:
    """Whether an answer refuses the write with one of `codes` (anywhere in it)."""
    if int(getattr(response, "error_code", 0) or 0) in codes:
        return True
    for field in dataclasses.fields(response):
        value = getattr(response, field.name)
        if isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item) and _not_controller(item, codes):
                    return True
    return False


_SENT_AGAIN = frozenset({ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT})
"""Answers a write is sent again for, with its id: NOT_CONTROLLER, and REQUEST_TIMED_OUT,
which a quorum node answers when the leader it forwarded the write to stopped leading before
it answered (the write id makes the second sending safe: a write seen is answered once)."""


def _fits(values: Any, bounds: tuple[int, int], what: str) -> None:
    """Refuse locally a value the request's field cannot carry (else `struct.error` later)."""
    low, high = bounds
    for value in values if isinstance(values, list | tuple) else (values,):
        if not low <= value <= high:
            raise ClientError(
                f"{what} {value} cannot be sent: the protocol field holds {low}..{high}"
            )


def _outcome(code: Any, message: str | None) -> Outcome:
    error = known_error_code(int(code))
    return Outcome(error_code=error, error_message=message if error else None)


def _uuid(value: Any) -> Uuid:
    """A kio UUID field (None for the zero id) as our Uuid."""
    return Uuid.ZERO if value is None else Uuid(value.bytes)


class AdminClient(SecurityApis):
    """An asyncio admin client over one connection (see the module docstring)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        client_id: str = "mlog",
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
    ) -> None:
        super().__init__(reader, writer, client_id=client_id, timeout_ms=timeout_ms)
        self._entries = EntryDecoder()
        self.instance_id = uuid.uuid4().bytes
        """This client's random id: with a sequence number, it names each write it sends."""
        self._sequences = itertools.count()
        self.bootstrap: list[str] = []
        """Where else to look for the controller when a write must be sent again: the
        quorum's voters `connect_controller` learned (a retry tries its own address first)."""
        self.quorum_leader_id = -1
        """The leader's id the last DescribeQuorum answer named (-1: none asked or known)."""

    async def write(self, api_key: int, **values: Any) -> Any:
        """A Kafka write API, idempotent: retried with the same write id until answered.

        The write carries (`instance_id`, its sequence number) in the request header
        (`codec.WRITE_ID_TAG`) and is retried as `_idempotent` says. A version without tagged
        fields (a server that speaks no flexible one) is sent once, without an id.
        """
        body = build(request_class(api_key, self.version(api_key)), **values)
        if not body.__header_schema__.__flexible__:
            return await self._kafka(body)  # no tagged fields in header v1: as before
        return await self._idempotent(lambda write_id: self._kafka(body, write_id))

    async def call(
        self,
        api: PrivateApi,
        request: Any,
        *,
        timeout_ms: int | None = None,
        write_id: bytes | None = None,
    ) -> Any:
        """One of our own APIs; a write API is idempotent, retried as `_idempotent` says.

        A write without a `write_id` gets the next one of this client, in the API's flexible
        version (request header v2). A server that speaks only the API's older version
        (negotiated down) gets it there, once and without an id, as before. With a
        `write_id` the request is sent once, with that id.
        """
        if write_id is not None or not api.writes or not api.flexible(self.version(api.key)):
            return await super().call(api, request, timeout_ms=timeout_ms, write_id=write_id)

        async def send(write_id: bytes) -> Any:
            return await ClientConnection.call(
                self, api, request, timeout_ms=timeout_ms, write_id=write_id
            )

        return await self._idempotent(send)

    async def _idempotent(self, send: Callable[[bytes], Awaitable[T]]) -> T:
        """`send(write_id)` with this client's next write id; again, same id, until answered.

        It is sent again when the answer is lost (`ConnectionLost`: the connection failed or
        closed, or no answer came in time) or is NOT_CONTROLLER or REQUEST_TIMED_OUT (in a
        Kafka answer; NOT_CONTROLLER in a private API's `RemoteError`): the client then
        connects to the quorum's leader, or a node that forwards to it. At most
        `WRITE_ATTEMPTS` times, backing off from `RETRY_BACKOFF_S`. A server that saw the
        write already answers with the first answer, so it is applied once
        (docs/replication.md). Other errors are not retried: the same request would fail the
        same way.
        """
        write_id = codec.write_id_bytes(self.instance_id, next(self._sequences))
        pause = RETRY_BACKOFF_S
        for attempt in range(WRITE_ATTEMPTS):
            last = attempt == WRITE_ATTEMPTS - 1 or self.address is None
            moved_to: str | None = None
            try:
                response = await self._answer_or_moved(send(write_id))
            except LeaderMoved as exc:
                if last:
                    raise
                moved_to = exc.leader
            except ConnectionLost:
                if last:
                    raise
            except RemoteError as exc:
                if last or exc.error_code != ErrorCode.NOT_CONTROLLER:
                    raise
            else:
                if last or not _not_controller(response, _SENT_AGAIN):
                    return response
            if moved_to is None:  # the next leader is known at once: no pause before it
                await asyncio.sleep(pause)
                pause = min(pause * 2, RETRY_BACKOFF_MAX_S)
            await self._reconnect(moved_to)
        raise AssertionError("unreachable")  # the last attempt returns or raises

    async def _answer_or_moved(self, sent: Awaitable[T]) -> T:
        """`sent`'s answer, unless the quorum names another leader while it waits.

        After `LEADER_CHECK_S` without an answer, and every `LEADER_RECHECK_S` after, the
        other voters are asked who leads; once one names a leader other than this client's
        node, the wait ends with `LeaderMoved` (the write is sent there again, same id).
        A client that knows no voters (a single server) just waits.
        """
        others = [a for a in self.bootstrap if a != self.address]
        if not others:
            return await sent
        task = asyncio.ensure_future(sent)
        try:
            wait = LEADER_CHECK_S
            while True:
                done, _ = await asyncio.wait({task}, timeout=wait)
                if done:
                    return task.result()
                wait = LEADER_RECHECK_S
                leader = await self._leader_named_elsewhere(others)
                if leader is not None and not task.done():
                    raise LeaderMoved(
                        f"{self.address} did not answer; the quorum's leader is now {leader}",
                        leader,
                    )
        finally:
            if not task.done():
                task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _leader_named_elsewhere(self, others: Sequence[str]) -> str | None:
        """A leader other than this client's node, as one of `others` names it (or None)."""

        async def ask(address: str) -> str | None:
            try:
                asked = await asyncio.wait_for(
                    AdminClient.connect(
                        address,
                        client_id=self.client_id,
                        timeout_ms=self.timeout_ms,
                        security=self.security,
                    ),
                    ASK_WAIT_S,
                )
            except (ClientError, OSError, TimeoutError):
                return None
            try:
                named = await asyncio.wait_for(_named_controller(asked), ASK_WAIT_S)
            except TimeoutError:
                named = None
            finally:
                await asked.close()
            return None if named is None else named[0]

        for leader in await asyncio.gather(*(ask(a) for a in others)):
            if leader is not None and leader != self.address:
                return leader
        return None

    async def _reconnect(self, leader: str | None = None) -> None:
        """Connect again to the controller (the leader): `leader` if known, else from the last.

        Else from the other addresses in `bootstrap`: the last node may be the one that died.
        Each node gets `CONNECT_WAIT_S` to answer (a stopped process's kernel still accepts).
        """
        assert self.address is not None
        await self.close()
        first = [] if leader is None else [leader]
        for address in dict.fromkeys([*first, self.address, *self.bootstrap]):
            try:
                fresh = await asyncio.wait_for(
                    AdminClient.connect_controller(
                        address,
                        client_id=self.client_id,
                        timeout_ms=self.timeout_ms,
                        security=self.security,
                        wait_s=CONTROLLER_WAIT_S,
                    ),
                    CONNECT_WAIT_S + CONTROLLER_WAIT_S,
                )
            except (ClientError, OSError, TimeoutError):
                continue
            self.bootstrap = list(dict.fromkeys([*self.bootstrap, *fresh.bootstrap]))
            self._take_over(fresh)
            return
        # None answered: the next attempt fails on the closed connection, and tries again.

    @classmethod
    async def connect_controller(
        cls,
        bootstrap: str,
        *,
        client_id: str = "mlog",
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        security: ClientSecurity | None = None,
        wait_s: float = CONTROLLER_WAIT_S,
    ) -> AdminClient:
        """Connect to the node that takes writes: the quorum's leader, found from `bootstrap`.

        A single server is its own controller. A quorum node names the leader as the
        Metadata answer's controller (Kafka's rule) and lists every voter; the client
        connects to the leader. A node that names none (an election, or a node cut off from
        the others) is not the last word: the other voters are asked in turn, for up to
        `wait_s`. Then the client stays with `bootstrap` (writes there answer NOT_CONTROLLER,
        reads work). The client keeps the voters it learned in `bootstrap`, for retries.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s

        async def connect(address: str, wait: float | None = CONNECT_WAIT_S) -> AdminClient:
            return await asyncio.wait_for(
                cls.connect(address, client_id=client_id, timeout_ms=timeout_ms, security=security),
                wait,
            )

        client = await connect(bootstrap, None)
        if VOTE_KEY not in client._versions:  # a single server: its own controller
            return client
        others: list[str] = []
        for turn in itertools.count():
            # The bootstrap node and the others in turn: one of them hears the leader.
            where = bootstrap
            if turn % 2 and others:
                where = others[(turn // 2) % len(others)]
            wait = min(2.0, max(0.1, deadline - loop.time()))
            if where == bootstrap:
                if client.closed:
                    # The node closed the connection (it is stopping: a leader handing over).
                    # Ask it again on a new one; if it is gone, the error says so and the
                    # caller tries its next server, instead of asking a dead connection
                    # until the wait ends.
                    await client.close()
                    client = await connect(bootstrap, wait)
                named = await _named_controller(client)
            else:
                try:
                    asked = await connect(where, wait)
                except (ClientError, OSError, TimeoutError):
                    asked = None
                named = None if asked is None else await _named_controller(asked, close=True)
            if named is not None:
                leader, voters = named
                others = [a for a in voters if a != bootstrap] or others
                if leader is not None and leader != bootstrap:
                    try:
                        at_leader = await connect(leader)
                    except (ClientError, OSError, TimeoutError):
                        # Named by a node that has not yet noticed it is gone (a killed or
                        # hung leader): ask again until the election names the next one.
                        leader = None
                    else:
                        await client.close()
                        client = at_leader
                if leader is not None:
                    client.bootstrap = [bootstrap, *others]
                    return client
            if loop.time() >= deadline:
                client.bootstrap = [bootstrap, *others]
                return client  # writes will say NOT_CONTROLLER; reads work on any node
            await asyncio.sleep(0.05)
        raise AssertionError("unreachable")  # itertools.count() never ends

    async def towards_leader(self, addresses: Sequence[str]) -> AdminClient:
        """Itself, or a client at the quorum leader's address among `addresses`.

        A quorum node's client listener names only itself as the controller and forwards
        the writes it does not lead; a client whose bootstrap list holds the leader's client
        address still goes there (one hop less): the leader's id from DescribeQuorum, each
        other address's id from its Metadata. Anything unanswered leaves this client as is.
        """
        if VOTE_KEY in self._versions or DESCRIBE_QUORUM_KEY not in self._versions:
            return self  # a single server, or a controller listener (which names the leader)
        try:
            # A follower forwards DescribeQuorum to the leader: the answer names the leader,
            # and this node's Metadata names this node (a client listener names only itself).
            leader = int((await self.describe_quorum()).leader_id)
            if leader < 0 or int((await self.metadata([])).controller_id) == leader:
                return self
        except (ApiError, ClientError, OSError):
            leader = self.quorum_leader_id
        if leader < 0:
            return self
        for address in addresses:
            if address == self.address:
                continue
            try:
                other = await asyncio.wait_for(
                    AdminClient.connect(
                        address,
                        client_id=self.client_id,
                        timeout_ms=self.timeout_ms,
                        security=self.security,
                    ),
                    CONNECT_WAIT_S,
                )
            except (ClientError, OSError, TimeoutError):
                continue
            try:
                answer = await asyncio.wait_for(other.metadata([]), CONNECT_WAIT_S)
                if int(answer.controller_id) == leader:
                    other.bootstrap = self.bootstrap
                    await self.close()
                    return other
            except (ClientError, OSError, TimeoutError):
                pass
            await other.close()
        return self

    async def describe_quorum(self) -> DescribeQuorumResponse:
        """DescribeQuorum (55): answered by a quorum's leader, or a single server (one voter).

        `RemoteError` if refused (CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the
        cluster; NOT_LEADER_OR_FOLLOWER from a quorum's other node; a server that does not
        serve it: an older one, or a quorum node's listener for clients only).
        """
        # Only `mlog quorum describe` asks: the quorum's messages (~25 ms of imports) are not
        # loaded by every other command that connects to a server.
        from api.protocol.quorum.apis import (  # noqa: PLC0415
            DescribeQuorumRequest,
            send_version,
        )
        from api.protocol.quorum.errors import RaftWireRefusal  # noqa: PLC0415
        from api.protocol.quorum.messages import DescribeQuorumResponse  # noqa: PLC0415
        from api.protocol.quorum.requests import (  # noqa: PLC0415
            encode_request,
        )
        from api.protocol.quorum.responses import (  # noqa: PLC0415
            decode_response,
        )

        theirs = self._versions.get(DESCRIBE_QUORUM_KEY)
        if theirs is None:
            raise RemoteError(
                35,
                "this server does not answer DescribeQuorum; ask a controller listener of the "
                "quorum (controller.listener.names)",
            )
        version = min(send_version(DESCRIBE_QUORUM_KEY), theirs[1])
        correlation_id = next(self._ids)
        frame = encode_request(
            DescribeQuorumRequest(correlation_id=correlation_id),
            destination=-1,
            cluster_id=None,
            client_id=self.client_id,
            version=version,
        )

        def decode(data: bytes) -> Any:
            try:
                return decode_response(data, api_key=DESCRIBE_QUORUM_KEY, version=version)
            except RaftWireRefusal as exc:
                return RemoteError(exc.error_code, str(exc))

        answer = await self._send(frame, correlation_id, decode)
        if isinstance(answer, RemoteError):
            raise answer
        if not isinstance(answer, DescribeQuorumResponse):
            raise ClientError(f"DescribeQuorum answered with {type(answer).__name__}")
        self.quorum_leader_id = int(answer.leader_id)
        if answer.error_code != 0:
            raise RemoteError(
                int(answer.error_code),
                f"{answer.error_code.name} ({int(answer.error_code)}): this node does not "
                f"lead (leader: {answer.leader_id}); ask the leader (list every node's address "
                "in --bootstrap-server: the client goes to the leader's)",
            )
        return answer

    # ------------------------------------------------------------------ KIP-853 voter changes

    async def add_raft_voter(
        self,
        voter_id: int,
        *,
        directory_id: str,
        host: str,
        port: int,
        listener: str = "CONTROLLER",
        timeout_ms: int = 30_000,
    ) -> None:
        """AddRaftVoter (80): make a caught-up node a voter; returns once committed.

        `RemoteError` with Kafka's code if refused: NOT_LEADER_OR_FOLLOWER (not the leader),
        REQUEST_TIMED_OUT (another change under way, the node not caught up, or no commit in
        time), DUPLICATE_VOTER, UNSUPPORTED_VERSION (a static quorum), ...
        """
        from api.protocol.quorum.apis import (  # noqa: PLC0415  # quorum modules on demand
            ADD_RAFT_VOTER_KEY,
            AddRaftVoterRequest,
            VoterEndpoint,
        )

        await self._voter_change(
            ADD_RAFT_VOTER_KEY,
            lambda correlation_id: AddRaftVoterRequest(
                correlation_id=correlation_id,
                voter_id=voter_id,
                voter_directory_id=directory_id,
                endpoints=(VoterEndpoint(name=listener, host=host, port=port),),
                timeout_ms=timeout_ms,
            ),
            timeout_ms=timeout_ms,
        )

    async def remove_raft_voter(self, voter_id: int, *, directory_id: str = "") -> None:
        """RemoveRaftVoter (81): remove a voter (of that directory id, if given); once committed.

        `RemoteError` with Kafka's code if refused (VOTER_NOT_FOUND, REQUEST_TIMED_OUT, ...).
        """
        from api.protocol.quorum.apis import (  # noqa: PLC0415  # quorum modules on demand
            REMOVE_RAFT_VOTER_KEY,
            RemoveRaftVoterRequest,
        )

        await self._voter_change(
            REMOVE_RAFT_VOTER_KEY,
            lambda correlation_id: RemoveRaftVoterRequest(
                correlation_id=correlation_id, voter_id=voter_id, voter_directory_id=directory_id
            ),
            timeout_ms=30_000,
        )

    async def _voter_change(
        self, api_key: int, request: Callable[[int], Any], *, timeout_ms: int
    ) -> None:
        from api.protocol.codec import API_NAMES  # noqa: PLC0415
        from api.protocol.quorum.apis import (  # noqa: PLC0415
            send_version,
        )
        from api.protocol.quorum.errors import error_name  # noqa: PLC0415
        from api.protocol.quorum.requests import (  # noqa: PLC0415
            encode_request,
        )
        from api.protocol.quorum.responses import (  # noqa: PLC0415
            decode_response,
        )

        # NOT_LEADER_OR_FOLLOWER: nothing was applied (a node that knew no leader in time, or
        # a leader that just stepped down): sent again to the controller, as a write is.
        pause = RETRY_BACKOFF_S
        for attempt in range(WRITE_ATTEMPTS):
            theirs = self._versions.get(api_key)
            if theirs is None:
                raise RemoteError(
                    35, f"this server does not answer {API_NAMES[api_key]}: not a quorum's node"
                )
            version = min(send_version(api_key), theirs[1])
            correlation_id = next(self._ids)
            frame = encode_request(
                request(correlation_id),
                destination=-1,
                cluster_id=None,
                client_id=self.client_id,
                version=version,
            )
            answer = await asyncio.wait_for(
                self._send(
                    frame,
                    correlation_id,
                    partial(decode_response, api_key=api_key, version=version),
                ),
                timeout_ms / 1000 + 5,
            )
            code = int(answer.error_code)
            if code != NOT_LEADER_OR_FOLLOWER or attempt == WRITE_ATTEMPTS - 1 or not self.address:
                break
            await asyncio.sleep(pause)
            pause = min(pause * 2, RETRY_BACKOFF_MAX_S)
            await self._reconnect()
        if code != 0:
            detail = getattr(answer, "error_message", None)
            raise RemoteError(
                code,
                f"{API_NAMES[api_key]} refused: {error_name(code)}"
                + (f": {detail}" if detail else ""),
            )

    # ------------------------------------------------------------------ Kafka APIs

    async def api_versions(self) -> dict[int, tuple[int, int]]:
        """Every API the server answers, with its version range (from the connect)."""
        return dict(self._versions)

    async def metadata(
        self, topics: Sequence[str] | None = None, *, topic_ids: Sequence[Uuid] = ()
    ) -> Any:
        """Brokers, controller and topics (all, or by name, or by id)."""
        wanted: list[dict[str, Any]] | None = None
        if topics is not None or topic_ids:
            wanted = [{"name": n, "topic_id": Uuid.ZERO.bytes} for n in topics or ()]
            wanted += [{"name": None, "topic_id": i.bytes} for i in topic_ids]
        return await self.request(
            3,
            topics=wanted,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )

    async def topic_name(self, ref: TopicRef) -> str:
        """The name of a topic given by name or id (Metadata by id)."""
        if ref.name is not None:
            return ref.name
        assert ref.topic_id is not None
        (topic,) = (await self.metadata(topic_ids=[ref.topic_id])).topics
        if int(topic.error_code) != 0 or topic.name is None:
            raise RemoteError(
                int(topic.error_code),
                f"UNKNOWN_TOPIC_ID ({int(topic.error_code)}): no topic has id {ref.topic_id}",
            )
        return str(topic.name)

    async def create_topics(
        self, topics: Sequence[CreatableTopic], *, validate_only: bool = False
    ) -> list[CreateTopicResult]:
        """CreateTopics: one result per topic."""
        for t in topics:
            _fits(t.num_partitions, _INT32, "a partition count of")
            _fits(t.replication_factor, _INT16, "a replication factor of")
            for partition, brokers in t.assignments:
                _fits(partition, _INT32, "partition")
                _fits(brokers, _INT32, "broker id")
        response = await self.write(
            19,
            topics=[
                {
                    "name": t.name,
                    "num_partitions": t.num_partitions,
                    "replication_factor": t.replication_factor,
                    "assignments": [
                        {"partition_index": p, "broker_ids": list(b)} for p, b in t.assignments
                    ],
                    "configs": [{"name": k, "value": v} for k, v in t.configs],
                }
                for t in topics
            ],
            timeout=self.timeout_ms,
            validate_only=validate_only,
        )
        return [
            CreateTopicResult(
                name=t.name,
                topic_id=_uuid(t.topic_id),
                outcome=_outcome(t.error_code, t.error_message),
                num_partitions=int(t.num_partitions),
                replication_factor=int(t.replication_factor),
            )
            for t in response.topics
        ]

    async def delete_topics(self, refs: Sequence[TopicRef]) -> list[DeleteTopicResult]:
        """DeleteTopics (v6: by name or id)."""
        response = await self.write(
            20,
            topics=[{"name": r.name, "topic_id": (r.topic_id or Uuid.ZERO).bytes} for r in refs],
            topic_names=[r.name for r in refs if r.name is not None],
            timeout=self.timeout_ms,
        )
        return [
            DeleteTopicResult(
                name=r.name,
                topic_id=_uuid(getattr(r, "topic_id", None)),
                outcome=_outcome(r.error_code, r.error_message),
            )
            for r in response.responses
        ]

    async def create_partitions(
        self, topics: Sequence[CreatePartitionsTopic], *, validate_only: bool = False
    ) -> list[CreatePartitionsResult]:
        """CreatePartitions: raise partition counts."""
        for t in topics:
            _fits(t.count, _INT32, "a partition count of")
            for brokers in t.assignments or ():
                _fits(brokers, _INT32, "broker id")
        response = await self.write(
            37,
            topics=[
                {
                    "name": await self.topic_name(t.topic),
                    "count": t.count,
                    "assignments": None
                    if t.assignments is None
                    else [{"broker_ids": list(b)} for b in t.assignments],
                }
                for t in topics
            ],
            timeout=self.timeout_ms,
            validate_only=validate_only,
        )
        return [
            CreatePartitionsResult(name=r.name, outcome=_outcome(r.error_code, r.error_message))
            for r in response.results
        ]

    async def describe_configs(
        self, resources: Sequence[ConfigResource], *, include_synonyms: bool = False
    ) -> Any:
        """DescribeConfigs (kio response entity)."""
        return await self.request(
            32,
            resources=[
                {"resource_type": int(r.type), "resource_name": r.name, "configuration_keys": None}
                for r in resources
            ],
            include_synonyms=include_synonyms,
            include_documentation=False,
        )

    async def alter_configs(
        self,
        resource: ConfigResource,
        values: dict[str, str | None],
        *,
        validate_only: bool = False,
    ) -> Any:
        """AlterConfigs (legacy: replaces every override of the resource; kio entity)."""
        return await self.write(
            33,
            resources=[
                {
                    "resource_type": int(resource.type),
                    "resource_name": resource.name,
                    "configs": [{"name": k, "value": v} for k, v in values.items()],
                }
            ],
            validate_only=validate_only,
        )

    async def incremental_alter_configs(
        self,
        changes: Sequence[tuple[ConfigResource, Sequence[AlterConfig]]],
        *,
        validate_only: bool = False,
    ) -> list[AlterConfigsResult]:
        """IncrementalAlterConfigs: set, delete, append, subtract; one result per resource."""
        response = await self.write(
            44,
            resources=[
                {
                    "resource_type": int(resource.type),
                    "resource_name": resource.name,
                    "configs": [
                        {"name": o.name, "config_operation": int(o.op), "value": o.value}
                        for o in ops
                    ],
                }
                for resource, ops in changes
            ],
            validate_only=validate_only,
        )
        return [
            AlterConfigsResult(
                resource=ConfigResource(
                    type=ConfigResourceType(int(r.resource_type)), name=r.resource_name
                ),
                outcome=_outcome(r.error_code, r.error_message),
            )
            for r in response.responses
        ]

    async def describe_cluster(self, *, include_fenced_brokers: bool = False) -> Any:
        """DescribeCluster (kio response entity)."""
        return await self.request(
            60,
            include_cluster_authorized_operations=False,
            endpoint_type=1,
            include_fenced_brokers=include_fenced_brokers,
        )

    async def describe_topic_partitions(self, topics: Sequence[str], *, limit: int = 2000) -> Any:
        """DescribeTopicPartitions, first page (kio response entity)."""
        return await self.request(
            75, topics=[{"name": n} for n in topics], response_partition_limit=limit, cursor=None
        )

    async def elect_leaders(
        self, partitions: Sequence[TopicPartition] | None, election: ElectionType
    ) -> list[PartitionResult]:
        """ElectLeaders (None: every partition not led by its preferred replica)."""
        wanted: list[dict[str, Any]] | None = None
        for p in partitions or ():
            _fits(p.partition, _INT32, "partition")
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for p in partitions:
                by_topic.setdefault(await self.topic_name(p.topic), []).append(p.partition)
            wanted = [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]
        response = await self.write(
            43, election_type=int(election), topic_partitions=wanted, timeout=self.timeout_ms
        )
        if int(response.error_code) != 0:
            raise RemoteError(
                int(response.error_code), f"ElectLeaders failed ({int(response.error_code)})"
            )
        return [
            PartitionResult(
                topic=t.topic,
                partition=int(p.partition_id),
                outcome=_outcome(p.error_code, p.error_message),
            )
            for t in response.replica_election_results
            for p in t.partition_result
        ]

    async def alter_partition_reassignments(
        self, reassignments: Sequence[Reassignment]
    ) -> list[PartitionResult]:
        """AlterPartitionReassignments (replicas None cancels); one result per partition."""
        for r in reassignments:
            _fits(r.partition.partition, _INT32, "partition")
            _fits(r.replicas or (), _INT32, "broker id")
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for r in reassignments:
            name = await self.topic_name(r.partition.topic)
            by_topic.setdefault(name, []).append(
                {
                    "partition_index": r.partition.partition,
                    "replicas": None if r.replicas is None else list(r.replicas),
                }
            )
        response = await self.write(
            45,
            topics=[{"name": n, "partitions": ps} for n, ps in by_topic.items()],
            timeout=self.timeout_ms,
        )
        if int(response.error_code) != 0:
            raise RemoteError(
                int(response.error_code),
                response.error_message or f"reassignment failed ({int(response.error_code)})",
            )
        return [
            PartitionResult(
                topic=t.name,
                partition=int(p.partition_index),
                outcome=_outcome(p.error_code, p.error_message),
            )
            for t in response.responses
            for p in t.partitions
        ]

    async def list_partition_reassignments(self) -> Any:
        """ListPartitionReassignments of every partition (kio response entity)."""
        return await self.request(46, topics=None, timeout=self.timeout_ms)

    # ------------------------------------------------------------------ our APIs

    async def create_namespace(self, name: str) -> CreateNamespaceResult:
        """Create a namespace and its missing parents."""
        result: CreateNamespaceResult = await self.call(
            private.CREATE_NAMESPACE, CreateNamespace(name=name)
        )
        return result

    async def delete_namespace(
        self, name: str, *, recursive: bool = False
    ) -> DeleteNamespaceResult:
        """Delete a namespace and its topics (and its children with `recursive`)."""
        result: DeleteNamespaceResult = await self.call(
            private.DELETE_NAMESPACE, DeleteNamespace(name=name, recursive=recursive)
        )
        return result

    async def list_namespaces(
        self, namespace: str = "", *, recursive: bool = False
    ) -> list[NamespaceInfo]:
        """The namespaces under one (all below it with `recursive`), with topic counts."""
        response = await self.call(
            private.LIST_NAMESPACES,
            private.ListNamespaces(namespace=namespace, recursive=recursive),
        )
        return list(response.namespaces)

    async def move_topic(self, request: MoveTopic) -> MoveTopicResult:
        """Move a topic to another namespace (it keeps its id)."""
        result: MoveTopicResult = await self.call(private.MOVE_TOPIC, request)
        return result

    async def delete_partitions(
        self, topics: Sequence[DeletePartitionsTopic], *, validate_only: bool = False
    ) -> list[DeletePartitionsResult]:
        """Lower partition counts (READ_ONLY for the delay, then NONE, then removed)."""
        response = await self.call(
            private.DELETE_PARTITIONS,
            private.DeletePartitions(topics=tuple(topics), validate_only=validate_only),
        )
        return list(response.results)

    async def cancel_partition_deletions(
        self, topics: Sequence[TopicRef]
    ) -> list[CancelPartitionDeletionResult]:
        """Cancel pending partition deletions (before their purge time): READ_WRITE again."""
        response = await self.call(
            private.CANCEL_PARTITION_DELETIONS,
            private.CancelPartitionDeletions(
                topics=tuple(CancelPartitionDeletion(topic=t) for t in topics)
            ),
        )
        return list(response.results)

    async def purge_pending(self) -> list[PurgeResult]:
        """Run one check of pending partition deletions now."""
        response = await self.call(private.PURGE_PENDING, private.PurgePending())
        return list(response.results)

    async def register_broker(self, request: RegisterBroker) -> BrokerResult:
        """Register a broker (a new incarnation)."""
        result: BrokerResult = await self.call(private.REGISTER_BROKER, request)
        return result

    async def change_broker(self, broker_id: int, action: BrokerAction) -> BrokerResult:
        """Fence, unfence, shut down or unregister a broker."""
        result: BrokerResult = await self.call(
            private.CHANGE_BROKER, private.ChangeBroker(broker_id=broker_id, action=action)
        )
        return result

    async def broker_liveness(self) -> private.BrokerLivenessList:
        """The brokers' sessions as the server knows them (the active controller keeps them)."""
        response: private.BrokerLivenessList = await self.call(
            private.DESCRIBE_BROKER_LIVENESS, private.DescribeBrokerLiveness()
        )
        return response

    async def fetch_log(
        self, offset: int, *, max_entries: int = 10_000, max_wait_ms: int = 0
    ) -> tuple[list[LogEntry], int]:
        """(entries from `offset`, the log's next offset); waits up to `max_wait_ms` for one."""
        response = await self.call(
            private.FETCH_LOG,
            private.FetchLog(
                offset=offset,
                max_entries=max_entries,
                max_wait_ms=max_wait_ms,
                schema_id=self._entries.known,
            ),
            timeout_ms=max_wait_ms + self.timeout_ms,
        )
        end = int(response.end_offset)
        entries = self._entries.decode(response.entries, lo=offset, hi=end - 1)
        return entries[:max_entries], end

    async def follow(
        self, offset: int = 0, *, max_wait_ms: int = 10_000
    ) -> AsyncIterator[LogEntry]:
        """Every entry from `offset` on, then each new one as it is committed (forever)."""
        while True:
            entries, end = await self.fetch_log(offset, max_wait_ms=max_wait_ms)
            for entry in entries:
                yield entry
            offset = entries[-1].offset + 1 if entries else min(offset, end)

    async def image_at(
        self, *, at_offset: int | None = None, at_time: str | None = None
    ) -> MetadataImage:
        """The image now, or after an offset, or at a time (ISO-8601 or epoch ms)."""
        request = private.ImageAt(
            at_offset=at_offset, at_time=at_time, schema_id=self._entries.known
        )
        response = await self.call(private.IMAGE_AT, request)
        return image_from_response(response, self._entries)

    async def diff(
        self, from_point: str, to_point: str | None = None
    ) -> tuple[int, int, list[Change]]:
        """(from offset, to offset, changes) between two points of the log."""
        response = await self.call(
            private.DIFF, private.Diff(from_point=from_point, to_point=to_point)
        )
        changes = [change_of(change) for change in response.changes]
        return int(response.from_offset), int(response.to_offset), changes

    async def log_digest(self, offset: int = -1) -> private.LogDigestResponse:
        """The hash chain's digest at `offset` (-1: at the node's committed offset)."""
        response: private.LogDigestResponse = await self.call(
            private.DESCRIBE_LOG_DIGEST, private.DescribeLogDigest(offset=offset)
        )
        return response

    async def history(
        self,
        entity: Entity,
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
    ) -> list[HistoryEntry]:
        """Every entry that touched `entity`, oldest first."""
        response = await self.call(
            private.HISTORY,
            private.History(entity=wire_entity(entity), gt=gt, lte=lte, limit=limit),
        )
        return [history_entry_of(entry) for entry in response.entries]

    # ------------------------------------------------------------------ feature levels
    # UpdateFeatures (57) and ApiVersions' feature fields: `mlog features`, kafka-features.

    async def describe_features(self) -> FeatureLevels:
        """The server's supported and finalized feature levels (ApiVersions v3+)."""
        answer = await self.request(
            codec.API_VERSIONS_KEY,
            client_software_name="metadata-log",
            client_software_version="1",
        )
        if int(answer.error_code) != 0:
            raise RemoteError(int(answer.error_code), "ApiVersions was refused")
        return FeatureLevels(
            supported={
                str(k.name): (int(k.min_version), int(k.max_version))
                for k in answer.supported_features
            },
            finalized={str(k.name): int(k.max_version_level) for k in answer.finalized_features},
            epoch=int(answer.finalized_features_epoch),
        )

    async def update_features(
        self, updates: Sequence[FeatureUpdate], *, validate_only: bool = False
    ) -> list[FeatureResult]:
        """UpdateFeatures: one result per update (a refusal as a whole: on every one).

        Sent like a write (to the leader, again after NOT_CONTROLLER): an update to the
        level a feature already has writes nothing, so a retry is harmless.
        """
        for update in updates:
            _fits(update.level, _INT16, f"the level of {update.name}")
        response = await self.write(
            57,
            timeout=60_000,
            feature_updates=[
                {
                    "feature": u.name,
                    "max_version_level": u.level,
                    "upgrade_type": int(u.upgrade_type),
                    "allow_downgrade": u.upgrade_type != UpgradeType.UPGRADE,
                }
                for u in updates
            ],
            validate_only=validate_only,
        )
        top = int(response.error_code)
        results = getattr(response, "results", None)
        if results is None:  # v2: the top-level error only
            return [
                FeatureResult(name=u.name, error_code=top, error_message=response.error_message)
                for u in updates
            ]
        return [
            FeatureResult(
                name=str(r.feature), error_code=int(r.error_code), error_message=r.error_message
            )
            for r in results
        ]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class FeatureLevels:
    """What a server says of feature levels: its supported ranges and the finalized levels."""

    supported: dict[str, tuple[int, int]]
    finalized: dict[str, int]
    epoch: int
    """The finalized levels' epoch: the offset of the image they were read from (-1: none)."""
