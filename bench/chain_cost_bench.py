"""What the hash chain adds to a durable append: the same log, chain kept and not, alternating.

Usage: python bench/chain_cost_bench.py [--batches N] [--repeat K]

Each round appends N batches of 100 TopicRecords (durable: one fdatasync each) to one log
with the chain kept, then N to another with the chain switched off (`ChainKeeper.append`
replaced by a no-op), in the same process, the order alternating between rounds; prints the
median rates and the median of the per-round ratios. fsync latency on a shared machine
drifts by +-30% between runs, so only the paired ratio means anything.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metadata_log import LogConfig, MetadataLog
from metadata_log.chain import ChainKeeper
from records import TopicRecord
from records.uuids import Uuid


def _no_chain(self: ChainKeeper, first_offset: int, count: int, body: bytes) -> None:
    """`ChainKeeper.append` switched off: the block is not hashed and nothing is recorded."""


def _rate(directory: Path, batches: list[list[TopicRecord]], chained: bool) -> float:
    keep = ChainKeeper.append
    if not chained:
        ChainKeeper.append = _no_chain  # type: ignore[method-assign]
    log = MetadataLog.open(directory, config=LogConfig())
    try:
        started = time.perf_counter()
        for batch in batches:
            log.append(batch)
        return len(batches) * 100 / (time.perf_counter() - started)
    finally:
        log.close()
        ChainKeeper.append = keep  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="chain-cost-"))
    ids = [Uuid(uuid.uuid4().bytes) for _ in range(100)]
    try:
        chained_rates, plain_rates, ratios = [], [], []
        for round_ in range(args.repeat):
            batches = [
                [TopicRecord(name=f"r{round_}b{b}t{i}", topic_id=ids[i]) for i in range(100)]
                for b in range(args.batches)
            ]
            order = (True, False) if round_ % 2 == 0 else (False, True)
            rates = {}
            for chained in order:
                directory = scratch / f"{round_}-{chained}"
                rates[chained] = _rate(directory, batches, chained)
            chained_rates.append(rates[True])
            plain_rates.append(rates[False])
            ratios.append(rates[True] / rates[False])
        print(f"append batches of 100 (durable), {args.batches} batches, {args.repeat} rounds")
        print(f"  chain kept:     {statistics.median(chained_rates):10,.0f} entries/s")
        print(f"  chain not kept: {statistics.median(plain_rates):10,.0f} entries/s")
        print(f"  ratio (median of paired rounds): {statistics.median(ratios):.3f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
