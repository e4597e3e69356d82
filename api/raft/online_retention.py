"""A quorum node's online retention: its log trimmed below the snapshot its core offers.

The node's loop asks between two `Ready`s (`OnlineRetention.check`); once the log is over the
service's retention bound, it is trimmed below the snapshot on the worker thread that writes
the log, and the core's view then starts where the log does, so a fetcher below the start is
sent the snapshot. In a dynamic quorum the VotersRecords below the cut go with it: the set in
force there is stored first in `quorum-voters`, which a restarted node reads as the set below
its log's first VotersRecord. Only the service's public API is used. With an archive
(`metadata.log.archive.url`) the cut never passes the archive's end, on every node.

At each check the log's Merkle index is extended up to the offered snapshot (committed entries
only) on a thread of its own, not the one that writes the log; a trim waits while it runs, and
extends the index over what it removes itself before removing it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from api.protocol.quorum.messages import SnapshotId
from api.raft.core.core import RaftCore
from api.raft.snapshot_shipping import Io
from api.raft.voter_blocks import write_voters_base
from api.service.replicated import ReplicatedService
from metadata_log.replica_log import ReplicaLog

RETENTION_CHECK_S = 1.0
"""How often the loop checks the log against its retention bound (and on each new snapshot)."""


class OnlineRetention:
    """A node's online retention: trims of its log below the snapshot its core offers."""

    def __init__(
        self,
        service: ReplicatedService,
        core: RaftCore,
        *,
        state_dir: Path,
        io: Io,
    ) -> None:
        """Trims of the service's log, as `core` offers snapshots.

        `io` runs a blocking call on the node's worker thread (the one that writes the log);
        `state_dir` holds `quorum-voters` (a dynamic quorum's: `core.dynamic`).
        """
        self.service = service
        self.core = core
        self.state_dir = state_dir
        self._io = io
        self._checked: tuple[SnapshotId | None, float] = (None, 0.0)
        """The snapshot offered at the last check, and when (monotonic seconds)."""
        self._indexing: asyncio.Future[None] | None = None
        """The Merkle index's extension in flight, on a thread of its own."""

    async def check(self) -> None:
        """Trim the log below the snapshot the core offers, once it is over its bound.

        Between two `Ready`s: the core's view is cut to the log's new start here.
        """
        retention = self.service.retention
        snapshot = self.core.log.snapshot
        if retention is None or snapshot is None:
            return
        now = time.monotonic()
        seen, checked = self._checked
        if snapshot == seen and now - checked < RETENTION_CHECK_S:
            return
        self._checked = (snapshot, now)
        log = self.service.replica_log
        below = snapshot.end_offset - 1
        if self._indexing is not None and not self._indexing.done():
            return  # the trim would wait for it on the thread that writes the log
        try:
            if retention.config.bounded:
                await self._trim(log, below)
        finally:
            self._indexing = asyncio.ensure_future(
                asyncio.to_thread(retention.keep_index, log, below=below)
            )

    async def _trim(self, log: ReplicaLog, below: int) -> None:
        """Trim `log` below offset `below` as the retention bound asks (on the log's thread)."""
        retention = self.service.retention
        assert retention is not None
        # With an archive the cut is never past the archive's end as this node last read it
        # (the leader's uploads, a follower's own reads of the manifest: `LogRetention.cut`).
        cut = await self._io(retention.cut, log, below=below)
        if cut is None:
            return
        if self.core.dynamic:
            # The VotersRecords below the cut go with it: the set in force there is stored
            # first (a restarted node reads it as the set below its log's first one).
            voters = self.core.history.at(cut)
            await self._io(write_voters_base, self.state_dir, offset=cut, voters=voters)
        removed = await self._io(retention.trim_at, log, cut, below=below)
        if removed:
            self.core.log.trim_start(log.log_start_offset)
