"""Elections: the rules (whose log is up to date, vote decisions, backoffs) and the standing.

The rules are pure functions. The transitions that stand a node take the machine
(machine.py): a pre-vote round (KIP-996) first, then candidacy in the next epoch, then the lead
(its LeaderChange marker, BeginQuorumEpoch to every voter). How a voter answers a Vote is in
handlers.py, when the election timer fires in timers.py.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from api.protocol.quorum.messages import (
    NO_LEADER,
    Entry,
    EntryKind,
    LeaderChangeMessage,
    VoteRequest,
)
from api.raft.core import leading
from api.raft.core.replication import LeaderState
from api.raft.core.roles import Role
from api.raft.core.states import CandidateState, ProspectiveState, UnattachedState, VoteRound

if TYPE_CHECKING:
    from api.raft.core.machine import RaftMachine


def log_at_least_as_up_to_date(
    *, last_epoch: int, end_offset: int, than_epoch: int, than_end_offset: int
) -> bool:
    """KIP-595's rule: compare the last epoch, then the end offset."""
    return (last_epoch, end_offset) >= (than_epoch, than_end_offset)


def may_grant_vote(
    *,
    candidate: int,
    voted_id: int,
    leader_id: int,
    is_leader: bool,
    log_ok: bool,
    catching_up: bool,
) -> bool:
    """Whether a voter already in the candidate's epoch grants it a (real) vote.

    One vote per epoch: only if it has not voted for someone else and knows no leader of the
    epoch. A voter without durable election state (wiped, catching up) never votes.
    """
    if catching_up or is_leader or not log_ok:
        return False
    if leader_id != NO_LEADER:
        return False
    return voted_id in (NO_LEADER, candidate)


def may_grant_pre_vote(*, has_live_leader: bool, log_ok: bool, catching_up: bool) -> bool:
    """KIP-996: a pre-vote is granted only when the voter is not hearing from a leader."""
    return not catching_up and not has_live_leader and log_ok


def election_timeout(rng: random.Random, timeout_ms: int) -> int:
    """A randomized election timeout in [t, 2t)."""
    return timeout_ms + rng.randrange(timeout_ms)


def election_backoff(rng: random.Random, backoff_max_ms: int) -> int:
    """The wait after a lost election before the next pre-vote round, in [0, max)."""
    return rng.randrange(backoff_max_ms)


def successor_backoff(position: int, backoff_max_ms: int) -> int:
    """How long a preferred successor waits before standing (Kafka's strict exponential rule).

    The first successor stands at once; the next ones later, so the most caught-up voter
    usually wins the graceful leader change without a split vote.
    """
    if position <= 0:
        return 0
    return min(backoff_max_ms, 50 << min(position - 1, 20))


# ----------------------------------------------------------------------------- standing


def become_prospective(machine: RaftMachine, *, backoff: bool) -> None:
    """KIP-996: ask for pre-votes (after a backoff when an election was just lost)."""
    if not machine.may_start_election:
        machine.set_role(UnattachedState())
        return
    leader = machine.leader_id if machine.role is Role.FOLLOWER else NO_LEADER
    state = ProspectiveState(election_at=machine.election_deadline())
    machine.set_role(state)
    machine.leader_id = leader
    if backoff:
        delay = election_backoff(machine.rng, machine.config.election_backoff_max_ms)
        state.prevote_at = machine.now_ms + delay
        state.election_at += delay
    else:
        send_pre_votes(machine)


def send_pre_votes(machine: RaftMachine) -> None:
    """Start a pre-vote round: ask every other voter (a sole voter stands at once)."""
    machine.votes = VoteRound(granted={machine.id})
    if isinstance(machine.state, ProspectiveState):
        machine.state.ask_again.clear()  # a new round asks every voter
    if machine.has_majority(machine.votes.granted):
        become_candidate(machine)
        return
    for voter in sorted(machine.voters - {machine.id}):
        send_vote_request(machine, voter, pre_vote=True)


def ask_pre_vote_again(machine: RaftMachine, voter: int) -> None:
    """Ask `voter` for its pre-vote again after the retry backoff (this round, this epoch)."""
    state = machine.state
    if isinstance(state, ProspectiveState):
        state.ask_again[voter] = machine.now_ms + machine.config.retry_backoff_ms


def send_vote_request(machine: RaftMachine, voter: int, *, pre_vote: bool) -> None:
    """Ask `voter` for its (pre-)vote in this round."""
    correlation = machine.next_correlation()
    machine.votes.requests.add(correlation)
    machine.send(
        voter,
        VoteRequest(
            correlation_id=correlation,
            replica_epoch=machine.epoch,
            replica_id=machine.id,
            last_offset_epoch=machine.log.last_epoch,
            last_offset=machine.log.end_offset,
            pre_vote=pre_vote,
        ),
    )


def become_candidate(machine: RaftMachine) -> None:
    """Stand in the next epoch, voting for itself; lead at once if that is a majority."""
    if not machine.may_start_election:
        machine.set_role(UnattachedState())
        return
    machine.epoch += 1
    machine.voted_id = machine.id
    machine.leader_id = NO_LEADER
    state = CandidateState()
    machine.set_role(state)
    machine.persist()
    state.election_at = machine.election_deadline()
    machine.votes = VoteRound(granted={machine.id})
    if machine.has_majority(machine.votes.granted):
        become_leader(machine)
        return
    for voter in sorted(machine.voters - {machine.id}):
        send_vote_request(machine, voter, pre_vote=False)


def become_leader(machine: RaftMachine) -> None:
    """Lead this epoch: append the LeaderChange marker and tell the voters."""
    granting = tuple(sorted(machine.votes.granted))
    machine.leader_id = machine.id
    leader = LeaderState(
        epoch_start_offset=machine.log.end_offset,
        started_ms=machine.now_ms,
        voters=machine.voters,
    )
    machine.set_role(leader)
    machine.persist()
    marker = LeaderChangeMessage(
        leader_id=machine.id, voters=tuple(sorted(machine.voters)), granting_voters=granting
    )
    machine.append_entry(
        Entry(
            offset=machine.log.end_offset,
            epoch=machine.epoch,
            payload=marker.encode(),
            kind=EntryKind.LEADER_CHANGE,
        )
    )
    machine.queue_flush()
    for voter in sorted(machine.voters - {machine.id}):
        machine.send_begin(voter)
    leading.update_high_watermark(machine)
