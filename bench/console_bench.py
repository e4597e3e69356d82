"""The console's speed: its pages beside the API answering the same question, in one run.

Usage: python bench/console_bench.py [--partitions N] [--entries E] [--rounds K] [--points R]
                                     [--readers C] [--seconds S] [--skip-quorum] [--dir PATH]

Data: a data directory holding a log of E entries (default 5,000,000) of topic churn over N live
partitions (default 1,000,000: topics of 10 partitions, RF 3 over 6 brokers; each step deletes a
random topic and creates a new one), with SQLite snapshots taken as the service takes them
(every `metadata.log.max.record.bytes.between.snapshots` of log, or the image's size in records
if less: `api.service.snapshots.cadence_bytes`), written by
`bench/snapshot_bench.py`'s churn generator; then two SCRAM users (alice signs in). It is
kept in `--dir` for the next run.

The console runs in this process (aiohttp on 127.0.0.1) over the data directory, signed in as
alice. A figure is server time: from the request to its response fully read, on loopback. Each
row is timed at R random points per round (the same points for the console and its baseline,
which take turns at going first); the table shows the median over K rounds of each round's
median (the spread is the range of those), the worst single request, and the baseline: the
in-process `Metadata` call that answers the same question:
  timeline <filter>  `/timeline` after a random cursor (no filter, principal, entity, kind, q,
                     since/until); baseline `Metadata.read` of the entries the page looked at
  cluster            `/cluster?at=X`; baseline `Metadata.image(at_offset=X)`
  diff               `/diff?from=X&to=Y`; baseline `Metadata.diff(X, Y)`
  map <level>        `/map` (namespaces) and `/map?namespace=` (topics); baseline
                     `Metadata.image()` (the map's point: the end of the log)

The readers row (unless --skip-quorum): three `mlog serve` processes with SCRAM, one writer
creating topics one at a time through the leader for S seconds, alone and then with C console
readers (`mlog console --bootstrap-server`, each reader a signed-in session paging the
timeline from random cursors, in a process of their own at niceness 19: they stand in for
browsers elsewhere), the two taking turns K times; the row is the median of the writer's p99
with readers over its p99 alone. The console runs as `mlog console` runs: at niceness 10.

The load average is printed before and after: the host's other work shows in every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import ClientSession, CookieJar
from aiohttp.test_utils import TestClient, TestServer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from snapshot_bench import churn_log  # noqa: E402

from api import Metadata  # noqa: E402
from api.console.app import make_app  # noqa: E402
from api.console.serve import SWEEP_SECONDS, collect_as_a_server  # noqa: E402
from api.console.source import HistorySource, Origin, open_local  # noqa: E402
from api.security.client_config import load_client_security  # noqa: E402
from replay.controller.config_defs import CLUSTER_CONFIGS, SNAPSHOT_BYTES_KEY  # noqa: E402
from tests.support.console import Client, scram_quorum, sign_in  # noqa: E402
from tests.support.quorum_processes import PROJECT, Writer, _env  # noqa: E402
from tests.support.sasl_users import seed_users  # noqa: E402

PARTITIONS_PER_TOPIC = 10
TARGETS_MS = {"timeline": 300.0, "cluster": 1500.0, "diff": 1000.0, "map": 500.0}
"""Each page's target (server time, ms): the issue's."""

READERS_TARGET = 1.10
"""The most the console's readers may multiply the writer's p99 by."""

LISTEN = ("--listen", "127.0.0.1:0")

PAGES = re.compile(r"Entries after offset (-?\d+)(?: up to (\d+))?")


# ---------------------------------------------------------------------- data


def prepare(root: Path, partitions: int, entries: int) -> Path:
    """The data directory (generated, or reused from an earlier run in `root`)."""
    data = root / f"console-{partitions}-{entries}"
    data.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    _, snapshots = churn_log(
        data / "log",
        data / "snapshots.db",
        entries=entries,
        live=max(1, partitions // PARTITIONS_PER_TOPIC),
        partitions=PARTITIONS_PER_TOPIC,
        max_bytes=int(CLUSTER_CONFIGS[SNAPSHOT_BYTES_KEY].default or 0),
    )
    users = data / "users-seeded"
    if not users.exists():
        seed_users(data / "log")
        users.write_text("alice bob")
    print(
        f"data: {partitions:,} live partitions, {entries:,} entries, {snapshots} snapshots, "
        f"ready in {time.perf_counter() - started:.1f}s ({data})"
    )
    return data


# ---------------------------------------------------------------------- timing


async def _page(client: Client, path: str, params: dict[str, str]) -> tuple[float, str]:
    """Seconds from the request to its body read, and the body (a page must answer 200)."""
    start = time.perf_counter()
    async with client.get(path, params=params) as answer:
        body = await answer.text()
    took = time.perf_counter() - start
    if answer.status != 200:
        raise SystemExit(f"{path} {params}: HTTP {answer.status}: {body[:300]}")
    return took, body


def _api(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


class Row:
    """One row's timings: per round, the console's and the baseline's seconds per point."""

    def __init__(self, name: str, target: str) -> None:
        self.name = name
        self.target = target
        self.console: list[list[float]] = []
        self.baseline: list[list[float]] = []

    def new_round(self) -> None:
        self.console.append([])
        self.baseline.append([])

    async def pair(
        self, order: int, console: Callable[[], Awaitable[float]], baseline: Callable[[], float]
    ) -> None:
        """Time both, the console first on even `order`s."""
        if order % 2 == 0:
            self.console[-1].append(await console())
            self.baseline[-1].append(baseline())
        else:
            self.baseline[-1].append(baseline())
            self.console[-1].append(await console())

    def line(self) -> str:
        medians = [statistics.median(r) * 1000 for r in self.console if r]
        bases = [statistics.median(r) * 1000 for r in self.baseline if r]
        ratios = [
            statistics.median(c) / max(statistics.median(b), 1e-9)
            for c, b in zip(self.console, self.baseline, strict=True)
            if c
        ]
        worst = max(max(r) for r in self.console if r) * 1000
        median = statistics.median(medians)
        limit = TARGETS_MS[self.target]
        judged = worst if self.target == "cluster" else median
        verdict = "ok" if judged <= limit else f"MISS ({judged / limit:.1f}x)"
        return (
            f"{self.name:<22}{median:>9.0f} ms ({min(medians):.0f}-{max(medians):.0f})"
            f"{worst:>9.0f} ms{statistics.median(bases):>10.0f} ms"
            f"{statistics.median(ratios):>8.1f}x  <= {limit:.0f} ms {verdict}"
        )


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} CPUs"


async def pages(args: argparse.Namespace, data: Path) -> list[Row]:
    """Every page row, K rounds of R random points each."""
    rng = random.Random(56)
    local = HistorySource(open_local(data))
    app = make_app(Origin(data_dir=data), local)
    api = Metadata.open(data)
    end = api.image().provenance.offset
    first_ms = next(iter(api.read(limit=1))).timestamp
    last_ms = next(iter(api.read(gt=end - 1, lte=end))).timestamp

    def time_of(offset: int) -> int:
        return next(iter(api.read(gt=offset - 1, lte=offset))).timestamp

    filters: dict[str, Callable[[int], dict[str, str]]] = {
        "none": lambda p: {"after": str(p)},
        "principal": lambda p: {"after": str(p), "principal": "User:alice"},
        "entity": lambda p: {"after": str(p), "entity": "partition"},
        "kind": lambda p: {"after": str(p), "kind": "RemoveTopic"},
        "q": lambda p: {"after": str(p), "q": f"churn-{p // 11 + 5:08d}"},
        "since/until": lambda p: {
            "since": str(time_of(p)),
            "until": str(min(last_ms, time_of(p) + max(1, (last_ms - first_ms) // 100))),
        },
    }
    rows = {name: Row(f"timeline {name}", "timeline") for name in filters}
    cluster, diff = Row("cluster", "cluster"), Row("diff", "diff")
    maps = {
        "namespaces": ({}, Row("map namespaces", "map")),
        "topics": ({"namespace": ""}, Row("map topics", "map")),
    }
    everything = [*rows.values(), cluster, diff, *(row for _, row in maps.values())]
    order = 0
    try:
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            status = await sign_in(client)
            if status != 303:
                raise SystemExit(f"signing in as alice answered {status}, not 303")
            # The collector's policy of `mlog console` (the baseline shares the process).
            collector = asyncio.create_task(collect_as_a_server(SWEEP_SECONDS))
            for round_ in range(args.rounds):
                for row in everything:
                    row.new_round()
                for _ in range(args.points):
                    order += 1
                    point = rng.randrange(end)
                    for name, make in filters.items():
                        params = make(point)
                        took, body = await _page(client, "/timeline", params)
                        found = PAGES.search(body)
                        if found is None:
                            raise SystemExit(f"/timeline {params}: no page summary in the answer")
                        after = int(found.group(1))
                        read_to = int(found.group(2) or after)

                        async def console(t: float = took) -> float:
                            return t  # timed above: its range sets the baseline's

                        def read(a: int = after, b: int = read_to) -> float:
                            return _api(lambda: list(api.read(gt=a if a >= 0 else None, lte=b)))

                        await rows[name].pair(order, console, read)
                    at = str(point)
                    await cluster.pair(
                        order,
                        lambda a=at: _time(client, "/cluster", {"at": a}),  # type: ignore[misc]
                        lambda p=point: _api(lambda: api.image(at_offset=p)),  # type: ignore[misc]
                    )
                    low, high = sorted(rng.sample(range(end), 2))
                    span = {"from": str(low), "to": str(high)}
                    await diff.pair(
                        order,
                        lambda s=span: _time(client, "/diff", s),  # type: ignore[misc]
                        lambda a=low, b=high: _api(lambda: api.diff(a, b)),  # type: ignore[misc]
                    )
                    for params, row in maps.values():
                        await row.pair(
                            order,
                            lambda p=params: _time(client, "/map", p),  # type: ignore[misc]
                            lambda: _api(api.image),
                        )
                print(f"  round {round_ + 1}/{args.rounds} done; {_load()}", flush=True)
            collector.cancel()
    finally:
        api.close()
    return everything


async def _time(client: Client, path: str, params: dict[str, str]) -> float:
    took, _ = await _page(client, path, params)
    return took


# ---------------------------------------------------------------------- concurrent readers


async def _reader(
    url: str, seed: int, cursors: int, go: asyncio.Future[float], signed: list[int]
) -> int:
    """Sign in, wait for the go (its deadline), then page the timeline; the pages read."""
    rng = random.Random(seed)
    pages = 0
    # The session's cookie on 127.0.0.1: an IP address, which the default jar ignores.
    async with ClientSession(base_url=url, cookie_jar=CookieJar(unsafe=True)) as session:
        status = await sign_in(session)  # type: ignore[arg-type]  # the same get/post calls
        if status != 303:
            raise SystemExit(f"a reader's sign-in answered {status}")
        signed[0] += 1
        deadline = await go
        while time.perf_counter() < deadline:
            params = {"after": str(rng.randrange(-1, cursors))}
            async with session.get("/timeline", params=params) as answer:
                await answer.read()
                if answer.status != 200:
                    raise SystemExit(f"a reader's page answered {answer.status}")
            pages += 1
    return pages


async def _readers_child(url: str, readers: int, seconds: float, cursors: int) -> None:
    """C readers signed in, then `ready` on stdout, then S seconds of pages; their count.

    The readers stand in for browsers on people's own machines: their process runs at the
    lowest priority, so the row measures the console and the servers, not the load generator.
    """
    os.nice(19)
    go: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    signed = [0]
    tasks = [
        asyncio.ensure_future(_reader(url, seed, cursors, go, signed)) for seed in range(readers)
    ]
    while signed[0] < readers:
        if any(t.done() for t in tasks):
            await asyncio.gather(*tasks)  # a reader failed: its error
        await asyncio.sleep(0.05)
    print("ready", flush=True)
    go.set_result(time.perf_counter() + seconds)
    pages = await asyncio.gather(*tasks)
    print(json.dumps({"pages": sum(pages)}), flush=True)


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def _write_for(writer: Writer, seconds: float) -> float:
    """The writer's p99 (ms) over `seconds` of one write at a time."""
    writer.latencies.clear()
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        await writer.write_one()
    if not writer.latencies:
        raise SystemExit("the writer got no write acknowledged")
    return _p99(writer.latencies) * 1000


def readers_row(args: argparse.Namespace, root: Path) -> str:
    """The writer's p99 alone and with the console's readers, K rounds taking turns."""
    with scram_quorum(root / "quorum") as (quorum, alice):
        quorum.security = load_client_security(str(alice))
        writer = Writer(quorum, prefix="bench-")
        asyncio.run(quorum.register_brokers())
        seeded = 200
        asyncio.run(_seed(writer, seeded))
        servers = ",".join(node.address for node in quorum.nodes.values())
        console = subprocess.Popen(
            [sys.executable, "-m", "api.cli", "console", "--bootstrap-server", servers, *LISTEN],
            cwd=PROJECT,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert console.stdout is not None
            line = console.stdout.readline()
            found = re.search(r"at (http://\S+)", line)
            if found is None:
                raise SystemExit(f"mlog console did not start: {line!r}")
            url = found.group(1).rstrip("/")
            alone: list[float] = []
            loaded: list[float] = []
            served = 0
            for round_ in range(args.rounds):
                for with_readers in (round_ % 2 == 1, round_ % 2 == 0):
                    if not with_readers:
                        alone.append(asyncio.run(_run_writer(writer, args.seconds)))
                        continue
                    p99, pages = _with_readers(args, url, writer, seeded)
                    loaded.append(p99)
                    served += pages
        finally:
            console.terminate()
            console.wait(30)
    ratios = [w / max(a, 1e-9) for w, a in zip(loaded, alone, strict=True)]
    ratio = statistics.median(ratios)
    verdict = "ok" if ratio <= READERS_TARGET else f"MISS (+{(ratio - 1) * 100:.0f}%)"
    return (
        f"{'write p99, ' + str(args.readers) + ' readers':<22}"
        f"{statistics.median(loaded):>9.1f} ms ({min(ratios):.2f}-{max(ratios):.2f}x)"
        f"{'':>12}{statistics.median(alone):>10.1f} ms{ratio:>8.2f}x  <= 1.10x {verdict} "
        f"({served / max(1, args.rounds) / args.seconds:.0f} pages/s)"
    )


async def _seed(writer: Writer, count: int) -> None:
    for _ in range(count):
        await writer.write_one()
    await writer.close()


async def _run_writer(writer: Writer, seconds: float) -> float:
    try:
        return await _write_for(writer, seconds)
    finally:
        await writer.close()


def _with_readers(
    args: argparse.Namespace, url: str, writer: Writer, cursors: int
) -> tuple[float, int]:
    child = subprocess.Popen(
        [
            *(sys.executable, __file__, "--readers-child", url, "--readers", str(args.readers)),
            *("--seconds", str(args.seconds + 2.0), "--cursors", str(cursors)),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        child.wait(30)
        raise SystemExit("the readers did not start")
    p99 = asyncio.run(_run_writer(writer, args.seconds))
    out, _ = child.communicate(timeout=120)
    if child.returncode != 0:
        raise SystemExit(f"the readers failed ({child.returncode})")
    return p99, int(json.loads(out.strip().splitlines()[-1])["pages"])


# ---------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--entries", type=int, default=5_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--points", type=int, default=5, help="random points per round")
    parser.add_argument("--readers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0, help="writer seconds per phase")
    parser.add_argument("--skip-quorum", action="store_true", help="no concurrent-readers row")
    parser.add_argument("--dir", type=Path, default=None, help="keep generated data here")
    parser.add_argument("--readers-child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cursors", type=int, default=100, help=argparse.SUPPRESS)
    args = parser.parse_args()
    for name in ("partitions", "entries", "rounds", "points", "readers"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if args.seconds <= 0:
        parser.error("--seconds must be more than 0")
    if args.readers_child is not None:
        asyncio.run(_readers_child(args.readers_child, args.readers, args.seconds, args.cursors))
        return
    with tempfile.TemporaryDirectory(prefix="console-bench-") as scratch:
        root = args.dir or Path(scratch)
        print(_load())
        data = prepare(root, args.partitions, args.entries)
        rows = asyncio.run(pages(args, data))
        lines = [row.line() for row in rows]
        if not args.skip_quorum:
            lines.append(readers_row(args, Path(scratch)))
        print(
            f"\n{args.rounds} rounds x {args.points} points; median of the rounds' medians "
            "(range), worst request, baseline median, median ratio"
        )
        print(f"{'':<22}{'console':>21}{'worst':>12}{'baseline':>13}{'ratio':>9}  target")
        for line in lines:
            print(line)
        print(_load())


if __name__ == "__main__":
    main()
