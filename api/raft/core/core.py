"""The sans-IO consensus core: a pure state machine fed messages, time and proposals.

It owns neither the log nor the transport nor a clock (etcd raft's model). Each call may queue
work; `ready()` hands it over as a `Ready` the shell carries out IN ORDER: write the quorum
state durably, truncate, append, flush, and only then send the messages (a vote or a fetch
acknowledges what was persisted before it). The shell then calls `advance()` with the log's
flushed end offset.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from api.raft.core import handlers, snapshot_fetch
from api.raft.core.config import QuorumConfig
from api.raft.core.election import (
    election_backoff,
    election_timeout,
)
from api.raft.core.errors import RaftError
from api.raft.core.log_view import LogView
from api.raft.core.messages import (
    NO_HIGH_WATERMARK,
    NO_LEADER,
    UNCOUNTED_REPLICA,
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
    LeaderChangeMessage,
    LeaderIdAndEpoch,
    Message,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from api.raft.core.quorum_state import QuorumState
from api.raft.core.ready import NotLeader, OffsetRange, Outgoing, Pending, Ready, ReadyDone
from api.raft.core.replication import LeaderState
from api.raft.core.roles import Role

NEVER = 2**62


class RaftCore:
    """One node of the quorum: `step`, `tick`, `propose`, then `ready` / `advance`."""

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
        self.high_watermark = 0
        """Entries below this are known committed (0 after a restart until told)."""
        self._hw_change: int | None = None
        self.catching_up = state is None and config.is_voter
        self.epoch = state.leader_epoch if state is not None else 0
        self.leader_id = state.leader_id if state is not None else NO_LEADER
        self.voted_id = state.voted_id if state is not None else NO_LEADER
        self.role = Role.UNATTACHED
        self._pending = Pending()
        self._correlation = 0
        self._election_at = NEVER
        self._prevote_at = NEVER
        self._fetch_deadline = NEVER
        self._leader_ended = False
        self._ended = (-1, NO_LEADER)
        """(epoch, leader) of a leader known to have stopped leading: not followed again."""
        self._fetched_ms = -NEVER
        """When the leader last answered a fetch (KIP-996: a live leader refuses pre-votes)."""
        self._linger_at = NEVER
        self._round: set[int] = set()
        self._granted: set[int] = set()
        self._fetch: tuple[int, int, int, int, int] | None = None
        """The outstanding fetch: (correlation id, destination, offset, last epoch, retry at)."""
        self._fetch_target = NO_LEADER
        self._transfer: snapshot_fetch.SnapshotTransfer | None = None
        """A snapshot being copied from the leader (FetchSnapshot), while one is."""
        self.snapshot_transfers = 0
        """How many snapshot transfers this core started (for tests and logs)."""
        self._leader: LeaderState | None = None
        self._heard: dict[int, int] = {}
        self._probe_at = now_ms
        if state is not None and state.voters != config.voters:
            raise RaftError(
                f"the quorum state names voters {sorted(state.voters)}, the config "
                f"{sorted(config.voters)}; they must agree"
            )
        if not config.is_voter or self.catching_up:
            self._set_role(Role.OBSERVER)
            self._send_fetch()
        elif self.leader_id == self.id:
            # A leader that restarted does not lead again in its epoch: it resigned by crashing.
            self._set_role(Role.RESIGNED)
            self._election_at = now_ms + election_timeout(rng, config.election_timeout_ms)
        elif self.leader_id != NO_LEADER:
            self._become_follower(self.epoch, self.leader_id)
        else:
            self._become_unattached(self.epoch)

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
            self._linger_at = NEVER
        return ready

    def advance(self, done: ReadyDone) -> None:
        """The shell did the last `Ready`; its log is flushed up to `done.flushed_offset`."""
        flushed = min(done.flushed_offset, self.log.end_offset)
        if flushed > self.log.flushed_offset:
            self.log.flushed_offset = flushed
            if self._leader is not None:
                self._update_high_watermark()

    def next_deadline_ms(self) -> int:
        """When `tick` next has something to do (the shell may tick more often)."""
        deadlines = [self._election_at, self._prevote_at, self._fetch_deadline, self._linger_at]
        if self._fetch is not None:
            deadlines.append(self._fetch[4])
        if self._transfer is not None:
            deadlines.append(self._transfer.retry_at)
        if self.catching_up:
            deadlines.append(self._probe_at)
        if self._leader is not None:
            deadlines.extend(deadline for _, deadline in self._leader.parked.values())
            deadlines.append(self.now_ms + self.config.fetch_timeout_ms // 4)
            deadlines.extend(
                sent + self.config.request_timeout_ms
                for sent in self._leader.begin_sent_ms.values()
            )
        return min(deadlines)

    def propose(self, payloads: Sequence[bytes]) -> OffsetRange | NotLeader:
        """Append `payloads` as entries of this leader's epoch, or refuse if not the leader."""
        if self.role is not Role.LEADER:
            return NotLeader(leader_id=self.leader_id, leader_epoch=self.epoch)
        if not payloads:
            raise RaftError("a proposal needs at least one entry")
        first = self.log.end_offset
        for payload in payloads:
            self._append(Entry(offset=self.log.end_offset, epoch=self.epoch, payload=payload))
        if self._linger_at == NEVER:
            self._linger_at = self.now_ms + self.config.append_linger_ms
        self._answer_parked(force=True)
        return OffsetRange(epoch=self.epoch, first=first, last=self.log.end_offset - 1)

    def resign(self) -> None:
        """Graceful leader change: stop leading and name the successors (EndQuorumEpoch)."""
        if self.role is Role.LEADER:
            self._resign()

    def tick(self, now_ms: int) -> None:
        """Let time pass to `now_ms` (never backwards) and fire the timers that expired."""
        self.now_ms = max(self.now_ms, now_ms)
        now = self.now_ms
        if now >= self._linger_at:
            self._pending.flush = True
        if self.role is Role.LEADER and self._leader is not None:
            self._tick_leader(now)
            return
        if self._fetch is not None and now >= self._fetch[4]:
            if self.role is Role.OBSERVER:
                # No answer (or no leader there): ask another voter who leads.
                self.leader_id = NO_LEADER
                self._fetch_target = NO_LEADER
            self._send_fetch()
        snapshot_fetch.tick_transfer(self, now)
        if self.catching_up and now >= self._probe_at:
            self._probe()
        if now >= self._fetch_deadline:
            self._fetch_deadline = NEVER
            if self.role is Role.FOLLOWER:
                self._become_prospective(backoff=False)
            elif self.role is Role.OBSERVER:
                self.leader_id = NO_LEADER
                self._fetch_target = NO_LEADER
                self._send_fetch()
        if now >= self._election_at:
            self._election_at = NEVER
            if self.role in (Role.UNATTACHED, Role.RESIGNED, Role.PROSPECTIVE):
                self._become_prospective(backoff=False)
            elif self.role is Role.CANDIDATE:
                self._become_prospective(backoff=True)
        if now >= self._prevote_at:
            self._prevote_at = NEVER
            self._send_pre_votes()

    def step(self, sender: int, message: Message) -> None:
        """Handle one message from `sender`."""
        if not _well_formed(message):
            return
        self._hear(sender, message)
        if isinstance(message, VoteRequest):
            self._on_vote_request(sender, message)
        elif isinstance(message, VoteResponse):
            self._on_vote_response(sender, message)
        elif isinstance(message, BeginQuorumEpochRequest):
            self._on_begin_quorum_epoch(sender, message)
        elif isinstance(message, EndQuorumEpochRequest):
            self._on_end_quorum_epoch(sender, message)
        elif isinstance(message, FetchRequest):
            self._on_fetch_request(sender, message)
        elif isinstance(message, FetchResponse):
            self._on_fetch_response(sender, message)
        elif isinstance(message, FetchSnapshotRequest):
            snapshot_fetch.on_fetch_snapshot_request(self, sender, message)
        elif isinstance(message, FetchSnapshotResponse):
            snapshot_fetch.on_fetch_snapshot_response(self, sender, message)
        elif isinstance(message, BeginQuorumEpochResponse):
            if self._leader is not None and message.leader_epoch == self.epoch:
                self._leader.begin_sent_ms.pop(sender, None)
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
        return self._leader

    # ---------------------------------------------------------------------- transitions

    def _set_role(self, role: Role) -> None:
        if role is not self.role or role is Role.OBSERVER:
            self._pending.role_changed = True
        self.role = role
        self._election_at = self._prevote_at = self._fetch_deadline = NEVER
        self._fetch = None
        self._transfer = None
        self._leader = None
        self._leader_ended = False

    def _persist(self) -> None:
        if self.catching_up or not self.config.is_voter:
            return
        self._pending.quorum_state = QuorumState(
            leader_epoch=self.epoch,
            leader_id=self.leader_id,
            voted_id=self.voted_id,
            voters=self.config.voters,
        )

    def _new_epoch(self, epoch: int) -> None:
        if epoch > self.epoch:
            self.epoch = epoch
            self.voted_id = NO_LEADER
            self.leader_id = NO_LEADER

    def _become_unattached(self, epoch: int) -> None:
        if self.catching_up or not self.config.is_voter:
            self._new_epoch(epoch)
            return
        self._new_epoch(epoch)
        self._set_role(Role.UNATTACHED)
        self._election_at = self.now_ms + election_timeout(
            self.rng, self.config.election_timeout_ms
        )
        self._persist()

    def _become_follower(self, epoch: int, leader: int) -> None:
        self._new_epoch(epoch)
        self.leader_id = leader
        if self.catching_up or not self.config.is_voter:
            if self._fetch_target != leader:
                self._fetch_target = leader
                self._transfer = None
                self._send_fetch()
            return
        self._set_role(Role.FOLLOWER)
        self._fetch_target = leader
        self._fetch_deadline = self.now_ms + self.config.fetch_timeout_ms
        self._persist()
        self._send_fetch()

    def _become_prospective(self, *, backoff: bool) -> None:
        leader = self.leader_id if self.role is Role.FOLLOWER else NO_LEADER
        self._set_role(Role.PROSPECTIVE)
        self.leader_id = leader
        self._election_at = self.now_ms + election_timeout(
            self.rng, self.config.election_timeout_ms
        )
        if backoff:
            delay = election_backoff(self.rng, self.config.election_backoff_max_ms)
            self._prevote_at = self.now_ms + delay
            self._election_at += delay
        else:
            self._send_pre_votes()

    def _send_pre_votes(self) -> None:
        self._round = set()
        self._granted = {self.id}
        if len(self._granted) >= self.config.majority:
            self._become_candidate()
            return
        for voter in sorted(self.config.voters - {self.id}):
            self._send_vote_request(voter, pre_vote=True)

    def _become_candidate(self) -> None:
        self.epoch += 1
        self.voted_id = self.id
        self.leader_id = NO_LEADER
        self._set_role(Role.CANDIDATE)
        self._persist()
        self._election_at = self.now_ms + election_timeout(
            self.rng, self.config.election_timeout_ms
        )
        self._round = set()
        self._granted = {self.id}
        if len(self._granted) >= self.config.majority:
            self._become_leader()
            return
        for voter in sorted(self.config.voters - {self.id}):
            self._send_vote_request(voter, pre_vote=False)

    def _send_vote_request(self, voter: int, *, pre_vote: bool) -> None:
        correlation = self._next_correlation()
        self._round.add(correlation)
        self._send(
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

    def _become_leader(self) -> None:
        granting = tuple(sorted(self._granted))
        self.leader_id = self.id
        self._set_role(Role.LEADER)
        self._persist()
        leader = LeaderState(
            epoch_start_offset=self.log.end_offset,
            started_ms=self.now_ms,
            voters=self.config.voters,
        )
        self._leader = leader
        marker = LeaderChangeMessage(
            leader_id=self.id, voters=tuple(sorted(self.config.voters)), granting_voters=granting
        )
        self._append(
            Entry(
                offset=self.log.end_offset, epoch=self.epoch, payload=marker.encode(), control=True
            )
        )
        self._pending.flush = True
        for voter in sorted(self.config.voters - {self.id}):
            self._send_begin(voter)
        self._update_high_watermark()

    def _send_begin(self, voter: int) -> None:
        assert self._leader is not None  # only called while leading
        self._leader.begin_sent_ms[voter] = self.now_ms
        self._send(
            voter,
            BeginQuorumEpochRequest(
                correlation_id=self._next_correlation(), leader_id=self.id, leader_epoch=self.epoch
            ),
        )

    def _resign(self) -> None:
        leader = self._leader
        successors = leader.successors(self.id) if leader is not None else ()
        self._set_role(Role.RESIGNED)
        self._election_at = self.now_ms + election_timeout(
            self.rng, self.config.election_timeout_ms
        )
        for voter in successors:
            self._send(
                voter,
                EndQuorumEpochRequest(
                    correlation_id=self._next_correlation(),
                    leader_id=self.id,
                    leader_epoch=self.epoch,
                    preferred_successors=successors,
                ),
            )

    # --------------------------------------------------------------------------- helpers

    def _next_correlation(self) -> int:
        self._correlation += 1
        return self._correlation

    def _send(self, destination: int, message: Message, read_from: int = 0, until: int = 0) -> None:
        self._pending.messages.append(
            Outgoing(
                destination=destination, message=message, read_from=read_from, read_until=until
            )
        )

    def _append(self, entry: Entry) -> None:
        self.log.append(entry.epoch, 1)
        self._pending.append.append(entry)

    def _truncate(self, offset: int) -> None:
        # Entries below the log start are in a snapshot of committed state: never cut.
        offset = max(offset, self.log.start_offset)
        p = self._pending
        first_queued = p.append[0].offset if p.append else self.log.end_offset
        if offset >= first_queued:
            # Only entries queued in this Ready (if any) are cut.
            p.append = [entry for entry in p.append if entry.offset < offset]
        else:
            p.append = []
            p.truncate_to = offset if p.truncate_to is None else min(p.truncate_to, offset)
        self.log.truncate(offset)

    def _set_high_watermark(self, value: int) -> None:
        if value > self.high_watermark:
            self.high_watermark = value
            self._hw_change = value

    def _hear(self, sender: int, message: Message) -> None:
        """A voter without durable state learns the epochs the others are in (its vote fence)."""
        if not self.catching_up or sender not in self.config.voters:
            return
        epoch = _message_epoch(message)
        if epoch is not None:
            self._heard[sender] = max(self._heard.get(sender, 0), epoch)

    def _probe(self) -> None:
        self._probe_at = self.now_ms + self.config.request_timeout_ms
        for voter in sorted(self.config.voters - {self.id} - set(self._heard)):
            if voter != self._fetch_target:
                self._send(voter, self._fetch_request(self._next_correlation()))

    @property
    def fetch_replica_id(self) -> int:
        """The replica id this node fetches with: none that counts while it has no state."""
        return UNCOUNTED_REPLICA if self.catching_up else self.id

    def _fetch_request(self, correlation: int) -> FetchRequest:
        return FetchRequest(
            correlation_id=correlation,
            replica_id=self.fetch_replica_id,
            current_leader_epoch=self.epoch,
            fetch_offset=self.log.end_offset,
            last_fetched_epoch=self.log.last_epoch,
            max_wait_ms=self.config.fetch_max_wait_ms,
        )

    # The message handlers live in handlers.py (one job per module); these forward to them.

    def _on_vote_request(self, sender: int, message: VoteRequest) -> None:
        handlers.on_vote_request(self, sender, message)

    def _on_vote_response(self, sender: int, message: VoteResponse) -> None:
        handlers.on_vote_response(self, sender, message)

    def _on_begin_quorum_epoch(self, sender: int, message: BeginQuorumEpochRequest) -> None:
        handlers.on_begin_quorum_epoch(self, sender, message)

    def _on_end_quorum_epoch(self, sender: int, message: EndQuorumEpochRequest) -> None:
        handlers.on_end_quorum_epoch(self, sender, message)

    def _on_fetch_request(self, sender: int, message: FetchRequest) -> None:
        handlers.on_fetch_request(self, sender, message)

    def _on_fetch_response(self, sender: int, message: FetchResponse) -> None:
        handlers.on_fetch_response(self, sender, message)

    def _tick_leader(self, now: int) -> None:
        handlers.tick_leader(self, now)

    def _send_fetch(self) -> None:
        handlers.send_fetch(self)

    def _update_high_watermark(self) -> None:
        handlers.update_high_watermark(self)

    def _answer_parked(self, *, force: bool) -> None:
        handlers.answer_parked(self, force=force)


def _well_formed(message: Message) -> bool:
    """Messages with negative offsets or epochs are garbage and are dropped."""
    numbers = [
        getattr(message, name)
        for name in (
            "replica_epoch",
            "last_offset_epoch",
            "last_offset",
            "leader_epoch",
            "current_leader_epoch",
            "fetch_offset",
            "last_fetched_epoch",
            "position",
            "size",
        )
        if hasattr(message, name)
    ]
    snapshot = getattr(message, "snapshot_id", None)
    if snapshot is not None:
        numbers += [snapshot.end_offset, snapshot.epoch]
    return all(isinstance(n, int) and 0 <= n < 2**63 for n in numbers)


def _message_epoch(message: Message) -> int | None:
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
    "NotLeader",
    "OffsetRange",
    "Outgoing",
    "RaftCore",
    "Ready",
    "ReadyDone",
    "Role",
]
