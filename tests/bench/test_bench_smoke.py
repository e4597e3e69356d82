"""Every script under bench/ runs to its end at a tiny size, so none rots unseen.

The scripts are found by globbing bench/*.py: a new script is covered without an edit here.
A script not in `SMOKE` is run with `--smoke` (give it that flag, or add its tiny-size
arguments to the table). The figures printed are not checked (no timing assertions); a
smoke run passes when the script exits 0 with output and without a Python traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.paths import REPO

BENCH = REPO / "bench"

HELPERS = frozenset({"against.py", "etcd_side.py"})
"""Modules under bench/ that other scripts import: no `main` of their own to run."""

SMOKE_TIMEOUT = 300.0
"""Seconds a smoke run may take before it counts as hung (the slowest needs about 40 s)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Smoke:
    """How to run one script at a tiny size: its arguments and the markers that run implies.

    `{tmp}` in an argument is replaced by the test's own (existing, empty) scratch directory.
    """

    args: tuple[str, ...] = ("--smoke",)
    marks: tuple[str, ...] = ()
    why: str = field(default="", compare=False)


SMOKE: dict[str, Smoke] = {
    "audit_bench.py": Smoke(
        # The talk rows start four more JVMs (~45 s); tests/replay/audit/ drives that path.
        args=("--entries", "2000", "--repeat", "1", "--skip-talk", "--dir", "{tmp}"),
        marks=("spark", "process"),
    ),
    "auth_bench.py": Smoke(
        args=("--connections", "2", "--seconds", "0.5", "--logins", "5", "--dir", "{tmp}"),
        marks=("process",),
    ),
    "console_bench.py": Smoke(
        args=(
            *("--partitions", "200", "--entries", "3000", "--rounds", "1", "--points", "2"),
            *("--readers", "2", "--seconds", "1", "--dir", "{tmp}"),
        ),
        marks=("process",),
    ),
    "authz_bench.py": Smoke(args=("--acls", "100", "--decisions", "100", "--scans", "2")),
    "snapshot_loop_bench.py": Smoke(args=("--topics", "500", "--repeat", "1")),
    "chain_cost_bench.py": Smoke(args=("--batches", "5", "--repeat", "1")),
    "fleet_bench.py": Smoke(args=("fence", "--partitions", "3000", "--brokers", "6,30")),
    "proof_bench.py": Smoke(args=("--entries", "2000", "--proofs", "3", "--dir", "{tmp}")),
    "cli_bench.py": Smoke(
        args=("--runs", "2", "--brokers", "2", "--topics", "1"), marks=("process",)
    ),
    "decode_bench.py": Smoke(args=("--number", "50", "--repeat", "1")),
    "layers_bench.py": Smoke(args=("--seconds", "0.2", "--tasks", "3", "--rounds", "1")),
    "encode_check_bench.py": Smoke(args=("--tasks", "2", "--seconds", "0.3", "--rounds", "1")),
    "fairness_bench.py": Smoke(
        args=(
            "--seconds",
            "0.5",
            "--topics",
            "2",
            "--idle",
            "5",
            "--slowloris",
            "5",
            "--dir",
            "{tmp}",
        ),
        marks=("process",),
    ),
    "log_bench.py": Smoke(
        args=("--entries", "1000", "--async-entries", "500", "--repeat", "1", "--dir", "{tmp}")
    ),
    "quorum_bench.py": Smoke(
        args=(
            "--connections",
            "2",
            "--seconds",
            "1",
            "--kills",
            "1",
            "--graceful",
            "1",
            "--dir",
            "{tmp}",
        ),
        marks=("process",),
    ),
    "replay_bench.py": Smoke(
        args=("--topics", "100", "--partitions", "2", "--repeat", "1", "--service-topics", "10")
    ),
    "quorum_stop_bench.py": Smoke(args=("--smoke", "--dir", "{tmp}"), marks=("process",)),
    "follower_read_bench.py": Smoke(
        args=("--writes", "3", "--rounds", "1", "--dir", "{tmp}"), marks=("process",)
    ),
    "prelogin_bench.py": Smoke(
        args=(
            "--rounds",
            "1",
            "--logins",
            "2",
            "--held",
            "5",
            "--connections",
            "20",
            "--dir",
            "{tmp}",
        ),
        marks=("process",),
    ),
    "bootstrap_bench.py": Smoke(args=("--smoke",), marks=("process",)),
    "server_bench.py": Smoke(
        args=(
            "--connections",
            "2",
            "--seconds",
            "1",
            "--baseline-seconds",
            "0.5",
            "--dir",
            "{tmp}",
        ),
        marks=("process",),
    ),
    "snapshot_bench.py": Smoke(
        args=(
            "--topics",
            "100",
            "--partitions",
            "2",
            "--repeat",
            "1",
            "--churn-entries",
            "1000",
            "--live-topics",
            "10",
            "--points",
            "2",
            "--postgres",
            "",
            "--dir",
            "{tmp}",
        ),
        marks=("process",),
    ),
    "start_bench.py": Smoke(
        args=(
            *("--partitions", "300", "--brokers", "4", "--share", "0.1", "--fence"),
            *("--rounds", "1", "--postgres", "", "--dir", "{tmp}"),
        ),
        marks=("process",),
    ),
}
"""Tiny-size arguments per script (others: `--smoke`); extend it when adding a script."""


def _scripts() -> list[object]:
    params: list[object] = []
    for path in sorted(BENCH.glob("*.py")):
        if path.name in HELPERS:
            continue
        smoke = SMOKE.get(path.name, Smoke(marks=("process",)))
        marks = [getattr(pytest.mark, name) for name in smoke.marks]
        params.append(pytest.param(path, smoke, id=path.stem, marks=marks))
    return params


def test_every_table_entry_names_a_script() -> None:
    missing = sorted(set(SMOKE) - {p.name for p in BENCH.glob("*.py")})
    assert not missing, f"SMOKE names scripts that are not under bench/: {missing}"


@pytest.mark.parametrize(("script", "smoke"), _scripts())
def test_bench_script_runs_at_a_tiny_size(script: Path, smoke: Smoke, tmp_path: Path) -> None:
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in smoke.args]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=SMOKE_TIMEOUT,
        check=False,
    )
    hint = (
        ""
        if script.name in SMOKE
        else " (give the script a --smoke flag, or add its tiny-size arguments to SMOKE)"
    )
    assert done.returncode == 0, (
        f"{script.name} {' '.join(args)} exited {done.returncode}{hint}:\n{done.stderr[-3000:]}"
    )
    assert done.stdout.strip(), f"{script.name} printed nothing"
    assert "Traceback (most recent call last)" not in done.stderr, done.stderr[-3000:]
