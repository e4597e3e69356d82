"""Dynamic membership (KIP-853) with real `mlog serve` processes and the operator's commands.

Three controllers formatted with `--initial-controllers` take writes; a fourth, formatted
with `--no-initial-controllers` and started with `controller.quorum.bootstrap.servers`,
catches up as an observer and is added with `mlog quorum add-controller`; voter 1 is removed
with `mlog quorum remove-controller` and stopped; then the leader is killed with kill -9 and
the writes resume among {2, 3, 4}. Every acknowledged write is in every voter's log, the
voters' logs are identical, and node 1's log is a prefix of theirs.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import pytest

from api.client import AdminClient
from metadata_log.reader import LogReader
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

pytestmark = pytest.mark.timeout(240)


def _describe(quorum: Quorum, node: Node) -> dict[str, object]:
    """`mlog quorum describe` at `node`'s controller listener, as a controller (an operator's
    tool reaches the leader there: docs/security.md "The quorum's trust boundary")."""
    answer: dict[str, object] = json.loads(
        mlog(
            "--output",
            "json",
            "quorum",
            "describe",
            "--bootstrap-server",
            node.controller_address,
            "--command-config",
            str(quorum.controller_command_config()),
        )
    )
    return answer


async def _voter_ids(quorum: Quorum, node: Node) -> set[int]:
    """The voters the leader names (DescribeQuorum through `node`'s controller listener)."""
    assert quorum.pki is not None
    client = await AdminClient.connect_controller(
        node.controller_address, timeout_ms=5000, security=quorum.pki.controller_client()
    )
    try:
        answer = await client.describe_quorum()
    finally:
        await client.close()
    return {r.replica_id for r in answer.current_voters}


async def _caught_up(quorum: Quorum, node_id: int, timeout: float = 30.0) -> None:
    """Wait until the leader lists `node_id` as an observer with no lag."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            assert quorum.pki is not None
            client = await AdminClient.connect_controller(
                quorum.nodes[2].controller_address,
                timeout_ms=5000,
                security=quorum.pki.controller_client(),
            )
            try:
                answer = await client.describe_quorum()
            finally:
                await client.close()
        except Exception:
            answer = None
        if answer is not None:
            end = max(r.log_end_offset for r in answer.current_voters)
            if any(r.replica_id == node_id and r.log_end_offset >= end for r in answer.observers):
                return
        await asyncio.sleep(0.2)
    raise TimeoutError(f"node {node_id} did not catch up: {quorum.stderr_tails()}")


async def _add_controller(quorum: Quorum, node: Node, timeout: float = 30.0) -> str:
    """`mlog quorum add-controller` once the new node caught up (again if refused meanwhile)."""
    await _caught_up(quorum, node.node_id)
    deadline = time.monotonic() + timeout
    while True:
        running = next(n for n in quorum.nodes.values() if n.running and n is not node)
        try:
            return mlog(
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
        except AssertionError as exc:
            # REQUEST_TIMED_OUT: not caught up yet (or a leader change under way).
            if time.monotonic() > deadline:
                raise
            assert "REQUEST_TIMED_OUT" in str(exc) or "NOT_LEADER" in str(exc), exc
            await asyncio.sleep(0.3)


def _entries(node: Node) -> list[tuple[int, int, int, str | None, object]]:
    with LogReader.open(node.data_dir / "log") as log:
        return [(e.offset, e.epoch, e.timestamp, e.principal, e.record) for e in log.read()]


async def test_add_a_controller_remove_one_and_survive_the_leaders_kill(tmp_path: Path) -> None:
    quorum = Quorum(tmp_path, timers=dict(TIMERS), dynamic=True)
    quorum.start_all()
    writer = Writer(quorum)
    try:
        await quorum.register_brokers()
        await write_until(writer, 10)
        voters = _describe(quorum, quorum.nodes[1])["voters"]
        assert isinstance(voters, list)
        assert {v["replica_id"]: v["directory_id"] for v in voters} == dict(
            zip((1, 2, 3), DIRECTORY_IDS[:3], strict=False)
        )

        new = quorum.add_node(4)
        quorum.start(4)
        added = await _add_controller(quorum, new)
        assert "added controller 4" in added
        await write_until(writer, 10)
        assert await _voter_ids(quorum, quorum.nodes[4]) == {1, 2, 3, 4}

        removed = mlog(
            "quorum",
            "remove-controller",
            "--controller-id",
            "1",
            "--controller-directory-id",
            DIRECTORY_IDS[0],
            "--bootstrap-server",
            quorum.nodes[2].controller_address,
            "--command-config",
            str(quorum.controller_command_config()),
        )
        assert "removed controller 1" in removed
        await write_until(writer, 10)
        quorum.kill(1, signal.SIGTERM)
        first = quorum.nodes.pop(1)  # no longer a voter: the rest goes on without it

        leader = await quorum.leader()
        assert leader in (2, 3, 4)
        quorum.kill(leader)  # kill -9
        await write_until(writer, 10)  # two of the three voters {2, 3, 4}: a majority
        assert await quorum.leader() in {2, 3, 4} - {leader}
        quorum.start(leader)
        await converge(quorum, writer)
        assert await _voter_ids(quorum, quorum.nodes[2]) == {2, 3, 4}
    finally:
        await writer.close()
        quorum.stop_all()
    summary = check_logs(quorum, writer.acknowledged)
    assert len({length for _, length, _ in summary}) == 1, summary  # identical logs
    reference = _entries(quorum.nodes[2])
    removed_log = _entries(first)
    assert removed_log == reference[: len(removed_log)]
