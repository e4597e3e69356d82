"""Quorum requests on Kafka's wire: a message to a request frame and a frame back (sans-IO).

`encode_request` writes one; `inbound_request` maps a request `codec` decoded onto the core's
message and checks every number at the door (`request_out_of_range`, after `bounds.py`).
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable, Mapping
from typing import Any

from api.protocol import codec
from api.protocol.codec import KafkaRequest, request_class
from api.protocol.generated_writer import dict_writer_for
from api.protocol.native_writer import native_writer
from api.protocol.quorum.apis import (
    ADD_RAFT_VOTER_KEY,
    BEGIN_QUORUM_EPOCH_KEY,
    DESCRIBE_QUORUM_KEY,
    END_QUORUM_EPOCH_KEY,
    FETCH_KEY,
    FETCH_MAX_BYTES,
    FETCH_SNAPSHOT_KEY,
    METADATA_PARTITION,
    METADATA_TOPIC_ID,
    NO_DESCRIBE_SENDER,
    QUORUM_API_NAMES,
    QUORUM_VERSIONS,
    REMOVE_RAFT_VOTER_KEY,
    REQUEST_KEYS,
    UPDATE_RAFT_VOTER_KEY,
    VOTE_KEY,
    VOTER_CHANGE_KEYS,
    AddRaftVoterRequest,
    DescribeQuorumRequest,
    InboundRequest,
    QuorumRequest,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
    VoterChangeRequest,
    directory_text,
    directory_uuid,
    endpoint_values,
    message_name,
    one_partition,
    partition_values,
    send_version,
    topic_values,
    voter_endpoints,
)
from api.protocol.quorum.bounds import epoch_problem, id_problem, out_of_range
from api.protocol.quorum.errors import (
    INVALID_REQUEST,
    RaftWireError,
    RaftWireRefusal,
)
from api.protocol.quorum.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    SnapshotId,
    VoteRequest,
)

_REQUEST_PREFIX = struct.Struct(">hhih")  # API key, version, correlation id, client id size
_MILLISECOND = datetime.timedelta(milliseconds=1)


def _one_partition_body(top: dict[str, Any], **partition: Any) -> dict[str, Any]:
    """A body naming the metadata partition once: `top`'s fields, then the topic holding it."""
    return {**top, "topics": [topic_values(partition_values(**partition))]}


def _voter_values(message: VoterChangeRequest, cluster_id: str | None) -> dict[str, Any]:
    """The fields every KIP-853 request has: the cluster and the voter it changes."""
    return {
        "cluster_id": cluster_id,
        "voter_id": message.voter_id,
        "voter_directory_id": directory_uuid(message.voter_directory_id),
    }


def _request_values(
    message: QuorumRequest, destination: int, cluster_id: str | None
) -> dict[str, Any]:
    """The values `codec.build` takes for a request message's newest version."""
    if isinstance(message, VoteRequest):
        return _one_partition_body(
            {"cluster_id": cluster_id, "voter_id": destination},
            replica_epoch=message.replica_epoch,
            replica_id=message.replica_id,
            replica_directory_id=None,
            voter_directory_id=None,
            last_offset_epoch=message.last_offset_epoch,
            last_offset=message.last_offset,
            pre_vote=message.pre_vote,
        )
    if isinstance(message, BeginQuorumEpochRequest):
        return _one_partition_body(
            {"cluster_id": cluster_id, "voter_id": destination, "leader_endpoints": []},
            voter_directory_id=None,
            leader_id=message.leader_id,
            leader_epoch=message.leader_epoch,
        )
    if isinstance(message, EndQuorumEpochRequest):
        successors = message.preferred_successors
        return _one_partition_body(
            {"cluster_id": cluster_id, "leader_endpoints": []},
            leader_id=message.leader_id,
            leader_epoch=message.leader_epoch,
            preferred_candidates=[
                {"candidate_id": c, "candidate_directory_id": None} for c in successors
            ],
        )
    if isinstance(message, FetchRequest):
        partition: dict[str, Any] = {
            "partition": METADATA_PARTITION,
            "current_leader_epoch": message.current_leader_epoch,
            "fetch_offset": message.fetch_offset,
            "last_fetched_epoch": message.last_fetched_epoch,
            "log_start_offset": -1,
            "partition_max_bytes": FETCH_MAX_BYTES,
            "replica_directory_id": directory_uuid(message.replica_directory_id),
        }
        return {
            "cluster_id": cluster_id,
            "replica_state": {"replica_id": message.replica_id, "replica_epoch": -1},
            "max_wait": message.max_wait_ms,
            "min_bytes": 0,
            "max_bytes": FETCH_MAX_BYTES,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic_id": METADATA_TOPIC_ID, "partitions": [partition]}],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
    if isinstance(message, FetchSnapshotRequest):
        partition = {
            "partition": METADATA_PARTITION,
            "current_leader_epoch": message.current_leader_epoch,
            "snapshot_id": {
                "end_offset": message.snapshot_id.end_offset,
                "epoch": message.snapshot_id.epoch,
            },
            "position": message.position,
            "replica_directory_id": None,
        }
        return {
            "cluster_id": cluster_id,
            "replica_id": message.replica_id,
            "max_bytes": message.max_bytes,
            "topics": [topic_values(partition, key="name")],
        }
    if isinstance(message, AddRaftVoterRequest):
        return {
            **_voter_values(message, cluster_id),
            "timeout": message.timeout_ms,
            "listeners": [endpoint_values(e) for e in message.endpoints],
            "ack_when_committed": message.ack_when_committed,
        }
    if isinstance(message, RemoveRaftVoterRequest):
        return _voter_values(message, cluster_id)
    if isinstance(message, UpdateRaftVoterRequest):
        return {
            **_voter_values(message, cluster_id),
            "current_leader_epoch": message.current_leader_epoch,
            "listeners": [endpoint_values(e) for e in message.endpoints],
            "k_raft_version_feature": {
                "min_supported_version": message.min_kraft_version,
                "max_supported_version": message.max_kraft_version,
            },
        }
    return _one_partition_body({})  # DescribeQuorum: the partition alone


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
    key = REQUEST_KEYS[type(message)]
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
        raise RaftWireError(f"cannot send {message_name(message)}: {exc}") from None
    struct.pack_into(">i", buffer, 0, len(buffer) - 4)
    return bytes(buffer)


def _vote(body: Any, p: Any, correlation_id: int) -> QuorumRequest:
    return VoteRequest(
        correlation_id=correlation_id,
        replica_epoch=int(p.replica_epoch),
        replica_id=int(p.replica_id),
        last_offset_epoch=int(p.last_offset_epoch),
        last_offset=int(p.last_offset),
        pre_vote=bool(getattr(p, "pre_vote", False)),
    )


def _begin(body: Any, p: Any, correlation_id: int) -> QuorumRequest:
    return BeginQuorumEpochRequest(
        correlation_id=correlation_id, leader_id=int(p.leader_id), leader_epoch=int(p.leader_epoch)
    )


def _end(body: Any, p: Any, correlation_id: int) -> QuorumRequest:
    return EndQuorumEpochRequest(
        correlation_id=correlation_id,
        leader_id=int(p.leader_id),
        leader_epoch=int(p.leader_epoch),
        preferred_successors=tuple(int(c.candidate_id) for c in p.preferred_candidates),
    )


def _describe(body: Any, p: Any, correlation_id: int) -> QuorumRequest:
    return DescribeQuorumRequest(correlation_id=correlation_id)


def _fetch(body: Any, p: Any, correlation_id: int) -> QuorumRequest:
    return FetchRequest(
        correlation_id=correlation_id,
        replica_id=int(body.replica_state.replica_id),
        current_leader_epoch=int(p.current_leader_epoch),
        fetch_offset=int(p.fetch_offset),
        last_fetched_epoch=int(p.last_fetched_epoch),
        max_wait_ms=body.max_wait // _MILLISECOND,  # exact (floats lose a ms)
        replica_directory_id=directory_text(getattr(p, "replica_directory_id", None)),
    )


def _fetch_snapshot(body: Any, p: Any, correlation_id: int) -> QuorumRequest:
    return FetchSnapshotRequest(
        correlation_id=correlation_id,
        replica_id=int(body.replica_id),
        current_leader_epoch=int(p.current_leader_epoch),
        snapshot_id=SnapshotId(
            end_offset=int(p.snapshot_id.end_offset), epoch=int(p.snapshot_id.epoch)
        ),
        position=int(p.position),
        max_bytes=int(body.max_bytes),
    )


def _add_voter(body: Any, p: Any, correlation_id: int) -> QuorumRequest:
    return AddRaftVoterRequest(
        correlation_id=correlation_id,
        voter_id=int(body.voter_id),
        voter_directory_id=directory_text(body.voter_directory_id),
        endpoints=voter_endpoints(body.listeners),
        timeout_ms=body.timeout // _MILLISECOND,
        ack_when_committed=bool(getattr(body, "ack_when_committed", True)),
    )


def _remove_voter(body: Any, p: Any, correlation_id: int) -> QuorumRequest:
    return RemoveRaftVoterRequest(
        correlation_id=correlation_id,
        voter_id=int(body.voter_id),
        voter_directory_id=directory_text(body.voter_directory_id),
    )


def _update_voter(body: Any, p: Any, correlation_id: int) -> QuorumRequest:
    feature = body.k_raft_version_feature
    return UpdateRaftVoterRequest(
        correlation_id=correlation_id,
        current_leader_epoch=int(body.current_leader_epoch),
        voter_id=int(body.voter_id),
        voter_directory_id=directory_text(body.voter_directory_id),
        endpoints=voter_endpoints(body.listeners),
        min_kraft_version=int(feature.min_supported_version),
        max_kraft_version=int(feature.max_supported_version),
    )


_READERS: Mapping[int, tuple[str | None, Callable[[Any, Any, int], QuorumRequest]]] = {
    VOTE_KEY: ("partition_index", _vote),
    BEGIN_QUORUM_EPOCH_KEY: ("partition_index", _begin),
    END_QUORUM_EPOCH_KEY: ("partition_index", _end),
    DESCRIBE_QUORUM_KEY: ("partition_index", _describe),
    FETCH_KEY: ("partition", _fetch),
    FETCH_SNAPSHOT_KEY: ("partition", _fetch_snapshot),
    ADD_RAFT_VOTER_KEY: (None, _add_voter),
    REMOVE_RAFT_VOTER_KEY: (None, _remove_voter),
    UPDATE_RAFT_VOTER_KEY: (None, _update_voter),
}
"""Each request's reader by API key, after the field naming its metadata partition (None: the
request names none): (body, that partition, correlation id) -> the core's message."""


def _sender(message: QuorumRequest) -> int:
    """Who sent a request, as it says (`NO_DESCRIBE_SENDER`: a tool's or an admin's)."""
    if isinstance(message, VoteRequest | FetchRequest | FetchSnapshotRequest):
        return message.replica_id
    if isinstance(message, BeginQuorumEpochRequest | EndQuorumEpochRequest):
        return message.leader_id
    if isinstance(message, UpdateRaftVoterRequest):
        return message.voter_id
    # DescribeQuorum comes from a tool; Add- and RemoveRaftVoter name the voter to change.
    return NO_DESCRIBE_SENDER


def inbound_request(request: KafkaRequest) -> InboundRequest:
    """The core message (and addressing) of a decoded quorum request.

    `RaftWireRefusal(INVALID_REQUEST)` if it does not name exactly the metadata partition.
    """
    key = request.header.api_key
    body = request.body
    name = QUORUM_API_NAMES.get(key, f"API {key}") + "Request"
    reader = _READERS.get(key)
    if reader is None:
        raise RaftWireError(f"API key {key} is not a quorum API")
    partition_field, read = reader
    partition = (
        None
        if partition_field is None
        else one_partition(body.topics, name=name, partition_field=partition_field)
    )
    message = read(body, partition, request.header.correlation_id)
    problem = request_out_of_range(message)
    if problem is not None:
        raise RaftWireRefusal(INVALID_REQUEST, f"{name} refused: {problem}")
    # A voter change's VoterId names the voter to change, not this node: no addressing check.
    voter_id = -1 if key in VOTER_CHANGE_KEYS else int(getattr(body, "voter_id", -1))
    return InboundRequest(
        message=message,
        sender_id=_sender(message),
        cluster_id=getattr(body, "cluster_id", None),
        voter_id=voter_id,
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
