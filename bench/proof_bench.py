"""Merkle proof latency on a large log, beside the same proof computed without the index.

Usage: python bench/proof_bench.py [--entries N] [--proofs K] [--dir PATH]

Builds a log of N entries (default 1,000,000; batches of 1,000 TopicRecords), takes a v2
digest (which builds the `merkle/` index once: timed and printed), then times K inclusion
proofs at random offsets and K consistency proofs from random older sizes, each as
`mlog log prove` computes it (index opened, checked against the log, proof built), and the
same root computed from every leaf hash without the index's cached subtree roots (the
baseline: what a proof costs without the index, leaf hashes already in memory). Prints
medians and the 95th percentile. CLI process start-up (Python imports) is not included: it is
printed separately, measured with `mlog --help`.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metadata_log import LogConfig, MetadataLog
from metadata_log.merkle import (
    MerkleIndex,
    entry_bytes,
    leaf_hash,
    prove_consistency,
    prove_inclusion,
    root_at,
)
from metadata_log.merkle import node_hash as _node
from metadata_log.reader import LogReader
from records import TopicRecord
from records.uuids import Uuid


def _fold(level: list[bytes]) -> bytes:
    while len(level) > 1:
        # Pairwise up the tree: the same root as RFC 9162's split for a power of two, and
        # the same number of hashes for any size (the baseline's work, not its shape).
        nxt = [_node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def build(directory: Path, entries: int) -> None:
    ids = [Uuid(uuid.uuid4().bytes) for _ in range(1000)]
    with MetadataLog.open(directory, config=LogConfig()) as log:
        for start in range(0, entries, 1000):
            log.append(
                [
                    TopicRecord(name=f"t{start + i}", topic_id=ids[i])
                    for i in range(min(1000, entries - start))
                ]
            )


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--proofs", type=int, default=50)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    scratch = args.dir or Path(tempfile.mkdtemp(prefix="proof-bench-"))
    directory = scratch / "log"
    try:
        started = time.perf_counter()
        if not directory.exists():
            build(directory, args.entries)
        built = time.perf_counter() - started
        rng = random.Random(7)
        with LogReader.open(directory) as log:
            segments = list(log.storage.segments)
            end = log.end_offset
            started = time.perf_counter()
            root_at(directory, segments, end)
            indexed = time.perf_counter() - started
            inclusion, consistency = [], []
            for _ in range(args.proofs):
                offset = rng.randrange(end)
                t = time.perf_counter()
                prove_inclusion(directory, segments, offset, end)
                inclusion.append(time.perf_counter() - t)
                older = rng.randrange(1, end)
                t = time.perf_counter()
                prove_consistency(directory, segments, older, end)
                consistency.append(time.perf_counter() - t)
            with MerkleIndex(directory) as index:
                leaves = index.leaves(0, end)
            baseline = []
            for _ in range(3):
                t = time.perf_counter()
                _fold(leaves)
                baseline.append(time.perf_counter() - t)
            # Sanity: the entries hash to the indexed leaves at a sample offset.
            segment = segments[-1]
            block, _ = next(segment.blocks_with_offsets(end - 1))
            last = entry_bytes(segment.header.schema_json, block.count, block.body)[-1]
            assert leaf_hash(last) == leaves[end - 1]
        t = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "api.cli", "--help"],
            check=True,
            capture_output=True,
            cwd=Path(__file__).resolve().parents[1],
        )
        startup = time.perf_counter() - t

        def ms(values: list[float]) -> str:
            ordered = sorted(values)
            p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
            return f"median {statistics.median(values) * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms"

        print(f"log: {end:,} entries (built in {built:.1f}s); index built in {indexed:.1f}s")
        print(f"inclusion proof ({args.proofs} random offsets):   {ms(inclusion)}")
        print(f"consistency proof ({args.proofs} random sizes):  {ms(consistency)}")
        print(f"baseline: root from all leaf hashes in memory, no index: {ms(baseline)}")
        ratio = statistics.median(baseline) / statistics.median(inclusion)
        print(f"ratio (baseline / inclusion proof): {ratio:.0f}x")
        print(f"CLI start-up (`mlog --help`), not included above: {startup * 1000:.0f} ms")
    finally:
        if args.dir is None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
