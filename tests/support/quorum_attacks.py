"""The quorum-edge attacks of issue 54 as frames, and clients that send them (plain or TLS).

Each attack is one frame a peer that is not a controller might send a quorum node: Raft
requests at epochs no election could pass (2**31-1) or far ahead (10**9), a Fetch of the log
from offset 0, a FetchSnapshot, and an Envelope whose inner CreateTopics names `User:admin`
and a made-up client address. Shared by tests/api/server/test_attack_quorum_edge.py (one
in-process server) and tests/system/test_attack_quorum_edge_processes.py (the 3-node quorum
as the docs set it up).
"""

from __future__ import annotations

import asyncio
import ssl
import struct
from collections.abc import Sequence

from api.protocol import codec
from api.protocol.quorum.apis import (
    BEGIN_QUORUM_EPOCH_KEY,
    FETCH_KEY,
    FETCH_SNAPSHOT_KEY,
    REMOVE_RAFT_VOTER_KEY,
    VOTE_KEY,
    RemoveRaftVoterRequest,
    send_version,
)
from api.protocol.quorum.errors import RaftWireRefusal
from api.protocol.quorum.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchSnapshotRequest,
    SnapshotId,
    VoteRequest,
)
from api.protocol.quorum.requests import (
    encode_request,
)
from api.protocol.quorum.responses import (
    decode_response,
)
from api.server.forwarding import ENVELOPE_KEY, address_bytes

EPOCHS = (2**31 - 1, 10**9)
"""Epochs an attacker sends: the largest an int32 holds, and one far ahead of any real one."""

FORGED_PRINCIPAL = "User:admin"
"""Whom a forged Envelope names."""

FORGED_TOPIC = "payroll"
"""The topic a forged Envelope's inner CreateTopics asks for."""


def create_topic_frame(name: str) -> bytes:
    """A client's CreateTopics v7 frame (without its size), as a forwarding node would wrap it."""
    body = codec.build(
        codec.request_class(19, 7),
        topics=[
            {
                "name": name,
                "num_partitions": 1,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
        ],
        timeout=5000,
        validate_only=False,
    )
    return codec.encode_request(body, correlation_id=77, client_id="forged")[4:]


def envelope_frame(
    principal: str = FORGED_PRINCIPAL, topic: str = FORGED_TOPIC, *, inner: bytes | None = None
) -> bytes:
    """An Envelope (58) asking for `topic` (or carrying `inner`, a frame without its size) in
    `principal`'s name from a made-up address."""
    envelope = codec.build(
        codec.request_class(ENVELOPE_KEY, 0),
        request_data=create_topic_frame(topic) if inner is None else inner,
        request_principal=principal.encode(),
        client_host_address=address_bytes("203.0.113.7"),
    )
    return codec.encode_request(envelope, correlation_id=58)


def remove_voter_frame(*, cluster_id: str, destination: int, voter: int) -> bytes:
    """An operator's RemoveRaftVoter (81) of `voter`, without its size (an Envelope's inner)."""
    request = RemoveRaftVoterRequest(correlation_id=81, voter_id=voter, voter_directory_id="")
    version = send_version(REMOVE_RAFT_VOTER_KEY)
    return encode_request(request, destination=destination, cluster_id=cluster_id, version=version)[
        4:
    ]


def attack_frames(*, cluster_id: str, destination: int, sender: int) -> dict[str, bytes]:
    """Every attack, by name: as if voter `sender` wrote to node `destination`."""
    frames: dict[str, bytes] = {}
    for epoch in EPOCHS:
        vote = VoteRequest(
            correlation_id=1,
            replica_epoch=epoch,
            replica_id=sender,
            last_offset_epoch=epoch,
            last_offset=2**40,
        )
        begin = BeginQuorumEpochRequest(correlation_id=2, leader_id=sender, leader_epoch=epoch)
        frames[f"Vote@{epoch}"] = encode_request(
            vote, destination=destination, cluster_id=cluster_id
        )
        frames[f"BeginQuorumEpoch@{epoch}"] = encode_request(
            begin, destination=destination, cluster_id=cluster_id
        )
    fetch = FetchRequest(
        correlation_id=3,
        replica_id=sender,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=0,
    )
    snapshot = FetchSnapshotRequest(
        correlation_id=4,
        replica_id=sender,
        current_leader_epoch=-1,
        snapshot_id=SnapshotId(end_offset=1, epoch=0),
        position=0,
        max_bytes=1 << 20,
    )
    frames["Fetch@0"] = encode_request(fetch, destination=destination, cluster_id=cluster_id)
    frames["FetchSnapshot"] = encode_request(
        snapshot, destination=destination, cluster_id=cluster_id
    )
    frames["Envelope"] = envelope_frame()
    return frames


async def exchange(
    port: int, frames: Sequence[bytes], *, context: ssl.SSLContext | None = None
) -> list[bytes | None]:
    """Send frames on one connection (TLS with `context`); each answer, None once closed.

    A TLS handshake the server refuses raises `ssl.SSLError` or `ConnectionError`.
    """
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(
            "127.0.0.1", port, ssl=context, server_hostname="127.0.0.1" if context else None
        ),
        20,
    )
    out: list[bytes | None] = []
    try:
        for frame in frames:
            writer.write(frame)
            try:
                (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 20))
                out.append(await asyncio.wait_for(reader.readexactly(size), 20))
            except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                out.append(None)
    finally:
        writer.close()
    return out


def refusal_code(name: str, answer: bytes) -> int:
    """The error code of the answer to attack `name` (0: it was answered as asked)."""
    if name == "Envelope":
        _, body = codec.decode_response(ENVELOPE_KEY, 0, answer)
        return int(body.error_code)
    key = _ATTACK_KEYS[name.split("@", maxsplit=1)[0]]
    try:
        message = decode_response(answer, api_key=key, version=send_version(key))
    except RaftWireRefusal as exc:
        return int(exc.error_code)
    return int(getattr(message, "error_code", 0))


def inner_refusal_code(answer: bytes, api_key: int) -> int:
    """The error code of the quorum request (`api_key`) an Envelope answered inside itself."""
    _, body = codec.decode_response(ENVELOPE_KEY, 0, answer)
    if int(body.error_code) != 0:
        raise AssertionError(f"the Envelope itself was refused ({int(body.error_code)})")
    data = bytes(body.response_data)
    try:
        message = decode_response(data, api_key=api_key, version=send_version(api_key))
    except RaftWireRefusal as exc:
        return int(exc.error_code)
    return int(getattr(message, "error_code", 0))


_ATTACK_KEYS = {
    "Vote": VOTE_KEY,
    "BeginQuorumEpoch": BEGIN_QUORUM_EPOCH_KEY,
    "Fetch": FETCH_KEY,
    "FetchSnapshot": FETCH_SNAPSHOT_KEY,
}


def tls_context(ca: str, keystore: str | None = None, *, verify: bool = True) -> ssl.SSLContext:
    """A TLS client context trusting `ca`, presenting `keystore` (a PEM key and chain)."""
    context = ssl.create_default_context(cafile=ca)
    if not verify:
        context.check_hostname = False
    if keystore is not None:
        context.load_cert_chain(keystore)
    return context
