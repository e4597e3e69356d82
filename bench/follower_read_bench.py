"""Read-your-write at a follower: how soon a write it forwarded shows in its own reads.

Usage: python bench/follower_read_bench.py [--writes 50] [--rounds 5] [--dir PATH]

A three-node quorum of real `mlog serve` processes on this machine (tests/support's harness,
Kafka's default quorum timers). Each round, a client connected to a follower sends
`--writes` CreateTopics of one new topic each, one at a time, plainly as a Kafka client does
(the follower forwards it to the leader in an Envelope); after each acknowledgement it sends
Metadata for that topic to the same follower until the topic is there. The time from the
acknowledgement to the first read that shows it is one sample. The same is measured against
the leader in the same round (the baseline: its image has the write when it answers).

Each round prints p50/p99 of both and the ratio follower / leader, the p99 of the write itself
(send to acknowledgement: what the follower's wait for its image costs) and how many reads
missed the write; the summary is the median of the rounds' figures with their spread
(min..max). A follower relays a forwarded write's answer once its image holds the leader's
commit (`api.server.forwarding`), so its first read sees the write; parked fetches answered
when the high watermark moves keep that wait within about one round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from api.client import AdminClient  # noqa: E402
from replay.controller.commands import CreatableTopic  # noqa: E402
from tests.support.quorum_processes import Quorum  # noqa: E402

READ_DEADLINE_S = 10.0
"""A read that never shows the write within this long is a failure, not a sample."""


def percentile(samples: list[float], fraction: float) -> float:
    """The `fraction` quantile of `samples` (nearest rank)."""
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))
    return ordered[index]


@dataclass
class Samples:
    """One node's samples of a round."""

    visible: list[float] = field(default_factory=list)
    """Seconds from each write's acknowledgement to its first read that shows it."""
    writes: list[float] = field(default_factory=list)
    """Seconds from each write sent to its acknowledgement."""
    missed: int = 0
    """Reads after an acknowledgement that did not show the write yet."""


async def read_your_writes(address: str, prefix: str, writes: int) -> Samples:
    """Each write's round trip at `address`, and how soon a read there shows it."""
    client = await AdminClient.connect(address)
    samples = Samples()
    try:
        for index in range(writes):
            name = f"{prefix}-{index}"
            sent = time.perf_counter()
            (result,) = await client.create_topics([CreatableTopic(name=name)])
            if result.outcome.error_code != 0:
                raise RuntimeError(f"write {name} at {address} refused: {result.outcome}")
            acknowledged = time.perf_counter()
            samples.writes.append(acknowledged - sent)
            while True:
                (topic,) = (await client.metadata([name])).topics
                if int(topic.error_code) == 0:
                    break
                samples.missed += 1
                if time.perf_counter() - acknowledged > READ_DEADLINE_S:
                    raise TimeoutError(f"{name} not readable at {address} after the write")
            samples.visible.append(time.perf_counter() - acknowledged)
    finally:
        await client.close()
    return samples


async def bench(root: Path, *, writes: int, rounds: int) -> None:
    """Start the quorum, run the rounds, print each and the summary."""
    quorum = Quorum(root)
    quorum.start_all()
    try:
        await quorum.register_brokers()
        leader_id = await quorum.leader()
        follower_id = min(n for n in quorum.nodes if n != leader_id)
        leader, follower = quorum.nodes[leader_id], quorum.nodes[follower_id]
        print(f"leader node {leader_id}, follower node {follower_id}; {writes} writes a round")
        columns = (
            "round",
            "follower p50",
            "p99",
            "leader p50",
            "p99",
            "ratio p99",
            "write p99 f/l",
            "missed",
        )
        widths = (5, 13, 9, 11, 9, 10, 18, 7)
        print(" ".join(f"{c:>{w}}" for c, w in zip(columns, widths, strict=True)))
        figures: list[tuple[float, ...]] = []
        missed = 0
        for number in range(1, rounds + 1):
            at_follower = await read_your_writes(follower.address, f"f{number}", writes)
            at_leader = await read_your_writes(leader.address, f"l{number}", writes)
            missed += at_follower.missed
            row = (
                percentile(at_follower.visible, 0.5) * 1000,
                percentile(at_follower.visible, 0.99) * 1000,
                percentile(at_leader.visible, 0.5) * 1000,
                percentile(at_leader.visible, 0.99) * 1000,
                percentile(at_follower.writes, 0.99) * 1000,
                percentile(at_leader.writes, 0.99) * 1000,
            )
            figures.append(row)
            ratio = row[1] / row[3] if row[3] else float("inf")
            print(
                f"{number:>5} {row[0]:>10.2f} ms {row[1]:>6.2f} ms {row[2]:>8.2f} ms "
                f"{row[3]:>6.2f} ms {ratio:>9.1f}x {row[4]:>7.2f}/{row[5]:<7.2f}ms "
                f"{at_follower.missed:>7}"
            )
        names = (
            "follower p50",
            "follower p99",
            "leader p50",
            "leader p99",
            "write p99 at the follower",
            "write p99 at the leader",
        )
        print("median of the rounds (spread min..max):")
        for index, name in enumerate(names):
            values = [row[index] for row in figures]
            print(
                f"  {name:<26} {statistics.median(values):8.2f} ms "
                f"({min(values):.2f}..{max(values):.2f})"
            )
        ratios = [row[1] / row[3] for row in figures if row[3]]
        if ratios:
            print(f"  ratio p99 follower / leader: {statistics.median(ratios):.1f}x")
        print(f"  reads at the follower that missed an acknowledged write: {missed}")
    finally:
        quorum.stop_all()


def main() -> None:
    """Parse the flags and run the bench in a temporary directory (or --dir)."""
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=50, help="writes per round and node")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None, help="where the nodes' data go")
    args = parser.parse_args()
    if args.writes < 1 or args.rounds < 1:
        parser.error("--writes and --rounds must be 1 or more")
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        asyncio.run(bench(args.dir, writes=args.writes, rounds=args.rounds))
        return
    with tempfile.TemporaryDirectory(prefix="follower-read-") as root:
        asyncio.run(bench(Path(root), writes=args.writes, rounds=args.rounds))


if __name__ == "__main__":
    main()
