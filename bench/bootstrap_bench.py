"""What a hung server first in `--bootstrap-server` costs a CLI write, against a healthy list.

Usage: python bench/bootstrap_bench.py [--rounds N] [--smoke]

Two `mlog serve` processes on 127.0.0.1, each over its own scratch data directory; one is
stopped with SIGSTOP (its kernel still accepts connections; nothing answers). Each round runs
`mlog namespaces create` twice, alternating which goes first:
  healthy       --bootstrap-server HEALTHY           (the baseline)
  hung first    --bootstrap-server STOPPED,HEALTHY   (the issue's case)

Printed: the median wall time of each over N rounds with its spread (min-max), their ratio and
their difference (what the hung server costs; the CLI's setup deadline,
`api.client.bootstrap.SETUP_TIMEOUT_MS`, is 2 s). Target: the difference at most 5 s.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TARGET_COST_S = 5.0
"""What a hung first server may cost a CLI write (issue 54's bound)."""

START_WAIT_S = 60.0


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("MLOG_")}


@contextmanager
def _serve(root: Path, name: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`mlog serve` over `root/name` on a free port; (process, address) once it serves."""
    stderr = root / f"{name}.log"
    with stderr.open("w") as err:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "api.cli",
                "serve",
                "--data-dir",
                str(root / name),
                "--listen",
                "127.0.0.1:0",
            ],
            stderr=err,
            env=_env(),
        )
    try:
        deadline = time.monotonic() + START_WAIT_S
        while not (found := re.search(r"serving on (\S+)", stderr.read_text())):
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"mlog serve did not start: {stderr.read_text()[-500:]}")
            time.sleep(0.05)
        yield process, found.group(1)
    finally:
        process.send_signal(signal.SIGCONT)
        process.kill()
        process.wait(30)


def _write(bootstrap: str, namespace: str) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "api.cli",
            "namespaces",
            "create",
            "--namespace",
            namespace,
            "--bootstrap-server",
            bootstrap,
        ],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
        check=False,
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the CLI write failed: {done.stderr.strip()}")
    return seconds


def _row(name: str, times: list[float]) -> str:
    return (
        f"{name:<12} {statistics.median(times):8.2f} s   "
        f"{min(times):6.2f}-{max(times):.2f} s   ({len(times)} rounds)"
    )


def main() -> int:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--smoke", action="store_true", help="one round (a quick check)")
    args = parser.parse_args()
    rounds = 1 if args.smoke else max(1, args.rounds)
    healthy_times: list[float] = []
    hung_times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bootstrap-bench-") as scratch:
        root = Path(scratch)
        with _serve(root, "healthy") as (_, healthy), _serve(root, "stopped") as (stopped, hung):
            stopped.send_signal(signal.SIGSTOP)
            for turn in range(rounds):
                runs = [
                    (healthy_times, healthy, f"healthy-{turn}"),
                    (hung_times, f"{hung},{healthy}", f"hung-{turn}"),
                ]
                for times, bootstrap, namespace in runs if turn % 2 == 0 else runs[::-1]:
                    times.append(_write(bootstrap, namespace))
    base, slow = statistics.median(healthy_times), statistics.median(hung_times)
    print("CLI write (mlog namespaces create), wall time: median   spread")
    print(_row("healthy", healthy_times))
    print(_row("hung first", hung_times))
    print(
        f"ratio {slow / base:.2f}; the hung server costs {slow - base:.2f} s "
        f"(target <= {TARGET_COST_S:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
