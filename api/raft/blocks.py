"""The shell's side of the replicated log: the core's entries as the log's blocks.

The core's entries are whole batches (first offset, count, epoch, kind) and the log stores
blocks (one block is one atomic batch of one epoch), so a data entry IS a block
(`ReplicaBlock.encode()`): it is written as it is, and fetch answers hold whole blocks, so
every node's log, every fetch offset and hence the high watermark stay on block boundaries and
no batch is ever applied in part. A new leader's LeaderChange marker (an entry of kind
`LEADER_CHANGE`) becomes a block of one `LeaderChangeRecord`.

The blocks this node made (proposals) or decoded (fetch answers) are kept by first offset
until written, so nothing is encoded or decoded twice. Everything here runs on the event
loop's thread but `read` and the writes handed to the worker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from api.raft.core.errors import RaftError
from api.raft.core.log_view import LogView
from api.raft.core.messages import (
    Entry,
    EntryKind,
    FetchResponse,
    LeaderChangeMessage,
    SnapshotId,
)
from api.raft.core.voters import VoterHistory, VoterSet
from api.raft.voter_blocks import block_voters, voters_block, voters_record
from api.service.replicated import ReplicatedService
from api.service.service import SERVICE_PRINCIPAL
from metadata_log.replica import ReplicaBlock
from metadata_log.replica_log import ReplicaLog
from records.errors import MetadataLogError
from records.model import LeaderChangeRecord, Record

logger = logging.getLogger("api.server.quorum")

FETCH_MAX_BYTES = 1 << 20
"""Block bytes a fetch answer carries at most (at least one block, whatever its size)."""

Io = Callable[..., Awaitable[Any]]
"""Runs a blocking call on the node's worker thread."""


class BlockMismatchError(RaftError):
    """An entry of the core and the block it stands for disagree (a bug: the node stops)."""


class ReplicaBlocks:
    """Turns the core's entries into the log's blocks and back, keeping the newest timestamp."""

    def __init__(self, log: ReplicaLog, *, last_timestamp: int, dynamic: bool = False) -> None:
        self.log = log
        self.dynamic = dynamic
        """Whether the voters are in the log (KIP-853): fetched voters blocks are recognised."""
        self.last_timestamp = last_timestamp
        """The newest timestamp in the log or the image: new blocks never go back in time."""
        self._pending: dict[int, tuple[ReplicaBlock, bool]] = {}
        """Blocks about to be appended, by first offset, and whether they came from a peer."""

    def encode(
        self, group: Sequence[tuple[Sequence[Record], str | None]], *, first: int, epoch: int
    ) -> ReplicaBlock:
        """The block of a leader's proposals at `first` (`keep` it once the core took it)."""
        timestamp = max(_wall_ms(), self.last_timestamp)
        return self.log.encode_block(group, first_offset=first, epoch=epoch, timestamp=timestamp)

    def keep(self, block: ReplicaBlock) -> None:
        """Keep a proposed block the core appended, until its entry is written."""
        self.last_timestamp = max(self.last_timestamp, block.timestamp)
        self._pending[block.first_offset] = (block, False)

    def truncated(self, offset: int) -> None:
        """Forget the blocks kept at `offset` and after (the log was cut there)."""
        for first in [f for f in self._pending if f >= offset]:
            del self._pending[first]

    def reset(self, *, last_timestamp: int) -> None:
        """The log was replaced by a snapshot: nothing kept is appended any more."""
        self._pending.clear()
        self.last_timestamp = max(self.last_timestamp, last_timestamp)

    async def write(self, entries: Sequence[Entry], io: Io) -> None:
        """Write the entries (batches) of a `Ready` as the blocks they are."""
        blocks: list[tuple[ReplicaBlock, bool]] = []
        for entry in entries:
            if entry.kind is EntryKind.LEADER_CHANGE:
                block, peer = self._marker_block(entry), False
            elif entry.kind is EntryKind.VOTERS and entry.offset not in self._pending:
                block, peer = self._voters_block(entry), False
            else:
                kept = self._pending.pop(entry.offset, None)
                block, peer = kept or (ReplicaBlock.decode(entry.payload), True)
            if (block.first_offset, block.count, block.epoch) != (
                entry.offset,
                entry.count,
                entry.epoch,
            ):
                raise BlockMismatchError(
                    f"internal: block at {block.first_offset} ({block.count} records, epoch "
                    f"{block.epoch}) stands for entry {entry.offset} ({entry.count}, epoch "
                    f"{entry.epoch})"
                )
            blocks.append((block, peer))
        # Own blocks (proposals, markers) were made here; peers' are checked entry by entry.
        run: list[ReplicaBlock] = []
        run_peer = False
        for block, peer in blocks:
            if run and peer != run_peer:
                await io(self.log.write_blocks, run, check=run_peer)
                run = []
            run.append(block)
            run_peer = peer
            self.last_timestamp = max(self.last_timestamp, block.timestamp)
        if run:
            await io(self.log.write_blocks, run, check=run_peer)

    def _marker_block(self, entry: Entry) -> ReplicaBlock:
        marker = LeaderChangeMessage.decode(entry.payload)
        record = LeaderChangeRecord(
            leader_id=marker.leader_id,
            voters=marker.voters,
            granting_voters=marker.granting_voters,
        )
        timestamp = max(_wall_ms(), self.last_timestamp)
        return self.log.encode_block(
            [((record,), SERVICE_PRINCIPAL)],
            first_offset=entry.offset,
            epoch=entry.epoch,
            timestamp=timestamp,
        )

    def _voters_block(self, entry: Entry) -> ReplicaBlock:
        """The block of a leader's voters entry: one VotersRecord (KIP-853)."""
        record = voters_record(VoterSet.decode(entry.payload))
        timestamp = max(_wall_ms(), self.last_timestamp)
        return voters_block(
            self.log,
            (record,),
            first=entry.offset,
            epoch=entry.epoch,
            timestamp=timestamp,
            principal=SERVICE_PRINCIPAL,
        )

    def read(self, start: int, until: int) -> tuple[Entry, ...]:
        """Whole blocks of the log in [start, until), as the core's entries (worker thread)."""
        entries: list[Entry] = []
        for block in self.log.replica_blocks(start=start, max_bytes=FETCH_MAX_BYTES):
            if block.first_offset + block.count > until:
                break
            entries.append(
                Entry(
                    offset=block.first_offset,
                    epoch=block.epoch,
                    count=block.count,
                    payload=block.encode(),
                )
            )
        return tuple(entries)

    def fetched(self, source: int, message: FetchResponse) -> FetchResponse:
        """A fetch answer's entries decoded into blocks; a malformed or partial tail is cut."""
        kept: list[Entry] = []
        decoded: dict[int, tuple[ReplicaBlock, bool]] = {}
        for entry in message.records:
            try:
                block = ReplicaBlock.decode(entry.payload)
            except MetadataLogError as exc:
                logger.warning(
                    "fetch answer from node %d: entry %d is not a block (%s); ignoring the rest",
                    source,
                    entry.offset,
                    exc,
                )
                break
            if entry.kind is not EntryKind.DATA or (
                block.first_offset,
                block.count,
                block.epoch,
            ) != (entry.offset, entry.count, entry.epoch):
                break
            decoded[block.first_offset] = (block, True)
            voters = block_voters(self.log.codec, block) if self.dynamic else None
            # A voters block is in force from its append on: the core must see it as one.
            kept.append(
                entry
                if voters is None
                else replace(entry, kind=EntryKind.VOTERS, payload=voters.encode())
            )
        self._pending.update(decoded)
        return replace(message, records=tuple(kept))


def log_view(service: ReplicatedService, *, voters: VoterHistory | None = None) -> LogView:
    """The core's view of the opened log: its start, the epoch before it, its snapshot.

    A log that starts after an installed snapshot knows the epoch before its start from
    `log-start-snapshot`; one trimmed below a snapshot it still holds uses the epoch of
    its first entry (at least the one before it: a fetcher there may be sent the snapshot
    when blocks would do, never the other way round). The newest stored snapshot of
    this log is offered to fetchers below the start.
    """
    log = service.replica_log
    epochs = log.epoch_cache()
    start = log.log_start_offset
    if start == 0:
        return LogView.from_log(end_offset=log.end_offset, epochs=epochs, voters=voters)
    info = service.committed_snapshot()
    snapshot = None if info is None else SnapshotId(end_offset=info.offset + 1, epoch=info.epoch)
    start_snapshot = log.start_snapshot
    if start_snapshot is not None:
        start_epoch = start_snapshot.epoch
    else:
        start_epoch = epochs[0][0] if epochs else 0
    return LogView.from_log(
        end_offset=log.end_offset,
        epochs=epochs,
        start_offset=start,
        start_epoch=start_epoch,
        snapshot=snapshot,
        voters=voters,
    )


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000
