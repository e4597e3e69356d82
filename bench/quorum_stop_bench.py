"""How long a quorum's clients wait out a hung leader, and how long its nodes take to stop.

Usage: python bench/quorum_stop_bench.py pause [--rounds 3] [--pause 20] [--dir PATH]
       python bench/quorum_stop_bench.py stop [--rounds 3] [--dir PATH]
       python bench/quorum_stop_bench.py --smoke

The latency figures the system tests used to assert (tests/system/test_quorum_pause.py and
test_quorum_shutdown.py keep the behaviour under generous deadlines), each against a baseline
measured in the same round, as medians over `--rounds` fresh three-node quorums (every node a
separate `mlog serve` on this machine) with their spread (min-max):

- `pause`: four `AdminClient` write loops (one write in flight each) run while the leader is
  stopped with SIGSTOP for `--pause` seconds (Kafka's default quorum timers), and a CLI write
  (`mlog topics create`, a new process) is started at a follower just after the stop. Figures:
  the slowest and the p99 of the writes in flight at any time of the pause, and the CLI's
  write; baselines: the same loops' p99 in the two seconds before the stop, and the same CLI
  write before the stop.
- `stop`: SIGTERM to each node in turn, leader last (a rolling stop), then on a fresh quorum
  the leader first (each time the one that leads then; quick election timers). Figures: the
  seconds from the signal to the process's end of the last leader of the rolling stop, of the
  first leader of the other order (it hands over, EndQuorumEpoch) and of the last node of that
  order (nobody left to elect); baseline: the first follower's stop of the rolling stop.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.client import AdminClient  # noqa: E402
from replay.controller.commands import CreatableTopic  # noqa: E402
from tests.support.quorum_processes import (  # noqa: E402
    TIMERS,
    Quorum,
    Writer,
    converge,
    mlog,
    write_until,
)

CALM_S = 2.0
"""Seconds of writes before the stop: the loops' baseline latency (and after the resume)."""

SMOKE_PAUSE_S = 3.0
"""`--smoke`'s pause, with quick election timers (`TIMERS`) and a second of writes either side:
the script runs through, its figures mean nothing."""

Samples = dict[str, list[float]]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _loop(
    address: str, prefix: str, stop: asyncio.Event, done: list[tuple[float, float]]
) -> None:
    """Create topics one at a time until `stop`: (start, seconds) of each acknowledged."""
    client = await AdminClient.connect_controller(address)
    try:
        turn = 0
        while not stop.is_set():
            turn += 1
            started = time.monotonic()
            (result,) = await client.create_topics([CreatableTopic(name=f"{prefix}{turn}")])
            if result.outcome.error_code != 0:
                raise SystemExit(f"a write failed: {result}")
            done.append((started, time.monotonic() - started))
    finally:
        await client.close()


def _cli_write(address: str, name: str) -> float:
    started = time.monotonic()
    mlog("topics", "create", "--topic", name, "--bootstrap-server", address)
    return time.monotonic() - started


async def _pause_round(root: Path, pause_s: float, *, smoke: bool = False) -> dict[str, float]:
    quorum = Quorum(root, timers=TIMERS if smoke else {})
    calm_s = 1.0 if smoke else CALM_S
    quorum.start_all()
    try:
        await quorum.register_brokers()
        leader = await quorum.leader()
        follower = next(i for i in quorum.nodes if i != leader)
        address = quorum.nodes[follower].address
        calm_cli = await asyncio.to_thread(_cli_write, address, "calm-cli")
        stop = asyncio.Event()
        done: list[tuple[float, float]] = []
        loops = [
            asyncio.create_task(_loop(node.address, f"n{node.node_id}-{k}-", stop, done))
            for k in range(2)
            for node in quorum.nodes.values()
        ][:4]
        calm_from = time.monotonic()
        await asyncio.sleep(calm_s)
        quorum.signal(leader, signal.SIGSTOP)
        paused_at = time.monotonic()
        paused_cli = await asyncio.to_thread(_cli_write, address, "paused-cli")
        await asyncio.sleep(max(0.0, paused_at + pause_s - time.monotonic()))
        quorum.signal(leader, signal.SIGCONT)
        resumed_at = time.monotonic()
        await asyncio.sleep(calm_s)
        stop.set()
        await asyncio.gather(*loops)
    finally:
        quorum.stop_all()
    calm = [s for start, s in done if calm_from <= start and start + s < paused_at]
    during = [s for start, s in done if start < resumed_at and start + s > paused_at]
    if not calm or not during:
        raise SystemExit(f"no writes measured: {len(calm)} before the stop, {len(during)} in it")
    return {
        "slowest write in the pause": max(during),
        "p99 write in the pause": _pct(during, 0.99),
        "calm p99 write": _pct(calm, 0.99),
        "CLI write in the pause": paused_cli,
        "calm CLI write": calm_cli,
    }


def _stop(quorum: Quorum, node_id: int) -> float:
    started = time.monotonic()
    quorum.kill(node_id, signal.SIGTERM)
    return time.monotonic() - started


async def _written(quorum: Quorum) -> None:
    await quorum.register_brokers()
    writer = Writer(quorum)
    try:
        await write_until(writer, 20)
        await converge(quorum, writer)
    finally:
        await writer.close()


async def _leader_or_any(quorum: Quorum) -> int:
    running = [i for i, n in quorum.nodes.items() if n.running]
    try:
        leader = await quorum.leader(timeout=5)
    except TimeoutError:
        return running[0]  # nobody can be elected among the last ones
    return leader if leader in running else running[0]


async def _stop_round(root: Path) -> dict[str, float]:
    rolling = Quorum(root / "rolling", timers=TIMERS)
    rolling.start_all()
    try:
        await _written(rolling)
        leader = await rolling.leader()
        order = [i for i in rolling.nodes if i != leader] + [leader]
        rolled = [_stop(rolling, node_id) for node_id in order]
    finally:
        rolling.stop_all()
    in_turn = Quorum(root / "in-turn", timers=TIMERS)
    in_turn.start_all()
    try:
        await _written(in_turn)
        turned = []
        for _ in range(len(in_turn.nodes)):
            turned.append(_stop(in_turn, await _leader_or_any(in_turn)))
    finally:
        in_turn.stop_all()
    return {
        "last leader of a rolling stop": rolled[-1],
        "leader stopped first (hands over)": turned[0],
        "last node stopped, leader first": turned[-1],
        "a follower's stop": rolled[0],
    }


def _table(samples: Samples, baselines: dict[str, str]) -> None:
    """Each figure's median and spread, its baseline's median and the median of the ratios."""
    print(f"{'figure':<36} {'median s':>9} {'spread s':>13} {'baseline s':>11} {'ratio':>7}")
    for name, values in samples.items():
        base_name = baselines.get(name)
        if base_name is None:
            continue
        base = samples[base_name]
        ratios = [v / b for v, b in zip(values, base, strict=True) if b > 0]
        spread = f"{min(values):.2f}-{max(values):.2f}"
        ratio = f"{statistics.median(ratios):.1f}x" if ratios else "-"
        print(
            f"{name:<36} {statistics.median(values):>9.2f} {spread:>13} "
            f"{statistics.median(base):>11.2f} {ratio:>7}"
        )
    for name in sorted(set(baselines.values())):
        values = samples[name]
        print(
            f"  baseline {name}: {statistics.median(values):.2f} s "
            f"({min(values):.2f}-{max(values):.2f})"
        )


def _rounds(rounds: int, one: Callable[[int], dict[str, float]]) -> Samples:
    samples: Samples = {}
    for number in range(rounds):
        figures = one(number)
        print(f"round {number + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in figures.items()))
        for name, value in figures.items():
            samples.setdefault(name, []).append(value)
    return samples


def main() -> None:
    """Run the chosen measurement and print its table."""
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=("pause", "stop"), default="pause")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pause", type=float, default=20.0, help="seconds the leader is stopped")
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="one short round of each mode")
    args = parser.parse_args()
    if args.rounds < 1 or args.pause <= 0:
        parser.error("--rounds must be 1 or more and --pause above 0")
    modes = ("pause", "stop") if args.smoke else (args.mode,)
    rounds = 1 if args.smoke else args.rounds
    pause_s = SMOKE_PAUSE_S if args.smoke else args.pause
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        root = Path(scratch)
        for mode in modes:
            if mode == "pause":
                print(f"leader stopped {pause_s:.0f} s, four write loops and a CLI write:")
                samples = _rounds(
                    rounds,
                    lambda n: asyncio.run(
                        _pause_round(root / f"pause{n}", pause_s, smoke=args.smoke)
                    ),
                )
                _table(
                    samples,
                    {
                        "slowest write in the pause": "calm p99 write",
                        "p99 write in the pause": "calm p99 write",
                        "CLI write in the pause": "calm CLI write",
                    },
                )
            else:
                print("seconds from SIGTERM to the process's end:")
                samples = _rounds(rounds, lambda n: asyncio.run(_stop_round(root / f"stop{n}")))
                _table(
                    samples,
                    {name: "a follower's stop" for name in samples if name != "a follower's stop"},
                )


if __name__ == "__main__":
    main()
