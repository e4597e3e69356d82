"""The controller quorum's shell: the consensus core driven over the real log and network.

`metadata_log.raft.RaftCore` decides; this module does what it asks, in the order it asks
(etcd raft's `Ready` loop): write the `quorum-state` durably, truncate, append, flush, and only
then send. Every call into the core happens in one task (`QuorumNode._run`), between two
`Ready`s, so the flushed offset it is told always describes the log it asked for: messages and
proposals that arrive while a `Ready` is being carried out wait in a queue.

Blocks and entries. The core sees one entry per log offset; the log stores blocks (one block is
one atomic batch of one epoch). The first entry of a block carries the whole block
(`ReplicaBlock.encode()`), the others an empty payload; fetch answers hold whole blocks, so
every node's log, every fetch offset and hence the high watermark stay on block boundaries and
no batch is ever applied in part. A new leader's LeaderChange marker becomes a block of one
`LeaderChangeRecord`.

The service (`ReplicatedService`) answers writes only on the leader, and only once they are
committed (the high watermark passed them); a follower refuses them with NOT_CONTROLLER (41)
naming the leader. Every node applies committed blocks to its image, so reads anywhere reflect
the committed offset they report. A new leader takes writes once everything before its epoch is
committed and applied (its LeaderChange marker is committed).

Failures. Messages may be lost (the core retries). A storage error in the shell is fatal for
the node, as in KRaft: it stops (`failed` says why) and the other voters elect a new leader; a
restart recovers the log's tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from api.controller.commands import PurgeResult
from api.controller.controller import Controller
from api.controller.errors import ApiError, ErrorCode
from api.service.client_writes import CURRENT_WRITE
from api.service.service import (
    SERVICE_PRINCIPAL,
    Command,
    MetadataService,
    _bootstrap,
    _noting,
)
from metadata_log.config import LogConfig
from metadata_log.log import AppendResult
from metadata_log.raft.config import QuorumConfig
from metadata_log.raft.core import NEVER, RaftCore
from metadata_log.raft.errors import RaftError
from metadata_log.raft.log_view import LogView
from metadata_log.raft.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    Message,
    ReplicaState,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from metadata_log.raft.messages import (
    ErrorCode as RaftErrorCode,
)
from metadata_log.raft.quorum_state import read_quorum_state, write_quorum_state
from metadata_log.raft.ready import NotLeader, Ready, ReadyDone, SnapshotInstall
from metadata_log.raft.roles import Role
from metadata_log.replica import ReplicaBlock
from metadata_log.replica_log import ReplicaLog
from metadata_log.start_snapshot import StartSnapshot
from records.errors import MetadataLogError
from records.model import LeaderChangeRecord, Record
from replay.image import EMPTY_IMAGE, METADATA_VERSION, MetadataImage
from replay.loader import load_image
from replay.snapshot_bytes import decode_snapshot, encode_snapshot

if TYPE_CHECKING:
    from api.service.snapshots import Snapshotter
    from replay.sql.store import SnapshotInfo

logger = logging.getLogger("api.server.quorum")
"""Under the server's logger: a quorum node's state changes are lines of `mlog serve`."""

T = TypeVar("T")

FETCH_MAX_BYTES = 1 << 20
"""Block bytes a fetch answer carries at most (at least one block, whatever its size)."""

HANDOVER_WAIT_S = 3.0
"""How long a stopping leader waits for a successor before it stops anyway."""

LEADER_WAIT_S = 3.0
"""How long a write waits for this node's own election to end before NOT_CONTROLLER."""

Request = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
)
Response = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
)


class QuorumTransport(Protocol):
    """Sends the core's requests to the other nodes; their answers come back by callback."""

    def send(self, destination: int, message: Any) -> bool:
        """Send a request (never blocks; False: dropped, e.g. the link is down)."""

    async def close(self) -> None:
        """Close every link."""


TransportFactory = Callable[[Callable[[int, Any], None]], QuorumTransport]
"""Makes the transport, given the callback its answers go to: `(source node id, message)`."""


class QuorumFailedError(MetadataLogError):
    """The node stopped: its log or quorum state could not be written (it must restart)."""


@dataclass(slots=True, eq=False)
class _Proposal:
    records: tuple[Record, ...]
    principal: str | None
    first: int
    """The offset the working image gave its first record."""
    future: asyncio.Future[AppendResult]


class ReplicatedService(MetadataService):
    """A `MetadataService` whose writes are replicated by the quorum before they are answered.

    `node` is set by `QuorumNode`. Commands that write run only on the leader; commands that
    only read run anywhere, on the committed image.
    """

    node: QuorumNode | None = None

    @classmethod
    def open_replicated(
        cls,
        log_dir: Path,
        *,
        config: LogConfig | None = None,
        controller: Controller | None = None,
        clock_ms: Callable[[], int] | None = None,
        snapshots: Snapshotter | None = None,
    ) -> ReplicatedService:
        """Open a quorum node's log; the image starts empty and follows the high watermark.

        The log's tail may hold entries that were never committed (a new leader may truncate
        them), so nothing is replayed until the quorum says how far the log is committed;
        then the node starts from its newest snapshot at or below that offset that belongs to
        this log (`snapshots`), and replays only the log after it. With `snapshots` the node
        also takes snapshots of its committed image by the usual policy.
        """
        try:
            log = ReplicaLog.open(log_dir, config=config)
        except BaseException:
            if snapshots is not None:
                snapshots.close()
            raise
        return cls(log, EMPTY_IMAGE, controller, clock_ms=clock_ms, snapshots=snapshots)

    @property
    def replica_log(self) -> ReplicaLog:
        """The node's log, as its Raft shell writes it."""
        log = self.log
        if not isinstance(log, ReplicaLog):  # pragma: no cover - open_replicated makes one
            raise TypeError(f"a quorum node needs a ReplicaLog, not {type(log).__name__}")
        return log

    def first_image(self, last: int) -> MetadataImage:
        """The image at committed offset `last` when nothing is applied yet (worker thread).

        The newest snapshot at or before `last` whose entry this log still holds (same epoch
        and timestamp) is the image of a committed prefix: entries up to a committed offset
        are identical on every node that has them, so the log after it is all that replays.
        """
        if self._snapshots is None:
            return load_image(self.log, lte=last)
        return self._snapshots.start_image(self.log, lte=last)

    def committed_snapshot(self) -> SnapshotInfo | None:
        """The newest stored snapshot that belongs to this log (worker thread or start-up).

        A quorum node's snapshots are taken of committed images only (by the policy, or
        installed from the leader), so this one is of committed state. None without a store.
        """
        if self._snapshots is None or self._snapshots._holds_nothing():
            return None
        # Time travel's machinery only where a store holds snapshots (as `start_image`).
        from replay.timetravel import snapshot_matches_log  # noqa: PLC0415

        store = self._snapshots.store
        store.ensure_schema()
        for info in store.snapshots(gt=self.log.log_start_offset - 2, desc=True):
            if snapshot_matches_log(self.log, info):
                return info
        return None

    def _append_epoch(self) -> int:
        return 0 if self.node is None else self.node.core.epoch

    def execute(self, command: Command[T], *, principal: str | None = None) -> T:
        """Embedded writes are not possible on a quorum's node: they go through the leader."""
        result = command(self._working)
        if result.records:
            raise ApiError(
                ErrorCode.NOT_CONTROLLER,
                "this data directory belongs to a controller quorum: write through the quorum "
                "with --bootstrap-server",
            )
        return result.response

    async def submit(self, command: Command[T], *, principal: str | None = None) -> T:
        """Run a command; a write is answered once the quorum has committed it."""
        node = self.node
        if node is None:
            raise ApiError(ErrorCode.NOT_CONTROLLER, "the quorum is not running yet; retry")
        write = CURRENT_WRITE.get()
        if write is not None:
            # Only the leader knows every accepted write: a retry is checked there.
            if not node.leading:
                await node.wait_leading()
            found = self._retried(write)
            if found is not None:
                return await self._stored(found, write)  # type: ignore[no-any-return]
            command = _noting(command, write)
        result = command(self._working)
        if not result.records:
            return result.response
        if not node.leading:
            await node.wait_leading()
            result = command(self._working)  # the image may have moved meanwhile
            if not result.records:
                return result.response
        self._check_encodes(result.records)
        first = self._next_offset
        image = self._accept(result.records)
        appended = await node.propose(result.records, principal=principal, first=first)
        self._commit(image, appended, asyncio.get_running_loop())
        return result.response

    async def purge_due_async(self, *, now_ms: int | None = None) -> list[PurgeResult]:
        """Pending partition deletions move on by the leader's checks only."""
        if self.node is None or not self.node.leading:
            return []
        try:
            return await super().purge_due_async(now_ms=now_ms)
        except ApiError as exc:
            if exc.error_code != ErrorCode.NOT_CONTROLLER:
                raise
            return []  # leadership moved during the check; the next leader checks

    async def purge_now(self) -> list[PurgeResult]:
        """A client's check (PurgePending), through `submit` even on a follower.

        There it answers NOT_CONTROLLER naming the leader when a step is due or the check
        carries a write id, so the client follows; the scheduler's checks skip followers.
        """
        return await MetadataService.purge_due_async(self)

    def follow(self, image: MetadataImage) -> None:
        """Take `image` (committed blocks applied) as both the committed and the working image."""
        self._committed = image
        self._working = image
        self._next_offset = image.provenance.offset + 1
        if self._snapshots is not None:
            self._snapshots.committed(image, self.log)
        if self._commit_waiters:
            self.release_waiters()

    def drop_uncommitted(self) -> None:
        """Make the committed image the working one: on taking or losing the leadership.

        A new leader writes after everything committed (its log holds nothing more); a
        former one forgets what it accepted and the quorum did not commit.
        """
        self._working = self._committed
        self._next_offset = self._committed.provenance.offset + 1


class QuorumNode:
    """One controller of the quorum: the core, the log, the `quorum-state` and the links."""

    def __init__(
        self,
        service: ReplicatedService,
        config: QuorumConfig,
        *,
        state_dir: Path,
        transport: TransportFactory,
        rng: random.Random | None = None,
    ) -> None:
        self.service = service
        self.config = config
        self.state_dir = state_dir
        self.log: ReplicaLog = service.replica_log
        state = read_quorum_state(state_dir, voters=config.voters)
        view = self._log_view(service)
        self.core = RaftCore(
            config, state=state, log=view, rng=rng or random.Random(), now_ms=_now_ms()
        )
        self._transport = transport(self._received)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"mlog-quorum-{config.node_id}")
        self._inbox: deque[tuple[int, Message]] = deque()
        self._answers: dict[tuple[int, int], tuple[asyncio.Future[Response], Request]] = {}
        """Requests from other nodes awaiting the core's answer, by (sender, correlation id)."""
        self._queued: list[_Proposal] = []
        self._inflight: deque[tuple[_Proposal, AppendResult]] = deque()
        """Proposed and not yet committed, in offset order, with where each went."""
        self._blocks: dict[int, tuple[ReplicaBlock, bool]] = {}
        """Blocks about to be appended, by first offset, and whether they came from a peer."""
        self._wake = asyncio.Event()
        self._leading = asyncio.Event()
        self._role_seen = asyncio.Event()
        self._epoch_start = NEVER
        self._flushed = self.log.end_offset
        self._applied = service.image.provenance.offset + 1
        self._last_timestamp = max(service.image.provenance.timestamp, self.log.last_timestamp)
        self._offered: int | None = None
        """The id of the stored snapshot last offered to the core (FetchSnapshot)."""
        self._served: tuple[SnapshotId, bytes] | None = None
        """The serialization of the snapshot the core offers, made on the first request."""
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._resign_requested = False
        self.failed: str | None = None
        """Why the node stopped, once its storage failed."""
        self.on_failure: Callable[[str], None] | None = None
        """Called once with the reason when the node stops on a failure (the server exits)."""
        service.node = self

    @staticmethod
    def _log_view(service: ReplicatedService) -> LogView:
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
            return LogView.from_log(end_offset=log.end_offset, epochs=epochs)
        info = service.committed_snapshot()
        snapshot = (
            None if info is None else SnapshotId(end_offset=info.offset + 1, epoch=info.epoch)
        )
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
        )

    # ------------------------------------------------------------------ state

    @property
    def leading(self) -> bool:
        """Whether this node leads and takes writes (everything before its epoch applied)."""
        return self._leading.is_set()

    @property
    def leader_id(self) -> int:
        """The live leader's id as this node knows it, -1 when there is none (an election).

        A node that has not heard from a leader in its current epoch (unattached, prospective,
        a candidate, resigned) names none: its last leader may be gone.
        """
        role = self.core.role
        if role is Role.LEADER or role is Role.FOLLOWER or role is Role.OBSERVER:
            return self.core.leader_id
        return NO_LEADER

    @property
    def epoch(self) -> int:
        """The current epoch."""
        return self.core.epoch

    @property
    def role(self) -> Role:
        """The node's role now."""
        return self.core.role

    def voter_addresses(self) -> dict[int, tuple[str, int]]:
        """Each voter's `(host, port)` (`controller.quorum.voters`), by node id."""
        return {i: (a.host, a.port) for i, a in self.config.addresses.items()}

    def leader_address(self) -> str:
        """`host:port` of the leader's controller address, or why there is none."""
        leader = self.leader_id
        address = self.config.addresses.get(leader)
        if leader == NO_LEADER or address is None:
            return "not known yet (an election is under way): retry in a moment"
        return f"node {leader} at {address.host}:{address.port}"

    def not_controller(self) -> ApiError:
        """The refusal of a write on a node that does not lead."""
        return ApiError(
            ErrorCode.NOT_CONTROLLER,
            f"node {self.config.node_id} is not the active controller; the leader is "
            f"{self.leader_address()}",
        )

    async def wait_leading(self, timeout: float = LEADER_WAIT_S) -> None:
        """Wait while this node may be about to lead; NOT_CONTROLLER otherwise, at once.

        A node standing for election (prospective, candidate) or leading without taking
        writes yet (its LeaderChange not committed) is waited for, up to `timeout`: it is
        likely the next controller. Any other node answers NOT_CONTROLLER at once (as Kafka's
        controllers do), naming the leader it knows, so the client asks elsewhere.
        """
        deadline = time.monotonic() + timeout
        while not self.leading:
            self._check_alive()
            if self.core.role not in _MAY_LEAD_SOON:
                raise self.not_controller()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise self.not_controller()
            self._role_seen.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._role_seen.wait(), min(remaining, 0.05))

    def _check_alive(self) -> None:
        if self.failed is not None:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"this controller stopped: {self.failed}")
        if self._closing:
            raise self.not_controller()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the loop; the node joins the quorum (elections, fetching)."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def resign(self, timeout: float = HANDOVER_WAIT_S) -> None:
        """Hand leadership over (EndQuorumEpoch) and wait until another node leads.

        A stopping leader does this first, still answering the others meanwhile, so the most
        caught-up voter stands at once and the pause is one election, not a fetch timeout.
        Returns at once on a node that does not lead; after `timeout` regardless.
        """
        if self.core.role is not Role.LEADER or self.failed is not None or self._task is None:
            return
        epoch = self.core.epoch
        self._resign_requested = True
        self._wake.set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.failed is None:
            leader = self.core.leader_id
            if self.core.epoch > epoch and leader not in (NO_LEADER, self.config.node_id):
                return
            self._role_seen.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._role_seen.wait(), 0.02)

    async def aclose(self, *, resign: bool = True) -> None:
        """Stop: resign if leading (so another takes over at once), close links and the loop.

        `resign=False` stops as a crash would, without telling the others (tests).
        """
        if self._closing:
            return
        if resign:
            await self.resign()
        self._closing = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, QuorumFailedError):
                await self._task
        self._fail_proposals(self.not_controller())
        self._refuse_waiting(fetches_only=False)
        await self._transport.close()
        self._executor.shutdown(wait=True)

    # ------------------------------------------------------------------ inputs

    def _received(self, source: int, message: Message) -> None:
        """An answer from a link (or any message from a test network)."""
        if isinstance(message, FetchResponse) and message.records:
            message = self._whole_blocks(source, message)
        self._inbox.append((source, message))
        self._wake.set()

    async def handle(self, sender: int, message: Message) -> Message:
        """Answer a request from another node (the server's quorum endpoint)."""
        if not isinstance(message, Request):
            raise TypeError(f"{type(message).__name__} is not a quorum request")
        if self.failed is not None or self._closing:
            return self._unanswered(message)
        key = (sender, message.correlation_id)
        previous = self._answers.pop(key, None)
        if previous is not None and not previous[0].done():
            previous[0].set_result(self._unanswered(previous[1]))
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._answers[key] = (future, message)
        self._inbox.append((sender, message))
        self._wake.set()
        wait = self.config.request_timeout_ms / 1000
        if isinstance(message, FetchRequest):
            wait += message.max_wait_ms / 1000
        try:
            return await asyncio.wait_for(future, wait)
        except TimeoutError:
            return self._unanswered(message)
        finally:
            waiting = self._answers.get(key)
            if waiting is not None and waiting[0] is future:
                del self._answers[key]

    def _refuse_waiting(self, *, fetches_only: bool) -> None:
        """Answer waiting requests now with a refusal naming the leader this node knows.

        A leader that stops leading answers its parked fetches at once, so followers ask the
        new leader without waiting out their fetch; a stopping node answers everything.
        """
        for key, (future, message) in list(self._answers.items()):
            if fetches_only and not isinstance(message, FetchRequest):
                continue
            del self._answers[key]
            if not future.done():
                future.set_result(self._unanswered(message))

    def _unanswered(self, message: Request) -> Response:
        """What a request the core dropped gets: a refusal naming the leader this node knows."""
        error = RaftErrorCode.NOT_LEADER_OR_FOLLOWER
        leader = LeaderIdAndEpoch(leader_id=self.core.leader_id, leader_epoch=self.core.epoch)
        if isinstance(message, FetchRequest):
            return FetchResponse(
                correlation_id=message.correlation_id,
                error_code=error,
                high_watermark=-1,
                current_leader=leader,
            )
        if isinstance(message, FetchSnapshotRequest):
            return FetchSnapshotResponse(
                correlation_id=message.correlation_id,
                error_code=error,
                snapshot_id=message.snapshot_id,
                current_leader=leader,
                size=0,
                position=message.position,
            )
        if isinstance(message, VoteRequest):
            return VoteResponse(
                correlation_id=message.correlation_id,
                error_code=error,
                leader_id=leader.leader_id,
                leader_epoch=leader.leader_epoch,
                vote_granted=False,
            )
        kind = (
            BeginQuorumEpochResponse
            if isinstance(message, BeginQuorumEpochRequest)
            else EndQuorumEpochResponse
        )
        return kind(
            correlation_id=message.correlation_id,
            error_code=error,
            leader_id=leader.leader_id,
            leader_epoch=leader.leader_epoch,
        )

    def describe(self) -> DescribeQuorumResponse:
        """DescribeQuorum: the leader's view of every voter's and observer's progress.

        The core keeps time on the monotonic clock; the answer's timestamps are wall-clock
        milliseconds, as Kafka's (-1 stays -1: never).
        """
        answer = self.core.describe_quorum()
        shift = _wall_ms() - self.core.now_ms

        def wall(replica: ReplicaState) -> ReplicaState:
            return replace(
                replica,
                last_fetch_timestamp=_shifted(replica.last_fetch_timestamp, shift),
                last_caught_up_timestamp=_shifted(replica.last_caught_up_timestamp, shift),
            )

        return replace(
            answer,
            current_voters=tuple(wall(r) for r in answer.current_voters),
            observers=tuple(wall(r) for r in answer.observers),
        )

    async def propose(
        self, records: Sequence[Record], *, principal: str | None, first: int
    ) -> AppendResult:
        """Append `records` as a batch starting at `first`; returns once committed."""
        self._check_alive()
        if not self.leading:
            raise self.not_controller()
        future: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
        self._queued.append(
            _Proposal(records=tuple(records), principal=principal, first=first, future=future)
        )
        self._wake.set()
        return await future

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        core = self.core
        try:
            while not self._closing:
                self._wake.clear()
                self._take_inputs()
                ready = core.ready()
                if not ready.empty:
                    await self._carry_out(ready)
                    core.advance(ReadyDone(flushed_offset=self._flushed))
                    continue
                if self._inbox or self._queued:
                    continue
                delay = (core.next_deadline_ms() - _now_ms()) / 1000
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), min(delay, 1.0))
        except asyncio.CancelledError:
            raise
        except (OSError, MetadataLogError) as exc:
            self._stop(exc)
        except Exception as exc:  # a bug: stop this node loudly rather than go on wrong
            logger.exception("the quorum loop failed")
            self._stop(exc)

    def _stop(self, exc: BaseException) -> None:
        self.failed = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        logger.error(
            "controller %d stops: %s; restart it (its log recovers on open)",
            self.config.node_id,
            self.failed,
        )
        self._leading.clear()
        self._fail_proposals(
            ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"this controller stopped: {self.failed}")
        )
        self._refuse_waiting(fetches_only=False)
        if self.on_failure is not None:
            self.on_failure(self.failed)

    def _take_inputs(self) -> None:
        core = self.core
        if self._resign_requested:
            self._resign_requested = False
            core.resign()
        self._offer_snapshot()
        core.tick(_now_ms())
        while self._inbox:
            source, message = self._inbox.popleft()
            core.step(source, message)
        if self._queued:
            self._propose_queued()

    def _offer_snapshot(self) -> None:
        """Offer the core the newest snapshot the policy wrote (of committed state)."""
        snapshots = self.service._snapshots
        info = None if snapshots is None else snapshots.written
        if info is None or info.id == self._offered:
            return
        self._offered = info.id
        try:
            self.core.snapshot_taken(SnapshotId(end_offset=info.offset + 1, epoch=info.epoch))
        except RaftError as exc:
            logger.warning("snapshot %d is not offered to other nodes: %s", info.id, exc)

    def _propose_queued(self) -> None:
        group, self._queued = self._queued, []
        core = self.core
        if core.role is not Role.LEADER or not self.leading:
            for proposal in group:
                proposal.future.set_exception(self.not_controller())
            return
        first = core.log.end_offset
        if group[0].first != first:
            # The working image and the log disagree: a bug; refuse rather than misplace.
            error = ApiError(
                ErrorCode.NOT_CONTROLLER,
                f"internal: the write expected offset {group[0].first}, the log is at {first}",
            )
            for proposal in group:
                proposal.future.set_exception(error)
            self.service.drop_uncommitted()
            return
        timestamp = max(_wall_ms(), self._last_timestamp)
        block = self.log.encode_block(
            [(p.records, p.principal) for p in group],
            first_offset=first,
            epoch=core.epoch,
            timestamp=timestamp,
        )
        placed = core.propose([block.encode()] + [b""] * (block.count - 1))
        if isinstance(placed, NotLeader):
            for proposal in group:
                proposal.future.set_exception(self.not_controller())
            return
        self._last_timestamp = timestamp
        self._blocks[first] = (block, False)
        offset = first
        for proposal in group:
            last = offset + len(proposal.records) - 1
            self._inflight.append((proposal, AppendResult(offset, last, timestamp)))
            offset = last + 1

    async def _carry_out(self, ready: Ready) -> None:
        log = self.log
        if ready.quorum_state is not None:
            await self._io(write_quorum_state, self.state_dir, ready.quorum_state)
        if ready.install is not None:
            await self._install(ready.install)
        if ready.truncate_to is not None:
            offset = ready.truncate_to
            await self._io(log.truncate_to, offset)
            self._flushed = min(self._flushed, offset)
            for first in [f for f in self._blocks if f >= offset]:
                del self._blocks[first]
        if ready.append:
            await self._append(ready.append)
        if ready.flush:
            self._flushed = await self._io(log.flush)
        for out in ready.messages:
            message = out.message
            if isinstance(message, FetchResponse) and out.read_until > out.read_from:
                entries = await self._io(self._entries, out.read_from, out.read_until)
                message = replace(message, records=entries)
            elif isinstance(message, FetchSnapshotResponse) and message.error_code == 0:
                message = await self._snapshot_chunk(message, out.read_from, out.read_until)
            self._send(out.destination, message)
        if ready.role is not None:
            self._role_changed(ready.role)
        if ready.high_watermark is not None:
            await self._committed(ready.high_watermark)

    async def _install(self, install: SnapshotInstall) -> None:
        """Make the leader's snapshot this node's: SQL snapshot first, then the log reset."""
        snapshots = self.service._snapshots
        if snapshots is None:
            raise QuorumFailedError(
                "a snapshot came from the leader but this node has no snapshot store"
            )
        image, header = await self._io(decode_snapshot, install.data)
        p = header.provenance
        if (p.offset + 1, p.epoch) != (install.snapshot_id.end_offset, install.snapshot_id.epoch):
            raise QuorumFailedError(
                f"the leader's snapshot {install.snapshot_id} holds the image at offset "
                f"{p.offset} of epoch {p.epoch}"
            )
        # One transaction holds the rows and the offset they are the state at.
        info = await self._io(snapshots.store.write, image)
        if info.checksum != header.checksum:
            raise QuorumFailedError(
                f"the snapshot installed at offset {p.offset} has checksum {info.checksum[:16]}, "
                f"the leader's {header.checksum[:16]}: the copy is not the leader's state"
            )
        start = StartSnapshot(
            offset=p.offset, epoch=p.epoch, timestamp=p.timestamp, checksum=info.checksum
        )
        await self._io(self.log.reset_to_snapshot, start)
        self._flushed = self.log.end_offset
        self._blocks.clear()
        self._applied = p.offset + 1
        self._last_timestamp = max(self._last_timestamp, p.timestamp)
        self._offered = info.id
        logger.info(
            "controller %d installed the leader's snapshot at offset %d (epoch %d, %d records, "
            "%d bytes); its log now starts at offset %d",
            self.config.node_id,
            p.offset,
            p.epoch,
            header.count,
            len(install.data),
            p.offset + 1,
        )
        self.service.follow(image)

    async def _snapshot_chunk(
        self, message: FetchSnapshotResponse, start: int, until: int
    ) -> FetchSnapshotResponse:
        """Fill a FetchSnapshot answer with bytes [start, until) of the snapshot it names."""
        try:
            data = await self._io(self._snapshot_bytes, message.snapshot_id)
        except MetadataLogError as exc:
            # The database failing a read is no reason to stop leading: the follower asks
            # again (SNAPSHOT_NOT_FOUND makes it fetch, and be told the snapshot again).
            logger.warning("cannot serve snapshot %s: %s", message.snapshot_id, exc)
            data = None
        if data is None:
            return replace(message, error_code=RaftErrorCode.SNAPSHOT_NOT_FOUND)
        if start > len(data):
            return replace(message, error_code=RaftErrorCode.POSITION_OUT_OF_RANGE)
        return replace(message, size=len(data), unaligned_records=data[start:until])

    def _snapshot_bytes(self, snapshot_id: SnapshotId) -> bytes | None:
        """The serialization of the stored snapshot `snapshot_id` (worker thread), kept."""
        if self._served is not None and self._served[0] == snapshot_id:
            return self._served[1]
        snapshots = self.service._snapshots
        if snapshots is None:
            return None
        store = snapshots.store
        offset = snapshot_id.end_offset - 1
        for info in store.snapshots(gt=offset - 1, lte=offset, desc=True):
            if info.epoch != snapshot_id.epoch:
                continue
            data = encode_snapshot(store.load(info.id), checksum=info.checksum)
            self._served = (snapshot_id, data)
            return data
        return None

    def _send(self, destination: int, message: Message) -> None:
        if isinstance(message, Response):
            waiting = self._answers.pop((destination, message.correlation_id), None)
            if waiting is not None and not waiting[0].done():
                waiting[0].set_result(message)
            return
        self._transport.send(destination, message)

    async def _append(self, entries: Sequence[Entry]) -> None:
        """Write the entries of a `Ready` as the blocks they stand for."""
        blocks: list[tuple[ReplicaBlock, bool]] = []
        covered = 0  # the offset the blocks so far reach
        for entry in entries:
            if not entry.payload:
                if entry.offset >= covered:
                    raise QuorumFailedError(
                        f"internal: entry {entry.offset} belongs to no block of this append"
                    )
                continue
            if entry.control and entry.payload[:1] == b"{":
                block = self._marker_block(entry)
                peer = False
            else:
                block, peer = self._blocks.pop(entry.offset, (None, True))  # type: ignore[assignment]
                if block is None:
                    block = ReplicaBlock.decode(entry.payload)
            if block.first_offset != entry.offset or block.epoch != entry.epoch:
                raise QuorumFailedError(
                    f"internal: block at {block.first_offset} (epoch {block.epoch}) stands for "
                    f"entry {entry.offset} (epoch {entry.epoch})"
                )
            blocks.append((block, peer))
            covered = block.first_offset + block.count
        if entries and covered != entries[-1].offset + 1:
            raise QuorumFailedError(
                f"internal: the append ends at {entries[-1].offset + 1}, its blocks at {covered}"
            )
        # Own blocks (proposals, markers) were made here; peers' are checked entry by entry.
        run: list[ReplicaBlock] = []
        run_peer = False
        for block, peer in blocks:
            if run and peer != run_peer:
                await self._io(self.log.write_blocks, run, check=run_peer)
                run = []
            run.append(block)
            run_peer = peer
            self._last_timestamp = max(self._last_timestamp, block.timestamp)
        if run:
            await self._io(self.log.write_blocks, run, check=run_peer)

    def _marker_block(self, entry: Entry) -> ReplicaBlock:
        data = json.loads(entry.payload)
        record = LeaderChangeRecord(
            leader_id=int(data["leaderId"]),
            voters=tuple(int(v) for v in data["voters"]),
            granting_voters=tuple(int(v) for v in data["grantingVoters"]),
        )
        timestamp = max(_wall_ms(), self._last_timestamp)
        return self.log.encode_block(
            [((record,), SERVICE_PRINCIPAL)],
            first_offset=entry.offset,
            epoch=entry.epoch,
            timestamp=timestamp,
        )

    def _entries(self, start: int, until: int) -> tuple[Entry, ...]:
        """Whole blocks of the log in [start, until), as the core's entries (a fetch answer)."""
        entries: list[Entry] = []
        for block in self.log.replica_blocks(start=start, max_bytes=FETCH_MAX_BYTES):
            end = block.first_offset + block.count
            if end > until:
                break
            entries.append(
                Entry(offset=block.first_offset, epoch=block.epoch, payload=block.encode())
            )
            entries.extend(
                Entry(offset=offset, epoch=block.epoch, payload=b"")
                for offset in range(block.first_offset + 1, end)
            )
        return tuple(entries)

    def _whole_blocks(self, source: int, message: FetchResponse) -> FetchResponse:
        """A fetch answer's entries decoded into blocks; a malformed or partial tail is cut."""
        kept: list[Entry] = []
        decoded: dict[int, tuple[ReplicaBlock, bool]] = {}
        entries = message.records
        index = 0
        while index < len(entries):
            head = entries[index]
            try:
                block = ReplicaBlock.decode(head.payload)
            except MetadataLogError as exc:
                logger.warning(
                    "fetch answer from node %d: entry %d is not a block (%s); ignoring the rest",
                    source,
                    head.offset,
                    exc,
                )
                break
            members = entries[index : index + block.count]
            if (
                block.first_offset != head.offset
                or len(members) != block.count
                or any(
                    m.offset != block.first_offset + i or m.epoch != block.epoch
                    for i, m in enumerate(members)
                )
                or any(m.payload for m in members[1:])
            ):
                break
            decoded[block.first_offset] = (block, True)
            kept.extend(members)
            index += block.count
        self._blocks.update(decoded)
        return replace(message, records=tuple(kept))

    # ------------------------------------------------------------------ commits and roles

    async def _committed(self, high_watermark: int) -> None:
        while self._inflight and self._inflight[0][1][1] < high_watermark:
            proposal, result = self._inflight.popleft()
            if not proposal.future.done():
                proposal.future.set_result(result)
        if self.leading:
            self._applied = max(self._applied, high_watermark)
            return
        if high_watermark > self._applied:
            base = self.service.image
            if base is EMPTY_IMAGE:
                image = await self._io(self.service.first_image, high_watermark - 1)
                self._started_from(image)
            else:
                image = await self._io(self._replayed, base, high_watermark - 1)
            self._applied = image.provenance.offset + 1
            self.service.follow(image)
        if self.core.role is Role.LEADER and self._applied >= self._epoch_start:
            self._start_leading()

    def _started_from(self, image: MetadataImage) -> None:
        snapshots = self.service._snapshots
        used = None if snapshots is None else snapshots.started_from
        logger.info(
            "controller %d applied the committed log up to offset %d (%s)",
            self.config.node_id,
            image.provenance.offset,
            "replayed from the start"
            if used is None
            else f"from snapshot {used.id} at offset {used.offset}",
        )

    def _replayed(self, base: MetadataImage, last: int) -> MetadataImage:
        return load_image(self.log, lte=last, base=base)

    def _role_changed(self, role: Role) -> None:
        self._role_seen.set()
        if role is Role.LEADER:
            self._epoch_start = self.core.log.end_offset
            logger.info(
                "controller %d leads epoch %d (log end %d)",
                self.config.node_id,
                self.core.epoch,
                self.core.log.end_offset,
            )
            return
        self._epoch_start = NEVER
        self._refuse_waiting(fetches_only=True)
        if self._leading.is_set():
            self._leading.clear()
            logger.info(
                "controller %d stops leading (epoch %d, now %s)",
                self.config.node_id,
                self.core.epoch,
                role.name.lower(),
            )
        self._fail_proposals(self.not_controller())
        self.service.drop_uncommitted()

    def _start_leading(self) -> None:
        if self._leading.is_set():
            return
        self.service.drop_uncommitted()
        self._leading.set()
        self._role_seen.set()
        logger.info("controller %d takes writes from offset %d", self.config.node_id, self._applied)
        if METADATA_VERSION not in self.service.image.features.levels:
            asyncio.get_running_loop().create_task(self._bootstrap())

    async def _bootstrap(self) -> None:
        with contextlib.suppress(ApiError):
            await self.service.submit(_bootstrap, principal=SERVICE_PRINCIPAL)

    def _fail_proposals(self, error: ApiError) -> None:
        pending = [*(proposal for proposal, _ in self._inflight), *self._queued]
        self._inflight.clear()
        self._queued = []
        for proposal in pending:
            if not proposal.future.done():
                proposal.future.set_exception(error)

    async def _io(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: function(*args, **kwargs))


_MAY_LEAD_SOON = frozenset({Role.PROSPECTIVE, Role.CANDIDATE, Role.LEADER})
"""The roles in which a write waits for this node to take writes (`wait_leading`)."""


def _shifted(timestamp: int, shift: int) -> int:
    return timestamp if timestamp < 0 else timestamp + shift


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000
