"""Brokers at scale: fencing one broker of a 1M-partition cluster, in process.

Usage: python bench/fleet_bench.py fence [--partitions N] [--brokers B,...] [--share F]
       python bench/fleet_bench.py fleet [--partitions N] [--brokers B] [--share F]
                                         [--quorum 1|3|5] [--snapshot]

fence: an image of N partitions (default 1,000,000) in topics of 10, replication factor 3,
  placed round-robin over B brokers (default 6 and 1000); with --share F (0..1) broker 0 is
  also the first replica of that fraction of the partitions (a broker holding 20%: 0.2).
  One broker (0) is fenced:
    before  the old algorithm: every partition of every topic is walked and every change goes
            into one atomic batch (computed, then replayed into the image)
    first   `change_broker`: the broker's record and the first batch of moves, from the
            per-broker index (what a fence costs before the controller answers anything else)
    all     every batch of moves (at most `MAX_RECORDS_PER_BATCH` records each) computed and
            replayed into the image, one after the other, as the service writes them
    longest the longest single batch (compute + replay): the longest the event loop is held
    all_cpu, us/move, longest_cpu  the same in CPU time of this process (`time.process_time`),
            which other work on a shared host does not inflate
  Log I/O is left out on both sides (the server's figures include it).

fleet: a controller quorum (--quorum 3, the default: three `mlog serve --config` voters on
  this machine, started as tests/support/quorum_processes.py starts them; --quorum 1: one
  `mlog serve`) holding the same cluster (N partitions over B brokers, written straight into
  one log, snapshots kept off by cluster config; the log is written once and copied into each
  voter's data directory before start, with --snapshot also a SQL snapshot of its end, so
  the voters load it rather than replay the log), and in this process B simulated brokers
  heartbeating every 2 s over --connections connections, plus one admin client creating a
  topic every 1/--admin-rate s. Every connection goes to the active controller, found from
  the bootstrap list of all voters (`AdminClient.connect_controller`); a heartbeat answered
  NOT_CONTROLLER sends its connection to the new leader. After --warmup seconds broker 0
  stops heartbeating. The leader fences it once its session (9 s) expires and moves its
  leaderships and ISR places. A follower of the log (FetchLog) sees the fence record and the
  partition changes; the figures:
    detect     last heartbeat of broker 0 -> the fence record's append time
    moved      the fence record -> the last change moving broker 0's partitions (append times;
               0 when they all fit the fence's own batch)
    expiry_to_moved  the session's expiry (last heartbeat + 9 s) -> the last change: the
               fence-to-leaders-moved time, the session check's period (0.45 s) included
    heartbeat  p50/p99 of every heartbeat's answer time sent up to 2 s after the last change
               (the whole run), p99 of those sent before the session's expiry, and of those
               sent from the expiry to the last change (the move)
    admin      p50/p99 of the creates answered (same run), and of those sent during the move
  The watcher runs at nice 19: an instrument, it reads append times whenever it reads.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from against import measured_code

sys.path.insert(0, str(measured_code()))

from records.model import (
    LEADER_UNCHANGED,
    NO_LEADER,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)
from records.uuids import Uuid
from replay.controller.commands import BrokerAction, CreatableTopic
from replay.controller.controller import Controller
from replay.controller.names import partition_name
from replay.controller.states import checked_change, is_live
from replay.delta import MetadataDelta
from replay.image import EMPTY_IMAGE, ClusterImage, MetadataImage, Provenance

if TYPE_CHECKING:
    from api.client.admin import AdminClient

PARTITIONS_PER_TOPIC = 10


def cluster_records(partitions: int, brokers: int, share: float, seed: int = 7) -> list[Record]:
    """The records of a cluster: brokers, then topics of 10 partitions, RF 3 round-robin."""
    rng = random.Random(seed)
    records: list[Record] = [FeatureLevelRecord(name="metadata.version", feature_level=1)]
    records.extend(
        RegisterBrokerRecord(
            broker_id=b, incarnation_id=Uuid(bytes=rng.randbytes(16)), broker_epoch=b, fenced=False
        )
        for b in range(brokers)
    )
    rf = min(3, brokers)
    for t in range(partitions // PARTITIONS_PER_TOPIC):
        topic_id = Uuid(bytes=rng.randbytes(16))
        records.append(TopicRecord(name=f"t{t}", topic_id=topic_id))
        for p in range(PARTITIONS_PER_TOPIC):
            n = t * PARTITIONS_PER_TOPIC + p
            first = 0 if share and rng.random() < share else n % brokers
            replicas = tuple((first + j) % brokers for j in range(rf))
            records.append(
                PartitionRecord(
                    partition_id=p,
                    topic_id=topic_id,
                    replicas=replicas,
                    isr=replicas,
                    leader=replicas[0],
                )
            )
    return records


def build_image(records: list[Record]) -> MetadataImage:
    """The image of `records`, replayed in one delta."""
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay_all(records)
    delta.finish_batch()
    return delta.apply(Provenance(offset=len(records) - 1, epoch=0, timestamp=0))


def replayed(image: MetadataImage, records: tuple[Record, ...]) -> MetadataImage:
    """`image` after one batch."""
    delta = MetadataDelta(image)
    delta.replay_all(records)
    delta.finish_batch()
    last = image.provenance.offset + len(records)
    return delta.apply(Provenance(offset=last, epoch=0, timestamp=0))


def old_move_off(image: MetadataImage, cluster_after: ClusterImage, broker_id: int) -> list[Record]:
    """The algorithm before the per-broker index (the baseline): every partition is walked."""
    changes: list[Record] = []
    for topic in image.topics.sorted():
        for partition in topic.partitions:
            if broker_id not in partition.isr and partition.leader != broker_id:
                continue
            isr = tuple(b for b in partition.isr if b != broker_id)
            if not isr:
                isr = partition.isr
            leader = next((b for b in isr if is_live(cluster_after, b)), NO_LEADER)
            change = PartitionChangeRecord(
                partition_id=partition.partition_id,
                topic_id=topic.topic_id,
                isr=isr if isr != partition.isr else None,
                leader=leader if leader != partition.leader else LEADER_UNCHANGED,
            )
            if change.isr is None and change.leader == LEADER_UNCHANGED:
                continue
            where = partition_name(topic, partition.partition_id)
            checked_change(where, partition, change, image.cluster, cluster_after)
            changes.append(change)
    return changes


def timed(work: Callable[[], object]) -> tuple[float, object]:
    gc.collect()
    start = time.perf_counter()
    value = work()
    return time.perf_counter() - start, value


def fence_old(image: MetadataImage, broker_id: int) -> tuple[float, int]:
    """The baseline: the broker's record and every move in one batch, replayed."""

    def run() -> int:
        broker = image.cluster.get(broker_id)
        assert broker is not None
        from records.model import BrokerRegistrationChangeRecord, FencingChange

        record = BrokerRegistrationChangeRecord(
            broker_id=broker_id, broker_epoch=broker.broker_epoch, fenced=FencingChange.FENCE
        )
        after = replayed(image, (record,)).cluster
        moves = old_move_off(image, after, broker_id)
        replayed(image, (record, *moves))
        return len(moves)

    seconds, moved = timed(run)
    return seconds, moved  # type: ignore[return-value]


def fence_new(
    image: MetadataImage, broker_id: int
) -> tuple[float, float, float, int, int, float, float]:
    """(first batch s, all batches s, longest batch s, moves, batches, all CPU s, longest CPU s).

    The CPU times (`time.process_time`) do not count what other work on the host takes.
    """
    controller = Controller()
    start, start_cpu = time.perf_counter(), time.process_time()
    result = controller.change_broker(image, broker_id, BrokerAction.FENCE)
    image = replayed(image, result.records)
    first = time.perf_counter() - start
    longest, longest_cpu = first, time.process_time() - start_cpu
    moves = len(result.records) - 1
    batches = 1
    more = result.more
    while more is not None:
        began, began_cpu = time.perf_counter(), time.process_time()
        step = more(image)
        if step.records:
            image = replayed(image, step.records)
            moves += len(step.records)
            batches += 1
        more = step.more
        longest = max(longest, time.perf_counter() - began)
        longest_cpu = max(longest_cpu, time.process_time() - began_cpu)
    total = time.perf_counter() - start
    return first, total, longest, moves, batches, time.process_time() - start_cpu, longest_cpu


def fence(args: argparse.Namespace) -> None:
    print(f"in-process fence of broker 0, {args.partitions:,} partitions, RF 3 (seconds)")
    print(
        f"{'brokers':>8} {'share':>6} {'held':>9} {'moves':>8} {'before':>8} "
        f"{'first':>7} {'all':>7} {'longest':>8} {'batches':>8} {'before/all':>10} "
        f"{'all_cpu':>8} {'us/move':>8} {'longest_cpu':>12}"
    )
    for brokers in args.brokers:
        gc.collect()
        records = cluster_records(args.partitions, brokers, args.share)
        gc.disable()
        image = build_image(records)
        del records
        held = len(image.topics.partitions_of(0))
        before, old_moves = fence_old(image, 0) if not args.skip_before else (float("nan"), -1)
        first, total, longest, moves, batches, total_cpu, longest_cpu = fence_new(image, 0)
        gc.enable()
        if old_moves >= 0 and old_moves != moves:
            raise SystemExit(f"the two algorithms disagree: {old_moves} moves vs {moves}")
        print(
            f"{brokers:>8} {args.share:>6.2f} {held:>9,} {moves:>8,} {before:>8.3f} "
            f"{first:>7.3f} {total:>7.3f} {longest:>8.3f} {batches:>8} {before / total:>9.1f}x "
            f"{total_cpu:>8.3f} {total_cpu / max(moves, 1) * 1e6:>8.2f} {longest_cpu:>12.4f}",
            flush=True,
        )
        del image


# ------------------------------------------------------------------------------- fleet

HEARTBEAT_S = 2.0
SESSION_TIMEOUT_S = 9.0
"""`broker.session.timeout.ms`'s default, which the server runs with."""
NOT_CONTROLLER = 41


def write_cluster_log(
    data_dir: Path, partitions: int, brokers: int, share: float
) -> tuple[int, int]:
    """A data directory whose log holds the cluster: (its end offset, broker 0's partitions).

    Each partition broker 0 is a replica of needs a change when it is fenced (RF 3, ISR =
    replicas), so that is the number of changes the fence writes.
    """
    from metadata_log import MetadataLog
    from records.model import ConfigRecord, ConfigResourceType

    records = cluster_records(partitions, brokers, share)
    no_snapshots = [
        ConfigRecord(
            resource_type=ConfigResourceType.BROKER,
            resource_name="",
            name="metadata.log.max.record.bytes.between.snapshots",
            value=str(2**62),
        ),
        ConfigRecord(
            resource_type=ConfigResourceType.BROKER,
            resource_name="",
            name="metadata.log.max.snapshot.interval.ms",
            value="0",
        ),
    ]
    log = MetadataLog.open(data_dir)
    try:
        head = brokers + 1
        log.append([*records[:head], *no_snapshots], principal="fleet-bench")
        batch: list[Record] = []
        for record in records[head:]:
            if isinstance(record, TopicRecord) and len(batch) >= 10_000:
                log.append(batch, principal="fleet-bench")
                batch = []
            batch.append(record)
        if batch:
            log.append(batch, principal="fleet-bench")
        held = sum(1 for r in records if isinstance(r, PartitionRecord) and 0 in r.replicas)
        return log.end_offset, held
    finally:
        log.close()


def quantile(values: list[float], q: float) -> float:
    """The q-quantile of `values` (nan if none)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def connect_leader(addresses: list[str]) -> AdminClient:
    """A connection to the active controller, found from the bootstrap `addresses` in turn.

    A single server is its own controller; a quorum node names the leader, and the client
    connects there (`AdminClient.connect_controller`), as a Kafka broker finds its controller.
    """
    from api.client.admin import AdminClient

    last: Exception | None = None
    for address in addresses:
        try:
            return await AdminClient.connect_controller(address, timeout_ms=30_000)
        except Exception as exc:  # the next bootstrap address
            last = exc
    raise ConnectionError(f"no controller reachable through {', '.join(addresses)}: {last}")


async def run_fleet(
    args: argparse.Namespace, addresses: list[str], end: int, expected: int
) -> dict[str, object]:
    """The heartbeating fleet, the admin load and the watcher; the figures.

    Every connection goes to the active controller. A heartbeat answered NOT_CONTROLLER (a
    failover) sends its connection to the new leader, as a Kafka broker would.
    """
    import asyncio
    import contextlib

    clients = [await connect_leader(addresses) for _ in range(args.connections)]
    admin = await connect_leader(addresses)
    # The watcher decodes every record of the move (200,000 at 20% of 1M): in a process of
    # its own, so that its decoding never delays this loop's heartbeat and admin timings.
    spawn = multiprocessing.get_context("spawn")
    seen = spawn.Array("q", 3, lock=False)  # fence's append time, last move's, moves seen
    watching = spawn.Event()
    watcher = spawn.Process(target=watch_log, args=(addresses, end, seen, watching), daemon=True)
    watcher.start()
    moved_leader = [0]

    reconnecting: dict[int, asyncio.Task[AdminClient]] = {}

    async def follow_leader(slot: int, stale: AdminClient) -> None:
        """Point connection `slot` at the controller once, whichever broker noticed first."""
        if clients[slot] is not stale:
            return  # another broker on this connection moved it already
        task = reconnecting.get(slot)
        if task is None:
            moved_leader[0] += 1
            task = reconnecting[slot] = asyncio.ensure_future(connect_leader(addresses))
        try:
            fresh = await asyncio.shield(task)
        finally:
            if reconnecting.get(slot) is task and task.done():
                del reconnecting[slot]
        if clients[slot] is stale:
            clients[slot] = fresh
            with contextlib.suppress(Exception):
                await stale.close()

    heartbeats: list[tuple[float, float]] = []  # (sent, seconds)
    creates: list[tuple[float, float]] = []
    errors: list[str] = []
    stop_victim = asyncio.Event()
    done = asyncio.Event()
    victim_last = [0.0]
    loop = asyncio.get_running_loop()

    async def broker(broker_id: int, slot: int) -> None:
        await asyncio.sleep(HEARTBEAT_S * broker_id / args.brokers)
        while not done.is_set():
            if broker_id == 0 and stop_victim.is_set():
                return
            client = clients[slot]
            sent = loop.time()
            try:
                answer = await client.request(
                    63,
                    broker_id=broker_id,
                    broker_epoch=broker_id,
                    current_metadata_offset=end,
                    want_fence=False,
                    want_shut_down=False,
                )
            except Exception as exc:  # the connection was lost: find the controller again
                errors.append(f"broker {broker_id}: {exc}")
                try:
                    await follow_leader(slot, client)
                except Exception as again:
                    errors.append(f"broker {broker_id}: {again}")
                    await asyncio.sleep(0.5)
                continue
            took = loop.time() - sent
            heartbeats.append((sent, took))
            if broker_id == 0:
                victim_last[0] = time.time()
            if answer.error_code == NOT_CONTROLLER:
                await follow_leader(slot, client)
            if answer.error_code != 0 or answer.is_fenced:
                errors.append(f"broker {broker_id}: {int(answer.error_code)} {answer.is_fenced}")
            await asyncio.sleep(max(0.0, HEARTBEAT_S - took))

    async def admin_load() -> None:
        n = 0
        while not done.is_set():
            sent = loop.time()
            await admin.create_topics(
                [CreatableTopic(name=f"fleet-admin-{n}", num_partitions=1, replication_factor=1)]
            )
            creates.append((sent, loop.time() - sent))
            n += 1
            await asyncio.sleep(max(0.0, 1 / args.admin_rate - (loop.time() - sent)))

    tasks = [asyncio.create_task(broker(b, b % len(clients))) for b in range(args.brokers)]
    tasks.append(asyncio.create_task(admin_load()))
    await asyncio.sleep(args.warmup)
    stop_victim.set()
    stopped_at = time.time()
    deadline = loop.time() + 60 + args.warmup
    while loop.time() < deadline and seen[2] < expected and watcher.is_alive():
        await asyncio.sleep(0.5)
    await asyncio.sleep(2)  # the load goes on a little after the move
    done.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for client in [*clients, admin]:
        await client.close()
    watching.set()
    watcher.join(30)
    fence_ts = [seen[0]] if seen[0] else []
    last_move_ts = [seen[1]] if seen[1] else []
    moves = [seen[2]]
    if not fence_ts:
        raise SystemExit(
            f"broker 0 was not fenced within {60 + args.warmup} s ({len(heartbeats)} "
            f"heartbeats, {moved_leader[0]} leader changes seen (each one starts every "
            f"session again), errors {errors[:3]})"
        )
    fenced_s = fence_ts[0] / 1000
    moved_s = max(last_move_ts) / 1000 if last_move_ts else fenced_s
    expired_s = victim_last[0] + SESSION_TIMEOUT_S
    # The move window in this process's loop clock: from the session's expiry to the last move.
    offset_s = loop.time() - time.time()
    window = (expired_s + offset_s, moved_s + offset_s + 0.001)
    during_hb = [t for sent, t in heartbeats if window[0] <= sent <= window[1]]
    during_admin = [t for sent, t in creates if window[0] <= sent <= window[1]]
    # The whole run: up to 2 s after the last move, whenever the watcher saw it.
    run_end = window[1] + 2
    all_hb = [t for sent, t in heartbeats if sent <= run_end]
    before_hb = [t for sent, t in heartbeats if sent < window[0]]
    all_admin = [t for sent, t in creates if sent <= run_end]
    return {
        "detect_s": fenced_s - victim_last[0],
        "stopped_to_fence_s": fenced_s - stopped_at,
        "moved_s": moved_s - fenced_s,
        "expiry_to_moved_s": moved_s - expired_s,
        "moves": moves[0],
        "heartbeats": len(all_hb),
        "hb_p50_ms": quantile(all_hb, 0.5) * 1000,
        "hb_p99_ms": quantile(all_hb, 0.99) * 1000,
        "hb_before_p99_ms": quantile(before_hb, 0.99) * 1000,
        "hb_move_p99_ms": quantile(during_hb, 0.99) * 1000,
        "hb_move_n": len(during_hb),
        "creates": len(all_admin),
        "admin_p50_ms": quantile(all_admin, 0.5) * 1000,
        "admin_p99_ms": quantile(all_admin, 0.99) * 1000,
        "admin_move_p99_ms": quantile(during_admin, 0.99) * 1000,
        "admin_move_n": len(during_admin),
        "leader_changes_seen": moved_leader[0],
        "errors": errors[:5],
    }


def watch_log(addresses: list[str], end: int, seen: Any, done: Any) -> None:
    """Follow the leader's log from `end` (FetchLog): broker 0's fence and the moves after it.

    Runs in a process of its own; `seen` gets the fence record's append time, the last
    partition change's and how many changes followed the fence; `done` stops it. It is an
    instrument, not load: it runs at the lowest priority (nice 19), so its decoding does not
    take the cores from the voters and the fleet during the move. What it reports are append
    times, which do not depend on when it reads them.
    """
    import asyncio
    import os

    os.nice(19)

    from records.model import BrokerRegistrationChangeRecord, FencingChange

    async def follow() -> None:
        watcher = await connect_leader(addresses)
        offset = end
        try:
            while not done.is_set():
                entries, next_end = await watcher.fetch_log(offset, max_wait_ms=500)
                for entry in entries:
                    record = entry.record
                    if (
                        isinstance(record, BrokerRegistrationChangeRecord)
                        and record.broker_id == 0
                        and record.fenced == FencingChange.FENCE
                    ):
                        if not seen[0]:
                            seen[0] = entry.timestamp
                    elif seen[0] and isinstance(record, PartitionChangeRecord):
                        seen[1] = max(seen[1], entry.timestamp)
                        seen[2] += 1
                offset = entries[-1].offset + 1 if entries else min(offset, next_end)
        finally:
            await watcher.close()

    asyncio.run(follow())


def fleet(args: argparse.Namespace) -> None:
    import asyncio
    import signal
    import tempfile

    from server_bench import start_server

    scratch = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    try:
        started = time.perf_counter()
        end, expected = write_cluster_log(
            scratch / "data" / "log", args.partitions, args.brokers, args.share
        )
        print(
            f"log of {args.partitions:,} partitions written in "
            f"{time.perf_counter() - started:.1f} s"
        )
        started = time.perf_counter()
        server, (host, port) = start_server(scratch / "data", scratch / "server.log")
        print(f"server up (replayed the log) in {time.perf_counter() - started:.1f} s")
        try:
            figures = asyncio.run(run_fleet(args, [f"{host}:{port}"], end, expected))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
        print(
            f"{args.brokers} brokers, {args.partitions:,} partitions, share of broker 0: "
            f"{args.share or 'its turn'}; single node"
        )
        for key, value in figures.items():
            print(
                f"  {key:>20}: {value:.3f}" if isinstance(value, float) else f"  {key:>20}: {value}"
            )
    finally:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)


def snapshot_data_dir(data_dir: Path) -> float:
    """`mlog snapshot create` of `data_dir`'s log end (SQLite, `snapshots.db`); its seconds."""
    import subprocess

    from against import code_env

    code = measured_code()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "api.cli", "snapshot", "create", "--data-dir", str(data_dir)],
        cwd=code,
        env=code_env(code),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"mlog snapshot create failed: {done.stderr[-2000:]}")
    return time.perf_counter() - started


async def quorum_ready(addresses: list[str], timeout: float) -> float:
    """Seconds until the quorum's leader has applied the log and answers a write."""
    import asyncio

    from replay.controller.commands import CreatableTopic

    loop = asyncio.get_running_loop()
    started = loop.time()
    while True:
        try:
            client = await asyncio.wait_for(connect_leader(addresses), 30)
            try:
                (created,) = await asyncio.wait_for(
                    client.create_topics(
                        [CreatableTopic(name="fleet-ready", num_partitions=1, replication_factor=1)]
                    ),
                    30,
                )
            finally:
                await client.close()
            if created.outcome.error_code in (0, 36):  # created, or TOPIC_ALREADY_EXISTS
                return loop.time() - started
        except Exception:  # not up yet, or an election
            pass
        if loop.time() - started > timeout:
            raise TimeoutError(f"the quorum answered no write within {timeout:.0f} s")
        await asyncio.sleep(1.0)


async def quorum_settled(addresses: list[str], timeout: float, security: Any = None) -> float:
    """Seconds until every voter answers Metadata naming one leader, twice 3 s apart.

    `addresses` are the voters' controller listeners, asked with the controllers' `security`
    (a client listener names its own node as the controller).

    A voter answers only once it has applied the committed log (its image), so this is when
    all of them are up, and the fleet does not start in the elections of their start-up.
    """
    import asyncio

    from api.client.admin import AdminClient

    async def named(address: str) -> int:
        try:
            client = await asyncio.wait_for(AdminClient.connect(address, security=security), 3)
            try:
                answer = await asyncio.wait_for(client.metadata([]), 3)
                return int(answer.controller_id)
            finally:
                await client.close()
        except Exception:  # still starting
            return -1

    loop = asyncio.get_running_loop()
    started = loop.time()
    previous = -1
    while loop.time() - started < timeout:
        leaders = set(await asyncio.gather(*(named(a) for a in addresses)))
        leader = leaders.pop() if len(leaders) == 1 else -1
        if leader >= 0 and leader == previous:
            return loop.time() - started
        previous = leader
        await asyncio.sleep(3.0)
    raise TimeoutError(f"the voters named no common leader within {timeout:.0f} s")


def fleet_quorum(args: argparse.Namespace) -> None:
    """The fleet against a quorum of `args.quorum` `mlog serve` nodes on one copied log."""
    import asyncio
    import shutil
    import tempfile

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(1, str(root))  # tests.support: the quorum harness (as bench/quorum_bench.py)
    from tests.support import quorum_processes
    from tests.support.quorum_processes import Quorum

    quorum_processes.PROJECT = measured_code()  # the nodes run the measured code
    scratch = Path(tempfile.mkdtemp(prefix="fleet-quorum-"))
    quorum: Quorum | None = None
    try:
        template = scratch / "template"
        started = time.perf_counter()
        end, expected = write_cluster_log(
            template / "log", args.partitions, args.brokers, args.share
        )
        print(
            f"log of {args.partitions:,} partitions written in "
            f"{time.perf_counter() - started:.1f} s",
            flush=True,
        )
        if args.snapshot:
            print(f"snapshot of the log's end taken in {snapshot_data_dir(template):.1f} s")
        timers: dict[str, int | str] = {}
        if args.fetch_timeout_ms is not None:
            # Kafka's defaults are 2000 / 1000 ms; a shared host that starves the three
            # servers of CPU for longer than that elects leaders over and over, and each new
            # leader starts every broker's session again.
            timers = {
                "controller.quorum.fetch.timeout.ms": args.fetch_timeout_ms,
                "controller.quorum.election.timeout.ms": args.fetch_timeout_ms // 2,
                "controller.quorum.request.timeout.ms": args.fetch_timeout_ms,
            }
        quorum = Quorum(scratch / "quorum", size=args.quorum, timers=timers)
        started = time.perf_counter()
        for node in quorum.nodes.values():  # the same log (and snapshot) on every voter
            shutil.copytree(template / "log", node.data_dir / "log")
            if (template / "snapshots.db").exists():
                shutil.copy2(template / "snapshots.db", node.data_dir / "snapshots.db")
        took = time.perf_counter() - started
        print(f"copied into {args.quorum} data directories in {took:.1f} s")
        addresses = [node.address for node in quorum.nodes.values()]
        quorum.start_all()
        try:
            ready = asyncio.run(quorum_ready(addresses, timeout=900))
            assert quorum.pki is not None
            controllers = [node.controller_address for node in quorum.nodes.values()]
            security = quorum.pki.controller_client()
            settled = asyncio.run(quorum_settled(controllers, timeout=600, security=security))
        except TimeoutError as exc:
            raise SystemExit(f"{exc}:\n{quorum.stderr_tails()}") from None
        print(f"every voter names the same leader {settled:.1f} s later", flush=True)
        how = "from the snapshot" if args.snapshot else "replayed the log"
        print(f"quorum up ({how}), a write committed, in {ready:.1f} s", flush=True)
        figures = asyncio.run(run_fleet(args, addresses, end, expected))
        leader = asyncio.run(quorum.leader())
        print(
            f"{args.brokers} brokers, {args.partitions:,} partitions, share of broker 0: "
            f"{args.share or 'its turn'}; a quorum of {args.quorum} (leader: node {leader})"
        )
        for key, value in figures.items():
            print(
                f"  {key:>20}: {value:.3f}" if isinstance(value, float) else f"  {key:>20}: {value}"
            )
    finally:
        if quorum is not None:
            quorum.stop_all()
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    sections = parser.add_subparsers(dest="section", required=True)
    section = sections.add_parser(
        "fence", help="in-process fence of one broker", allow_abbrev=False
    )
    section.add_argument("--partitions", type=int, default=1_000_000)
    section.add_argument(
        "--brokers", type=lambda s: [int(x) for x in s.split(",")], default=[6, 1000]
    )
    section.add_argument("--share", type=float, default=0.0)
    section.add_argument("--skip-before", action="store_true", help="leave the baseline out")
    section = sections.add_parser(
        "fleet", help="simulated brokers against a server", allow_abbrev=False
    )
    section.add_argument("--partitions", type=int, default=1_000_000)
    section.add_argument("--brokers", type=int, default=1000)
    section.add_argument("--share", type=float, default=0.0)
    section.add_argument("--connections", type=int, default=50)
    section.add_argument("--admin-rate", type=float, default=20.0)
    section.add_argument("--warmup", type=float, default=6.0)
    section.add_argument(
        "--quorum",
        type=int,
        default=3,
        choices=(1, 3, 5),
        help="controllers: a quorum of 3 (default) or 5 on one copied log, or 1 (a single node)",
    )
    section.add_argument(
        "--snapshot",
        action="store_true",
        help="the quorum's nodes start from a SQL snapshot of the log's end (copied with it)",
    )
    section.add_argument(
        "--fetch-timeout-ms",
        type=int,
        default=None,
        help="controller.quorum.fetch.timeout.ms of the quorum (election timeout: half of it; "
        "default: Kafka's 2000 / 1000)",
    )
    args = parser.parse_args()
    if args.section == "fence":
        fence(args)
    elif args.quorum == 1:
        fleet(args)
    else:
        fleet_quorum(args)


if __name__ == "__main__":
    main()
