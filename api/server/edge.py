"""The quorum's edge: which listener serves which quorum API to which principal, in one table.

A quorum's own traffic (the Raft APIs, voter changes and the Envelopes that carry forwarded
writes) decides what the log holds and under whose name, so it is served only where the
controllers meet, and only to them:

- Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot, UpdateRaftVoter and Envelope:
  on the listeners of `controller.listener.names`, to a controller principal only;
- AddRaftVoter and RemoveRaftVoter: there too, to a controller principal or (authorizer on)
  a principal allowed ALTER on the cluster (an operator);
- DescribeQuorum: on every listener, to DESCRIBE on the cluster (`kafka/quorum.py`).

A controller principal is one of `controller.principals` (by default the principal this node
presents on its own controller links). No authorizer setting widens the controller-only rows:
neither no authorizer, nor `allow.everyone.if.no.acl.found=true`, nor `super.users`, since
those decide what clients may do and a controller's rights are not a client's. Kafka's
controller asks CLUSTER_ACTION instead, which every broker holds (docs/security.md).

On any other listener these APIs are not in ApiVersions and a request of one closes the
connection, as any API the listener does not serve (`api.protocol.connection`). `Edge.check`
is what the server asks before any handler runs; a refusal is CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from api.protocol import codec
from api.protocol.codec import KafkaRequest
from api.protocol.quorum.apis import (
    ADD_RAFT_VOTER_KEY,
    BEGIN_QUORUM_EPOCH_KEY,
    DESCRIBE_QUORUM_KEY,
    END_QUORUM_EPOCH_KEY,
    FETCH_KEY,
    FETCH_SNAPSHOT_KEY,
    QUORUM_VERSIONS,
    REMOVE_RAFT_VOTER_KEY,
    UPDATE_RAFT_VOTER_KEY,
    VOTE_KEY,
)
from api.protocol.quorum.responses import (
    error_answer,
)
from api.server.config import CONTROLLER_PRINCIPALS_KEY
from api.server.forwarding import ENVELOPE_KEY, ENVELOPE_VERSIONS
from api.server.kafka.base import Session
from replay.controller.errors import ApiError, ErrorCode

CONTROLLER_ONLY: frozenset[int] = frozenset(
    {
        VOTE_KEY,
        BEGIN_QUORUM_EPOCH_KEY,
        END_QUORUM_EPOCH_KEY,
        FETCH_KEY,
        FETCH_SNAPSHOT_KEY,
        UPDATE_RAFT_VOTER_KEY,
        ENVELOPE_KEY,
    }
)
"""APIs served on a controller listener to a controller principal only."""

VOTER_CHANGES: frozenset[int] = frozenset({ADD_RAFT_VOTER_KEY, REMOVE_RAFT_VOTER_KEY})
"""APIs served on a controller listener to a controller, or to an operator allowed ALTER on
the cluster (with an authorizer: without one, nobody else can be told from anyone)."""

EVERY_LISTENER: frozenset[int] = frozenset({DESCRIBE_QUORUM_KEY})
"""Quorum APIs served on every listener (their own ACL check decides)."""


def controller_versions() -> dict[int, tuple[int, int]]:
    """The versions of every API a controller listener serves beyond the client APIs."""
    return {**QUORUM_VERSIONS, **ENVELOPE_VERSIONS}


def client_listener_versions() -> dict[int, tuple[int, int]]:
    """The quorum APIs a quorum node's other listeners serve (DescribeQuorum only)."""
    return {key: QUORUM_VERSIONS[key] for key in EVERY_LISTENER}


@dataclass(frozen=True, slots=True, kw_only=True)
class Edge:
    """Where a quorum node serves its quorum APIs and to whom (see the module docstring)."""

    controller_listeners: frozenset[str]
    """Listener names of `controller.listener.names` (upper-case)."""
    controller_principals: frozenset[str]
    """The principals the controller-only APIs are served to."""
    operator_allowed: Callable[[Session], bool] = field(default=lambda session: False)
    """Whether a principal may change the voters as an operator (ALTER on the cluster, with an
    authorizer on; always False without one)."""

    def serves(self, listener: str) -> Mapping[int, tuple[int, int]]:
        """The quorum API versions listener `listener` serves (and lists in ApiVersions)."""
        if listener in self.controller_listeners:
            return controller_versions()
        return client_listener_versions()

    def is_controller_listener(self, listener: str) -> bool:
        """Whether `listener` is one of `controller.listener.names`."""
        return listener in self.controller_listeners

    def check(self, api_key: int, listener: str, session: Session) -> None:
        """Refuse (CLUSTER_AUTHORIZATION_FAILED) a quorum request this edge does not admit.

        APIs outside the table pass: their handlers decide.
        """
        if api_key not in CONTROLLER_ONLY and api_key not in VOTER_CHANGES:
            return
        if listener not in self.controller_listeners:
            raise ApiError(
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                f"API {api_key} is served only on the controller listener "
                f"({', '.join(sorted(self.controller_listeners))})",
            )
        if session.principal in self.controller_principals:
            return
        if api_key in VOTER_CHANGES and self.operator_allowed(session):
            return
        raise ApiError(
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            f"{session.principal} is not a controller ({CONTROLLER_PRINCIPALS_KEY}); API "
            f"{api_key} is the controllers' own",
        )


def refused_answer(request: KafkaRequest, error: ApiError) -> codec.Answer:
    """The answer refusing a quorum request or an Envelope as a whole (its top-level code)."""
    header = request.header
    if header.api_key == ENVELOPE_KEY:
        return codec.Answer(
            codec.response_class(ENVELOPE_KEY, header.api_version),
            {"error_code": int(error.error_code)},
        )
    return error_answer(header.api_key, header.api_version, int(error.error_code), error.message)


def quorum_edge(
    listeners: Collection[str],
    principals: Collection[str],
    operator_allowed: Callable[[Session], bool] | None = None,
) -> Edge:
    """The edge of a quorum node: its controller listeners and the controllers' principals."""
    if not listeners:
        raise ValueError(
            "a quorum node needs controller.listener.names: name the listener the controllers "
            "talk to each other on (e.g. controller.listener.names=CONTROLLER)"
        )
    if not principals:
        raise ValueError(
            f"a quorum node needs the controllers' principals; set {CONTROLLER_PRINCIPALS_KEY}"
        )
    return Edge(
        controller_listeners=frozenset(name.upper() for name in listeners),
        controller_principals=frozenset(principals),
        operator_allowed=operator_allowed or (lambda session: False),
    )
