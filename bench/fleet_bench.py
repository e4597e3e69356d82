"""Brokers at scale: fencing one broker of a 1M-partition cluster, in process.

Usage: python bench/fleet_bench.py fence [--partitions N] [--brokers B,...] [--share F]

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
  Log I/O is left out on both sides (the server's figures include it).
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from collections.abc import Callable

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
from replay.controller.commands import BrokerAction
from replay.controller.controller import Controller
from replay.controller.names import partition_name
from replay.controller.states import checked_change, is_live
from replay.delta import MetadataDelta
from replay.image import EMPTY_IMAGE, ClusterImage, MetadataImage, Provenance

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


def fence_new(image: MetadataImage, broker_id: int) -> tuple[float, float, float, int, int]:
    """(first batch s, all batches s, longest batch s, moves, batches) with the index."""
    controller = Controller()
    start = time.perf_counter()
    result = controller.change_broker(image, broker_id, BrokerAction.FENCE)
    image = replayed(image, result.records)
    first = time.perf_counter() - start
    longest = first
    moves = len(result.records) - 1
    batches = 1
    more = result.more
    while more is not None:
        began = time.perf_counter()
        step = more(image)
        if step.records:
            image = replayed(image, step.records)
            moves += len(step.records)
            batches += 1
        more = step.more
        longest = max(longest, time.perf_counter() - began)
    total = time.perf_counter() - start
    return first, total, longest, moves, batches


def fence(args: argparse.Namespace) -> None:
    print(f"in-process fence of broker 0, {args.partitions:,} partitions, RF 3 (seconds)")
    print(
        f"{'brokers':>8} {'share':>6} {'held':>9} {'moves':>8} {'before':>8} "
        f"{'first':>7} {'all':>7} {'longest':>8} {'batches':>8} {'before/all':>10}"
    )
    for brokers in args.brokers:
        gc.collect()
        records = cluster_records(args.partitions, brokers, args.share)
        gc.disable()
        image = build_image(records)
        del records
        held = len(image.topics.partitions_of(0))
        before, old_moves = fence_old(image, 0) if not args.skip_before else (float("nan"), -1)
        first, total, longest, moves, batches = fence_new(image, 0)
        gc.enable()
        if old_moves >= 0 and old_moves != moves:
            raise SystemExit(f"the two algorithms disagree: {old_moves} moves vs {moves}")
        print(
            f"{brokers:>8} {args.share:>6.2f} {held:>9,} {moves:>8,} {before:>8.3f} "
            f"{first:>7.3f} {total:>7.3f} {longest:>8.3f} {batches:>8} {before / total:>9.1f}x",
            flush=True,
        )
        del image


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sections = parser.add_subparsers(dest="section", required=True)
    section = sections.add_parser("fence", help="in-process fence of one broker")
    section.add_argument("--partitions", type=int, default=1_000_000)
    section.add_argument(
        "--brokers", type=lambda s: [int(x) for x in s.split(",")], default=[6, 1000]
    )
    section.add_argument("--share", type=float, default=0.0)
    section.add_argument("--skip-before", action="store_true", help="leave the baseline out")
    args = parser.parse_args()
    if args.section == "fence":
        fence(args)


if __name__ == "__main__":
    main()
