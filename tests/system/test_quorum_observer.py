"""An observer: a fourth `mlog serve` process whose node.id is not among the voters.

It is never formatted (only voters are), fetches the log like a follower, never votes and
never leads, answers reads from what is committed, forwards writes to the leader, and
ends with the same entries as the voters, across a leader's kill -9 and its own.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from api.client import AdminClient
from replay.controller.commands import CreatableTopic
from replay.controller.errors import ErrorCode
from tests.support.quorum_processes import (
    Node,
    Quorum,
    Writer,
    check_logs,
    converge,
    free_ports,
    mlog,
    write_until,
)

pytestmark = pytest.mark.timeout(240)

OBSERVER = 4


def _add_observer(quorum: Quorum) -> Node:
    """Node 4, configured with the voters' addresses, not formatted, not started."""
    (port,) = free_ports(1)
    voters = ",".join(f"{n.node_id}@{n.controller_address}" for n in quorum.nodes.values())
    return quorum.configure_node(OBSERVER, port, f"controller.quorum.voters={voters}")


def _describe(quorum: Quorum, via: Node) -> str:
    # DescribeQuorum is the leader's to answer: the list holds every client address, and
    # the CLI goes to the leader's (a client listener names only its own node).
    others = [n.address for n in quorum.nodes.values() if n is not via]
    return mlog("quorum", "describe", "--bootstrap-server", ",".join([via.address, *others]))


async def test_an_observer_follows_answers_reads_and_never_votes(quorum: Quorum) -> None:
    # Formatted as Kafka formats every node: the cluster's id, no quorum-state (no vote).
    observer = _add_observer(quorum)
    told = quorum.format(observer)
    assert "observer node 4" in told
    writer = Writer(quorum)
    try:
        await write_until(writer, 10)
        quorum.start(OBSERVER)  # joins late: catches up from the log's start
        await write_until(writer, 10)
        await converge(quorum, writer)
        leader = await quorum.leader()
        # The leader lists it among the observers, caught up (lag 0) once its next fetch has
        # told the leader so: NodeId Role LogEndOffset Lag LastFetchMsAgo.
        deadline = time.monotonic() + 20
        while True:
            described = _describe(quorum, quorum.nodes[leader])
            replicas = described.split("\n\n")[0]  # the digests' section follows
            rows = {int(line.split()[0]): line.split() for line in replicas.splitlines()[2:]}
            if rows.get(OBSERVER, ["", "", "", ""])[3] == "0" or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert described.count("voter") == 3
        assert rows[OBSERVER][1] == "observer" and rows[OBSERVER][3] == "0", described

        # Reads through it: the committed topics; its controller listener names the leader,
        # its client listener itself (it forwards writes).
        listed = mlog("topics", "list", "--bootstrap-server", observer.address)
        for name in writer.acknowledged:
            assert name in listed
        client = await AdminClient.connect(observer.address)
        try:
            assert await quorum.controller_named_by(OBSERVER) == leader
            assert int((await client.metadata([])).controller_id) == OBSERVER
            # A write sent to it is forwarded to the leader (KIP-590): answered there.
            (result,) = await client.create_topics([CreatableTopic(name="to-observer")])
            assert result.outcome.error_code == ErrorCode.NONE, result
            assert client.address == observer.address
            writer.acknowledged.append("to-observer")
        finally:
            await client.close()
        # The CLI's writes through the observer land on the leader.
        mlog("topics", "create", "--topic", "via-observer", "--bootstrap-server", observer.address)
        writer.acknowledged.append("via-observer")

        # The leader dies: the two voters left elect one of themselves, never the observer.
        quorum.kill(leader)
        await write_until(writer, 5)
        new_leader = await quorum.leader()
        assert new_leader not in (leader, OBSERVER)
        # The observer dies and comes back: it catches up again from its own log's end.
        quorum.kill(OBSERVER)
        await write_until(writer, 5)
        quorum.start(OBSERVER)
        quorum.start(leader)
        await converge(quorum, writer)
        assert f"LeaderId: {new_leader}" in _describe(quorum, observer)
        # Its log as a reader sees it: committed entries only, the same as a voter's.
        dumped = mlog("log", "dump", "--bootstrap-server", observer.address)
        assert "via-observer" in dumped
    finally:
        await writer.close()
    quorum.stop_all()
    summary = check_logs(quorum, writer.acknowledged)
    assert {node_id for node_id, _, _ in summary} == {1, 2, 3, OBSERVER}
