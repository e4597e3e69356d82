"""Quorum answers on Kafka's wire: a message to an answer and a frame back (sans-IO).

`response_answer`/`encode_response` write one (`error_answer` the refusal of a request);
`decode_response` maps a frame onto the core's message, dropping one with a number out of range.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from api.protocol import codec
from api.protocol.codec import response_class
from api.protocol.quorum.apis import (
    ADD_RAFT_VOTER_KEY,
    BEGIN_QUORUM_EPOCH_KEY,
    DESCRIBE_QUORUM_KEY,
    END_QUORUM_EPOCH_KEY,
    FETCH_KEY,
    FETCH_SNAPSHOT_KEY,
    METADATA_PARTITION,
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    QUORUM_API_NAMES,
    QUORUM_VERSIONS,
    REMOVE_RAFT_VOTER_KEY,
    RESPONSE_KEYS,
    UPDATE_RAFT_VOTER_KEY,
    VOTE_KEY,
    VOTER_CHANGE_KEYS,
    AddRaftVoterResponse,
    DescribedQuorum,
    QuorumListener,
    QuorumResponse,
    RemoveRaftVoterResponse,
    UpdateRaftVoterResponse,
    directory_text,
    directory_uuid,
    message_name,
    one_partition,
    partition_values,
    send_version,
    topic_values,
)
from api.protocol.quorum.bounds import out_of_range
from api.protocol.quorum.entries import decode_entries, encode_entries
from api.protocol.quorum.errors import (
    RaftWireError,
    RaftWireRefusal,
    core_error_code,
    error_name,
    wire_error_code,
)
from api.protocol.quorum.messages import (
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochResponse,
    EpochEndOffset,
    FetchResponse,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    ReplicaState,
    SnapshotId,
    VoteResponse,
)
from api.protocol.tagged import missing_required


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
                topic_values(
                    partition_values(
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
                topic_values(
                    partition_values(
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
            topic_values(
                partition_values(
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
    key = RESPONSE_KEYS[type(message)]
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
            raise RaftWireError(f"{message_name(message)} needs the request's correlation id")
    try:
        return codec.encode_response(correlation_id, response_answer(message, version=version))
    except (struct.error, OverflowError, ValueError, TypeError) as exc:
        raise RaftWireError(f"cannot send {message_name(message)}: {exc}") from None


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
        return one_partition(topics, name=name, partition_field=partition_field)
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
