"""The sans-IO consensus core: a pure state machine fed messages, time and proposals.

It owns neither the log nor the transport nor a clock (etcd raft's model). It holds the state
of its current role (`states.py`); how it answers each message is in handlers.py and
snapshot_fetch.py, which use the transitions and helpers below. Each call may queue work;
`ready()` hands it over as a `Ready` the shell carries out IN ORDER: write the quorum state
durably, truncate, append, flush, and only then send the messages (a vote or a fetch
acknowledges what was persisted before it). The shell then calls `advance()` with the log's
flushed end offset.

One concern over ~900 lines: one node's state and its transitions (the shell's interface,
the transitions the handlers use, the timers); the rules per message are in handlers.py.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from api.protocol.quorum.bounds import LAST_EPOCH, out_of_range
from api.protocol.quorum.messages import (
    NO_HIGH_WATERMARK,
    NO_LEADER,
    UNCOUNTED_REPLICA,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    EntryKind,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderChangeMessage,
    LeaderIdAndEpoch,
    Message,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from api.raft.core import handlers, snapshot_fetch
from api.raft.core.config import QuorumConfig
from api.raft.core.election import (
    election_backoff,
    election_timeout,
)
from api.raft.core.errors import RaftError
from api.raft.core.log_view import LogView
from api.raft.core.quorum_state import QuorumState
from api.raft.core.ready import (
    Batch,
    NotLeader,
    OffsetRange,
    Outgoing,
    Pending,
    Ready,
    ReadyDone,
    SnapshotInstall,
    VoterChangeRefused,
)
from api.raft.core.replication import LeaderState
from api.raft.core.roles import Role
from api.raft.core.states import (
    NEVER,
    CandidateState,
    ElectionTimed,
    FetchInFlight,
    FollowerState,
    ObserverState,
    ProspectiveState,
    ResignedState,
    RoleState,
    UnattachedState,
    VoteRound,
)
from api.raft.core.voters import Voter, VoterHistory, VoterSet, snapshot_voters


class RaftCore:
    """One node of the quorum: `step`, `tick`, `propose`, then `ready` / `advance`.

    Besides that interface for the shell, its public methods below the line are the
    transitions and helpers the message handlers (handlers.py, snapshot_fetch.py) use.
    """

    def __init__(
        self,
        config: QuorumConfig,
        *,
        state: QuorumState | None,
        log: LogView,
        rng: random.Random,
        now_ms: int,
    ) -> None:
        """Start from the durable state; `state=None` means none survived (or never existed)."""
        self.config = config
        self.log = log
        self.rng = rng
        self.now_ms = now_ms
        self.id = config.node_id
        self.dynamic = log.voters is not None
        """Whether the voters are in the log (KIP-853), not fixed by the config."""
        if log.voters is None:
            log.voters = VoterHistory(base=VoterSet.of(config.voters))
        self.history: VoterHistory = log.voters
        """The voter set at each offset of the log; the latest is in force."""
        self._voter_ids = self.history.latest.ids
        self.high_watermark = 0
        """Entries below this are known committed (0 after a restart until told)."""
        self._hw_change: int | None = None
        # A node without durable state may have voted before it lost it: it catches up first.
        # In a dynamic quorum that holds for any node, since the log may make it a voter.
        self.catching_up = state is None and (self.is_voter or self.dynamic)
        self.epoch = state.leader_epoch if state is not None else 0
        self.leader_id = state.leader_id if state is not None else NO_LEADER
        self.voted_id = state.voted_id if state is not None else NO_LEADER
        self.state: RoleState = UnattachedState()
        """The current role's state (its timers); a role change makes a fresh one."""
        self._pending = Pending()
        self._correlation = 0
        self.ended = (-1, NO_LEADER)
        """(epoch, leader) of a leader known to have stopped leading: not followed again."""
        self.fetched_ms = -NEVER
        """When the leader last answered a fetch (KIP-996: a live leader refuses pre-votes)."""
        self.linger_at = NEVER
        """When the leader's append linger ends and it flushes (NEVER: nothing lingers)."""
        self.votes = VoteRound()
        """The current (pre-)vote round: it outlives the role that started it."""
        self.fetch_target = NO_LEADER
        """Whom this node fetches from (NO_LEADER: some voter that may know the leader)."""
        self.snapshot_transfers = 0
        """How many snapshot transfers this core started (for tests and logs)."""
        self.heard: dict[int, int] = {}
        """A voter without durable state: the newest epoch heard from each other voter."""
        self._probe_at = now_ms
        if state is not None and not self.dynamic and state.voters != config.voters:
            raise RaftError(
                f"the quorum state names voters {sorted(state.voters)}, the config "
                f"{sorted(config.voters)}; they must agree"
            )
        if not self.may_stand or self.catching_up:
            self.set_role(ObserverState())
            self.send_fetch()
        elif self.leader_id == self.id:
            # A leader that restarted does not lead again in its epoch: it resigned by crashing.
            self.set_role(ResignedState(election_at=now_ms + self._election_timeout()))
        elif self.leader_id != NO_LEADER:
            self.become_follower(self.epoch, self.leader_id)
        else:
            self.become_unattached(self.epoch)

    @property
    def role(self) -> Role:
        """The node's role now."""
        return self.state.role

    @property
    def voters(self) -> frozenset[int]:
        """The ids of the voters in force: the latest voter set of the log (KIP-853)."""
        return self._voter_ids

    @property
    def voter_set(self) -> VoterSet:
        """The voters in force, with their directory ids and addresses."""
        return self.history.latest

    @property
    def majority(self) -> int:
        """How many of the voters in force make a majority."""
        return len(self._voter_ids) // 2 + 1

    @property
    def is_voter(self) -> bool:
        """Whether this node is among the voters in force.

        A node that is not observes, or leads on only until its own removal is committed.
        """
        return self.id in self._voter_ids

    @property
    def may_stand(self) -> bool:
        """Whether this node takes part in elections: it may stand, follow and resign.

        Every voter in force may; so may a node removed by the latest voters entry of its log
        while it does not know that entry committed (Raft's single-server changes, Ongaro's
        thesis 4.2.2): it may hold the only copy of entries the remaining voters need, its
        removal among them, so it still stands to commit them. Its own vote never counts (a
        majority is of the voters in force); it leads only until its removal commits.
        """
        if self.is_voter:
            return True
        latest = self.history.latest_offset
        return (
            self.dynamic
            and latest >= self.high_watermark
            and self.id in self.history.at(latest).ids
        )

    # ----------------------------------------------------------------- the shell's interface

    def ready(self) -> Ready:
        """Hand over the queued work (and forget it)."""
        p = self._pending
        if self.role is not Role.LEADER and self.log.flushed_offset < self.log.end_offset:
            # Followers and observers acknowledge by fetching: what they append is flushed
            # before their next Fetch leaves.
            p.flush = True
        ready = Ready(
            quorum_state=p.quorum_state,
            install=p.install,
            truncate_to=p.truncate_to,
            append=tuple(p.append),
            flush=p.flush,
            messages=tuple(p.messages),
            high_watermark=self._hw_change,
            role=self.role if p.role_changed else None,
        )
        self._pending = Pending()
        self._hw_change = None
        if ready.flush:
            self.linger_at = NEVER
        return ready

    def advance(self, done: ReadyDone) -> None:
        """The shell did the last `Ready`; its log is flushed up to `done.flushed_offset`."""
        flushed = min(done.flushed_offset, self.log.end_offset)
        if flushed > self.log.flushed_offset:
            self.log.flushed_offset = flushed
            if isinstance(self.state, LeaderState):
                handlers.update_high_watermark(self)

    def next_deadline_ms(self) -> int:
        """When `tick` next has something to do (the shell may tick more often)."""
        deadlines = [self.linger_at]
        state = self.state
        if isinstance(state, ElectionTimed):
            deadlines.append(state.election_at)
        if isinstance(state, ProspectiveState):
            deadlines.append(state.prevote_at)
            deadlines.extend(state.ask_again.values())
        if isinstance(state, FollowerState):
            deadlines.append(state.fetch_deadline)
        if isinstance(state, FollowerState | ObserverState):
            if state.fetch is not None:
                deadlines.append(state.fetch.retry_at)
            if state.transfer is not None:
                deadlines.append(state.transfer.retry_at)
        if self.catching_up:
            deadlines.append(self._probe_at)
        if isinstance(state, LeaderState):
            deadlines.extend(deadline for _, deadline in state.parked.values())
            deadlines.append(self.now_ms + self.config.fetch_timeout_ms // 4)
            deadlines.extend(
                sent + self.config.request_timeout_ms for sent in state.begin_sent_ms.values()
            )
        return min(deadlines)

    def propose(self, entries: Sequence[Batch]) -> OffsetRange | NotLeader:
        """Append `entries` (each a batch of `count` offsets) in this leader's epoch, or refuse."""
        if self.role is not Role.LEADER:
            return NotLeader(leader_id=self.leader_id, leader_epoch=self.epoch)
        if not entries:
            raise RaftError("a proposal needs at least one entry")
        first = self.log.end_offset
        for batch in entries:
            self.append_entry(
                Entry(
                    offset=self.log.end_offset,
                    epoch=self.epoch,
                    count=batch.count,
                    payload=batch.payload,
                )
            )
        if self.linger_at == NEVER:
            self.linger_at = self.now_ms + self.config.append_linger_ms
        handlers.answer_parked(self, force=True)
        return OffsetRange(epoch=self.epoch, first=first, last=self.log.end_offset - 1)

    def resign(self) -> None:
        """Graceful leader change: stop leading and name the successors (EndQuorumEpoch)."""
        state = self.state
        if not isinstance(state, LeaderState):
            return
        successors = state.successors(self.id)
        if self.may_stand:
            self.set_role(ResignedState(election_at=self.now_ms + self._election_timeout()))
        else:
            # Its removal committed: it never stands again, it follows the next leader.
            self.become_observer()
        for voter in successors:
            self.send(
                voter,
                EndQuorumEpochRequest(
                    correlation_id=self.next_correlation(),
                    leader_id=self.id,
                    leader_epoch=self.epoch,
                    preferred_successors=successors,
                ),
            )

    def tick(self, now_ms: int) -> None:
        """Let time pass to `now_ms` (never backwards) and fire the timers that expired."""
        self.now_ms = max(self.now_ms, now_ms)
        now = self.now_ms
        if now >= self.linger_at:
            self._pending.flush = True
        if isinstance(self.state, LeaderState):
            handlers.tick_leader(self, now)
            return
        state = self.state
        fetch = state.fetch if isinstance(state, FollowerState | ObserverState) else None
        if fetch is not None and now >= fetch.retry_at:
            if self.role is Role.OBSERVER:
                # No answer (or no leader there): ask another voter who leads.
                self.leader_id = NO_LEADER
                self.fetch_target = NO_LEADER
            self.send_fetch()
        snapshot_fetch.tick_transfer(self, now)
        if self.catching_up and now >= self._probe_at:
            self._probe()
        state = self.state
        if isinstance(state, FollowerState) and now >= state.fetch_deadline:
            state.fetch_deadline = NEVER
            self.become_prospective(backoff=False)
        state = self.state
        if isinstance(state, ElectionTimed) and now >= state.election_at:
            state.election_at = NEVER
            self.become_prospective(backoff=isinstance(state, CandidateState))
        state = self.state
        if isinstance(state, ProspectiveState) and now >= state.prevote_at:
            state.prevote_at = NEVER
            self._send_pre_votes()
        state = self.state
        if isinstance(state, ProspectiveState) and state.ask_again:
            for voter, at in sorted(state.ask_again.items()):
                if now >= at:
                    del state.ask_again[voter]
                    self._send_vote_request(voter, pre_vote=True)

    def step(self, sender: int, message: Message) -> None:
        """Handle one message from `sender`."""
        if not well_formed(message):
            # Dropped before it changes anything, as a lost message: the transport refused it
            # already (INVALID_REQUEST) if it came over the wire.
            return
        self._hear(sender, message)
        if isinstance(message, VoteRequest):
            handlers.on_vote_request(self, sender, message)
        elif isinstance(message, VoteResponse):
            handlers.on_vote_response(self, sender, message)
        elif isinstance(message, BeginQuorumEpochRequest):
            handlers.on_begin_quorum_epoch(self, sender, message)
        elif isinstance(message, EndQuorumEpochRequest):
            handlers.on_end_quorum_epoch(self, sender, message)
        elif isinstance(message, FetchRequest):
            handlers.on_fetch_request(self, sender, message)
        elif isinstance(message, FetchResponse):
            handlers.on_fetch_response(self, sender, message)
        elif isinstance(message, FetchSnapshotRequest):
            snapshot_fetch.on_fetch_snapshot_request(self, sender, message)
        elif isinstance(message, FetchSnapshotResponse):
            snapshot_fetch.on_fetch_snapshot_response(self, sender, message)
        elif isinstance(message, BeginQuorumEpochResponse):
            state = self.state
            if isinstance(state, LeaderState) and message.leader_epoch == self.epoch:
                state.begin_sent_ms.pop(sender, None)
        elif isinstance(message, EndQuorumEpochResponse):
            pass  # Nothing to do: the election that follows tells the rest.

    def snapshot_taken(self, snapshot_id: SnapshotId) -> None:
        """The shell stored a snapshot of committed state: offer it to fetchers below the start.

        Its end offset must be in this log (or at its start) with the epoch of the entry
        before it; only a newer snapshot than the one known replaces it.
        """
        self.log.take_snapshot(snapshot_id)

    def describe_quorum(self) -> DescribeQuorumResponse:
        """DescribeQuorum as this node answers it (NOT_LEADER_OR_FOLLOWER off the leader)."""
        return handlers.describe_quorum(self)

    def current_leader(self) -> LeaderIdAndEpoch:
        """The leader this node knows of, and its epoch."""
        return LeaderIdAndEpoch(leader_id=self.leader_id, leader_epoch=self.epoch)

    @property
    def leader_state(self) -> LeaderState | None:
        """The leader's bookkeeping (DescribeQuorum), None unless leading."""
        state = self.state
        return state if isinstance(state, LeaderState) else None

    @property
    def fetch_replica_id(self) -> int:
        """The replica id this node fetches with: none that counts while it has no state."""
        return UNCOUNTED_REPLICA if self.catching_up else self.id

    # -------------------------------------------------- transitions (for the handlers)

    def set_role(self, state: RoleState) -> None:
        """Enter the role of `state` (a fresh one: no timer of the old role survives)."""
        if state.role is not self.role or state.role is Role.OBSERVER:
            self._pending.role_changed = True
        self.state = state

    def persist(self) -> None:
        """Queue the election state (epoch, leader, vote) to be written before anything else."""
        if self.catching_up or not (self.dynamic or self.config.is_voter):
            return
        self._pending.quorum_state = QuorumState(
            leader_epoch=self.epoch,
            leader_id=self.leader_id,
            voted_id=self.voted_id,
            voters=self.voters if self.dynamic else self.config.voters,
        )

    def new_epoch(self, epoch: int) -> None:
        """Move to a newer `epoch` (no vote, no leader in it yet); an older one changes nothing."""
        if epoch > self.epoch:
            self.epoch = epoch
            self.voted_id = NO_LEADER
            self.leader_id = NO_LEADER

    def become_unattached(self, epoch: int) -> None:
        """Learn of `epoch` without its leader: wait for one, or stand after a timeout."""
        if self.catching_up or not self.may_stand:
            if epoch > self.epoch:
                self.new_epoch(epoch)
                if isinstance(self.state, LeaderState):
                    # A leader whose own removal is not committed yet is deposed by a newer
                    # epoch: it must not lead on in an epoch it was never elected in.
                    self.become_observer()
                else:
                    self.persist()
            return
        self.new_epoch(epoch)
        self.set_role(UnattachedState(election_at=self.now_ms + self._election_timeout()))
        self.persist()

    def become_follower(self, epoch: int, leader: int) -> None:
        """Follow `leader` of `epoch` (an observer just fetches from it)."""
        if self.catching_up or not self.may_stand:
            if epoch > self.epoch or self.leader_id != leader:
                self.new_epoch(epoch)
                self.leader_id = leader
                if isinstance(self.state, LeaderState):
                    # A removed leader (its removal not committed yet) deposed by a newer
                    # epoch's leader: it observes that leader from now on.
                    self.become_observer()
                    return
                self.persist()
            if self.fetch_target != leader:
                self.fetch_target = leader
                if isinstance(self.state, FollowerState | ObserverState):
                    self.state.transfer = None
                self.send_fetch()
            return
        self.new_epoch(epoch)
        self.leader_id = leader
        self.set_role(FollowerState(fetch_deadline=self.now_ms + self.config.fetch_timeout_ms))
        self.fetch_target = leader
        self.persist()
        self.send_fetch()

    @property
    def may_start_election(self) -> bool:
        """Whether an election into the next epoch is possible: it must not pass `LAST_EPOCH`.

        The door refuses every message past it, so only 2^31 elections reach it; a node
        there waits for a leader rather than compute an epoch it could never store.
        """
        return self.epoch < LAST_EPOCH

    def become_prospective(self, *, backoff: bool) -> None:
        """KIP-996: ask for pre-votes (after a backoff when an election was just lost)."""
        if not self.may_start_election:
            self.set_role(UnattachedState())
            return
        leader = self.leader_id if self.role is Role.FOLLOWER else NO_LEADER
        state = ProspectiveState(election_at=self.now_ms + self._election_timeout())
        self.set_role(state)
        self.leader_id = leader
        if backoff:
            delay = election_backoff(self.rng, self.config.election_backoff_max_ms)
            state.prevote_at = self.now_ms + delay
            state.election_at += delay
        else:
            self._send_pre_votes()

    def become_candidate(self) -> None:
        """Stand in the next epoch, voting for itself; lead at once if that is a majority."""
        if not self.may_start_election:
            self.set_role(UnattachedState())
            return
        self.epoch += 1
        self.voted_id = self.id
        self.leader_id = NO_LEADER
        state = CandidateState()
        self.set_role(state)
        self.persist()
        state.election_at = self.now_ms + self._election_timeout()
        self.votes = VoteRound(granted={self.id})
        if self.has_majority(self.votes.granted):
            self.become_leader()
            return
        for voter in sorted(self.voters - {self.id}):
            self._send_vote_request(voter, pre_vote=False)

    def become_leader(self) -> None:
        """Lead this epoch: append the LeaderChange marker and tell the voters."""
        granting = tuple(sorted(self.votes.granted))
        self.leader_id = self.id
        leader = LeaderState(
            epoch_start_offset=self.log.end_offset,
            started_ms=self.now_ms,
            voters=self.voters,
        )
        self.set_role(leader)
        self.persist()
        marker = LeaderChangeMessage(
            leader_id=self.id, voters=tuple(sorted(self.voters)), granting_voters=granting
        )
        self.append_entry(
            Entry(
                offset=self.log.end_offset,
                epoch=self.epoch,
                payload=marker.encode(),
                kind=EntryKind.LEADER_CHANGE,
            )
        )
        self._pending.flush = True
        for voter in sorted(self.voters - {self.id}):
            self.send_begin(voter)
        handlers.update_high_watermark(self)

    def rejoin_as_voter(self) -> None:
        """A node without durable state caught up: it follows its leader with its vote spent.

        (A node that is no voter now only writes its state: it observes on.)
        """
        self.catching_up = False
        self.heard = {}
        leader = self.leader_id
        self.voted_id = self.id
        if self.may_stand:
            self.set_role(FollowerState(fetch_deadline=self.now_ms + self.config.fetch_timeout_ms))
        self.leader_id = leader
        self.fetch_target = leader
        self.persist()

    def become_observer(self) -> None:
        """No longer a voter (the log removed it): fetch on from the leader, never stand."""
        old = self.state
        state = ObserverState()
        if isinstance(old, FollowerState | ObserverState):
            state.fetch, state.transfer = old.fetch, old.transfer
        self.set_role(state)
        leader = self.leader_id
        self.fetch_target = leader if leader not in (NO_LEADER, self.id) else NO_LEADER
        self.persist()
        if state.fetch is None:
            self.send_fetch()

    def may_follow(self, leader: int) -> bool:
        """Whether a leader named by a message is one this node may follow.

        In a static quorum only a voter leads. In a dynamic one a leader may be missing from
        this node's voter set (a voter added by an entry this node lacks, or a leader whose
        removal is not committed yet); one leader per epoch still holds, so any id is taken.
        """
        return leader >= 0 and leader != self.id and (self.dynamic or leader in self._voter_ids)

    def has_majority(self, granted: set[int]) -> bool:
        """Whether `granted` holds a majority of the voters in force."""
        return len(granted & self._voter_ids) >= self.majority

    def change_voters(
        self, *, add: Voter | None = None, remove: int | None = None, directory_id: str = ""
    ) -> OffsetRange | NotLeader | VoterChangeRefused:
        """KIP-853's AddRaftVoter / RemoveRaftVoter: append the new voter set, or refuse.

        One change at a time: the leader must have committed its own epoch (its LeaderChange
        marker) and the previous voters entry, so consecutive voter sets always share a
        majority. A voter is added only once caught up: it fetched (with its id, as an
        observer) up to the leader's end within the fetch timeout. The change counts at once
        (the latest voter set is in force); it is done when the high watermark passes it. A
        leader that removes itself leads until then and resigns.
        """
        leader = self.leader_state
        if leader is None:
            return NotLeader(leader_id=self.leader_id, leader_epoch=self.epoch)

        def refuse(code: ErrorCode, message: str) -> VoterChangeRefused:
            return VoterChangeRefused(error_code=code, message=message)

        if not self.dynamic:
            return refuse(
                ErrorCode.UNSUPPORTED_VERSION,
                "the voters are fixed by controller.quorum.voters (kraft.version 0); "
                "a quorum formatted with --standalone or --initial-controllers can change them",
            )
        if self.high_watermark <= leader.epoch_start_offset:
            return refuse(
                ErrorCode.REQUEST_TIMED_OUT,
                "the leader has not committed its epoch yet; retry in a moment",
            )
        if self.history.latest_offset >= self.high_watermark:
            return refuse(
                ErrorCode.REQUEST_TIMED_OUT,
                "another voter change is not committed yet; retry once it is",
            )
        current = self.history.latest
        if add is not None:
            if add.id in self._voter_ids:
                return refuse(ErrorCode.DUPLICATE_VOTER, f"node {add.id} is already a voter")
            progress = leader.progress.get(add.id)
            caught_up = (
                progress is not None
                and progress.last_caught_up_ms >= 0
                and self.now_ms - progress.last_caught_up_ms < self.config.fetch_timeout_ms
            )
            if not caught_up:
                return refuse(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"node {add.id} has not caught up with the leader's log; start it as an "
                    "observer (controller.quorum.bootstrap.servers) and retry once it has",
                )
            new = current.adding(add)
        elif remove is not None:
            voter = current.get(remove)
            if voter is None or (directory_id and voter.directory_id != directory_id):
                return refuse(
                    ErrorCode.VOTER_NOT_FOUND,
                    f"node {remove}{' with directory ' + directory_id if directory_id else ''}"
                    f" is not a voter (voters: {sorted(self._voter_ids)})",
                )
            if len(self._voter_ids) == 1:
                return refuse(ErrorCode.INVALID_REQUEST, "the last voter cannot be removed")
            new = current.removing(remove)
        else:
            raise RaftError("a voter change adds or removes a voter")
        offset = self.log.end_offset
        self.append_entry(
            Entry(offset=offset, epoch=self.epoch, payload=new.encode(), kind=EntryKind.VOTERS),
            voters=new,
        )
        if self.linger_at == NEVER:
            self.linger_at = self.now_ms + self.config.append_linger_ms
        handlers.answer_parked(self, force=True)
        handlers.update_high_watermark(self)
        return OffsetRange(epoch=self.epoch, first=offset, last=offset)

    def voters_changed(self) -> None:
        """The voter set in force may have changed (an append, a cut, an install): follow it."""
        ids = self.history.latest.ids
        if ids == self._voter_ids:
            return
        self._voter_ids = ids
        state = self.state
        if isinstance(state, LeaderState):
            state.voters = ids
            return
        if self.catching_up:
            return
        if self.may_stand and isinstance(state, ObserverState):
            leader = self.leader_id
            if leader in (NO_LEADER, self.id):
                self.become_unattached(self.epoch)
                return
            self.set_role(
                FollowerState(
                    fetch_deadline=self.now_ms + self.config.fetch_timeout_ms,
                    fetch=state.fetch,
                    transfer=state.transfer,
                )
            )
            self.fetch_target = leader
            self.persist()
        elif not self.may_stand and not isinstance(state, ObserverState):
            self.become_observer()

    def send_begin(self, voter: int) -> None:
        """(Re)send BeginQuorumEpoch to `voter`."""
        state = self.state
        if not isinstance(state, LeaderState):
            raise RaftError("internal: BeginQuorumEpoch sent while not leading")
        state.begin_sent_ms[voter] = self.now_ms
        self.send(
            voter,
            BeginQuorumEpochRequest(
                correlation_id=self.next_correlation(), leader_id=self.id, leader_epoch=self.epoch
            ),
        )

    def send_fetch(self) -> None:
        """Fetch from the leader (or, not knowing one, from some voter that may know it)."""
        target = self.fetch_target
        if target == NO_LEADER:
            # Not knowing the leader: ask a voter (or, knowing none, a bootstrap server).
            others = sorted(self.voters - {self.id}) or sorted(self.config.voters - {self.id})
            if not others:
                return
            target = self.rng.choice(others)
        correlation = self.next_correlation()
        fetch = FetchInFlight(
            correlation=correlation,
            destination=target,
            offset=self.log.end_offset,
            last_epoch=self.log.last_epoch,
            retry_at=self.now_ms + self.config.request_timeout_ms,
        )
        state = self.state
        if isinstance(state, FollowerState | ObserverState):
            state.fetch = fetch
        self.send(target, self.fetch_request(correlation))

    def install_snapshot(self, snapshot_id: SnapshotId, data: bytes) -> None:
        """Replace the log by a fetched snapshot (the shell does it first in the next Ready)."""
        p = self._pending
        p.install = SnapshotInstall(snapshot_id=snapshot_id, data=data)
        p.append = []
        p.truncate_to = None
        if isinstance(self.state, FollowerState | ObserverState):
            self.state.transfer = None
        self.log.install(snapshot_id)
        if self.dynamic:
            base = snapshot_voters(data)
            self.history.reset(base if base is not None else self.history.latest)
            self.voters_changed()
        self.set_high_watermark(snapshot_id.end_offset)

    # --------------------------------------------------------- helpers (for the handlers)

    def next_correlation(self) -> int:
        """A new correlation id for a request."""
        self._correlation += 1
        return self._correlation

    def send(self, destination: int, message: Message, read_from: int = 0, until: int = 0) -> None:
        """Queue `message` (the shell fills a fetch answer from [read_from, until))."""
        self._pending.messages.append(
            Outgoing(
                destination=destination, message=message, read_from=read_from, read_until=until
            )
        )

    def append_entry(self, entry: Entry, *, voters: VoterSet | None = None) -> None:
        """Queue `entry` for the log and account for it in the view.

        A voters entry comes with the set its body holds (decoded by the caller, which
        refuses a malformed one): it is in force from now on.
        """
        self.log.append(entry.epoch, entry.count)
        self._pending.append.append(entry)
        if entry.kind is EntryKind.VOTERS:
            if voters is None:
                raise RaftError(f"internal: voters entry at {entry.offset} without its set")
            self.history.append(entry.offset, voters)
            self.voters_changed()

    def truncate_log(self, offset: int) -> None:
        """Cut the log at `offset` (never below its start), and what is queued after it."""
        # Entries below the log start are in a snapshot of committed state: never cut.
        offset = max(offset, self.log.start_offset)
        p = self._pending
        first_queued = p.append[0].offset if p.append else self.log.end_offset
        if offset >= first_queued:
            # Only entries queued in this Ready (if any) are cut.
            if any(entry.offset < offset < entry.end_offset for entry in p.append):
                raise RaftError(f"internal: a cut at offset {offset} splits a batch")
            p.append = [entry for entry in p.append if entry.offset < offset]
        else:
            p.append = []
            p.truncate_to = offset if p.truncate_to is None else min(p.truncate_to, offset)
        self.log.truncate(offset)
        self.voters_changed()

    def set_high_watermark(self, value: int) -> None:
        """Raise the high watermark to `value` (it never goes down)."""
        if value > self.high_watermark:
            self.high_watermark = value
            self._hw_change = value
            if (
                not self.may_stand
                and not self.catching_up
                and not isinstance(self.state, ObserverState | LeaderState)
            ):
                # Its own removal is now known committed: it observes from here on.
                self.become_observer()

    def fetch_request(self, correlation: int) -> FetchRequest:
        """A Fetch from this node's log end."""
        return FetchRequest(
            correlation_id=correlation,
            replica_id=self.fetch_replica_id,
            current_leader_epoch=self.epoch,
            fetch_offset=self.log.end_offset,
            last_fetched_epoch=self.log.last_epoch,
            max_wait_ms=self.config.fetch_max_wait_ms,
        )

    # ---------------------------------------------------------------------- own helpers

    def _election_timeout(self) -> int:
        return election_timeout(self.rng, self.config.election_timeout_ms)

    def ask_pre_vote_again(self, voter: int) -> None:
        """Ask `voter` for its pre-vote again after the retry backoff (this round, this epoch)."""
        state = self.state
        if isinstance(state, ProspectiveState):
            state.ask_again[voter] = self.now_ms + self.config.retry_backoff_ms

    def _send_pre_votes(self) -> None:
        self.votes = VoteRound(granted={self.id})
        if isinstance(self.state, ProspectiveState):
            self.state.ask_again.clear()  # a new round asks every voter
        if self.has_majority(self.votes.granted):
            self.become_candidate()
            return
        for voter in sorted(self.voters - {self.id}):
            self._send_vote_request(voter, pre_vote=True)

    def _send_vote_request(self, voter: int, *, pre_vote: bool) -> None:
        correlation = self.next_correlation()
        self.votes.requests.add(correlation)
        self.send(
            voter,
            VoteRequest(
                correlation_id=correlation,
                replica_epoch=self.epoch,
                replica_id=self.id,
                last_offset_epoch=self.log.last_epoch,
                last_offset=self.log.end_offset,
                pre_vote=pre_vote,
            ),
        )

    def _hear(self, sender: int, message: Message) -> None:
        """A voter without durable state learns the epochs the others are in (its vote fence)."""
        if not self.catching_up or sender not in self.voters:
            return
        epoch = message_epoch(message)
        if epoch is not None:
            self.heard[sender] = max(self.heard.get(sender, 0), epoch)

    def _probe(self) -> None:
        self._probe_at = self.now_ms + self.config.request_timeout_ms
        for voter in sorted(self.voters - {self.id} - set(self.heard)):
            if voter != self.fetch_target:
                self.send(voter, self.fetch_request(self.next_correlation()))


def well_formed(message: Message) -> bool:
    """Whether every number of `message` is in its range (`bounds.out_of_range`)."""
    return out_of_range(message) is None


def message_epoch(message: Message) -> int | None:
    """The epoch a message shows its sender is in (None for a message that shows none)."""
    if isinstance(message, VoteRequest):
        return message.replica_epoch
    if isinstance(message, FetchResponse):
        return message.current_leader.leader_epoch
    if isinstance(message, FetchRequest | FetchSnapshotRequest):
        return message.current_leader_epoch
    if isinstance(message, FetchSnapshotResponse):
        return message.current_leader.leader_epoch
    if isinstance(
        message,
        VoteResponse | BeginQuorumEpochRequest | BeginQuorumEpochResponse | EndQuorumEpochRequest,
    ):
        return message.leader_epoch
    return None


__all__ = [
    "NO_HIGH_WATERMARK",
    "Batch",
    "NotLeader",
    "OffsetRange",
    "Outgoing",
    "RaftCore",
    "Ready",
    "ReadyDone",
    "Role",
]
