"""Cost of the service's last check of each batch before it enters the working image.

Usage: python bench/encode_check_bench.py [--tasks 50] [--seconds 10] [--rounds 3]

The check runs the codec's per-record step (Avro range, enum and field checks) on every record
of a batch; the full encode (fastavro's write) stays in the log, done once. The server bench's
in-process loop (CreateTopics of one topic, then DeleteTopics of it, from
`--tasks` asyncio tasks) against a `MetadataService` on a fresh log, for `--seconds`, with the
check (this branch) and, as the baseline in the same run, without it (`_check_encodes`
replaced by a no-op on the instance). Rounds alternate so that a change of machine load hits
both. Reported: writes/s and the process CPU time per write (less sensitive to other load on
the machine than the rate), each the median over the rounds, and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from api.service.service import MetadataService
from replay.controller.commands import CreatableTopic, RegisterBroker, TopicRef


def _no_check(records: object) -> None:
    """The baseline: no check before the working image."""


async def _run(log_dir: Path, *, tasks: int, seconds: float, check: bool) -> tuple[float, float]:
    service = MetadataService.open(log_dir)
    if not check:
        service._check_encodes = _no_check  # type: ignore[method-assign]  # the baseline
    controller = service.controller
    for broker_id in (1, 2, 3):
        request = RegisterBroker(broker_id=broker_id)
        await service.submit(lambda image, r=request: controller.register_broker(image, r))  # type: ignore[misc]
    writes = 0
    deadline = time.monotonic() + seconds

    async def loop(index: int) -> None:
        nonlocal writes
        n = 0
        while time.monotonic() < deadline:
            topic = CreatableTopic(name=f"b{index}-{n}", num_partitions=1, replication_factor=1)
            await service.submit(lambda image, t=topic: controller.create_topics(image, [t]))  # type: ignore[misc]
            ref = TopicRef(name=topic.name)
            await service.submit(lambda image, r=ref: controller.delete_topics(image, [r]))  # type: ignore[misc]
            writes += 2
            n += 1

    cpu0, wall0 = time.process_time(), time.monotonic()
    await asyncio.gather(*(loop(i) for i in range(tasks)))
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    await service.aclose()
    return writes / wall, cpu / writes * 1e6


def main() -> None:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for check in (False, True) if round_ % 2 == 0 else (True, False):
                log_dir = Path(scratch) / f"{round_}-{check}"
                results[check].append(
                    asyncio.run(_run(log_dir, tasks=args.tasks, seconds=args.seconds, check=check))
                )
    rate = {c: statistics.median(r for r, _ in results[c]) for c in results}
    cpu = {c: statistics.median(u for _, u in results[c]) for c in results}
    print(f"{args.tasks} tasks, {args.rounds} rounds of {args.seconds:g} s each, alternating")
    print()
    print(f"{'measure':<24}{'with check':>14}{'baseline':>14}{'ratio':>8}")
    for name, values in (("writes/s", rate), ("CPU per write (us)", cpu)):
        ratio = values[True] / values[False]
        print(f"{name:<24}{values[True]:>14,.0f}{values[False]:>14,.0f}{ratio:>8.3f}")
    print("rounds (writes/s, CPU us/write):")
    for check in (True, False):
        label = "with check" if check else "baseline"
        print(f"  {label:<11}", ", ".join(f"{r:,.0f}/{u:,.0f}" for r, u in results[check]))


if __name__ == "__main__":
    main()
