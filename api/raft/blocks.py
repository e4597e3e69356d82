"""The shell's side of the replicated log: the core's entries as the log's blocks.

The core's entries are whole batches (first offset, count, epoch, kind) and the log stores
blocks (one block is one atomic batch of one epoch), so a data entry IS a block
(`ReplicaBlock.encode()`): it is written as it is, and fetch answers hold whole blocks, so
every node's log, every fetch offset and hence the high watermark stay on block boundaries and
no batch is ever applied in part. A new leader's LeaderChange marker (an entry of kind
`LEADER_CHANGE`) becomes a block of one `LeaderChangeRecord`.

The blocks this node made (proposals) or decoded (fetch answers) are kept by first offset
until written, so nothing is encoded or decoded twice; a peer's block is checked here (CRC,
every entry decoded) and its decoded records are kept until the follower replays them once
committed (`take_records`), instead of read back from the log and decoded again. The
newest written blocks stay in memory as entries (`RECENT_BYTES`), so a leader answers a
follower's fetch of its log's tail without reading the log back. Everything here runs on
the event loop's thread but `read`: writes go to the page cache without fsync
(`ReplicaLog.write_blocks`), which costs less than handing them to the worker thread and
back; the fsync (`ReplicaLog.flush`) is the shell's (`QuorumNode._flush`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace

from api.protocol.quorum.messages import (
    Entry,
    EntryKind,
    FetchResponse,
    LeaderChangeMessage,
    SnapshotId,
)
from api.raft.core.errors import RaftError
from api.raft.core.log_view import LogView
from api.raft.core.voters import VoterHistory, VoterSet
from api.raft.voter_blocks import (
    UPGRADE_BLOCK_COUNT,
    block_voters,
    voters_block,
    voters_record,
)
from api.service.replicated import ReplicatedService
from api.service.service import SERVICE_PRINCIPAL
from metadata_log.replica import HEADER_SIZE, ReplicaBlock
from metadata_log.replica_checks import checked_records
from metadata_log.replica_log import ReplicaLog
from records.codec import RecordBlock
from records.errors import MetadataLogError
from records.model import LeaderChangeRecord, Record

logger = logging.getLogger("api.server.quorum")

FETCH_MAX_BYTES = 1 << 20
"""Block bytes a fetch answer carries at most (at least one block, whatever its size)."""

FETCH_MAX_BLOCKS = 1024
"""Blocks a fetch answer carries at most: bounds the work of one answer (read, sent, decoded,
checked and written by the follower) when the log is thousands of tiny blocks, which a
byte bound alone does not (1 MiB is ~12,000 blocks of one topic each)."""

RECENT_BYTES = 4 << 20
"""Bytes of the newest written blocks kept in memory for fetch answers (the log's tail)."""

RECORDS_KEPT_BLOCKS = 4096
"""Peers' blocks whose decoded records are kept for the replay at most (oldest dropped)."""


class BlockMismatchError(RaftError):
    """An entry of the core and the block it stands for disagree (a bug: the node stops)."""


class ReplicaBlocks:
    """Turns the core's entries into the log's blocks and back, keeping the newest timestamp."""

    def __init__(self, log: ReplicaLog, *, last_timestamp: int, dynamic: bool = False) -> None:
        self.log = log
        self.dynamic = dynamic
        """Whether the voters are in the log (KIP-853): fetched voters blocks are recognised
        (a static quorum's node recognises only the upgrade's; the node keeps this current)."""
        self.last_timestamp = last_timestamp
        """The newest timestamp in the log or the image: new blocks never go back in time."""
        self._pending: dict[int, tuple[ReplicaBlock, bool]] = {}
        """Blocks about to be appended, by first offset, and whether they came from a peer."""
        self._recent: dict[int, Entry] = {}
        """The newest written blocks as fetch answers' entries, by first offset, oldest first:
        consecutive, ending at the log's end (a cut drops those after it)."""
        self._recent_bytes = 0
        self._records: dict[int, RecordBlock] = {}
        """The records of the peers' blocks written and not yet replayed, by first offset,
        oldest first: decoded when their bodies were checked, replayed from here once
        committed (`take_records`) instead of read back from the log."""

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
        for first, entry in list(self._recent.items()):
            if first + entry.count > offset:
                del self._recent[first]
                self._recent_bytes -= len(entry.payload)
        for first, records in list(self._records.items()):
            if records.last_offset >= offset:
                del self._records[first]

    def reset(self, *, last_timestamp: int) -> None:
        """The log was replaced by a snapshot: nothing kept is appended any more."""
        self._pending.clear()
        self._recent.clear()
        self._recent_bytes = 0
        self._records.clear()
        self.last_timestamp = max(self.last_timestamp, last_timestamp)

    def write(self, entries: Sequence[Entry]) -> None:
        """Write the entries (batches) of a `Ready` as the blocks they are (without fsync)."""
        blocks: list[tuple[ReplicaBlock, bool]] = []
        recent: list[Entry] = []
        decoded: list[RecordBlock] = []
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
            if peer:
                # A peer's body is checked (CRC, every entry decoded) here rather than by
                # `write_blocks`, keeping the records it decodes for the replay.
                decoded.append(checked_records(block, self.log.codec))
            blocks.append((block, peer))
            # A data entry's payload is its block's byte form (made or received so): the
            # answer to a fetch of it as it is; markers and voters entries are encoded here.
            recent.append(
                entry
                if entry.kind is EntryKind.DATA
                else Entry(
                    offset=entry.offset,
                    epoch=entry.epoch,
                    count=entry.count,
                    payload=block.encode(),
                )
            )
        # Own blocks (proposals, markers) were made here; peers' bodies are checked above,
        # and the log checks every block's place, epoch and timestamp before writing any.
        self.log.write_blocks([block for block, _ in blocks], check=False)
        for block, _ in blocks:
            self.last_timestamp = max(self.last_timestamp, block.timestamp)
        self._remember(recent)
        self._keep_records(decoded)

    def _keep_records(self, decoded: list[RecordBlock]) -> None:
        kept = self._records
        for records in decoded:
            kept[records.first_offset] = records
        while len(kept) > RECORDS_KEPT_BLOCKS:  # a follower far behind: older ones from the log
            del kept[next(iter(kept))]

    def take_records(self, start: int, last: int) -> list[RecordBlock] | None:
        """The records of the log's whole blocks `start..last`, if all are still kept.

        Forgets the kept blocks up to `last` either way; None if one is missing (one of this
        node's own, a marker, or dropped by the bound): the caller reads the log instead.
        """
        kept = self._records
        taken: list[RecordBlock] = []
        expected = start
        complete = True
        while kept:
            first = next(iter(kept))
            records = kept[first]
            if records.last_offset > last:
                break
            del kept[first]
            if first < start:
                continue
            if first != expected:
                complete = False
            taken.append(records)
            expected = records.last_offset + 1
        if not complete or expected != last + 1:
            return None
        return taken

    def _remember(self, entries: list[Entry]) -> None:
        """Keep written entries for fetch answers, forgetting the oldest beyond the bound."""
        kept = self._recent
        for entry in entries:
            kept[entry.offset] = entry
            self._recent_bytes += len(entry.payload)
        while self._recent_bytes > RECENT_BYTES and len(kept) > 1:
            oldest = kept.pop(next(iter(kept)))
            self._recent_bytes -= len(oldest.payload)

    def recent(self, start: int, until: int) -> tuple[Entry, ...] | None:
        """`read` from memory: None unless the newest written blocks begin one at `start`.

        Whole blocks in [start, until), at least one, then more while their bytes total at
        most `FETCH_MAX_BYTES` and they number at most `FETCH_MAX_BLOCKS`; the same blocks
        `read` gives (the kept blocks are the log's tail as written), without the worker
        thread or the disk.
        """
        kept = self._recent
        entry = kept.get(start)
        if entry is None:
            return None
        entries: list[Entry] = []
        total = 0
        while entry is not None and entry.offset + entry.count <= until:
            size = len(entry.payload) - HEADER_SIZE
            if entries and (total + size > FETCH_MAX_BYTES or len(entries) >= FETCH_MAX_BLOCKS):
                break
            entries.append(entry)
            total += size
            entry = kept.get(entry.offset + entry.count)
        return tuple(entries)

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
        blocks = self.log.replica_blocks(
            start=start, max_bytes=FETCH_MAX_BYTES, max_blocks=FETCH_MAX_BLOCKS
        )
        for block in blocks:
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
        dynamic = self.dynamic
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
            # A static quorum's first voters block is its kraft.version upgrade's (3 records);
            # the voters blocks after it in the same answer are a dynamic quorum's.
            recognised = dynamic or block.count == UPGRADE_BLOCK_COUNT
            voters = block_voters(self.log.codec, block) if recognised else None
            dynamic = dynamic or voters is not None
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
