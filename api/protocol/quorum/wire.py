"""The controller quorum's messages on Kafka's wire: core dataclasses <-> KRaft frames (sans-IO).

The consensus core (`api.raft.core`) speaks in the dataclasses of `messages.py`; controllers speak
Kafka's KRaft APIs to each other, through kio's schemas and `codec`'s framing and header. This
module maps one onto the other, both ways, for the one partition there is: Kafka's
`__cluster_metadata` partition 0 (topic id `AAAAAAAAAAAAAAAAAAAAAQ`, Kafka's
`Uuid.METADATA_TOPIC_ID`).

Versions (`QUORUM_VERSIONS`), those of Kafka 4.0's KRaft (KIP-853 and KIP-996), all flexible:
Vote v2 (its `PreVote` field carries the core's `pre_vote`), BeginQuorumEpoch v1,
EndQuorumEpoch v1, Fetch v17 (the replica in `ReplicaState`, the topic by id),
FetchSnapshot v1 and DescribeQuorum v0-v2 (v2 sent; older ones served to older tools, v2 with
each voter's directory id). The other KIP-853 directory ids and endpoints (Vote,
BeginQuorumEpoch, Fetch) are sent empty.

`FetchResponse.records` holds the core's entries in our own framing (`entries.py`), not
Kafka record batches: the payloads are opaque to this layer, and a frame that is truncated,
damaged or claims more than it holds is refused with one line (`RaftWireError`).

Error codes are mapped both ways (`errors.py`: `wire_error_code`, `core_error_code`): Kafka's,
except the core's INCONSISTENT_VOTER_SET, which is 94 on the wire. An answer with a code the
core does not know (say, CLUSTER_AUTHORIZATION_FAILED at the top level) is a `RaftWireRefusal`
carrying it: the caller logs it and drops the answer, as Raft drops a lost message.

Requests carry the core's `correlation_id` in their header, and answers echo it there.

Every number of a request is checked at this door (`request_out_of_range`, after
`api.protocol.quorum.bounds`): an epoch past the last one an election can reach (2^31 - 2), a
negative offset, id, position or count is refused with INVALID_REQUEST before the core or
the endpoint sees it; an answer with one is dropped as a lost one.

KIP-853's AddRaftVoter (80, v0-1), RemoveRaftVoter (81) and UpdateRaftVoter (82) are an
operator's and a voter's requests, answered by the server's endpoint rather than the core:
their answers carry the outcome at the top level (`VOTER_CHANGE_KEYS`), and directory ids are
Kafka's Uuid text (`directory_uuid`, `directory_text`).

One concern over ~1000 lines: the mapping of the nine quorum APIs, requests and answers, both
ways; the entries' framing (`entries.py`) and the error codes (`errors.py`) are apart.
"""

from __future__ import annotations

import datetime
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from api.protocol import codec
from api.protocol.codec import KafkaRequest, request_class, response_class
from api.protocol.fast_writer import dict_writer_for
from api.protocol.native_writer import native_writer
from api.protocol.quorum.bounds import epoch_problem, id_problem, out_of_range
from api.protocol.quorum.entries import decode_entries, encode_entries
from api.protocol.quorum.errors import (
    INVALID_REQUEST,
    RaftWireError,
    RaftWireRefusal,
    core_error_code,
    error_name,
    wire_error_code,
)
from api.protocol.quorum.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
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
from api.protocol.tagged import missing_required
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

_REQUEST_PREFIX = struct.Struct(">hhih")  # API key, version, correlation id, client id size
_MILLISECOND = datetime.timedelta(milliseconds=1)
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


_REQUEST_KEYS: Mapping[type[Any], int] = {
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
_RESPONSE_KEYS: Mapping[type[Any], int] = {
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
    key = _REQUEST_KEYS.get(type(message))
    if key is None:
        key = _RESPONSE_KEYS[type(message)]
    return key


def send_version(api_key: int) -> int:
    """The version a quorum request of `api_key` is sent in (the newest served)."""
    return QUORUM_VERSIONS[api_key][1]


def _partition(index: int = METADATA_PARTITION, **values: Any) -> dict[str, Any]:
    return {"partition_index": index, **values}


def _topic(partition: dict[str, Any], key: str = "topic_name") -> dict[str, Any]:
    return {key: METADATA_TOPIC, "partitions": [partition]}


def _request_values(
    message: QuorumRequest, destination: int, cluster_id: str | None
) -> dict[str, Any]:
    """The values `codec.build` takes for a request message's newest version."""
    if isinstance(message, VoteRequest):
        return {
            "cluster_id": cluster_id,
            "voter_id": destination,
            "topics": [
                _topic(
                    _partition(
                        replica_epoch=message.replica_epoch,
                        replica_id=message.replica_id,
                        replica_directory_id=None,
                        voter_directory_id=None,
                        last_offset_epoch=message.last_offset_epoch,
                        last_offset=message.last_offset,
                        pre_vote=message.pre_vote,
                    )
                )
            ],
        }
    if isinstance(message, BeginQuorumEpochRequest):
        return {
            "cluster_id": cluster_id,
            "voter_id": destination,
            "topics": [
                _topic(
                    _partition(
                        voter_directory_id=None,
                        leader_id=message.leader_id,
                        leader_epoch=message.leader_epoch,
                    )
                )
            ],
            "leader_endpoints": [],
        }
    if isinstance(message, EndQuorumEpochRequest):
        return {
            "cluster_id": cluster_id,
            "topics": [
                _topic(
                    _partition(
                        leader_id=message.leader_id,
                        leader_epoch=message.leader_epoch,
                        preferred_candidates=[
                            {"candidate_id": c, "candidate_directory_id": None}
                            for c in message.preferred_successors
                        ],
                    )
                )
            ],
            "leader_endpoints": [],
        }
    if isinstance(message, FetchRequest):
        return {
            "cluster_id": cluster_id,
            "replica_state": {"replica_id": message.replica_id, "replica_epoch": -1},
            "max_wait": message.max_wait_ms,
            "min_bytes": 0,
            "max_bytes": FETCH_MAX_BYTES,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {
                    "topic_id": METADATA_TOPIC_ID,
                    "partitions": [
                        {
                            "partition": METADATA_PARTITION,
                            "current_leader_epoch": message.current_leader_epoch,
                            "fetch_offset": message.fetch_offset,
                            "last_fetched_epoch": message.last_fetched_epoch,
                            "log_start_offset": -1,
                            "partition_max_bytes": FETCH_MAX_BYTES,
                            "replica_directory_id": directory_uuid(message.replica_directory_id),
                        }
                    ],
                }
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
    if isinstance(message, FetchSnapshotRequest):
        return {
            "cluster_id": cluster_id,
            "replica_id": message.replica_id,
            "max_bytes": message.max_bytes,
            "topics": [
                {
                    "name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "partition": METADATA_PARTITION,
                            "current_leader_epoch": message.current_leader_epoch,
                            "snapshot_id": {
                                "end_offset": message.snapshot_id.end_offset,
                                "epoch": message.snapshot_id.epoch,
                            },
                            "position": message.position,
                            "replica_directory_id": None,
                        }
                    ],
                }
            ],
        }
    if isinstance(message, AddRaftVoterRequest):
        return {
            "cluster_id": cluster_id,
            "timeout": message.timeout_ms,
            "voter_id": message.voter_id,
            "voter_directory_id": directory_uuid(message.voter_directory_id),
            "listeners": [_endpoint(e) for e in message.endpoints],
            "ack_when_committed": message.ack_when_committed,
        }
    if isinstance(message, RemoveRaftVoterRequest):
        return {
            "cluster_id": cluster_id,
            "voter_id": message.voter_id,
            "voter_directory_id": directory_uuid(message.voter_directory_id),
        }
    if isinstance(message, UpdateRaftVoterRequest):
        return {
            "cluster_id": cluster_id,
            "current_leader_epoch": message.current_leader_epoch,
            "voter_id": message.voter_id,
            "voter_directory_id": directory_uuid(message.voter_directory_id),
            "listeners": [_endpoint(e) for e in message.endpoints],
            "k_raft_version_feature": {
                "min_supported_version": message.min_kraft_version,
                "max_supported_version": message.max_kraft_version,
            },
        }
    return {"topics": [_topic({"partition_index": METADATA_PARTITION})]}


def _endpoint(endpoint: VoterEndpoint) -> dict[str, Any]:
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


def _endpoints(listeners: Sequence[Any]) -> tuple[VoterEndpoint, ...]:
    return tuple(
        VoterEndpoint(name=str(e.name), host=str(e.host), port=int(e.port)) for e in listeners
    )


def encode_request(
    message: QuorumRequest,
    *,
    destination: int,
    cluster_id: str | None,
    client_id: str = "metadata-log-quorum",
    version: int | None = None,
) -> bytes:
    """A request frame (int32 size first) of a core request message, to `destination`.

    The header's correlation id is the message's. `RaftWireError` if a value cannot be sent.
    """
    key = _REQUEST_KEYS[type(message)]
    version = send_version(key) if version is None else version
    entity_class = request_class(key, version)
    values = _request_values(message, destination, cluster_id)
    client = client_id.encode()
    buffer = bytearray(4)
    try:
        # Request header v2 (v1 for a version that is not flexible): key, version,
        # correlation id, client id as an int16-sized string, then (v2) no tagged fields.
        buffer += _REQUEST_PREFIX.pack(key, version, message.correlation_id, len(client))
        buffer += client
        if entity_class.__header_schema__.__flexible__:
            buffer.append(0)
        # The plain-value writer: the bytes of the built entity, without building it (the
        # compiled one where it writes them, `native_writer`; None where it gives up).
        native = native_writer(entity_class)  # type: ignore[arg-type]  # classes hash
        body = None if native is None else native.body(values)
        if body is None:
            dict_writer_for(entity_class)(buffer, values)  # type: ignore[arg-type]  # classes hash
        else:
            buffer += body
    except (struct.error, OverflowError, ValueError, TypeError) as exc:
        raise RaftWireError(f"cannot send {_describe(message)}: {exc}") from None
    struct.pack_into(">i", buffer, 0, len(buffer) - 4)
    return bytes(buffer)


def _describe(message: Any) -> str:
    return QUORUM_API_NAMES[api_key_of(message)] + (
        "Request" if type(message) in _REQUEST_KEYS else "Response"
    )


def _one_partition(topics: Sequence[Any], *, name: str, partition_field: str) -> Any:
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


def inbound_request(request: KafkaRequest) -> InboundRequest:
    """The core message (and addressing) of a decoded quorum request.

    `RaftWireRefusal(INVALID_REQUEST)` if it does not name exactly the metadata partition.
    """
    header = request.header
    key = header.api_key
    body = request.body
    correlation_id = header.correlation_id
    name = QUORUM_API_NAMES.get(key, f"API {key}") + "Request"
    cluster_id = getattr(body, "cluster_id", None)
    voter_id = int(getattr(body, "voter_id", -1))
    message: QuorumRequest
    if key == VOTE_KEY:
        p = _one_partition(body.topics, name=name, partition_field="partition_index")
        message = VoteRequest(
            correlation_id=correlation_id,
            replica_epoch=int(p.replica_epoch),
            replica_id=int(p.replica_id),
            last_offset_epoch=int(p.last_offset_epoch),
            last_offset=int(p.last_offset),
            pre_vote=bool(getattr(p, "pre_vote", False)),
        )
        sender = message.replica_id
    elif key == BEGIN_QUORUM_EPOCH_KEY:
        p = _one_partition(body.topics, name=name, partition_field="partition_index")
        message = BeginQuorumEpochRequest(
            correlation_id=correlation_id,
            leader_id=int(p.leader_id),
            leader_epoch=int(p.leader_epoch),
        )
        sender = message.leader_id
    elif key == END_QUORUM_EPOCH_KEY:
        p = _one_partition(body.topics, name=name, partition_field="partition_index")
        message = EndQuorumEpochRequest(
            correlation_id=correlation_id,
            leader_id=int(p.leader_id),
            leader_epoch=int(p.leader_epoch),
            preferred_successors=tuple(int(c.candidate_id) for c in p.preferred_candidates),
        )
        sender = message.leader_id
    elif key == FETCH_KEY:
        p = _one_partition(body.topics, name=name, partition_field="partition")
        message = FetchRequest(
            correlation_id=correlation_id,
            replica_id=int(body.replica_state.replica_id),
            current_leader_epoch=int(p.current_leader_epoch),
            fetch_offset=int(p.fetch_offset),
            last_fetched_epoch=int(p.last_fetched_epoch),
            max_wait_ms=body.max_wait // _MILLISECOND,  # exact (floats lose a ms)
            replica_directory_id=directory_text(getattr(p, "replica_directory_id", None)),
        )
        sender = message.replica_id
    elif key == FETCH_SNAPSHOT_KEY:
        p = _one_partition(body.topics, name=name, partition_field="partition")
        message = FetchSnapshotRequest(
            correlation_id=correlation_id,
            replica_id=int(body.replica_id),
            current_leader_epoch=int(p.current_leader_epoch),
            snapshot_id=SnapshotId(
                end_offset=int(p.snapshot_id.end_offset), epoch=int(p.snapshot_id.epoch)
            ),
            position=int(p.position),
            max_bytes=int(body.max_bytes),
        )
        sender = message.replica_id
    elif key == DESCRIBE_QUORUM_KEY:
        _one_partition(body.topics, name=name, partition_field="partition_index")
        message = DescribeQuorumRequest(correlation_id=correlation_id)
        sender = NO_DESCRIBE_SENDER
    elif key == ADD_RAFT_VOTER_KEY:
        message = AddRaftVoterRequest(
            correlation_id=correlation_id,
            voter_id=int(body.voter_id),
            voter_directory_id=directory_text(body.voter_directory_id),
            endpoints=_endpoints(body.listeners),
            timeout_ms=body.timeout // _MILLISECOND,
            ack_when_committed=bool(getattr(body, "ack_when_committed", True)),
        )
        # The voter named is the one to add, not this node: no addressing check.
        sender, voter_id = NO_DESCRIBE_SENDER, -1
    elif key == REMOVE_RAFT_VOTER_KEY:
        message = RemoveRaftVoterRequest(
            correlation_id=correlation_id,
            voter_id=int(body.voter_id),
            voter_directory_id=directory_text(body.voter_directory_id),
        )
        sender, voter_id = NO_DESCRIBE_SENDER, -1
    elif key == UPDATE_RAFT_VOTER_KEY:
        feature = body.k_raft_version_feature
        message = UpdateRaftVoterRequest(
            correlation_id=correlation_id,
            current_leader_epoch=int(body.current_leader_epoch),
            voter_id=int(body.voter_id),
            voter_directory_id=directory_text(body.voter_directory_id),
            endpoints=_endpoints(body.listeners),
            min_kraft_version=int(feature.min_supported_version),
            max_kraft_version=int(feature.max_supported_version),
        )
        sender, voter_id = message.voter_id, -1
    else:
        raise RaftWireError(f"API key {key} is not a quorum API")
    problem = request_out_of_range(message)
    if problem is not None:
        raise RaftWireRefusal(INVALID_REQUEST, f"{name} refused: {problem}")
    return InboundRequest(
        message=message, sender_id=sender, cluster_id=cluster_id, voter_id=voter_id
    )


def request_out_of_range(message: QuorumRequest) -> str | None:
    """The first number of a quorum request out of its range, as one line (None: all fine).

    The door every request passes before it reaches the core or the endpoint: an epoch past
    `LAST_EPOCH`, a negative offset or id, a count no log could hold is refused here, before
    it can change anything (`inbound_request` answers INVALID_REQUEST with it).
    """
    if isinstance(message, DescribeQuorumRequest):
        return None
    if isinstance(message, AddRaftVoterRequest | RemoveRaftVoterRequest | UpdateRaftVoterRequest):
        return _voter_change_out_of_range(message)
    return out_of_range(message)


def _voter_change_out_of_range(message: VoterChangeRequest) -> str | None:
    problems: list[str | None] = [id_problem(message.voter_id, "VoterId")]
    if isinstance(message, AddRaftVoterRequest) and message.timeout_ms < 0:
        problems.append(f"TimeoutMs {message.timeout_ms} is negative")
    if isinstance(message, UpdateRaftVoterRequest):
        problems.append(epoch_problem(message.current_leader_epoch, "CurrentLeaderEpoch"))
        if not 0 <= message.min_kraft_version <= message.max_kraft_version:
            problems.append(
                f"KRaftVersionFeature {message.min_kraft_version}..{message.max_kraft_version} "
                "is not a range of versions"
            )
    return next((p for p in problems if p is not None), None)


def decode_request(frame: bytes | memoryview) -> InboundRequest:
    """The inbound request of a request frame (without its size): tests and tools.

    `RaftWireError` if it is not a quorum request of a served version, or is malformed.
    """
    key, version, _ = codec.peek_header(frame)
    served = QUORUM_VERSIONS.get(key)
    if served is None or not served[0] <= version <= served[1]:
        raise RaftWireError(f"API key {key} v{version} is not a quorum API version served here")
    return inbound_request(codec.decode_request(frame))


# --------------------------------------------------------------------------- answers


def _leader(value: LeaderIdAndEpoch) -> dict[str, int]:
    return {"leader_id": value.leader_id, "leader_epoch": value.leader_epoch}


def _replica(state: ReplicaState) -> dict[str, Any]:
    return {
        "replica_id": state.replica_id,
        "replica_directory_id": directory_uuid(state.directory_id),
        "log_end_offset": state.log_end_offset,
        "last_fetch_timestamp": state.last_fetch_timestamp,
        "last_caught_up_timestamp": state.last_caught_up_timestamp,
    }


def _response_values(message: QuorumResponse) -> dict[str, Any]:
    """The values `codec.build` takes for a response message (any served version)."""
    if isinstance(message, AddRaftVoterResponse | RemoveRaftVoterResponse):
        return {
            "throttle_time": 0,
            "error_code": message.error_code,
            "error_message": message.error_message,
        }
    if isinstance(message, UpdateRaftVoterResponse):
        return {
            "throttle_time": 0,
            "error_code": message.error_code,
            "current_leader": {
                "leader_id": message.leader_id,
                "leader_epoch": message.leader_epoch,
                "host": message.leader_host,
                "port": message.leader_port,
            },
        }
    if isinstance(message, VoteResponse):
        return {
            "error_code": 0,
            "topics": [
                _topic(
                    _partition(
                        error_code=wire_error_code(message.error_code),
                        leader_id=message.leader_id,
                        leader_epoch=message.leader_epoch,
                        vote_granted=message.vote_granted,
                    )
                )
            ],
        }
    if isinstance(message, BeginQuorumEpochResponse | EndQuorumEpochResponse):
        return {
            "error_code": 0,
            "topics": [
                _topic(
                    _partition(
                        error_code=wire_error_code(message.error_code),
                        leader_id=message.leader_id,
                        leader_epoch=message.leader_epoch,
                    )
                )
            ],
        }
    if isinstance(message, FetchResponse):
        partition: dict[str, Any] = {
            "partition_index": METADATA_PARTITION,
            "error_code": wire_error_code(message.error_code),
            "high_watermark": message.high_watermark,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "current_leader": _leader(message.current_leader),
            "aborted_transactions": None,
            "preferred_read_replica": -1,
            "records": encode_entries(message.records),
        }
        if message.diverging_epoch is not None:
            partition["diverging_epoch"] = {
                "epoch": message.diverging_epoch.epoch,
                "end_offset": message.diverging_epoch.end_offset,
            }
        if message.snapshot_id is not None:
            partition["snapshot_id"] = {
                "end_offset": message.snapshot_id.end_offset,
                "epoch": message.snapshot_id.epoch,
            }
        return {
            "throttle_time": 0,
            "error_code": 0,
            "session_id": 0,
            "responses": [{"topic_id": METADATA_TOPIC_ID, "partitions": [partition]}],
        }
    if isinstance(message, FetchSnapshotResponse):
        return {
            "throttle_time": 0,
            "error_code": 0,
            "topics": [
                {
                    "name": METADATA_TOPIC,
                    "partitions": [
                        {
                            "index": METADATA_PARTITION,
                            "error_code": wire_error_code(message.error_code),
                            "snapshot_id": {
                                "end_offset": message.snapshot_id.end_offset,
                                "epoch": message.snapshot_id.epoch,
                            },
                            "current_leader": _leader(message.current_leader),
                            "size": message.size,
                            "position": message.position,
                            "unaligned_records": message.unaligned_records,
                        }
                    ],
                }
            ],
        }
    return {
        "error_code": 0,
        "error_message": None,
        "topics": [
            _topic(
                _partition(
                    error_code=wire_error_code(message.error_code),
                    error_message=None,
                    leader_id=message.leader_id,
                    leader_epoch=message.leader_epoch,
                    high_watermark=message.high_watermark,
                    current_voters=[_replica(r) for r in message.current_voters],
                    observers=[_replica(r) for r in message.observers],
                )
            )
        ],
        "nodes": _nodes(message.nodes if isinstance(message, DescribedQuorum) else ()),
    }


def _nodes(listeners: Sequence[QuorumListener]) -> list[dict[str, Any]]:
    """DescribeQuorum v2's `nodes`: each node's listeners, nodes in id order."""
    by_node: dict[int, list[dict[str, Any]]] = {}
    for listener in listeners:
        by_node.setdefault(listener.node_id, []).append(
            {"name": listener.name, "host": listener.host, "port": listener.port}
        )
    return [{"node_id": node, "listeners": by_node[node]} for node in sorted(by_node)]


def response_answer(message: QuorumResponse, *, version: int | None = None) -> codec.Answer:
    """The `codec.Answer` of a core response message in `version` (default: the newest).

    `RaftWireError` if the entries of a FetchResponse cannot be framed.
    """
    key = _RESPONSE_KEYS[type(message)]
    version = send_version(key) if version is None else version
    return codec.Answer(response_class(key, version), _response_values(message))


def error_answer(
    api_key: int, version: int, error_code: int, message: str | None = None
) -> codec.Answer:
    """The answer refusing a quorum request as a whole: `error_code` at the top level.

    As Kafka's KRaft refuses a request (authorization, another cluster id, another partition):
    no topics, and the message where the version has a field for it.
    """
    values: dict[str, Any] = {"error_code": error_code, "topics": []}
    if api_key in (ADD_RAFT_VOTER_KEY, REMOVE_RAFT_VOTER_KEY):
        values = {"throttle_time": 0, "error_code": error_code, "error_message": message}
    elif api_key == UPDATE_RAFT_VOTER_KEY:
        values = {
            "throttle_time": 0,
            "error_code": error_code,
            "current_leader": {"leader_id": -1, "leader_epoch": -1, "host": "", "port": 0},
        }
    elif api_key == FETCH_KEY:
        values = {"throttle_time": 0, "error_code": error_code, "session_id": 0, "responses": []}
    elif api_key == FETCH_SNAPSHOT_KEY:
        values["throttle_time"] = 0
    elif api_key == DESCRIBE_QUORUM_KEY:
        values.update(error_message=message, nodes=[])
    return codec.Answer(response_class(api_key, version), values)


def encode_response(
    message: QuorumResponse, *, correlation_id: int | None = None, version: int | None = None
) -> bytes:
    """A response frame (int32 size first) of a core response message.

    The header's correlation id is `correlation_id`, else the message's (a
    DescribeQuorumResponse has none: give it). `RaftWireError` if a value cannot be sent.
    """
    if correlation_id is None:
        correlation_id = getattr(message, "correlation_id", None)
        if correlation_id is None:
            raise RaftWireError(f"{_describe(message)} needs the request's correlation id")
    try:
        return codec.encode_response(correlation_id, response_answer(message, version=version))
    except (struct.error, OverflowError, ValueError, TypeError) as exc:
        raise RaftWireError(f"cannot send {_describe(message)}: {exc}") from None


def decode_response(frame: bytes | memoryview, *, api_key: int, version: int) -> QuorumResponse:
    """The core message of a quorum response frame (without its size) of `api_key`/`version`.

    `RaftWireError` if malformed or not about the metadata partition; `RaftWireRefusal` if it
    holds an error code the core does not know (a top-level one, say).
    """
    name = QUORUM_API_NAMES.get(api_key, f"API {api_key}") + "Response"
    if QUORUM_VERSIONS.get(api_key) is None:
        raise RaftWireError(f"API key {api_key} is not a quorum API")
    try:
        correlation_id, body = codec.decode_response(api_key, version, frame)
    except RaftWireError:
        raise
    except Exception as exc:  # kio and the generated readers raise several types on bad bytes
        raise RaftWireError(f"malformed {name} v{version}: {exc}") from None
    missing = missing_required(body)
    if missing is not None:
        raise RaftWireError(f"malformed {name} v{version}: {missing} is null")
    if api_key in VOTER_CHANGE_KEYS:
        # These answers carry their outcome at the top level: it is the answer, not a refusal.
        return _VOTER_CHANGE_DECODERS[api_key](body, correlation_id)
    top = int(body.error_code)
    if top != 0:
        detail = getattr(body, "error_message", None)
        raise RaftWireRefusal(
            top, f"{name} refused: {error_name(top)}" + (f": {detail}" if detail else "")
        )
    answer = _DECODERS[api_key](body, correlation_id, name)
    if isinstance(
        answer,
        VoteResponse
        | BeginQuorumEpochResponse
        | EndQuorumEpochResponse
        | FetchResponse
        | FetchSnapshotResponse,
    ):
        problem = out_of_range(answer)
        if problem is not None:
            # An answer no real node sends: dropped (the link logs it), as a lost one.
            raise RaftWireError(f"{name} dropped: {problem}")
    return answer


def _answer_partition(topics: Sequence[Any], name: str, partition_field: str) -> Any:
    try:
        return _one_partition(topics, name=name, partition_field=partition_field)
    except RaftWireRefusal as exc:
        raise RaftWireError(str(exc)) from None


def _vote(body: Any, correlation_id: int, name: str) -> QuorumResponse:
    p = _answer_partition(body.topics, name, "partition_index")
    return VoteResponse(
        correlation_id=correlation_id,
        error_code=core_error_code(int(p.error_code), what=name),
        leader_id=int(p.leader_id),
        leader_epoch=int(p.leader_epoch),
        vote_granted=bool(p.vote_granted),
    )


def _epoch_answer(
    kind: type[BeginQuorumEpochResponse] | type[EndQuorumEpochResponse],
) -> Callable[[Any, int, str], QuorumResponse]:
    """The reader of a Begin- or EndQuorumEpoch answer: the same fields, another class."""

    def read(body: Any, correlation_id: int, name: str) -> QuorumResponse:
        p = _answer_partition(body.topics, name, "partition_index")
        return kind(
            correlation_id=correlation_id,
            error_code=core_error_code(int(p.error_code), what=name),
            leader_id=int(p.leader_id),
            leader_epoch=int(p.leader_epoch),
        )

    return read


def _optional_pair(first: int, second: int, what: str) -> tuple[int, int] | None:
    """A tagged (epoch, offset) pair: None when absent (both -1), else both must be >= 0."""
    if first == -1 and second == -1:
        return None
    if first < 0 or second < 0:
        raise RaftWireError(f"{what} ({first}, {second}) is out of range")
    return first, second


def _fetch(body: Any, correlation_id: int, name: str) -> QuorumResponse:
    p = _answer_partition(body.responses, name, "partition_index")
    diverging = _optional_pair(
        int(p.diverging_epoch.epoch), int(p.diverging_epoch.end_offset), f"{name} DivergingEpoch"
    )
    snapshot = _optional_pair(
        int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch), f"{name} SnapshotId"
    )
    return FetchResponse(
        correlation_id=correlation_id,
        error_code=core_error_code(int(p.error_code), what=name),
        high_watermark=int(p.high_watermark),
        current_leader=LeaderIdAndEpoch(
            leader_id=int(p.current_leader.leader_id),
            leader_epoch=int(p.current_leader.leader_epoch),
        ),
        diverging_epoch=None
        if diverging is None
        else EpochEndOffset(epoch=diverging[0], end_offset=diverging[1]),
        snapshot_id=None
        if snapshot is None
        else SnapshotId(end_offset=snapshot[0], epoch=snapshot[1]),
        records=decode_entries(p.records),
    )


def _fetch_snapshot(body: Any, correlation_id: int, name: str) -> QuorumResponse:
    p = _answer_partition(body.topics, name, "index")
    return FetchSnapshotResponse(
        correlation_id=correlation_id,
        error_code=core_error_code(int(p.error_code), what=name),
        snapshot_id=SnapshotId(
            end_offset=int(p.snapshot_id.end_offset), epoch=int(p.snapshot_id.epoch)
        ),
        current_leader=LeaderIdAndEpoch(
            leader_id=int(p.current_leader.leader_id),
            leader_epoch=int(p.current_leader.leader_epoch),
        ),
        size=int(p.size),
        position=int(p.position),
        unaligned_records=bytes(p.unaligned_records or b""),
    )


def _replica_state(value: Any) -> ReplicaState:
    return ReplicaState(
        replica_id=int(value.replica_id),
        log_end_offset=int(value.log_end_offset),
        last_fetch_timestamp=int(getattr(value, "last_fetch_timestamp", -1)),
        last_caught_up_timestamp=int(getattr(value, "last_caught_up_timestamp", -1)),
        directory_id=directory_text(getattr(value, "replica_directory_id", None)),
    )


def _describe_quorum(body: Any, correlation_id: int, name: str) -> QuorumResponse:
    p = _answer_partition(body.topics, name, "partition_index")
    nodes = tuple(
        QuorumListener(
            node_id=int(node.node_id), name=str(item.name), host=str(item.host), port=int(item.port)
        )
        for node in getattr(body, "nodes", ()) or ()
        for item in node.listeners or ()
    )
    # Without listeners (v0, v1, or a node that names none) the core's message, as before.
    kind = partial(DescribedQuorum, nodes=nodes) if nodes else DescribeQuorumResponse
    return kind(
        error_code=core_error_code(int(p.error_code), what=name),
        leader_id=int(p.leader_id),
        leader_epoch=int(p.leader_epoch),
        high_watermark=int(p.high_watermark),
        current_voters=tuple(_replica_state(r) for r in p.current_voters),
        observers=tuple(_replica_state(r) for r in p.observers),
    )


_DECODERS: Mapping[int, Callable[[Any, int, str], QuorumResponse]] = {
    VOTE_KEY: _vote,
    BEGIN_QUORUM_EPOCH_KEY: _epoch_answer(BeginQuorumEpochResponse),
    END_QUORUM_EPOCH_KEY: _epoch_answer(EndQuorumEpochResponse),
    FETCH_KEY: _fetch,
    FETCH_SNAPSHOT_KEY: _fetch_snapshot,
    DESCRIBE_QUORUM_KEY: _describe_quorum,
}


def _add_voter_answer(body: Any, correlation_id: int) -> QuorumResponse:
    return AddRaftVoterResponse(
        correlation_id=correlation_id,
        error_code=int(body.error_code),
        error_message=body.error_message,
    )


def _remove_voter_answer(body: Any, correlation_id: int) -> QuorumResponse:
    return RemoveRaftVoterResponse(
        correlation_id=correlation_id,
        error_code=int(body.error_code),
        error_message=body.error_message,
    )


def _update_voter_answer(body: Any, correlation_id: int) -> QuorumResponse:
    leader = body.current_leader
    return UpdateRaftVoterResponse(
        correlation_id=correlation_id,
        error_code=int(body.error_code),
        leader_id=int(leader.leader_id),
        leader_epoch=int(leader.leader_epoch),
        leader_host=str(leader.host),
        leader_port=int(leader.port),
    )


_VOTER_CHANGE_DECODERS: Mapping[int, Callable[[Any, int], QuorumResponse]] = {
    ADD_RAFT_VOTER_KEY: _add_voter_answer,
    REMOVE_RAFT_VOTER_KEY: _remove_voter_answer,
    UPDATE_RAFT_VOTER_KEY: _update_voter_answer,
}
