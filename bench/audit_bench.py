"""Audit data source and Spark state replay over a large log and its archive, beside raw fastavro.

Usage: python bench/audit_bench.py [--entries N] [--dir PATH] [--master local[2]] [--repeat K]
                                   [--skip-state] [--skip-directory] [--small-entries 2000]
                                   [--skip-talk]

Data: a log of exactly N entries (default 10,000,000) as a busy cluster writes it: six brokers,
topics of 10 partitions (TopicRecord + PartitionRecords), and between them ISR/leader changes
(sparse PartitionChangeRecords), config changes, topic deletions, re-creations of deleted names,
and partition reductions (DeleteTopicPartitions, mode changes to READ_ONLY then NONE, purge).
Generated once into --dir (default /tmp/mlog-audit-bench) and reused while complete; then its
N entries archived (`file://` archive in --dir/archive, the log's default 64 MiB segments),
once too.

Rows (medians of K repetitions, each paired with its baseline measured right before it, and
the spread of the ratios):
  archive   the `metadata_log` data source reading the archive (`--master`, default local[2]):
            every row with every column written to Spark's `noop` sink, vs a raw
            single-process `fastavro.reader` scan (dicts) of the same archived segment files
  read      the same over the log directory (skipped with --skip-directory)
  state     `state_at(N - 1)` over the archive: the Spark replay of topics and partitions at
            the last offset, forced to completion (both tables counted), vs `load_image(log)`
            in process (the in-process replay the state is checked against) right before it

Rows of `mlog audit` as a user runs it (whole processes, local[*], on a log of
--small-entries entries generated the same way), measured before the rows above:
  first line  time from starting `mlog audit who-changed` to its first line on stderr, vs
              `mlog --help` run to its end (an interpreter start and the CLI's imports)
  sql error   `mlog audit sql` with a statement Spark's parser refuses after a first word it
              accepts (found by Spark's parser in a JVM of its own, started beside Spark's:
              replay/audit/parser_jvm.py), vs a bare Spark start (below): the time to the
              error
  cold        `mlog audit who-changed --principal svc-0` to its answer, vs a bare Spark start
              with a trivial query (`SparkSession.builder.getOrCreate()`, `range(1).count()`)
  warm        the same named query again in `mlog audit shell` (the shell's own timing of the
              query), vs `SELECT 1` in the same shell
And on the N-entry archive (`--archive-url`), medians of K: a one-shot `mlog audit sql` over
its last 100,000 entries, cold (whole process, vs a bare Spark start), and the same statement
again in `mlog audit shell` (warm, vs `SELECT 1` in it).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fastavro

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metadata_log import LogConfig, LogReader, MetadataLog
from metadata_log.archive import ArchiveLocation, SegmentArchiver, read_manifest
from records import (
    ConfigRecord,
    ConfigResourceType,
    DeleteTopicPartitionsRecord,
    FeatureLevelRecord,
    Mode,
    PartitionChangeRecord,
    PartitionRecord,
    PurgeTopicPartitionsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    Uuid,
)
from replay.loader import load_image

BROKERS = 6
PARTITIONS = 10


def _replicas(start: int, partition: int) -> tuple[int, ...]:
    return tuple((start + partition + i) % BROKERS for i in range(3))


def _topic(name: str, start: int, rng: random.Random) -> tuple[Uuid, list[Record]]:
    tid = Uuid(rng.randbytes(16))
    out: list[Record] = [TopicRecord(name=name, topic_id=tid)]
    for p in range(PARTITIONS):
        replicas = _replicas(start, p)
        out.append(
            PartitionRecord(
                partition_id=p, topic_id=tid, replicas=replicas, isr=replicas, leader=replicas[0]
            )
        )
    return tid, out


def workload(seed: int = 7) -> Iterator[list[Record]]:
    """Endless batches of valid records (each batch one controller result)."""
    rng = random.Random(seed)
    first: list[Record] = [FeatureLevelRecord(name="metadata.version", feature_level=1)]
    first.extend(
        RegisterBrokerRecord(
            broker_id=b,
            incarnation_id=Uuid(rng.randbytes(16)),
            broker_epoch=b,
            rack=f"rack-{b % 2}",
            fenced=False,
        )
        for b in range(BROKERS)
    )
    yield first
    live: dict[Uuid, tuple[str, int]] = {}  # id -> (name, partitions)
    starts: dict[Uuid, int] = {}
    ids: list[Uuid] = []
    deleted: list[str] = []
    reducing: dict[Uuid, int] = {}
    n = 0
    while True:
        n += 1
        name = f"orders-{n:08d}"
        if deleted and n % 7 == 0:
            name = deleted.pop()
        start = rng.randrange(BROKERS)
        tid, records = _topic(name, start, rng)
        live[tid] = (name, PARTITIONS)
        starts[tid] = start
        ids.append(tid)
        yield records
        for _ in range(4):
            victim = ids[rng.randrange(len(ids))]
            if victim not in live:
                continue
            p = rng.randrange(live[victim][1])
            replicas = _replicas(starts[victim], p)
            if rng.random() < 0.5:
                # The ISR keeps the first replica, the only broker ever leader here (or the
                # leader is -1): replay refuses a leader outside the ISR.
                isr = tuple(sorted({replicas[0], *rng.sample(replicas, rng.randint(1, 3))}))
                change = PartitionChangeRecord(partition_id=p, topic_id=victim, isr=isr)
            else:
                change = PartitionChangeRecord(partition_id=p, topic_id=victim, leader=-1)
            yield [change]
        yield [
            ConfigRecord(
                resource_type=ConfigResourceType.TOPIC,
                resource_name=name,
                name="retention.ms",
                value=str(rng.randrange(10**6)),
            )
        ]
        if n % 50 == 0:
            victim = ids[rng.randrange(len(ids))]
            if victim in live and victim not in reducing:
                deleted.append(live.pop(victim)[0])
                yield [RemoveTopicRecord(topic_id=victim)]
        if n % 40 == 0:
            victim = ids[rng.randrange(len(ids))]
            if victim in live and victim not in reducing and live[victim][1] > 1:
                keep = rng.randint(1, live[victim][1] - 1)
                reducing[victim] = keep
                batch: list[Record] = [
                    DeleteTopicPartitionsRecord(
                        topic_id=victim, partition_count=keep, delete_after_ms=0, created_ms=0
                    )
                ]
                batch.extend(
                    PartitionChangeRecord(partition_id=p, topic_id=victim, mode=Mode.READ_ONLY)
                    for p in range(keep, live[victim][1])
                )
                yield batch
        if n % 40 == 20:
            for victim, keep in list(reducing.items()):
                batch = [
                    PartitionChangeRecord(partition_id=p, topic_id=victim, mode=Mode.NONE)
                    for p in range(keep, live[victim][1])
                ]
                batch.append(PurgeTopicPartitionsRecord(topic_id=victim, partition_count=keep))
                live[victim] = (live[victim][0], keep)
                del reducing[victim]
                yield batch


def generate(log_dir: Path, entries: int) -> None:
    """Write exactly `entries` entries (unless a complete log of that size is there)."""
    marker = log_dir / "bench-complete.json"
    if marker.exists() and json.loads(marker.read_text()) == {"entries": entries}:
        return
    shutil.rmtree(log_dir, ignore_errors=True)
    with MetadataLog.open(log_dir) as log:
        batch: list[Record] = []
        written = 0
        for records in workload():
            batch.extend(records)
            if len(batch) >= 2000 or written + len(batch) >= entries:
                # Whole controller results only, except that the very last one is cut to fit.
                batch = batch[: entries - written]
                log.append(batch, principal=f"svc-{written % 3}")
                written += len(batch)
                batch = []
                if written >= entries:
                    break
        if log.end_offset != entries:
            raise SystemExit(f"generated {log.end_offset} entries, expected {entries}")
    marker.write_text(json.dumps({"entries": entries}))


ARCHIVE_CLUSTER = "audit-bench"


def generate_archive(log_dir: Path, archive_dir: Path, entries: int) -> None:
    """Archive the log's first `entries` entries to `archive_dir` (unless already complete).

    The log's last segment is sealed first by one more entry written a while later
    (`segment.ms` of 1 ms rolls it), so every one of the `entries` is in a sealed segment and
    archived; that entry stays in the local log only.
    """
    marker = archive_dir.parent / "archive-complete.json"
    if marker.exists() and json.loads(marker.read_text()) == {"entries": entries}:
        return
    shutil.rmtree(archive_dir, ignore_errors=True)
    with LogReader.open(log_dir) as log:
        sealed = log.end_offset > entries
    if not sealed:
        time.sleep(0.01)
        with MetadataLog.open(log_dir, config=LogConfig(segment_ms=1)) as log:
            log.append([FeatureLevelRecord(name="bench.sealed", feature_level=1)])
    location = ArchiveLocation.open(archive_dir.as_uri())
    archiver = SegmentArchiver(
        location, cluster_id=ARCHIVE_CLUSTER, work_dir=archive_dir.parent / "archive-work"
    )
    with LogReader.open(log_dir) as log:
        report = archiver.archive(log, committed_end=log.end_offset)
    if report.archived_end != entries:
        raise SystemExit(f"archived {report.archived_end} entries, expected {entries}")
    marker.write_text(json.dumps({"entries": entries}))


def archived_files(archive_dir: Path) -> list[Path]:
    """The archived segment files in offset order (the manifest's run)."""
    manifest = read_manifest(ArchiveLocation.open(archive_dir.as_uri()))
    return [archive_dir / entry.objects["segment"].name for entry in manifest.run]


def raw_scan(log_dir: Path) -> int:
    """Baseline: fastavro's own reader over every segment, yielding dicts, one process."""
    return raw_scan_files(sorted(log_dir.glob("*.avro")))


def raw_scan_files(paths: list[Path]) -> int:
    """Read `paths` with fastavro's own reader, yielding dicts, one process."""
    count = 0
    for path in paths:
        with open(path, "rb") as f:
            for _ in fastavro.reader(f):
                count += 1
    return count


def timed(fn: object) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()  # type: ignore[operator]  # a zero-argument callable
    return time.perf_counter() - start


def load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


ROOT = Path(__file__).resolve().parents[1]
WHO = ("who-changed", "--principal", "svc-0")
BARE_SPARK = (
    "from pyspark.sql import SparkSession;"
    "s = SparkSession.builder.master('local[*]').config('spark.ui.enabled', 'false')"
    ".getOrCreate(); s.range(1).count()"
)


SETTLE_S = 10.0
"""Seconds to wait after the SQL error's run (see `talk_rows`)."""


def _mlog(*argv: str) -> list[str]:
    return [sys.executable, "-m", "api.cli", *argv]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _run(command: list[str], stdin: str | None = None) -> tuple[float, str, str]:
    """Run a whole process; (seconds, stdout, stderr). Fails the bench unless it exits 0."""
    start = time.perf_counter()
    done = subprocess.run(
        command, input=stdin, capture_output=True, text=True, env=_env(), check=False
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, done.stdout, done.stderr


def _first_line(command: list[str]) -> tuple[float, float]:
    """(seconds to the first stderr line, seconds to the end) of a whole process."""
    start = time.perf_counter()
    child = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), text=True
    )
    assert child.stderr is not None and child.stdout is not None
    first = child.stderr.readline()
    first_seconds = time.perf_counter() - start
    _, rest = child.communicate()  # both pipes at once: a full stdout pipe would block it
    if child.returncode != 0 or not first:
        raise SystemExit(f"{' '.join(command)} exited {child.returncode}: {first}{rest[-2000:]}")
    return first_seconds, time.perf_counter() - start


def _shell_seconds(stderr: str) -> list[float]:
    """The per-query times `mlog audit shell` prints: `mlog: (N rows, X s)`."""
    times = []
    for line in stderr.splitlines():
        if line.startswith("mlog: (") and line.endswith(" s)"):
            times.append(float(line.rsplit(" ", 2)[-2]))
    return times


def talk_rows(data_dir: Path) -> list[str]:
    """The rows of `mlog audit` as a user runs it on the small log (see the docstring)."""
    data = ("--data-dir", str(data_dir))
    help_seconds, _, _ = _run(_mlog("--help"))
    first_seconds, cold_seconds = _first_line(_mlog("audit", *WHO, *data))
    bare_seconds, _, _ = _run([sys.executable, "-c", BARE_SPARK])
    error_start = time.perf_counter()
    refused = subprocess.run(
        _mlog("audit", "sql", "SELECT principal count(*) FROM metadata_log", *data),
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
    )
    error_seconds = time.perf_counter() - error_start
    if refused.returncode != 2 or "PARSE_SYNTAX_ERROR" not in refused.stderr:
        raise SystemExit(f"the SQL error was not reported as one: {refused.stderr[-2000:]}")
    # The refused command left Spark's own launch (started beside the parse) to notice its
    # end and exit: let it, so the shell's rows below do not share the CPU with it.
    time.sleep(SETTLE_S)
    script = f"{' '.join(WHO)}\n{' '.join(WHO)}\nSELECT 1\n"
    _, _, shell_err = _run(_mlog("audit", "shell", *data), stdin=script)
    times = _shell_seconds(shell_err)
    if len(times) != 3:
        raise SystemExit(f"the shell did not answer three queries: {shell_err[-2000:]}")
    warm, trivial = times[1], times[2]
    return [
        f"{'first line':<12}{first_seconds:>10.2f} s{help_seconds:>14.2f} s"
        f"{first_seconds / help_seconds:>8.2f}  <= 2 s (baseline: mlog --help)",
        f"{'sql error':<12}{error_seconds:>10.2f} s{bare_seconds:>14.2f} s"
        f"{error_seconds / bare_seconds:>8.2f}  <= 3 s (baseline: a bare Spark start)",
        f"{'cold':<12}{cold_seconds:>10.2f} s{bare_seconds:>14.2f} s"
        f"{cold_seconds / bare_seconds:>8.2f}  <= 20 s (baseline: a bare Spark start)",
        f"{'warm':<12}{warm:>10.2f} s{trivial:>14.2f} s{warm / trivial:>8.2f}"
        "  <= 3 s (mlog audit shell; baseline: SELECT 1 in it)",
    ]


def archive_talk_rows(url: str, entries: int, rounds: int) -> list[str]:
    """First answers on the archive: a one-shot `mlog audit sql` cold, then warm in the shell.

    The statement reads the archive's last entries (`offset >= N - 100,000`): the offset is
    pushed down, so only the last segment is read. Medians of `rounds` and their spread.
    """
    statement = (
        "SELECT principal, count(*) AS changes FROM metadata_log "
        f"WHERE offset >= {max(0, entries - 100_000)} GROUP BY principal ORDER BY principal"
    )
    archive = ("--archive-url", url)
    colds = [_run(_mlog("audit", "sql", statement, *archive))[0] for _ in range(rounds)]
    bare = [_run([sys.executable, "-c", BARE_SPARK])[0] for _ in range(rounds)]
    script = "\n".join([statement] * (rounds + 1) + ["SELECT 1"] * rounds) + "\n"
    _, _, shell_err = _run(_mlog("audit", "shell", *archive), stdin=script)
    times = _shell_seconds(shell_err)
    if len(times) != 2 * rounds + 1:
        raise SystemExit(f"the shell did not answer every query: {shell_err[-2000:]}")
    warms, trivial = times[1 : rounds + 1], times[rounds + 1 :]
    return [
        _timed_row("cold", colds, bare, "<= 20 s (one-shot mlog audit sql; baseline: bare Spark)"),
        _timed_row("warm", warms, trivial, "<= 2 s (mlog audit shell; baseline: SELECT 1 in it)"),
    ]


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}"


def _timed_row(name: str, ours: list[float], base: list[float], target: str) -> str:
    mine, theirs = statistics.median(ours), statistics.median(base)
    return (
        f"{name:<12}{mine:>10.2f} s{theirs:>14.2f} s{mine / theirs:>8.2f}  {target}; "
        f"spread {_spread(ours)} s vs {_spread(base)} s"
    )


def read_row(
    name: str, entries: int, ours: Callable[[], object], base: Callable[[], object], rounds: int
) -> str:
    """Rows per second of `ours` (Spark) and `base` (raw fastavro), paired round by round."""
    pairs = []
    for _ in range(rounds):
        baseline = timed(base)
        mine = timed(ours)
        pairs.append((entries / mine, entries / baseline))
    rate = statistics.median(o for o, _ in pairs)
    base_rate = statistics.median(b for _, b in pairs)
    ratio = statistics.median(o / b for o, b in pairs)
    ratios = [o / b for o, b in pairs]
    return (
        f"{name:<8}{rate:>14,.0f} r/s{base_rate:>14,.0f} r/s{ratio:>8.2f}  >= 0.8x; ratio "
        f"spread {min(ratios):.2f}-{max(ratios):.2f}"
    )


def state_row(spark: Any, url: str, log_dir: Path, entries: int, rounds: int) -> str:
    """`state_at(N - 1)` over the archive vs `load_image` in process, paired round by round."""
    from replay.audit.state import state_at

    counts: list[tuple[int, int]] = []

    def run_state() -> None:
        state = state_at(spark, url, entries - 1)
        try:
            counts.append((state.topics.count(), state.partitions.count()))
        finally:
            state.release()

    def run_image() -> None:
        with LogReader.open(log_dir) as log:
            load_image(log, lte=entries - 1)

    images, states = [], []
    for _ in range(rounds):
        images.append(timed(run_image))
        states.append(timed(run_state))
    if len(set(counts)) != 1:
        raise SystemExit(f"the state differs between rounds: {counts}")
    topics, partitions = counts[0]
    return _timed_row(
        "state",
        states,
        images,
        f"<= 60 s (state_at over the archive, {topics:,} topics, {partitions:,} partitions; "
        "baseline: load_image in process)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000_000)
    parser.add_argument("--dir", type=Path, default=Path("/tmp/mlog-audit-bench"))
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-state", action="store_true")
    parser.add_argument("--skip-directory", action="store_true", help="no rows on the log dir")
    parser.add_argument("--generate-only", action="store_true")
    parser.add_argument("--small-entries", type=int, default=2000, help="log of the talk rows")
    parser.add_argument("--skip-talk", action="store_true", help="no first line/cold/warm rows")
    args = parser.parse_args()
    log_dir = args.dir / "log"
    archive_dir = args.dir / "archive"
    start = time.perf_counter()
    generate(log_dir, args.entries)
    generate_archive(log_dir, archive_dir, args.entries)
    print(
        f"log and archive: {args.entries:,} entries, generated/checked in "
        f"{time.perf_counter() - start:.1f}s"
    )
    small = args.dir / "small"
    if not args.skip_talk:
        generate(small / "log", args.small_entries)
    if args.generate_only:
        return
    url = archive_dir.as_uri()
    # Each table is printed as soon as it is measured: a run cut short keeps what it measured.
    if not args.skip_talk:
        print()
        print(f"mlog audit on a log of {args.small_entries:,} entries (whole processes, local[*]):")
        _table(talk_rows(small))
        print()
        print(
            f"mlog audit --archive-url on the {args.entries:,}-entry archive (whole processes, "
            f"local[*], medians of {args.repeat}):"
        )
        _table(archive_talk_rows(url, args.entries, args.repeat))
    from replay.audit.session import audit_session, read_log

    print()
    print(f"load average before: {load_average()}")
    print(f"{'measure':<8}{'ours':>18}{'baseline':>18}{'ratio':>8}  target ({args.master})")
    spark = audit_session(master=args.master)
    # Warm-up: the JVM's code paths and the Python workers.
    warm_up = read_log(spark, url, internal=True).where("offset < 100000")
    warm_up.write.format("noop").mode("overwrite").save()

    def spark_scan(source: str | Path) -> Callable[[], object]:
        return lambda: (
            read_log(spark, source, internal=True).write.format("noop").mode("overwrite").save()
        )

    files = archived_files(archive_dir)
    print(
        read_row(
            "archive", args.entries, spark_scan(url), lambda: raw_scan_files(files), args.repeat
        ),
        flush=True,
    )
    if not args.skip_directory:
        print(
            read_row(
                "read", args.entries, spark_scan(log_dir), lambda: raw_scan(log_dir), args.repeat
            ),
            flush=True,
        )
    if not args.skip_state:
        print(state_row(spark, url, log_dir, args.entries, args.repeat), flush=True)
    spark.stop()
    print(f"load average after: {load_average()}")


def _table(rows: list[str]) -> None:
    print(f"{'measure':<12}{'ours':>12}{'baseline':>16}{'ratio':>8}  target")
    for row in rows:
        print(row, flush=True)


if __name__ == "__main__":
    main()
