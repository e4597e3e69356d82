"""`mlog kafka-metadata-quorum` against a dynamic quorum of `mlog serve` processes.

docs/ops.html's lines: `describe --status` and `--replication` at a controller, then
`--command-config controller.properties --bootstrap-controller ... add-controller` for a
fourth node, `remove-controller --controller-id 1 --controller-directory-id ...`, with writes
going on throughout; the voters' logs end identical.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest

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


def _voters(quorum: Quorum, node: Node) -> list[int]:
    """The ids in `describe --status`'s CurrentVoters, asked at `node`'s controller listener."""
    out = mlog(
        "kafka-metadata-quorum.sh",
        "--bootstrap-controller",
        node.controller_address,
        "describe",
        "--status",
    )
    lines = out.splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "ClusterId",
        "LeaderId",
        "LeaderEpoch",
        "HighWatermark",
        "MaxFollowerLag",
        "MaxFollowerLagTimeMs",
        "CurrentVoters",
        "CurrentObservers",
    ]
    voters = lines[6].removeprefix("CurrentVoters:").strip()
    assert re.fullmatch(
        r'\[(\{"id": \d+, "directoryId": "[\w-]{22}", '
        r'"endpoints": \["CONTROLLER://127\.0\.0\.1:\d+"\]\}(, )?)+\]',
        voters,
    ), voters
    return [int(i) for i in re.findall(r'"id": (\d+)', voters)]


async def _add(quorum: Quorum, node: Node, deadline: float) -> str:
    """Kafka's add-controller line for `node`, again while the leader says not caught up."""
    running = quorum.nodes[1]
    while True:
        try:
            return mlog(
                "kafka-metadata-quorum.sh",
                "--command-config",
                str(node.config),
                "--bootstrap-controller",
                running.controller_address,
                "add-controller",
            )
        except AssertionError as exc:
            if time.monotonic() > deadline:
                raise
            assert "REQUEST_TIMED_OUT" in str(exc) or "NOT_LEADER" in str(exc), exc
            await asyncio.sleep(0.3)


async def test_add_and_remove_a_controller_with_kafkas_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quorum = Quorum(tmp_path, timers=dict(TIMERS), dynamic=True)
    # The controller listeners take the controllers' certificate: the connection's own config.
    monkeypatch.setenv("MLOG_COMMAND_CONFIG", str(quorum.controller_command_config()))
    quorum.start_all()
    writer = Writer(quorum)
    try:
        await quorum.register_brokers()
        await write_until(writer, 10)
        assert _voters(quorum, quorum.nodes[1]) == [1, 2, 3]
        table = mlog(
            "kafka-metadata-quorum.sh",
            "--bootstrap-controller",
            quorum.nodes[2].controller_address,
            "describe",
            "--replication",
        )
        rows = [line.split("\t") for line in table.splitlines()]
        assert [c.strip() for c in rows[0]] == [
            "NodeId",
            "DirectoryId",
            "LogEndOffset",
            "Lag",
            "LastFetchTimestamp",
            "LastCaughtUpTimestamp",
            "Status",
            "",
        ]
        assert sorted(r[6].strip() for r in rows[1:]) == ["Follower", "Follower", "Leader"]
        assert {r[1] for r in rows[1:]} == set(DIRECTORY_IDS[:3])

        new = quorum.add_node(4)
        # Kafka's controller.properties names its data directory: so does this one.
        with new.config.open("a") as config:
            config.write(f"metadata.log.dir={new.data_dir}\n")
        quorum.start(4)
        added = await _add(quorum, new, time.monotonic() + 120)
        assert re.fullmatch(
            rf"Added controller 4 with directory id [\w-]{{22}} and endpoints: "
            rf"CONTROLLER://127\.0\.0\.1:{new.controller_port}\n",
            added,
        ), added
        await write_until(writer, 10)
        assert _voters(quorum, quorum.nodes[4]) == [1, 2, 3, 4]

        removed = mlog(
            "kafka-metadata-quorum.sh",
            "--bootstrap-controller",
            quorum.nodes[2].controller_address,
            "remove-controller",
            "--controller-id",
            "1",
            "--controller-directory-id",
            DIRECTORY_IDS[0],
        )
        assert removed == f"Removed  KRaft controller 1 with directory id {DIRECTORY_IDS[0]}\n"
        await write_until(writer, 10)
        assert _voters(quorum, quorum.nodes[2]) == [2, 3, 4]
        quorum.nodes.pop(1).process.terminate()  # type: ignore[union-attr]  # it was started
        await write_until(writer, 10)
        await converge(quorum, writer)
    finally:
        await writer.close()
        quorum.stop_all()
    summary = check_logs(quorum, writer.acknowledged)
    assert len({length for _, length, _ in summary}) == 1, summary  # identical logs
