"""A wiped node catches up and votes again while a writer keeps writing (issue 54, finding 8).

Three `mlog serve` processes; topics created one request each (one small block per topic:
the log shape whose 1 MiB fetch answers, thousands of blocks, a follower decoded in time
quadratic in them, 3.4 s for 8,000, against a 2 s request timeout; the issue's repro is
4,000). Then, with one writer writing all along, a follower is taken out, its data directory
wiped and formatted anew, and it is started again:

- a dynamic quorum (KIP-853): `remove-controller`, `format --no-initial-controllers`, start
  (it fetches as an observer), `add-controller` once `quorum describe` shows it caught up;
- a static quorum: `format --rejoin`, start (it fetches without its id until it has caught
  up, then writes its quorum-state and votes).

The node must catch up and be a voter again within a generous deadline; the time it took is
printed (the figure the issue asks for is 30 s).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from api.cli.serve import directory_id
from api.client import AdminClient
from api.raft.quorum_state_file import QUORUM_STATE_NAME
from tests.support.quorum_processes import (
    DIRECTORY_IDS,
    TIMERS,
    Node,
    Quorum,
    Writer,
    check_logs,
    converge,
    mlog,
    write_until,
)

pytestmark = [pytest.mark.process, pytest.mark.timeout(600)]

TOPICS = int(os.environ.get("MLOG_CATCH_UP_TOPICS", "1000"))
"""Single-topic create requests before the wipe of the dynamic quorum's node, the test of the
log's size. The issue's repro is 4,000 (about 70 s of creates on a loaded 2-core host):
`MLOG_CATCH_UP_TOPICS=4000` runs it; `make test` runs 1,000, the same shape (one small block
per topic) in a quarter of the time."""

STATIC_TOPICS = max(1, TOPICS // 4)
"""The static quorum's creates: its rejoin (`format --rejoin`) is the path under test, the
fetch answers' decoding of many blocks is the same code as the dynamic quorum's, whose log is
the size one."""

DEADLINE_S = 120.0
"""How long the wiped node may take to catch up and vote (the issue's figure is 30 s)."""


async def _keep_writing(writer: Writer, stop: asyncio.Event, *, most: float = 600.0) -> None:
    """Write one topic at a time until `stop` is set (or `most` seconds pass)."""
    deadline = time.monotonic() + most
    while not stop.is_set() and time.monotonic() < deadline:
        if not await writer.write_one():
            await asyncio.sleep(0.05)
        await asyncio.sleep(0)


async def _describe(quorum: Quorum, exclude: int) -> Any:
    """DescribeQuorum through a running node other than `exclude` (None if none answers)."""
    for node in quorum.nodes.values():
        if node.node_id == exclude or not node.running:
            continue
        try:
            client = await AdminClient.connect_controller(node.address, timeout_ms=5000)
            try:
                return await asyncio.wait_for(client.describe_quorum(), 10)
            finally:
                await client.close()
        except Exception:
            continue
    return None


async def _caught_up(quorum: Quorum, node: Node, since_ms: int, deadline: float) -> None:
    """Wait until describe shows `node`'s new incarnation at the high watermark or past it.

    The new incarnation is the one with the directory id it was formatted with (where it has
    one) that fetched after `since_ms` (wall clock): never the old one's row.
    """
    directory = directory_id(node.data_dir)
    while time.monotonic() < deadline:
        answer = await _describe(quorum, node.node_id)
        if answer is not None:
            for replica in (*answer.current_voters, *answer.observers):
                if (
                    replica.replica_id == node.node_id
                    and replica.directory_id == directory
                    and replica.last_fetch_timestamp >= since_ms
                    and replica.log_end_offset >= max(answer.high_watermark, 1)
                ):
                    return
        await asyncio.sleep(0.5)
    raise TimeoutError(f"node {node.node_id} did not catch up in time: {quorum.stderr_tails()}")


async def _add_controller(quorum: Quorum, node: Node, deadline: float) -> None:
    """`mlog quorum add-controller` for `node`, again while the leader says not caught up."""
    while True:
        running = next(n for n in quorum.nodes.values() if n.running and n is not node)
        try:
            mlog(
                "quorum",
                "add-controller",
                "--config",
                str(node.config),
                "--data-dir",
                str(node.data_dir),
                "--bootstrap-server",
                running.controller_address,
                "--command-config",
                str(quorum.controller_command_config()),
            )
            return
        except AssertionError as exc:
            if time.monotonic() > deadline:
                raise
            assert "REQUEST_TIMED_OUT" in str(exc) or "NOT_LEADER" in str(exc), exc
            await asyncio.sleep(0.5)


async def _voter_again(quorum: Quorum, node: Node, deadline: float) -> None:
    """Wait until the leader lists `node` as a voter and it wrote its quorum-state."""
    while time.monotonic() < deadline:
        answer = await _describe(quorum, node.node_id)
        voters = set() if answer is None else {r.replica_id for r in answer.current_voters}
        if node.node_id in voters and (node.data_dir / QUORUM_STATE_NAME).exists():
            return
        await asyncio.sleep(0.5)
    raise TimeoutError(f"node {node.node_id} is not a voter again: {quorum.stderr_tails()}")


async def _wipe_and_rejoin(tmp_path: Path, *, dynamic: bool, topics: int) -> None:
    quorum = Quorum(tmp_path, timers=dict(TIMERS), dynamic=dynamic)
    quorum.start_all()
    writer = Writer(quorum, prefix="steady")
    filler = Writer(quorum, prefix="t")
    stop = asyncio.Event()
    background: asyncio.Task[None] | None = None
    try:
        await quorum.register_brokers()
        started = time.monotonic()
        await write_until(filler, topics, timeout=600)
        await filler.close()
        print(f"\n{topics} single-topic creates in {time.monotonic() - started:.1f} s")
        leader = await quorum.leader()
        wiped = quorum.nodes[next(i for i in sorted(quorum.nodes) if i != leader)]
        background = asyncio.create_task(_keep_writing(writer, stop))
        if dynamic:
            mlog(
                "quorum",
                "remove-controller",
                "--controller-id",
                str(wiped.node_id),
                "--controller-directory-id",
                DIRECTORY_IDS[wiped.node_id - 1],
                "--bootstrap-server",
                quorum.nodes[leader].controller_address,
                "--command-config",
                str(quorum.controller_command_config()),
            )
        quorum.kill(wiped.node_id, signal.SIGTERM)
        shutil.rmtree(wiped.data_dir)
        if dynamic:
            quorum.format(wiped, "--no-initial-controllers")
        else:
            quorum.format(wiped, "--rejoin")
        acknowledged = len(writer.acknowledged)
        began = time.monotonic()
        deadline = began + DEADLINE_S
        since_ms = time.time_ns() // 1_000_000
        quorum.start(wiped.node_id)
        await _caught_up(quorum, wiped, since_ms, deadline)
        caught_up = time.monotonic() - began
        if dynamic:
            await _add_controller(quorum, wiped, deadline)
        await _voter_again(quorum, wiped, deadline)
        voter = time.monotonic() - began
        written = len(writer.acknowledged) - acknowledged
        kind = "dynamic" if dynamic else "static"
        print(
            f"{kind} quorum: node {wiped.node_id} caught up in {caught_up:.1f} s and was a "
            f"voter again in {voter:.1f} s, {written} writes acknowledged meanwhile"
        )
        assert written > 0  # the writer kept writing through it
        stop.set()
        await background
        await converge(quorum, writer)
        check_logs(quorum, writer.acknowledged)
    finally:
        stop.set()
        if background is not None:
            await asyncio.gather(background, return_exceptions=True)
        await writer.close()
        await filler.close()
        quorum.stop_all()


async def test_a_wiped_controller_of_a_dynamic_quorum_catches_up_under_writes(
    tmp_path: Path,
) -> None:
    await _wipe_and_rejoin(tmp_path, dynamic=True, topics=TOPICS)


async def test_a_wiped_voter_of_a_static_quorum_rejoins_under_writes(tmp_path: Path) -> None:
    await _wipe_and_rejoin(tmp_path, dynamic=False, topics=STATIC_TOPICS)
