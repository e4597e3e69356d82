"""How long an `mlog` command takes from start to exit, against `python -c pass` in the same run.

Usage: python bench/cli_bench.py [--runs N] [--brokers B] [--topics T] [--instructions]
                                 [--pythonpath DIR]

Data: a small data directory made for the run (B brokers, T topics of 3 partitions, replication
factor 2; SQLite snapshot database by default, no snapshot), in a scratch directory.

Rows (wall time of the whole process, median and 90th percentile of N runs; each repetition
runs the baseline, then every command, so load drifts alike for all):
  python -c pass        the baseline: the interpreter starting and exiting
  mlog --help           the parser and its help
  mlog topics list      replay the log read-only, print a table
  mlog topics create    open the log for writing, replay, append one topic (fsync), close;
                        each run on a fresh copy of the data directory, copied untimed

`cpu` is the median user+system time of the process: on a loaded machine it moves far less
than the wall time. `--instructions` also runs each command once under valgrind's cachegrind
and prints the instructions it executed: a count that does not depend on the machine's load.
The commands run the installed `mlog` script with bytecode caches written (PYTHONDONTWRITEBYTECODE
is removed from their environment: without caches every module is compiled again on every
start). `--pythonpath DIR` runs `python -m api.cli` with DIR first on the path instead, e.g. a
checkout of an older commit to compare with.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

TARGET_MS = 150.0
"""Each command's median wall time should stay at or below this."""

TARGET_ABOVE_BASELINE_MS = 200.0
"""...and at most this much above the baseline's."""


def _mlog_command() -> list[str]:
    """The installed console script, else the module (what `mlog` runs either way)."""
    script = Path(sys.executable).parent / "mlog"
    return [str(script)] if script.exists() else [sys.executable, "-m", "api.cli"]


def _environment(pythonpath: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLOG_")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def _instructions(argv: Sequence[str], env: dict[str, str], cwd: Path) -> int | None:
    """Instructions one run executes, counted by cachegrind (None without valgrind)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    proc = subprocess.run(
        [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", *argv],
        check=False,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", proc.stderr)
    return int(found.group(1).replace(",", "")) if found else None


def _run(argv: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, user+system seconds) of one process run to exit; fails on a non-zero exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _make_data_dir(
    path: Path, mlog: list[str], env: dict[str, str], brokers: int, topics: int
) -> None:
    for broker in range(1, brokers + 1):
        register = ["brokers", "register", "--id", str(broker)]
        _run([*mlog, "--data-dir", str(path), *register], env, path.parent)
    for topic in range(topics):
        create = ["topics", "create", "--topic", f"topic-{topic}", "--partitions", "3"]
        _run(
            [*mlog, "--data-dir", str(path), *create, "--replication-factor", "2"], env, path.parent
        )


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (20)")
    parser.add_argument("--brokers", type=int, default=3, help="brokers in the data directory")
    parser.add_argument("--topics", type=int, default=5, help="topics in the data directory")
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions (valgrind)"
    )
    parser.add_argument("--pythonpath", help="run python -m api.cli with this first on the path")
    args = parser.parse_args()

    mlog = [sys.executable, "-m", "api.cli"] if args.pythonpath else _mlog_command()
    env = _environment(args.pythonpath)
    scratch = Path(tempfile.mkdtemp(prefix="cli-bench-"))
    try:
        template = scratch / "template"
        _make_data_dir(template, mlog, env, args.brokers, args.topics)
        work = scratch / "work"
        commands: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "mlog --help": [*mlog, "--help"],
            "mlog topics list": [*mlog, "--data-dir", str(template), "topics", "list"],
            "mlog topics create": [
                *mlog,
                "--data-dir",
                str(work),
                "topics",
                "create",
                "--topic",
                "new-topic",
                "--partitions",
                "3",
                "--replication-factor",
                "2",
            ],
        }
        walls: dict[str, list[float]] = {name: [] for name in commands}
        cpus: dict[str, list[float]] = {name: [] for name in commands}
        load_before = os.getloadavg()[0]
        for repetition in range(args.runs + 1):  # the first writes bytecode caches: not counted
            for name, argv in commands.items():
                if name == "mlog topics create":
                    shutil.rmtree(work, ignore_errors=True)
                    shutil.copytree(template, work)
                # From the scratch directory: `python -m` puts the working directory first on
                # the path, which must not shadow the code under test.
                wall, cpu = _run(argv, env, scratch)
                if repetition:
                    walls[name].append(wall * 1000)
                    cpus[name].append(cpu * 1000)
        load_after = os.getloadavg()[0]
        counts: dict[str, int | None] = {}
        if args.instructions:
            for name, argv in commands.items():
                if name == "mlog topics create":
                    shutil.rmtree(work, ignore_errors=True)
                    shutil.copytree(template, work)
                counts[name] = _instructions(argv, env, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    base = statistics.median(walls["python -c pass"])
    print(
        f"{args.runs} runs each; data directory: {args.brokers} brokers, {args.topics} topics x 3 "
        f"partitions; python {platform.python_version()}; mlog = {' '.join(mlog)}"
    )
    print(f"load average (1 min): {load_before:.2f} before, {load_after:.2f} after; 2 cores here")
    header = (
        f"{'command':<22}{'median ms':>10}{'p90 ms':>9}{'baseline':>10}{'difference':>12}"
        f"{'ratio':>7}{'cpu ms':>8}{'instr M':>9}  target"
    )
    print(header)
    print("-" * len(header))
    for name in commands:
        median = statistics.median(walls[name])
        cpu = statistics.median(cpus[name])
        difference = median - base
        if name == "python -c pass":
            verdict = "(baseline)"
        else:
            met = median <= TARGET_MS and difference <= TARGET_ABOVE_BASELINE_MS
            verdict = "met" if met else "MISSED"
        count = counts.get(name)
        shown = "-" if count is None else f"{count / 1e6:.0f}"
        print(
            f"{name:<22}{median:>10.1f}{_p90(walls[name]):>9.1f}{base:>10.1f}{difference:>12.1f}"
            f"{median / base:>7.2f}{cpu:>8.1f}{shown:>9}  {verdict}"
        )
    print(
        f"target: median <= {TARGET_MS:.0f} ms and <= {TARGET_ABOVE_BASELINE_MS:.0f} ms above the "
        "baseline, on a quiet machine"
    )


if __name__ == "__main__":
    main()
