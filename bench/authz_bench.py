"""Authorization decisions with 100,000 ACLs: the indexed `Authorizer` against a linear scan.

Usage: python bench/authz_bench.py [--acls 100000] [--decisions 20000] [--scans 40] [--seed 1]
                                  [--server [--server-seconds 10] [--rounds 2] [--connections 50]]
       python bench/authz_bench.py --against TREE [--acls N] [--decisions D] [--rounds R]

A realistic mix of ACLs over 1,000 namespaces (50 organisations of 20 teams), 20,000 topics
(most in a team namespace, some in the default one) and 5,000 users: per-user LITERAL topic
grants (READ, WRITE, DESCRIBE; a tenth from one host), PREFIXED topic grants to a team's
topics, NAMESPACE grants to a team or an organisation (some PREFIXED), DENYs on topics and
namespaces, consumer-group grants, cluster grants and `User:*` grants. Requests are drawn from
the same vocabulary: mostly users asking READ, WRITE or DESCRIBE of topics (some they hold an
ACL on, some not), then namespaces and the cluster.

Each decision is timed on its own (`perf_counter_ns` around one `authorize` call; the timer's
own cost, ~0.1 µs, is included), giving a median and a p99. The baseline, in the same run, is a
linear scan of every ACL per decision (the rules read literally, as
tests/replay/controller/test_authorizer.py's reference); it takes tens of milliseconds a decision,
so it runs on `--scans` of the requests, and both must give the same decision on each. The index
build (of a server's first decision) is timed over 5 builds, and its update after one ACL change
(`AclIndex.updated`, what the first decision after an ACL change costs) over 10 changes.

`--server` adds what authorization costs a server: a `MetadataServer` process (on a data
directory holding the same ACLs, plus a grant of everything on topics `load-*` to the load's
`User:ANONYMOUS`) under bench/server_bench.py's load loop (CreateTopics, Metadata,
DeleteTopics by id, `--connections` connections), with the authorizer on and off, alternating
for `--rounds`; admin writes/s and the server's CPU time per request, medians, and their ratio.

`--against TREE` measures another checkout beside this one (bench/against.py): the decisions'
median and p99, the index build and update, each checkout in its own child process on the same
ACLs and requests (the same `--seed`), taking turns for `--rounds`; no linear scan.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from against import Figure, measured_code, paired, print_table, run_child
from immutables import Map

# The code measured: this checkout, or the one a parent `--against` run names.
sys.path.insert(0, str(measured_code()))

from api.server.server import MetadataServer
from api.service.service import MetadataService
from records.model import (
    AccessControlEntryRecord,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from records.uuids import Uuid

try:
    from replay.controller.acl_index import AclIndex
    from replay.controller.authorizer import (
        CLUSTER_NAME,
        Authorizer,
        AuthorizerConfig,
        namespace_chain,
    )
    from replay.controller.commands import ControllerResult, RegisterBroker
except ImportError:  # a checkout from before the controller moved to replay/controller
    from api.controller.acl_index import AclIndex  # type: ignore[no-redef,import-not-found,unused-ignore]
    from api.controller.authorizer import (  # type: ignore[no-redef,import-not-found,unused-ignore]
        CLUSTER_NAME,
        Authorizer,
        AuthorizerConfig,
        namespace_chain,
    )
    from api.controller.commands import (  # type: ignore[no-redef,import-not-found,unused-ignore]
        ControllerResult,
        RegisterBroker,
    )
from replay.image import AclsImage, MetadataImage

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
TOPIC, NAMESPACE, CLUSTER, GROUP = (
    ResourceType.TOPIC,
    ResourceType.NAMESPACE,
    ResourceType.CLUSTER,
    ResourceType.GROUP,
)

Request = tuple[str, str, AclOperation, ResourceType, str]


class World:
    """The names the ACLs and requests are drawn from."""

    def __init__(self, rng: random.Random) -> None:
        self.orgs = [f"org{i}" for i in range(50)]
        self.teams = [f"{org}:team{j}" for org in self.orgs for j in range(20)]
        self.topics = [
            f"{rng.choice(self.teams)}:topic-{k}" if k % 10 else f"topic-{k}" for k in range(20_000)
        ]
        self.users = [f"User:user{u}" for u in range(5_000)]
        self.hosts = [f"10.0.{h // 250}.{h % 250}" for h in range(1_000)]


def make_acls(world: World, count: int, rng: random.Random) -> list[AccessControlEntryRecord]:
    """`count` ACLs of the mix the module docstring describes."""

    def acl(
        kind: ResourceType,
        name: str,
        op: AclOperation,
        *,
        permission: AclPermissionType = ALLOW,
        principal: str | None = None,
        host: str = "*",
        pattern: PatternType = LITERAL,
    ) -> AccessControlEntryRecord:
        return AccessControlEntryRecord(
            id=Uuid.random(),
            resource_type=kind,
            resource_name=name,
            pattern_type=pattern,
            principal=principal or rng.choice(world.users),
            host=host,
            operation=op,
            permission_type=permission,
        )

    acls: list[AccessControlEntryRecord] = []
    while len(acls) < count:
        roll = rng.random()
        if roll < 0.70:  # a user's grant on one topic
            host = rng.choice(world.hosts) if rng.random() < 0.1 else "*"
            op = rng.choice((Op.READ, Op.WRITE, Op.DESCRIBE))
            acls.append(acl(TOPIC, rng.choice(world.topics), op, host=host))
        elif roll < 0.80:  # a grant on a team's topics by prefix
            prefix = rng.choice(world.teams) + ":" + rng.choice(("", "topic-1", "topic-2"))
            acls.append(acl(TOPIC, prefix, rng.choice((Op.READ, Op.WRITE)), pattern=PREFIXED))
        elif roll < 0.88:  # a namespace grant: a team, or a whole organisation
            name = rng.choice(world.teams) if rng.random() < 0.8 else rng.choice(world.orgs)
            op = rng.choice((Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.ALTER_CONFIGS))
            acls.append(acl(NAMESPACE, name, op))
        elif roll < 0.90:  # a namespace grant by prefix
            acls.append(acl(NAMESPACE, rng.choice(world.teams)[:-1], Op.READ, pattern=PREFIXED))
        elif roll < 0.95:  # DENYs: a topic, or a team namespace (the gate)
            if rng.random() < 0.5:
                acls.append(acl(TOPIC, rng.choice(world.topics), Op.WRITE, permission=DENY))
            else:
                acls.append(acl(NAMESPACE, rng.choice(world.teams), Op.DELETE, permission=DENY))
        elif roll < 0.99:  # consumer groups
            acls.append(acl(GROUP, f"group-{rng.randrange(10_000)}", Op.READ))
        elif roll < 0.995:  # the cluster
            op = rng.choice((Op.CREATE, Op.DESCRIBE, Op.ALTER, Op.CLUSTER_ACTION))
            acls.append(acl(CLUSTER, CLUSTER_NAME, op))
        else:  # everyone may describe some topics
            topic = rng.choice(world.topics)
            acls.append(acl(TOPIC, topic, Op.DESCRIBE, principal="User:*"))
    return acls


def make_requests(
    world: World, acls: Sequence[AccessControlEntryRecord], count: int, rng: random.Random
) -> list[Request]:
    """Requests: half about an ACL that exists (its principal and resource), half at random."""
    requests: list[Request] = []
    topic_acls = [a for a in acls if a.resource_type == TOPIC and a.pattern_type == LITERAL]
    for _ in range(count):
        roll = rng.random()
        op = rng.choice((Op.READ, Op.WRITE, Op.DESCRIBE, Op.DELETE, Op.ALTER))
        host = rng.choice(world.hosts)
        if roll < 0.5:
            known = rng.choice(topic_acls)
            requests.append((known.principal, host, op, TOPIC, known.resource_name))
        elif roll < 0.9:
            requests.append((rng.choice(world.users), host, op, TOPIC, rng.choice(world.topics)))
        elif roll < 0.97:
            op = rng.choice((Op.CREATE, Op.DELETE, Op.DESCRIBE))
            requests.append((rng.choice(world.users), host, op, NAMESPACE, rng.choice(world.teams)))
        else:
            op = rng.choice((Op.CREATE, Op.DESCRIBE, Op.ALTER))
            requests.append((rng.choice(world.users), host, op, CLUSTER, CLUSTER_NAME))
    return requests


_IMPLIES = {
    Op.DESCRIBE: (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER),
    Op.DESCRIBE_CONFIGS: (Op.ALTER_CONFIGS,),
}


def linear_scan(
    acls: Sequence[AccessControlEntryRecord], config: AuthorizerConfig, request: Request
) -> bool:
    """The baseline: one pass over every ACL, the rules read literally."""
    principal, host, op, kind, name = request
    if principal in config.super_users:
        return True
    targets = [(kind, name)] + [(NAMESPACE, n) for n in namespace_chain(kind, name)]
    implied = _IMPLIES.get(op, ())
    found = allowed = False
    for acl in acls:
        on = False
        for target_kind, target in targets:
            if acl.resource_type != target_kind:
                continue
            if acl.pattern_type == LITERAL:
                on = acl.resource_name in (target, "*")
            else:
                on = target.startswith(acl.resource_name)
            if on:
                break
        if not on:
            continue
        found = True
        if acl.principal not in (principal, "User:*") or acl.host not in (host, "*"):
            continue
        if acl.permission_type == DENY:
            if acl.operation in (Op.ALL, op):
                return False
        elif acl.operation in (Op.ALL, op) or acl.operation in implied:
            allowed = True
    if found:
        return allowed
    return config.allow_everyone_if_no_acl_found


# ---------------------------------------------------------------------- --server


def _serve(data_dir: Path, authorize: bool) -> None:
    """The server half of `--server`: a MetadataServer on 127.0.0.1 until SIGTERM."""
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(message)s")

    async def run() -> None:
        service = MetadataService.open(data_dir / "log")
        config = AuthorizerConfig() if authorize else None
        server = MetadataServer(service, host="127.0.0.1", port=0, authorizer=config)
        await server.start()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, lambda: loop.create_task(server.stop("SIGTERM")))
        await server.wait_stopped()

    asyncio.run(run())


def _start(data_dir: Path, authorize: bool, log_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    command = [sys.executable, __file__, "--serve", str(data_dir)]
    with log_path.open("w") as log_file:
        server = subprocess.Popen(
            [*command, *(["--authorize"] if authorize else [])], stderr=log_file
        )
    for _ in range(600):
        text = log_path.read_text()
        if "serving on " in text:
            return server, int(text.split("serving on ", 1)[1].split()[0].rsplit(":", 1)[1])
        if server.poll() is not None:
            break
        time.sleep(0.1)
    server.kill()
    raise SystemExit(f"the server did not start: {log_path.read_text()[-2000:]}")


def _prepare_server(data_dir: Path, acls: Sequence[AccessControlEntryRecord]) -> None:
    """Three brokers and the ACLs, plus the grant that lets the load do its work."""
    service = MetadataService.open(data_dir / "log")
    with service:
        for broker_id in (1, 2, 3):
            request = RegisterBroker(broker_id=broker_id)
            service.execute(partial(service.controller.register_broker, request=request))
        grant = AccessControlEntryRecord(
            id=Uuid.random(),
            resource_type=TOPIC,
            resource_name="load-",
            pattern_type=PREFIXED,
            principal="User:ANONYMOUS",
            host="*",
            operation=Op.ALL,
            permission_type=ALLOW,
        )
        records = (*acls, grant)
        for start in range(0, len(records), 10_000):
            batch = records[start : start + 10_000]
            service.execute(lambda image, b=batch: ControllerResult(records=b, response=None))  # type: ignore[misc]


def _server_round(
    data_dir: Path, authorize: bool, connections: int, seconds: float
) -> tuple[float, float]:
    """Admin writes/s and server CPU µs per request of one run of server_bench's load loop."""
    from server_bench import Stats, _connection, cpu_seconds

    server, port = _start(data_dir, authorize, data_dir / "server.log")
    stats = Stats()

    async def load() -> float:
        deadline = time.perf_counter() + seconds
        start = time.perf_counter()
        await asyncio.gather(*(_connection(port, i, deadline, stats) for i in range(connections)))
        return time.perf_counter() - start

    try:
        # A warm-up (a few create, describe, delete rounds) outside the measure: the server
        # builds its ACL index on its first decision, ~1 s with 100,000 ACLs.
        asyncio.run(_connection(port, -1, time.perf_counter() + 0.5, Stats()))
        cpu_before = cpu_seconds(f"/proc/{server.pid}/stat")
        elapsed = asyncio.run(load())
        cpu = cpu_seconds(f"/proc/{server.pid}/stat") - cpu_before
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    if stats.errors:
        raise SystemExit(f"the load saw errors: {stats.errors[:5]}")
    return stats.writes / elapsed, cpu / len(stats.latencies_ms) * 1e6


def server_comparison(
    acls: Sequence[AccessControlEntryRecord], connections: int, seconds: float, rounds: int
) -> None:
    """Admin writes through the server with the authorizer on (these ACLs) and off."""
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(rounds):
            for authorize in (False, True) if round_ % 2 == 0 else (True, False):
                data_dir = Path(scratch) / f"{round_}-{authorize}"
                _prepare_server(data_dir, acls)
                results[authorize].append(_server_round(data_dir, authorize, connections, seconds))
    rate = {a: statistics.median(r for r, _ in results[a]) for a in results}
    cpu = {a: statistics.median(c for _, c in results[a]) for a in results}
    print()
    print(
        f"server: {connections} connections, {rounds} rounds of {seconds:g} s each, alternating; "
        f"the same {len(acls):,} ACLs (+ the load's grant) in the log both ways"
    )
    print(f"{'measure':<28}{'authorizer on':>15}{'off':>12}{'ratio':>10}")
    for label, values in (("admin writes/s", rate), ("server CPU per request (µs)", cpu)):
        on, off = values[True], values[False]
        print(f"{label:<28}{on:>15,.0f}{off:>12,.0f}{on / off:>10.2f}")


def _percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def _timed_decisions(
    world: World,
    acls: Sequence[AccessControlEntryRecord],
    requests: Sequence[Request],
    image: MetadataImage,
    rng: random.Random,
) -> tuple[list[float], list[float], list[float]]:
    """Each decision's µs, 5 index builds' and 10 one-ACL index updates' seconds."""
    builds = []
    for _ in range(5):
        start = time.perf_counter()
        built = AclIndex(image.acls.by_id.values())
        builds.append(time.perf_counter() - start)
    # An ACL change: one more ACL (a new map, as replay makes), or one removed.
    updates = []
    for index in range(10):
        new = make_acls(world, 1, rng)[0]
        changed = (
            image.acls.by_id.set(new.id, new)
            if index % 2 == 0
            else image.acls.by_id.delete(acls[index].id)
        )
        start = time.perf_counter()
        built.updated(changed)
        updates.append(time.perf_counter() - start)

    authorizer = Authorizer(AuthorizerConfig())
    authorizer.index(image)  # built before the clock starts: decisions alone are timed
    authorize = authorizer.authorize
    clock = time.perf_counter_ns
    indexed: list[float] = []
    for principal, host, op, kind, name in requests:
        start = clock()
        authorize(image, principal, host, op, kind, name)
        indexed.append((clock() - start) / 1000)
    return indexed, builds, updates


def against(args: argparse.Namespace) -> None:
    """The decisions, build and update with this checkout and `--against`, taking turns."""
    script = Path(__file__).resolve()
    other = args.against.resolve()
    argv = ["--child", "--acls", str(args.acls), "--decisions", str(args.decisions)]
    argv += ["--seed", str(args.seed)]
    keys = ("median", "p99", "build_ms", "update_ms")
    pairs: dict[str, list[tuple[float, float]]] = {key: [] for key in keys}
    for round_ in range(args.rounds):
        ours, theirs = paired(round_, other, lambda tree: run_child(script, argv, tree))
        for key in keys:
            pairs[key].append((float(ours[key]), float(theirs[key])))
    print(f"{args.acls:,} ACLs, {args.decisions:,} decisions a round")
    print_table(
        [
            Figure(label="median decision", pairs=pairs["median"], unit="µs", lower_is_better=True),
            Figure(label="p99 decision", pairs=pairs["p99"], unit="µs", lower_is_better=True),
            Figure(label="index build", pairs=pairs["build_ms"], unit="ms", lower_is_better=True),
            Figure(
                label="index update, 1 ACL",
                pairs=pairs["update_ms"],
                unit="ms",
                lower_is_better=True,
            ),
        ],
        other=other,
    )


def main() -> None:
    """Build the ACLs, time both ways, print the table."""
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--acls", type=int, default=100_000)
    parser.add_argument("--decisions", type=int, default=20_000)
    parser.add_argument("--scans", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--server", action="store_true", help="also: admin writes through the server, on and off"
    )
    parser.add_argument("--server-seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--connections", type=int, default=50)
    parser.add_argument(
        "--against", type=Path, default=None, help="another checkout to compare with (baseline)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)  # the server half
    parser.add_argument("--authorize", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        _serve(args.serve, args.authorize)
        return
    if args.against is not None:
        against(args)
        return
    rng = random.Random(args.seed)
    world = World(rng)
    acls = make_acls(world, args.acls, rng)
    requests = make_requests(world, acls, args.decisions, rng)
    image = MetadataImage(acls=AclsImage(by_id=Map({a.id: a for a in acls})))
    config = AuthorizerConfig()
    indexed, builds, updates = _timed_decisions(world, acls, requests, image, rng)
    if args.child:
        figures = {
            "median": statistics.median(indexed),
            "p99": _percentile(indexed, 0.99),
            "build_ms": statistics.median(builds) * 1000,
            "update_ms": statistics.median(updates) * 1000,
        }
        print(json.dumps(figures))
        return
    authorizer = Authorizer(config)
    authorizer.index(image)
    granted = sum(authorizer.authorize(image, *request) for request in requests)

    scanned: list[float] = []
    for request in requests[: args.scans]:
        start = time.perf_counter_ns()
        expected = linear_scan(acls, config, request)
        scanned.append((time.perf_counter_ns() - start) / 1000)
        got = authorizer.authorize(image, *request)
        if got != expected:
            raise SystemExit(f"the index and the linear scan disagree on {request}")

    median_i, median_s = statistics.median(indexed), statistics.median(scanned)
    p99_i, p99_s = _percentile(indexed, 0.99), _percentile(scanned, 0.99)
    print(
        f"{len(acls):,} ACLs; {len(indexed):,} indexed decisions ({granted:,} allowed), "
        f"{len(scanned)} linear scans (same decisions)"
    )
    print()
    print(f"{'measure':<28}{'indexed':>12}{'linear scan':>14}{'ratio':>10}{'target':>12}")
    print(
        f"{'median decision (µs)':<28}{median_i:>12.2f}{median_s:>14,.0f}"
        f"{median_s / median_i:>9,.0f}x{'≤ 10 µs':>12}"
    )
    print(f"{'p99 decision (µs)':<28}{p99_i:>12.2f}{p99_s:>14,.0f}{p99_s / p99_i:>9,.0f}x{'—':>12}")
    print(f"{'index build (ms, median of 5)':<28}{statistics.median(builds) * 1000:>12.0f}")
    update_ms = statistics.median(updates) * 1000
    note = "(median of 10: 5 added, 5 removed)"
    print(f"{'index update, 1 ACL (ms)':<28}{update_ms:>12.1f}   {note}")
    if args.server:
        server_comparison(acls, args.connections, args.server_seconds, args.rounds)


if __name__ == "__main__":
    main()
