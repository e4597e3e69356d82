"""An in-memory quorum node's log for unit tests and the Raft simulation: `ReplicatedLog`.

`MemoryReplicaLog` keeps whole blocks in a list with `ReplicaLog`'s rules (blocks written at
the end, durable only up to `flush`, `truncate_to`, the leader-epoch cache, `trim_before`,
`reset_to_snapshot`, `replica_blocks`), checked by the same conformance suite
(tests/metadata_log/test_replica_log_conformance.py). Bodies are decoded only when read, so a
simulation may store bodies of its own (with `check=False`) as long as it reads blocks, not
records.
"""

from __future__ import annotations

import zlib
from bisect import bisect_right
from collections.abc import Iterator, Sequence

from metadata_log.epoch_cache import epochs_from
from metadata_log.errors import LogClosedError, LogError
from metadata_log.replica import ReplicaBlock
from metadata_log.replica_checks import check_blocks, new_block
from metadata_log.start_snapshot import StartSnapshot
from records.codec import DEFAULT_CODEC, RecordBlock, RecordCodec
from records.entry import LogEntry
from records.model import Record


class MemoryReplicaLog:
    """A quorum node's log kept as a list of blocks; "durable" means flushed, nothing more.

    Each block stands where `ReplicaLog` has a segment for `trim_before` (whole blocks go,
    never the newest), so a file log whose segments hold one block each trims alike.
    """

    def __init__(self, *, codec: RecordCodec = DEFAULT_CODEC) -> None:
        self.codec = codec
        self._blocks: list[ReplicaBlock] = []
        self._firsts: list[int] = []
        """The first offset of each block, for bisection."""
        self._start = 0
        self._end = 0
        self._flushed = 0
        self._last_timestamp = -1
        self._epochs: list[tuple[int, int]] = []
        self._start_snapshot: StartSnapshot | None = None
        self._closed = False

    # ---------------------------------------------------------------- state

    @property
    def epoch(self) -> int:
        """The epoch of the last entry (0 for an empty log)."""
        return self._epochs[-1][0] if self._epochs else 0

    @property
    def end_offset(self) -> int:
        """The offset the next block must start at."""
        return self._end

    @property
    def flushed_offset(self) -> int:
        """One past the last entry `flush` (or a truncation) made durable."""
        return self._flushed

    @property
    def log_start_offset(self) -> int:
        """Offset of the first entry the log keeps."""
        return self._start

    @property
    def last_timestamp(self) -> int:
        """The timestamp (ms) of the last entry (or of the start snapshot), -1 if none."""
        return self._last_timestamp

    @property
    def start_snapshot(self) -> StartSnapshot | None:
        """The snapshot the log starts just after (an install), if it still starts there."""
        snapshot = self._start_snapshot
        if snapshot is None or snapshot.offset + 1 != self._start:
            return None
        return snapshot

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError("the log is closed")

    # ---------------------------------------------------------------- blocks in

    def encode_block(
        self,
        batches: Sequence[tuple[Sequence[Record], str | None]],
        *,
        first_offset: int,
        epoch: int,
        timestamp: int,
    ) -> ReplicaBlock:
        """Encode `batches` as one block of entries `first_offset..` of `epoch`; nothing written."""
        return new_block(
            self.codec, batches, first_offset=first_offset, epoch=epoch, timestamp=timestamp
        )

    def write_blocks(self, blocks: Sequence[ReplicaBlock], *, check: bool) -> int:
        """Append whole `blocks` at the end, not yet durable (see `flush`); the new end offset.

        As `ReplicaLog.write_blocks`: each block starts where the previous ends, epochs and
        timestamps never go down, and `check=True` verifies each body's CRC32 and entries;
        otherwise `ReplicaBlockError` and nothing is written.
        """
        self._check_open()
        check_blocks(
            blocks,
            end_offset=self._end,
            last_epoch=self.epoch,
            last_timestamp=self._last_timestamp,
            codec=self.codec if check else None,
        )
        for block in blocks:
            if not self._epochs or block.epoch > self._epochs[-1][0]:
                self._epochs.append((block.epoch, block.first_offset))
            self._blocks.append(block)
            self._firsts.append(block.first_offset)
            self._end = block.end_offset
            self._last_timestamp = block.timestamp
        return self._end

    def flush(self) -> int:
        """Make what `write_blocks` wrote durable; returns the flushed end offset."""
        self._check_open()
        self._flushed = self._end
        return self._flushed

    # ---------------------------------------------------------------- epochs

    def epoch_cache(self) -> list[tuple[int, int]]:
        """The leader-epoch cache: [(epoch, offset of its first entry)], oldest first."""
        self._check_open()
        return list(self._epochs)

    # ---------------------------------------------------------------- truncation and trim

    def truncate_to(self, offset: int) -> int:
        """Durably remove every entry at `offset` and after; returns how many entries went.

        As `ReplicaLog.truncate_to`: a cut inside a block keeps that block's earlier entries
        as a smaller block, and everything kept is durable afterwards.
        """
        self._check_open()
        if not isinstance(offset, int) or offset < self._start:
            raise LogError(
                f"cannot truncate to offset {offset!r}: the log starts at offset {self._start}"
            )
        end = self._end
        if offset >= end:
            return 0
        index = bisect_right(self._firsts, offset) - 1
        block = self._blocks[index]
        del self._blocks[index:]
        del self._firsts[index:]
        if block.first_offset < offset:
            self._blocks.append(self._cut_block(block, offset - block.first_offset))
            self._firsts.append(block.first_offset)
        self._epochs = [(e, o) for e, o in self._epochs if o < offset]
        self._end = self._flushed = offset
        self._last_timestamp = self._timestamp_before_end()
        return end - offset

    def _cut_block(self, block: ReplicaBlock, keep: int) -> ReplicaBlock:
        """The block's first `keep` entries as a block of their own (the same bytes)."""
        entries = self._decode(block)[:keep]
        _, body = self.codec.encode_entries(
            (e.offset, e.epoch, e.timestamp, e.principal, e.record) for e in entries
        )
        return ReplicaBlock(
            first_offset=block.first_offset,
            count=keep,
            epoch=block.epoch,
            timestamp=block.timestamp,
            body=body,
            crc32=zlib.crc32(body),
        )

    def _timestamp_before_end(self) -> int:
        # As the file log: the newest timestamp of what is left, -1 if nothing is.
        return self._blocks[-1].timestamp if self._blocks else -1

    def trim_before(self, offset: int) -> int:
        """Remove the whole blocks whose entries all lie below `offset`; the new log start.

        As `ReplicaLog.trim_before` with one block a segment: the newest block always stays.
        The epoch cache then starts at the new start.
        """
        self._check_open()
        if not isinstance(offset, int) or offset < 0:
            raise LogError(f"cannot trim before offset {offset!r}: give an offset >= 0")
        holding = bisect_right(self._firsts, offset) - 1
        if holding < 0:
            return self._start
        # The blocks before the one holding `offset`, and that one if it ends by `offset`,
        # but never the newest.
        gone = holding + (self._blocks[holding].end_offset <= offset)
        gone = min(gone, len(self._blocks) - 1)
        if gone > 0:
            del self._blocks[:gone]
            del self._firsts[:gone]
            self._start = self._firsts[0]
            self._epochs = epochs_from(self._epochs, self._start)
        return self._start

    def reset_to_snapshot(self, snapshot: StartSnapshot) -> None:
        """Make the log empty, starting just after `snapshot` (a quorum node's install)."""
        self._check_open()
        start = snapshot.offset + 1
        self._start_snapshot = snapshot
        self._blocks.clear()
        self._firsts.clear()
        self._epochs = []
        self._start = self._end = self._flushed = start
        self._last_timestamp = snapshot.timestamp

    # ---------------------------------------------------------------- blocks out

    def block_at(self, offset: int) -> ReplicaBlock:
        """The block holding `offset`; LogError outside the log."""
        self._check_open()
        if not self._start <= offset < self._end:
            raise LogError(
                f"offset {offset} is not in the log, which holds offsets "
                f"{self._start}..{self._end - 1}"
            )
        return self._blocks[bisect_right(self._firsts, offset) - 1]

    def replica_blocks(
        self, *, start: int, max_bytes: int, max_blocks: int | None = None
    ) -> list[ReplicaBlock]:
        """Whole blocks from the one that begins at offset `start`, for another node.

        At least one block if the log holds an entry at `start` (none at the end), then more
        while their bodies total at most `max_bytes` and number at most `max_blocks` (None: no
        count bound); `LogError` if `start` is outside the log
        or inside a block.
        """
        self._check_open()
        if not isinstance(start, int) or not self._start <= start <= self._end:
            raise LogError(
                f"cannot read blocks from offset {start!r}: the log holds offsets "
                f"{self._start}..{self._end - 1}"
            )
        if max_bytes < 0:
            raise LogError(f"max_bytes must be 0 or more, got {max_bytes}")
        if start == self._end:
            return []
        index = bisect_right(self._firsts, start) - 1
        first = self._blocks[index]
        if first.first_offset != start:
            raise LogError(
                f"offset {start} is inside the block holding offsets "
                f"{first.first_offset}..{first.last_offset}: read from {first.first_offset} "
                f"or {first.end_offset}"
            )
        blocks = [first]
        total = len(first.body)
        for block in self._blocks[index + 1 :]:
            if total + len(block.body) > max_bytes or (
                max_blocks is not None and len(blocks) >= max_blocks
            ):
                break
            blocks.append(block)
            total += len(block.body)
        return blocks

    def block_bodies(self, *, start: int, last: int, max_entries: int) -> tuple[str, int, bytes]:
        """Whole block bodies from the one holding `start` until `last` or `max_entries`.

        Returns (the entry schema JSON, entry count, the bodies joined); the first block may
        begin before `start` and the last end after `last`.
        """
        first, last = self._range(start - 1, last, None)
        bodies: list[bytes] = []
        count = 0
        index = max(bisect_right(self._firsts, first) - 1, 0)
        for block in self._blocks[index:]:
            if block.first_offset > last or first > last:
                break
            bodies.append(block.body)
            count += block.count
            if count >= max_entries:
                break
        return self.codec.entry_schema_json, count, b"".join(bodies)

    # ---------------------------------------------------------------- reading

    def _range(self, gt: int | None, lte: int | None, limit: int | None) -> tuple[int, int]:
        """Checked range arguments as (first offset, last offset) within the log."""
        for name, value in (("gt", gt), ("lte", lte), ("limit", limit)):
            if value is not None and (not isinstance(value, int) or value < -1):
                raise LogError(f"{name} must be an offset (integer >= -1), got {value!r}")
        if limit is not None and limit < 0:
            raise LogError(f"limit must be >= 0, got {limit}")
        self._check_open()
        start = max(0 if gt is None else gt + 1, self._start)
        last = self._end - 1 if lte is None else min(lte, self._end - 1)
        return start, last

    def _decode(self, block: ReplicaBlock) -> list[LogEntry]:
        codec = self.codec
        schema = codec.reader_array_schema(codec.entry_schema_json)
        return codec.decode_entries(block.count, block.body, schema)

    def _blocks_from(self, start: int, last: int) -> Iterator[ReplicaBlock]:
        if start > last:
            return
        index = bisect_right(self._firsts, start) - 1
        for block in self._blocks[max(index, 0) :]:
            if block.first_offset > last:
                return
            yield block

    def read(
        self, *, gt: int | None = None, lte: int | None = None, limit: int | None = None
    ) -> Iterator[LogEntry]:
        """Entries with `gt < offset <= lte`, at most `limit` of them, oldest first."""
        start, last = self._range(gt, lte, limit)
        return self._entries(start, last, limit)

    def _entries(self, start: int, last: int, limit: int | None) -> Iterator[LogEntry]:
        remaining = limit
        if remaining == 0:
            return
        for block in self._blocks_from(start, last):
            for entry in self._decode(block):
                if entry.offset < start:
                    continue
                if entry.offset > last:
                    return
                yield entry
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return

    def read_records(
        self, *, gt: int | None = None, lte: int | None = None
    ) -> Iterator[RecordBlock]:
        """The records with `gt < offset <= lte`, a block at a time."""
        start, last = self._range(gt, lte, None)
        return self._record_blocks(start, last)

    def _record_blocks(self, start: int, last: int) -> Iterator[RecordBlock]:
        codec = self.codec
        schema = codec.reader_array_schema(codec.entry_schema_json)
        for block in self._blocks_from(start, last):
            decoded = codec.decode_block(block.count, block.body, schema)
            yield decoded.trimmed(start, last)

    def close(self) -> None:
        """Later reads and writes raise `LogClosedError`; idempotent."""
        self._closed = True

    def __enter__(self) -> MemoryReplicaLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
