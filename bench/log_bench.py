"""Log write and read rates beside raw fastavro on the same entries, measured in one run.

Usage: python bench/log_bench.py [--entries N] [--dir PATH]

Data: a metadata workload of topic creations — per topic a TopicRecord, 3 PartitionRecords
(replication factor 3), a ConfigRecord and a PartitionChangeRecord (ISR shrink) — cycled to N
entries. Rows:
  append x100      durable `append` of batches of 100 (fdatasync each) vs raw `fastavro.writer`
                   of the same entries (snappy, one file, no fsync)
  append_async x1  64 asyncio tasks appending one record at a time (group commit), vs the same
                   raw fastavro write
  read             sequential `read()` into LogEntry/record objects vs raw `fastavro.reader`
                   (dicts) over the same segment files
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import fastavro

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metadata_log import MetadataLog
from records import (
    DEFAULT_CODEC,
    ConfigRecord,
    ConfigResourceType,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    TopicRecord,
    Uuid,
)


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


def timed(fn: object) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()  # type: ignore[operator]  # a zero-argument callable
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=500_000)
    parser.add_argument("--async-entries", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None, help="scratch directory (default tmp)")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="mlog-bench-", dir=args.dir))
    try:
        run(args.entries, args.async_entries, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run(n: int, n_async: int, scratch: Path) -> None:
    records = workload(n)
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

    raw_write_s = timed(raw_write)

    log_dir = scratch / "log"
    log = MetadataLog.open(log_dir)

    def log_append() -> None:
        for start in range(0, n, 100):
            log.append(records[start : start + 100], principal="bench")

    append_s = timed(log_append)
    log.close()

    async_dir = scratch / "log-async"
    async_records = records[:n_async]

    async def group_commit() -> None:
        alog = MetadataLog.open(async_dir)
        per_task = len(async_records) // 64

        async def worker(k: int) -> None:
            for record in async_records[k * per_task : (k + 1) * per_task]:
                await alog.append_async([record], principal="bench")

        await asyncio.gather(*(worker(k) for k in range(64)))
        await alog.aclose()

    async_s = timed(lambda: asyncio.run(group_commit()))
    async_n = (len(async_records) // 64) * 64

    reader = MetadataLog.open(log_dir, read_only=True)
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

    raw_read_s = timed(raw_read)
    read_s = timed(log_read)
    reader.close()

    rows = [
        ("append batches of 100 (durable)", n, append_s, raw_write_s, n, 150_000, 0.6),
        ("append_async x64 tasks, 1 record", async_n, async_s, raw_write_s, n, 20_000, None),
        ("read into record objects", n, read_s, raw_read_s, n, 200_000, 0.75),
    ]
    mix = "topic + 3 partitions + config + ISR change"
    print(f"entries: {n:,} (mix: {mix}); python {sys.version.split()[0]}")
    header = f"{'operation':<36}{'records/s':>12}{'baseline/s':>12}{'ratio':>8}{'target':>18}"
    print(header)
    print("-" * len(header))
    for label, count, seconds, base_s, base_n, target_rate, target_ratio in rows:
        rate = count / seconds
        base_rate = base_n / base_s
        target = f">={target_rate / 1000:.0f}k" + (f", >={target_ratio}x" if target_ratio else "")
        print(f"{label:<36}{rate:>12,.0f}{base_rate:>12,.0f}{rate / base_rate:>8.2f}{target:>18}")
    print("baselines: raw fastavro.writer (snappy) for appends; raw fastavro.reader for reads")


if __name__ == "__main__":
    main()
