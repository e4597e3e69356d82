"""The controller quorum: replicated writes/s against one node, crash failover, graceful change.

Usage: python bench/quorum_bench.py [--connections 50] [--seconds 30] [--kills 30]
                                    [--graceful 10] [--dir PATH] [--skip-throughput]
       python bench/quorum_bench.py --against TREE [--repeat K] [same options]
       python bench/quorum_bench.py --etcd [--writers 16,64] [--seconds 10] [--repeat 3]
                                    [--topics-per-request N]
       python bench/quorum_bench.py --cpu [--writers 16,64] [--seconds 10] [--warmup 3]
                                    [--repeat 3] [--snapshot-bytes N]

1. Throughput. The load of `bench/server_bench.py` (each of `--connections` connections loops
   CreateTopics, Metadata, DeleteTopics, one request in flight) runs for `--seconds` against a
   single `mlog serve` (the baseline, in the same run) and then against the leader of a
   three-node quorum on this machine (every node a separate `mlog serve --config`, Kafka's
   default quorum timers). Writes/s and the ratio quorum / single node.
2. Crash failover, `--kills` times: a client writes one topic at a time through the leader
   (`AdminClient.connect_controller`, following the leader); the leader is killed with
   SIGKILL; the time from the kill to the first write acknowledged afterwards (so committed by
   the new leader, as a client sees it, reconnecting included) is one sample. The killed node
   is restarted and the next round waits until it has caught up.
3. Graceful change, `--graceful` times: the same with SIGTERM (the leader resigns with
   EndQuorumEpoch, its successor stands at once).

4. `--etcd`: replicated writes beside etcd's (`bench/etcd_side.py`; Debian's `etcd-server`,
   installed when missing), both three nodes on loopback and up together: for each count of
   `--writers` (each writer one connection, one write in flight), rounds alternate between
   the quorum (one CreateTopics of one new topic per write, acknowledged at commit, sent to
   the leader) and etcd (one put of a new key per write, JSON gateway, sent to the leader),
   `--repeat` rounds of `--seconds` each. Writes/s and p50/p99 latency per round, the
   medians, and the ratio quorum / etcd. With `--topics-per-request N` each request carries
   N writes (a CreateTopics of N new topics; an etcd transaction of N puts) and the figures
   are requests.

5. `--cpu`: CPU per replicated write of each process, the load of `--etcd` without etcd: for
   each count of `--writers`, a warm-up round of `--warmup` seconds then a round of
   `--seconds`, `--repeat` times; the CPU time (`/proc/PID/stat`, user + system) the leader,
   each follower and the load generator (this process) spent during the round, divided by
   the writes acknowledged in it, with the round's writes/s and p50/p99 latency; each round's
   line as it ends gives its start (wall clock), to match it with the nodes' snapshots. Less
   noisy than writes/s on a shared host.

All processes share this machine's cores (three servers, the load and this script), so the
quorum's throughput is measured against one server on the same cores: the ratio shows what
replication costs here, not what three machines would do.

With --against, the baseline is another checkout of this code (bench/against.py): each
measurement runs in a child process per checkout whose servers run that checkout's code (the
load and the harness stay this checkout's, so both meet the same clients), the two alternating
for K rounds (default 3); the table shows each checkout's median figures (a round's failover
figure is the median of its samples) and the median of the paired ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from against import (  # noqa: E402
    Figure,
    measured_code,
    paired,
    print_columns,
    print_table,
    run_child,
)
from etcd_side import EtcdCluster, put_loop  # noqa: E402
from server_bench import (  # noqa: E402
    Stats,
    Wire,
    _check_encoders,
    _connection,
    _prepare,
    start_server,
)

from tests.support import quorum_processes  # noqa: E402
from tests.support.quorum_processes import Quorum, Writer  # noqa: E402

# The servers run the measured code: this checkout's, or the one a parent `--against` run names
# (the harness starts `mlog serve` in its PROJECT directory, which comes first on their path).
# The load and the harness are this checkout's (ROOT is first on this process's path).
CODE = measured_code()
quorum_processes.PROJECT = CODE

MAX_TOPICS_PER_REQUEST = 128
"""The most writes a request may carry with --etcd (etcd's default `--max-txn-ops`)."""

CATCH_UP_S = 3.0
"""Seconds a failover round's restarted node is given to catch up before the next round."""


async def _load(port: int, connections: int, seconds: float) -> Stats:
    stats = Stats()
    deadline = time.perf_counter() + seconds
    await asyncio.gather(*(_connection(port, i, deadline, stats) for i in range(connections)))
    return stats


def single_node(root: Path, connections: int, seconds: float) -> float:
    """Writes/s of one `mlog serve` under the load."""
    data = root / "single"
    _prepare(data)
    server, (_, port) = start_server(data, root / "single.log", repo=CODE)
    try:
        stats = asyncio.run(_load(port, connections, seconds))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    if stats.errors:
        raise SystemExit(f"single node: {len(stats.errors)} errors, e.g. {stats.errors[:3]}")
    return stats.writes / seconds


async def _quorum_load(quorum: Quorum, connections: int, seconds: float) -> tuple[float, int]:
    await quorum.register_brokers()
    leader = await quorum.leader()
    stats = await _load(quorum.nodes[leader].port, connections, seconds)
    if stats.errors:
        raise SystemExit(f"quorum: {len(stats.errors)} errors, e.g. {stats.errors[:3]}")
    return stats.writes / seconds, leader


async def _failovers(quorum: Quorum, rounds: int, sig: int) -> list[float]:
    """Seconds from the signal to the leader to the first write acknowledged after it."""
    samples: list[float] = []
    writer = Writer(quorum, prefix=f"f{sig}-")
    acked: list[float] = []
    stop = False

    async def write_forever() -> None:
        while not stop:
            if await writer.write_one():
                acked.append(time.monotonic())
            else:
                await asyncio.sleep(0.01)

    task = asyncio.create_task(write_forever())
    try:
        for round_number in range(rounds):
            leader = await quorum.leader()
            seen = len(acked)
            while len(acked) < seen + 5:  # the writer is going through this leader
                await asyncio.sleep(0.01)
            start = time.monotonic()
            quorum.signal(leader, sig)  # not waiting: the writer goes on meanwhile
            while not acked or acked[-1] <= start:
                if time.monotonic() - start > 60:
                    raise SystemExit(
                        f"no write acknowledged 60 s after the kill:\n{quorum.stderr_tails()}"
                    )
                await asyncio.sleep(0.005)
            samples.append(acked[-1] - start)
            await asyncio.to_thread(quorum.kill, leader, sig)  # reaped (SIGTERM: it exits)
            quorum.start(leader)
            if round_number < rounds - 1:
                await asyncio.sleep(CATCH_UP_S)  # it catches up before the next round
    finally:
        stop = True
        await task
        await writer.close()
    return samples


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def throughput(root: Path, connections: int, seconds: float) -> tuple[float, float]:
    """Writes/s of one node, then of the leader of a three-node quorum, under the same load."""
    single = single_node(root, connections, seconds)
    quorum = Quorum(root / "q1")
    quorum.start_all()
    try:
        replicated, _ = asyncio.run(_quorum_load(quorum, connections, seconds))
    finally:
        quorum.stop_all()
    return single, replicated


def failovers(root: Path, kills: int, graceful: int) -> tuple[list[float], list[float]]:
    """Seconds to the first write after each kill -9 of the leader, then after each SIGTERM."""
    quorum = Quorum(root / "q2")
    quorum.start_all()
    try:
        asyncio.run(quorum.register_brokers())
        crash = asyncio.run(_failovers(quorum, kills, signal.SIGKILL)) if kills else []
        if kills and graceful:
            time.sleep(CATCH_UP_S)  # the last killed node catches up before the next round
        resign = asyncio.run(_failovers(quorum, graceful, signal.SIGTERM)) if graceful else []
    finally:
        quorum.stop_all()
    return crash, resign


# ----------------------------------------------------------------- beside etcd


async def _create_loop(
    port: int,
    index: int,
    deadline: float,
    latencies_ms: list[float],
    errors: list[str],
    *,
    topics: int = 1,
) -> int:
    """One writer's requests until `deadline`; how many were acknowledged.

    A request is a CreateTopics of one new topic, or of `topics` new topics.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    wire = Wire(reader, writer)
    done = 0
    try:
        i = 0
        while time.perf_counter() < deadline:
            name = f"side-{index}-{i}-{time.monotonic_ns()}"
            i += 1
            start = time.perf_counter()
            if topics == 1:
                codes = [await wire.create_topic(name)]
            else:
                codes = await wire.create_topics([f"{name}-{k}" for k in range(topics)])
            latencies_ms.append((time.perf_counter() - start) * 1000)
            if any(codes):
                errors.append(f"create {name}: {codes}")
                continue
            done += 1
    finally:
        writer.close()
    return done


TIMELINE_STEP_S = 0.5
"""The width of a `--timeline` column."""


class _Timed(list[float]):
    """A round's latencies (ms), each with when it was taken (`ends`, perf_counter seconds)."""

    def __init__(self) -> None:
        super().__init__()
        self.ends: list[float] = []
        self.start = 0.0
        """When the round started (perf_counter seconds)."""

    def append(self, latency_ms: float) -> None:
        self.ends.append(time.perf_counter())
        super().append(latency_ms)


def timeline(latencies: _Timed, seconds: float) -> tuple[list[int], list[int]]:
    """Per `TIMELINE_STEP_S` of a round: the answers that came, and the slowest of them (ms).

    Where a round's tail comes from (a snapshot, a collection, a busy core) shows as columns
    with fewer answers and slower ones.
    """
    columns = max(1, round(seconds / TIMELINE_STEP_S))
    counts = [0] * columns
    slowest = [0] * columns
    for end, latency in zip(latencies.ends, latencies, strict=True):
        column = min(columns - 1, max(0, int((end - latencies.start) / TIMELINE_STEP_S)))
        counts[column] += 1
        slowest[column] = max(slowest[column], round(latency))
    return counts, slowest


async def _round(
    loop: Any, port: int, writers: int, seconds: float, *, keep: _Timed | None = None
) -> tuple[float, float, float]:
    """Writes/s, p50 and p99 (ms) of `writers` loops against `port` for `seconds`.

    `keep` gets the round's latencies with their times (`--timeline`); without it they go to
    a plain list (no Python call per answer in the load).
    """
    latencies: list[float] = [] if keep is None else keep
    errors: list[str] = []
    start = time.perf_counter()
    if keep is not None:
        keep.start = start
    deadline = start + seconds
    done = await asyncio.gather(
        *(loop(port, i, deadline, latencies, errors) for i in range(writers))
    )
    if errors:
        raise SystemExit(f"{len(errors)} errors, e.g. {errors[:3]}")
    return sum(done) / seconds, _pct(latencies, 0.50), _pct(latencies, 0.99)


def beside_etcd(
    root: Path,
    writer_counts: list[int],
    seconds: float,
    rounds: int,
    per_request: int = 1,
    *,
    show_timeline: bool = False,
) -> None:
    """The quorum's replicated writes and etcd's puts, alternating rounds, in one table.

    With `per_request` above 1 each request carries that many writes (a CreateTopics of that
    many topics; a transaction of that many puts) and the figures are requests.
    `show_timeline` prints each round's answers per half second (`_round`).
    """
    ours_loop = functools.partial(_create_loop, topics=per_request)
    etcd_loop = functools.partial(put_loop, keys=per_request)
    unit = "writes" if per_request == 1 else f"requests of {per_request} writes"
    quorum = Quorum(root / "q3")
    etcd = EtcdCluster(root / "etcd")
    quorum.start_all()
    try:
        etcd.start()
        asyncio.run(quorum.register_brokers())
        leader = asyncio.run(quorum.leader())
        ours_port = quorum.nodes[leader].port
        etcd_port = etcd.leader_port()
        print(f"quorum leader: node {leader}; etcd leader: 127.0.0.1:{etcd_port}", flush=True)
        results: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
        for round_ in range(rounds):
            for writers in writer_counts:
                for name, loop, port in (
                    ("quorum", ours_loop, ours_port),
                    ("etcd", etcd_loop, etcd_port),
                ):
                    kept = _Timed() if show_timeline else None
                    figure = asyncio.run(_round(loop, port, writers, seconds, keep=kept))
                    results.setdefault((name, writers), []).append(figure)
                    print(
                        f"round {round_ + 1}, {writers} writers, {name}: {figure[0]:,.0f} "
                        f"{unit}/s, p50 {figure[1]:.1f} ms, p99 {figure[2]:.1f} ms",
                        flush=True,
                    )
                    if kept is not None:
                        counts, slowest = timeline(kept, seconds)
                        print(f"  answers per {TIMELINE_STEP_S:g} s: {counts}")
                        print(f"  slowest of them, ms: {slowest}", flush=True)
    finally:
        quorum.stop_all()
        etcd.stop()
    print(f"\nmedians of {rounds} alternating rounds of {seconds:g} s ({unit}):")
    label = "writes/s" if per_request == 1 else "requests/s"
    table = [("writers", f"quorum {label}", f"etcd {label}", "ratio", "quorum p99", "etcd p99")]
    for writers in writer_counts:
        ours = results["quorum", writers]
        theirs = results["etcd", writers]
        ours_rate = statistics.median(r[0] for r in ours)
        etcd_rate = statistics.median(r[0] for r in theirs)
        table.append(
            (
                str(writers),
                f"{ours_rate:,.0f}",
                f"{etcd_rate:,.0f}",
                f"{ours_rate / etcd_rate:.2f}x (>= 1)",
                f"{statistics.median(r[2] for r in ours):.1f} ms",
                f"{statistics.median(r[2] for r in theirs):.1f} ms",
            )
        )
    print_columns(table)


# ----------------------------------------------------------------- CPU per write

_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (`/proc/PID/stat`)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def cpu_per_write(
    root: Path,
    writer_counts: list[int],
    seconds: float,
    warmup: float,
    rounds: int,
    *,
    snapshot_bytes: int | None = None,
) -> None:
    """CPU µs per acknowledged write of the leader, each follower and this load generator.

    `snapshot_bytes`: the nodes' `metadata.log.max.record.bytes.between.snapshots` (default
    20 MB), lowered to see what the rounds that hold a snapshot cost.
    """
    timers: dict[str, int | str] = {}
    if snapshot_bytes is not None:
        timers["metadata.log.max.record.bytes.between.snapshots"] = snapshot_bytes
    quorum = Quorum(root / "q4", timers=timers)
    quorum.start_all()
    try:
        asyncio.run(quorum.register_brokers())
        leader = asyncio.run(quorum.leader())
        port = quorum.nodes[leader].port
        pids = {n: node.process.pid for n, node in quorum.nodes.items() if node.process}
        followers = [n for n in pids if n != leader]
        print(f"leader: node {leader}; followers: nodes {followers}", flush=True)
        table = [
            ("writers", "writes/s", "p50", "p99", "leader", "followers", "load", "all, per write")
        ]
        for _ in range(rounds):
            for writers in writer_counts:
                asyncio.run(_round(_create_loop, port, writers, warmup))
                started = time.time()
                before = {n: _cpu_seconds(pid) for n, pid in pids.items()}
                load_before = _cpu_seconds(os.getpid())
                rate, p50, p99 = asyncio.run(_round(_create_loop, port, writers, seconds))
                load = _cpu_seconds(os.getpid()) - load_before
                used = {n: _cpu_seconds(pid) - before[n] for n, pid in pids.items()}
                writes = rate * seconds
                per = {n: used[n] / writes * 1e6 for n in pids}
                total = (sum(used.values()) + load) / writes * 1e6
                table.append(
                    (
                        str(writers),
                        f"{rate:,.0f}",
                        f"{p50:.1f} ms",
                        f"{p99:.1f} ms",
                        f"{per[leader]:.0f} µs",
                        ", ".join(f"{per[n]:.0f}" for n in followers) + " µs",
                        f"{load / writes * 1e6:.0f} µs",
                        f"{total:.0f} µs",
                    )
                )
                window = f"{time.strftime('%H:%M:%S', time.localtime(started))} +{seconds:g} s"
                print("  ".join(table[-1]), f"({window})", flush=True)
    finally:
        quorum.stop_all()
    print()
    print_columns(table)


# ----------------------------------------------------------------- one version against another

CHILD_OPS = ("throughput", "failover")


def child(op: str, args: argparse.Namespace, root: Path) -> dict[str, object]:
    """One measurement with the code of `CODE`, as JSON."""
    if op == "throughput":
        single, replicated = throughput(root, args.connections, args.seconds)
        return {"single": single, "quorum": replicated}
    crash, resign = failovers(root, args.kills, args.graceful)
    return {"crash": crash, "graceful": resign}


def against(args: argparse.Namespace, root: Path) -> None:
    """Each measurement with this checkout and with `--against`, alternating, in children."""
    common = ["--connections", str(args.connections), "--seconds", str(args.seconds)]
    common += ["--kills", str(args.kills), "--graceful", str(args.graceful)]
    script = Path(__file__).resolve()
    other = args.against.resolve()
    ops = [
        op
        for op in CHILD_OPS
        if (op == "throughput" and not args.skip_throughput)
        or (op == "failover" and (args.kills or args.graceful))
    ]
    runs = 0
    pairs: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {op: [] for op in ops}
    for round_ in range(args.repeat):
        for op in ops:

            def measure(tree: Path, op: str = op) -> dict[str, Any]:
                nonlocal runs
                runs += 1
                where = root / f"{op}-{runs}"
                got: dict[str, Any] = run_child(
                    script, ["--child", op, "--dir", str(where), *common], tree
                )
                return got

            pairs[op].append(paired(round_, other, measure))
    rows = []
    if "throughput" in pairs:
        for key, label in (("quorum", "quorum leader writes/s"), ("single", "one node writes/s")):
            rows.append(
                Figure(label=label, pairs=[(t[key], b[key]) for t, b in pairs["throughput"]])
            )
    for key, label in (("crash", "crash failover p50"), ("graceful", "graceful change p50")):
        rounds = [(t[key], b[key]) for t, b in pairs.get("failover", []) if t[key] and b[key]]
        if rounds:
            medians = [(statistics.median(t), statistics.median(b)) for t, b in rounds]
            rows.append(Figure(label=label, pairs=medians, unit="s", lower_is_better=True))
    print(
        f"{args.connections} connections, {args.seconds:g} s of load; "
        f"{args.kills} kills and {args.graceful} graceful changes per round"
    )
    print_table(rows, other=other)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--graceful", type=int, default=10)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument(
        "--against", type=Path, default=None, help="another checkout to compare with (baseline)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="rounds with --against")
    parser.add_argument("--child", choices=CHILD_OPS, default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--etcd", action="store_true", help="replicated writes beside etcd's, alternating rounds"
    )
    parser.add_argument("--writers", default="16,64", help="writer counts with --etcd, --cpu")
    parser.add_argument(
        "--topics-per-request",
        type=int,
        default=1,
        help="with --etcd: writes a request carries (topics a CreateTopics, puts a txn)",
    )
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="with --etcd: each round's answers and the slowest of them per half second",
    )
    parser.add_argument(
        "--cpu", action="store_true", help="CPU per replicated write of each process"
    )
    parser.add_argument("--warmup", type=float, default=3.0, help="warm-up seconds with --cpu")
    parser.add_argument(
        "--snapshot-bytes", type=int, default=None, help="the nodes' snapshot threshold (--cpu)"
    )
    args = parser.parse_args()
    if not 1 <= args.topics_per_request <= MAX_TOPICS_PER_REQUEST:
        parser.error(
            f"--topics-per-request must be in 1..{MAX_TOPICS_PER_REQUEST} (etcd's default "
            f"--max-txn-ops), got {args.topics_per_request}"
        )
    if args.topics_per_request > 1 and not args.etcd:
        parser.error("--topics-per-request goes with --etcd")
    if args.timeline and not args.etcd:
        parser.error("--timeline goes with --etcd")
    _check_encoders()  # the load's hand-made frames and answer reader, against the codec
    root = Path(args.dir or tempfile.mkdtemp(prefix="quorum-bench-"))
    counts = [int(n) for n in args.writers.split(",") if n.strip()]
    if args.etcd:
        beside_etcd(
            root,
            counts,
            args.seconds,
            args.repeat,
            args.topics_per_request,
            show_timeline=args.timeline,
        )
        return
    if args.cpu:
        cpu_per_write(
            root, counts, args.seconds, args.warmup, args.repeat, snapshot_bytes=args.snapshot_bytes
        )
        return
    if args.child:
        print(json.dumps(child(args.child, args, root)))
        return
    if args.against:
        against(args, root)
        return
    rows: list[tuple[str, str, str, str]] = []
    if not args.skip_throughput:
        single, replicated = throughput(root, args.connections, args.seconds)
        rows.append(
            (
                f"admin writes/s ({args.connections} connections, {args.seconds:g} s)",
                f"{replicated:,.0f}",
                f"{single:,.0f} (one node)",
                f"{replicated / single:.2f}x (>= 0.5)",
            )
        )
    crash, graceful = failovers(root, args.kills, args.graceful)
    for label, samples, bound in (
        (f"crash failover, kill -9 x{len(crash)}", crash, "p99 <= 3.5 s"),
        (f"graceful change, SIGTERM x{len(graceful)}", graceful, "<= 1 s (max)"),
    ):
        if samples:
            rows.append(
                (
                    label,
                    f"p50 {statistics.median(samples):.2f} s, p99 {_pct(samples, 0.99):.2f} s, "
                    f"max {max(samples):.2f} s",
                    "-",
                    bound,
                )
            )
    table = [("figure", "quorum", "baseline", "ratio / target"), *rows]
    print_columns(table)


if __name__ == "__main__":
    main()
