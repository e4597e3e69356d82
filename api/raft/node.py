"""The controller quorum's shell: the consensus core driven over the real log and network.

`api.raft.core.RaftCore` decides; this module does what it asks, in the order it asks
(etcd raft's `Ready` loop): write the `quorum-state` durably, truncate, append, flush, and only
then send. Every call into the core happens in one task (`QuorumNode._run`), between two
`Ready`s, so the flushed offset it is told always describes the log it asked for: messages and
proposals that arrive while a `Ready` is being carried out wait in a queue. The one exception
is a leader's commit path: a follower's fetch arriving while the loop is idle is taken at once
in the handler's call (`_turn_in_place`), which never waits, so nothing comes between.

The shell's other jobs have their own modules: the core's entries as the log's blocks
(blocks.py), snapshots offered, served and installed (snapshot_shipping.py), where a flush
runs and a leader's behind its loop (flushes.py), refusals made without the core
(requests.py); the transport comes through `transport.protocol`.

The service (`api.service.replicated.ReplicatedService`, used through its public API)
answers writes only on the leader, and only once they are committed (the high watermark
passed them); a follower refuses them with NOT_CONTROLLER (41) naming the leader. Every node
applies committed blocks to its image, so reads anywhere reflect the committed offset they
report. A new leader takes writes once everything before its epoch is
committed and applied (its LeaderChange marker is committed).

Failures. Messages may be lost (the core retries). A storage error in the shell is fatal for
the node, as in KRaft: it stops (`failed` says why) and the other voters elect a new leader; a
restart recovers the log's tail.

Voter changes (KIP-853: `change_voters`) run in the loop too: an accepted change takes the
offset the service's next write would have had, so it must be placed between two `Ready`s,
after the queued proposals, like them.

One concern over ~1,150 lines: the `Ready` loop and what must happen between two `Ready`s
(proposals, voter changes, retention, installs, commits); what need not has its own module.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from api.protocol.quorum.errors import wire_error_code
from api.protocol.quorum.messages import (
    NO_LEADER,
    DescribeQuorumResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    Message,
    ReplicaState,
    SnapshotId,
    VoteRequest,
)
from api.protocol.quorum.messages import ErrorCode as CoreError
from api.raft.blocks import ReplicaBlocks, log_view
from api.raft.clock import now_ms
from api.raft.core.config import QuorumConfig, VoterAddress
from api.raft.core.core import RaftCore
from api.raft.core.ready import (
    Batch,
    NotLeader,
    Ready,
    ReadyDone,
    SnapshotInstall,
    VoterChangeRefused,
)
from api.raft.core.roles import Role
from api.raft.core.states import NEVER
from api.raft.core.voters import Voter, VoterSet
from api.raft.flushes import Flushes
from api.raft.quorum_state_file import read_quorum_state, write_quorum_state
from api.raft.requests import Request, Response, on_wall_clock, refusal
from api.raft.snapshot_shipping import SnapshotShipping
from api.raft.transport.protocol import TransportFactory
from api.raft.voter_blocks import (
    read_voters_base,
    voter_history,
    voters_record,
    write_voters_base,
)
from api.service.gc_policy import MassChangeUntilQuiet, freeze_loaded_image
from api.service.interpreter_lock import share_the_interpreter_lock
from api.service.replicated import ReplicatedService
from api.service.service import SERVICE_PRINCIPAL
from metadata_log.log import AppendResult
from metadata_log.replica_log import ReplicaLog
from metadata_log.timings import LatencyCounts
from records.errors import MetadataLogError
from records.model import Record
from replay.controller.errors import ApiError, ErrorCode
from replay.features import KRAFT_VERSION, finalized_level
from replay.image import EMPTY_IMAGE, METADATA_VERSION, MetadataImage
from replay.loader import load_image, replay_in_slices

if TYPE_CHECKING:
    pass

logger = logging.getLogger("api.server.quorum")
"""Under the server's logger: a quorum node's state changes are lines of `mlog serve`."""

T = TypeVar("T")

HANDOVER_WAIT_S = 3.0
"""How long a stopping leader waits for a successor before it stops anyway."""

LEADER_WAIT_S = 3.0
"""How long a write waits for this node's own election to end before NOT_CONTROLLER."""

INLINE_REPLAY_ENTRIES = 1_000
"""A follower replays newly committed entries on the event loop's thread, this many at most
between two turns of the loop (a few milliseconds), so the loop goes on answering meanwhile.

The blocks it checked and wrote are replayed from the records it decoded then, in slices of
whole blocks, one loop turn between slices. Only entries it no longer holds in memory (read
back from the log, as after catching up by a snapshot) and more than this go to the worker
thread: a hop there costs the worker's taking the interpreter lock and the loop's waiting to
get it back. In a fence's move at 1M partitions (`bench/fleet_bench.py fleet --snapshot
--share 0.2`), where a follower's commits advance 1,000-1,250 entries at a time, the hop (the
future's result set on the worker, the loop woken) took about a fifth of a follower's
interpreter-lock time (py-spy `--gil`)."""

MASS_REPLAY_QUIET_S = 1.0
"""A follower's mass change (commits of more than one slice of `INLINE_REPLAY_ENTRIES`) ends
this long after the last such commit: then what it made is frozen and collections resume."""

MASS_REPLAY_LONGEST_S = 30.0
"""A follower's mass change ends after this long even if big commits go on (a 20% fence at
1M partitions takes ~5 s): the collector then works as usual until they stop."""

RETENTION_CHECK_S = 1.0
"""How often the loop checks the log against its retention bound (and on each new snapshot)."""


class QuorumFailedError(MetadataLogError):
    """The node stopped: its log or quorum state could not be written (it must restart)."""


@dataclass(slots=True, eq=False)
class _Proposal:
    records: tuple[Record, ...]
    principal: str | None
    first: int
    """The offset the working image gave its first record."""
    future: asyncio.Future[AppendResult]
    proposed_at: float = field(default_factory=time.monotonic)


@dataclass(slots=True, eq=False)
class _VoterChange:
    add: Voter | None
    remove: int | None
    directory_id: str
    ack_when_committed: bool
    future: asyncio.Future[tuple[int, str | None]]


@runtime_checkable
class AddressBook(Protocol):
    """A transport whose links follow the voter set (KIP-853: voters added and removed)."""

    def set_addresses(self, addresses: dict[int, VoterAddress]) -> None:
        """Link to exactly these nodes (this node's own id is ignored)."""


@runtime_checkable
class LinkWatch(Protocol):
    """A transport that tells when its link to a node went down (a node that stopped)."""

    def lost_at_ms(self, destination: int) -> int | None:
        """When (the core's clock, ms) the link to `destination` went down; None while up."""


KRAFT_VERSION_0 = (
    "this quorum's voters are fixed by controller.quorum.voters (kraft.version 0). Voter "
    "changes need a dynamic quorum at kraft.version 1, which a quorum formatted with `mlog "
    "quorum format --standalone` or `--initial-controllers` starts at (`mlog features "
    "describe` shows the level); moving a static quorum to dynamic voters in place is not "
    "supported yet"
)
"""Why a static quorum refuses AddRaftVoter / RemoveRaftVoter (UNSUPPORTED_VERSION)."""

VOTER_CHANGE_TIMEOUT_MS = 30_000
"""How long an AddRaftVoter / RemoveRaftVoter waits for its commit by default."""


class QuorumNode:
    """One controller of the quorum: the core, the log, the `quorum-state` and the links."""

    _in_turn: bool = False
    """`_run` is between taking inputs and `advance`: no other call into the core now."""
    _handover: Ready | None = None
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
        state = read_quorum_state(state_dir, voters=None if dynamic else config.voters)
        base = VoterSet.of(
            [Voter(id=i, host=a.host, port=a.port) for i, a in config.addresses.items()]
            or list(config.voters)
        )
        stored = read_voters_base(state_dir) if self.log.log_start_offset > 0 else None
        history = voter_history(self.log, stored if stored is not None else base)
        self.dynamic = dynamic or bool(history.changes)
        """Whether the voters are in the log (kraft.version 1) rather than fixed by the config."""
        view = log_view(service, voters=history if self.dynamic else None)
        self.core = RaftCore(
            config, state=state, log=view, rng=rng or random.Random(), now_ms=now_ms()
        )
        self._transport = transport(self._received)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"mlog-quorum-{config.node_id}")
        self._inbox: deque[tuple[int, Message]] = deque()
        self._answers: dict[tuple[int, int], tuple[asyncio.Future[Response], Request]] = {}
        """Requests from other nodes awaiting the core's answer, by (sender, correlation id)."""
        self._queued: list[_Proposal] = []
        self._inflight: deque[tuple[_Proposal, AppendResult]] = deque()
        """Proposed and not yet committed, in offset order, with where each went."""
        self._blocks = ReplicaBlocks(
            self.log,
            last_timestamp=max(service.image.provenance.timestamp, self.log.last_timestamp),
            dynamic=self.dynamic,
        )
        self._voter_changes: list[_VoterChange] = []
        """AddRaftVoter / RemoveRaftVoter requests waiting for the loop."""
        self._tasks: set[asyncio.Task[None]] = set()  # voter changes waiting for their commit
        self._linked_voters: VoterSet | None = None
        self._snapshots = SnapshotShipping(service)
        self._wake = asyncio.Event()
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
        # Commits of many slices (a fence's moves, a catch-up): the collector held off.
        self._mass_replay = MassChangeUntilQuiet(MASS_REPLAY_QUIET_S, MASS_REPLAY_LONGEST_S)
        self._applied = service.image.provenance.offset + 1
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._stopping = False
        """The node is shutting down: it grants no (pre-)vote from now on."""
        self._resign_requested = False
        self.failed: str | None = None
        """Why the node stopped, once its storage failed."""
        self.on_failure: Callable[[str], None] | None = None
        """Called once with the reason when the node stops on a failure (the server exits)."""
        self._retention_checked: tuple[SnapshotId | None, float] = (None, 0.0)
        self.commit_latency = LatencyCounts()
        """From a write proposed to committed (KRaft's commit-latency; for the metrics)."""
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
        """Each voter's `(host, port)` by node id.

        The log's voter set (its VotersRecord) in a dynamic quorum, `controller.quorum.voters`
        in a static one.
        """
        addresses = {i: (a.host, a.port) for i, a in self.config.addresses.items()}
        if not self.dynamic:
            return addresses
        known = {v.id: (v.host, v.port) for v in self.core.voter_set.voters if v.port}
        # The leader may be missing from this node's set (a node that has not fetched the
        # entry adding it); the config's bootstrap addresses still say where it is.
        leader = self.core.leader_id
        if leader not in known and leader in addresses:
            known[leader] = addresses[leader]
        return known

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
        future: asyncio.Future[tuple[int, str | None]] = asyncio.get_running_loop().create_future()
        change = _VoterChange(
            add=add,
            remove=remove,
            directory_id=directory_id,
            ack_when_committed=ack_when_committed,
            future=future,
        )
        self._voter_changes.append(change)
        self._wake.set()
        try:
            return await asyncio.wait_for(asyncio.shield(future), timeout_ms / 1000)
        except TimeoutError:
            return (
                int(CoreError.REQUEST_TIMED_OUT),
                f"the voter change was not committed within {timeout_ms} ms; `mlog quorum "
                "describe` shows whether it took effect",
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
                await asyncio.wait_for(self._role_seen.wait(), min(remaining, 0.05))

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
        self._stopping = True

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
        live: dict[int, int] = {}
        if self._stopping:
            live = self._recent_fetches()
            if self._no_successor(live):
                return
            # A successor is elected within a round trip of the EndQuorumEpoch when one can
            # be, or after one lost election and its retry on a busy host; a stopping node
            # does not wait a whole handover for one that cannot (a voter that fetched lately
            # may have stopped meanwhile): at most the fetch timeout and one election round.
            config = self.config
            round_ms = config.election_timeout_ms + config.election_backoff_max_ms
            timeout = min(timeout, (config.fetch_timeout_ms + round_ms) / 1000)
        epoch = self.core.epoch
        self._resign_requested = True
        self._wake.set()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.failed is None:
            core = self.core
            leader = core.leader_id
            # Done once the successor's LeaderChange marker is in this log too: a node that
            # stops before it has it ends one committed entry shorter than the others.
            if (
                core.epoch > epoch
                and leader not in (NO_LEADER, self.config.node_id)
                and core.log.last_epoch == core.epoch
            ):
                return
            if live and self._no_successor(live):
                return  # the voters it counted on stopped too (their links went down)
            self._role_seen.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._role_seen.wait(), 0.02)

    def _recent_fetches(self) -> dict[int, int]:
        """The other voters that fetched within the fetch timeout: their last fetch (ms)."""
        core = self.core
        since = core.now_ms - self.config.fetch_timeout_ms
        return {
            voter.replica_id: voter.last_fetch_timestamp
            for voter in core.describe_quorum().current_voters
            if voter.replica_id != self.config.node_id and voter.last_fetch_timestamp >= since
        }

    def _no_successor(self, fetched: dict[int, int]) -> bool:
        """Whether nobody can be elected (`_successor_possible` is False).

        Then a stopping leader stops as it is, its parked fetches answered at once (or the
        server's stop waits out their long poll, ~0.4 s here).
        """
        if self._successor_possible(fetched):
            return False
        self._refuse_waiting(fetches_only=True)
        return True

    def _successor_possible(self, fetched: dict[int, int]) -> bool:
        """Whether the voters of `fetched` that are still up are a majority without this one.

        A voter whose link went down after its last fetch has stopped (a rolling stop of every
        node: the last leader does not wait a handover for voters that left a moment ago).
        """
        transport = self._transport
        lost_at = transport.lost_at_ms if isinstance(transport, LinkWatch) else None
        up = 0
        for voter, fetched_at in fetched.items():
            lost = lost_at(voter) if lost_at is not None else None
            up += lost is None or lost < fetched_at
        return up > len(self.core.voters) // 2

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
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, QuorumFailedError):
                await self._task
        self._fail_proposals(self.not_controller())
        self._refuse_waiting(fetches_only=False)
        await self._transport.close()
        self._flushes.close()  # a flush under way ends first (its descriptor closed)
        self._executor.shutdown(wait=True)
        self._mass_replay.end()

    # ------------------------------------------------------------------ inputs

    def _received(self, source: int, message: Message) -> None:
        """An answer from a link (or any message from a test network)."""
        if isinstance(message, FetchResponse) and message.records:
            message = self._blocks.fetched(source, message)
        self._inbox.append((source, message))
        self._wake.set()

    async def handle(self, sender: int, message: Message) -> Message:
        """Answer a request from another node (the server's quorum endpoint)."""
        if not isinstance(message, Request):
            raise TypeError(f"{type(message).__name__} is not a quorum request")
        if self.failed is not None or self._closing:
            return self._unanswered(message)
        if self._stopping and isinstance(message, VoteRequest):
            # Refused without the core: no vote is cast, and no leader is named (a candidate
            # told of a live leader of its epoch would go back to following this node).
            return refusal(message, LeaderIdAndEpoch(leader_id=NO_LEADER, leader_epoch=self.epoch))
        key = (sender, message.correlation_id)
        previous = self._answers.pop(key, None)
        if previous is not None and not previous[0].done():
            previous[0].set_result(self._unanswered(previous[1]))
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._answers[key] = (future, message)
        self._inbox.append((sender, message))
        wait = self.config.request_timeout_ms / 1000
        if isinstance(message, FetchRequest):
            wait += message.max_wait_ms / 1000
            # A follower's fetch acknowledges what it holds: on a leader it may commit writes
            # and carry new ones, so it is taken at once rather than on the loop's next turn.
            self._turn_in_place()
        else:
            self._wake.set()
        try:
            if future.done():
                return future.result()
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
        return refusal(message, self.core.current_leader())

    def describe(self) -> DescribeQuorumResponse:
        """DescribeQuorum: the leader's view of every voter's and observer's progress."""
        answer = on_wall_clock(self.core.describe_quorum(), now_ms=self.core.now_ms)
        voters = self.core.voter_set
        rows: list[ReplicaState] = []
        others: list[ReplicaState] = []
        for fetched in answer.current_voters:
            voter = voters.get(fetched.replica_id)
            known = voter.directory_id if voter is not None else ""
            row = fetched
            if known and fetched.directory_id not in ("", known):
                # Another incarnation (wiped, formatted anew) fetches under the voter's id: it
                # is not the voter, whose directory has not fetched (Kafka's ReplicaKey rule).
                others.append(fetched)
                row = ReplicaState(
                    replica_id=fetched.replica_id,
                    log_end_offset=-1,
                    last_fetch_timestamp=-1,
                    last_caught_up_timestamp=-1,
                )
            rows.append(replace(row, directory_id=row.directory_id or known))
        return replace(answer, current_voters=tuple(rows), observers=(*others, *answer.observers))

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
                    ready = self._handover
                    self._handover = None
                    if ready is None:
                        self._take_inputs()
                        await self._retain()
                        ready = self._ready_reporting_flush()
                    if not ready.empty:
                        await self._carry_out(ready)
                        core.advance(ReadyDone(flushed_offset=self._flushes.flushed))
                        continue
                finally:
                    self._in_turn = False
                if self._inbox or self._queued:
                    continue
                delay = (core.next_deadline_ms() - now_ms()) / 1000
                if delay > 0:
                    idle = time.monotonic()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), min(delay, 1.0))
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
        if self._in_turn or self._handover is not None or self._closing or self.failed is not None:
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
                self._handover = ready
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
                        self._handover = ready
                        return
                    message = replace(message, records=entries)
                elif isinstance(message, FetchSnapshotResponse):
                    self._handover = ready
                    return
                answers.append((out.destination, message))
            for destination, message in answers:
                self._send(destination, message)
            if ready.high_watermark is not None:
                self._resolve_committed(ready.high_watermark)
                self._applied = max(self._applied, ready.high_watermark)  # as `_committed`
            self._link_voters()
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
        self._fail_proposals(
            ApiError(ErrorCode.KAFKA_STORAGE_ERROR, f"this controller stopped: {self.failed}")
        )
        self._refuse_waiting(fetches_only=False)
        if self.on_failure is not None:
            self.on_failure(self.failed)

    def _take_inputs(self) -> None:
        core = self.core
        if self._flushes.flushed > core.log.flushed_offset:
            core.advance(ReadyDone(flushed_offset=self._flushes.flushed))  # a flush behind ended
        if self._resign_requested:
            self._resign_requested = False
            core.resign()
        self._snapshots.offer(core)
        core.tick(now_ms())
        while self._inbox:
            source, message = self._inbox.popleft()
            core.step(source, message)
        if self._queued:
            self._propose_queued()
        if self._voter_changes:
            self._change_voters()

    def _change_voters(self) -> None:
        """Hand the waiting voter changes to the core (after the queued proposals).

        A change the core accepts is a voters entry at the log's end, which is where the
        service's next write would have gone (every accepted write was proposed just before):
        its block is made here, the service's working image takes its VotersRecord, and it
        is tracked as a proposal, so it commits, fails on a lost leadership and is applied
        in offset order with the writes.
        """
        changes, self._voter_changes = self._voter_changes, []
        core = self.core
        for change in changes:
            if self.leading and not (
                self.dynamic and finalized_level(self.service.image, KRAFT_VERSION) >= 1
            ):
                # The gate: no VotersRecord is written before kraft.version 1 is finalized,
                # so no node of an older version is ever shown one; and a static quorum's
                # nodes keep their configured voters whatever the level says.
                change.future.set_result((int(CoreError.UNSUPPORTED_VERSION), KRAFT_VERSION_0))
                continue
            placed = core.change_voters(
                add=change.add, remove=change.remove, directory_id=change.directory_id
            )
            if isinstance(placed, NotLeader):
                change.future.set_result(
                    (
                        int(CoreError.NOT_LEADER_OR_FOLLOWER),
                        f"node {self.config.node_id} does not lead; the leader is "
                        f"{self.leader_address()}",
                    )
                )
                continue
            if isinstance(placed, VoterChangeRefused):
                change.future.set_result((wire_error_code(placed.error_code), placed.message))
                continue
            record = voters_record(core.voter_set)
            block = self._blocks.encode(
                [((record,), SERVICE_PRINCIPAL)], first=placed.first, epoch=placed.epoch
            )
            self._blocks.keep(block)
            image = self.service.accept_quorum_records((record,))
            committed: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
            proposal = _Proposal(
                records=(record,), principal=SERVICE_PRINCIPAL, first=placed.first, future=committed
            )
            self._inflight.append(
                (proposal, AppendResult(placed.first, placed.first, block.timestamp))
            )
            what = f"adds node {change.add.id}" if change.add else f"removes node {change.remove}"
            logger.info(
                "controller %d %s: voters %s from offset %d (in force now, done once committed)",
                self.config.node_id,
                what,
                sorted(core.voters),
                placed.first,
            )
            if not change.ack_when_committed:
                change.future.set_result((0, None))
            task = asyncio.get_running_loop().create_task(
                self._voter_change_committed(change, committed, image)
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _voter_change_committed(
        self,
        change: _VoterChange,
        committed: asyncio.Future[AppendResult],
        image: MetadataImage,
    ) -> None:
        """Publish a voter change's image once committed; answer its request."""
        try:
            appended = await committed
        except ApiError:
            answer: tuple[int, str | None] = (
                int(CoreError.NOT_LEADER_OR_FOLLOWER),
                "leadership changed before the voter change was committed; `mlog quorum "
                "describe` shows whether the next leader kept it",
            )
        else:
            self.service.commit_quorum_records(image, appended)
            answer = (0, None)
        if not change.future.done():
            change.future.set_result(answer)

    def _link_voters(self) -> None:
        """Open links to voters the log added, close those to voters it removed."""
        voters = self.core.voter_set
        if voters is self._linked_voters or not self.dynamic:
            return
        self._linked_voters = voters
        transport = self._transport
        if isinstance(transport, AddressBook):
            addresses = {
                v.id: VoterAddress(host=v.host, port=v.port) for v in voters.voters if v.port
            }
            transport.set_addresses({**self.config.addresses, **addresses})

    async def _retain(self) -> None:
        """Trim the log below the snapshot the core offers, once it is over its bound.

        Between two `Ready`s, on the worker thread that writes the log; the core's view then
        starts where the log does, so a fetcher below the start is sent the snapshot.
        """
        retention = self.service.retention
        snapshot = self.core.log.snapshot
        if retention is None or snapshot is None or not retention.config.bounded:
            return
        now = time.monotonic()
        seen, checked = self._retention_checked
        if snapshot == seen and now - checked < RETENTION_CHECK_S:
            return
        self._retention_checked = (snapshot, now)
        below = snapshot.end_offset - 1
        if self.dynamic:
            # The VotersRecords below the cut go with it: the set in force there is stored
            # first (a restarted node reads it as the set below its log's first one).
            cut = await self._io(retention.cut, self.log, below=below)
            if cut is None:
                return
            voters = self.core.history.at(cut)
            await self._io(write_voters_base, self.state_dir, offset=cut, voters=voters)
            below = cut
        removed = await self._io(retention.trim, self.log, below=below)
        if removed:
            self.core.log.trim_start(self.log.log_start_offset)

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
        block = self._blocks.encode(
            [(p.records, p.principal) for p in group], first=first, epoch=core.epoch
        )
        placed = core.propose([Batch(payload=block.encode(), count=block.count)])
        if isinstance(placed, NotLeader):
            for proposal in group:
                proposal.future.set_exception(self.not_controller())
            return
        self._blocks.keep(block)
        timestamp = block.timestamp
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
                voters = (
                    self.core.history.at(message.snapshot_id.end_offset) if self.dynamic else None
                )
                message = await self._snapshots.chunk(
                    message, out.read_from, out.read_until, self._io, voters=voters
                )
            self._send(out.destination, message)
        if ready.high_watermark is not None:
            # Before a role change fails what is in flight: what this Ready commits (a leader
            # removing itself resigns in the Ready that commits its removal) succeeded.
            self._resolve_committed(ready.high_watermark)
        if ready.role is not None:
            self._role_changed(ready.role)
        if ready.high_watermark is not None:
            await self._committed(ready.high_watermark)
        self._link_voters()

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
        self._applied = p.offset + 1
        logger.info(
            "controller %d installed the leader's snapshot at offset %d (epoch %d, %d records, "
            "%d bytes); its log now starts at offset %d",
            self.config.node_id,
            p.offset,
            p.epoch,
            installed.count,
            installed.size,
            p.offset + 1,
        )
        self.service.follow(installed.image)
        freeze_loaded_image()

    def _send(self, destination: int, message: Message) -> None:
        if self._stopping and isinstance(message, VoteRequest):
            return  # a stopping node does not stand: it would lead only to leave at once
        if isinstance(message, Response):
            waiting = self._answers.pop((destination, message.correlation_id), None)
            if waiting is not None and not waiting[0].done():
                waiting[0].set_result(message)
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

    def _resolve_committed(self, high_watermark: int) -> None:
        """Answer the proposals below the high watermark: they are committed."""
        while self._inflight and self._inflight[0][1][1] < high_watermark:
            proposal, result = self._inflight.popleft()
            self.commit_latency.observe(time.monotonic() - proposal.proposed_at)
            if not proposal.future.done():
                proposal.future.set_result(result)

    async def _committed(self, high_watermark: int) -> None:
        self._resolve_committed(high_watermark)
        if self.leading:
            self._applied = max(self._applied, high_watermark)
            return
        if high_watermark > self._applied:
            base = self.service.image
            if base is EMPTY_IMAGE:
                image = await self._io(self.service.first_image, high_watermark - 1)
                self._started_from(image)
            else:
                last = high_watermark - 1
                # The blocks this node checked and wrote, decoded then (taken on this thread).
                blocks = self._blocks.take_records(base.provenance.offset + 1, last)
                if blocks is not None:
                    image = base
                    slices = replay_in_slices(base, blocks, lte=last, entries=INLINE_REPLAY_ENTRIES)
                    for image in slices:
                        if image.provenance.offset < last:
                            self._mass_replay.busy()
                            await asyncio.sleep(0)  # a loop turn between two slices
                elif high_watermark - self._applied <= INLINE_REPLAY_ENTRIES:
                    image = load_image(self.log, lte=last, base=base)
                else:
                    image = await self._io(load_image, self.log, lte=last, base=base)
            self._applied = image.provenance.offset + 1
            self.service.follow(image)
        if self.core.role is Role.LEADER and self._applied >= self._epoch_start:
            self._start_leading()

    def _started_from(self, image: MetadataImage) -> None:
        freeze_loaded_image()
        used = self.service.started_from_snapshot
        logger.info(
            "controller %d applied the committed log up to offset %d (%s)",
            self.config.node_id,
            image.provenance.offset,
            "replayed from the start"
            if used is None
            else f"from snapshot {used.id} at offset {used.offset}",
        )

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
            asyncio.get_running_loop().create_task(self.service.bootstrap())

    def _fail_proposals(self, error: ApiError) -> None:
        pending = [*(proposal for proposal, _ in self._inflight), *self._queued]
        self._inflight.clear()
        self._queued = []
        for proposal in pending:
            if not proposal.future.done():
                proposal.future.set_exception(error)

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
