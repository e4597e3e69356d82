"""A quorum node's image following the high watermark: committed blocks replayed as they commit.

A node that does not take writes (a follower, an observer, a leader whose LeaderChange is not
committed yet) replays what the high watermark passed and has the service follow the image.
The first time, the service starts from its newest snapshot of committed state (or the log's
start). Afterwards a follower replays the blocks it checked and wrote from the records it
decoded then (`ReplicaBlocks.take_records`), on the event loop's thread in slices of whole
blocks, a loop turn between two slices; it reads the log only where a block is missing, on the
worker thread when that is many entries. Commits of more than one slice are a mass change for
the cyclic collector (`MassChangeUntilQuiet`). Only the service's public API is used.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from api.raft.blocks import ReplicaBlocks
from api.raft.snapshot_shipping import Io
from api.service.gc_policy import MassChangeUntilQuiet, freeze_loaded_image
from api.service.replicated import ReplicatedService
from replay.image import EMPTY_IMAGE, MetadataImage
from replay.loader import load_image, replay_in_slices

logger = logging.getLogger("api.server.quorum")

INLINE_REPLAY_ENTRIES = 1_000
"""A follower replays newly committed entries on the event loop's thread, this many at most
between two turns of the loop (a few milliseconds), so the loop goes on answering meanwhile.

The blocks it checked and wrote are replayed from the records it decoded then, in slices of
whole blocks, one loop turn between slices. Only entries it no longer holds in memory (read
back from the log, as after catching up by a snapshot) and more than this go to the worker
thread: a hop there costs the worker's taking the interpreter lock and the loop's waiting to
get it back. In a fence's move at 1M partitions (`bench/fleet_bench.py fleet --snapshot
--share 0.2`), where a follower's commits advance 1,000-1,250 entries at a time, the hop (the
future's result set on the worker, the loop woken) took about a fifth of a follower's
interpreter-lock time (py-spy `--gil`)."""

MASS_REPLAY_QUIET_S = 1.0
"""A follower's mass change (commits of more than one slice of `INLINE_REPLAY_ENTRIES`) ends
this long after the last such commit: then what it made is frozen and collections resume."""

MASS_REPLAY_LONGEST_S = 30.0
"""A follower's mass change ends after this long even if big commits go on (a 20% fence at
1M partitions takes ~5 s): the collector then works as usual until they stop."""


def _index_failure(built: asyncio.Future[Any]) -> None:
    """Log a start image's index build that failed (its first reader then raises it again)."""
    if not built.cancelled() and built.exception() is not None:
        logger.error("the start image's per-broker index failed to build: %s", built.exception())


class CommittedReplay:
    """Where a node's image is (`applied`), and its replay of committed entries up from there."""

    def __init__(
        self, service: ReplicatedService, blocks: ReplicaBlocks, *, io: Io, node_id: int
    ) -> None:
        """`io` runs a blocking call on the node's worker thread (reads of the log)."""
        self.service = service
        self.node_id = node_id
        self._blocks = blocks
        self._io = io
        self.applied = service.image.provenance.offset + 1
        """The offset of the first entry the node's image does not hold."""
        # Commits of many slices (a fence's moves, a catch-up): the collector held off.
        self._mass_replay = MassChangeUntilQuiet(MASS_REPLAY_QUIET_S, MASS_REPLAY_LONGEST_S)
        self._index_built: asyncio.Future[Any] | None = None
        """The start image's per-broker index, being built on a thread (kept referenced)."""

    async def follow(self, high_watermark: int) -> None:
        """Replay the entries below `high_watermark` not applied yet; the service follows."""
        if high_watermark <= self.applied:
            return
        base = self.service.image
        image: MetadataImage
        if base is EMPTY_IMAGE:
            image = await self._io(self.service.first_image, high_watermark - 1)
            self._started_from(image)
        else:
            last = high_watermark - 1
            # The blocks this node checked and wrote, decoded then (taken on this thread).
            blocks = self._blocks.take_records(base.provenance.offset + 1, last)
            if blocks is not None:
                image = base
                slices = replay_in_slices(base, blocks, lte=last, entries=INLINE_REPLAY_ENTRIES)
                for image in slices:
                    if image.provenance.offset < last:
                        self._mass_replay.busy()
                        await asyncio.sleep(0)  # a loop turn between two slices
            elif high_watermark - self.applied <= INLINE_REPLAY_ENTRIES:
                image = load_image(self.service.replica_log, lte=last, base=base)
            else:
                image = await self._io(load_image, self.service.replica_log, lte=last, base=base)
        self.applied = image.provenance.offset + 1
        self.service.follow(image)

    def _started_from(self, image: MetadataImage) -> None:
        freeze_loaded_image()
        # A snapshot's load leaves the per-broker index to its first reader: built on a
        # thread while the node goes on (`replay/broker_index.py`); a fence waits for it.
        self._index_built = asyncio.ensure_future(asyncio.to_thread(image.topics.replica_index.map))
        self._index_built.add_done_callback(_index_failure)
        used = self.service.started_from_snapshot
        logger.info(
            "controller %d applied the committed log up to offset %d (%s)",
            self.node_id,
            image.provenance.offset,
            "replayed from the start"
            if used is None
            else f"from snapshot {used.id} at offset {used.offset}",
        )

    def close(self) -> None:
        """End a mass change under way (the node stops)."""
        self._mass_replay.end()
