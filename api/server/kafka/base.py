"""What every group of Kafka API handlers shares: the listener, the principal, the answer.

A handler takes a decoded request and the `Session` of its connection (who, from where) and
returns a
`codec.Answer`: the plain values `codec.build` takes for the response class of the request's
version, which keeps only the fields that version has, so one handler serves every advertised
version of its API. `codec.encode_response` writes it without building the entity;
`Answer.entity()` builds it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from api.protocol import codec
from api.protocol.codec import KafkaRequest, response_class
from api.server.kafka.authorization import Gate
from api.server.server_log import direct_handler
from api.service.service import MetadataService
from records.uuids import Uuid
from replay.controller.errors import ErrorCode

logger = logging.getLogger("api.server")

ANONYMOUS = "User:ANONYMOUS"
"""The principal of a Kafka client: this server has no authentication (as PLAINTEXT)."""

UNAUTHORIZED_OPS = -(2**31)
"""`authorized_operations` when the client did not ask for them (Kafka's INT32_MIN)."""


class QuorumView(Protocol):
    """What the answers of a quorum's node say about the quorum (api.raft.node)."""

    @property
    def leader_id(self) -> int:
        """The leader's node id, -1 while an election is under way."""

    def voter_addresses(self) -> dict[int, tuple[str, int]]:
        """Each voter's `(host, port)`, by node id."""

    @property
    def dynamic(self) -> bool:
        """Whether the voters are in the log (kraft.version 1) rather than static."""

    async def upgrade_voters(self) -> tuple[int, str | None]:
        """A static quorum's kraft.version upgrade on its leader: (error code, message)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Listener:
    """Where this server is reached (`advertised.listeners`) and who it is in answers."""

    host: str
    port: int
    node_id: int = 0
    cluster_id: str = ""
    quorum: QuorumView | None = None
    """The controller quorum this server is a node of (None: a single server)."""
    controller_listener: bool = True
    """Whether this is one of the quorum's controller listeners (`controller.listener.names`,
    where the voters' addresses are reachable); False on a quorum node's client listeners."""

    @property
    def advertises_voters(self) -> bool:
        """Whether answers name every voter (a quorum's controller listener) or only this node."""
        return self.quorum is not None and self.controller_listener

    @property
    def controller_id(self) -> int:
        """The node clients send writes to: the leader (-1 if unknown), or this one.

        The leader on a quorum's controller listener; this node on its client listeners (it
        forwards the writes it does not lead) and on a single server.
        """
        return self.quorum.leader_id if self.advertises_voters and self.quorum else self.node_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """Who sent a request and from where: what authorization decides on and the log records."""

    principal: str = ANONYMOUS
    """`User:<name>` once authenticated; `User:ANONYMOUS` on a PLAINTEXT listener."""
    host: str = "127.0.0.1"
    """The client's IP address (an ACL's `host` matches it)."""


ANONYMOUS_SESSION = Session()
"""The session of a request that comes from no connection (tests, in-process callers)."""

Handler = Callable[[KafkaRequest, Session], Awaitable[codec.Answer]]
"""`(request, session) -> answer`: the handler of one Kafka API (`dispatch` maps keys to them)."""


class HandlerGroup:
    """Handlers of related Kafka APIs, answered from a service for a listener.

    `gate` makes the authorization checks (none pass through it when the server has no
    authorizer).
    """

    def __init__(
        self, service: MetadataService, listener: Listener, gate: Gate | None = None
    ) -> None:
        self.service = service
        self.listener = listener
        self.gate = gate or Gate()

    def _answer(self, request: KafkaRequest, **values: Any) -> codec.Answer:
        """The answer to a request: these values in the response class of its version."""
        header = request.header
        return codec.new_answer(response_class(header.api_key, header.api_version), values)

    def _log_change(self, principal: str, what: str, results: Iterable[tuple[str, int]]) -> None:
        """One log line per changed (or refused) resource: who, what, which, and the outcome."""
        if not logger.isEnabledFor(logging.INFO):
            return
        for name, code in results:
            outcome = "ok" if code == 0 else ErrorCode(code).name
            log_info(CHANGE_LINE, (principal, what, name, outcome))


CHANGE_LINE = "%s %s %s: %s"
"""An admin change's log line: principal, what, which resource, outcome."""


def log_info(msg: str, args: tuple[Any, ...]) -> None:
    """`logger.info(msg, *args)` for a line of every write: the same line, made cheaper.

    `logging.LogRecord()` costs a few µs (a file name split, a level-name lookup, twenty
    attributes one by one), about what the rest of a small write's answer costs. Under
    `mlog serve`, where the server log's handler is the logger's only way out, the line is
    made without a record (`QueueingHandler.emit_info`: the text `logger.info` would give).
    Elsewhere (tests, embedding programs) the line goes through `logger.info`.
    """
    handler = direct_handler(logger)
    if handler is not None:
        handler.emit_info(msg % args)  # `mlog serve`: the line, straight to the writer's queue
    else:
        logger.info(msg, *args)


def uuid_of(value: Any) -> Uuid | None:
    """A kio UUID field (None stays None) as our Uuid."""
    if value is None:
        return None
    return Uuid.of_16_bytes(value.bytes)
