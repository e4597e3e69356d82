"""The consensus machine: one node's state and the transitions the message rules use.

The internal half of the core, as etcd's unexported `raft` struct is under its `RawNode`:
`RaftCore` (core.py) is the shell's facade over it, and the rules that drive it take it as
their argument: how it answers each message (handlers.py, snapshot_fetch.py, dispatch.py),
how it stands for election (election.py), what it does as leader (leading.py), its timers
(timers.py) and the shell's proposals (proposals.py). It holds the state of its current role
(`states.py`) and what outlives a role (epoch, vote, leader, voters, high watermark), and
queues the work of every transition as `Pending` until the facade hands it over as a `Ready`.
"""

from __future__ import annotations

import random

from api.protocol.quorum.bounds import LAST_EPOCH
from api.protocol.quorum.messages import (
    NO_LEADER,
    UNCOUNTED_REPLICA,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    Entry,
    EntryKind,
    FetchRequest,
    LeaderIdAndEpoch,
    Message,
    SnapshotId,
)
from api.raft.core import leading
from api.raft.core.config import QuorumConfig
from api.raft.core.election import election_timeout
from api.raft.core.errors import RaftError
from api.raft.core.log_view import LogView
from api.raft.core.quorum_state import QuorumState
from api.raft.core.ready import (
    NOTHING_READY,
    Outgoing,
    Pending,
    Ready,
    ReadyDone,
    SnapshotInstall,
)
from api.raft.core.replication import LeaderState
from api.raft.core.roles import Role
from api.raft.core.states import (
    NEVER,
    FetchInFlight,
    FollowerState,
    ObserverState,
    ResignedState,
    RoleState,
    UnattachedState,
    VoteRound,
)
from api.raft.core.voters import VoterHistory, VoterSet, snapshot_voters


class RaftMachine:
    """One node of the quorum: its state, and the transitions every rule of the core uses."""

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
        if log.voters is None:
            log.voters = VoterHistory(base=VoterSet.of(config.voters), dynamic=False)
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
        """How many snapshot transfers this node started (for metrics, tests and logs)."""
        self.heard: dict[int, int] = {}
        """A voter without durable state: the newest epoch heard from each other voter."""
        # When a node catching up next asks the voters it has not heard from (timers.py).
        self.probe_at = now_ms
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
            self.set_role(ResignedState(election_at=self.election_deadline()))
        elif self.leader_id != NO_LEADER:
            self.become_follower(self.epoch, self.leader_id)
        else:
            self.become_unattached(self.epoch)

    @property
    def role(self) -> Role:
        """The node's role now."""
        return self.state.role

    @property
    def dynamic(self) -> bool:
        """Whether the voters are in the log (KIP-853), not fixed by the config.

        A static quorum's node becomes dynamic when its log takes a voters entry (the
        kraft.version upgrade's), and static again if a truncation cuts that entry.
        """
        return self.history.in_log

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

    @property
    def may_start_election(self) -> bool:
        """Whether an election into the next epoch is possible: it must not pass `LAST_EPOCH`.

        The door refuses every message past it, so only 2^31 elections reach it; a node
        there waits for a leader rather than compute an epoch it could never store.
        """
        return self.epoch < LAST_EPOCH

    # ------------------------------------------------------------------------ the hand-over

    def ready(self) -> Ready:
        """Hand over the queued work (and forget it)."""
        p = self._pending
        if self.role is not Role.LEADER and self.log.flushed_offset < self.log.end_offset:
            # Followers and observers acknowledge by fetching: what they append is flushed
            # before their next Fetch leaves.
            p.flush = True
        elif self._hw_change is None and p.empty:
            return NOTHING_READY  # the shell's loop asks after every event; most find nothing
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
                leading.update_high_watermark(self)

    def queue_flush(self) -> None:
        """Have the shell flush its log in the next `Ready`."""
        self._pending.flush = True

    def start_linger(self) -> None:
        """A leader appended: flush once the append linger is over (unless a flush is due)."""
        if self.linger_at == NEVER:
            self.linger_at = self.now_ms + self.config.append_linger_ms

    # ---------------------------------------------------------------------- transitions

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
        self.set_role(UnattachedState(election_at=self.election_deadline()))
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

    def resign(self) -> None:
        """Graceful leader change: stop leading and name the successors (EndQuorumEpoch)."""
        state = self.state
        if not isinstance(state, LeaderState):
            return
        successors = state.successors(self.id)
        if self.may_stand:
            self.set_role(ResignedState(election_at=self.election_deadline()))
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
        base = snapshot_voters(data)
        if base is not None or self.dynamic:
            # A snapshot of a dynamic quorum names its voters; a static one's names none.
            self.history.reset(base if base is not None else self.history.latest)
            self.voters_changed()
        self.set_high_watermark(snapshot_id.end_offset)

    # -------------------------------------------------------------------------- helpers

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

    def election_deadline(self) -> int:
        """When a randomized election timeout started now runs out."""
        return self.now_ms + election_timeout(self.rng, self.config.election_timeout_ms)
