"""The core's timers: what `tick` fires as time passes, and when it next has to.

Each role's timers live in its state (states.py): the election timer, the prospective's
pre-vote backoff and its retries, the follower's fetch deadline, the outstanding fetch and
snapshot transfer. Besides those, the leader's append linger (a flush), its own timers
(leading.py: check-quorum, parked fetches, BeginQuorumEpoch retries), and the probe of a
node without durable state that asks the voters it has not heard from for their epochs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.protocol.quorum.messages import NO_LEADER
from api.raft.core import leading, snapshot_fetch
from api.raft.core.election import become_prospective, send_pre_votes, send_vote_request
from api.raft.core.replication import LeaderState
from api.raft.core.roles import Role
from api.raft.core.states import (
    NEVER,
    CandidateState,
    ElectionTimed,
    FollowerState,
    ObserverState,
    ProspectiveState,
)

if TYPE_CHECKING:
    from api.raft.core.machine import RaftMachine


def tick(machine: RaftMachine, now_ms: int) -> None:
    """Let time pass to `now_ms` (never backwards) and fire the timers that expired."""
    machine.now_ms = max(machine.now_ms, now_ms)
    now = machine.now_ms
    if now >= machine.linger_at:
        machine.queue_flush()
    if isinstance(machine.state, LeaderState):
        leading.tick_leader(machine, now)
        return
    state = machine.state
    fetch = state.fetch if isinstance(state, FollowerState | ObserverState) else None
    if fetch is not None and now >= fetch.retry_at:
        if machine.role is Role.OBSERVER:
            # No answer (or no leader there): ask another voter who leads.
            machine.leader_id = NO_LEADER
            machine.fetch_target = NO_LEADER
        machine.send_fetch()
    snapshot_fetch.tick_transfer(machine, now)
    if machine.catching_up and now >= machine.probe_at:
        _probe(machine)
    state = machine.state
    if isinstance(state, FollowerState) and now >= state.fetch_deadline:
        state.fetch_deadline = NEVER
        become_prospective(machine, backoff=False)
    state = machine.state
    if isinstance(state, ElectionTimed) and now >= state.election_at:
        state.election_at = NEVER
        become_prospective(machine, backoff=isinstance(state, CandidateState))
    state = machine.state
    if isinstance(state, ProspectiveState) and now >= state.prevote_at:
        state.prevote_at = NEVER
        send_pre_votes(machine)
    state = machine.state
    if isinstance(state, ProspectiveState) and state.ask_again:
        for voter, at in sorted(state.ask_again.items()):
            if now >= at:
                del state.ask_again[voter]
                send_vote_request(machine, voter, pre_vote=True)


def next_deadline_ms(machine: RaftMachine) -> int:
    """When `tick` next has something to do (the shell may tick more often)."""
    deadlines = [machine.linger_at]
    state = machine.state
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
    if machine.catching_up:
        deadlines.append(machine.probe_at)
    if isinstance(state, LeaderState):
        deadlines.extend(deadline for _, deadline in state.parked.values())
        deadlines.append(machine.now_ms + machine.config.fetch_timeout_ms // 4)
        deadlines.extend(
            sent + machine.config.request_timeout_ms for sent in state.begin_sent_ms.values()
        )
    return min(deadlines)


def _probe(machine: RaftMachine) -> None:
    """Ask each voter not heard from yet for its epoch (a fetch it answers with its own)."""
    machine.probe_at = machine.now_ms + machine.config.request_timeout_ms
    for voter in sorted(machine.voters - {machine.id} - set(machine.heard)):
        if voter != machine.fetch_target:
            machine.send(voter, machine.fetch_request(machine.next_correlation()))
