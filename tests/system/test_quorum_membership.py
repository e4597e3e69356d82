"""Dynamic membership (KIP-853) with real `mlog serve` processes and the operator's commands.

Three controllers formatted with `--initial-controllers` take writes; a fourth, formatted
with `--no-initial-controllers` and started with `controller.quorum.bootstrap.servers`,
catches up as an observer and is added with `mlog quorum add-controller`; voter 1 is removed
with `mlog quorum remove-controller` and stopped; then the leader is killed with kill -9 and
the writes resume among {2, 3, 4}. Every acknowledged write is in every voter's log, the
voters' logs are identical, and node 1's log is a prefix of theirs.

A static quorum (`controller.quorum.voters`, formatted as the README's recipe does) is made
dynamic in place with `mlog features upgrade --feature kraft.version=1`, then grows and
shrinks the same way while a writer keeps writing; every node's log ends identical.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from api.cli.serve import directory_id
from api.client import AdminClient
from metadata_log.reader import LogReader
from records.model import FeatureLevelRecord, KRaftVersionRecord, VotersRecord
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


async def _add_controller(quorum: Quorum, node: Node, timeout: float = 30.0) -> None:
    """`mlog quorum add-controller` once the new node caught up (again if refused meanwhile).

    A leader change while it is answered gives REQUEST_TIMED_OUT ("it may or may not have been
    applied: look, then retry"): a retry that finds the node a voter already is done.
    """
    await _caught_up(quorum, node.node_id)
    deadline = time.monotonic() + timeout
    timed_out = False
    while True:
        running = next(n for n in quorum.nodes.values() if n.running and n is not node)
        try:
            added = mlog(
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
            assert f"added controller {node.node_id}" in added
            return
        except AssertionError as exc:
            if timed_out and "DUPLICATE_VOTER" in str(exc):
                return  # the attempt that timed out was applied
            # REQUEST_TIMED_OUT: not caught up yet (or a leader change under way).
            if time.monotonic() > deadline:
                raise
            assert "REQUEST_TIMED_OUT" in str(exc) or "NOT_LEADER" in str(exc), exc
            timed_out = timed_out or "REQUEST_TIMED_OUT" in str(exc)
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
        await _add_controller(quorum, new)
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


async def _mlog(*args: str, timeout: float = 60.0) -> str:
    """`mlog ARGS` off the event loop (the writer goes on), retried while the leader moves."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await asyncio.to_thread(mlog, *args)
        except AssertionError as exc:
            transient = ("NOT_CONTROLLER", "NOT_LEADER", "REQUEST_TIMED_OUT", "not committed")
            if time.monotonic() > deadline or not any(t in str(exc) for t in transient):
                raise
            await asyncio.sleep(0.3)


async def _write_meanwhile(writer: Writer, stop: asyncio.Event, most: int = 5000) -> None:
    """Write until told to stop, `most` attempts or 200 s, whichever comes first."""
    deadline = time.monotonic() + 200
    while not stop.is_set() and writer.attempts < most and time.monotonic() < deadline:
        if not await writer.write_one():
            await asyncio.sleep(0.05)


async def _more_writes(writer: Writer, count: int, timeout: float = 60.0) -> None:
    """Wait until the background writer had `count` more writes acknowledged."""
    target = len(writer.acknowledged) + count
    deadline = time.monotonic() + timeout
    while len(writer.acknowledged) < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(writer.acknowledged)} of {target} writes acknowledged")
        await asyncio.sleep(0.05)


def _finalized(node: Node) -> dict[str, int]:
    """`mlog features describe` at `node`: each feature's finalized level."""
    items: list[dict[str, Any]] = json.loads(
        mlog("--output", "json", "features", "describe", "--bootstrap-server", node.address)
    )
    return {item["feature"]: item["finalized_level"] for item in items}


async def test_a_static_quorum_made_dynamic_in_place_grows_and_shrinks_under_writes(
    tmp_path: Path,
) -> None:
    quorum = Quorum(tmp_path, timers=dict(TIMERS))  # static: controller.quorum.voters
    quorum.start_all()
    writer = Writer(quorum)
    stop = asyncio.Event()
    writing: asyncio.Task[None] | None = None
    command_config = str(quorum.controller_command_config())
    try:
        await quorum.register_brokers()
        await write_until(writer, 5)
        writing = asyncio.create_task(_write_meanwhile(writer, stop))

        refused = await asyncio.to_thread(
            _refused,
            "quorum",
            "remove-controller",
            "--controller-id",
            "1",
            "--bootstrap-server",
            quorum.nodes[2].controller_address,
            "--command-config",
            command_config,
        )
        assert "kraft.version=1" in refused, refused  # says how to make it dynamic
        upgraded = await _mlog(
            "features",
            "upgrade",
            "--feature",
            "kraft.version=1",
            "--bootstrap-server",
            quorum.nodes[1].address,
        )
        assert "kraft.version upgraded to level 1" in upgraded
        await _more_writes(writer, 5)

        new = quorum.add_node(4)
        quorum.start(4)
        await _caught_up(quorum, 4, timeout=60.0)
        added = await _mlog(
            "quorum",
            "add-controller",
            "--config",
            str(new.config),
            "--data-dir",
            str(new.data_dir),
            "--bootstrap-server",
            quorum.nodes[2].controller_address,
            "--command-config",
            command_config,
        )
        assert "added controller 4" in added
        await _more_writes(writer, 5)
        removed = await _mlog(
            "quorum",
            "remove-controller",
            "--controller-id",
            "1",
            "--bootstrap-server",
            quorum.nodes[2].controller_address,
            "--command-config",
            command_config,
        )
        assert "removed controller 1" in removed
        await _more_writes(writer, 5)
        stop.set()
        await writing
        assert await _voter_ids(quorum, quorum.nodes[2]) == {2, 3, 4}
        assert (await asyncio.to_thread(_finalized, quorum.nodes[3]))["kraft.version"] == 1
        await converge(quorum, writer)  # node 1 too: removed, it observes
        # Stopped first, as an operator stops a removed controller: the voters' shutdown may
        # still append a leader's marker it never fetches.
        quorum.kill(1, signal.SIGTERM)
    finally:
        stop.set()
        if writing is not None:
            await writing
        await writer.close()
        quorum.stop_all()
    # Every acknowledged write in every node's log, entries identical at every offset.
    summary = check_logs(quorum, writer.acknowledged)
    assert len(summary) == 4
    lengths = {node_id: length for node_id, length, _ in summary}
    assert lengths[2] == lengths[3] == lengths[4], summary  # the voters' logs are identical
    assert lengths[1] <= lengths[2], summary  # node 1's is theirs, up to its stop
    # Every log holds the upgrade's block (the level, then the static voters 1-3), then one
    # VotersRecord per change.
    entries = [record for *_, record in _entries(quorum.nodes[2])]
    upgrade = next(i for i, r in enumerate(entries) if isinstance(r, KRaftVersionRecord))
    assert entries[upgrade + 1] == FeatureLevelRecord(name="kraft.version", feature_level=1)
    sets = [[v.voter_id for v in r.voters] for r in entries if isinstance(r, VotersRecord)]
    assert sets == [[1, 2, 3], [1, 2, 3, 4], [2, 3, 4]]
    static = entries[upgrade + 2]
    assert isinstance(static, VotersRecord)
    ports = {v.voter_id: (v.port, v.voter_directory_id) for v in static.voters}
    assert ports == {
        i: (quorum.nodes[i].controller_port, directory_id(quorum.nodes[i].data_dir))
        for i in (1, 2, 3)
    }
    assert all(directory for _, directory in ports.values())  # each format made one


def _refused(*args: str) -> str:
    """The one-line refusal of `mlog ARGS` (it must fail)."""
    try:
        out = mlog(*args)
    except AssertionError as exc:
        return str(exc)
    raise AssertionError(f"mlog {' '.join(args)} was not refused: {out}")
