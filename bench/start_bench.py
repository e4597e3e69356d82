"""Cold start of `mlog serve` from the log, a SQLite and a PostgreSQL snapshot, beside raw reads.

Usage: python bench/start_bench.py [--partitions N] [--brokers B] [--share F] [--fence]
                                   [--rounds K] [--postgres URL] [--dir PATH]
       python bench/start_bench.py --against TREE [--partitions N] [--rounds K] ...
       python bench/start_bench.py --partitions 10000000 --brokers 1000 --share 0.01 --fence \
           --rounds 1 --postgres ''       # the 10M run (1M topics x 10, RF 3)

Data: a single node's data directory holding a cluster of N partitions (default 1,000,000:
topics of 10, RF 3 over B brokers, default 6; with --share F broker 0 also leads that fraction
of them; written straight into the log as `bench/fleet_bench.py` writes it), in three copies:
the whole log; a SQLite snapshot of it (`mlog snapshot create`) with the log trimmed below it
(`mlog log trim --before-snapshot`); the same with the snapshot in PostgreSQL (a schema of its
own, dropped at the end; `--postgres ''` skips it). The log and the SQLite copy are kept in
`--dir` for the next run.

Rows, each the median of K rounds (the spread is the range over them); in each round every
start is paired with its raw baseline, run right before or after it (the order alternates):
  start <kind>     seconds from starting `mlog serve` to its first answered Metadata request;
                   its peak RSS (VmHWM, once it is quiet after that answer: its per-broker
                   index and the store's warm-up done, on threads)
                   and its RSS then (serving)
  baseline         a process doing the raw read of the same data: fastavro's reader over the
                   log's segments (dicts); sqlite3 / psycopg `fetchall` of the snapshot's rows
  load <db>        `SnapshotStore.load` (rows -> image, checksum checked) timed in a process,
                   then the per-broker index it leaves to its first reader, timed apart;
                   the peak RSS of both; beside the raw `fetchall` of the same rows
                   timed in a process of its own
  image            the image's size: RSS growth of a fresh process holding it (the log's
                   `load_image`), against which each start's peak RSS is put
  fence (--fence)  in a process that loaded the SQLite snapshot: broker 0 fenced as the
                   controller fences it (`bench/fleet_bench.py`'s `fence_new`): seconds to its
                   first batch (the broker's record and the first moves, replayed) and to the
                   last; baseline: the algorithm before the per-broker index, every partition
                   walked and every move in one batch, on the same image (its per-broker
                   index built first, untimed, as a server builds it once it serves)

With --against TREE (another checkout, bench/against.py) the starts of this checkout and of
TREE take turns on the same data directories, K rounds, and the table shows each one's median
and the median of the paired ratios (no raw baselines).
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
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from against import Figure, code_env, measured_code, paired, print_columns, print_table

sys.path.insert(0, str(measured_code()))

_A = TypeVar("_A")
_B = TypeVar("_B")

DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BROKERS = 6
INT32_MAX = 2**31 - 1
"""The highest broker id Kafka's wire format carries."""
SETTLE_S = 1.0
"""Seconds a started server is left running after its first answer before its peak is read,
at least: then until it is quiet for `QUIET_S` (its per-broker index and the store's
warm-up, on threads after the first answer, done), `SETTLE_LONGEST_S` at most."""
QUIET_S = 0.5
QUIET_TICKS = 2
"""CPU ticks (10 ms each) a quiet server may use in `QUIET_S` (its timers)."""
SETTLE_LONGEST_S = 300.0


# ---------------------------------------------------------------------- children (--child)


def _reset_peak() -> None:
    """Start this process's peak RSS (VmHWM) again from its RSS now (Linux's clear_refs 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def _peak() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


QUERIES_VARIABLE = "START_BENCH_QUERIES"
"""The raw children's queries (JSON: table -> its content columns), set by the parent so that a
raw child imports no code of ours."""


def _queries() -> dict[str, list[str]]:
    queries: dict[str, list[str]] = json.loads(os.environ[QUERIES_VARIABLE])
    return queries


def raw_sqlite(path: str) -> int:
    """sqlite3's `fetchall` of every content row of the newest snapshot; the rows fetched."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (snapshot_id,) = conn.execute("SELECT max(id) FROM snapshots").fetchone()
        count = 0
        for table, columns in _queries().items():
            sql = f"SELECT {', '.join(columns)} FROM {table} WHERE snapshot_id = ?"
            count += len(conn.execute(sql, (snapshot_id,)).fetchall())
        return count
    finally:
        conn.close()


def _libpq(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def raw_postgres(url: str, timed: list[float] | None = None) -> int:
    """Psycopg's `fetchall` of every content row of the newest snapshot; the rows fetched.

    `timed` gets the seconds from the open connection to the last row (the in-process figure,
    as a load is timed once its store is open).
    """
    import psycopg

    with psycopg.connect(_libpq(url)) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT max(id) FROM snapshots")
        (snapshot_id,) = cursor.fetchone() or (None,)
        start = time.perf_counter()
        count = 0
        for table, columns in _queries().items():
            cursor.execute(
                f"SELECT {', '.join(columns)} FROM {table} WHERE snapshot_id = %s", (snapshot_id,)
            )
            count += len(cursor.fetchall())
        if timed is not None:
            timed.append(time.perf_counter() - start)
        return count


def raw_log(log_dir: str) -> int:
    """Fastavro's own reader over every segment of the log, yielding dicts; the entries read."""
    import fastavro

    count = 0
    for path in sorted(Path(log_dir).glob("*.avro")):
        with path.open("rb") as f:
            for _ in fastavro.reader(f):
                count += 1
    return count


def child(kind: str, where: str) -> dict[str, Any]:
    """What a child process measures (`--child KIND WHERE`), as JSON on its last line."""
    if kind == "raw-log":
        return {"rows": raw_log(where)}
    if kind == "raw-sqlite":
        return {"rows": raw_sqlite(where)}
    if kind == "raw-postgres":
        return {"rows": raw_postgres(where)}
    if kind == "image":
        from metadata_log.reader import LogReader
        from replay.loader import load_image

        with LogReader.open(Path(where)) as log:
            gc.collect()
            before = _rss()
            image = load_image(log)
            gc.collect()
            grown = _rss() - before
        return {"image": grown, "partitions": image.topics.partition_count()}
    if kind == "fetch-postgres":  # the raw fetch alone, timed in the process
        timed: list[float] = []
        rows = raw_postgres(where, timed)
        return {"raw": timed[0], "rows": rows}
    if kind == "fence":
        return _fence(where)
    if kind == "fetch-sqlite":
        gc.collect()
        start = time.perf_counter()
        rows = raw_sqlite(where)
        return {"raw": time.perf_counter() - start, "rows": rows}
    # load-sqlite / load-postgres: the store's load alone, timed in the process.
    from replay.sql.store import SnapshotStore

    url = where if kind == "load-postgres" else f"sqlite:///{where}"
    gc.collect()
    with SnapshotStore(url, create=False) as store:
        newest = _newest_id(store, url)
        _reset_peak()  # the peak of the load, not of the imports and the store's opening
        start = time.perf_counter()
        image = store.load(newest)
        load_s = time.perf_counter() - start
        start = time.perf_counter()
        image.topics.replica_index.map()  # left to its first reader (a server: on a thread)
        index_s = time.perf_counter() - start
    return {
        "load": load_s,
        "index": index_s,
        "peak": _peak(),
        "partitions": image.topics.partition_count(),
    }


def _newest_id(store: Any, url: str) -> int:
    """The id of the newest snapshot in `store` (opened on `url`); none ends the child."""
    newest = store.newest()
    if newest is None:
        raise SystemExit(f"no snapshot in {url}")
    return int(newest.id)


def _fence(sqlite_path: str) -> dict[str, Any]:
    """Broker 0 fenced on the image of the newest snapshot at `sqlite_path` (`--child fence`)."""
    from fleet_bench import fence_new, fence_old

    from replay.sql.store import SnapshotStore

    url = f"sqlite:///{sqlite_path}"
    with SnapshotStore(url, create=False) as store:
        image = store.load(_newest_id(store, url))
    held = len(image.topics.partitions_of(0))
    gc.collect()
    gc.freeze()  # as a server holds its loaded image: out of the collector's walks
    first, total, longest, moves, batches, _, _ = fence_new(image, 0)
    before, old_moves = fence_old(image, 0)
    if old_moves != moves:
        raise SystemExit(f"the two fences disagree: {old_moves} moves against {moves}")
    return {
        "held": held,
        "moves": moves,
        "batches": batches,
        "first": first,
        "all": total,
        "longest": longest,
        "before": before,
    }


def run_child(kind: str, where: str, env: dict[str, str] | None = None) -> tuple[float, Any]:
    """(wall seconds of the whole process, what it printed) of `--child kind where`."""
    from replay.sql.content import COLUMNS

    env = {**(env or code_env(measured_code())), QUERIES_VARIABLE: json.dumps(COLUMNS)}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, where],
        cwd=measured_code(),
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"--child {kind} {where} failed:\n{done.stderr[-3000:]}")
    return took, json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------- data


def _mlog(*args: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "api.cli", *args],
        cwd=measured_code(),
        env=code_env(measured_code()),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"mlog {' '.join(args)} failed: {done.stderr[-2000:]}")
    return time.perf_counter() - start


def prepare(
    scratch: Path,
    partitions: int,
    pg_url: str | None,
    *,
    brokers: int = BROKERS,
    share: float = 0.0,
) -> dict[str, tuple[Path, str]]:
    """Per kind of start: (its data directory, where its raw baseline reads)."""
    from fleet_bench import write_cluster_log

    cluster = "" if (brokers, share) == (BROKERS, 0.0) else f"-b{brokers}-s{share:g}"
    root = scratch / f"start-{partitions}{cluster}"
    marker = root / "complete"
    log_data, sqlite_data = root / "log", root / "sqlite"
    if not marker.exists():
        shutil.rmtree(root, ignore_errors=True)
        started = time.perf_counter()
        end, _ = write_cluster_log(log_data / "log", partitions, brokers, share)
        took = time.perf_counter() - started
        print(
            f"log: {partitions:,} partitions over {brokers:,} brokers, {end:,} entries, "
            f"in {took:.1f}s"
        )
        shutil.copytree(log_data, sqlite_data)
        took = _mlog("snapshot", "create", "--data-dir", str(sqlite_data))
        _mlog("log", "trim", "--before-snapshot", "--data-dir", str(sqlite_data))
        print(f"sqlite: snapshot written in {took:.1f}s, the log trimmed below it")
        marker.write_text("done")
    else:
        # A copy kept from a run of older code: its snapshot database brought to this code's
        # schema (a start from a database behind it would replay the log instead).
        _mlog("db", "upgrade", "--data-dir", str(sqlite_data))
    kinds = {
        "log": (log_data, str(log_data / "log")),
        "sqlite": (sqlite_data, str(sqlite_data / "snapshots.db")),
    }
    if pg_url is not None:
        pg_data = root / "postgres"
        shutil.rmtree(pg_data, ignore_errors=True)
        shutil.copytree(log_data, pg_data)
        took = _mlog("snapshot", "create", "--data-dir", str(pg_data), "--db", pg_url)
        _mlog("log", "trim", "--before-snapshot", "--data-dir", str(pg_data), "--db", pg_url)
        print(f"postgres: snapshot written in {took:.1f}s, the log trimmed below it")
        kinds["postgres"] = (pg_data, pg_url)
    return kinds


# ---------------------------------------------------------------------- starts


def cold_start(
    data_dir: Path, log_path: Path, env: dict[str, str], tree: Path
) -> tuple[float, int, int]:
    """(seconds to the first Metadata answer, peak RSS, RSS) of `tree`'s `mlog serve`."""
    from server_bench import start_server

    from api.client.admin import AdminClient

    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the server inherits it: its database
    try:
        start = time.perf_counter()
        server, (host, port) = start_server(data_dir, log_path, repo=tree)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:

        async def first_answer() -> None:
            client = await AdminClient.connect(f"{host}:{port}")
            try:
                await client.metadata([])
            finally:
                await client.close()

        asyncio.run(first_answer())
        took = time.perf_counter() - start
        _settle(server.pid)
        status = Path(f"/proc/{server.pid}/status").read_text().splitlines()
        kib = {line.split(":")[0]: int(line.split()[1]) for line in status if line.startswith("Vm")}
        return took, kib["VmHWM"] * 1024, kib["VmRSS"] * 1024
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(120)


def _cpu_ticks(pid: int) -> int:
    """User and system CPU ticks of process `pid` so far (`/proc/PID/stat`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _settle(pid: int) -> None:
    """Wait `SETTLE_S`, then until process `pid` is quiet for `QUIET_S` (`QUIET_TICKS`)."""
    time.sleep(SETTLE_S)
    deadline = time.monotonic() + SETTLE_LONGEST_S
    ticks = _cpu_ticks(pid)
    while time.monotonic() < deadline:
        time.sleep(QUIET_S)
        now = _cpu_ticks(pid)
        if now - ticks <= QUIET_TICKS:
            return
        ticks = now


def compiled(tree: Path) -> None:
    """Write `tree`'s bytecode (as an install does), so no start compiles its modules.

    A start with PYTHONDONTWRITEBYTECODE set and no `__pycache__` compiles every module it
    imports (about a second of CPU for `mlog serve`), on every start.
    """
    import compileall

    for package in ("api", "records", "replay", "metadata_log", "migrations"):
        compileall.compile_dir(tree / package, quiet=1)


def _server_env(tree: Path, kind: str, where: str) -> dict[str, str]:
    env = code_env(tree)
    env.pop("MLOG_DATABASE_URL", None)
    if kind == "postgres":
        env["MLOG_DATABASE_URL"] = where
    return env


def _spread(values: list[float], fmt: Callable[[float], str]) -> str:
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"


def _times(value: float, image: float) -> str:
    """`value` in images (a tiny image grows the RSS by nothing at all: no ratio then)."""
    return f"{value / image:.2f}x" if image > 0 else "-"


def _mib(value: float) -> str:
    return f"{value / 2**20:,.0f} MiB"


def _s(value: float) -> str:
    return f"{value:.2f} s"


def _ms(value: float) -> str:
    return f"{value * 1000:.1f} ms"


def _child_result(kind: str, where: str) -> Any:
    return run_child(kind, where)[1]


def _raw_seconds(kind: str, where: str) -> float:
    return run_child(kind, where)[0]


def _paired_start(round_: int, start: Callable[[], _A], raw: Callable[[], _B]) -> tuple[_A, _B]:
    """One round's start and its raw baseline, next to each other, the first one alternating."""
    if round_ % 2 == 0:
        started = start()
        return started, raw()
    baseline = raw()
    return start(), baseline


def measure(args: argparse.Namespace, kinds: dict[str, tuple[Path, str]], scratch: Path) -> None:
    this = measured_code()
    _, image = run_child("image", kinds["log"][1])
    print(f"image: {image['partitions']:,} partitions, {_mib(image['image'])} held")
    rows: list[list[str]] = [
        ["measure", "ours, median (range)", "raw baseline, median (range)", "ratio", "peak RSS",
         "peak / image", "RSS serving"]
    ]  # fmt: skip
    raw_kind = {"log": "raw-log", "sqlite": "raw-sqlite", "postgres": "raw-postgres"}
    raw_name = {
        "log": "fastavro read of the log",
        "sqlite": "sqlite3 fetchall",
        "postgres": "psycopg fetchall",
    }
    for kind, (data_dir, where) in kinds.items():
        env = _server_env(this, kind, where)
        start = functools.partial(cold_start, data_dir, scratch / f"{kind}.log", env, this)
        raw = functools.partial(_raw_seconds, raw_kind[kind], where)
        pairs = [_paired_start(round_, start, raw) for round_ in range(args.rounds)]
        starts = [s[0] for s, _ in pairs]
        peaks = [float(s[1]) for s, _ in pairs]
        serving = [float(s[2]) for s, _ in pairs]
        raws = [r for _, r in pairs]
        ratio = statistics.median(s[0] / r for s, r in pairs)
        rows.append(
            [
                f"start from {kind}",
                _spread(starts, _s),
                f"{raw_name[kind]}: {_spread(raws, _s)}",
                f"{ratio:.2f}x",
                _spread(peaks, _mib),
                _times(statistics.median(peaks), image["image"]),
                _mib(statistics.median(serving)),
            ]
        )
        if kind == "log":
            continue
        loads = [
            {
                **paired_round[0],
                **paired_round[1],
            }
            for paired_round in (
                _paired_start(
                    round_,
                    functools.partial(_child_result, f"load-{kind}", where),
                    functools.partial(_child_result, f"fetch-{kind}", where),
                )
                for round_ in range(args.rounds)
            )
        ]
        rows.append(
            [
                f"load {kind}, in process (then its broker index: "
                f"{_spread([x['index'] for x in loads], _s)})",
                _spread([x["load"] for x in loads], _s),
                f"{raw_name[kind]}: {_spread([x['raw'] for x in loads], _s)}",
                f"{statistics.median(x['load'] / x['raw'] for x in loads):.2f}x",
                _spread([float(x["peak"]) for x in loads], _mib),
                _times(statistics.median(x["peak"] for x in loads), image["image"]),
                "",
            ]
        )
    if args.fence:
        rows.append(_fence_row(args, kinds["sqlite"][1]))
    print()
    print(
        f"{image['partitions']:,} partitions, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}"
    )
    print_columns(rows)


def _fence_row(args: argparse.Namespace, sqlite_path: str) -> list[str]:
    """The fence of broker 0, K rounds, each in a process of its own that loaded the snapshot."""
    fences = [_child_result("fence", sqlite_path) for _ in range(args.rounds)]
    first = [f["first"] for f in fences]
    before = [f["before"] for f in fences]
    held, moves, batches = fences[0]["held"], fences[0]["moves"], fences[0]["batches"]
    return [
        f"fence broker 0 ({held:,} partitions, {moves:,} moves in {batches} batches): first "
        f"batch; all: {_spread([f['all'] for f in fences], _s)}",
        _spread(first, _ms),
        f"every partition walked, one batch: {_spread(before, _s)}",
        f"{statistics.median(f / b for f, b in zip(first, before, strict=True)):.2g}x",
        "",
        "",
        "",
    ]


def measure_against(
    args: argparse.Namespace, kinds: dict[str, tuple[Path, str]], scratch: Path
) -> None:
    other = args.against.resolve()
    this = measured_code()
    figures = []
    for kind, (data_dir, where) in kinds.items():

        def start(
            tree: Path, kind: str = kind, data_dir: Path = data_dir, where: str = where
        ) -> float:
            env = _server_env(tree, kind, where)
            return cold_start(data_dir, scratch / f"{kind}.log", env, tree)[0]

        pairs = [paired(r, other, start, this=this) for r in range(args.rounds)]
        figures.append(
            Figure(label=f"start from {kind}", pairs=pairs, unit="s", lower_is_better=True)
        )
    print()
    print_table(figures, other=other, this=this)


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], sys.argv[3])))
        return
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--brokers", type=int, default=BROKERS)
    parser.add_argument(
        "--share", type=float, default=0.0, help="the fraction of partitions broker 0 also leads"
    )
    parser.add_argument(
        "--fence", action="store_true", help="also fence broker 0 on the snapshot's image"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--postgres",
        default=os.environ.get("MLOG_TEST_POSTGRES_URL", DEFAULT_POSTGRES),
        help="PostgreSQL URL ('' to skip); a schema of its own is created and dropped",
    )
    parser.add_argument("--against", type=Path, default=None, help="another checkout to compare")
    parser.add_argument("--dir", type=Path, default=None, help="keep generated data here")
    args = parser.parse_args()
    if args.partitions < 10 or args.rounds < 1:
        parser.error("--partitions must be at least 10 and --rounds at least 1")
    if not 1 <= args.brokers <= min(args.partitions, INT32_MAX) or not 0.0 <= args.share <= 1.0:
        parser.error(
            "--brokers must be between 1 and --partitions (and 2147483647), --share between 0 and 1"
        )
    if args.fence and args.against is not None:
        parser.error("--fence is measured without --against: run the two apart")
    scratch = args.dir or Path(tempfile.mkdtemp(prefix="mlog-start-bench-"))
    scratch.mkdir(parents=True, exist_ok=True)
    pg_url = None
    schema = f"start_bench_{os.getpid()}"
    if args.postgres:
        import psycopg
        from sqlalchemy.engine import make_url

        with psycopg.connect(_libpq(args.postgres), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        pg_url = (
            make_url(args.postgres)
            .update_query_dict({"options": f"-csearch_path={schema}"})
            .render_as_string(hide_password=False)
        )
    try:
        compiled(measured_code())
        if args.against is not None:
            compiled(args.against.resolve())
        kinds = prepare(scratch, args.partitions, pg_url, brokers=args.brokers, share=args.share)
        if args.against is not None:
            measure_against(args, kinds, scratch)
        else:
            measure(args, kinds, scratch)
    finally:
        if pg_url is not None:
            import psycopg

            with psycopg.connect(_libpq(args.postgres), autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        if args.dir is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
