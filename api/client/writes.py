"""Idempotent writes: each write carries a write id and is sent again until answered.

`IdempotentWrites` sits in front of `AdminClient`'s areas: their `self.write` and
`self.call` of a write API come here, get this client's next write id, and are sent again
(same id) at the controller when the answer is lost or says NOT_CONTROLLER
(docs/replication.md). A write that waits too long makes the client ask the other voters
whether its node still leads.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from api.cancellation import cancel_and_wait
from api.client.apis import RETRY_BACKOFF_MAX_S, RETRY_BACKOFF_S, WRITE_ATTEMPTS
from api.client.connection import (
    ClientConnection,
    ClientError,
    ConnectionLost,
    RemoteError,
)
from api.client.quorum_apis import QuorumApis, named_controller
from api.protocol import codec
from api.protocol.codec import build, request_class
from api.protocol.private import PrivateApi
from replay.controller.errors import ErrorCode

T = TypeVar("T")

LEADER_CHECK_S = 1.0
"""How long a write waits for its answer before the client asks the other voters whether its
node still leads; then again every `LEADER_RECHECK_S`. A leader that hangs (SIGSTOP, a
stalled disk) is replaced by an election within about the fetch timeout: the client leaves
it as soon as another leader is named, well before its request timeout."""

LEADER_RECHECK_S = 0.5
"""How often a write still unanswered asks again (see `LEADER_CHECK_S`)."""

ELECTION_WAIT_S = 30.0
"""How long a write answered NOT_CONTROLLER or REQUEST_TIMED_OUT is sent again at least,
whatever `WRITE_ATTEMPTS` says: the quorum answers, it is electing a leader (one election takes
about the fetch timeout, 2 s; on a loaded host several rounds can be needed). Half Kafka's
`default.api.timeout.ms` (60 s)."""

ASK_WAIT_S = 0.5
ASK_WAIT_MAX_S = 4.0
"""How long asking one voter who leads may take while a write waits: `ASK_WAIT_S` for the
connect and as long for the answer at first, doubling each round up to `ASK_WAIT_MAX_S` (a
loaded host's voters answer, just slower; the write's own answer is not held up meanwhile)."""


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


class IdempotentWrites(QuorumApis):
    """Write ids and retries for every write API (the front of `AdminClient`)."""

    def _start_area(self) -> None:
        super()._start_area()
        self.instance_id = uuid.uuid4().bytes
        """This client's random id: with a sequence number, it names each write it sends."""
        self._sequences = itertools.count()
        self.election_wait_s = ELECTION_WAIT_S
        """How long a write answered "no leader yet" is sent again at least (`ELECTION_WAIT_S`)."""

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
        Kafka answer or a private API's `RemoteError`: a follower whose leader stopped
        leading before it answered a forwarded write says the latter): the client then
        connects to the quorum's leader, or a node that forwards to it. At most
        `WRITE_ATTEMPTS` times, backing off from `RETRY_BACKOFF_S`; answered NOT_CONTROLLER or
        REQUEST_TIMED_OUT (a quorum electing its leader), for `election_wait_s` at least. A
        server that saw the write already answers with the first answer, so it is applied once
        (docs/replication.md). Other errors are not retried: the same request would fail the
        same way.
        """
        write_id = codec.write_id_bytes(self.instance_id, next(self._sequences))
        pause = RETRY_BACKOFF_S
        loop = asyncio.get_running_loop()
        election_deadline = loop.time() + self.election_wait_s
        for attempt in itertools.count():
            spent = attempt >= WRITE_ATTEMPTS - 1 or self.address is None
            # A quorum that answers "no leader yet" is electing one: its answers go on until
            # the election wait is over, whatever the attempts (a loaded host's elections
            # can take several rounds).
            electing_over = self.address is None or (spent and loop.time() >= election_deadline)
            moved_to: str | None = None
            try:
                response = await self._answer_or_moved(send(write_id))
            except LeaderMoved as exc:
                if spent:
                    raise
                moved_to = exc.leader
            except ConnectionLost:
                if spent:
                    raise
            except RemoteError as exc:
                if electing_over or exc.error_code not in _SENT_AGAIN:
                    raise
            else:
                if electing_over or not _not_controller(response, _SENT_AGAIN):
                    return response
            if moved_to is None:  # the next leader is known at once: no pause before it
                await asyncio.sleep(pause)
                pause = min(pause * 2, RETRY_BACKOFF_MAX_S)
            await self._reconnect(moved_to)
        raise AssertionError("unreachable")  # the last attempt returns or raises

    async def _answer_or_moved(self, sent: Awaitable[T]) -> T:
        """`sent`'s answer, unless the quorum names another leader while it waits.

        After `LEADER_CHECK_S` without an answer, the other voters are asked who leads (and
        again `LEADER_RECHECK_S` after each round that named nobody else); once one names a
        leader other than this client's node, the wait ends with `LeaderMoved` (the write is
        sent there again, same id). The asking runs beside the write: an answer that comes
        meanwhile is returned at once. Each round gives a voter longer to answer
        (`ASK_WAIT_S`, doubling up to `ASK_WAIT_MAX_S`): a loaded host's voters still get
        heard. A client that knows no voters (a single server) just waits.
        """
        others = [a for a in self.bootstrap if a != self.address]
        if not others:
            return await sent
        task = asyncio.ensure_future(sent)
        asking: asyncio.Task[str | None] | None = None
        ask_wait = ASK_WAIT_S
        try:
            pause = LEADER_CHECK_S
            while True:
                if asking is None:
                    done, _ = await asyncio.wait({task}, timeout=pause)
                    if task in done:
                        return task.result()
                    asking = asyncio.ensure_future(self._leader_named_elsewhere(others, ask_wait))
                    continue
                either: set[asyncio.Task[Any]] = {task, asking}
                done, _ = await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                if task in done:
                    return task.result()
                leader, asking = asking.result(), None
                if leader is not None:
                    raise LeaderMoved(
                        f"{self.address} did not answer; the quorum's leader is now {leader}",
                        leader,
                    )
                pause = LEADER_RECHECK_S
                ask_wait = min(ask_wait * 2, ASK_WAIT_MAX_S)
        finally:
            await cancel_and_wait(task)
            if asking is not None:
                await cancel_and_wait(asking)

    async def _leader_named_elsewhere(self, others: Sequence[str], wait: float) -> str | None:
        """A leader other than this client's node, as the first of `others` to name one does.

        Each voter gets `wait` seconds to connect and `wait` more to answer; None once every
        voter answered, failed or ran out of time without naming another leader.
        """

        async def ask(address: str) -> str | None:
            try:
                asked = await self._connect_alike(address, wait)
            except (ClientError, OSError, TimeoutError):
                return None
            try:
                async with asyncio.timeout(wait):
                    named = await named_controller(asked)
            except (ClientError, OSError, TimeoutError):
                named = None
            finally:
                await asked.close()
            return None if named is None else named[0]

        asks = [asyncio.ensure_future(ask(a)) for a in others]
        try:
            for answered in asyncio.as_completed(asks):
                leader = await answered
                if leader is not None and leader != self.address:
                    return leader
            return None
        finally:
            for pending in asks:
                await cancel_and_wait(pending)
