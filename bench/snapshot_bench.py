"""Snapshot write/load on SQLite and PostgreSQL, and image_at over a long log, beside raw drivers.

Usage: python bench/snapshot_bench.py [--topics N] [--partitions P] [--repeat K]
                                      [--churn-entries E] [--live-topics L] [--points R]
                                      [--changes C] [--skip partN] [--postgres URL]
                                      [--dir PATH]

Part 1, an image of N topics (default 100,000) of P partitions (default 10), replication factor
3 over 6 brokers: each row is the median of K repetitions, each paired with its baseline run
right before it on the same rows:
  write sqlite     `SnapshotStore.write` into a SQLite file (executemany in one transaction),
                   vs raw sqlite3 executemany of the same, pre-built rows into the same tables
  write postgres   `SnapshotStore.write` (psycopg COPY), vs raw psycopg COPY of the same rows
  load sqlite/pg   `SnapshotStore.load` (rows -> image, checksum checked), vs a raw
                   fetchall of the same rows through the same driver

Part 2, a log of E entries (default 5,000,000) of topic churn over L live topics of P partitions
(default 10,000 x 10 = 100,000 live partitions): each step deletes a random topic and creates a
new one. While the log is written, a snapshot is taken into SQLite whenever the service's policy
asks for one (`metadata.log.max.record.bytes.between.snapshots`, 20 MiB of log, or sooner once
the records appended since the last are as many bytes as the image's own: `cadence_bytes`;
`--fixed-cadence`: the key alone), written as the
service writes it: an increment on the previous one, a full one after `--max-chain` (the
service's `MLOG_SNAPSHOT_MAX_CHAIN`, 8) increments in a row (0: every one full). Then
`travel(at_offset=X)` for R (default 50) random offsets, with the split between snapshot load
and tail replay: each cold (as a process answering one point), then the same offsets in one
process with one `ImageCache` (a console or a server answering many: a kept image before the
point is replayed from when nearer than a snapshot); beside a replay of the whole log up to the
first offset (no snapshot), and the load average. `--max-bytes` sets the snapshot cadence. Every
snapshot is kept (the service keeps `MLOG_SNAPSHOT_RETENTION`, 10, and the bases they need).

Part 3, the part 1 image after C (default 1,000) leader changes of random partitions; each row
the median of K rounds, the spread the range over them:
  increment write  `SnapshotStore.write` of the changed image as an increment on a full
                   snapshot of the image (the changes found, the rows written, committed), vs
                   raw sqlite3 executemany of the same rows into the same tables
  increment bytes  what the process wrote (/proc/self/io wchar: the SQLite WAL's pages) for
                   each, the WAL emptied before each
  full write       a full snapshot of the same changed image, against the increment
  ... pg           the increment in PostgreSQL, vs raw psycopg COPY of the same rows; the
                   bytes are the server's write-ahead log for each

Cold starts of `mlog serve` (from the log, a SQLite and a PostgreSQL snapshot) are
`bench/start_bench.py`'s.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.service.settings import SNAPSHOT_MAX_CHAIN
from api.service.snapshots import cadence_bytes
from metadata_log import LogReader, MetadataLog
from records import PartitionRecord, Record, RemoveTopicRecord, TopicRecord, Uuid
from records.model import PartitionChangeRecord
from replay.controller.config_defs import CLUSTER_CONFIGS, SNAPSHOT_BYTES_KEY
from replay.delta import MetadataDelta, replay_records
from replay.image import EMPTY_IMAGE, MetadataImage, Provenance
from replay.loader import load_image
from replay.sql.content import COLUMNS, ContentChecksum, image_rows
from replay.sql.increments import increment
from replay.sql.store import SnapshotInfo, SnapshotStore
from replay.timetravel import ImageCache, travel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from replay_bench import BROKERS, REPLICATION, brokers

DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def topic(name: str, partitions: int, seed: int) -> list[Record]:
    tid = Uuid.random()
    out: list[Record] = [TopicRecord(name=name, topic_id=tid)]
    for p in range(partitions):
        replicas = tuple((seed + p + i) % BROKERS for i in range(REPLICATION))
        out.append(
            PartitionRecord(
                partition_id=p, topic_id=tid, replicas=replicas, isr=replicas, leader=replicas[0]
            )
        )
    return out


def big_image(topics: int, partitions: int) -> MetadataImage:
    records = brokers()
    for t in range(topics):
        records.extend(topic(f"orders-{t:07d}", partitions, t))
    return replay_records(
        EMPTY_IMAGE, records, Provenance(offset=len(records) - 1, epoch=1, timestamp=1)
    )


def timed(fn: Callable[[], Any]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# ---------------------------------------------------------------------- part 1


def content_rows(image: MetadataImage) -> dict[str, list[tuple[Any, ...]]]:
    return {t: list(rows) for t, rows in image_rows(image, ContentChecksum()).items()}


def raw_sqlite_write(path: Path, rows: dict[str, list[tuple[Any, ...]]], snapshot_id: int) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("BEGIN")
        for table, table_rows in rows.items():
            names = ("snapshot_id", *{**COLUMNS, **CHANGED_COLUMNS}[table])
            sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
            conn.executemany(sql, [(snapshot_id, *r) for r in table_rows])
        conn.execute("COMMIT")
    finally:
        conn.close()


def raw_sqlite_read(path: Path, snapshot_id: int) -> int:
    conn = sqlite3.connect(path)
    try:
        count = 0
        for table, columns in COLUMNS.items():
            cursor = conn.execute(
                f"SELECT {', '.join(columns)} FROM {table} WHERE snapshot_id = ?", (snapshot_id,)
            )
            count += len(cursor.fetchall())
        return count
    finally:
        conn.close()


def libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def raw_copy_write(url: str, rows: dict[str, list[tuple[Any, ...]]], snapshot_id: int) -> None:
    with psycopg.connect(libpq(url)) as conn, conn.cursor() as cursor:
        for table, table_rows in rows.items():
            names = ", ".join(("snapshot_id", *{**COLUMNS, **CHANGED_COLUMNS}[table]))
            with cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
                for row in table_rows:
                    copy.write_row((snapshot_id, *row))


def raw_pg_read(url: str, snapshot_id: int) -> int:
    with psycopg.connect(libpq(url)) as conn, conn.cursor() as cursor:
        count = 0
        for table, columns in COLUMNS.items():
            cursor.execute(
                f"SELECT {', '.join(columns)} FROM {table} WHERE snapshot_id = %s", (snapshot_id,)
            )
            count += len(cursor.fetchall())
        return count


def part1(
    args: argparse.Namespace, scratch: Path, pg_url: str | None, image: MetadataImage
) -> list[str]:
    partitions = image.topics.partition_count()
    rows = content_rows(image)
    lines = []
    backends: list[tuple[str, str]] = [("sqlite", f"sqlite:///{scratch / 'ours.db'}")]
    if pg_url is not None:
        backends.append(("postgres", pg_url))
    for name, url in backends:
        writes, loads = [], []
        for _ in range(args.repeat):
            write_pair, load_pair = one_round(name, url, image, rows, scratch)
            writes.append(write_pair)
            loads.append(load_pair)
        for what, pairs, target in (
            ("write", writes, "<= 6 s" if name == "sqlite" else "<= 3 s"),
            ("load", loads, "<= 5 s"),
        ):
            ours = statistics.median(o for o, _ in pairs)
            base = statistics.median(b for _, b in pairs)
            ratio = statistics.median(o / b for o, b in pairs)
            lines.append(
                f"{what + ' ' + name:<22}{ours:>9.2f} s{base:>11.2f} s{ratio:>8.2f}x  {target} "
                f"({partitions:,} partitions)"
            )
    if pg_url is not None:
        reset_postgres(pg_url)
    return lines


def one_round(
    name: str,
    url: str,
    image: MetadataImage,
    rows: dict[str, list[tuple[Any, ...]]],
    scratch: Path,
) -> tuple[tuple[float, float], tuple[float, float]]:
    """((ours, baseline) write seconds, (ours, baseline) load seconds) on fresh tables."""
    if name == "sqlite":
        for leftover in scratch.glob("*.db*"):
            leftover.unlink()
        with SnapshotStore(f"sqlite:///{scratch / 'raw.db'}") as raw_store:
            raw_store.ensure_schema()
        base_w = timed(lambda: raw_sqlite_write(scratch / "raw.db", rows, 1))
    else:
        reset_postgres(url)
        with SnapshotStore(url) as raw_store:
            raw_store.ensure_schema()
        base_w = timed(lambda: raw_copy_write(url, rows, 999_999))
    with SnapshotStore(url) as store:
        start = time.perf_counter()
        snapshot_id = store.write(image).id
        ours_w = time.perf_counter() - start
        if name == "sqlite":
            base_l = timed(lambda: raw_sqlite_read(scratch / "ours.db", snapshot_id))
        else:
            base_l = timed(lambda: raw_pg_read(url, snapshot_id))
        gc.collect()
        start = time.perf_counter()
        loaded = store.load(snapshot_id)
        ours_l = time.perf_counter() - start
        if loaded != image:
            raise SystemExit(f"{name}: the loaded image differs from the written one")
    return (ours_w, base_w), (ours_l, base_l)


def reset_postgres(url: str) -> None:
    with SnapshotStore(url) as store:
        store.downgrade("base")


# ---------------------------------------------------------------------- part 3

CHANGED_COLUMNS = {"snapshot_changed_topics": ("topic_id", "partition_count")}


def written_bytes() -> int:
    """Bytes this process has written through write(2) and friends (/proc/self/io wchar)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise SystemExit("/proc/self/io has no wchar line: this bench needs Linux")


def checkpoint(path: Path) -> None:
    """Empty a SQLite file's WAL, so that a measured write is not charged for older ones."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def leader_changes(image: MetadataImage, count: int, seed: int) -> MetadataImage:
    """`image` after `count` leader changes of random partitions (another ISR member leads)."""
    rng = random.Random(seed)
    topics = list(image.topics.by_id.values())
    records: list[Record] = []
    for _ in range(count):
        chosen = rng.choice(topics)
        p = rng.choice(chosen.partitions)
        leader = rng.choice([r for r in p.isr if r != p.leader])
        records.append(
            PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id, leader=leader)
        )
    before = image.provenance
    provenance = Provenance(offset=before.offset + count, epoch=before.epoch, timestamp=2)
    return replay_records(image, records, provenance)


def measured(fn: Callable[[], Any]) -> tuple[float, int]:
    """(seconds, bytes written) of one call."""
    gc.collect()
    wrote = written_bytes()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start, written_bytes() - wrote


def _spread(values: list[float], scale: float, unit: str) -> str:
    return f"{min(values) * scale:,.1f}-{max(values) * scale:,.1f} {unit}"


def part3(args: argparse.Namespace, scratch: Path, image: MetadataImage) -> list[str]:
    """An increment after `--changes` leader changes, beside a full snapshot and raw sqlite3."""
    partitions = image.topics.partition_count()
    ours_path, raw_path = scratch / "incr.db", scratch / "incr-raw.db"
    for leftover in scratch.glob("incr*.db*"):
        leftover.unlink()
    with SnapshotStore(f"sqlite:///{raw_path}") as raw_store:
        raw_store.ensure_schema()
    rounds = []
    with SnapshotStore(f"sqlite:///{ours_path}") as store:
        full = store.write(image)
        for round_ in range(args.repeat):
            changed = leader_changes(image, args.changes, seed=round_)
            made = increment(image, ContentChecksum.from_text(_sums(ours_path, full.id)), changed)
            rows = {t: r for t, r in made.rows.items() if r}
            rows["snapshot_changed_topics"] = made.changed_topics
            checkpoint(raw_path)
            raw_s, raw_b = measured(partial(raw_sqlite_write, raw_path, rows, 1000 + round_))
            checkpoint(ours_path)
            info: list[SnapshotInfo] = []
            ours_s, ours_b = measured(
                lambda: info.append(store.write(changed, base=(full, image)))  # noqa: B023
            )
            if info[0].base_id != full.id or store.load(info[0].id) != changed:
                raise SystemExit("the increment was not written, or does not load as written")
            store.delete(info[0].id)
            checkpoint(ours_path)
            info.clear()
            full_s, full_b = measured(lambda: info.append(store.write(changed)))  # noqa: B023
            store.delete(info[0].id)
            rounds.append((ours_s, ours_b, raw_s, raw_b, full_s, full_b, made.row_count))
    times = [r[0] for r in rounds]
    sizes = [float(r[1]) for r in rounds]
    row_count = statistics.median(r[6] for r in rounds)
    ms, kib = 1000, 1 / 1024
    lines = [
        f"{'increment write':<22}{statistics.median(times) * ms:>8.1f} ms"
        f"{statistics.median(r[2] for r in rounds) * ms:>10.1f} ms"
        f"{statistics.median(r[0] / r[2] for r in rounds):>8.2f}x  <= 100 ms "
        f"({args.changes:,} changes of {partitions:,} partitions, {row_count:,.0f} rows; "
        f"spread {_spread(times, ms, 'ms')})",
        f"{'increment bytes':<22}{statistics.median(sizes) * kib:>7.0f} KiB"
        f"{statistics.median(r[3] for r in rounds) * kib:>9.0f} KiB"
        f"{statistics.median(r[1] / r[3] for r in rounds):>8.2f}x  <= 1 MiB "
        f"(write(2) bytes; spread {_spread(sizes, kib, 'KiB')})",
        f"{'full write (same img)':<22}{statistics.median(r[4] for r in rounds):>9.2f} s"
        f"{statistics.median(r[0] for r in rounds):>11.3f} s"
        f"{statistics.median(r[4] / r[0] for r in rounds):>8.0f}x  "
        f"(baseline: the increment; {statistics.median(r[5] for r in rounds) / 2**20:,.0f} MiB "
        "written)",
    ]
    return lines


def wal_bytes(url: str) -> int:
    """Where PostgreSQL's write-ahead log is (bytes since its start): the server's writes."""
    with psycopg.connect(libpq(url)) as conn:
        row = conn.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
    return int(row[0]) if row else 0


def part3_postgres(args: argparse.Namespace, url: str, image: MetadataImage) -> list[str]:
    """The increment of part 3 in PostgreSQL, beside raw psycopg COPY of the same rows."""
    reset_postgres(url)
    rounds = []
    with SnapshotStore(url) as store:
        full = store.write(image)
        with psycopg.connect(libpq(url)) as conn:
            row = conn.execute("SELECT content_sums FROM snapshots WHERE id = %s", (full.id,))
            sums = ContentChecksum.from_text(row.fetchone()[0])  # type: ignore[index]
        for round_ in range(args.repeat):
            changed = leader_changes(image, args.changes, seed=round_)
            made = increment(image, sums, changed)
            rows = {t: r for t, r in made.rows.items() if r}
            rows["snapshot_changed_topics"] = made.changed_topics
            wal = wal_bytes(url)
            raw_s = timed(partial(raw_copy_write, url, rows, 1_000_000 + round_))
            raw_b = wal_bytes(url) - wal
            info: list[SnapshotInfo] = []
            wal = wal_bytes(url)
            ours_s = timed(lambda: info.append(store.write(changed, base=(full, image))))  # noqa: B023
            ours_b = wal_bytes(url) - wal
            if info[0].base_id != full.id or store.load(info[0].id) != changed:
                raise SystemExit("the increment was not written, or does not load as written")
            store.delete(info[0].id)
            rounds.append((ours_s, ours_b, raw_s, raw_b))
    times = [r[0] for r in rounds]
    ms, kib = 1000, 1 / 1024
    return [
        f"{'increment write pg':<22}{statistics.median(times) * ms:>8.1f} ms"
        f"{statistics.median(r[2] for r in rounds) * ms:>10.1f} ms"
        f"{statistics.median(r[0] / r[2] for r in rounds):>8.2f}x  (psycopg COPY baseline; "
        f"spread {_spread(times, ms, 'ms')})",
        f"{'increment WAL pg':<22}{statistics.median(r[1] for r in rounds) * kib:>7.0f} KiB"
        f"{statistics.median(r[3] for r in rounds) * kib:>9.0f} KiB"
        f"{statistics.median(r[1] / r[3] for r in rounds):>8.2f}x  (the server's write-ahead log)",
    ]


def _sums(path: Path, snapshot_id: int) -> str:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT content_sums FROM snapshots WHERE id = ?", (snapshot_id,))
        sums: str = row.fetchone()[0]
        return sums
    finally:
        conn.close()


# ---------------------------------------------------------------------- part 2


def churn_log(
    log_dir: Path,
    db_path: Path,
    *,
    entries: int,
    live: int,
    partitions: int,
    max_bytes: int,
    max_chain: int = SNAPSHOT_MAX_CHAIN,
    image_sized: bool = True,
) -> tuple[int, int]:
    """Write the churn log, snapshotting by the service's byte policy; returns (entries, snaps).

    `image_sized`: the service's cadence (`cadence_bytes`); False: every `max_bytes` alone.
    """
    marker = log_dir / "bench-complete"
    cadence = "image-sized" if image_sized else "fixed"
    made = f"{entries} {live} {partitions} {max_bytes} {cadence} record-bytes chain {max_chain}"
    if marker.exists() and marker.read_text() == made:
        with SnapshotStore(f"sqlite:///{db_path}") as store:
            return entries, len(store.snapshots())
    shutil.rmtree(log_dir, ignore_errors=True)
    for leftover in db_path.parent.glob(db_path.name + "*"):
        leftover.unlink()
    rng = random.Random(5)
    topics: list[Uuid] = []
    counter = 0
    image = EMPTY_IMAGE
    snapshots = 0
    with MetadataLog.open(log_dir) as log, SnapshotStore(f"sqlite:///{db_path}") as store:
        bytes_at_last = 0
        image_records = 0  # the service's measure: the newest snapshot's records
        previous: tuple[SnapshotInfo, MetadataImage] | None = None
        pending: list[Record] = brokers()
        while log.end_offset < entries:
            while len(pending) < 2000:
                if len(topics) >= live:
                    victim = topics.pop(rng.randrange(len(topics)))
                    pending.append(RemoveTopicRecord(topic_id=victim))
                counter += 1
                records = topic(f"churn-{counter:08d}", partitions, counter)
                topics.append(records[0].topic_id)  # type: ignore[attr-defined]
                pending.extend(records)
            batch = pending[: entries - log.end_offset]
            pending = []
            _, last = log.append(batch, principal="bench")
            delta = MetadataDelta(image)
            delta.replay_all(batch)
            image = delta.apply(Provenance(offset=last, epoch=log.epoch, timestamp=0))
            # The service's policy: uncompressed record bytes since the last snapshot.
            size = log.record_bytes_appended
            due = cadence_bytes(max_bytes, image_records) if image_sized else max_bytes
            if size - bytes_at_last >= due:
                stamped = _with_log_provenance(log, image)
                base = previous if previous and previous[0].chain_length < max_chain else None
                previous = (store.write(stamped, base=base), stamped)
                image_records = previous[0].record_count
                snapshots += 1
                bytes_at_last = size
    marker.write_text(made)
    return entries, snapshots


def _with_log_provenance(log: MetadataLog, image: MetadataImage) -> MetadataImage:
    """The image stamped with the real epoch and timestamp of its last entry (as the service)."""
    offset = image.provenance.offset
    (entry,) = log.read(gt=offset - 1, lte=offset)
    return MetadataImage(
        provenance=Provenance(offset=offset, epoch=entry.epoch, timestamp=entry.timestamp),
        features=image.features,
        cluster=image.cluster,
        namespaces=image.namespaces,
        topics=image.topics,
        configs=image.configs,
    )


def part2(args: argparse.Namespace, scratch: Path) -> list[str]:
    log_dir = scratch / "churn" / "log"
    db_path = scratch / "churn" / "snapshots.db"
    log_dir.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    entries, snapshots = churn_log(
        log_dir,
        db_path,
        entries=args.churn_entries,
        live=args.live_topics,
        partitions=args.partitions,
        max_bytes=args.max_bytes,
        max_chain=args.max_chain,
        image_sized=not args.fixed_cadence,
    )
    cadence = "" if args.fixed_cadence else " or the image's size in records, if less"
    print(
        f"churn log: {entries:,} entries, {snapshots} snapshots every {args.max_bytes:,} bytes"
        f"{cadence} (up to {args.max_chain} increments in a row), "
        f"generated/checked in {time.perf_counter() - start:.1f}s"
    )
    rng = random.Random(9)
    with (
        LogReader.open(log_dir) as log,
        SnapshotStore(f"sqlite:///{db_path}", create=False) as store,
    ):
        on_disk = sum(s.size_bytes for s in log.segments())
        stored = sum(p.stat().st_size for p in db_path.parent.glob(db_path.name + "*"))
        kinds = [s.is_increment for s in store.snapshots()]
        print(
            f"log size: {on_disk / 2**20:,.0f} MiB on disk, snapshots {stored / 2**20:,.0f} MiB "
            f"({kinds.count(False)} full, {kinds.count(True)} increments)"
        )
        points = [rng.randrange(entries) for _ in range(args.points)]
        cold = [_travel_timed(log, store, point, None) for point in points]
        cache = ImageCache()
        warm = [_travel_timed(log, store, point, cache) for point in points]
        gc.collect()
        baseline_point = points[0]
        base = timed(lambda: load_image(log, lte=baseline_point))
        load = ", ".join(f"{v:.1f}" for v in os.getloadavg())
    return [
        *_travel_rows("image_at, each cold", cold, base),
        *_travel_rows(f"image_at, one cache ({cache.hits} hits)", warm, base),
        f"{'  baseline':<22}  replay from offset 0 to offset {baseline_point:,} "
        f"({len(points)} offsets, random; load average {load})",
    ]


def _travel_timed(
    log: LogReader, store: SnapshotStore, point: int, cache: ImageCache | None
) -> tuple[float, float, float, int]:
    """(total, load, replay seconds, entries replayed) of `travel` to `point`."""
    gc.collect()
    start = time.perf_counter()
    result = travel(log, store, at_offset=point, cache=cache)
    total = time.perf_counter() - start
    return total, result.load_seconds, result.replay_seconds, result.replayed


def _travel_rows(
    name: str, results: list[tuple[float, float, float, int]], base: float
) -> list[str]:
    totals = [r[0] for r in results]
    median = statistics.median(totals)
    worst = max(results)
    quartiles = statistics.quantiles(totals, n=4) if len(totals) > 1 else [median] * 3
    return [
        f"{name:<34}median {median:.2f} s (IQR {quartiles[0]:.2f}-{quartiles[2]:.2f}), "
        f"worst {worst[0]:.2f} s; baseline {base:.2f} s, worst/baseline {worst[0] / base:.3f}; "
        "target worst <= 1 s, median <= 0.5 s",
        f"{'  worst':<22}  load {worst[1]:.2f} s + replay {worst[2]:.2f} s of "
        f"{worst[3]:,} entries; median split: load "
        f"{statistics.median(r[1] for r in results):.2f} s, replay "
        f"{statistics.median(r[2] for r in results):.2f} s of "
        f"{statistics.median(r[3] for r in results):,.0f} entries",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--churn-entries", type=int, default=5_000_000)
    parser.add_argument("--live-topics", type=int, default=10_000)
    parser.add_argument("--points", type=int, default=50)
    parser.add_argument("--changes", type=int, default=1000, help="leader changes in part 3")
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=int(CLUSTER_CONFIGS[SNAPSHOT_BYTES_KEY].default or 0),
        help=f"{SNAPSHOT_BYTES_KEY} for part 2 (default: the key's default)",
    )
    parser.add_argument(
        "--fixed-cadence",
        action="store_true",
        help="part 2: a snapshot every --max-bytes alone, not sooner for a small image",
    )
    parser.add_argument(
        "--max-chain",
        type=int,
        default=SNAPSHOT_MAX_CHAIN,
        help="increments in a row before a full snapshot in part 2 (0: every one full)",
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get("MLOG_TEST_POSTGRES_URL", DEFAULT_POSTGRES),
        help="PostgreSQL URL ('' to skip); a schema of its own is created and dropped",
    )
    parser.add_argument(
        "--skip",
        choices=("part1", "part2", "part3"),
        action="append",
        default=[],
        help="skip a part (may be given more than once)",
    )
    parser.add_argument("--dir", type=Path, default=None, help="keep generated data here")
    args = parser.parse_args()
    if args.max_chain < 0:
        parser.error(f"--max-chain must be 0 or more, got {args.max_chain}")
    scratch = args.dir or Path(tempfile.mkdtemp(prefix="mlog-snapshot-bench-"))
    scratch.mkdir(parents=True, exist_ok=True)
    schema = f"bench_{os.getpid()}"
    pg_url = None
    if args.postgres:
        with psycopg.connect(libpq(args.postgres), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        pg_url = (
            make_url(args.postgres)
            .update_query_dict({"options": f"-csearch_path={schema}"})
            .render_as_string(hide_password=False)
        )
    try:
        lines = []
        print(f"load average at the start: {', '.join(f'{v:.1f}' for v in os.getloadavg())}")
        image = EMPTY_IMAGE
        if "part1" not in args.skip or "part3" not in args.skip:
            start = time.perf_counter()
            image = big_image(args.topics, args.partitions)
            print(
                f"image: {image.topics.partition_count():,} partitions, built in "
                f"{time.perf_counter() - start:.1f}s"
            )
            gc.collect()
            gc.freeze()  # the image lives for the whole run; keep collections off it
        if "part1" not in args.skip:
            (scratch / "part1").mkdir(exist_ok=True)
            lines += part1(args, scratch / "part1", pg_url, image)
        if "part3" not in args.skip:
            (scratch / "part3").mkdir(exist_ok=True)
            lines += part3(args, scratch / "part3", image)
            if pg_url is not None:
                lines += part3_postgres(args, pg_url, image)
                reset_postgres(pg_url)
        if "part2" not in args.skip:
            lines += part2(args, scratch)
        print()
        print(f"load average at the end: {', '.join(f'{v:.1f}' for v in os.getloadavg())}")
        print(f"{'measure':<22}{'ours':>11}{'baseline':>13}{'ratio':>9}  target")
        for line in lines:
            print(line)
    finally:
        if args.postgres:
            with psycopg.connect(libpq(args.postgres), autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        if args.dir is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
