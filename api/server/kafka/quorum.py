"""The controller quorum's APIs on the server, answered by the server's `QuorumEndpoint`.

Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot and DescribeQuorum, and KIP-853's
AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter.

A server given no endpoint (a single server) serves only DescribeQuorum, as a quorum of one
voter (`sole_voter.py`, through this class); the others are not in its ApiVersions, and a
request of one of their keys closes the connection as any unknown API does. With one, who may
send each request was decided before it reached this class (`api.server.edge`: the
controllers' principals on the controller listener); DescribeQuorum, served on every
listener, is authorized here as Kafka authorizes it (DESCRIBE on the cluster), except for the
controllers on a controller listener, who may always ask it. Each is checked
as KRaft checks it (the metadata partition only, this
cluster's id, this node as the voter meant), mapped to the core's message
(`api.protocol.quorum`) and answered with what the endpoint answers. A refused request
is answered with its error code at the top level (CLUSTER_AUTHORIZATION_FAILED,
INVALID_REQUEST, INCONSISTENT_CLUSTER_ID, INVALID_VOTER_KEY), as Kafka answers it, and the
connection stays open.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from api.protocol import codec
from api.protocol.codec import KafkaRequest
from api.protocol.private import PRIVATE_VERSIONS
from api.protocol.quorum.apis import (
    DESCRIBE_QUORUM_KEY,
    QUORUM_API_NAMES,
    QUORUM_VERSIONS,
    QuorumRequest,
    QuorumResponse,
    api_key_of,
)
from api.protocol.quorum.errors import (
    INCONSISTENT_CLUSTER_ID,
    INVALID_VOTER_KEY,
    RaftWireRefusal,
)
from api.protocol.quorum.requests import (
    inbound_request,
)
from api.protocol.quorum.responses import (
    error_answer,
    response_answer,
)
from api.server.forwarding import ENVELOPE_VERSIONS
from api.server.kafka.authorization import Gate
from api.server.kafka.base import Listener, Session, logger
from api.service.service import MetadataService
from records.model import AclOperation
from replay.controller.errors import ApiError

_OPERATIONS = {DESCRIBE_QUORUM_KEY: AclOperation.DESCRIBE}
"""The operation on the cluster a quorum API needs here; the others are the edge's to decide
(`api.server.edge`: no ACL makes a client a controller)."""


class QuorumEndpoint(Protocol):
    """What answers the quorum requests a server receives (the quorum shell implements it)."""

    async def handle(self, sender_id: int, message: QuorumRequest) -> QuorumResponse:
        """The answer to one request from `sender_id` (-1 for a DescribeQuorum).

        The answer must be the response of the request's API (a VoteResponse to a
        VoteRequest, ...). It may wait (a Fetch parked until there is news, up to its
        `max_wait_ms`); the connection's next request waits meanwhile, as in Kafka. The
        server stops only once the requests it is answering end, so at shutdown a parked
        request must be answered or its wait cancelled (the connection then just closes).
        An exception closes the request's connection, with a logged traceback.
        """
        ...


class QuorumApis:
    """Answers the quorum APIs from a `QuorumEndpoint`, after Kafka's checks."""

    def __init__(
        self,
        endpoint: QuorumEndpoint,
        service: MetadataService,
        listener: Listener,
        gate: Gate,
        *,
        features: Callable[[int], dict[str, Any]] | None = None,
        served: Mapping[int, tuple[int, int]] | None = None,
        controllers: frozenset[str] = frozenset(),
    ) -> None:
        """`served`: the quorum API versions listed in ApiVersions (None: all of them).

        `controllers`: principals that describe the quorum without an ACL (the controllers,
        on a controller listener: a follower asks the leader's high watermark after each
        write it forwarded, `api.server.forwarding`).
        """
        self._controllers = controllers
        self.endpoint = endpoint
        self._served = {**QUORUM_VERSIONS, **ENVELOPE_VERSIONS} if served is None else dict(served)
        self._features = features
        self.service = service
        self.listener = listener
        self.gate = gate

    async def api_versions(self, request: KafkaRequest, session: Session) -> codec.Answer:
        """ApiVersions with the quorum APIs among the others."""
        header = request.header
        return codec.Answer(
            codec.response_class(header.api_key, header.api_version),
            {
                "error_code": 0,
                "api_keys": codec.supported_api_keys({**PRIVATE_VERSIONS, **self._served}),
                "throttle_time": 0,
                **({} if self._features is None else self._features(header.api_version)),
            },
        )

    async def handle(self, request: KafkaRequest, session: Session) -> codec.Answer:
        """The answer to one quorum request: the endpoint's, or the refusal of Kafka's checks."""
        header = request.header
        key, version = header.api_key, header.api_version
        name = QUORUM_API_NAMES[key]
        operation = _OPERATIONS.get(key)
        try:
            if operation is not None and session.principal not in self._controllers:
                self.gate.require_cluster(self.service.image, session, operation)
            inbound = inbound_request(request)
            self._check_addressing(inbound.cluster_id, inbound.voter_id, name)
        except (ApiError, RaftWireRefusal) as exc:
            code = int(exc.error_code)
            text = exc.message if isinstance(exc, ApiError) else str(exc)
            logger.info("%s %s refused: %s", session.principal, name, text)
            return error_answer(key, version, code, text)
        answer = await self.endpoint.handle(inbound.sender_id, inbound.message)
        if api_key_of(answer) != key or type(answer).__name__.endswith("Request"):
            raise TypeError(
                f"the quorum endpoint answered a {name}Request with a {type(answer).__name__}"
            )
        return response_answer(answer, version=version)

    def _check_addressing(self, cluster_id: str | None, voter_id: int, name: str) -> None:
        """Refuse a request meant for another cluster or another voter (KRaft's checks)."""
        ours = self.listener.cluster_id
        if cluster_id is not None and ours and cluster_id != ours:
            raise RaftWireRefusal(
                INCONSISTENT_CLUSTER_ID,
                f"{name} from cluster {cluster_id!r} reached cluster {ours!r}; check "
                "controller.quorum.voters on the sender",
            )
        if voter_id >= 0 and voter_id != self.listener.node_id:
            raise RaftWireRefusal(
                INVALID_VOTER_KEY,
                f"{name} for voter {voter_id} reached node {self.listener.node_id}; check "
                "controller.quorum.voters on the sender",
            )
