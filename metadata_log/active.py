"""The writing end of a log directory: the lock, the newest segment's descriptor, rolls.

Both writing roles (the user's `MetadataLog` and a quorum node's `ReplicaLog`) put whole
blocks at the end of the storage through an `ActiveSegment`; what differs between them (who
chooses offsets and epochs, when the fsync happens) stays in the role.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from metadata_log.chain import ChainKeeper, missing_chain_files, refuse_missing
from metadata_log.checkpoint import Checkpoint
from metadata_log.container import SYNC_SIZE, fsync_directory, write_all
from metadata_log.digest import block_end_at_or_before
from metadata_log.errors import LogClosedError, LogError, LogFailedError
from metadata_log.lock import DirectoryLock
from metadata_log.merkle import index_through
from metadata_log.private_files import make_dirs
from metadata_log.repair import move_segment
from metadata_log.segment import Segment, SegmentInfo
from metadata_log.storage import SegmentStorage
from metadata_log.syncer import JobLock
from metadata_log.timings import LogTimings

logger = logging.getLogger("metadata_log")


def lock_directory(path: Path) -> DirectoryLock:
    """Create the log directory if needed and take its writer lock."""
    if not path.is_dir():
        make_dirs(path)
        fsync_directory(path.parent)
    lock = DirectoryLock(path)
    lock.acquire()
    return lock


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedBlock:
    """A block ready to be written at the end of `segment` (`ActiveSegment.prepare_block`)."""

    segment: Segment
    data: bytes
    """The framed block and the segment's sync marker: the bytes to write."""
    position: int
    """Where in the segment it starts (the segment's size before it)."""
    body: bytes
    """The uncompressed body, which the hash chain covers."""
    first_offset: int
    count: int
    epoch: int
    timestamp: int
    what: str
    """What the write is, for the error that fails the log (an "append", a "replica write")."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingSync:
    """A sync taken under the write lock and run without it (`ActiveSegment.begin_sync`)."""

    fd: int
    """A duplicate of the newest segment's descriptor (closed by `ActiveSegment.end_sync`)."""
    covers: int
    """The log's end offset when it was taken: what it makes durable."""
    descriptors: int
    """`ActiveSegment.descriptors` then."""

    def run(self) -> float:
        """The fdatasync, here (without the lock); its seconds."""
        started = time.perf_counter()
        os.fdatasync(self.fd)
        return time.perf_counter() - started


class ActiveSegment:
    """Appends whole blocks to the newest segment of `storage`, rolling when it is full.

    Fail-stop: after an I/O error every write raises `LogFailedError` until the log is opened
    again (the open recovers what the disk holds). Callers hold `write_lock` around writes.
    """

    def __init__(self, storage: SegmentStorage, lock: DirectoryLock) -> None:
        self.storage = storage
        self.lock = lock
        self.write_lock = JobLock()
        """Held around writes; across a `Syncer` job's turns of the loop (metadata_log.syncer)."""
        self.fd: int | None = None
        self.failed: OSError | None = None
        self.dirty = False
        """True while written blocks wait for `sync` (a replica's writes)."""
        self.timings = LogTimings()
        """How long block writes and fsyncs take (read by the metrics)."""
        self.chain: ChainKeeper | None = None
        """The hash chain's newest file (metadata_log.chain), kept with every block written."""
        self.chained = True
        """Whether the chain is kept: always for the user's log; for a quorum node's, once the
        quorum's `metadata.version` switches it on (or its files show it was)."""
        self.descriptors = 0
        """How many times the newest segment's descriptor was closed (a roll, cut or reset)."""

    # ---------------------------------------------------------------- opening

    def prepare(self) -> None:
        """After a sound open: save rebuilt indexes, create the first segment of a new log.

        Refuses (`LogCorruptionError`) a log whose segments were born with the hash chain but
        lost their chain files, before anything is written (ChainKeeper.open checks it too).
        """
        storage = self.storage
        missing = missing_chain_files(storage.segments) if self.chained else []
        if missing:
            raise refuse_missing(missing)
        for segment in storage.rebuilt:
            logger.info("rebuilt the indexes of segment %s", segment.path)
            segment.save_indexes()
        if not storage.segments:
            start = 0 if storage.checkpoint is None else storage.checkpoint.log_start_offset
            storage.next_offset = storage.flushed_offset = start
            storage.write_checkpoint(start)
            storage.segments.append(
                Segment.create(
                    storage.directory,
                    start,
                    storage.codec.entry_schema_json,
                    hash_chained=self.chained,
                )
            )

    def start(self) -> None:
        """Open the newest segment for appending (after `prepare`), in this code's schema."""
        storage = self.storage
        self.resume(self._in_this_schema(storage.segments[-1]))
        self.restart_chain()
        checkpoint = storage.checkpoint
        start = 0 if checkpoint is None else checkpoint.log_start_offset
        if checkpoint is None or checkpoint.newest_segment != storage.segments[-1].base_offset:
            # A log from before checkpoints existed, or one repaired down to an older segment.
            storage.write_checkpoint(start)
        if storage.segments[-1].header.schema_json != storage.codec.entry_schema_json:
            # A segment's blocks are read with the schema in its header, and this code's union
            # of record types differs (a newer version added a type): new entries go to a new
            # segment, so every segment stays readable by any Avro tool and by this code.
            logger.info("the record schema changed; starting a new segment")
            self.roll()

    def _in_this_schema(self, active: Segment) -> Segment:
        """`active`, started over in this code's schema if nothing was written with the old."""
        storage = self.storage
        schema = storage.codec.entry_schema_json
        if active.is_empty and active.header.schema_json != schema:
            segments = storage.segments
            previous = segments[-2] if len(segments) > 1 else None
            active = Segment.create(
                storage.directory,
                active.base_offset,
                schema,
                previous,
                hash_chained=self.chained,
            )
            segments[-1] = active
        return active

    def resume(self, active: Segment) -> None:
        """Write to `active` (the newest segment) from now on."""
        self.fd = os.open(active.path, os.O_WRONLY | os.O_APPEND)

    def restart_after_cut(self) -> None:
        """After a truncation: the cut segment is the newest again, in this code's schema."""
        storage = self.storage
        self.resume(self._in_this_schema(storage.segments[-1]))
        self.restart_chain()
        if storage.segments[-1].header.schema_json != storage.codec.entry_schema_json:
            self.roll()  # new blocks go in this code's schema, as after an open

    def restart_chain(self) -> None:
        """Take up the hash chain from the files (after an open, a cut or a reset)."""
        if self.chain is not None:
            self.chain.close(write=self.failed is None)
            self.chain = None
        if self.chained:
            self.chain = ChainKeeper.open(self.storage.segments)

    def release_fd(self) -> None:
        """Close the newest segment's descriptor (before its file is cut or replaced)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.descriptors += 1

    def begin_sync(self) -> PendingSync | None:
        """What a sync of the blocks written so far needs, taken under the write lock.

        None when nothing waits. The fdatasync itself (`PendingSync.run`) may then run without
        the lock, on a duplicate of the newest segment's descriptor (valid even if the segment
        rolls meanwhile), and `end_sync` publishes it under the lock again.
        """
        if not self.dirty or self.fd is None:
            return None
        return PendingSync(
            fd=os.dup(self.fd),
            covers=self.storage.next_offset,
            descriptors=self.descriptors,
        )

    def end_sync(self, pending: PendingSync, seconds: float) -> None:
        """Publish a sync that ran (under the write lock): its blocks are durable.

        Closes its descriptor. A roll, cut or reset meanwhile (the descriptor changed)
        published or cut what the sync covered itself: nothing is published then. Blocks
        written meanwhile wait for the next.
        """
        os.close(pending.fd)
        self.timings.fsync.observe(seconds)
        if pending.descriptors != self.descriptors:
            return
        storage = self.storage
        storage.flushed_offset = max(storage.flushed_offset, pending.covers)
        if storage.next_offset == pending.covers:
            self.dirty = False

    def sync_now(self) -> None:
        """Fsync the newest segment: what a crashed process left in the page cache is durable."""
        if self.fd is not None:
            os.fsync(self.fd)

    # ---------------------------------------------------------------- writing

    def check_writable(self) -> None:
        """Raise unless the log is open and has not failed."""
        if self.storage.closed:
            raise LogClosedError("the log is closed")
        if self.failed is not None:
            raise LogFailedError(
                f"an earlier append failed ({self.failed}); the log accepts no more writes. "
                "Fix the storage problem and restart: the log recovers on open"
            )

    def segment_for(self, framed_size: int, timestamp: int) -> Segment:
        """The segment a block of `framed_size` bytes stamped `timestamp` goes to (rolls if due)."""
        active = self.storage.segments[-1]
        config = self.storage.config
        if not active.is_empty and (
            active.size + framed_size + SYNC_SIZE > config.segment_bytes
            or timestamp - active.first_timestamp >= config.segment_ms
        ):
            active = self.roll()
        return active

    def write(self, block: PreparedBlock, *, durable: bool) -> None:
        """Write a prepared block at the end; with `durable` fdatasync it before publishing.

        Without `durable` (a replica's writes) readers see the block at once and `sync` makes
        it durable later. An I/O error fails the log (fail-stop) naming the block's `what`.
        """
        try:
            fd = self.fd
            if fd is None:  # pragma: no cover - guarded by check_writable
                raise LogClosedError("the log is closed")
            started = time.perf_counter()
            if not durable:
                self.dirty = True
            write_all(fd, block.data)
            synced = time.perf_counter()
            if durable:
                os.fdatasync(fd)
        except OSError as exc:
            self.fail(block.what, exc)
        ended = time.perf_counter()
        self.block_written(
            block,
            write_seconds=synced - started,
            sync_seconds=(ended - synced) if durable else None,
        )

    def prepare_block(
        self,
        framed: bytes,
        *,
        body: bytes,
        first_offset: int,
        count: int,
        epoch: int,
        timestamp: int,
        what: str,
    ) -> PreparedBlock:
        """The bytes of a block to write at the end, in the segment it goes to (rolls if due).

        `body` is the block's uncompressed body, which the hash chain covers. `write` writes and
        publishes it; or whoever does the I/O (the syncer) calls `block_written` after it. An
        I/O error of the roll fails the log naming `what`.
        """
        try:
            segment = self.segment_for(len(framed), timestamp)
        except OSError as exc:
            self.fail(what, exc)
        return PreparedBlock(
            segment=segment,
            data=framed + segment.header.sync,
            position=segment.size,
            body=body,
            first_offset=first_offset,
            count=count,
            epoch=epoch,
            timestamp=timestamp,
            what=what,
        )

    def block_written(
        self, block: PreparedBlock, *, write_seconds: float, sync_seconds: float | None
    ) -> None:
        """Publish a prepared block whose bytes are written (and fsynced, if it is durable)."""
        self.timings.append.observe(write_seconds + (sync_seconds or 0.0))
        if sync_seconds is not None:
            self.timings.fsync.observe(sync_seconds)
        if self.chain is not None:
            try:
                self.chain.append(block.first_offset, block.count, block.body)
            except OSError as exc:
                self.fail(block.what, exc)
        # Published only now (after the fsync of a durable write): readers never look past
        # `segment.size`.
        block.segment.note_block(
            position=block.position,
            end=block.position + len(block.data),
            first_offset=block.first_offset,
            count=block.count,
            epoch=block.epoch,
            timestamp=block.timestamp,
            interval=self.storage.config.index_interval_bytes,
        )

    def sync(self) -> None:
        """Make every block written so far durable (fdatasync of the newest segment)."""
        if self.fd is not None:
            started = time.perf_counter()
            os.fdatasync(self.fd)
            self.timings.fsync.observe(time.perf_counter() - started)
        self.dirty = False
        self.storage.flushed_offset = self.storage.next_offset

    def checkpoint_if_due(self) -> None:
        """Write the checkpoints if the interval passed; a failure only logs (retried later)."""
        storage = self.storage
        if (
            time.monotonic() - storage.checkpointed_at
            >= storage.config.checkpoint_interval_ms / 1000
        ):
            try:
                if self.chain is not None:
                    self.chain.sync()
                storage.write_checkpoint()
            except OSError as exc:  # the blocks are durable; the next roll or close retries
                storage.checkpointed_at = time.monotonic()
                logger.warning("could not write the log checkpoints: %s", exc)

    def fail(self, what: str, exc: OSError) -> NoReturn:
        """An I/O error while writing: the log stops accepting writes (fail-stop)."""
        self.failed = exc
        logger.error("%s failed, the log stops accepting writes: %s", what, exc)
        raise LogFailedError(
            f"{what} failed: {exc}. The log accepts no more writes; fix the storage problem "
            "and restart (the log recovers on open)"
        ) from exc

    def roll(self) -> Segment:
        """Seal the newest segment (durable, indexes saved) and start the next one."""
        storage = self.storage
        old = storage.segments[-1]
        if self.dirty:
            # A sealed segment is complete and durable before the next one exists: on open,
            # anything wrong in a segment that is not the newest is damage, never a torn tail.
            self.sync()
        old.save_indexes()
        self.release_fd()
        segment = Segment.create(
            storage.directory,
            storage.next_offset,
            storage.codec.entry_schema_json,
            old,
            hash_chained=self.chain is not None,
        )
        self.resume(segment)
        if self.chain is not None:
            self.chain.roll(segment)
        storage.segments = [*storage.segments, segment]
        # The checkpoints now name the new segment: from here on, losing it is noticed.
        storage.write_checkpoint()
        logger.info("rolled to segment %s", segment.path.name)
        return segment

    def trim_before(
        self, offset: int, *, new_start: Callable[[int], None] | None = None
    ) -> list[SegmentInfo]:
        """Remove the whole segments whose entries all lie below `offset`; what was removed.

        The newest segment is never removed, nor one holding `offset` or later entries. A
        chained log first extends its Merkle index (metadata_log.merkle) over the entries that
        go, durably and outside the write lock, so the tree still starts at offset 0; if it
        cannot, `IndexHeldBack` is raised and nothing is removed. The checkpoints name the new
        start first (then `new_start`, for a replica's epoch cache), then the segments are
        deleted, oldest first; a crash leaves leftovers the next open removes.
        """
        storage = self.storage
        if not isinstance(offset, int) or offset < 0:
            raise LogError(f"cannot trim before offset {offset!r}: give an offset >= 0")
        if self.chained:
            offset = self._index_before_trim(offset)
        with self.write_lock:
            self.check_writable()
            gone = [s for s in storage.segments[:-1] if s.next_offset <= offset]
            if not gone:
                return []
            start = storage.segments[len(gone)].base_offset
            infos = [s.info() for s in gone]
            try:
                storage.write_checkpoint_durably(
                    Checkpoint(
                        log_start_offset=start,
                        recovery_point=storage.flushed_offset,
                        newest_segment=storage.segments[-1].base_offset,
                    )
                )
                if new_start is not None:
                    new_start(start)
                for segment in gone:
                    move_segment(segment.path, None)
                fsync_directory(storage.directory)
            except OSError as exc:
                self.fail("trim", exc)
            storage.segments = storage.segments[len(gone) :]
            logger.info(
                "trimmed the log in %s: removed %d segment(s), offsets %d..%d; it starts at %d",
                storage.directory,
                len(gone),
                infos[0].base_offset,
                start - 1,
                start,
            )
            return infos

    def keep_index(self, end: int) -> bool:
        """Extend the Merkle index to the last block end at or before `end`, durably.

        Off the write path: a serving node calls it on a worker thread of its own, without the
        write lock (the entries below `end` are durable and do not change). False when the
        log keeps no chain or no tree from offset 0 can be built here; raises `IndexHeldBack`
        on an I/O error.
        """
        if not self.chained or self.failed is not None:
            return False
        segments = self.storage.segments
        target = block_end_at_or_before(segments, min(end, self.storage.flushed_offset) - 1)
        if target <= 0:
            return False
        return index_through(self.storage.directory, segments, target)

    def _index_before_trim(self, offset: int) -> int:
        """Index the entries a trim before `offset` removes; the offset the trim may go to.

        The segments list is replaced, never changed in place, and the sealed segments below
        the cut do not change: the index is extended from a copy without the write lock.
        """
        self.check_writable()
        segments = self.storage.segments
        gone = [s for s in segments[:-1] if s.next_offset <= offset]
        if not gone:
            return offset
        cut = segments[len(gone)].base_offset
        if not index_through(self.storage.directory, segments, cut):
            logger.info(
                "the Merkle index of %s does not start at offset 0 (the log started after it "
                "before it was indexed): the trim keeps no leaves",
                self.storage.directory,
            )
        return min(offset, cut)

    # ---------------------------------------------------------------- closing

    def close(self) -> None:
        """Flush what waits, save the newest segment's indexes and the checkpoints, unlock."""
        with self.write_lock:
            if self.fd is not None:
                if self.dirty and self.failed is None:
                    try:
                        self.sync()
                    except OSError as exc:  # the blocks may be lost; the checkpoints say so
                        logger.warning("could not flush the log on close: %s", exc)
                self.release_fd()
                if self.failed is None and self.storage.segments:
                    try:
                        if self.chain is not None:
                            self.chain.sync()
                        self.storage.segments[-1].save_indexes()
                        self.storage.write_checkpoint()
                    except OSError as exc:  # rebuilt or rewritten on the next open
                        logger.warning("could not save the index or checkpoints: %s", exc)
            if self.chain is not None:
                try:
                    self.chain.close(write=self.failed is None)
                except OSError as exc:  # the next writer open hashes what is missing
                    logger.warning("could not write the hash chain's last records: %s", exc)
                    self.chain.close(write=False)
        self.lock.release()
