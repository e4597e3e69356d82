"""A quorum node's log: whole blocks at the quorum's offsets and epochs, truncation, installs.

What Kafka's `ReplicatedLog` and etcd's `Storage` give a Raft core: `write_blocks` (made durable
by `flush`), `truncate_to` for a divergent tail, the leader-epoch cache, `replica_blocks` for
other nodes, `trim_before` and `reset_to_snapshot`. Entries come only as blocks with the epochs
the quorum gives them; there is no `append` (that is the user's `MetadataLog`).
"""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from metadata_log.active import ActiveSegment, PendingSync, lock_directory
from metadata_log.chain import CHAIN_SUFFIX
from metadata_log.checkpoint import Checkpoint
from metadata_log.config import LogConfig
from metadata_log.container import (
    RawBlock,
    body_prefix,
    encode_block,
    fsync_directory,
    write_all,
)
from metadata_log.epoch import EPOCH_CHECKPOINT_NAME
from metadata_log.epoch_cache import EpochCache, epochs_from
from metadata_log.errors import LogClosedError, LogError
from metadata_log.private_files import FILE_MODE
from metadata_log.recovery import Repair
from metadata_log.repair import cut_segment, move_segment
from metadata_log.replica import ReplicaBlock
from metadata_log.replica_checks import check_blocks, new_block
from metadata_log.segment import Segment, SegmentInfo
from metadata_log.start_snapshot import StartSnapshot, write_start_snapshot
from metadata_log.storage import SegmentStorage
from metadata_log.stored_log import StoredLog
from metadata_log.timings import LogTimings
from records.codec import DEFAULT_CODEC, RecordCodec
from records.model import Record

logger = logging.getLogger("metadata_log")


class ReplicaLog(StoredLog):
    """A quorum node's log in one directory: blocks in, blocks out, epochs kept.

    Entries arrive as whole blocks (`write_blocks`, made durable by `flush`) with the epochs
    the quorum gives them, the leader-epoch cache is kept in `leader-epoch-checkpoint`,
    `truncate_to` removes a divergent tail and `replica_blocks` reads whole blocks for other
    nodes.
    """

    def __init__(self, storage: SegmentStorage, active: ActiveSegment) -> None:
        super().__init__(storage)
        self._active = active
        self._epochs = EpochCache(storage)

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        config: LogConfig | None = None,
        codec: RecordCodec = DEFAULT_CODEC,
        chained: bool = False,
    ) -> ReplicaLog:
        """Open (create if needed) and recover a quorum node's log in `directory`.

        As `MetadataLog.open`, but no writer epoch is taken: entries carry the epochs of the
        blocks written with `write_blocks`. The open fsyncs the recovered log (all of it is
        durable) and loads `leader-epoch-checkpoint`, checked against the log's end and its
        last block; a missing or inconsistent one is rebuilt from the entries' epochs with
        one WARNING. With `chained` the log keeps the hash chain from its first segment on
        (`log import`: a copy that can be digested at once).
        """
        path = Path(directory)
        lock = lock_directory(path)
        try:
            storage = SegmentStorage.open(
                path, config=config or LogConfig(), codec=codec, recovery=Repair()
            )
            active = ActiveSegment(storage, lock)
            # A quorum keeps the chain once its metadata.version says so (`keep_chain`); a log
            # that kept it goes on keeping it, and one whose segments were born with it (their
            # headers say so) is refused if their chain files are gone (ChainKeeper.open).
            active.chained = (
                chained
                or any(name.endswith(CHAIN_SUFFIX) for name in os.listdir(path))
                or any(segment.header.hash_chained for segment in storage.segments)
            )
            active.prepare()
            active.start()
            log = cls(storage, active)
            log._start()
        except BaseException:
            lock.release()
            raise
        return log

    def _start(self) -> None:
        # What a crashed process left in the page cache is served as durable (the core
        # builds its view from it): make it so before anything is acknowledged.
        try:
            self._active.sync_now()
        except OSError as exc:
            raise LogError(
                f"cannot fsync the log in {self.directory}: {exc.strerror or exc}; fix the "
                "disk, then open the log again"
            ) from exc
        try:
            self._epochs.load(persist=True)
        except OSError as exc:
            self._active.fail(f"writing {EPOCH_CHECKPOINT_NAME}", exc)

    @property
    def keeps_chain(self) -> bool:
        """Whether the log keeps the hash chain (metadata_log.chain)."""
        return self._active.chained

    def keep_chain(self) -> None:
        """Keep the hash chain from now on: the quorum's `metadata.version` switched it on.

        The first call hashes every block the log holds (once) and writes the chain files;
        every node computes the same values, whenever it starts. Later calls do nothing.
        """
        active = self._active
        if active.chained:
            return
        with active.write_lock:
            active.check_writable()
            active.chained = True
            try:
                active.restart_chain()
            except OSError as exc:
                active.fail("starting the hash chain", exc)
        logger.info("the log in %s keeps the hash chain from now on", self.directory)

    @property
    def epoch(self) -> int:
        """The epoch of the last entry (0 for an empty log)."""
        return self._epochs.last_epoch

    def close(self) -> None:
        """Flush what `write_blocks` wrote, save the indexes and checkpoints, unlock.

        Idempotent.
        """
        if self.storage.closed:
            return
        self.storage.closed = True
        self._active.close()

    # ---------------------------------------------------------------- blocks in

    def encode_block(
        self,
        batches: Sequence[tuple[Sequence[Record], str | None]],
        *,
        first_offset: int,
        epoch: int,
        timestamp: int,
    ) -> ReplicaBlock:
        """Encode `batches` as one block of entries `first_offset..` of `epoch`; nothing written.

        Each batch is (records, principal). Raises `RecordError` if a record does not encode
        and `LogError` for an empty batch or an offset, epoch or timestamp out of range.
        """
        return new_block(
            self.codec, batches, first_offset=first_offset, epoch=epoch, timestamp=timestamp
        )

    def write_blocks(self, blocks: Sequence[ReplicaBlock], *, check: bool) -> int:
        """Append whole `blocks` at the end WITHOUT fsync (see `flush`); the new end offset.

        Every block must start where the log (or the previous block) ends, and epochs and
        timestamps never go down: otherwise `ReplicaBlockError` and nothing is written.
        `check=True` (blocks from another node) also verifies each body's CRC32 and decodes
        every entry: offsets dense from the block's first, each entry's epoch and timestamp
        the block's, valid records that fill the body exactly. Readers see the blocks
        at once. The first block of a new epoch is recorded in `leader-epoch-checkpoint`
        before it is written. An I/O error is `LogFailedError` (fail-stop, as for appends).
        """
        with self._active.write_lock:
            self._active.check_writable()
            check_blocks(
                blocks,
                end_offset=self.storage.next_offset,
                last_epoch=self._epochs.last_epoch,
                last_timestamp=self.storage.last_timestamp,
                codec=self.codec if check else None,
            )
            for block in blocks:
                self._write_block(block)
            return self.storage.next_offset

    def _write_block(self, block: ReplicaBlock) -> None:
        """Write one checked block at the end, without fsync; the caller holds the write lock."""
        epochs = self._epochs.epochs
        if not epochs or block.epoch > epochs[-1][0]:
            # Before the block: a cache naming an epoch the log lacks (a crash lost the block)
            # is always noticed and repaired on open; a log holding an epoch the cache lacks
            # is noticed only while that epoch is the last one.
            self._persist_epochs([*epochs, (block.epoch, block.first_offset)])
        active = self._active
        prepared = active.prepare_block(
            encode_block(block.count, block.body),
            body=block.body,
            first_offset=block.first_offset,
            count=block.count,
            epoch=block.epoch,
            timestamp=block.timestamp,
            what="writing replicated blocks",
        )
        active.write(prepared, durable=False)
        storage = self.storage
        storage.next_offset = block.end_offset
        storage.last_timestamp = block.timestamp
        storage.record_bytes_appended += len(block.body)

    def flush(self) -> int:
        """Make what `write_blocks` wrote durable (fsync); returns the flushed end offset.

        `begin_flush`, the fdatasync here, then `end_flush`: the fdatasync runs without the
        write lock, so blocks written meanwhile from another thread do not wait for it (they
        are flushed by the next call).
        """
        pending = self.begin_flush()
        if pending is None:
            return self.flushed_offset
        try:
            seconds = pending.run()
        except OSError as exc:
            return self.end_flush(pending, error=exc)
        return self.end_flush(pending, seconds=seconds)

    def begin_flush(self) -> PendingSync | None:
        """A flush of the blocks written so far, for the caller to fdatasync (None: none wait).

        Its `fd` (a duplicate of the newest segment's descriptor, valid whatever happens to
        the log meanwhile) is fdatasynced without the write lock, here (`PendingSync.run`) or
        on a thread without the interpreter lock (a quorum leader's `Syncer`), then handed
        to `end_flush` in any case, which closes it.
        """
        active = self._active
        with active.write_lock:
            if self.storage.closed:
                raise LogClosedError("the log is closed")
            if not active.dirty:
                return None
            active.check_writable()
            try:
                return active.begin_sync()
            except OSError as exc:
                active.fail("flush", exc)

    def end_flush(
        self, pending: PendingSync, *, seconds: float = 0.0, error: OSError | None = None
    ) -> int:
        """The end of a `begin_flush`: what it made durable counts; the flushed end offset.

        `error` (its fdatasync failed) stops the log (`LogFailedError`, fail-stop). A log
        closed meanwhile was flushed by its close: nothing more is done.
        """
        active = self._active
        with active.write_lock:
            if error is not None:
                os.close(pending.fd)
                active.fail("flush", error)
            active.end_sync(pending, seconds)
            if not self.storage.closed:
                active.checkpoint_if_due()
            return self.storage.flushed_offset

    # ---------------------------------------------------------------- epochs

    def epoch_cache(self) -> list[tuple[int, int]]:
        """The leader-epoch cache: [(epoch, offset of its first entry)], oldest first.

        Epochs and offsets strictly increase; the first starts at the log start (offset 0),
        and only epochs that have entries are in it (`LogView.from_log` takes it as it is).
        """
        if self.storage.closed:
            raise LogClosedError("the log is closed")
        return list(self._epochs.epochs)

    def _persist_epochs(self, epochs: list[tuple[int, int]]) -> None:
        """Make `epochs` the cache, written to `leader-epoch-checkpoint` first."""
        try:
            self._epochs.persist(epochs)
        except OSError as exc:
            self._active.fail(f"writing {EPOCH_CHECKPOINT_NAME}", exc)

    # ---------------------------------------------------------------- truncation and trim

    def truncate_to(self, offset: int) -> int:
        """Durably remove every entry at `offset` and after; returns how many entries went.

        Any offset from the log start on; past the end nothing happens (0). A cut inside a
        block keeps that block's entries before `offset` as a smaller block (the segment is
        rewritten through a temporary file, so a crash leaves the old or the new one). The
        indexes, checkpoints and epoch cache follow; one INFO line says what went.
        """
        active = self._active
        with active.write_lock:
            active.check_writable()
            start = self.log_start_offset
            if not isinstance(offset, int) or offset < start:
                raise LogError(
                    f"cannot truncate to offset {offset!r}: the log starts at offset {start}"
                )
            end = self.storage.next_offset
            if offset >= end:
                return 0
            try:
                kept_epochs = [(e, o) for e, o in self._epochs.epochs if o < offset]
                self._cut(offset)
                self._persist_epochs(kept_epochs)
            except OSError as exc:
                active.fail("truncation", exc)
            logger.info(
                "truncated the log in %s to offset %d: removed %d entries (offsets %d..%d)",
                self.directory,
                offset,
                end - offset,
                offset,
                end - 1,
            )
            return end - offset

    def _cut(self, offset: int) -> None:
        """Remove the entries from `offset` (< end) on; the caller holds the write lock."""
        storage = self.storage
        index = max(i for i, s in enumerate(storage.segments) if s.base_offset <= offset)
        segment = storage.segments[index]
        later = storage.segments[index + 1 :]
        # The checkpoints first, durably: they are lower bounds of the log, and a log shorter
        # than its recovery point, or without the newest segment they name, is damaged.
        start = 0 if storage.checkpoint is None else storage.checkpoint.log_start_offset
        storage.write_checkpoint_durably(
            Checkpoint(
                log_start_offset=start,
                recovery_point=min(storage.flushed_offset, offset),
                newest_segment=segment.base_offset,
            )
        )
        self._active.release_fd()
        # Newest first: a crash leaves a shorter but whole log.
        for old in reversed(later):
            move_segment(old.path, None)
        if later:
            fsync_directory(self.directory)
        storage.segments = storage.segments[: index + 1]
        block, first = next(segment.blocks_with_offsets(offset))
        if first == offset:
            cut_segment(segment.path, block.position, None)
            segment.forget_from(block.position, offset)
        else:
            self._rewrite_block(segment, block, first, offset - first)
        storage.next_offset = storage.flushed_offset = offset
        self._active.dirty = False
        storage.last_timestamp = max(s.max_timestamp for s in storage.segments)
        self._active.restart_after_cut()

    def _rewrite_block(self, segment: Segment, block: RawBlock, first: int, keep: int) -> None:
        """Replace the segment's last block (after the cut) by its first `keep` entries.

        The body is cut at the end of entry `keep` (found by decoding with the segment's writer
        schema), so the kept entries keep their exact bytes. The new file is written beside the
        old one and renamed over it.
        """
        import fastavro  # only a cut inside a block needs it

        schema = fastavro.parse_schema(json.loads(segment.header.schema_json))
        stream = io.BytesIO(block.body)
        for _ in range(keep):
            fastavro.schemaless_reader(stream, schema, None)
        body = block.body[: stream.tell()]
        framed = encode_block(keep, body) + segment.header.sync
        path = segment.path
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            with open(path, "rb") as source:
                remaining = block.position
                while remaining:
                    chunk = source.read(min(remaining, 1 << 20))
                    if not chunk:
                        raise OSError(5, f"{path} ended early while it was copied")
                    write_all(fd, chunk)
                    remaining -= len(chunk)
            write_all(fd, framed)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(tmp, path)
        fsync_directory(self.directory)
        for suffix in (".index", ".timeindex"):
            path.with_suffix(suffix).unlink(missing_ok=True)
        _, epoch, timestamp = body_prefix(body)
        segment.forget_from(block.position, first)
        segment.note_block(
            position=block.position,
            end=block.position + len(framed),
            first_offset=first,
            count=keep,
            epoch=epoch,
            timestamp=timestamp,
            interval=self.config.index_interval_bytes,
        )

    @property
    def timings(self) -> LogTimings:
        """How long this log's block writes and fsyncs took (for the metrics)."""
        return self._active.timings

    def keep_merkle_index(self, end: int) -> bool:
        """Extend the Merkle index over the durable entries below `end` (off the write path).

        See `ActiveSegment.keep_index`: whether the index covers them; raises IndexHeldBack.
        """
        return self._active.keep_index(end)

    def trim_before(self, offset: int) -> list[SegmentInfo]:
        """Remove the whole segments whose entries all lie below `offset`; the log start moves.

        As `MetadataLog.trim_before`; the epoch cache names the new start before any segment
        is deleted.
        """
        return self._active.trim_before(offset, new_start=self._trim_epochs)

    def _trim_epochs(self, start: int) -> None:
        self._persist_epochs(epochs_from(self._epochs.epochs, start))

    def reset_to_snapshot(self, snapshot: StartSnapshot) -> None:
        """Make the log empty, starting just after `snapshot` (a quorum node's install).

        With `snapshot.chain` (the leader's hash chain state at the snapshot's offset) the
        new log's chain goes on from it, so its values and digests are the leader's.

        The caller stored the snapshot durably first. Crash-safe in this order: the
        `log-start-snapshot` file (the intent), the segments from the new start on (newest
        first), the new empty segment, the checkpoints and the empty epoch cache, then the
        older segments; an open that finds the file ahead of the checkpoints' start finishes
        the reset.
        """
        start = snapshot.offset + 1
        active = self._active
        storage = self.storage
        with active.write_lock:
            active.check_writable()
            try:
                write_start_snapshot(self.directory, snapshot)
                storage.start_snapshot = snapshot
                active.release_fd()
                segment = storage.reset_files(start, snapshot.chain)
                self._epochs.epochs = []
                active.resume(segment)
            except OSError as exc:
                active.fail("the reset to a snapshot", exc)
            storage.segments = [segment]
            storage.next_offset = storage.flushed_offset = start
            active.dirty = False
            if snapshot.chain is not None:
                # The leader keeps the chain: so does this node, from the state it carried.
                active.chained = True
            try:
                # The chain goes on from the leader's value at the new start (the first chain
                # file holds it), or, without one, starts over from zeros there.
                active.restart_chain()
            except OSError as exc:
                active.fail("the reset to a snapshot", exc)
            storage.last_timestamp = snapshot.timestamp
        logger.info(
            "reset the log in %s to start at offset %d after snapshot (offset %d, epoch %d)",
            self.directory,
            start,
            snapshot.offset,
            snapshot.epoch,
        )
