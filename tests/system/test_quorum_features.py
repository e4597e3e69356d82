"""Feature upgrades on a running quorum: through any node, refused while a voter lags.

Three `mlog serve` processes; node 3 first claims less than its code supports
(`MLOG_TEST_SUPPORTED_FEATURES=kraft.version=0`, as a node of an older release would). An
upgrade of kraft.version sent to a follower reaches the leader (Envelope, KIP-590), which
asks every voter's ApiVersions: refused naming voter 3 while it claims too little, and while
it is down; once it runs the full version again, the CLI's dry run through a follower
passes, the upgrade sent to a follower is made (a follower never writes itself: the leader
did) and every node shows the new level.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from api.client.connection import ClientConnection
from api.server.feature_support import SUPPORTED_FEATURES_ENV
from replay.controller.errors import ErrorCode
from tests.support.quorum_processes import PROJECT, TIMERS, Quorum

pytestmark = pytest.mark.timeout(240)


async def _upgrade_raw(address: str) -> tuple[int, str]:
    """UpdateFeatures kraft.version=1 as a Kafka client sends it: (error code, message).

    Sent again on NOT_CONTROLLER and REQUEST_TIMED_OUT (retriable for Kafka clients) while an
    election ends: a follower forwarding it to a leader that stops leading before it answers
    says it may or may not have been applied, and the upgrade is idempotent.
    """
    deadline = time.monotonic() + 30
    while True:
        async with await ClientConnection.connect(address, timeout_ms=20_000) as conn:
            answer = await conn.request(
                57,
                timeout=datetime.timedelta(seconds=30),
                feature_updates=[
                    {"feature": "kraft.version", "max_version_level": 1, "upgrade_type": 1}
                ],
                validate_only=False,
            )
        code = int(answer.error_code)
        retriable = code in (ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT)
        if not retriable or time.monotonic() > deadline:
            return code, answer.error_message or ""
        await asyncio.sleep(0.2)


async def _finalized(address: str) -> int:
    """kraft.version as the node's ApiVersions finalizes it (0: not set)."""
    async with await ClientConnection.connect(address, timeout_ms=5_000) as conn:
        answer = await conn.request(18, client_software_name="test", client_software_version="1")
    levels = {str(f.name): int(f.max_version_level) for f in answer.finalized_features}
    return levels.get("kraft.version", 0)


async def _follower(quorum: Quorum, *, besides: int | None = None) -> tuple[int, int]:
    """(leader, a running follower other than `besides`)."""
    leader = await quorum.leader()
    follower = next(
        n.node_id for n in quorum.nodes.values() if n.running and n.node_id not in (leader, besides)
    )
    return leader, follower


def _cli(verb: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`mlog features VERB kraft.version=1 ... --bootstrap-server ADDRESS` (last arg)."""
    *flags, address = args
    feature = ["--feature", "kraft.version=1"] if verb != "describe" else []
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "api.cli",
            "features",
            verb,
            *feature,
            *flags,
            "--bootstrap-server",
            address,
        ],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        timeout=120,
        check=False,
    )


async def test_an_upgrade_waits_for_every_voter_and_goes_through_a_follower(
    tmp_path: Path,
) -> None:
    quorum = Quorum(
        tmp_path, timers=TIMERS, node_env={3: {SUPPORTED_FEATURES_ENV: "kraft.version=0"}}
    )
    quorum.start_all()
    try:
        await quorum.register_brokers()
        _, follower = await _follower(quorum)
        code, message = await _upgrade_raw(quorum.nodes[follower].address)
        assert code == ErrorCode.INVALID_UPDATE_VERSION, message
        assert "voter 3 supports 0..0 of kraft.version, not level 1" in message

        quorum.kill(3)
        _, follower = await _follower(quorum, besides=3)
        code, message = await _upgrade_raw(quorum.nodes[follower].address)
        assert code == ErrorCode.INVALID_UPDATE_VERSION, message
        assert f"voter 3 ({quorum.nodes[3].controller_address}) cannot tell" in message
        for node in quorum.nodes.values():
            if node.running:
                assert await _finalized(node.address) == 0

        del quorum.node_env[3]
        quorum.start(3)
        deadline = time.monotonic() + 60
        while True:
            _, follower = await _follower(quorum)
            address = quorum.nodes[follower].address
            done = await asyncio.to_thread(_cli, "upgrade", "--dry-run", address)
            if done.returncode == 0:
                break
            assert "voter 3" in done.stderr, done.stderr  # only while node 3 starts
            assert time.monotonic() < deadline, done.stderr
            await asyncio.sleep(0.5)
        assert "kraft.version would be upgraded to level 1" in done.stdout
        # Sent to a follower only: a follower never writes itself, so the leader made it.
        assert await _upgrade_raw(address) == (0, "")
        described = await asyncio.to_thread(_cli, "describe", "--output", "json", address)
        levels = {item["feature"]: item for item in json.loads(described.stdout)}
        assert levels["kraft.version"]["supported_max_level"] == 1
        for node in quorum.nodes.values():
            deadline = time.monotonic() + 30
            while await _finalized(node.address) != 1:
                assert time.monotonic() < deadline, f"node {node.node_id} never saw level 1"
                await asyncio.sleep(0.1)
    finally:
        quorum.stop_all()
