"""The controller quorum's shell: the consensus core driven over the real log and network.

`api.raft.core.RaftCore` decides; this module does what it asks, in the order it asks
(etcd raft's `Ready` loop): write the `quorum-state` durably, truncate, append, flush, and only
then send. Every call into the core happens in one task (`QuorumNode._run`), between two
`Ready`s, so the flushed offset it is told always describes the log it asked for: messages and
proposals that arrive while a `Ready` is being carried out wait in a queue. The one exception
is a leader's commit path: a follower's fetch arriving while the loop is idle is taken at once
in the handler's call (`_turn_in_place`), which never waits, so nothing comes between.

The shell's other jobs have their own modules, which the loop calls between two `Ready`s
where they touch the core: writes queued, placed as one block and answered once committed
(proposals.py); voter changes placed after them, and the links and addresses that follow the
voter set (voter_changes.py); committed entries replayed onto the image (committed_replay.py);
the log trimmed below the offered snapshot (online_retention.py); a stopping node's votes
withheld and its leadership handed over (handover.py); the core's entries as the log's blocks
(blocks.py); snapshots offered, served and installed (snapshot_shipping.py); where a flush runs
and a leader's behind its loop (flushes.py); requests awaiting the core's answer and refusals
made without it (requests.py). The transport comes through `transport.protocol`.

The service (`api.service.replicated.ReplicatedService`, used through its public API)
answers writes only on the leader, and only once they are committed (the high watermark
passed them); a follower refuses them with NOT_CONTROLLER (41) naming the leader. Every node
applies committed blocks to its image, so reads anywhere reflect the committed offset they
report. A new leader takes writes once everything before its epoch is
committed and applied (its LeaderChange marker is committed).

Failures. Messages may be lost (the core retries). A storage error in the shell is fatal for
the node, as in KRaft: it stops (`failed` says why) and the other voters elect a new leader; a
restart recovers the log's tail.

One concern over ~750 lines: the `Ready` loop, what must happen between two `Ready`s, and the
node's face to the service and the server, which feeds that loop or reads what it keeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from api.protocol.quorum.messages import (
    NO_LEADER,
    DescribeQuorumResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    Message,
    VoteRequest,
)
from api.protocol.quorum.messages import ErrorCode as CoreError
from api.raft.blocks import ReplicaBlocks, log_view
from api.raft.clock import now_ms
from api.raft.committed_replay import CommittedReplay
from api.raft.core.config import QuorumConfig
from api.raft.core.core import RaftCore
from api.raft.core.ready import Ready, ReadyDone, SnapshotInstall
from api.raft.core.roles import Role
from api.raft.core.states import NEVER
from api.raft.core.voters import Voter, VoterSet
from api.raft.flushes import Flushes
from api.raft.handover import HANDOVER_WAIT_S, Handover
from api.raft.online_retention import OnlineRetention
from api.raft.proposals import Proposals
from api.raft.quorum_state_file import read_quorum_state, write_quorum_state
from api.raft.requests import (
    AwaitedAnswers,
    Request,
    Response,
    by_directory,
    on_wall_clock,
    refusal,
)
from api.raft.snapshot_shipping import SnapshotShipping
from api.raft.transport.protocol import TransportFactory
from api.raft.voter_blocks import history_at_start, write_voters_base
from api.raft.voter_changes import VOTER_CHANGE_TIMEOUT_MS, VoterChanges
from api.service.gc_policy import freeze_loaded_image
from api.service.interpreter_lock import share_the_interpreter_lock
from api.service.replicated import ReplicatedService
from metadata_log.log import AppendResult
from metadata_log.replica_log import ReplicaLog
from metadata_log.timings import LatencyCounts
from records.errors import MetadataLogError
from records.model import Record
from replay.controller.errors import ApiError, ErrorCode
from replay.image import METADATA_VERSION

logger = logging.getLogger("api.server.quorum")
"""Under the server's logger: a quorum node's state changes are lines of `mlog serve`."""

T = TypeVar("T")

LEADER_WAIT_S = 3.0
"""How long a write waits for this node's own election to end before NOT_CONTROLLER."""


class QuorumFailedError(MetadataLogError):
    """The node stopped: its log or quorum state could not be written (it must restart)."""


class QuorumNode:
    """One controller of the quorum: the core, the log, the `quorum-state` and the links.

    A long class (some 640 lines) because its state is the loop's: the core, the inbox, the
    leadership events and the collaborators are read and changed by the loop between two
    `Ready`s, and each public method feeds the loop (writes, voter changes, requests, a stop)
    or reads what it keeps. The jobs that need none of that state have their own modules.
    """

    _in_turn: bool = False
    """`_run` is between taking inputs and `advance`: no other call into the core now."""
    _unfinished: Ready | None = None
    """A `Ready` a turn taken in place began, for the loop to finish (`_turn_in_place`)."""

    def __init__(
        self,
        service: ReplicatedService,
        config: QuorumConfig,
        *,
        state_dir: Path,
        transport: TransportFactory,
        rng: random.Random | None = None,
        dynamic: bool = False,
        directory_id: str = "",
    ) -> None:
        """`dynamic`: the voters are in the log (KIP-853; `controller.quorum.bootstrap.servers`).

        `directory_id` (meta.properties' `directory.id`, "" for none) goes with every Fetch, so
        the leader tells this incarnation from one before a wipe.

        A log that holds a VotersRecord is dynamic whatever `dynamic` says; below its first
        one (or with none yet: a node that has not fetched it) the voters are the config's.
        """
        self.service = service
        self.config = config
        self.state_dir, self.directory_id = state_dir, directory_id
        self.log: ReplicaLog = service.replica_log
        history = history_at_start(self.log, state_dir, config, dynamic=dynamic)
        # Once the log holds voters (kraft.version 1) they win over controller.quorum.voters.
        state = read_quorum_state(state_dir, voters=None if history.in_log else config.voters)
        view = log_view(service, voters=history)
        self.core = RaftCore(
            config, state=state, log=view, rng=rng or random.Random(), now_ms=now_ms()
        )
        self._transport = transport(self._received)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"mlog-quorum-{config.node_id}")
        self._inbox: deque[tuple[int, Message]] = deque()
        self._answers = AwaitedAnswers(self._unanswered)
        self._blocks = ReplicaBlocks(
            self.log,
            last_timestamp=max(service.image.provenance.timestamp, self.log.last_timestamp),
            dynamic=history.in_log,
        )
        self.commit_latency = LatencyCounts()
        """From a write proposed to committed (KRaft's commit-latency; for the metrics)."""
        self._proposals = Proposals(
            self.core,
            self._blocks,
            service,
            not_controller=self.not_controller,
            latency=self.commit_latency,
        )
        self._wake = asyncio.Event()
        self._voters = VoterChanges(
            self.core,
            config,
            service,
            blocks=self._blocks,
            proposals=self._proposals,
            transport=self._transport,
            wake=self._wake.set,
            leader_address=self.leader_address,
            directory_id=directory_id,
        )
        self._snapshots = SnapshotShipping(service, node_id=config.node_id)
        self._leading = asyncio.Event()
        self._role_seen = asyncio.Event()
        self._epoch_start = NEVER
        self._flushes = Flushes(
            self.log,
            self._executor,
            name=f"mlog-quorum-sync-{config.node_id}",
            ended_behind=self._flushed_behind,
            failed=self._flush_failed,
        )
        self._replay = CommittedReplay(service, self._blocks, io=self._io, node_id=config.node_id)
        self._retention = OnlineRetention(service, self.core, state_dir=state_dir, io=self._io)
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._handover = Handover(
            self.core,
            config,
            self._transport,
            wake=self._wake.set,
            role_seen=self._role_seen,
            refuse_fetches=functools.partial(self._answers.refuse, fetches_only=True),
        )
        self.failed: str | None = None
        """Why the node stopped, once its storage failed."""
        self.on_failure: Callable[[str], None] | None = None
        """Called once with the reason when the node stops on a failure (the server exits)."""
        self.idle_seconds = 0.0
        """Time the loop waited with nothing to do (KRaft's poll-idle-ratio is its rate)."""
        service.node = self

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
    def dynamic(self) -> bool:
        """Whether the voters are in the log (kraft.version 1) rather than fixed by the config."""
        return self.core.dynamic

    @property
    def node_id(self) -> int:
        """The id of this node (`node.id`)."""
        return self.config.node_id

    @property
    def epoch(self) -> int:
        """The current epoch."""
        return self.core.epoch

    @property
    def role(self) -> Role:
        """The node's role now."""
        return self.core.role

    def voter_addresses(self) -> dict[int, tuple[str, int]]:
        """Each voter's `(host, port)` by node id (the log's voters in a dynamic quorum)."""
        return self._voters.addresses()

    async def caught_up(self, high_watermark: int, timeout: float) -> bool:
        """Wait until this node's image holds every entry below `high_watermark`.

        What a follower waits for before it relays the answer to a write it forwarded (the
        leader's high watermark after it): the client's next read here then sees the write.
        False when `timeout` (seconds) passed first, or the node failed or is closing.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last = high_watermark - 1
        while self.service.image.provenance.offset < last:
            remaining = deadline - loop.time()
            if remaining <= 0 or self.failed is not None or self._closing:
                return False
            await self.service.wait_committed(last, remaining)
        return True

    def leader_address(self) -> str:
        """`host:port` of the leader's controller address, or why there is none."""
        leader = self.leader_id
        address = self.voter_addresses().get(leader)
        if leader == NO_LEADER or address is None:
            return "not known yet (an election is under way): retry in a moment"
        return f"node {leader} at {address[0]}:{address[1]}"

    def voter_set(self) -> VoterSet:
        """The voters in force (directory ids and addresses where the log holds them)."""
        return self.core.voter_set

    async def change_voters(
        self,
        *,
        add: Voter | None = None,
        remove: int | None = None,
        directory_id: str = "",
        timeout_ms: int = VOTER_CHANGE_TIMEOUT_MS,
        ack_when_committed: bool = True,
    ) -> tuple[int, str | None]:
        """AddRaftVoter / RemoveRaftVoter (KIP-853) on this node: (error code, message).

        Only the leader changes voters (NOT_LEADER_OR_FOLLOWER elsewhere), one change at a
        time and a new voter only once caught up (the core refuses otherwise, with Kafka's
        codes); a static quorum refuses (UNSUPPORTED_VERSION). The answer comes once the new
        voter set is committed (`ack_when_committed`), REQUEST_TIMED_OUT after `timeout_ms`.
        """
        if self.failed is not None or self._closing:
            return int(CoreError.NOT_LEADER_OR_FOLLOWER), "this controller is stopping"
        return await self._voters.change(
            add=add,
            remove=remove,
            directory_id=directory_id,
            timeout_ms=timeout_ms,
            ack_when_committed=ack_when_committed,
        )

    async def upgrade_voters(
        self, timeout_ms: int = VOTER_CHANGE_TIMEOUT_MS
    ) -> tuple[int, str | None]:
        """The kraft.version upgrade of a static quorum: its voters into the log (KIP-853).

        On the leader only; answered once committed, as `change_voters` (voter_changes.py).
        """
        if self.failed is not None or self._closing:
            return int(CoreError.NOT_LEADER_OR_FOLLOWER), "this controller is stopping"
        return await self._voters.change(
            add=None,
            remove=None,
            directory_id="",
            timeout_ms=timeout_ms,
            ack_when_committed=True,
            upgrade=True,
        )

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
                async with asyncio.timeout(min(remaining, 0.05)):
                    await self._role_seen.wait()

    def _check_alive(self) -> None:
        if self.failed is not None:
            raise ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"this controller stopped: {self.failed}")
        if self._closing:
            raise self.not_controller()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start the loop; the node joins the quorum (elections, fetching)."""
        share_the_interpreter_lock()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop_voting(self) -> None:
        """Grant no vote or pre-vote from now on: this node is shutting down.

        A stopping node that still voted could elect a leader that then appends its
        LeaderChange marker with no majority left to commit it (the last nodes of a shutdown),
        leaving the logs of different lengths; for the same reason it does not stand for
        election itself (its VoteRequests are not sent). It still fetches and answers
        fetches, so a successor elected by the others commits with its help.
        """
        self._handover.stopping = True

    async def resign(self, timeout: float = HANDOVER_WAIT_S) -> None:
        """Hand leadership over (EndQuorumEpoch) and wait until another node leads.

        A stopping leader does this first, still answering the others meanwhile, so the most
        caught-up voter stands at once and the pause is one election, not a fetch timeout.
        It returns once the successor's marker is in this node's log (so a node stopping now
        ends with the same log as the others), at once on a node that does not lead, and when
        the other voters heard from lately are not a majority without this node's vote
        (nobody can be elected: the last nodes of a shutdown); after `timeout` regardless.
        """
        if self.core.role is not Role.LEADER or self.failed is not None or self._task is None:
            return
        await self._handover.resign(timeout, failed=lambda: self.failed is not None)

    async def aclose(self, *, resign: bool = True) -> None:
        """Stop: stop voting, resign if leading (another takes over at once), close the rest.

        `resign=False` stops as a crash would, without telling the others (tests).
        """
        if self._closing:
            return
        if resign:
            self.stop_voting()
            await self.resign()
        self._closing = True
        self._wake.set()
        try:
            if self._task is not None:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError, QuorumFailedError):
                    await self._task
            self._proposals.fail(self.not_controller())
            self._answers.refuse(fetches_only=False)
            await self._transport.close()
            self._flushes.close()  # a flush under way ends first (its descriptor closed)
            self._executor.shutdown(wait=True)
        finally:
            self._replay.close()  # however the rest ended: the collector is process-wide

    # ------------------------------------------------------------------ inputs

    def _received(self, source: int, message: Message) -> None:
        """An answer from a link (or any message from a test network)."""
        if isinstance(message, FetchResponse) and message.records:
            self._blocks.dynamic = self.core.dynamic  # an install may have made it so
            message = self._blocks.fetched(source, message)
        self._inbox.append((source, message))
        self._wake.set()

    async def handle(self, sender: int, message: Message) -> Message:
        """Answer a request from another node (the server's quorum endpoint)."""
        if not isinstance(message, Request):
            raise TypeError(f"{type(message).__name__} is not a quorum request")
        if self.failed is not None or self._closing:
            return self._unanswered(message)
        if self._handover.stopping and isinstance(message, VoteRequest):
            # Refused without the core: no vote is cast, and no leader is named (a candidate
            # told of a live leader of its epoch would go back to following this node).
            return refusal(message, LeaderIdAndEpoch(leader_id=NO_LEADER, leader_epoch=self.epoch))
        future = self._answers.expect(sender, message)
        self._inbox.append((sender, message))
        wait = self.config.request_timeout_ms / 1000
        if isinstance(message, FetchRequest):
            wait += message.max_wait_ms / 1000
            # A follower's fetch acknowledges what it holds: on a leader it may commit writes
            # and carry new ones, so it is taken at once rather than on the loop's next turn.
            self._turn_in_place()
        else:
            self._wake.set()
        return await self._answers.wait(sender, message, future, wait)

    def _unanswered(self, message: Request) -> Response:
        """What a request the core dropped gets: a refusal naming the leader this node knows."""
        return refusal(message, self.core.current_leader())

    def describe(self) -> DescribeQuorumResponse:
        """DescribeQuorum: the leader's view of every voter's and observer's progress."""
        answer = on_wall_clock(self.core.describe_quorum(), now_ms=self.core.now_ms)
        return by_directory(answer, self.core.voter_set)

    async def propose(
        self, records: Sequence[Record], *, principal: str | None, first: int
    ) -> AppendResult:
        """Append `records` as a batch starting at `first`; returns once committed."""
        self._check_alive()
        if not self.leading:
            raise self.not_controller()
        future = self._proposals.queue(records, principal=principal, first=first)
        # On the loop's next turn, with the writes that come meanwhile (one block for all).
        self._wake.set()
        return await future

    # ------------------------------------------------------------------ the loop

    async def _run(self) -> None:
        core = self.core
        try:
            while not self._closing and self.failed is None:
                self._wake.clear()
                self._in_turn = True
                try:
                    ready = self._unfinished
                    self._unfinished = None
                    if ready is None:
                        self._take_inputs()
                        await self._retention.check()
                        ready = self._ready_reporting_flush()
                    if not ready.empty:
                        await self._carry_out(ready)
                        core.advance(ReadyDone(flushed_offset=self._flushes.flushed))
                        continue
                finally:
                    self._in_turn = False
                if self._inbox or self._proposals.queued:
                    continue
                delay = (core.next_deadline_ms() - now_ms()) / 1000
                if delay > 0:
                    idle = time.monotonic()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(min(delay, 1.0)):
                            await self._wake.wait()
                    self.idle_seconds += time.monotonic() - idle
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failed(exc)

    def _turn_in_place(self) -> None:
        """Take one turn of the loop now, in the caller's task, if the loop is idle.

        For the leader's commit path (a follower's fetch): the loop's own turn would come
        only after everything else the event loop has queued (other clients' requests), and
        the answer a turn after that. Nothing here waits, so
        no other call into the core can come between: the inputs are taken, and a `Ready`
        that needs no I/O wait (no quorum-state, install, cut, fsync or role change; fetch
        answers from the blocks in memory) is carried out and reported (`advance`) at once.
        Any other `Ready` is handed to the loop, which finishes it before anything else; its
        appended blocks are written here first (they are what the fetch answers read).
        """
        if (
            self._in_turn
            or self._unfinished is not None
            or self._closing
            or self.failed is not None
        ):
            self._wake.set()
            return
        core = self.core
        try:
            self._take_inputs()
            ready = self._ready_reporting_flush()
            # A leader's flush goes behind the loop, after this Ready's blocks are written (a
            # flush started before them would leave the newest entry unflushed, and no linger
            # would ask again for it).
            behind = ready.flush and core.role is Role.LEADER
            if ready.empty:
                return
            if (
                ready.quorum_state is not None
                or ready.install is not None
                or ready.truncate_to is not None
                or (ready.flush and not behind)
                or ready.role is not None
                or not self.leading
            ):
                self._unfinished = ready
                return
            if ready.append:
                self._blocks.write(ready.append)
                ready = replace(ready, append=())
            if behind:
                self._flushes.behind(self.core.epoch)
                ready = replace(ready, flush=False)
            answers: list[tuple[int, Message]] = []
            for out in ready.messages:
                message = out.message
                if isinstance(message, FetchResponse) and out.read_until > out.read_from:
                    entries = self._blocks.recent(out.read_from, out.read_until)
                    if entries is None:  # older than the blocks kept in memory: the loop reads
                        self._unfinished = ready
                        return
                    message = replace(message, records=entries)
                elif isinstance(message, FetchSnapshotResponse):
                    self._unfinished = ready
                    return
                answers.append((out.destination, message))
            for destination, message in answers:
                self._send(destination, message)
            if ready.high_watermark is not None:
                self._proposals.resolve(ready.high_watermark)
                replay = self._replay
                replay.applied = max(replay.applied, ready.high_watermark)  # as `_committed`
            self._voters.link()
            core.advance(ReadyDone(flushed_offset=self._flushes.flushed))
        except Exception as exc:
            self._failed(exc)
        finally:
            self._wake.set()  # the loop looks again: what came meanwhile, its timers

    def _failed(self, exc: Exception) -> None:
        """Stop on what a turn of the loop raised: a storage failure, or else a bug (loudly)."""
        if not isinstance(exc, OSError | MetadataLogError):
            logger.exception("the quorum loop failed")  # stop rather than go on wrong
        self._stop(exc)

    def _stop(self, exc: BaseException) -> None:
        failed = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        # A failed log's message already says to restart (LogFailedError): say it once.
        if "restart" not in failed:
            failed += "; restart it (its log recovers on open)"
        self.failed = failed
        logger.error("controller %d stops: %s", self.config.node_id, failed)
        self._leading.clear()
        self._proposals.fail(
            ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"this controller stopped: {self.failed}")
        )
        self._answers.refuse(fetches_only=False)
        if self.on_failure is not None:
            self.on_failure(self.failed)

    def _take_inputs(self) -> None:
        core = self.core
        if self._flushes.flushed > core.log.flushed_offset:
            core.advance(ReadyDone(flushed_offset=self._flushes.flushed))  # a flush behind ended
        if self._handover.requested:
            self._handover.requested = False
            core.resign()
        self._snapshots.offer(core)
        core.tick(now_ms())
        while self._inbox:
            source, message = self._inbox.popleft()
            core.step(source, message)
        # Voter changes after the queued proposals: an accepted one takes the offset the
        # service's next write would have had.
        if self._proposals.queued:
            self._proposals.place(leading=self.leading)
        if self._voters.waiting:
            self._voters.place(leading=self.leading)

    async def _carry_out(self, ready: Ready) -> None:
        log = self.log
        if ready.quorum_state is not None:
            await self._io(write_quorum_state, self.state_dir, ready.quorum_state)
        if ready.install is not None:
            await self._install(ready.install)
        if ready.truncate_to is not None:
            offset = ready.truncate_to
            await self._io(log.truncate_to, offset)
            self._flushes.flushed = min(self._flushes.flushed, offset)
            self._blocks.truncated(offset)
        if ready.append:
            # On this thread: a write to the page cache costs less than a hop to the worker.
            self._blocks.write(ready.append)
        if ready.flush:
            if self.core.role is Role.LEADER:
                self._flushes.behind(self.core.epoch)
            else:
                await self._flushes.inline_or_on_worker()
        for out in ready.messages:
            message = out.message
            if isinstance(message, FetchResponse) and out.read_until > out.read_from:
                entries = self._blocks.recent(out.read_from, out.read_until)
                if entries is None:  # older than the blocks kept in memory: from the log
                    entries = await self._io(self._blocks.read, out.read_from, out.read_until)
                message = replace(message, records=entries)
            elif isinstance(message, FetchSnapshotResponse) and message.error_code == 0:
                end = message.snapshot_id.end_offset
                history = self.core.history
                voters = history.at(end) if history.in_log_at(end) else None
                message = await self._snapshots.chunk(
                    message, out.read_from, out.read_until, self._io, voters=voters
                )
            self._send(out.destination, message)
        if ready.high_watermark is not None:
            # Before a role change fails what is in flight: what this Ready commits (a leader
            # removing itself resigns in the Ready that commits its removal) succeeded.
            self._proposals.resolve(ready.high_watermark)
        if ready.role is not None:
            self._role_changed(ready.role)
        if ready.high_watermark is not None:
            await self._committed(ready.high_watermark)
        self._voters.link()

    async def _install(self, install: SnapshotInstall) -> None:
        """Make the leader's snapshot this node's, then follow its image."""
        if self.dynamic:
            # The core took the snapshot's voter set (its header's) as the new log's base.
            await self._io(
                write_voters_base,
                self.state_dir,
                offset=install.snapshot_id.end_offset,
                voters=self.core.history.base,
            )
        installed = await self._snapshots.install(install, self._io)
        p = installed.provenance
        self._flushes.flushed = self.log.end_offset
        self._blocks.reset(last_timestamp=p.timestamp)
        self._replay.applied = p.offset + 1
        self.service.follow(installed.image)
        freeze_loaded_image()

    def _send(self, destination: int, message: Message) -> None:
        if self._handover.stopping and isinstance(message, VoteRequest):
            return  # a stopping node does not stand: it would lead only to leave at once
        if isinstance(message, Response):
            self._answers.answer(destination, message)
            return
        if isinstance(message, FetchRequest) and self.directory_id:
            message = replace(message, replica_directory_id=self.directory_id)
        try:
            self._transport.send(destination, message)
        except ValueError:
            # A node this one has no address for (a dynamic quorum's leader named before its
            # VotersRecord arrived): the request is lost, and the core asks again or elsewhere.
            logger.debug("no link to node %d: %s dropped", destination, type(message).__name__)

    # ------------------------------------------------------------------ commits and roles

    async def _committed(self, high_watermark: int) -> None:
        self._proposals.resolve(high_watermark)
        replay = self._replay
        if self.leading:
            replay.applied = max(replay.applied, high_watermark)
            return
        await replay.follow(high_watermark)
        if self.core.role is Role.LEADER and replay.applied >= self._epoch_start:
            self._start_leading()

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
        self._answers.refuse(fetches_only=True)
        if self._leading.is_set():
            self._leading.clear()
            logger.info(
                "controller %d stops leading (epoch %d, now %s)",
                self.config.node_id,
                self.core.epoch,
                role.name.lower(),
            )
        self._proposals.fail(self.not_controller())
        self.service.drop_uncommitted()

    def _start_leading(self) -> None:
        if self._leading.is_set():
            return
        self.service.drop_uncommitted()
        self._leading.set()
        self._role_seen.set()
        logger.info(
            "controller %d takes writes from offset %d", self.config.node_id, self._replay.applied
        )
        if METADATA_VERSION not in self.service.image.features.levels:
            asyncio.get_running_loop().create_task(self.service.bootstrap())

    def _ready_reporting_flush(self) -> Ready:
        """The core's next `Ready`; with nothing to do, after telling it a flush behind ended.

        `advance` follows a `Ready` carried out; a leader's flush that ends when there is none
        (no fetch, no proposal: the followers' next fetches are parked or cut off) would
        otherwise reach the core only with the next input, and its high watermark, its
        commits and the answers waiting on them with it.
        """
        core = self.core
        ready = core.ready()
        if (
            ready.empty
            and core.role is Role.LEADER
            and self._flushes.flushed > core.log.flushed_offset
        ):
            core.advance(ReadyDone(flushed_offset=self._flushes.flushed))
            ready = core.ready()
        return ready

    def _flush_failed(self, exc: BaseException) -> None:
        """A flush behind the loop failed: the node stops, unless it is closing anyway."""
        if not self._closing:
            self._failed(exc)  # type: ignore[arg-type]  # an Exception: the executor's

    def _flushed_behind(self, epoch: int, flushed: int, again: bool) -> None:
        """A flush behind ended (on the loop's thread): the core learns it, commits follow."""
        if self._closing or self.failed is not None:
            return
        core = self.core
        if core.role is not Role.LEADER or core.epoch != epoch:
            # No longer this epoch's leader: a follower may have cut its log since; its own
            # flushes say what is durable from here.
            return
        self._flushes.flushed = max(self._flushes.flushed, flushed)
        self._turn_in_place()  # the high watermark may move: its writes are answered now
        if again and self._flushes.idle:
            try:
                self._flushes.behind(core.epoch)
            except MetadataLogError as exc:  # outside a turn: stopped here
                self._failed(exc)

    async def _io(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: function(*args, **kwargs))


_MAY_LEAD_SOON = frozenset({Role.PROSPECTIVE, Role.CANDIDATE, Role.LEADER})
"""The roles in which a write waits for this node to take writes (`wait_leading`)."""
