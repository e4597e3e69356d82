"""A follower below the leader's log start catches up by FetchSnapshot: three `mlog serve`.

Node F stops; the others write on, snapshot by their policy (committed images only), and each
in turn stops, `mlog log trim --before-snapshot` and restarts (the quorum pauses while one of
the two is down: F is down too). F comes back below every log start: it copies the leader's
snapshot, installs it, starts its log after it, answers `topics list` like the leader and
follows new writes, holding the same hash chain digest as the others (the snapshot carried the
leader's chain state). Every offset all three logs still hold is identical on all three.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest

from metadata_log.reader import LogReader
from tests.support.quorum_processes import Quorum, Writer, converge, mlog, write_until

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def quorum_env() -> dict[str, str]:
    # Small segments, so that a trim removes some (the processes inherit the environment).
    return {"MLOG_SEGMENT_BYTES": "16384"}


def _log_start(quorum: Quorum, node_id: int) -> tuple[int, int]:
    path = quorum.nodes[node_id].data_dir / "log"
    with LogReader.open(path) as log:
        return log.log_start_offset, log.end_offset


def _entries(quorum: Quorum, node_id: int) -> dict[int, tuple[object, ...]]:
    path = quorum.nodes[node_id].data_dir / "log"
    with LogReader.open(path) as log:
        return {e.offset: (e.epoch, e.timestamp, e.principal, e.record) for e in log.read()}


def _topics(address: str) -> list[tuple[str, str]]:
    """(qualified name, topic id) of every topic, as the node at `address` answers."""
    listed = json.loads(mlog("topics", "list", "--output", "json", "--bootstrap-server", address))
    return sorted((t["topic"], t["topic_id"]) for t in listed)


async def _same_topics(follower: str, leader: str, timeout: float = 20.0) -> list[tuple[str, str]]:
    """The leader's topics, once the follower answers the same.

    A follower applies entries up to the high watermark it last heard: its logs' ends being
    equal, it may still learn the last entry's commit one fetch later.
    """
    deadline = time.monotonic() + timeout
    while True:
        expected = _topics(leader)
        seen = _topics(follower)
        if seen == expected:
            return expected
        if time.monotonic() > deadline:
            raise AssertionError(f"the follower answers {seen}, the leader {expected}")
        await asyncio.sleep(0.2)


def test_a_lagging_follower_catches_up_by_fetch_snapshot(quorum: Quorum) -> None:
    asyncio.run(_scenario(quorum))


async def _scenario(quorum: Quorum) -> None:
    writer = Writer(quorum)
    try:
        await write_until(writer, 3)
        leader = await quorum.leader()
        mlog(
            "configs",
            "alter",
            "--cluster",
            "--set",
            "metadata.log.max.record.bytes.between.snapshots=4096",
            "--bootstrap-server",
            quorum.nodes[leader].address,
        )
        lagging = next(i for i in quorum.nodes if i != leader)
        quorum.kill(lagging)
        _, lagging_end = _log_start(quorum, lagging)
        await write_until(writer, 120)
        for node_id in [i for i in quorum.nodes if i != lagging]:
            await write_until(writer, 2)
            quorum.kill(node_id, signal.SIGTERM)
            trimmed = mlog(
                "log",
                "trim",
                "--before-snapshot",
                "--data-dir",
                str(quorum.nodes[node_id].data_dir),
            )
            assert "now starts at offset" in trimmed, trimmed
            quorum.start(node_id)
            await quorum.leader()
        await write_until(writer, 2)
        starts = [_log_start(quorum, i)[0] for i in quorum.nodes if i != lagging]
        assert min(starts) > lagging_end, (starts, lagging_end)
        quorum.start(lagging)
        await converge(quorum, writer)
        node = quorum.nodes[lagging]
        # The server's lines reach stderr through a writer thread, up to 20 ms late (or more
        # on a loaded host): wait for the line rather than read the file once.
        deadline = time.monotonic() + 20
        while "installed the leader's snapshot" not in node.stderr.read_text():
            assert time.monotonic() < deadline, quorum.stderr_tails()
            await asyncio.sleep(0.1)
        start, _ = _log_start(quorum, lagging)
        assert start > lagging_end
        leader = await quorum.leader()
        expected = await _same_topics(node.address, quorum.nodes[leader].address)
        names = {name.rpartition(".")[2] for name, _ in expected}
        assert set(writer.acknowledged) <= names
        await write_until(writer, 5)
        await converge(quorum, writer)
        leader = await quorum.leader()
        await _same_topics(node.address, quorum.nodes[leader].address)
        # The snapshot carried the leader's hash chain: every node, the one that installed it
        # too, holds the same digest at the same offset (DescribeLogDigest, through describe).
        described = json.loads(
            mlog(
                "quorum",
                "describe",
                "--output",
                "json",
                "--bootstrap-server",
                ",".join(n.address for n in sorted(quorum.nodes.values(), key=lambda n: n != node)),
            )
        )
        digests = described["digests"]["nodes"]
        assert len(digests) == 3 and all(d["problem"] is None for d in digests), digests
        assert len({(d["offset"], d["chain"]) for d in digests}) == 1, digests
        assert described["digests"]["offset"] >= start
    finally:
        await writer.close()
    quorum.stop_all()
    logs = {i: _entries(quorum, i) for i in quorum.nodes}
    common = set.intersection(*(set(entries) for entries in logs.values()))
    assert len(common) >= 5
    for offset in common:
        assert len({repr(logs[i][offset]) for i in logs}) == 1, offset
