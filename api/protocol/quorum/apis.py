"""The controller quorum's KRaft APIs: their keys, versions and the wire-only messages (sans-IO).

The quorum's own messages (`messages.py`) are the core's; this module adds what only the wire
and the server's endpoint carry (DescribeQuorum's request and its listeners, KIP-853's voter
changes), the API keys and versions served (`QUORUM_VERSIONS`, those of Kafka 4.0's KRaft),
and the helpers `requests.py` and `responses.py` share. See the package for the mapping.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.protocol import codec
from api.protocol.quorum.errors import (
    INVALID_REQUEST,
    RaftWireError,
    RaftWireRefusal,
)
from api.protocol.quorum.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteRequest,
    VoteResponse,
)
from records.uuids import Uuid

METADATA_TOPIC = "__cluster_metadata"
"""The metadata log's topic name in KRaft."""
METADATA_PARTITION = 0
"""The metadata log's partition."""
METADATA_TOPIC_ID = uuid.UUID(bytes=Uuid.METADATA_TOPIC_ID.bytes)
"""KRaft's fixed topic id of `__cluster_metadata` (Kafka's `Uuid.METADATA_TOPIC_ID`)."""

FETCH_KEY = 1
VOTE_KEY = 52
BEGIN_QUORUM_EPOCH_KEY = 53
END_QUORUM_EPOCH_KEY = 54
DESCRIBE_QUORUM_KEY = 55
FETCH_SNAPSHOT_KEY = 59
ADD_RAFT_VOTER_KEY = 80
REMOVE_RAFT_VOTER_KEY = 81
UPDATE_RAFT_VOTER_KEY = 82

QUORUM_VERSIONS: Mapping[int, tuple[int, int]] = {
    VOTE_KEY: (2, 2),
    BEGIN_QUORUM_EPOCH_KEY: (1, 1),
    END_QUORUM_EPOCH_KEY: (1, 1),
    DESCRIBE_QUORUM_KEY: (0, 2),
    FETCH_KEY: (17, 17),
    FETCH_SNAPSHOT_KEY: (1, 1),
    ADD_RAFT_VOTER_KEY: (0, 1),
    REMOVE_RAFT_VOTER_KEY: (0, 0),
    UPDATE_RAFT_VOTER_KEY: (0, 0),
}
"""The quorum APIs a controller serves, with their versions (ApiVersions advertises them only
on a server that has a quorum endpoint). Requests are sent in the newest version."""

VOTER_CHANGE_KEYS = frozenset({ADD_RAFT_VOTER_KEY, REMOVE_RAFT_VOTER_KEY, UPDATE_RAFT_VOTER_KEY})
"""KIP-853's APIs: an admin's or a voter's requests, whose answers carry their outcome at the
top level (a code there is the answer, not a refusal of the request)."""

QUORUM_API_NAMES: Mapping[int, str] = {key: codec.API_NAMES[key] for key in QUORUM_VERSIONS}
"""The quorum APIs' names (`codec.API_NAMES` has them, for the server's log lines)."""

FETCH_MAX_BYTES = 8 * 1024 * 1024
"""`MaxBytes` of a quorum Fetch (Kafka's `KafkaRaftClient.MAX_FETCH_SIZE_BYTES`)."""

NO_DESCRIBE_SENDER = -1
"""The sender of a DescribeQuorum: no replica (it comes from a tool)."""

_INT32_MAX = 2**31 - 1


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeQuorumRequest:
    """DescribeQuorumRequest (55): what the quorum looks like (answered by the leader)."""

    correlation_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumListener:
    """A voter's listener, as DescribeQuorum v2's `nodes` names it (Kafka's `Listener`)."""

    node_id: int
    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VoterEndpoint:
    """Where a voter listens (KIP-853's `Listeners`: one endpoint, the controller listener)."""

    name: str
    host: str
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedQuorum(DescribeQuorumResponse):
    """A DescribeQuorum answer with the voters' listeners (v2's `nodes`; older versions drop it).

    The shell knows the addresses (`controller.quorum.voters`), the core only ids: the server's
    endpoint adds them to the core's answer, and a tool reaches every node through them.
    """

    nodes: tuple[QuorumListener, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AddRaftVoterRequest:
    """AddRaftVoterRequest (80): add a caught-up observer to the voters (an admin's request)."""

    correlation_id: int
    voter_id: int
    voter_directory_id: str
    """The voter's directory id as Kafka prints a Uuid ("" for none)."""
    endpoints: tuple[VoterEndpoint, ...]
    timeout_ms: int = 30_000
    ack_when_committed: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveRaftVoterRequest:
    """RemoveRaftVoterRequest (81): remove a voter (an admin's request)."""

    correlation_id: int
    voter_id: int
    voter_directory_id: str
    """"" matches the voter whatever its directory id."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateRaftVoterRequest:
    """UpdateRaftVoterRequest (82): a voter tells the leader its endpoints and kraft.versions."""

    correlation_id: int
    current_leader_epoch: int
    voter_id: int
    voter_directory_id: str
    endpoints: tuple[VoterEndpoint, ...]
    min_kraft_version: int = 0
    max_kraft_version: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class AddRaftVoterResponse:
    """AddRaftVoterResponse (80)."""

    correlation_id: int
    error_code: int
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveRaftVoterResponse:
    """RemoveRaftVoterResponse (81)."""

    correlation_id: int
    error_code: int
    error_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateRaftVoterResponse:
    """UpdateRaftVoterResponse (82): the code and the leader this node knows."""

    correlation_id: int
    error_code: int
    leader_id: int
    leader_epoch: int
    leader_host: str = ""
    leader_port: int = 0


VoterChangeRequest = AddRaftVoterRequest | RemoveRaftVoterRequest | UpdateRaftVoterRequest
"""The KIP-853 requests: answered by the server's endpoint, not by the core."""

VoterChangeResponse = AddRaftVoterResponse | RemoveRaftVoterResponse | UpdateRaftVoterResponse
"""The answer to a `VoterChangeRequest`."""

QuorumRequest = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
    | DescribeQuorumRequest
    | VoterChangeRequest
)
"""A request a controller receives on the quorum APIs."""

QuorumResponse = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
    | DescribeQuorumResponse
    | VoterChangeResponse
)
"""The answer to a `QuorumRequest`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InboundRequest:
    """A quorum request as a server received it: the core's message and its addressing."""

    message: QuorumRequest
    sender_id: int
    """Who sent it, as the request says (`NO_DESCRIBE_SENDER` for DescribeQuorum)."""
    cluster_id: str | None
    """The sender's cluster id (None: it did not say)."""
    voter_id: int
    """The receiver the sender meant (Vote and BeginQuorumEpoch; -1: not said)."""


REQUEST_KEYS: Mapping[type[Any], int] = {
    VoteRequest: VOTE_KEY,
    BeginQuorumEpochRequest: BEGIN_QUORUM_EPOCH_KEY,
    EndQuorumEpochRequest: END_QUORUM_EPOCH_KEY,
    FetchRequest: FETCH_KEY,
    FetchSnapshotRequest: FETCH_SNAPSHOT_KEY,
    DescribeQuorumRequest: DESCRIBE_QUORUM_KEY,
    AddRaftVoterRequest: ADD_RAFT_VOTER_KEY,
    RemoveRaftVoterRequest: REMOVE_RAFT_VOTER_KEY,
    UpdateRaftVoterRequest: UPDATE_RAFT_VOTER_KEY,
}
RESPONSE_KEYS: Mapping[type[Any], int] = {
    VoteResponse: VOTE_KEY,
    BeginQuorumEpochResponse: BEGIN_QUORUM_EPOCH_KEY,
    EndQuorumEpochResponse: END_QUORUM_EPOCH_KEY,
    FetchResponse: FETCH_KEY,
    FetchSnapshotResponse: FETCH_SNAPSHOT_KEY,
    DescribeQuorumResponse: DESCRIBE_QUORUM_KEY,
    DescribedQuorum: DESCRIBE_QUORUM_KEY,
    AddRaftVoterResponse: ADD_RAFT_VOTER_KEY,
    RemoveRaftVoterResponse: REMOVE_RAFT_VOTER_KEY,
    UpdateRaftVoterResponse: UPDATE_RAFT_VOTER_KEY,
}


def api_key_of(message: QuorumRequest | QuorumResponse) -> int:
    """The Kafka API key of a quorum request or response message."""
    key = REQUEST_KEYS.get(type(message))
    if key is None:
        key = RESPONSE_KEYS[type(message)]
    return key


def send_version(api_key: int) -> int:
    """The version a quorum request of `api_key` is sent in (the newest served)."""
    return QUORUM_VERSIONS[api_key][1]


def partition_values(index: int = METADATA_PARTITION, **values: Any) -> dict[str, Any]:
    """The values of the metadata partition entry of a body."""
    return {"partition_index": index, **values}


def topic_values(partition: dict[str, Any], key: str = "topic_name") -> dict[str, Any]:
    """The values of the metadata topic entry holding `partition`."""
    return {key: METADATA_TOPIC, "partitions": [partition]}


def endpoint_values(endpoint: VoterEndpoint) -> dict[str, Any]:
    """The values of a voter endpoint entry of a body."""
    return {"name": endpoint.name, "host": endpoint.host, "port": endpoint.port}


def directory_uuid(text: str) -> uuid.UUID | None:
    """A directory id as the wire carries it: Kafka's Uuid text to a UUID ("" is null)."""
    if not text:
        return None
    try:
        return uuid.UUID(bytes=Uuid.parse(text).bytes)
    except ValueError:
        raise RaftWireError(f"{text[:40]!r} is not a directory id (a Kafka Uuid)") from None


def directory_text(value: uuid.UUID | None) -> str:
    """A directory id off the wire as Kafka prints it (null and the zero Uuid are "")."""
    if value is None or value.int == 0:
        return ""
    return str(Uuid(value.bytes))


def voter_endpoints(listeners: Sequence[Any]) -> tuple[VoterEndpoint, ...]:
    """The endpoints of a decoded request's or answer's listener entries."""
    return tuple(
        VoterEndpoint(name=str(e.name), host=str(e.host), port=int(e.port)) for e in listeners
    )


def message_name(message: Any) -> str:
    """A message's API name as an error line shows it (`VoteRequest`, `FetchResponse`)."""
    return QUORUM_API_NAMES[api_key_of(message)] + (
        "Request" if type(message) in REQUEST_KEYS else "Response"
    )


def one_partition(topics: Sequence[Any], *, name: str, partition_field: str) -> Any:
    """The metadata partition of a request's topics; `RaftWireRefusal` (INVALID_REQUEST) else."""
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        raise RaftWireRefusal(
            INVALID_REQUEST,
            f"{name} must name exactly one partition, {METADATA_TOPIC}-{METADATA_PARTITION}",
        )
    topic = topics[0]
    partition = topic.partitions[0]
    topic_name = getattr(topic, "topic_name", None) or getattr(topic, "name", None)
    topic_id = getattr(topic, "topic_id", None)
    right_topic = (
        topic_id == METADATA_TOPIC_ID if topic_id is not None else topic_name == METADATA_TOPIC
    )
    if not right_topic or int(getattr(partition, partition_field)) != METADATA_PARTITION:
        shown = (
            topic_name
            if topic_name is not None
            else Uuid(bytes=topic_id.bytes)
            if topic_id
            else None
        )
        raise RaftWireRefusal(
            INVALID_REQUEST,
            f"{name} names {shown}-{int(getattr(partition, partition_field))}; the only "
            f"partition is {METADATA_TOPIC}-{METADATA_PARTITION}",
        )
    return partition
