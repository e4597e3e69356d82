"""`AdminClient`'s side of a controller quorum: finding its leader, DescribeQuorum, voters.

`connect_controller` connects to the node that takes writes (the leader, as the Metadata
answers name it) and `towards_leader` moves a client there from a quorum node's client
listener; `_reconnect` is how a retried write or voter change follows a new leader.
DescribeQuorum (55) and KIP-853's AddRaftVoter (80) and RemoveRaftVoter (81) speak the
quorum's own wire codec: this is the one module of the client that imports it (on demand:
the quorum's messages cost ~25 ms of imports every other command skips).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Self, TypeVar

from api.client.apis import RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_S, WRITE_ATTEMPTS, ClientApis
from api.client.connection import DEFAULT_TIMEOUT_MS, ClientError, RemoteError
from replay.controller.errors import ApiError

if TYPE_CHECKING:
    from api.protocol.quorum.messages import DescribeQuorumResponse
    from api.security.client_config import ClientSecurity

Q = TypeVar("Q", bound="QuorumApis")

DESCRIBE_QUORUM_KEY = 55
"""DescribeQuorum: answered by a quorum's nodes, and by a single server as a one-voter quorum."""

VOTE_KEY = 52
"""Vote: only a node of a controller quorum serves it (a single server has no one to ask)."""

NOT_LEADER_OR_FOLLOWER = 6
"""Kafka's answer to a voter change at a node that does not lead (nothing applied)."""

CONTROLLER_WAIT_S = 5.0
"""How long a client looks for the quorum's leader while an election is under way."""

CONNECT_WAIT_S = 2.0
"""How long connecting to a node the client was sent to (a named leader, a retry) may take,
ApiVersions answered: the kernel accepts connections for a stopped process, which then never
answers, so the request timeout would be waited out in full."""

CAUGHT_UP_ENTRIES = 1000
"""How far behind the leader's high watermark a node may be for a reader to be placed there
(`towards_follower`): a few group commits' worth."""


def broker_address(host: Any, port: Any) -> str:
    """`host:port` of a Metadata broker entry (an IPv6 host in brackets)."""
    text = str(host)
    return f"[{text}]:{int(port)}" if ":" in text else f"{text}:{int(port)}"


async def named_controller(
    client: ClientApis, *, close: bool = False
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
    nodes = {int(b.node_id): broker_address(b.host, b.port) for b in answer.brokers}
    return nodes.get(int(answer.controller_id)), list(nodes.values())


class QuorumApis(ClientApis):
    """Find the quorum's leader and follow it; describe the quorum; change its voters."""

    def _start_area(self) -> None:
        super()._start_area()
        self.bootstrap: list[str] = []
        """Where else to look for the controller when a write must be sent again: the
        quorum's voters `connect_controller` learned (a retry tries its own address first)."""
        self.quorum_leader_id = -1
        """The leader's id the last DescribeQuorum answer named (-1: none asked or known)."""

    async def reconnect(self) -> None:
        """Connect again after the connection was lost (its node died): see `_reconnect`.

        No node answering leaves the connection closed: the next call fails, and may retry.
        """
        await self._reconnect()

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
                async with asyncio.timeout(CONNECT_WAIT_S + CONTROLLER_WAIT_S):
                    fresh = await type(self).connect_controller(
                        address,
                        client_id=self.client_id,
                        timeout_ms=self.timeout_ms,
                        security=self.security,
                        wait_s=CONTROLLER_WAIT_S,
                    )
            except (ClientError, OSError, TimeoutError):
                continue
            self.bootstrap = list(dict.fromkeys([*self.bootstrap, *fresh.bootstrap]))
            self._take_over(fresh)
            return
        # None answered: the next attempt fails on the closed connection, and tries again.

    @classmethod
    async def connect_controller(
        cls: type[Q],
        bootstrap: str,
        *,
        client_id: str = "mlog",
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        security: ClientSecurity | None = None,
        wait_s: float = CONTROLLER_WAIT_S,
    ) -> Q:
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

        async def connect(address: str, wait: float | None = CONNECT_WAIT_S) -> Q:
            async with asyncio.timeout(wait):
                return await cls.connect(
                    address, client_id=client_id, timeout_ms=timeout_ms, security=security
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
                named = await named_controller(client)
            else:
                try:
                    asked = await connect(where, wait)
                except (ClientError, OSError, TimeoutError):
                    asked = None
                named = None if asked is None else await named_controller(asked, close=True)
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

    async def towards_leader(self, addresses: Sequence[str]) -> Self:
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
        return await self._moved(addresses, lambda node: node == leader)

    async def towards_follower(self, addresses: Sequence[str]) -> Self:
        """Itself, or a client at a node other than the quorum leader among `addresses`.

        For a client that only reads (the console): every node answers the reads from its
        own committed log, and the leader is left to the writes and the quorum. Only a node
        the leader counts as caught up (its log within `CAUGHT_UP_ENTRIES` of the high
        watermark) is taken: one behind would show an older history. The leader's id and
        the replicas' offsets from DescribeQuorum, each address's id from its Metadata;
        anything unanswered (a single server, a principal without DESCRIBE on the cluster)
        leaves this client as is.
        """
        if VOTE_KEY in self._versions or DESCRIBE_QUORUM_KEY not in self._versions:
            return self
        try:
            quorum = await self.describe_quorum()
            leader = int(quorum.leader_id)
            if leader < 0 or int((await self.metadata([])).controller_id) != leader:
                return self
        except (ApiError, ClientError, OSError):
            return self
        floor = quorum.high_watermark - CAUGHT_UP_ENTRIES
        caught_up = {
            r.replica_id
            for r in (*quorum.current_voters, *quorum.observers)
            if r.replica_id != leader and r.log_end_offset >= floor
        }
        return await self._moved(addresses, caught_up.__contains__)

    async def _moved(self, addresses: Sequence[str], wanted: Callable[[int], bool]) -> Self:
        """A client at the first other address whose node (by its Metadata) is `wanted`."""
        for address in addresses:
            if address == self.address:
                continue
            try:
                other = await self._connect_alike(address, CONNECT_WAIT_S)
            except (ClientError, OSError, TimeoutError):
                continue
            try:
                async with asyncio.timeout(CONNECT_WAIT_S):
                    answer = await other.metadata([])
                if wanted(int(answer.controller_id)):
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
        from api.protocol.quorum.apis import DescribeQuorumRequest, send_version  # noqa: PLC0415
        from api.protocol.quorum.errors import RaftWireRefusal  # noqa: PLC0415
        from api.protocol.quorum.messages import DescribeQuorumResponse  # noqa: PLC0415
        from api.protocol.quorum.requests import encode_request  # noqa: PLC0415
        from api.protocol.quorum.responses import decode_response  # noqa: PLC0415

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
        from api.protocol.quorum.apis import send_version  # noqa: PLC0415
        from api.protocol.quorum.errors import error_name  # noqa: PLC0415
        from api.protocol.quorum.requests import encode_request  # noqa: PLC0415
        from api.protocol.quorum.responses import decode_response  # noqa: PLC0415

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
            async with asyncio.timeout(timeout_ms / 1000 + 5):
                answer = await self._send(
                    frame,
                    correlation_id,
                    partial(decode_response, api_key=api_key, version=version),
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
