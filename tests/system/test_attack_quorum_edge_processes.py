"""Issue 54, findings 1-2 on the 3-node quorum as the docs set it up (real `mlog serve`s).

Each node has a client listener and an mTLS CONTROLLER listener (`quorum_processes.py`). Every
attack (Vote and BeginQuorumEpoch at 2**31-1 and 10**9 as if from another voter, Fetch from
0, FetchSnapshot, an Envelope naming User:admin) is sent to every node: anonymously on its
client listener, and on its controller listener with no certificate, a certificate of
another CA, and the controllers' CA's certificate under another name. Afterwards every node
still runs, the leader and its epoch are the same, no entry was written, and writes through
every node's client listener work, each entry naming the principal that authenticated.
"""

from __future__ import annotations

import asyncio
import ssl

from api.client import AdminClient
from api.protocol.quorum.errors import CLUSTER_AUTHORIZATION_FAILED
from metadata_log.reader import LogReader
from replay.controller.commands import CreatableTopic
from tests.support.controller_certs import ControllerPki
from tests.support.quorum_attacks import (
    FORGED_TOPIC,
    attack_frames,
    exchange,
    refusal_code,
    tls_context,
)
from tests.support.quorum_processes import CLUSTER_ID, Quorum, logs_converge


async def _leader_and_epoch(quorum: Quorum) -> tuple[int, int]:
    leader = await quorum.leader()
    assert quorum.pki is not None
    client = await AdminClient.connect(
        quorum.nodes[leader].controller_address, security=quorum.pki.controller_client()
    )
    try:
        described = await client.describe_quorum()
    finally:
        await client.close()
    return leader, int(described.leader_epoch)


def _entries(quorum: Quorum) -> dict[int, list[tuple[int, str | None, object]]]:
    out: dict[int, list[tuple[int, str | None, object]]] = {}
    for node in quorum.nodes.values():
        with LogReader.open(node.data_dir / "log") as log:
            out[node.node_id] = [(e.offset, e.principal, e.record) for e in log.read()]
    return out


async def test_no_attack_from_outside_the_controllers_reaches_the_quorum(quorum: Quorum) -> None:
    pki = quorum.pki
    assert isinstance(pki, ControllerPki)
    await quorum.serving()
    before = await _leader_and_epoch(quorum)
    await logs_converge(quorum)
    entries = _entries(quorum)
    outsiders = {
        "no certificate": tls_context(str(pki.ca)),
        "another CA": tls_context(str(pki.ca), str(pki.other_ca_cert), verify=False),
        "another name": tls_context(str(pki.ca), str(pki.other_name_cert)),
    }
    for node in quorum.nodes.values():
        sender = 1 + node.node_id % 3  # another voter's id: what a real peer would send
        frames = attack_frames(cluster_id=CLUSTER_ID, destination=node.node_id, sender=sender)
        for name, frame in frames.items():
            (answer,) = await exchange(node.port, [frame])
            assert answer is None, f"node {node.node_id}'s client listener answered {name}"
            for who, context in outsiders.items():
                try:
                    (answer,) = await exchange(node.controller_port, [frame], context=context)
                except (ssl.SSLError, ConnectionError):
                    continue  # the handshake itself was refused
                if answer is None:
                    continue  # the connection was closed after the handshake
                code = refusal_code(name, answer)
                assert code == CLUSTER_AUTHORIZATION_FAILED, (node.node_id, name, who, code)
    await asyncio.sleep(2)  # an election a forged Vote had started would show by now
    assert all(node.running for node in quorum.nodes.values()), quorum.stderr_tails()
    assert await _leader_and_epoch(quorum) == before
    assert _entries(quorum) == entries
    # Writes through every node's client listener still work, under the writer's own name.
    for node in quorum.nodes.values():
        client = await AdminClient.connect_controller(node.address, timeout_ms=10_000)
        try:
            (result,) = await client.create_topics([CreatableTopic(name=f"via-{node.node_id}")])
        finally:
            await client.close()
        assert result.outcome.error_code == 0, result
    await logs_converge(quorum)
    for log in _entries(quorum).values():
        names = {getattr(record, "name", None): principal for _, principal, record in log}
        assert FORGED_TOPIC not in names
        for node_id in quorum.nodes:
            assert names[f"via-{node_id}"] == "User:ANONYMOUS"
