"""The quorum messages on Kafka's wire: round trips, refusals, and the bytes Kafka's schemas say."""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from api.protocol import codec
from api.protocol.codec import ProtocolError
from api.protocol.quorum.apis import (
    ADD_RAFT_VOTER_KEY,
    DESCRIBE_QUORUM_KEY,
    FETCH_KEY,
    FETCH_MAX_BYTES,
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    QUORUM_VERSIONS,
    VOTE_KEY,
    VOTER_CHANGE_KEYS,
    AddRaftVoterRequest,
    AddRaftVoterResponse,
    DescribedQuorum,
    DescribeQuorumRequest,
    QuorumListener,
    QuorumResponse,
    RemoveRaftVoterRequest,
    RemoveRaftVoterResponse,
    UpdateRaftVoterRequest,
    UpdateRaftVoterResponse,
    VoterEndpoint,
    api_key_of,
    send_version,
)
from api.protocol.quorum.entries import (
    ENTRIES_MAGIC,
    decode_entries,
    encode_entries,
)
from api.protocol.quorum.errors import (
    INVALID_REQUEST,
    RaftWireError,
    RaftWireRefusal,
    core_error_code,
    wire_error_code,
)
from api.protocol.quorum.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    EntryKind,
    EpochEndOffset,
    ErrorCode,
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
from api.protocol.quorum.requests import (
    _request_values,
    decode_request,
    encode_request,
)
from api.protocol.quorum.responses import (
    decode_response,
    encode_response,
    error_answer,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
IDS = st.integers(0, 2**31 - 1)
EPOCHS = st.integers(0, 2**31 - 2)
"""Epochs a real node sends (the last one an election can reach is 2^31 - 2)."""
LEADERS = st.integers(-1, 2**31 - 1)
REPLICAS_OR_NONE = st.integers(-1, 2**31 - 1)
COUNTS = st.integers(0, 2**31 - 1)
OFFSETS = st.integers(0, 2**63 - 1)
CODES = st.sampled_from(list(ErrorCode))
CORRELATION = INT32


def _frame_body(frame: bytes) -> bytes:
    """A frame without its int32 size (what decoders take)."""
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    return frame[4:]


def _request_round_trip(message: Any, destination: int = 3, cluster_id: str | None = "c1") -> Any:
    frame = encode_request(message, destination=destination, cluster_id=cluster_id)
    # The plain-value writer writes what kio writes for the built entity.
    key = api_key_of(message)
    entity = codec.build(
        codec.request_class(key, send_version(key)),
        **_request_values(message, destination, cluster_id),
    )
    client = "metadata-log-quorum"
    assert frame == codec.encode_request(
        entity, correlation_id=message.correlation_id, client_id=client
    )
    return decode_request(_frame_body(frame))


def _response_round_trip(message: Any, version: int | None = None, correlation: int = 9) -> Any:
    key = api_key_of(message)
    version = send_version(key) if version is None else version
    frame = encode_response(message, correlation_id=correlation, version=version)
    assert struct.unpack_from(">i", frame, 4)[0] == correlation
    return decode_response(_frame_body(frame), api_key=key, version=version)


# --------------------------------------------------------------------------- samples

VOTE = VoteRequest(
    correlation_id=1, replica_epoch=5, replica_id=2, last_offset_epoch=4, last_offset=99
)
FETCH = FetchRequest(
    correlation_id=4,
    replica_id=2,
    current_leader_epoch=5,
    fetch_offset=9,
    last_fetched_epoch=4,
    max_wait_ms=500,
)
CHUNK = FetchSnapshotRequest(
    correlation_id=5,
    replica_id=2,
    current_leader_epoch=5,
    snapshot_id=SnapshotId(end_offset=9, epoch=4),
    position=0,
    max_bytes=100,
)
SAMPLE_REQUESTS: list[Any] = [
    VOTE,
    BeginQuorumEpochRequest(correlation_id=2, leader_id=1, leader_epoch=5),
    EndQuorumEpochRequest(correlation_id=3, leader_id=1, leader_epoch=5, preferred_successors=(2,)),
    FETCH,
    CHUNK,
    DescribeQuorumRequest(correlation_id=6),
]
"""One request of each kind the core sends, every number in range."""

DIRECTORY = "pqQ6lNYVQbOcf5VZWv4_Pw"
ADD_VOTER = AddRaftVoterRequest(
    correlation_id=3,
    voter_id=4,
    voter_directory_id=DIRECTORY,
    endpoints=(VoterEndpoint(name="CONTROLLER", host="127.0.0.1", port=9093),),
    timeout_ms=5000,
    ack_when_committed=False,
)
REMOVE_VOTER = RemoveRaftVoterRequest(correlation_id=4, voter_id=1, voter_directory_id="")
UPDATE_VOTER = UpdateRaftVoterRequest(
    correlation_id=5,
    current_leader_epoch=3,
    voter_id=2,
    voter_directory_id=DIRECTORY,
    endpoints=(VoterEndpoint(name="CONTROLLER", host="::1", port=9094),),
)
VOTER_CHANGES: list[Any] = [ADD_VOTER, REMOVE_VOTER, UPDATE_VOTER]
"""One of each KIP-853 request: an admin's or a voter's, answered by the server's endpoint."""

SAMPLE_ANSWERS: list[QuorumResponse] = [
    VoteResponse(
        correlation_id=1, error_code=ErrorCode.NONE, leader_id=1, leader_epoch=5, vote_granted=True
    ),
    BeginQuorumEpochResponse(
        correlation_id=2, error_code=ErrorCode.NONE, leader_id=1, leader_epoch=5
    ),
    EndQuorumEpochResponse(
        correlation_id=3, error_code=ErrorCode.NONE, leader_id=1, leader_epoch=5
    ),
    FetchResponse(
        correlation_id=4,
        error_code=ErrorCode.NONE,
        high_watermark=9,
        current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=5),
        diverging_epoch=EpochEndOffset(epoch=4, end_offset=8),
        records=(Entry(offset=9, epoch=5, payload=b"ab", count=2),),
    ),
    FetchSnapshotResponse(
        correlation_id=5,
        error_code=ErrorCode.NONE,
        snapshot_id=SnapshotId(end_offset=9, epoch=4),
        current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=5),
        size=3,
        position=0,
        unaligned_records=b"abc",
    ),
    DescribeQuorumResponse(
        error_code=ErrorCode.NONE,
        leader_id=1,
        leader_epoch=5,
        high_watermark=9,
        current_voters=(
            ReplicaState(
                replica_id=1, log_end_offset=9, last_fetch_timestamp=1, last_caught_up_timestamp=2
            ),
        ),
        observers=(),
    ),
]
"""One answer of each kind the core sends, every number in range."""


# --------------------------------------------------------------------------- round trips

SNAPSHOT_IDS = st.builds(SnapshotId, end_offset=OFFSETS, epoch=EPOCHS)
LEADERS_AND_EPOCHS = st.builds(LeaderIdAndEpoch, leader_id=LEADERS, leader_epoch=EPOCHS)

REQUESTS = [
    pytest.param(
        st.builds(
            VoteRequest,
            correlation_id=CORRELATION,
            replica_epoch=EPOCHS,
            replica_id=IDS,
            last_offset_epoch=EPOCHS,
            last_offset=OFFSETS,
            pre_vote=st.booleans(),
        ),
        "replica_id",
        True,
        id="Vote",
    ),
    pytest.param(
        st.builds(
            BeginQuorumEpochRequest, correlation_id=CORRELATION, leader_id=IDS, leader_epoch=EPOCHS
        ),
        "leader_id",
        True,
        id="BeginQuorumEpoch",
    ),
    pytest.param(
        st.builds(
            EndQuorumEpochRequest,
            correlation_id=CORRELATION,
            leader_id=IDS,
            leader_epoch=EPOCHS,
            preferred_successors=st.lists(IDS, max_size=7).map(tuple),
        ),
        "leader_id",
        False,
        id="EndQuorumEpoch",
    ),
    pytest.param(
        st.builds(
            FetchRequest,
            correlation_id=CORRELATION,
            # A voter without durable state fetches as replica -1 (ReplicaState's default).
            replica_id=REPLICAS_OR_NONE,
            current_leader_epoch=EPOCHS,
            fetch_offset=OFFSETS,
            last_fetched_epoch=EPOCHS,
            max_wait_ms=st.integers(0, 2**31 - 1),
        ),
        "replica_id",
        False,
        id="Fetch",
    ),
    pytest.param(
        st.builds(
            FetchSnapshotRequest,
            correlation_id=CORRELATION,
            replica_id=REPLICAS_OR_NONE,
            current_leader_epoch=EPOCHS,
            snapshot_id=SNAPSHOT_IDS,
            position=OFFSETS,
            max_bytes=COUNTS,
        ),
        "replica_id",
        False,
        id="FetchSnapshot",
    ),
    pytest.param(
        st.builds(DescribeQuorumRequest, correlation_id=CORRELATION),
        None,
        False,
        id="DescribeQuorum",
    ),
]
"""Each request the core sends, drawn whole; the field naming its sender (None: no replica,
a tool's); whether it is addressed to one voter (its VoterId is the destination)."""


@pytest.mark.parametrize(("requests", "sender", "addressed"), REQUESTS)
@settings(max_examples=150)
@given(data=st.data(), destination=INT32, cluster=st.none() | st.text(max_size=30))
def test_requests_round_trip(
    *,
    requests: st.SearchStrategy[Any],
    sender: str | None,
    addressed: bool,
    data: st.DataObject,
    destination: int,
    cluster: str | None,
) -> None:
    message = data.draw(requests)
    inbound = _request_round_trip(message, destination, cluster)
    assert inbound.message == message
    assert inbound.sender_id == (-1 if sender is None else getattr(message, sender))
    assert inbound.voter_id == (destination if addressed else -1)
    # DescribeQuorum has no ClusterId field: it reads as not said.
    assert inbound.cluster_id == (None if isinstance(message, DescribeQuorumRequest) else cluster)


def _dense_entries(
    first: int, epochs: list[int], payloads: list[bytes], controls: list[bool], counts: list[int]
) -> tuple[Entry, ...]:
    """Dense batches (a marker is one offset; a batch's body is never empty)."""
    entries: list[Entry] = []
    offset = first
    for e, p, c, n in zip(sorted(epochs), payloads, controls, counts, strict=False):
        kind = EntryKind.LEADER_CHANGE if c else EntryKind.DATA
        entries.append(Entry(offset=offset, epoch=e, payload=p, kind=kind, count=1 if c else n))
        offset += entries[-1].count
    return tuple(entries)


ENTRIES = st.builds(
    _dense_entries,
    st.integers(0, 2**61),
    st.lists(EPOCHS, max_size=8),
    st.lists(st.binary(min_size=1, max_size=64), min_size=8, max_size=8),
    st.lists(st.booleans(), min_size=8, max_size=8),
    st.lists(st.integers(1, 5), min_size=8, max_size=8),
)


def _answers(kind: type[Any], **fields: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`kind`'s answers: any correlation id and error code, `fields` drawn as given."""
    return st.builds(kind, correlation_id=CORRELATION, error_code=CODES, **fields)


@pytest.mark.parametrize(
    "answers",
    [
        pytest.param(
            _answers(
                VoteResponse, leader_id=LEADERS, leader_epoch=EPOCHS, vote_granted=st.booleans()
            ),
            id="Vote",
        ),
        pytest.param(
            _answers(BeginQuorumEpochResponse, leader_id=LEADERS, leader_epoch=EPOCHS),
            id="BeginQuorumEpoch",
        ),
        pytest.param(
            _answers(EndQuorumEpochResponse, leader_id=LEADERS, leader_epoch=EPOCHS),
            id="EndQuorumEpoch",
        ),
        pytest.param(
            _answers(
                FetchResponse,
                high_watermark=st.integers(-1, 2**63 - 1),
                current_leader=LEADERS_AND_EPOCHS,
                diverging_epoch=st.none()
                | st.builds(EpochEndOffset, epoch=EPOCHS, end_offset=OFFSETS),
                snapshot_id=st.none() | SNAPSHOT_IDS,
                records=ENTRIES,
            ),
            id="Fetch",
        ),
        pytest.param(
            _answers(
                FetchSnapshotResponse,
                snapshot_id=SNAPSHOT_IDS,
                current_leader=LEADERS_AND_EPOCHS,
                size=OFFSETS,
                position=OFFSETS,
                unaligned_records=st.binary(max_size=200),
            ),
            id="FetchSnapshot",
        ),
    ],
)
@settings(max_examples=200)
@given(data=st.data())
def test_responses_round_trip(answers: st.SearchStrategy[Any], data: st.DataObject) -> None:
    message = data.draw(answers)
    assert _response_round_trip(message, correlation=message.correlation_id) == message


REPLICAS = st.lists(
    st.builds(
        ReplicaState,
        replica_id=INT32,
        log_end_offset=INT64,
        last_fetch_timestamp=INT64,
        last_caught_up_timestamp=INT64,
    ),
    max_size=5,
).map(tuple)


@settings(max_examples=100)
@given(
    code=CODES,
    leader=INT32,
    epoch=INT32,
    high_watermark=INT64,
    voters=REPLICAS,
    observers=REPLICAS,
    version=st.sampled_from([0, 1, 2]),
)
def test_describe_quorum_responses_round_trip_in_every_served_version(
    *,
    code: ErrorCode,
    leader: int,
    epoch: int,
    high_watermark: int,
    voters: tuple[ReplicaState, ...],
    observers: tuple[ReplicaState, ...],
    version: int,
) -> None:
    message = DescribeQuorumResponse(
        error_code=code,
        leader_id=leader,
        leader_epoch=epoch,
        high_watermark=high_watermark,
        current_voters=voters,
        observers=observers,
    )
    decoded = _response_round_trip(message, version=version)
    if version == 0:  # v0 has no timestamps: they read as unknown (-1)

        def unknown(r: ReplicaState) -> ReplicaState:
            return ReplicaState(
                replica_id=r.replica_id,
                log_end_offset=r.log_end_offset,
                last_fetch_timestamp=-1,
                last_caught_up_timestamp=-1,
            )

        message = DescribeQuorumResponse(
            error_code=code,
            leader_id=leader,
            leader_epoch=epoch,
            high_watermark=high_watermark,
            current_voters=tuple(unknown(r) for r in voters),
            observers=tuple(unknown(r) for r in observers),
        )
    assert decoded == message


def test_every_quorum_api_is_served_in_the_version_it_is_sent() -> None:
    for key, (low, high) in QUORUM_VERSIONS.items():
        assert low <= send_version(key) == high
        assert codec.request_class(key, high).__flexible__


def test_the_generated_writer_writes_what_kio_writes_for_every_answer() -> None:
    from api.protocol.quorum.responses import (
        response_answer,
    )

    for message in SAMPLE_ANSWERS:
        for version in range(
            QUORUM_VERSIONS[api_key_of(message)][0], send_version(api_key_of(message)) + 1
        ):
            answer = response_answer(message, version=version)
            assert codec.encode_response(5, answer) == codec.encode_response_with_kio(5, answer)


# --------------------------------------------------------------------------- error codes


def test_error_codes_map_both_ways_and_inconsistent_voter_set_is_kafkas_94() -> None:
    for code in ErrorCode:
        assert core_error_code(wire_error_code(code), what="x") is code
    assert wire_error_code(ErrorCode.INCONSISTENT_VOTER_SET) == 94
    with pytest.raises(RaftWireRefusal, match=r"ELECTION_NOT_NEEDED|error 84") as caught:
        core_error_code(84, what="VoteResponse")
    assert caught.value.error_code == 84


def test_an_answer_with_an_error_the_core_does_not_know_is_a_refusal() -> None:
    frame = encode_response(
        VoteResponse(
            correlation_id=3,
            error_code=ErrorCode.NONE,
            leader_id=1,
            leader_epoch=2,
            vote_granted=False,
        )
    )
    # Partition error 104 (INCONSISTENT_CLUSTER_ID) patched in: the core has no such code.
    body = _frame_body(frame)
    patched = body.replace(struct.pack(">hii", 0, 1, 2), struct.pack(">hii", 104, 1, 2))
    assert patched != body
    with pytest.raises(RaftWireRefusal, match="INCONSISTENT_CLUSTER_ID") as caught:
        decode_response(patched, api_key=VOTE_KEY, version=2)
    assert caught.value.error_code == 104


def test_a_top_level_refusal_is_a_refusal_with_its_code_and_message() -> None:
    answer = error_answer(DESCRIBE_QUORUM_KEY, 2, 31, "User:bob may not Describe the cluster")
    frame = codec.encode_response(4, answer)
    with pytest.raises(RaftWireRefusal, match=r"CLUSTER_AUTHORIZATION_FAILED.*User:bob") as caught:
        decode_response(_frame_body(frame), api_key=DESCRIBE_QUORUM_KEY, version=2)
    assert caught.value.error_code == 31
    for key, (_, version) in QUORUM_VERSIONS.items():
        if key in VOTER_CHANGE_KEYS:
            continue  # their code is their answer (below)
        frame = codec.encode_response(4, error_answer(key, version, 31))
        with pytest.raises(RaftWireRefusal):
            decode_response(_frame_body(frame), api_key=key, version=version)


def test_a_voter_change_refused_comes_back_as_its_answer_with_code_and_message() -> None:
    answer = error_answer(ADD_RAFT_VOTER_KEY, 1, 31, "User:bob may not Alter the cluster")
    frame = codec.encode_response(4, answer)
    decoded = decode_response(_frame_body(frame), api_key=ADD_RAFT_VOTER_KEY, version=1)
    assert decoded == AddRaftVoterResponse(
        correlation_id=4, error_code=31, error_message="User:bob may not Alter the cluster"
    )


@pytest.mark.parametrize("message", VOTER_CHANGES, ids=lambda m: type(m).__name__)
def test_voter_change_requests_round_trip_with_kafkas_schemas(message: Any) -> None:
    frame = encode_request(message, destination=-1, cluster_id="c")
    inbound = decode_request(_frame_body(frame))
    assert inbound.message == message
    # AddRaftVoter's voter is the one to add, not this node: never an addressing refusal.
    assert inbound.voter_id == -1


@pytest.mark.parametrize(
    "answer",
    [
        AddRaftVoterResponse(correlation_id=1, error_code=0),
        RemoveRaftVoterResponse(correlation_id=2, error_code=127, error_message="not a voter"),
        UpdateRaftVoterResponse(
            correlation_id=3,
            error_code=0,
            leader_id=2,
            leader_epoch=7,
            leader_host="h",
            leader_port=9093,
        ),
    ],
)
def test_voter_change_answers_round_trip(answer: object) -> None:
    key = api_key_of(answer)  # type: ignore[arg-type]  # each is a QuorumResponse
    frame = encode_response(answer)  # type: ignore[arg-type]  # each is a QuorumResponse
    assert decode_response(_frame_body(frame), api_key=key, version=send_version(key)) == answer


def test_a_directory_id_that_is_not_a_kafka_uuid_is_refused_in_one_line() -> None:
    bad = RemoveRaftVoterRequest(correlation_id=1, voter_id=1, voter_directory_id="nope")
    with pytest.raises(RaftWireError, match="not a directory id"):
        encode_request(bad, destination=-1, cluster_id=None)


# --------------------------------------------------------------------------- entries


@settings(max_examples=200)
@given(records=ENTRIES)
def test_entries_round_trip(records: tuple[Entry, ...]) -> None:
    assert decode_entries(encode_entries(records)) == records


def _sample_entries() -> bytes:
    return encode_entries(
        (
            Entry(offset=5, epoch=2, payload=b"block-a", count=2),
            Entry(offset=7, epoch=3, payload=b'{"leaderId":1}', kind=EntryKind.LEADER_CHANGE),
        )
    )


def test_a_batch_goes_on_the_wire_as_its_body_and_empty_offsets() -> None:
    """The frame predates batch-aware entries: one offset each, the body at the first."""
    head = struct.Struct(">qiBI")
    body = b"".join(
        [
            head.pack(5, 2, 0, 7) + b"block-a",
            head.pack(6, 2, 0, 0),
            head.pack(7, 3, 1, 14) + b'{"leaderId":1}',
        ]
    )
    expected = struct.pack(">4sBII", b"mlqe", 1, 3, zlib.crc32(body)) + body
    assert _sample_entries() == expected


def test_an_answer_of_thousands_of_one_offset_blocks_decodes_in_linear_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each block's run of empty offsets is sought in work that follows the run, not the rest.

    A log of one topic per request is thousands of one-offset blocks: building and comparing
    every remaining head for each of them was quadratic (3.4 s for 8,000 blocks, past the
    request timeout, so a new follower never got its first answer).
    """
    from api.protocol.quorum import entries as entries_module

    built: list[int] = []
    make = entries_module._empty_heads

    def counted(first: int, count: int, epoch: int) -> bytes:
        built.append(count)
        return make(first, count, epoch)

    monkeypatch.setattr(entries_module, "_empty_heads", counted)
    total = 4000
    batches = tuple(
        Entry(offset=o, epoch=1, payload=b"block", count=2 if o % 500 == 0 else 1)
        for o in _offsets(total)
    )
    assert decode_entries(encode_entries(batches)) == batches
    assert sum(built) <= 4 * len(batches)


def _offsets(total: int) -> list[int]:
    """First offsets of `total` batches, a two-offset one every 500 offsets."""
    offsets: list[int] = []
    offset = 0
    while len(offsets) < total:
        offsets.append(offset)
        offset += 2 if offset % 500 == 0 else 1
    return offsets


def test_entries_refuse_every_truncation_and_every_flipped_bit() -> None:
    data = _sample_entries()
    for cut in range(1, len(data)):
        with pytest.raises(RaftWireError, match="fetch records"):
            decode_entries(data[:cut])
    for index in range(len(data)):
        for bit in range(8):
            damaged = bytearray(data)
            damaged[index] ^= 1 << bit
            with pytest.raises(RaftWireError, match="fetch records"):
                decode_entries(bytes(damaged))


def _with_crc(header_and_body: bytes) -> bytes:
    """Entries bytes with a correct CRC, so the check under test is not the CRC's."""
    body = header_and_body[13:]
    return header_and_body[:9] + struct.pack(">I", zlib.crc32(body)) + body


def test_entries_refuse_huge_lengths_and_counts_without_reading_them() -> None:
    entry = struct.pack(">qiBI", 0, 1, 0, 2**32 - 1) + b"abc"
    data = _with_crc(ENTRIES_MAGIC + struct.pack(">BII", 1, 1, 0) + entry)
    with pytest.raises(RaftWireError, match=r"claims 4294967295 payload bytes, 3 remain"):
        decode_entries(data)
    data = _with_crc(ENTRIES_MAGIC + struct.pack(">BII", 1, 2**32 - 1, 0) + entry)
    with pytest.raises(RaftWireError, match="4294967295 entries claimed"):
        decode_entries(data)


@pytest.mark.parametrize(
    ("entries", "error"),
    [
        ([(0, 1, 0, b"a"), (2, 1, 0, b"b")], "entries must be dense"),
        ([(0, 2, 0, b"a"), (1, 1, 0, b"b")], "epochs never go down"),
        ([(0, 1, 2, b"a")], "unknown flags"),
        ([(-1, 1, 0, b"a")], "out of range"),
        ([(0, -1, 0, b"a")], "out of range"),
    ],
)
def test_entries_refuse_what_no_leader_sends(
    entries: list[tuple[int, int, int, bytes]], error: str
) -> None:
    body = b"".join(struct.pack(">qiBI", o, e, f, len(p)) + p for o, e, f, p in entries)
    data = _with_crc(ENTRIES_MAGIC + struct.pack(">BII", 1, len(entries), 0) + body)
    with pytest.raises(RaftWireError, match=error):
        decode_entries(data)


def test_entries_refuse_another_magic_another_version_and_leftovers() -> None:
    data = _sample_entries()
    with pytest.raises(RaftWireError, match="not quorum entries"):
        decode_entries(b"\x00\x00\x00\x00" + data[4:])
    with pytest.raises(RaftWireError, match="version 2 is not 1; upgrade"):
        decode_entries(data[:4] + b"\x02" + data[5:])
    with pytest.raises(RaftWireError, match="bytes after the last entry"):
        decode_entries(_with_crc(data + b"zz"))


def _entries_one_by_one(heads: list[tuple[int, int, int, bytes]]) -> tuple[Entry, ...] | None:
    """The layout's rule read offset by offset (the reference); None where a check refuses.

    An empty, plain offset that is the next of a data batch, in its epoch, extends it; any
    other offset starts a batch, which must follow the one before densely, epochs not going
    down.
    """
    batches: list[Entry] = []
    for offset, epoch, flags, payload in heads:
        last = batches[-1] if batches else None
        if (
            last is not None
            and not payload
            and not flags
            and last.kind is EntryKind.DATA
            and offset == last.offset + last.count
            and epoch == last.epoch
        ):
            batches[-1] = Entry(
                offset=last.offset, epoch=epoch, payload=last.payload, count=last.count + 1
            )
            continue
        if offset < 0 or epoch < 0 or flags not in (0, 1):
            return None
        if last is not None and (offset != last.offset + last.count or epoch < last.epoch):
            return None
        kind = EntryKind.LEADER_CHANGE if flags else EntryKind.DATA
        batches.append(Entry(offset=offset, epoch=epoch, payload=payload, kind=kind))
    return tuple(batches)


_NEXT_EMPTY = (1, 0, 0, b"")
"""A step to the next offset, in the same epoch, with no flags and no payload."""

HEADS = st.lists(
    st.one_of(
        st.just(_NEXT_EMPTY),  # mostly runs that extend a batch
        st.tuples(
            st.sampled_from([1, 1, 2, 0, -1]),  # the step from the offset before
            st.sampled_from([0, 0, 1, -1]),  # the step from the epoch before
            st.sampled_from([0, 0, 1, 2]),
            st.sampled_from([b"", b"body"]),
        ),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=500)
@given(steps=HEADS, first=st.sampled_from([0, 5, 2**63 - 3]))
def test_entries_decode_as_read_offset_by_offset(
    steps: list[tuple[int, int, int, bytes]], first: int
) -> None:
    """Runs of empty offsets taken whole give what reading them one at a time gives.

    Frames of data bodies, markers and empty offsets that do and do not extend the batch
    before (another epoch, a gap, a flag, after a marker), near the largest offset too.
    """
    heads: list[tuple[int, int, int, bytes]] = []
    offset, epoch = first, 3
    for index, (step, epoch_step, flags, payload) in enumerate(steps):
        offset += step if index else 0
        epoch += epoch_step
        heads.append((offset, epoch, flags, payload))
    if any(not -(2**63) <= o < 2**63 or not -(2**31) <= e < 2**31 for o, e, _, _ in heads):
        return
    body = b"".join(struct.pack(">qiBI", o, e, f, len(p)) + p for o, e, f, p in heads)
    data = _with_crc(ENTRIES_MAGIC + struct.pack(">BII", 1, len(heads), 0) + body)
    expected = _entries_one_by_one(heads)
    if expected is None:
        with pytest.raises(RaftWireError, match="fetch records"):
            decode_entries(data)
    else:
        assert decode_entries(data) == expected
        assert encode_entries(expected) == data


def test_no_entries_are_empty_records_and_senders_refuse_bad_entries() -> None:
    assert encode_entries(()) == b""
    assert decode_entries(b"") == decode_entries(None) == ()
    with pytest.raises(RaftWireError, match="cannot send entries: offset 3 follows 1"):
        encode_entries(
            (Entry(offset=1, epoch=1, payload=b""), Entry(offset=3, epoch=1, payload=b""))
        )


# --------------------------------------------------------------------------- malformed frames


def _fetch_frame() -> bytes:
    return _frame_body(encode_request(FETCH, destination=1, cluster_id="c"))


def test_every_truncated_request_frame_is_refused() -> None:
    frame = _fetch_frame()
    for cut in range(len(frame)):
        with pytest.raises(ProtocolError):
            decode_request(frame[:cut])


def test_every_truncated_response_frame_is_refused() -> None:
    frame = _frame_body(
        encode_response(
            FetchResponse(
                correlation_id=5,
                error_code=ErrorCode.NONE,
                high_watermark=7,
                current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=4),
                records=(Entry(offset=6, epoch=4, payload=b"abc"),),
            )
        )
    )
    for cut in range(len(frame)):
        with pytest.raises(RaftWireError):
            decode_response(frame[:cut], api_key=FETCH_KEY, version=17)


@settings(max_examples=300)
@given(garbage=st.binary(max_size=120), key=st.sampled_from(sorted(QUORUM_VERSIONS)))
def test_garbage_is_refused_with_one_line(garbage: bytes, key: int) -> None:
    version = send_version(key)
    try:
        decode_response(garbage, api_key=key, version=version)
    except RaftWireError as exc:
        assert "\n" not in str(exc)
    try:
        decode_request(struct.pack(">hhi", key, version, 1) + garbage)
    except ProtocolError as exc:
        assert "\n" not in str(exc)


_EDGES = (-(2**31), -1, 2**31 - 1)
"""Values of an int32 field out of range for an epoch (and the negatives for anything)."""
_OUT_OF_RANGE_REQUESTS: list[Any] = [
    *(replace(VOTE, replica_epoch=v) for v in _EDGES),
    *(replace(VOTE, last_offset_epoch=v) for v in _EDGES),
    *(replace(VOTE, replica_id=v) for v in (-1, -(2**31))),
    *(replace(VOTE, last_offset=v) for v in (-1, -(2**63))),
    *(BeginQuorumEpochRequest(correlation_id=5, leader_id=2, leader_epoch=v) for v in _EDGES),
    BeginQuorumEpochRequest(correlation_id=5, leader_id=-1, leader_epoch=4),
    *(
        EndQuorumEpochRequest(
            correlation_id=5, leader_id=2, leader_epoch=v, preferred_successors=(1,)
        )
        for v in _EDGES
    ),
    EndQuorumEpochRequest(
        correlation_id=5, leader_id=2, leader_epoch=4, preferred_successors=(-7,)
    ),
    *(replace(FETCH, current_leader_epoch=v) for v in _EDGES),
    *(replace(FETCH, last_fetched_epoch=v) for v in _EDGES),
    replace(FETCH, replica_id=-2),
    *(replace(FETCH, fetch_offset=v) for v in (-1, -(2**63))),
    *(replace(CHUNK, current_leader_epoch=v) for v in _EDGES),
    *(replace(CHUNK, snapshot_id=SnapshotId(end_offset=9, epoch=v)) for v in _EDGES),
    replace(CHUNK, snapshot_id=SnapshotId(end_offset=-1, epoch=3)),
    replace(CHUNK, position=-1),
    replace(CHUNK, max_bytes=-1),
    RemoveRaftVoterRequest(correlation_id=5, voter_id=-3, voter_directory_id=""),
    AddRaftVoterRequest(correlation_id=5, voter_id=-1, voter_directory_id="", endpoints=()),
    UpdateRaftVoterRequest(
        correlation_id=5,
        current_leader_epoch=2**31 - 1,
        voter_id=2,
        voter_directory_id="",
        endpoints=(),
    ),
    UpdateRaftVoterRequest(
        correlation_id=5,
        current_leader_epoch=4,
        voter_id=2,
        voter_directory_id="",
        endpoints=(),
        min_kraft_version=1,
        max_kraft_version=0,
    ),
]


@pytest.mark.parametrize("message", _OUT_OF_RANGE_REQUESTS, ids=repr)
def test_a_request_with_a_number_out_of_range_is_refused_as_invalid(message: Any) -> None:
    """Issue 54: refused at the door (INVALID_REQUEST, one line), before the core sees it."""
    frame = encode_request(message, destination=3, cluster_id="c1")
    with pytest.raises(RaftWireRefusal) as caught:
        decode_request(_frame_body(frame))
    assert caught.value.error_code == INVALID_REQUEST
    assert "\n" not in str(caught.value) and "refused" in str(caught.value)


def test_the_last_epoch_an_election_reaches_is_still_taken() -> None:
    for message in (
        replace(VOTE, replica_epoch=2**31 - 2),
        BeginQuorumEpochRequest(correlation_id=5, leader_id=2, leader_epoch=2**31 - 2),
        replace(FETCH, current_leader_epoch=2**31 - 2, fetch_offset=2**63 - 1),
    ):
        assert _request_round_trip(message).message == message


@pytest.mark.parametrize(
    "message",
    [
        VoteResponse(
            correlation_id=5,
            error_code=ErrorCode.NONE,
            leader_id=1,
            leader_epoch=2**31 - 1,
            vote_granted=False,
        ),
        BeginQuorumEpochResponse(
            correlation_id=5, error_code=ErrorCode.NONE, leader_id=1, leader_epoch=-1
        ),
        EndQuorumEpochResponse(
            correlation_id=5, error_code=ErrorCode.NONE, leader_id=-5, leader_epoch=3
        ),
        FetchResponse(
            correlation_id=5,
            error_code=ErrorCode.NONE,
            high_watermark=-2,
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=3),
        ),
        FetchResponse(
            correlation_id=5,
            error_code=ErrorCode.NONE,
            high_watermark=0,
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=2**31 - 1),
        ),
        FetchSnapshotResponse(
            correlation_id=5,
            error_code=ErrorCode.NONE,
            snapshot_id=SnapshotId(end_offset=9, epoch=2**31 - 1),
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=3),
            size=10,
            position=0,
        ),
    ],
    ids=repr,
)
def test_an_answer_with_a_number_out_of_range_is_dropped(message: Any) -> None:
    with pytest.raises(RaftWireError, match=r"dropped: .* (negative|past|not in|not a node)"):
        _response_round_trip(message)


def test_a_request_for_another_partition_is_refused_as_invalid() -> None:
    body = codec.build(
        codec.request_class(VOTE_KEY, 2),
        cluster_id=None,
        voter_id=1,
        topics=[
            {
                "topic_name": "orders",
                "partitions": [
                    {
                        "partition_index": 0,
                        "replica_epoch": 1,
                        "replica_id": 2,
                        "replica_directory_id": None,
                        "voter_directory_id": None,
                        "last_offset_epoch": 0,
                        "last_offset": 0,
                        "pre_vote": False,
                    }
                ],
            }
        ],
    )
    frame = _frame_body(codec.encode_request(body, correlation_id=1))
    with pytest.raises(RaftWireRefusal, match="names orders-0; the only partition is") as caught:
        decode_request(frame)
    assert caught.value.error_code == INVALID_REQUEST
    empty = codec.build(codec.request_class(DESCRIBE_QUORUM_KEY, 2), topics=[])
    with pytest.raises(RaftWireRefusal, match="exactly one partition"):
        decode_request(_frame_body(codec.encode_request(empty, correlation_id=1)))


def test_an_unserved_version_is_refused() -> None:
    frame = bytearray(_fetch_frame())
    struct.pack_into(">h", frame, 2, 12)
    with pytest.raises(RaftWireError, match="v12 is not a quorum API version served"):
        decode_request(bytes(frame))


def test_values_the_wire_cannot_carry_are_refused_on_sending() -> None:
    message = VoteRequest(
        correlation_id=1, replica_epoch=2**31, replica_id=1, last_offset_epoch=0, last_offset=0
    )
    with pytest.raises(RaftWireError, match="cannot send VoteRequest"):
        encode_request(message, destination=2, cluster_id=None)


# --------------------------------------------------------------------------- Kafka's bytes
#
# Each frame below is written by hand from Kafka's JSON message definitions (field order,
# versions, compact encodings of flexible versions, tagged fields in tag order), independently
# of kio, and must equal what this module sends.


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def compact_string(text: str | None) -> bytes:
    if text is None:
        return uvarint(0)
    data = text.encode()
    return uvarint(len(data) + 1) + data


def compact_bytes(data: bytes) -> bytes:
    return uvarint(len(data) + 1) + data


def compact_array(items: list[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def tags(fields: dict[int, bytes] | None = None) -> bytes:
    fields = fields or {}
    return uvarint(len(fields)) + b"".join(
        uvarint(tag) + uvarint(len(value)) + value for tag, value in sorted(fields.items())
    )


ZERO_UUID = bytes(16)
TOPIC = compact_string(METADATA_TOPIC)
TOPIC_ID = METADATA_TOPIC_ID.bytes


def topics(partition: bytes, topic: bytes = TOPIC) -> bytes:
    """A Topics array holding the metadata partition alone: the topic (name or id), `partition`."""
    return compact_array([topic + compact_array([partition]) + tags()])


def request_header(key: int, version: int, correlation: int, client: str) -> bytes:
    """Request header v2: key, version, correlation id, client id (a non-compact string)."""
    data = client.encode()
    return i16(key) + i16(version) + i32(correlation) + i16(len(data)) + data + tags()


def response_header(correlation: int) -> bytes:
    """Response header v1: correlation id and tagged fields."""
    return i32(correlation) + tags()


def sized(frame: bytes) -> bytes:
    return i32(len(frame)) + frame


CLIENT = "metadata-log-quorum"


def partition_answer(correlation: int, *fields: bytes) -> bytes:
    """The frame of an answer whose top ErrorCode is 0 and whose one partition holds `fields`
    after its index (Vote, BeginQuorumEpoch, EndQuorumEpoch)."""
    body = i16(0) + topics(i32(0) + b"".join(fields) + tags()) + tags()
    return sized(response_header(correlation) + body)


def test_vote_request_bytes_follow_kafkas_schema() -> None:
    message = VoteRequest(
        correlation_id=11,
        replica_epoch=5,
        replica_id=2,
        last_offset_epoch=4,
        last_offset=1000,
        pre_vote=True,
    )
    partition = (
        i32(0)  # PartitionIndex
        + i32(5)  # ReplicaEpoch
        + i32(2)  # ReplicaId
        + ZERO_UUID  # ReplicaDirectoryId (v1+)
        + ZERO_UUID  # VoterDirectoryId (v1+)
        + i32(4)  # LastOffsetEpoch
        + i64(1000)  # LastOffset
        + i8(1)  # PreVote (v2+)
        + tags()
    )
    body = (
        compact_string("cid")  # ClusterId
        + i32(3)  # VoterId (v1+)
        + topics(partition)
        + tags()
    )
    expected = sized(request_header(52, 2, 11, CLIENT) + body)
    assert encode_request(message, destination=3, cluster_id="cid") == expected


def test_vote_response_bytes_follow_kafkas_schema() -> None:
    message = VoteResponse(
        correlation_id=11,
        error_code=ErrorCode.FENCED_LEADER_EPOCH,
        leader_id=1,
        leader_epoch=6,
        vote_granted=False,
    )
    # ErrorCode, LeaderId, LeaderEpoch, VoteGranted
    assert encode_response(message) == partition_answer(11, i16(74), i32(1), i32(6), i8(0))


def test_begin_quorum_epoch_bytes_follow_kafkas_schema() -> None:
    request = BeginQuorumEpochRequest(correlation_id=12, leader_id=1, leader_epoch=7)
    partition = i32(0) + ZERO_UUID + i32(1) + i32(7) + tags()
    body = (
        compact_string(None)  # ClusterId
        + i32(2)  # VoterId
        + topics(partition)
        + compact_array([])  # LeaderEndpoints
        + tags()
    )
    expected = sized(request_header(53, 1, 12, CLIENT) + body)
    assert encode_request(request, destination=2, cluster_id=None) == expected
    response = BeginQuorumEpochResponse(
        correlation_id=12, error_code=ErrorCode.NONE, leader_id=1, leader_epoch=7
    )
    # ErrorCode, LeaderId, LeaderEpoch
    assert encode_response(response) == partition_answer(12, i16(0), i32(1), i32(7))


def test_end_quorum_epoch_bytes_follow_kafkas_schema() -> None:
    request = EndQuorumEpochRequest(
        correlation_id=13, leader_id=1, leader_epoch=7, preferred_successors=(3, 2)
    )
    candidates = [i32(3) + ZERO_UUID + tags(), i32(2) + ZERO_UUID + tags()]
    partition = i32(0) + i32(1) + i32(7) + compact_array(candidates) + tags()
    body = (
        compact_string("cid")
        + topics(partition)
        + compact_array([])  # LeaderEndpoints
        + tags()
    )
    expected = sized(request_header(54, 1, 13, CLIENT) + body)
    assert encode_request(request, destination=2, cluster_id="cid") == expected
    response = EndQuorumEpochResponse(
        correlation_id=13, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_id=3, leader_epoch=8
    )
    assert encode_response(response) == partition_answer(13, i16(6), i32(3), i32(8))


def test_fetch_request_bytes_follow_kafkas_schema() -> None:
    request = FetchRequest(
        correlation_id=14,
        replica_id=2,
        current_leader_epoch=7,
        fetch_offset=120,
        last_fetched_epoch=6,
        max_wait_ms=500,
    )
    partition = (
        i32(0)  # Partition
        + i32(7)  # CurrentLeaderEpoch
        + i64(120)  # FetchOffset
        + i32(6)  # LastFetchedEpoch
        + i64(-1)  # LogStartOffset
        + i32(FETCH_MAX_BYTES)  # PartitionMaxBytes
        + tags()  # ReplicaDirectoryId (tag 0) left out: the zero id is its default
    )
    replica_state = i32(2) + i64(-1) + tags()  # ReplicaId, ReplicaEpoch
    body = (
        i32(500)  # MaxWaitMs
        + i32(0)  # MinBytes
        + i32(FETCH_MAX_BYTES)  # MaxBytes
        + i8(0)  # IsolationLevel
        + i32(0)  # SessionId
        + i32(-1)  # SessionEpoch
        + topics(partition, TOPIC_ID)
        + compact_array([])  # ForgottenTopicsData
        + compact_string("")  # RackId
        + tags({0: compact_string("cid"), 1: replica_state})  # ClusterId, ReplicaState
    )
    expected = sized(request_header(1, 17, 14, CLIENT) + body)
    assert encode_request(request, destination=1, cluster_id="cid") == expected


def test_an_uncounted_fetch_leaves_replica_state_out() -> None:
    """Replica -1 (and epoch -1) is ReplicaState's default: Kafka omits a tagged field then."""
    request = FetchRequest(
        correlation_id=14,
        replica_id=-1,
        current_leader_epoch=7,
        fetch_offset=120,
        last_fetched_epoch=6,
        max_wait_ms=500,
    )
    frame = encode_request(request, destination=1, cluster_id="cid")
    assert frame.endswith(tags({0: compact_string("cid")}))  # ClusterId only
    inbound = decode_request(frame[4:])
    assert inbound.message == request
    assert inbound.sender_id == -1


def test_fetch_response_bytes_follow_kafkas_schema() -> None:
    entries = (Entry(offset=120, epoch=7, payload=b"blk"),)
    response = FetchResponse(
        correlation_id=14,
        error_code=ErrorCode.NONE,
        high_watermark=118,
        current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=7),
        diverging_epoch=EpochEndOffset(epoch=6, end_offset=110),
        records=entries,
    )
    records = encode_entries(entries)
    partition = (
        i32(0)  # PartitionIndex
        + i16(0)  # ErrorCode
        + i64(118)  # HighWatermark
        + i64(-1)  # LastStableOffset
        + i64(-1)  # LogStartOffset
        + uvarint(0)  # AbortedTransactions: null
        + i32(-1)  # PreferredReadReplica
        + compact_bytes(records)  # Records
        + tags(
            {
                0: i32(6) + i64(110) + tags(),  # DivergingEpoch
                1: i32(1) + i32(7) + tags(),  # CurrentLeader
            }
        )
    )
    body = (
        i32(0)  # ThrottleTimeMs
        + i16(0)  # ErrorCode
        + i32(0)  # SessionId
        + topics(partition, TOPIC_ID)
        + tags()
    )
    assert encode_response(response) == sized(response_header(14) + body)
    # ... and the records are our framing of the entry.
    assert records == (
        b"mlqe"
        + i8(1)
        + i32(1)
        + struct.pack(">I", zlib.crc32(i64(120) + i32(7) + i8(0) + i32(3) + b"blk"))
        + i64(120)
        + i32(7)
        + i8(0)
        + i32(3)
        + b"blk"
    )


def test_fetch_snapshot_bytes_follow_kafkas_schema() -> None:
    request = FetchSnapshotRequest(
        correlation_id=15,
        replica_id=2,
        current_leader_epoch=7,
        snapshot_id=SnapshotId(end_offset=100, epoch=5),
        position=4096,
        max_bytes=65536,
    )
    partition = i32(0) + i32(7) + (i64(100) + i32(5) + tags()) + i64(4096) + tags()
    body = (
        i32(2)  # ReplicaId
        + i32(65536)  # MaxBytes
        + topics(partition)
        + tags({0: compact_string("cid")})  # ClusterId
    )
    expected = sized(request_header(59, 1, 15, CLIENT) + body)
    assert encode_request(request, destination=1, cluster_id="cid") == expected
    response = FetchSnapshotResponse(
        correlation_id=15,
        error_code=ErrorCode.NONE,
        snapshot_id=SnapshotId(end_offset=100, epoch=5),
        current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=7),
        size=10000,
        position=4096,
        unaligned_records=b"chunk",
    )
    partition = (
        i32(0)  # Index
        + i16(0)  # ErrorCode
        + (i64(100) + i32(5) + tags())  # SnapshotId
        + i64(10000)  # Size
        + i64(4096)  # Position
        + compact_bytes(b"chunk")  # UnalignedRecords
        + tags({0: i32(1) + i32(7) + tags()})  # CurrentLeader
    )
    body = i32(0) + i16(0) + topics(partition) + tags()
    assert encode_response(response) == sized(response_header(15) + body)


def test_describe_quorum_bytes_follow_kafkas_schema() -> None:
    request = DescribeQuorumRequest(correlation_id=16)
    body = topics(i32(0) + tags()) + tags()
    expected = sized(request_header(55, 2, 16, CLIENT) + body)
    assert encode_request(request, destination=1, cluster_id=None) == expected
    response = DescribeQuorumResponse(
        error_code=ErrorCode.NONE,
        leader_id=1,
        leader_epoch=7,
        high_watermark=118,
        current_voters=(
            ReplicaState(
                replica_id=1,
                log_end_offset=120,
                last_fetch_timestamp=-1,
                last_caught_up_timestamp=99,
            ),
        ),
        observers=(),
    )
    voter = i32(1) + ZERO_UUID + i64(120) + i64(-1) + i64(99) + tags()
    partition = (
        i32(0)  # PartitionIndex
        + i16(0)  # ErrorCode
        + compact_string(None)  # ErrorMessage (v2+)
        + i32(1)  # LeaderId
        + i32(7)  # LeaderEpoch
        + i64(118)  # HighWatermark
        + compact_array([voter])  # CurrentVoters
        + compact_array([])  # Observers
        + tags()
    )
    body = (
        i16(0)  # ErrorCode
        + compact_string(None)  # ErrorMessage (v2+)
        + topics(partition)
        + compact_array([])  # Nodes (v2+)
        + tags()
    )
    assert encode_response(response, correlation_id=16) == sized(response_header(16) + body)
    # v0 (flexible from v0 too): no directory id, no timestamps, no error messages, no nodes.
    voter = i32(1) + i64(120) + tags()
    partition = (
        i32(0)
        + i16(0)
        + i32(1)
        + i32(7)
        + i64(118)
        + compact_array([voter])
        + compact_array([])
        + tags()
    )
    body = i16(0) + topics(partition) + tags()  # ErrorCode, Topics
    assert encode_response(response, correlation_id=16, version=0) == sized(
        response_header(16) + body
    )


def u16(v: int) -> bytes:
    return struct.pack(">H", v)


DIRECTORY_ID = base64.urlsafe_b64decode(DIRECTORY + "==")
"""DIRECTORY's 16 bytes: Kafka prints a Uuid as their URL-safe base64, unpadded."""


def listener(name: str, host: str, port: int) -> bytes:
    """A Listeners entry of the KIP-853 requests: Name, Host, Port (uint16), tagged fields."""
    return compact_string(name) + compact_string(host) + u16(port) + tags()


@pytest.mark.parametrize(
    ("request_", "header", "body"),
    [
        (
            ADD_VOTER,
            request_header(80, 1, 3, CLIENT),
            compact_string("cid")  # ClusterId
            + i32(5000)  # TimeoutMs
            + i32(4)  # VoterId
            + DIRECTORY_ID  # VoterDirectoryId
            + compact_array([listener("CONTROLLER", "127.0.0.1", 9093)])  # Listeners
            + i8(0)  # AckWhenCommitted (v1+)
            + tags(),
        ),
        (
            REMOVE_VOTER,
            request_header(81, 0, 4, CLIENT),
            compact_string("cid") + i32(1) + ZERO_UUID + tags(),  # "" is the zero id
        ),
        (
            UPDATE_VOTER,
            request_header(82, 0, 5, CLIENT),
            compact_string("cid")  # ClusterId
            + i32(3)  # CurrentLeaderEpoch
            + i32(2)  # VoterId
            + DIRECTORY_ID  # VoterDirectoryId
            + compact_array([listener("CONTROLLER", "::1", 9094)])  # Listeners
            + (i16(0) + i16(1) + tags())  # KRaftVersionFeature: min, max supported
            + tags(),
        ),
    ],
    ids=["AddRaftVoter", "RemoveRaftVoter", "UpdateRaftVoter"],
)
def test_voter_change_request_bytes_follow_kafkas_schema(
    request_: Any, header: bytes, body: bytes
) -> None:
    assert encode_request(request_, destination=-1, cluster_id="cid") == sized(header + body)


def test_a_describe_quorum_answer_needs_the_correlation_id() -> None:
    response = DescribeQuorumResponse(
        error_code=ErrorCode.NONE,
        leader_id=1,
        leader_epoch=1,
        high_watermark=0,
        current_voters=(),
        observers=(),
    )
    with pytest.raises(RaftWireError, match="needs the request's correlation id"):
        encode_response(response)


# --------------------------------------------------------------------------- byte sweeps


def _every_byte_changed(frame: bytes) -> Iterator[bytes]:
    """`frame` without its size, with each byte set to 0x00, 0x7f, 0x80 and 0xff in turn."""
    body = _frame_body(frame)
    for index in range(len(body)):
        for value in (0x00, 0x7F, 0x80, 0xFF):
            changed = bytearray(body)
            changed[index] = value
            yield bytes(changed)


@pytest.mark.parametrize("message", SAMPLE_REQUESTS, ids=lambda m: type(m).__name__)
def test_every_byte_of_a_request_changed_is_refused_or_read(message: Any) -> None:
    """Each byte set to 0x00, 0x7f, 0x80 and 0xff: a ProtocolError or a request, nothing else."""
    for changed in _every_byte_changed(encode_request(message, destination=1, cluster_id="c")):
        try:
            decode_request(changed)
        except ProtocolError as exc:
            assert "\n" not in str(exc)


@pytest.mark.parametrize("message", SAMPLE_ANSWERS, ids=lambda m: type(m).__name__)
def test_every_byte_of_a_response_changed_is_refused_or_read(message: Any) -> None:
    """Each byte set to 0x00, 0x7f, 0x80 and 0xff: a RaftWireError or a message, nothing else."""
    key = api_key_of(message)
    for changed in _every_byte_changed(encode_response(message, correlation_id=7)):
        try:
            decode_response(changed, api_key=key, version=send_version(key))
        except RaftWireError as exc:
            assert "\n" not in str(exc)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_quorum_names_the_voters_listeners_in_v2(version: int) -> None:
    listeners = tuple(
        QuorumListener(node_id=i, name="CONTROLLER", host="127.0.0.1", port=9090 + i)
        for i in (1, 2, 3)
    )
    plain = DescribeQuorumResponse(
        error_code=ErrorCode.NONE,
        leader_id=2,
        leader_epoch=5,
        high_watermark=40,
        current_voters=(),
        observers=(),
    )
    described = DescribedQuorum(
        error_code=plain.error_code,
        leader_id=plain.leader_id,
        leader_epoch=plain.leader_epoch,
        high_watermark=plain.high_watermark,
        current_voters=(),
        observers=(),
        nodes=listeners,
    )
    decoded = _response_round_trip(described, version=version)
    # v0 and v1 have no `nodes`: they read as the core's message, as before.
    assert decoded == (described if version == 2 else plain)
