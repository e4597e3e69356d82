"""Append to a metadata log forever, acknowledging each batch on stdout; killed by test_crash.

Usage: `python -m tests.support.crash_writer <log dir> <seed>`.

Every batch carries its id and size: record `i` of batch `<id>` of `n` records is
`ConfigRecord(resource_type=TOPIC, resource_name="b<id>", name=str(i), value=str(n))`, with batch
ids `<seed>.<counter>` (unique as long as every run uses a different seed). Once an append has
returned, the script prints `ACK <id> <first offset> <last offset>` and flushes stdout, so any
acknowledged batch must be in the log after a crash, with exactly those offsets.
"""

from __future__ import annotations

import asyncio
import random
import sys
from itertools import count

from metadata_log import LogConfig, MetadataLog
from records import ConfigRecord, ConfigResourceType

SEGMENT_BYTES = 64 * 1024


def make_batch(batch_id: str, size: int) -> list[ConfigRecord]:
    """The records of one batch: they name their batch, their position and the batch size."""
    return [
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name=f"b{batch_id}",
            name=str(i),
            value=str(size),
        )
        for i in range(size)
    ]


def ack(batch_id: str, first: int, last: int) -> None:
    """Report an acknowledged (durable) batch."""
    sys.stdout.write(f"ACK {batch_id} {first} {last}\n")
    sys.stdout.flush()


async def run(directory: str, seed: int) -> None:
    """Append batches until killed, alternating sync appends and bursts of async appends."""
    rng = random.Random(seed)
    ids = (f"{seed}.{n}" for n in count())
    # Checkpoints every 20 ms, so that kills also land while they are being rewritten.
    config = LogConfig(segment_bytes=SEGMENT_BYTES, checkpoint_interval_ms=20)
    log = MetadataLog.open(directory, config=config)
    principal = f"writer-{seed}"

    async def append_one(batch_id: str, size: int) -> None:
        first, last = await log.append_async(make_batch(batch_id, size), principal=principal)
        ack(batch_id, first, last)

    while True:
        for _ in range(rng.randint(1, 5)):
            batch_id = next(ids)
            first, last = log.append(make_batch(batch_id, rng.randint(1, 50)), principal=principal)
            ack(batch_id, first, last)
        burst = [append_one(next(ids), rng.randint(1, 50)) for _ in range(rng.randint(2, 12))]
        await asyncio.gather(*burst)


def main() -> None:
    """Entry point: `crash_writer.py <dir> <seed>`."""
    directory, seed = sys.argv[1], int(sys.argv[2])
    asyncio.run(run(directory, seed))


if __name__ == "__main__":
    main()
