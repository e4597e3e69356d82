"""Clean shutdowns of a quorum's nodes (SIGTERM) leave identical logs and end at once.

A stopping node stops voting and, if it leads, hands over (EndQuorumEpoch) only while a
successor can be elected without it. Before (issue 36, finding 4), the last nodes of a
shutdown elected each other on their way out and appended LeaderChange markers that never
committed (logs of different lengths), and the last leader waited 3 s for a successor.
How long each node takes to stop is a figure of `bench/quorum_stop_bench.py stop`; here a stop
only has to end (a node that waited for a successor forever would not).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.support.quorum_processes import (
    TIMERS,
    Quorum,
    Writer,
    check_logs,
    converge,
    write_until,
)

pytestmark = pytest.mark.timeout(240)

STOP_WAIT_S = 60.0
"""How long a SIGTERM'd node may take to end before the stop counts as hung."""


def _stop(quorum: Quorum, node_id: int) -> float:
    """SIGTERM node `node_id`; seconds until its process ended."""
    started = time.monotonic()
    quorum.kill(node_id, signal.SIGTERM)
    seconds = time.monotonic() - started
    assert seconds < STOP_WAIT_S, f"node {node_id} took {seconds:.1f} s to stop"
    return seconds


def _same_length(summary: list[tuple[int, int, int]]) -> None:
    lengths = {node_id: length for node_id, length, _ in summary}
    assert len(set(lengths.values())) == 1, f"log lengths differ: {lengths}"


async def test_a_rolling_restart_leaves_identical_logs(quorum: Quorum) -> None:
    writer = Writer(quorum)
    try:
        await write_until(writer, 10)
        # The leader last: two handovers on the way.
        leader = await quorum.leader()
        order = [i for i in quorum.nodes if i != leader] + [leader]
        for node_id in order:
            _stop(quorum, node_id)
            await write_until(writer, 5)  # the two others go on
            quorum.start(node_id)
            await write_until(writer, 5)
        await converge(quorum, writer)
        leader = await quorum.leader()
    finally:
        await writer.close()
    # The leader last: it does not wait a handover for the voters that stopped a moment
    # before (they fetched within the fetch timeout, and their links went down after it).
    order = [i for i in quorum.nodes if i != leader] + [leader]
    stopped = [_stop(quorum, node_id) for node_id in order]
    summary = check_logs(quorum, writer.acknowledged)
    _same_length(summary)
    print(f"rolling restart, then stop: {summary}; seconds to stop each: {stopped}")


async def test_stopping_every_node_in_turn_leaves_identical_logs(tmp_path: Path) -> None:
    quorum = Quorum(tmp_path, timers=TIMERS)
    quorum.start_all()
    try:
        await quorum.register_brokers()
        writer = Writer(quorum)
        try:
            await write_until(writer, 20)
            await converge(quorum, writer)
        finally:
            await writer.close()
        # The leader first, then the node that took over, then the last.
        seconds: list[float] = []
        for _ in range(len(quorum.nodes)):
            running = [i for i, n in quorum.nodes.items() if n.running]
            try:
                first = await quorum.leader(timeout=5)
            except TimeoutError:
                first = running[0]  # no leader can be elected among the last ones
            seconds.append(_stop(quorum, first if first in running else running[0]))
    finally:
        quorum.stop_all()
    summary = check_logs(quorum, writer.acknowledged)
    _same_length(summary)
    print(f"stopped in turn: {summary}; seconds to stop each: {seconds}")
