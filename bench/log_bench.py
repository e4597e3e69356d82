"""Log write and read rates beside raw fastavro on the same entries, measured in one run.

Usage: python bench/log_bench.py [--entries N] [--repeat K] [--dir PATH] [--reads-only]
       python bench/log_bench.py --against TREE [--entries N] [--repeat K]

With --against, the baseline is another checkout of this code (bench/against.py): each
operation runs in a child process per version, the two alternating, timed inside the child,
and the table shows each version's median rate and the median of the paired ratios.

Each measurement runs K times (default 5), each time right after its baseline; the table shows
median rates and the median of the per-repetition ratios. fsync latency and CPU speed on this
machine drift by +-30% between runs, so unpaired figures are not comparable.

Data (--mix): "topics" (default), topic creations — per topic a TopicRecord, 3 PartitionRecords
(replication factor 3), a ConfigRecord and a PartitionChangeRecord (ISR shrink); or "changes",
steady-state churn — PartitionChangeRecords (leader/ISR moves), broker fence/unfence and config
updates. Cycled to N entries. Rows:
  append x100      durable `append` of batches of 100 (fdatasync each) vs raw `fastavro.writer`
                   of the same entries (snappy, one file, no fsync)
  append_async x1  64 asyncio tasks appending one record at a time (group commit), vs the same
                   raw fastavro write
  read             sequential `read()` into LogEntry/record objects vs raw `fastavro.reader`
                   (dicts) over the same segment files
  read vs replay   the same `read()` vs `load_image` (decode and replay into an image) over the
                   same segments: the public read path should keep up with replay (>=0.8x);
                   "topics" mix only (the "changes" mix names topics it never creates)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import fastavro
from against import Figure, measured_code, paired, print_table, reader_opener, run_child

# The code measured: this checkout, or the one a parent `--against` run names.
sys.path.insert(0, str(measured_code()))

from metadata_log import MetadataLog
from records import (
    DEFAULT_CODEC,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FencingChange,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    TopicRecord,
    Uuid,
)
from replay.loader import load_image

open_reader = reader_opener()
"""Opens a lock-free reader with the measured checkout's API (old or new)."""


def changes_workload(n: int) -> list[Record]:
    topic_ids = [Uuid.random() for _ in range(100)]
    records: list[Record] = []
    i = 0
    while len(records) < n:
        tid = topic_ids[i % len(topic_ids)]
        leader = i % 6
        records.append(
            PartitionChangeRecord(
                partition_id=i % 10, topic_id=tid, leader=leader, isr=(leader, (leader + 1) % 6)
            )
        )
        records.append(PartitionChangeRecord(partition_id=i % 10, topic_id=tid, isr=(leader,)))
        records.append(
            BrokerRegistrationChangeRecord(
                broker_id=i % 6,
                broker_epoch=i,
                fenced=FencingChange.FENCE if i % 2 else FencingChange.UNFENCE,
            )
        )
        records.append(
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC,
                resource_name=f"orders-{i % 100:07d}",
                name="retention.ms",
                value=str(3_600_000 * (i % 48 + 1)),
            )
        )
        i += 1
    return records[:n]


def workload(n: int) -> list[Record]:
    records: list[Record] = []
    topic = 0
    while len(records) < n:
        tid = Uuid.random()
        name = f"orders-{topic:07d}"
        records.append(TopicRecord(name=name, topic_id=tid))
        for p in range(3):
            replicas = tuple((p + i) % 6 for i in range(3))
            records.append(
                PartitionRecord(
                    partition_id=p,
                    topic_id=tid,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                )
            )
        records.append(
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC,
                resource_name=name,
                name="retention.ms",
                value="604800000",
            )
        )
        records.append(PartitionChangeRecord(partition_id=0, topic_id=tid, isr=(0, 1)))
        topic += 1
    return records[:n]


def timed(fn: Callable[[], object], reset: Callable[[], object]) -> float:
    reset()
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One measured operation, paired with the baseline it is compared to."""

    label: str
    count: int
    run: Callable[[], object]
    reset: Callable[[], object]
    base_count: int
    base_run: Callable[[], object]
    base_reset: Callable[[], object]
    target: str


def measure(rows: list[Row], repeat: int) -> list[tuple[Row, float, float, float]]:
    """(row, median rate, median baseline rate, median of per-repetition ratios) per row.

    Each repetition runs every baseline right before its operation, so both see the same
    machine state; the ratio of each pair is robust to drift between repetitions.
    """
    rates: dict[str, list[tuple[float, float]]] = {row.label: [] for row in rows}
    for _ in range(repeat):
        for row in rows:
            base = row.base_count / timed(row.base_run, row.base_reset)
            ours = row.count / timed(row.run, row.reset)
            rates[row.label].append((ours, base))
    return [
        (
            row,
            statistics.median(o for o, _ in rates[row.label]),
            statistics.median(b for _, b in rates[row.label]),
            statistics.median(o / b for o, b in rates[row.label]),
        )
        for row in rows
    ]


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=300_000)
    parser.add_argument("--async-entries", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--mix", choices=("topics", "changes"), default="topics")
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory (default tmp)")
    parser.add_argument("--reads-only", action="store_true", help="only the read rows")
    parser.add_argument(
        "--against", type=Path, default=None, help="another checkout to compare with (baseline)"
    )
    parser.add_argument(
        "--ops",
        default=",".join(CHILD_OPS),
        help=f"with --against: which operations (default {','.join(CHILD_OPS)})",
    )
    parser.add_argument("--child", choices=CHILD_OPS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="mlog-bench-", dir=args.dir))
    try:
        if args.child:
            print(json.dumps({"seconds": child(args.child, args, scratch)}))
        elif args.against:
            against(args, scratch)
        else:
            run(
                args.entries,
                args.async_entries,
                args.repeat,
                args.mix,
                scratch,
                reads_only=args.reads_only,
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# ----------------------------------------------------------------- one version against another

CHILD_OPS = ("append", "append_async", "open", "read")
CHILD_LABELS = {
    "append": "append batches of 100 (durable)",
    "append_async": "append_async x64 tasks, 1 record",
    "open": "open read-only (scan newest segment)",
    "read": "read into record objects",
}


def child(op: str, args: argparse.Namespace, scratch: Path) -> float:
    """Run one operation with the code on sys.path; the seconds it took (setup excluded)."""
    n = args.entries if op != "append_async" else (args.async_entries // 64) * 64
    records = workload(n) if args.mix == "topics" else changes_workload(n)
    directory = scratch / "log"
    if op in ("open", "read"):
        # Setup, not measured: the same blocks, without waiting for the disk.
        real_fdatasync = os.fdatasync
        os.fdatasync = lambda fd: None
        try:
            with MetadataLog.open(directory) as log:
                for first in range(0, n, 100):
                    log.append(records[first : first + 100], principal="bench")
        finally:
            os.fdatasync = real_fdatasync
    gc.collect()
    began = time.perf_counter()
    if op == "append":
        with MetadataLog.open(directory) as log:
            for first in range(0, n, 100):
                log.append(records[first : first + 100], principal="bench")
    elif op == "append_async":

        async def group_commit() -> None:
            alog = MetadataLog.open(directory)
            per_task = n // 64

            async def worker(k: int) -> None:
                for record in records[k * per_task : (k + 1) * per_task]:
                    await alog.append_async([record], principal="bench")

            await asyncio.gather(*(worker(k) for k in range(64)))
            await alog.aclose()

        asyncio.run(group_commit())
    elif op == "open":
        open_reader(directory).close()
    else:
        with open_reader(directory) as log:
            began = time.perf_counter()
            count = sum(1 for _ in log.read())
        if count != n:
            raise SystemExit(f"read saw {count} entries, expected {n}")
    return time.perf_counter() - began


def against(args: argparse.Namespace, scratch: Path) -> None:
    """Each operation with this checkout and with `--against`, alternating, in child processes."""
    common = ["--entries", str(args.entries), "--async-entries", str(args.async_entries)]
    common += ["--mix", args.mix, "--dir", str(scratch)]
    script = Path(__file__).resolve()
    other = args.against.resolve()
    ops = [op for op in CHILD_OPS if op in args.ops.split(",")]

    def rate(op: str) -> Callable[[Path], float]:
        n = args.entries if op != "append_async" else (args.async_entries // 64) * 64
        units = 1 if op == "open" else n

        def measure(tree: Path) -> float:
            seconds: float = run_child(script, ["--child", op, *common], tree)["seconds"]
            return units / seconds

        return measure

    pairs: dict[str, list[tuple[float, float]]] = {op: [] for op in ops}
    for repetition in range(args.repeat):
        for op in ops:
            pairs[op].append(paired(repetition, other, rate(op)))
    rows = [Figure(label=CHILD_LABELS[op], pairs=pairs[op]) for op in ops]
    print(f"entries: {args.entries:,} (mix: {args.mix})")
    print_table(rows, other=other)
    print("open: opens per second (one open of the whole log, its newest segment scanned)")


def run(n: int, n_async: int, repeat: int, mix: str, scratch: Path, *, reads_only: bool) -> None:
    records = workload(n) if mix == "topics" else changes_workload(n)
    now = time.time_ns() // 1_000_000
    dicts = [
        {
            "offset": i,
            "epoch": 1,
            "timestamp": now,
            "principal": "bench",
            "record": DEFAULT_CODEC.encode_record(r),
        }
        for i, r in enumerate(records)
    ]
    schema = fastavro.parse_schema(DEFAULT_CODEC.entry_schema)
    raw_path = scratch / "raw.avro"

    def raw_write() -> None:
        with open(raw_path, "wb") as f:
            fastavro.writer(f, schema, dicts, codec="snappy")
            f.flush()
            os.fsync(f.fileno())

    log_dir = scratch / "log"

    def log_append() -> None:
        with MetadataLog.open(log_dir) as log:
            for start in range(0, n, 100):
                log.append(records[start : start + 100], principal="bench")

    def log_append_no_fsync() -> None:
        # Diagnostic only: fdatasync stubbed out, to split CPU cost from disk latency.
        real_fdatasync = os.fdatasync
        os.fdatasync = lambda fd: None
        try:
            log_append()
        finally:
            os.fdatasync = real_fdatasync

    async_dir = scratch / "log-async"
    async_records = records[:n_async]
    async_n = (len(async_records) // 64) * 64

    async def group_commit() -> None:
        alog = MetadataLog.open(async_dir)
        per_task = len(async_records) // 64

        async def worker(k: int) -> None:
            for record in async_records[k * per_task : (k + 1) * per_task]:
                await alog.append_async([record], principal="bench")

        await asyncio.gather(*(worker(k) for k in range(64)))
        await alog.aclose()

    read_dir = scratch / "log-read"
    log_append()
    shutil.copytree(log_dir, read_dir)
    reader = open_reader(read_dir)
    segment_paths = [s.path for s in reader.segments()]

    def raw_read() -> None:
        count = 0
        for path in segment_paths:
            with open(path, "rb") as f:
                for _ in fastavro.reader(f):
                    count += 1
        if count != n:
            raise SystemExit(f"raw read saw {count} entries, expected {n}")

    def log_read() -> None:
        count = 0
        for _ in reader.read():
            count += 1
        if count != n:
            raise SystemExit(f"log read saw {count} entries, expected {n}")

    def replay_read() -> None:
        image = load_image(reader)
        if image.provenance.offset != n - 1:
            raise SystemExit(f"replay ended at {image.provenance.offset}, expected {n - 1}")

    def fresh(path: Path) -> Callable[[], None]:
        return lambda: shutil.rmtree(path, ignore_errors=True)

    def drop_raw() -> None:
        raw_path.unlink(missing_ok=True)

    def nothing() -> None:
        return None

    rows = [
        Row(
            label="append batches of 100 (durable)",
            count=n,
            run=log_append,
            reset=fresh(log_dir),
            base_count=n,
            base_run=raw_write,
            base_reset=drop_raw,
            target=">=150k, >=0.6x",
        ),
        Row(
            label="  same, fdatasync stubbed (CPU only)",
            count=n,
            run=log_append_no_fsync,
            reset=fresh(log_dir),
            base_count=n,
            base_run=raw_write,
            base_reset=drop_raw,
            target="(diagnostic)",
        ),
        Row(
            label="append_async x64 tasks, 1 record",
            count=async_n,
            run=lambda: asyncio.run(group_commit()),
            reset=fresh(async_dir),
            base_count=n,
            base_run=raw_write,
            base_reset=drop_raw,
            target=">=20k",
        ),
        Row(
            label="read into record objects",
            count=n,
            run=log_read,
            reset=nothing,
            base_count=n,
            base_run=raw_read,
            base_reset=nothing,
            target=">=200k, >=0.75x",
        ),
    ]
    if mix == "topics":  # the "changes" mix names topics it never creates: it does not replay
        rows.append(
            Row(
                label="read vs replay (load_image)",
                count=n,
                run=log_read,
                reset=nothing,
                base_count=n,
                base_run=replay_read,
                base_reset=nothing,
                target=">=0.8x",
            )
        )
    if reads_only:
        rows = [row for row in rows if row.label.startswith("read")]
    results = measure(rows, repeat)
    reader.close()
    mix = {
        "topics": "topic + 3 partitions + config + ISR change",
        "changes": "2 partition changes + broker fence/unfence + config update",
    }[mix]
    python = sys.version.split()[0]
    print(f"entries: {n:,} (mix: {mix}); median of {repeat} paired runs; python {python}")
    header = f"{'operation':<38}{'records/s':>11}{'baseline/s':>12}{'ratio':>7}{'target':>17}"
    print(header)
    print("-" * len(header))
    for row, rate, base_rate, ratio in results:
        print(f"{row.label:<38}{rate:>11,.0f}{base_rate:>12,.0f}{ratio:>7.2f}{row.target:>17}")
    print(f"read decoder: {reader.codec.decoder_name}")
    print(
        "baselines: raw fastavro.writer (snappy) for appends; raw fastavro.reader for reads;"
        " load_image over the same segments for read vs replay"
    )
    print("ratio: median over repetitions of (ours / baseline run right before it)")


if __name__ == "__main__":
    main()
