"""Snapshots between quorum nodes (KIP-630): offer, serve and install them over the service.

The leader's core offers the newest snapshot the policy wrote of a committed image; a
FetchSnapshot answer is filled with bytes of its serialization (`snapshot_bytes`), made once
and kept. A follower below the leader's log start installs the snapshot its core fetched
whole: the SQL snapshot first (one transaction holds the rows and their offset), then the log
reset to start after it; the node then follows the image. The bytes carry the leader's hash
chain state at the snapshot's offset (when it keeps the chain), and the follower's new log goes
on from it, so every node holds the same digest at the same offset. Only the service's public
API is used.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from api.protocol.quorum.messages import ErrorCode, FetchSnapshotResponse, SnapshotId
from api.raft.core.core import RaftCore
from api.raft.core.errors import RaftError
from api.raft.core.ready import SnapshotInstall
from api.raft.core.voters import VoterSet
from api.raft.snapshot_bytes import decode_snapshot, encode_snapshot
from api.service.replicated import ReplicatedService
from metadata_log.digest import DigestError
from metadata_log.start_snapshot import CarriedChain, StartSnapshot
from records.errors import MetadataLogError
from replay.image import MetadataImage, Provenance

logger = logging.getLogger("api.server.quorum")

Io = Callable[..., Awaitable[Any]]
"""Runs a blocking call on the node's worker thread."""


class SnapshotInstallError(MetadataLogError):
    """A snapshot from the leader cannot be installed here (the node stops)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Installed:
    """An installed snapshot: its image (to follow) and provenance."""

    image: MetadataImage
    provenance: Provenance


class SnapshotShipping:
    """A node's snapshots as its core offers, serves and installs them."""

    def __init__(self, service: ReplicatedService, *, node_id: int) -> None:
        self.service = service
        self.node_id = node_id
        self._offered: int | None = None
        """The id of the stored snapshot last offered to the core (FetchSnapshot)."""
        self._served: tuple[SnapshotId, bytes] | None = None
        """The serialization of the snapshot the core offers, made on the first request."""

    def offer(self, core: RaftCore) -> None:
        """Offer the core the newest snapshot the policy wrote (of committed state)."""
        info = self.service.written_snapshot
        if info is None or info.id == self._offered:
            return
        self._offered = info.id
        try:
            core.snapshot_taken(SnapshotId(end_offset=info.offset + 1, epoch=info.epoch))
        except RaftError as exc:
            logger.warning("snapshot %d is not offered to other nodes: %s", info.id, exc)

    async def install(self, install: SnapshotInstall, io: Io) -> Installed:
        """Make the leader's snapshot this node's: SQL snapshot first, then the log reset."""
        store = self.service.snapshot_store
        if store is None:
            raise SnapshotInstallError(
                "a snapshot came from the leader but this node has no snapshot store"
            )
        image, header = await io(decode_snapshot, install.data)
        p = header.provenance
        if (p.offset + 1, p.epoch) != (install.snapshot_id.end_offset, install.snapshot_id.epoch):
            raise SnapshotInstallError(
                f"the leader's snapshot {install.snapshot_id} holds the image at offset "
                f"{p.offset} of epoch {p.epoch}"
            )
        # One transaction holds the rows and the offset they are the state at.
        info = await io(store.write, image)
        if info.checksum != header.checksum:
            raise SnapshotInstallError(
                f"the snapshot installed at offset {p.offset} has checksum {info.checksum[:16]}, "
                f"the leader's {header.checksum[:16]}: the copy is not the leader's state"
            )
        start = StartSnapshot(
            offset=p.offset,
            epoch=p.epoch,
            timestamp=p.timestamp,
            checksum=info.checksum,
            chain=header.chain,
        )
        await io(self.service.replica_log.reset_to_snapshot, start)
        self._offered = info.id
        logger.info(
            "controller %d installed the leader's snapshot at offset %d (epoch %d, %d records, "
            "%d bytes); its log now starts at offset %d",
            self.node_id,
            p.offset,
            p.epoch,
            header.count,
            len(install.data),
            p.offset + 1,
        )
        return Installed(image=image, provenance=p)

    async def chunk(
        self,
        message: FetchSnapshotResponse,
        start: int,
        until: int,
        io: Io,
        *,
        voters: VoterSet | None = None,
    ) -> FetchSnapshotResponse:
        """Fill a FetchSnapshot answer with bytes [start, until) of the snapshot it names.

        `voters`: a dynamic quorum's voter set at the snapshot's end, named in its header
        (the follower's new log starts there, below every VotersRecord it will fetch).
        """
        try:
            data = await io(self._bytes, message.snapshot_id, voters)
        except MetadataLogError as exc:
            # The database failing a read is no reason to stop leading: the follower asks
            # again (SNAPSHOT_NOT_FOUND makes it fetch, and be told the snapshot again).
            logger.warning("cannot serve snapshot %s: %s", message.snapshot_id, exc)
            data = None
        if data is None:
            return replace(message, error_code=ErrorCode.SNAPSHOT_NOT_FOUND)
        if start > len(data):
            return replace(message, error_code=ErrorCode.POSITION_OUT_OF_RANGE)
        return replace(message, size=len(data), unaligned_records=data[start:until])

    def _bytes(self, snapshot_id: SnapshotId, voters: VoterSet | None = None) -> bytes | None:
        """The serialization of the stored snapshot `snapshot_id` (worker thread), kept."""
        if self._served is not None and self._served[0] == snapshot_id:
            return self._served[1]
        store = self.service.snapshot_store
        if store is None:
            return None
        offset = snapshot_id.end_offset - 1
        for info in store.snapshots(gt=offset - 1, lte=offset, desc=True):
            if info.epoch != snapshot_id.epoch:
                continue
            data = encode_snapshot(
                store.load(info.id),
                checksum=info.checksum,
                chain=self._chain_at(info.offset),
                voters=voters,
            )
            self._served = (snapshot_id, data)
            return data
        return None

    def _chain_at(self, offset: int) -> CarriedChain | None:
        """The hash chain's state after `offset`, for the snapshot to carry (None: not kept)."""
        log = self.service.replica_log
        if not log.keeps_chain:
            return None
        try:
            return log.chain_state(offset)
        except DigestError as exc:
            # The receiver then starts its chain from zeros at its new start, as before.
            logger.warning("the snapshot at offset %d carries no hash chain: %s", offset, exc)
            return None
