"""A node whose `quorum-state` holds an epoch no election can pass says what to do, once.

Issue 54: a forged Vote at epoch 2^31-1 was stored; the node then stopped on its next
election, and again seconds after every restart. Before this check was added such a file may
exist: `mlog serve` on it exits non-zero at once with one line (no traceback, no loop), and
the step that line names (move the file aside) brings the node back: it catches up from the
leader, then votes again (its quorum-state is written anew).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.quorum_processes import PROJECT, TIMERS, Quorum

pytestmark = pytest.mark.process


def _serve(node_config: Path, data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "api.cli", "serve"),
            *("--config", str(node_config), "--data-dir", str(data_dir)),
        ],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        timeout=60,
        check=False,
    )


def test_serve_on_a_quorum_state_past_the_last_epoch_exits_with_one_line(tmp_path: Path) -> None:
    quorum = Quorum(tmp_path, timers=dict(TIMERS))
    node = quorum.nodes[1]
    path = node.data_dir / "quorum-state"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "leaderEpoch": 2**31 - 1}))
    stored = path.read_bytes()

    for _ in range(2):  # a restart says the same, and nothing is changed meanwhile
        done = _serve(node.config, node.data_dir)
        assert done.returncode != 0
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1, done.stderr
        assert "Traceback" not in done.stderr
        assert "leader epoch 2147483647, past the last one an election can reach" in lines[0]
        assert str(path) in lines[0] and "move it aside" in lines[0]
        assert path.read_bytes() == stored

    # What the line says: move it aside, and the node catches up, then votes again.
    path.rename(tmp_path / "quorum-state.forged")
    quorum.start_all()
    try:
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert path.exists(), quorum.stderr_tails()
        written = json.loads(path.read_text())
        assert 0 < written["leaderEpoch"] < 2**31 - 1
    finally:
        quorum.stop_all()
