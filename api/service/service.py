"""The metadata service: owns the log, the image and the controller.

Commands run one at a time against the working image (which includes records accepted but not
yet durable), so each sees the effect of the ones before it. Their records are appended with
group commit, and the answer is given only after the fsync. Readers see the committed image
only. A command that appends nothing still waits until everything accepted before it is
durable (as Kafka's controller does), because its answer was computed from that state.

Every value is validated before it reaches the log: the controller checks ranges and types, and
the service runs the codec's checks on each batch before it enters the working image, refusing
one that does not encode (INVALID_REQUEST) and going on. So only I/O can fail an append; what
follows one (writes refused, the log re-opened every `reopen_interval_s` seconds until it
works) is `StorageRecovery`'s (storage_recovery.py).

Pending partition deletions are moved on by checks driven by the service's clock: `purge_due`
runs one check (the embedded CLI runs one whenever it opens the service for writing), and a
server's `PurgeScheduler` (purges.py; `run_scheduler` here) runs one every
`delete.topic.partition.interval.delay.ms`.

The module is over 600 lines as one concern, the command pipeline (run a command on the
working image, accept its records, append, commit, publish): most of it is the docstrings and
ordering comments each step needs. What is not the pipeline lives beside it: storage_recovery.py,
purges.py, client_writes.py (retries), snapshots.py and retention.py (the policies after a
commit).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from api.service.client_writes import (
    CURRENT_WRITE,
    PendingWrite,
    noting_write,
    require_owner,
    stored_answer,
)
from api.service.gc_policy import begin_mass_change, end_mass_change
from api.service.purges import PurgeScheduler
from api.service.retention import LogRetention
from api.service.storage_recovery import REOPEN_INTERVAL_S, StorageRecovery
from metadata_log.config import LogConfig
from metadata_log.digest import DigestError, LogDigest
from metadata_log.errors import LogClosedError, LogError, ReadOnlyLogError
from metadata_log.log import AppendResult, MetadataLog
from metadata_log.reader import LogReader
from metadata_log.stored_log import StoredLog
from records.codec import DEFAULT_CODEC, RecordCodec
from records.errors import RecordError
from records.model import ClientWriteRecord, FeatureLevelRecord, Record
from replay.controller.commands import Continuation, ControllerResult, PurgeResult
from replay.controller.controller import Controller
from replay.controller.errors import ApiError, ErrorCode, StorageError
from replay.delta import MetadataDelta
from replay.errors import ReplayError
from replay.image import EMPTY_IMAGE, METADATA_VERSION, MetadataImage, Provenance, new_provenance
from replay.loader import load_image

if TYPE_CHECKING:
    # The async methods import asyncio when called: the embedded CLI starts without it.
    import asyncio

    from api.service.snapshots import Snapshotter
    from replay.sql.store import SnapshotInfo, SnapshotStore

logger = logging.getLogger(__name__)

T = TypeVar("T")

Command = Callable[[MetadataImage], ControllerResult[T]]
"""A controller call bound to its request: image in, records and answer out."""

METADATA_VERSION_LEVEL = 2
"""The `metadata.version` this code writes into a new log (the newest it supports, as Kafka's
format writes: 2 keeps the hash chain on a quorum; replay.features)."""

SERVICE_PRINCIPAL = "metadata-log"
"""The principal of records the service writes on its own (bootstrap, scheduled purges)."""

MAX_ECHO = 200
"""Characters of an encoder's message kept in an error answer (it may quote a huge value)."""

BATCHES_IN_FLIGHT = 8
"""Batches of one command (`ControllerResult.more`) accepted and not yet durable at a time.

Through a quorum each commit waits a replication round (the leader's append linger, fsyncs,
a follower's next fetch): with few in flight a fence's move is bound by those rounds, its
leader idle between them. Eight (of `MOVES_PER_BATCH` records each) keep the rounds
overlapping, and a request arriving meanwhile waits for at most 2,000 moves ahead of it.
Fencing a broker holding 20% of 1M partitions through a 3-node quorum (`bench/fleet_bench.py
fleet --snapshot --share 0.2`, idle host, the collector paused for the move): 3.8-4.9 s with
eight, 4.6-5.2 s with four, heartbeat p99 11-17 ms and 10-13 ms, admin p99 during the move
56-79 ms and 43-63 ms."""

RETRY_COMMIT_WAIT_S = 5.0
"""How long a retried write waits for the original (accepted, not yet durable) to commit."""


class MetadataService:
    """Serialises commands, appends their records, and publishes the committed image."""

    def __init__(
        self,
        log: StoredLog,
        image: MetadataImage,
        controller: Controller | None = None,
        *,
        clock_ms: Callable[[], int] | None = None,
        snapshots: Snapshotter | None = None,
        reopen_interval_s: float = REOPEN_INTERVAL_S,
    ) -> None:
        self.log = log
        """The user's `MetadataLog`, a quorum node's `ReplicaLog`, or after a storage failure
        a `LogReader` over the same directory (reads go on, writes are refused)."""
        self._snapshots = snapshots
        self._clock_ms = clock_ms or _wall_clock_ms
        # One clock for both: a reduction's purge time and the checks must agree on "now".
        self.controller = controller or Controller(clock_ms=self._clock_ms)
        self._committed = image
        self._working = image
        self._next_offset = log.end_offset
        self._last_append: asyncio.Future[None] | None = None
        self._recovery = StorageRecovery(self, interval_s=reopen_interval_s)
        self._closing = False
        self._commit_waiters: list[asyncio.Future[None]] = []
        self._snapshot_check_due = False
        self.retention: LogRetention | None = None
        """Online retention of the log (the snapshots' policy bounds it; None: no snapshots)."""
        if snapshots is not None:
            self.retention = LogRetention(snapshots.policy, clock_ms=self._clock_ms)
            snapshots.on_written = self._snapshot_written

    def committed_digest(self) -> LogDigest | None:
        """The hash chain's digest at the committed offset (the last block end at or before it).

        None while nothing is committed or the log has no chain to read (a log written before
        it, opened read-only after a storage failure). A metrics collector publishes this;
        DescribeLogDigest answers it.
        """
        committed = self.image.provenance.offset
        if committed < self.log.log_start_offset - 1 or committed < 0:
            return None
        try:
            return self.log.digest(committed, at_or_before=True)
        except (DigestError, LogClosedError):
            return None

    @classmethod
    def open(
        cls,
        log_dir: Path,
        *,
        config: LogConfig | None = None,
        controller: Controller | None = None,
        progress: Callable[[int], None] | None = None,
        clock_ms: Callable[[], int] | None = None,
        snapshots: Snapshotter | None = None,
    ) -> MetadataService:
        """Open the log for writing and replay it into the image.

        With `snapshots`, start from the newest valid snapshot and replay only the log after
        it, and take snapshots by policy after commits.
        """
        clock_ms = clock_ms or _wall_clock_ms
        try:
            log, image = _open_replayed(
                log_dir,
                config=config,
                clock_ms=clock_ms,
                snapshots=snapshots,
                progress=progress,
            )
        except BaseException:
            if snapshots is not None:
                snapshots.close()
            raise
        service = cls(log, image, controller, clock_ms=clock_ms, snapshots=snapshots)
        if log.end_offset == 0:
            # metadata.version leads every log, as in KRaft.
            service.execute(bootstrap_features, principal=SERVICE_PRINCIPAL)
        return service

    # ------------------------------------------------------------------ state

    @property
    def image(self) -> MetadataImage:
        """The committed image: every record in it is durable."""
        return self._committed

    @property
    def snapshots(self) -> Snapshotter | None:
        """The snapshotter taking snapshots by policy (None without snapshots)."""
        return self._snapshots

    @property
    def snapshot_store(self) -> SnapshotStore | None:
        """The store snapshots are written to (None without snapshots): for time travel."""
        return None if self._snapshots is None else self._snapshots.store

    async def wait_committed(self, offset: int, timeout: float) -> None:
        """Return once the committed image reaches `offset` (or on timeout or release).

        `release_waiters` (a server shutting down) wakes every waiter at once.
        """
        import asyncio

        if self._committed.provenance.offset >= offset or timeout <= 0:
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._commit_waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                await waiter
        except TimeoutError:
            pass
        finally:
            if waiter in self._commit_waiters:
                self._commit_waiters.remove(waiter)

    def release_waiters(self) -> None:
        """Wake every `wait_committed` caller now."""
        waiters, self._commit_waiters = self._commit_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    @property
    def failure(self) -> str | None:
        """Why writes are refused now (the log's storage failed), None while they are taken."""
        return self._recovery.failure

    @property
    def storage_failures(self) -> int:
        """How often the log's storage failed since the start (a metric)."""
        return self._recovery.failures

    @property
    def reopen_interval_s(self) -> float:
        """Seconds between two attempts to re-open a log whose storage failed."""
        return self._recovery.interval_s

    @reopen_interval_s.setter
    def reopen_interval_s(self, seconds: float) -> None:
        self._recovery.interval_s = seconds

    @property
    def is_active_controller(self) -> bool:
        """Whether this service writes the log now (a quorum's service: while it leads)."""
        return True

    @property
    def stopped(self) -> bool:
        """Whether writes are refused now, because the log's storage failed (until re-opened)."""
        return self._recovery.failure is not None

    def _check_running(self) -> None:
        self._recovery.check()

    def _writer(self) -> MetadataLog:
        """The log to append to: the user's log (never a reader or a quorum node's log)."""
        log = self.log
        if not isinstance(log, MetadataLog):
            raise ReadOnlyLogError(
                f"the log at {log.directory} is not open for appending here; writes go through "
                "the user's log (or the quorum's leader)"
            )
        return log

    def _check_encodes(self, records: tuple[Record, ...]) -> None:
        """Refuse a batch the log could not encode, before it enters the working image.

        The controller validates every field; this is the last check, so that a value it
        missed costs one request (INVALID_REQUEST), never the service's ability to write. It
        runs the codec's per-record step, which checks every int against its Avro type, every
        enum, and that each record is a known type with every field: the step that holds the
        checks, without the write itself (done once, by the log).
        """
        try:
            self.log.codec.check_records(records)
        except RecordError as exc:
            raise _unencodable(exc) from None

    def _accept(self, records: tuple[Record, ...]) -> MetadataImage:
        """Replay accepted records into the working image, with the offsets they will get."""
        delta = MetadataDelta(self._working)
        try:
            delta.replay_all(records)
            delta.finish_batch()
        except ReplayError as exc:
            # The controller let through a batch replay refuses (a bug, not the caller's): refuse
            # it whole, before the log, and go on; the working image is unchanged.
            raise ApiError(
                ErrorCode.INVALID_REQUEST, f"the request's records do not replay: {exc}"
            ) from None
        last = self._next_offset + len(records) - 1
        timestamp = max(self._clock_ms(), self._working.provenance.timestamp)
        image = delta.apply(new_provenance(last, self._append_epoch(), timestamp))
        self._working = image
        self._next_offset = last + 1
        return image

    def _append_epoch(self) -> int:
        """The epoch the next records are written with (a quorum's service: the leader's)."""
        return self.log.epoch

    def _commit(
        self,
        image: MetadataImage,
        appended: AppendResult,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        """Publish `image` as committed; with a `loop`, ask the snapshot policy once per turn.

        The writes of one group commit are committed one after another in one turn of the
        loop: the policy (a lock, the clock, two config values) is asked once, after the last
        of them, about the newest committed image, not once per write.
        """
        if image.provenance.timestamp != appended.timestamp:
            # The log stamps a block when it writes it; the image carries that time, as the
            # same image replayed from the log would (after a restart, or by time travel).
            stamped = image.with_timestamp(appended.timestamp)
            if self._working is image:
                self._working = stamped
            image = stamped
        if image.provenance.offset > self._committed.provenance.offset:
            self._committed = image
            if self._snapshots is not None:
                if loop is None:
                    self._snapshots.committed(image, self.log)
                elif not self._snapshot_check_due:
                    self._snapshot_check_due = True
                    loop.call_soon(self._check_snapshot)
            if self._commit_waiters:
                self.release_waiters()

    def _check_snapshot(self) -> None:
        """The snapshot policy's check of the newest committed image (see `_commit`)."""
        self._snapshot_check_due = False
        if self._snapshots is not None and not self._closing:
            self._snapshots.committed(self._committed, self.log)

    def _snapshot_written(self, info: SnapshotInfo) -> None:
        """After a snapshot (its worker thread): trim the log below it if over its bound."""
        if self.retention is not None:
            self.retention.trim_after_snapshot(self.log, below=info.offset, snapshot_id=info.id)

    def _storage_failed(self, exc: BaseException) -> StorageError:
        """Refuse writes from now on and, in a server, start re-opening the log."""
        return self._recovery.failed(exc)

    async def reopen(self) -> None:
        """Close the failed log, open it again (recovering its tail) and replay the image.

        Raises `MetadataLogError` or `OSError` if the storage is still failing; the service
        then keeps refusing writes.
        """
        await self._recovery.reopen()

    def open_again(self, old: StoredLog) -> tuple[MetadataLog, MetadataImage]:
        """Open `old`'s directory for writing and replay it (`StorageRecovery`, worker thread)."""
        return _open_replayed(
            old.directory,
            config=old.config,
            codec=old.codec,
            clock_ms=self._clock_ms,
            snapshots=self._snapshots,
        )

    def reopened(self, log: MetadataLog, image: MetadataImage) -> None:
        """Take a re-opened log and its replayed image as the state (`StorageRecovery`)."""
        # Unacknowledged records may or may not have reached the disk: the replayed image is
        # the truth, for the working image as well as the committed one.
        reader, self.log = self.log, log
        if isinstance(reader, LogReader):
            reader.close()
        self._committed = image
        self._working = image
        self._next_offset = log.end_offset
        self._last_append = None
        if self._commit_waiters:
            self.release_waiters()

    # ------------------------------------------------------------------ commands

    def execute(self, command: Command[T], *, principal: str | None = None) -> T:
        """Run a command and append its records synchronously (embedded mode, one caller)."""
        self._check_running()
        result = command(self._working)
        if not result.records:
            return result.response
        self._check_encodes(result.records)
        image = self._accept(result.records)
        try:
            appended = self._writer().append(result.records, principal=principal)
        except (LogError, RecordError, OSError) as exc:
            refused = self._storage_failed(exc)
            if isinstance(exc, RecordError):
                raise _unencodable(exc) from None
            raise refused from None
        self._commit(image, appended)
        more = result.more
        while more is not None:
            step = more(self._working)
            more = step.more
            if step.records:
                self.execute(_just(step), principal=principal)
        return result.response

    async def submit(self, command: Command[T], *, principal: str | None = None) -> T:
        """Run a command; answer after its records (and all before them) are durable.

        The command and the working-image update run without yielding to the event loop, so
        concurrent callers are serialised in the order they are scheduled.
        """
        if self._recovery.failure is not None:
            raise self._recovery.refusal(self._recovery.failure)
        write = CURRENT_WRITE.get()
        if write is not None:
            found = self._retried(write)
            if found is not None:
                return await self._stored(found, write)  # type: ignore[no-any-return]
            command = noting_write(command, write)
        result = command(self._working)
        records = result.records
        if not records:
            if self._last_append is not None and not self._last_append.done():
                import asyncio

                await asyncio.shield(self._last_append)
            self._check_running()
            return result.response
        self._check_encodes(records)
        image = self._accept(records)
        loop = (_get_running_loop or _import_get_running_loop())()
        done: asyncio.Future[None] = loop.create_future()
        self._last_append = done
        try:
            appended = await self._writer().append_async(records, principal=principal)
        except (LogError, RecordError, OSError) as exc:
            # A RecordError: the log refused (alone) a batch the check above let through, e.g.
            # a string that is not valid UTF-8. The working image holds it all the same, so the
            # service resets it the way it heals from an I/O error; the caller is told why.
            refused = self._storage_failed(exc)
            done.set_exception(refused)
            done.exception()  # retrieved here; waiters see the failure through _check_running
            if isinstance(exc, RecordError):
                raise _unencodable(exc) from None
            raise refused from None
        self._commit(image, appended, loop)
        done.set_result(None)
        if result.more is not None:
            await self.submit_rest(result.more, principal=principal)
        return result.response

    async def submit_rest(self, more: Continuation, *, principal: str | None = None) -> None:
        """Write the further batches of a command (`ControllerResult.more`), in order.

        Each batch is a command of its own, computed against the working image of its time:
        other commands run between them. A batch does not wait for the one before it to be
        durable (they are accepted in order and group-committed together); this returns once
        every one is. At most `BATCHES_IN_FLIGHT` are accepted and not yet durable.
        """
        import asyncio

        following: Continuation | None = more
        writes: list[asyncio.Task[None]] = []
        begin_mass_change()  # its batches' objects join the image: frozen after, not walked
        try:
            while following is not None:
                found: list[Continuation | None] = []

                def step(
                    image: MetadataImage,
                    batch: Continuation = following,
                    found: list[Continuation | None] = found,
                ) -> ControllerResult[None]:
                    result = batch(image)
                    found.append(result.more)  # the last run counts (a replica may run twice)
                    return ControllerResult(records=result.records, response=None)

                if len(writes) >= BATCHES_IN_FLIGHT:
                    # A bounded pipeline: a command that arrives meanwhile waits for at most
                    # this many batches ahead of it to be durable, not for all of them.
                    await writes[-BATCHES_IN_FLIGHT]
                write = asyncio.ensure_future(self.submit(step, principal=principal))
                writes.append(write)
                # One turn of the loop: the batch is accepted (the write's synchronous start)
                # and whatever else was ready runs before the next batch is computed.
                await asyncio.sleep(0)
                if not found:
                    await write  # it waited for something first (a leader to be elected)
                following = found[-1] if found else None
        finally:
            try:
                # Closed, not cancelled (its loop is gone): nothing may be awaited, and the
                # mass change must end, or the collector stays off for the rest of the process.
                if not isinstance(sys.exception(), GeneratorExit):
                    await asyncio.gather(*writes)
            finally:
                end_mass_change()

    def _retried(self, write: PendingWrite) -> ClientWriteRecord | None:
        """The client's last write if `write` is it or older (the write is not run again).

        The write id is taken: a handler that submits twice writes its id once.
        """
        CURRENT_WRITE.set(None)
        found = self._working.client_writes.get(write.write_id.client_id)
        if found is None:
            return None
        require_owner(found, write)  # before the sequence: no one takes another's slot
        if found.sequence < write.write_id.sequence:
            return None
        return found

    async def _stored(self, found: ClientWriteRecord, write: PendingWrite) -> Any:
        """A retry's stored answer, once the write that stored it is committed."""
        answer = stored_answer(found, write)  # refusals first: they need no commit
        client = write.write_id.client_id
        if self._committed.client_writes.get(client) != found:
            # Accepted, not yet durable (the first attempt's answer is still on its way):
            # the retry is answered when it is, like the first attempt.
            await self.wait_committed(self._working.provenance.offset, RETRY_COMMIT_WAIT_S)
            self._check_running()
            if self._committed.client_writes.get(client) != found:
                raise ApiError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"write {found.sequence} of client {client} is not committed yet; retry",
                )
        return answer

    # ------------------------------------------------------------------ scheduler

    def purge_due(self, *, now_ms: int | None = None) -> list[PurgeResult]:
        """Run one check of pending partition deletions, synchronously (embedded mode).

        Each deletion whose purge time has passed (by the service's clock, or `now_ms`) takes
        its next step: its partitions go to mode NONE, or, if they already are, are removed.
        Returns what was done, one result per topic; an empty list when nothing was due.
        """
        now = self._clock_ms() if now_ms is None else now_ms
        return self.execute(
            lambda image: self.controller.purge_partitions(image, now),
            principal=SERVICE_PRINCIPAL,
        )

    async def purge_due_async(self, *, now_ms: int | None = None) -> list[PurgeResult]:
        """`purge_due` through `submit`, for a server: answers once the step is durable."""
        now = self._clock_ms() if now_ms is None else now_ms
        return await self.submit(
            lambda image: self.controller.purge_partitions(image, now),
            principal=SERVICE_PRINCIPAL,
        )

    async def purge_now(self) -> list[PurgeResult]:
        """One check asked for by a client (PurgePending), answered by the controller."""
        return await self.purge_due_async()

    def scheduler_interval_ms(self) -> int:
        """Time between two checks: the cluster's `delete.topic.partition.interval.delay.ms`."""
        return PurgeScheduler(self).interval_ms()

    async def run_scheduler(
        self,
        *,
        sleep: Callable[[float], Awaitable[object]] | None = None,
        rounds: int | None = None,
    ) -> None:
        """Check pending partition deletions now and then every interval (`PurgeScheduler.run`)."""
        await PurgeScheduler(self).run(sleep=sleep, rounds=rounds)

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close the log (release the writer lock), after a snapshot in flight."""
        self._closing = True
        self._recovery.close()
        if self._snapshots is not None:
            self._snapshots.close()
        self.log.close()

    async def aclose(self) -> None:
        """Wait for appends in flight, then close the log (and finish a snapshot in flight)."""
        import asyncio

        self._closing = True
        await self._recovery.aclose()
        await self.log.aclose()
        if self._snapshots is not None:
            await asyncio.to_thread(self._snapshots.close)

    def __enter__(self) -> MetadataService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_get_running_loop: Callable[[], asyncio.AbstractEventLoop] | None = None
"""`asyncio.get_running_loop` once a write has imported asyncio: an `import` statement in
`submit` costs about half a microsecond per write even when the module is loaded."""


def _import_get_running_loop() -> Callable[[], asyncio.AbstractEventLoop]:
    global _get_running_loop  # noqa: PLW0603 - set once, on the first write
    import asyncio

    _get_running_loop = asyncio.get_running_loop
    return _get_running_loop


def _just(result: ControllerResult[None]) -> Command[None]:
    """A command that writes `result`'s batch alone, without its continuation.

    One batch of a command that writes several: the caller runs the continuation.
    """
    batch: ControllerResult[None] = ControllerResult(records=result.records, response=None)
    return lambda image: batch


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _open_replayed(
    directory: Path,
    *,
    config: LogConfig | None,
    clock_ms: Callable[[], int],
    snapshots: Snapshotter | None,
    codec: RecordCodec = DEFAULT_CODEC,
    progress: Callable[[int], None] | None = None,
) -> tuple[MetadataLog, MetadataImage]:
    """Open the log for writing and replay it (after the newest snapshot, with `snapshots`).

    At start-up and at every re-open after a storage failure; the log is closed again if the
    replay fails.
    """
    log = MetadataLog.open(directory, config=config, codec=codec, clock_ms=clock_ms)
    try:
        if snapshots is None:
            image = load_image(log, progress=progress)
        else:
            image = snapshots.start_image(log, progress=progress)
    except BaseException:
        log.close()
        raise
    return log, image


def first_image() -> MetadataImage:
    """The image a new log starts with: its bootstrap records replayed onto the empty image."""
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay_all(bootstrap_features(EMPTY_IMAGE).records)
    return delta.apply(Provenance(offset=0, epoch=0, timestamp=0))


def bootstrap_features(image: MetadataImage) -> ControllerResult[None]:
    """The first records of a new log: the metadata.version feature level."""
    return ControllerResult(
        records=(FeatureLevelRecord(name=METADATA_VERSION, feature_level=METADATA_VERSION_LEVEL),),
        response=None,
    )


def _unencodable(exc: RecordError) -> ApiError:
    text = str(exc)
    if len(text) > MAX_ECHO:
        text = text[:MAX_ECHO] + f"... ({len(text)} characters)"
    return ApiError(
        ErrorCode.INVALID_REQUEST,
        f"the request would write a record that cannot be stored: {text}; "
        "nothing was written, correct the value",
    )
