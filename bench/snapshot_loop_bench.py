"""A snapshot written beside a busy event loop: what the loop keeps, by where it is written.

Usage: python bench/snapshot_loop_bench.py [--topics 160000] [--repeat 3]

A voter's shape in one process: the main thread runs an event loop (uvloop where installed, the
switch interval lowered as a server lowers it) that does socket round trips over a socket pair
as fast as it can, while a worker thread writes a snapshot of an image of `--topics`
one-partition topics into SQLite (160,000: about what the 20 MB threshold holds in
`bench/quorum_bench.py`'s load). Each repetition writes it three times, back to back: in one go
on the thread (the baseline), in slices on the thread (`DutyCycle`, what the snapshot policy
does on a thread), and in a forked child (`ForkedRunner`, what `mlog serve` does). Per write:
its wall and CPU time (the writer's thread, or the child), the loop's round trips/s during it
against the same loop with no write right after, the round trips' p99 and longest, and the
share of the loop's time it was blocked (neither running nor waiting for a CPU, from /proc's
schedstat: waiting for the interpreter lock).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.server.event_loop import choose_loop
from api.service.interpreter_lock import SWITCH_INTERVAL_S
from api.service.snapshot_runners import ForkedRunner
from api.service.snapshots import DEFAULT_DUTY_CYCLE
from replay.image import MetadataImage
from replay.sql.store import SnapshotStore, sqlite_url

sys.path.insert(0, str(Path(__file__).resolve().parent))
from against import print_columns
from snapshot_bench import big_image


def _scheduled() -> float:
    """Seconds this thread ran or waited for a CPU (/proc's schedstat)."""
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as stat:
        run, wait, _ = (int(x) for x in stat.read().split())
    return (run + wait) / 1e9


async def _round_trips(until: Callable[[], bool]) -> list[float]:
    """Round trips of 64 bytes over a socket pair, both ends on this loop, until `until()`."""
    left, right = socket.socketpair()
    read_left, write_left = await asyncio.open_connection(sock=left)
    read_right, write_right = await asyncio.open_connection(sock=right)

    async def echo() -> None:
        while True:
            write_right.write(await read_right.readexactly(64))

    echoing = asyncio.ensure_future(echo())
    seconds = []
    while not until():
        start = time.perf_counter()
        write_left.write(b"x" * 64)
        await read_left.readexactly(64)
        seconds.append(time.perf_counter() - start)
    echoing.cancel()
    write_left.close()
    write_right.close()
    return seconds


def _pct(values: list[float], q: float) -> float:
    """The `q` quantile of `values`; NaN for none (a loop that made no round trip meanwhile)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


MODES = ("one go", "in slices", "in a child")


async def _one(store: SnapshotStore, image: MetadataImage, mode: str) -> dict[str, float]:
    loop = asyncio.get_running_loop()

    def write_image() -> float:
        started = time.thread_time()
        pace = DEFAULT_DUTY_CYCLE.pacer() if mode == "in slices" else None
        store.write(image, pace=pace)
        return time.thread_time() - started

    def write() -> float:
        if mode == "in a child":
            used = ForkedRunner().run(write_image, in_child=store.forget_connections)
        else:
            used = write_image()
        store.retain(1)
        return used

    with ThreadPoolExecutor(1) as executor:
        start, scheduled = time.perf_counter(), _scheduled()
        written = loop.run_in_executor(executor, write)
        during = await _round_trips(written.done)
        wall = time.perf_counter() - start
        blocked = 1 - (_scheduled() - scheduled) / wall
        cpu = await written
    start = time.perf_counter()
    deadline = start + min(wall, 2.0)
    alone = await _round_trips(lambda: time.perf_counter() >= deadline)
    alone_rate = len(alone) / (time.perf_counter() - start)
    return {
        "wall": wall,
        "cpu": cpu,
        # A tiny snapshot on a loaded host can end before the loop's first round trip.
        "kept": len(during) / wall / alone_rate if alone_rate else float("nan"),
        "p99": _pct(during, 0.99) * 1000,
        "max": max(during, default=float("nan")) * 1000,
        "blocked": blocked,
    }


async def _rounds(topics: int, repeat: int) -> list[dict[str, dict[str, float]]]:
    image = big_image(topics, 1)
    gc.collect()
    gc.freeze()  # as a voter freezes its loaded image
    results = []
    with (
        tempfile.TemporaryDirectory() as scratch,
        SnapshotStore(sqlite_url(Path(scratch) / "snapshots.db")) as store,
    ):
        store.ensure_schema()
        for _ in range(repeat):
            results.append({mode: await _one(store, image, mode) for mode in MODES})
            for name, r in results[-1].items():
                print(f"  {name}: " + ", ".join(f"{k} {v:.3f}" for k, v in r.items()), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=160_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    choice = choose_loop("auto", tls=False)
    print(f"event loop: {choice.name}; {args.topics:,} topics; {args.repeat} rounds")
    with asyncio.Runner(loop_factory=choice.factory) as runner:
        results = runner.run(_rounds(args.topics, args.repeat))
    print()
    header = ("write", "wall", "CPU", "loop keeps", "round trip p99", "longest", "loop blocked")
    rows = [header]
    for name in MODES:
        med = {k: statistics.median(r[name][k] for r in results) for k in results[0][name]}
        rows.append(
            (
                name,
                f"{med['wall']:.2f} s",
                f"{med['cpu']:.2f} s",
                f"{med['kept']:.0%}",
                f"{med['p99']:.2f} ms",
                f"{med['max']:.1f} ms",
                f"{med['blocked']:.0%}",
            )
        )
    print_columns(rows)


if __name__ == "__main__":
    main()
