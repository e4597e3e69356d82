"""Replay and service rates beside raw fastavro decode of the same segments, in one run.

Usage: python bench/replay_bench.py [--topics N] [--partitions P] [--repeat K] [--dir PATH]
                                    [--service-topics M]
       python bench/replay_bench.py --against TREE [--topics N] [--service-topics M] [--repeat K]
       python bench/replay_bench.py --instructions N [--against TREE] [--service-topics M]

Data: a log describing N topics (default 100,000) of P partitions (default 10), replication
factor 3 over 6 brokers in 2 racks, written as the controller writes them (one TopicRecord, then
P PartitionRecords, per topic), plus the broker registrations. It is generated once per run into
a scratch directory (or reused from --dir/log if it is there and complete).

Rows (each median of K repetitions, each paired with its baseline right before it):
  replay           `load_image(log)`: read + decode + replay into the image, vs raw
                   `fastavro.reader` (dicts) over the same segment files
  image memory     RSS growth of a fresh process holding the image, per partition (and the
                   process's peak RSS); measured once, in a child process
  create topics    M topics of P partitions (default 10,000) created through the service API,
                   one request each (64 concurrent callers, group commit), vs the raw fastavro
                   write of the same records with one fsync per 100 topics

With --instructions N, create topics is counted in instructions instead of timed (callgrind, all
threads, which the host's load does not move): a run of M topics and a run of M + N topics, each
in a child process under `valgrind --tool=callgrind`, and the difference divided by N, so that
start-up and imports cancel out. With --against too, the two checkouts take turns, K rounds.

With --against, the baseline is another checkout of this code (bench/against.py): the log is
generated once, then replay, image memory and create topics each run in a child process per
checkout, the two alternating, K rounds; the table shows each checkout's median figure and the
median of the paired ratios (no fastavro baseline).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fastavro
from against import (
    Figure,
    code_env,
    measured_code,
    paired,
    print_table,
    reader_opener,
    run_child,
)

# The code measured: this checkout, or the one a parent `--against` run names.
sys.path.insert(0, str(measured_code()))

from api.service.service import MetadataService
from metadata_log import MetadataLog
from records import (
    FeatureLevelRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
    Uuid,
)
from records.codec import DEFAULT_CODEC
from replay.controller.commands import CreatableTopic, RegisterBroker
from replay.controller.controller import Controller
from replay.loader import load_image

BROKERS = 6
REPLICATION = 3

open_reader = reader_opener()
"""Opens a lock-free reader with the measured checkout's API (old or new)."""


def brokers() -> list[Record]:
    """The feature level and six brokers in two racks."""
    out: list[Record] = [FeatureLevelRecord(name="metadata.version", feature_level=1)]
    out.extend(
        RegisterBrokerRecord(
            broker_id=b,
            incarnation_id=Uuid.random(),
            broker_epoch=b,
            rack=f"rack-{b % 2}",
            fenced=False,
        )
        for b in range(BROKERS)
    )
    return out


def topic_records(index: int, partitions: int) -> list[Record]:
    """One topic as the controller writes it."""
    tid = Uuid.random()
    out: list[Record] = [TopicRecord(name=f"orders-{index:07d}", topic_id=tid)]
    for p in range(partitions):
        replicas = tuple((index + p + i) % BROKERS for i in range(REPLICATION))
        out.append(
            PartitionRecord(
                partition_id=p, topic_id=tid, replicas=replicas, isr=replicas, leader=replicas[0]
            )
        )
    return out


def generate(log_dir: Path, topics: int, partitions: int) -> int:
    """Write the log (unless a complete one is there); returns its entry count."""
    expected = 1 + BROKERS + topics * (1 + partitions)
    marker = log_dir / "bench-complete.json"
    if marker.exists() and json.loads(marker.read_text()) == [topics, partitions]:
        return expected
    shutil.rmtree(log_dir, ignore_errors=True)
    with MetadataLog.open(log_dir) as log:
        log.append(brokers(), principal="bench")
        batch: list[Record] = []
        for t in range(topics):
            batch.extend(topic_records(t, partitions))
            if len(batch) >= 2000:
                log.append(batch, principal="bench")
                batch = []
        if batch:
            log.append(batch, principal="bench")
        if log.end_offset != expected:
            raise SystemExit(f"generated {log.end_offset} entries, expected {expected}")
    marker.write_text(json.dumps([topics, partitions]))
    return expected


def raw_decode(log_dir: Path) -> int:
    """Baseline: fastavro's own reader over every segment, yielding dicts."""
    count = 0
    for path in sorted(log_dir.glob("*.avro")):
        with open(path, "rb") as f:
            for _ in fastavro.reader(f):
                count += 1
    return count


def replay(log_dir: Path) -> int:
    """Read-only open + load_image; returns the partitions in the image."""
    with open_reader(log_dir) as log:
        image = load_image(log)
    return image.topics.partition_count()


def timed(fn: object) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()  # type: ignore[operator]  # a zero-argument callable
    return time.perf_counter() - start


def memory_child(log_dir: Path) -> dict[str, int]:
    """In a fresh process: RSS growth of holding the image, its partitions and the peak RSS."""

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    with open_reader(log_dir) as log:
        gc.collect()
        before = rss()
        image = load_image(log)
        gc.collect()
        after = rss()
    partitions = image.topics.partition_count()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"partitions": partitions, "growth": after - before, "peak": peak}


CALLERS = 64


def service_create(service_dir: Path, topics: int, partitions: int) -> float:
    """Seconds to create `topics` topics through the service, one request each."""
    shutil.rmtree(service_dir, ignore_errors=True)
    service = MetadataService.open(service_dir, controller=Controller())
    for b in range(BROKERS):
        request = RegisterBroker(broker_id=b, rack=f"rack-{b % 2}")
        service.execute(functools.partial(service.controller.register_broker, request=request))

    async def create_all() -> None:
        async def caller(k: int) -> None:
            for t in range(k, topics, CALLERS):
                topic = CreatableTopic(
                    name=f"orders-{t:07d}", num_partitions=partitions, replication_factor=3
                )
                create = functools.partial(service.controller.create_topics, topics=[topic])
                (result,) = await service.submit(create)
                if result.outcome.error_code:
                    raise SystemExit(f"create failed: {result.outcome}")

        await asyncio.gather(*(caller(k) for k in range(CALLERS)))
        await service.aclose()

    gc.collect()
    start = time.perf_counter()
    asyncio.run(create_all())
    elapsed = time.perf_counter() - start
    with open_reader(service_dir) as log:
        expected = 1 + BROKERS + topics * (1 + partitions)
        if log.end_offset != expected:
            raise SystemExit(f"service wrote {log.end_offset} entries, expected {expected}")
    return elapsed


def raw_create(path: Path, topics: int, partitions: int) -> float:
    """Baseline: fastavro writes the same records, one flush + fsync per 100 topics."""
    schema = fastavro.parse_schema(DEFAULT_CODEC.entry_schema)
    now = time.time_ns() // 1_000_000
    per_topic = [topic_records(t, partitions) for t in range(topics)]
    gc.collect()
    start = time.perf_counter()
    offset = 0
    with open(path, "wb") as f:
        writer = fastavro.write.Writer(f, schema, codec="snappy")
        for t, records in enumerate(per_topic, 1):
            for record in records:
                writer.write(
                    {
                        "offset": offset,
                        "epoch": 1,
                        "timestamp": now,
                        "principal": "bench",
                        "record": DEFAULT_CODEC.encode_record(record),
                    }
                )
                offset += 1
            if t % 100 == 0 or t == topics:
                writer.flush()
                f.flush()
                os.fsync(f.fileno())
    return time.perf_counter() - start


# ----------------------------------------------------------------- one version against another

CHILD_OPS = ("replay", "memory", "create")


def child_figure(op: str, args: argparse.Namespace, scratch: Path) -> float:
    """One figure with the code on sys.path: replay r/s, image B/partition or create t/s."""
    log_dir = scratch / "log"
    if op == "replay":
        entries = generate(log_dir, args.topics, args.partitions)  # the parent's, checked
        return entries / timed(lambda: replay(log_dir))
    if op == "memory":
        mem = memory_child(log_dir)
        return mem["growth"] / mem["partitions"]
    service_dir = scratch / f"service-{os.getpid()}"
    topics: int = args.service_topics
    try:
        return topics / service_create(service_dir, topics, args.partitions)
    finally:
        shutil.rmtree(service_dir, ignore_errors=True)


def create_instructions(tree: Path, args: argparse.Namespace, scratch: Path) -> float:
    """Instructions per topic created through the service with `tree`'s code (callgrind)."""
    script = Path(__file__).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    counts: list[int] = []
    for topics in (args.service_topics, args.service_topics + args.instructions):
        out = scratch / "callgrind.out"
        argv = ["--child", "create", "--service-topics", str(topics)]
        argv += ["--partitions", str(args.partitions), "--dir", str(scratch)]
        callgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        result = subprocess.run(
            [*callgrind, sys.executable, str(script), *argv],
            env=code_env(tree),
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise SystemExit(f"create under callgrind with {tree} failed:\n{result.stderr[-4000:]}")
        total = 0
        for line in out.read_text().splitlines():
            if line.startswith("totals:"):
                total = int(line.split()[1])
        out.unlink()
        if total == 0:
            raise SystemExit(f"no instruction count in callgrind's output for {tree}")
        counts.append(total)
    added: int = args.instructions
    return (counts[1] - counts[0]) / added


def instructions(args: argparse.Namespace, scratch: Path) -> None:
    """`--instructions N`: instructions per topic created, this checkout (and `--against`)."""
    this = measured_code().resolve()
    label = f"create topics ({args.partitions} partitions, {CALLERS} callers), instructions"
    if args.against is None:
        counts = [create_instructions(this, args, scratch) for _ in range(args.repeat)]
        print(f"{label}: {statistics.median(counts):,.0f} per topic (median of {len(counts)})")
        return
    other = args.against.resolve()
    pairs = [
        paired(round_, other, lambda tree: create_instructions(tree, args, scratch), this=this)
        for round_ in range(args.repeat)
    ]
    print_table(
        [Figure(label=label, pairs=pairs, unit="/topic", lower_is_better=True)], other=other
    )


def against(args: argparse.Namespace, scratch: Path) -> None:
    """Each figure with this checkout and with `--against`, alternating, in child processes."""
    start = time.perf_counter()
    entries = generate(scratch / "log", args.topics, args.partitions)
    print(f"log: {entries:,} entries, generated/checked in {time.perf_counter() - start:.1f}s")
    common = ["--topics", str(args.topics), "--partitions", str(args.partitions)]
    common += ["--service-topics", str(args.service_topics), "--dir", str(scratch)]
    script = Path(__file__).resolve()
    other = args.against.resolve()
    pairs: dict[str, list[tuple[float, float]]] = {op: [] for op in CHILD_OPS}
    for round_ in range(args.repeat):
        for op in CHILD_OPS:

            def measure(tree: Path, op: str = op) -> float:
                value: float = run_child(script, ["--child", op, *common], tree)["value"]
                return value

            pairs[op].append(paired(round_, other, measure))
    print_table(
        [
            Figure(label="replay (load_image)", pairs=pairs["replay"], unit="r/s"),
            Figure(
                label="image memory",
                pairs=pairs["memory"],
                unit="B/part",
                lower_is_better=True,
            ),
            Figure(
                label=f"create topics ({args.partitions} partitions, {CALLERS} callers)",
                pairs=pairs["create"],
                unit="t/s",
            ),
        ],
        other=other,
    )


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--service-topics", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=None, help="keep the generated log here")
    parser.add_argument(
        "--against", type=Path, default=None, help="another checkout to compare with (baseline)"
    )
    parser.add_argument(
        "--instructions",
        type=int,
        default=None,
        metavar="N",
        help="count create topics' instructions per topic under callgrind (N more topics)",
    )
    parser.add_argument("--memory-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=CHILD_OPS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        print(json.dumps(memory_child(args.memory_child)))
        return
    scratch = args.dir or Path(tempfile.mkdtemp(prefix="mlog-replay-bench-"))
    log_dir = scratch / "log"
    if args.child:
        print(json.dumps({"value": child_figure(args.child, args, scratch)}))
        return
    try:
        if args.instructions:
            instructions(args, scratch)
            return
        if args.against:
            against(args, scratch)
            return
        start = time.perf_counter()
        entries = generate(log_dir, args.topics, args.partitions)
        print(f"log: {entries:,} entries, generated/checked in {time.perf_counter() - start:.1f}s")
        pairs = []
        for _ in range(args.repeat):
            base = timed(lambda: raw_decode(log_dir))
            ours = timed(lambda: replay(log_dir))
            pairs.append((entries / ours, entries / base))
        ours_rate = statistics.median(o for o, _ in pairs)
        base_rate = statistics.median(b for _, b in pairs)
        ratio = statistics.median(o / b for o, b in pairs)
        child = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(log_dir)],
            check=True,
            capture_output=True,
            text=True,
        )
        mem = json.loads(child.stdout)
        creates = []
        for _ in range(args.repeat):
            base = raw_create(scratch / "raw-create.avro", args.service_topics, args.partitions)
            ours = service_create(scratch / "service", args.service_topics, args.partitions)
            creates.append((args.service_topics / ours, args.service_topics / base))
        create_rate = statistics.median(o for o, _ in creates)
        create_base = statistics.median(b for _, b in creates)
        create_ratio = statistics.median(o / b for o, b in creates)
        print()
        print(f"{'measure':<16}{'ours':>16}{'baseline':>16}{'ratio':>8}  target")
        print(
            f"{'replay':<16}{ours_rate:>12,.0f} r/s{base_rate:>12,.0f} r/s{ratio:>8.2f}"
            "  >= 200,000 r/s, >= 0.7x raw fastavro decode"
        )
        per_partition = mem["growth"] / mem["partitions"]
        print(
            f"{'image memory':<16}{per_partition:>10,.0f} B/part{'':>16}{'':>8}"
            f"  <= 300 B/partition (peak RSS {mem['peak'] / 2**20:,.0f} MiB)"
        )
        print(
            f"{'create topics':<16}{create_rate:>12,.0f} t/s{create_base:>12,.0f} t/s"
            f"{create_ratio:>8.2f}  >= 2,000 topics/s ({args.partitions} partitions each, "
            f"{CALLERS} callers)"
        )
    finally:
        if args.dir is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
