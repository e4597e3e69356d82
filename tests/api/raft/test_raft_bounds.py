"""No quorum message can stop a core or take its epoch out of range (api/protocol/quorum/bounds.py).

Issue 54: a Vote or BeginQuorumEpoch at epoch 2^31-1 was stored as the node's epoch, and its
next election computed 2^31 and stopped the node, after every restart too. Every number of
every message the core is stepped is swept here over the edges of its type, on a core in
each role: the core never raises, never holds an epoch past 2^31-2, never stores one, and a
message out of range changes nothing. A Vote or BeginQuorumEpoch from a node that is not a
voter changes nothing; neither does one from a voter's id while the node hears a live leader.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterator

import pytest

from api.protocol.quorum.bounds import LAST_EPOCH, out_of_range
from api.protocol.quorum.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    Message,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from api.raft.core import LogView, QuorumConfig, QuorumState, RaftCore, Role
from api.raft.core.errors import QuorumStateError
from api.raft.core.voters import VoterHistory, VoterSet
from tests.support.raft_core import VOTERS, drain, leader, make, respond, sent, vote
from tests.support.raft_states import machine

INT32_EDGES = (-(2**31), -1, 0, 2**31 - 2, 2**31 - 1)
INT64_EDGES = (*INT32_EDGES, 2**63 - 1, -(2**63))
FORGED_EPOCHS = (10**9, 2**31 - 2)
"""Epochs in range that no election reached: a voter's id may still carry them (forged)."""


# ------------------------------------------------------------------------ cores in each role


def _unattached() -> RaftCore:
    core = make(2, epoch=3)
    drain(core)
    return core


def _follower() -> RaftCore:
    core = make(2, epoch=3, leader=1)
    drain(core)
    respond(core, 1, epoch=3)  # it hears its leader: live
    drain(core)
    return core


def _prospective() -> RaftCore:
    core = make(2, epoch=3)
    drain(core)
    core.tick(core.next_deadline_ms())
    drain(core)
    assert core.role is Role.PROSPECTIVE
    return core


def _candidate() -> RaftCore:
    core = make(2, epoch=3)
    drain(core)
    core.tick(core.next_deadline_ms())
    ready = drain(core)
    [request] = [out.message for out in sent(ready, VoteRequest) if out.destination == 1]
    core.step(
        1,
        VoteResponse(
            correlation_id=request.correlation_id,
            error_code=ErrorCode.NONE,
            leader_id=-1,
            leader_epoch=core.epoch,
            vote_granted=True,
        ),
    )
    drain(core)
    assert core.role is Role.CANDIDATE
    return core


def _observer() -> RaftCore:
    core = make(4, epoch=3)
    drain(core)
    assert core.role is Role.OBSERVER
    return core


def _dynamic_voter() -> RaftCore:
    """Node 2 of a KIP-853 quorum {1, 2, 3} (voters in the log), unattached in epoch 3."""
    core = RaftCore(
        QuorumConfig(node_id=2, voters=VOTERS),
        state=QuorumState(leader_epoch=3, voters=VOTERS),
        log=LogView.from_log(
            end_offset=0, epochs=[], voters=VoterHistory(base=VoterSet.of([1, 2, 3]))
        ),
        rng=random.Random(0),
        now_ms=0,
    )
    drain(core)
    assert machine(core).dynamic and core.role is Role.UNATTACHED
    return core


ROLES: dict[str, Callable[[], RaftCore]] = {
    "leader": leader,
    "follower": _follower,
    "unattached": _unattached,
    "prospective": _prospective,
    "candidate": _candidate,
    "observer": _observer,
    "dynamic": _dynamic_voter,
}


# ------------------------------------------------------------------ every field at its edges


def _requests(sender: int, epoch: int) -> Iterator[tuple[int, Message]]:
    """(sender, message): each request field of each type at each edge, the rest plausible."""
    for pre in (False, True):
        base_vote = VoteRequest(
            correlation_id=9,
            replica_epoch=epoch + 1,
            replica_id=sender,
            last_offset_epoch=epoch,
            last_offset=5,
            pre_vote=pre,
        )
        for value in INT32_EDGES:
            yield sender, dataclasses.replace(base_vote, replica_epoch=value)
            yield sender, dataclasses.replace(base_vote, last_offset_epoch=value)
            if value != 0:  # the wire's sender is the replica id it names
                yield value, dataclasses.replace(base_vote, replica_id=value)
        for value in INT64_EDGES:
            yield sender, dataclasses.replace(base_vote, last_offset=value)
    begin = BeginQuorumEpochRequest(correlation_id=9, leader_id=sender, leader_epoch=epoch + 1)
    end = EndQuorumEpochRequest(
        correlation_id=9, leader_id=sender, leader_epoch=epoch + 1, preferred_successors=(2,)
    )
    fetch = FetchRequest(
        correlation_id=9,
        replica_id=sender,
        current_leader_epoch=epoch,
        fetch_offset=0,
        last_fetched_epoch=0,
        max_wait_ms=0,
    )
    chunk = FetchSnapshotRequest(
        correlation_id=9,
        replica_id=sender,
        current_leader_epoch=epoch,
        snapshot_id=SnapshotId(end_offset=1, epoch=1),
        position=0,
        max_bytes=1024,
    )
    for value in INT32_EDGES:
        yield sender, dataclasses.replace(begin, leader_epoch=value)
        yield sender, dataclasses.replace(end, leader_epoch=value)
        yield sender, dataclasses.replace(end, preferred_successors=(value,))
        yield sender, dataclasses.replace(fetch, current_leader_epoch=value)
        yield sender, dataclasses.replace(fetch, last_fetched_epoch=value)
        yield sender, dataclasses.replace(fetch, max_wait_ms=value)
        yield sender, dataclasses.replace(chunk, current_leader_epoch=value)
        yield sender, dataclasses.replace(chunk, snapshot_id=SnapshotId(end_offset=1, epoch=value))
        yield sender, dataclasses.replace(chunk, max_bytes=value)
        if value != 0:
            yield value, dataclasses.replace(begin, leader_id=value)
            yield value, dataclasses.replace(end, leader_id=value)
            yield value, dataclasses.replace(fetch, replica_id=value)
            yield value, dataclasses.replace(chunk, replica_id=value)
    for value in INT64_EDGES:
        yield sender, dataclasses.replace(fetch, fetch_offset=value)
        yield sender, dataclasses.replace(chunk, position=value)
        yield sender, dataclasses.replace(chunk, snapshot_id=SnapshotId(end_offset=value, epoch=1))


def _responses(epoch: int) -> Iterator[Message]:
    """Each answer field of each type at each edge (from node 1, a voter)."""
    for value in INT32_EDGES:
        for granted in (False, True):
            yield VoteResponse(
                correlation_id=1,
                error_code=ErrorCode.NONE,
                leader_id=1,
                leader_epoch=value,
                vote_granted=granted,
            )
            yield VoteResponse(
                correlation_id=1,
                error_code=ErrorCode.NONE,
                leader_id=value,
                leader_epoch=epoch + 1,
                vote_granted=granted,
            )
        for kind in (BeginQuorumEpochResponse, EndQuorumEpochResponse):
            yield kind(correlation_id=1, error_code=ErrorCode.NONE, leader_id=1, leader_epoch=value)
        for leader_id, leader_epoch in ((1, value), (value, epoch + 1)):
            hint = LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)
            yield FetchResponse(
                correlation_id=1, error_code=ErrorCode.NONE, high_watermark=0, current_leader=hint
            )
            yield FetchSnapshotResponse(
                correlation_id=1,
                error_code=ErrorCode.NONE,
                snapshot_id=SnapshotId(end_offset=1, epoch=1),
                current_leader=hint,
                size=10,
                position=0,
            )
        yield FetchResponse(
            correlation_id=1,
            error_code=ErrorCode.NONE,
            high_watermark=0,
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=epoch),
            diverging_epoch=EpochEndOffset(epoch=value, end_offset=0),
        )
    for value in INT64_EDGES:
        yield FetchResponse(
            correlation_id=1,
            error_code=ErrorCode.NONE,
            high_watermark=value,
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=epoch),
        )
        yield FetchSnapshotResponse(
            correlation_id=1,
            error_code=ErrorCode.NONE,
            snapshot_id=SnapshotId(end_offset=value, epoch=1),
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=epoch),
            size=value,
            position=value,
        )


def _election_state(core: RaftCore) -> tuple[int, Role, int, int]:
    return core.epoch, core.role, core.voted_id, core.leader_id


def _run_on(core: RaftCore) -> None:
    """Let the core's timers fire for a while: elections, retries (no answers come)."""
    for _ in range(12):
        core.tick(max(core.next_deadline_ms(), core.now_ms + 1))
        ready = drain(core)
        assert core.epoch <= LAST_EPOCH
        assert ready.quorum_state is None or ready.quorum_state.leader_epoch <= LAST_EPOCH


def _check_step(core: RaftCore, sender: int, message: Message) -> None:
    before = _election_state(core)
    core.step(sender, message)
    ready = drain(core)
    assert core.epoch <= LAST_EPOCH, message
    if ready.quorum_state is not None:
        assert ready.quorum_state.leader_epoch <= LAST_EPOCH, message
    if out_of_range(message) is not None:
        assert _election_state(core) == before, message
        assert ready.quorum_state is None and ready.role is None, message
    _run_on(core)


@pytest.mark.parametrize("role", sorted(ROLES))
def test_no_request_field_at_its_edges_stops_a_core_or_leaves_the_epoch_range(role: str) -> None:
    make_core = ROLES[role]
    probe = make_core()
    for sender, message in _requests(3, probe.epoch):
        _check_step(make_core(), sender, message)


@pytest.mark.parametrize("role", sorted(ROLES))
def test_no_answer_field_at_its_edges_stops_a_core_or_leaves_the_epoch_range(role: str) -> None:
    make_core = ROLES[role]
    probe = make_core()
    for message in _responses(probe.epoch):
        _check_step(make_core(), 1, message)


@pytest.mark.parametrize("role", sorted(ROLES))
@pytest.mark.parametrize("epoch", [*FORGED_EPOCHS, 2**31 - 1])
def test_a_non_voters_vote_or_begin_quorum_epoch_changes_nothing(role: str, epoch: int) -> None:
    for pre in (False, True):
        for message in (
            vote(7, epoch, 0, 0, pre=pre),
            vote(7, epoch, epoch, 2**40, pre=pre),  # a longer log, but 7 is no voter here
            BeginQuorumEpochRequest(correlation_id=9, leader_id=7, leader_epoch=epoch),
            EndQuorumEpochRequest(
                correlation_id=9, leader_id=7, leader_epoch=epoch, preferred_successors=(2,)
            ),
        ):
            core = ROLES[role]()
            before = _election_state(core)
            core.step(7, message)
            ready = drain(core)
            if role == "dynamic" and isinstance(message, VoteRequest) and message.last_offset:
                continue  # KIP-853: a longer log may hold the entry that made 7 a voter
            assert _election_state(core) == before, (role, message)
            assert ready.quorum_state is None, (role, message)
            for out in ready.messages:
                answer = out.message
                if isinstance(answer, VoteResponse):
                    assert not answer.vote_granted
                    assert answer.error_code is ErrorCode.INCONSISTENT_VOTER_SET
                if isinstance(answer, BeginQuorumEpochResponse):
                    assert answer.error_code is ErrorCode.INCONSISTENT_VOTER_SET


@pytest.mark.parametrize("role", ["leader", "follower"])
@pytest.mark.parametrize("epoch", FORGED_EPOCHS)
def test_a_voters_forged_epoch_moves_no_node_that_hears_its_leader(role: str, epoch: int) -> None:
    """Raft's leader stickiness: a newer epoch from a voter's id, while the leader is live."""
    other = 3  # neither the leader (1 for the follower) nor the node itself
    for message in (
        vote(other, epoch, epoch - 1, 2**40),
        BeginQuorumEpochRequest(correlation_id=9, leader_id=other, leader_epoch=epoch),
        EndQuorumEpochRequest(
            correlation_id=9, leader_id=other, leader_epoch=epoch, preferred_successors=(2,)
        ),
    ):
        core = ROLES[role]()
        before = _election_state(core)
        core.step(other, message)
        ready = drain(core)
        assert _election_state(core) == before, message
        assert ready.quorum_state is None
        [out] = ready.messages
        assert out.destination == other
        if isinstance(out.message, VoteResponse):
            assert not out.message.vote_granted
    # Nor a newer epoch in its own leader's name (a forged request may name it too).
    core = ROLES[role]()
    before = _election_state(core)
    core.step(1, BeginQuorumEpochRequest(correlation_id=9, leader_id=1, leader_epoch=epoch))
    ready = drain(core)
    if role == "follower":
        assert _election_state(core) == before and ready.quorum_state is None


def test_a_core_at_the_last_epoch_never_stands_past_it() -> None:
    """An epoch of 2^31-2 reached (it is in range): the node waits, it never computes 2^31-1."""
    core = make(2, epoch=LAST_EPOCH)
    drain(core)
    _run_on(core)
    assert core.epoch == LAST_EPOCH and core.role is not Role.CANDIDATE
    assert not machine(core).may_start_election


def test_a_quorum_state_past_the_last_epoch_cannot_be_made() -> None:
    with pytest.raises(QuorumStateError, match=r"not in 0\.\.2147483646"):
        QuorumState(leader_epoch=2**31 - 1, voters=VOTERS)


def test_a_dynamic_voter_votes_for_an_unknown_candidate_only_with_a_longer_log() -> None:
    """KIP-853: node 4 may be a voter by an entry this node lacks; then its log is longer."""
    core = _dynamic_voter()
    core.step(4, vote(4, 4, 0, 0))  # the same (empty) log: it cannot hold that entry
    refused = drain(core)
    assert core.epoch == 3 and refused.quorum_state is None
    [out] = sent(refused, VoteResponse)
    assert out.message.error_code is ErrorCode.INCONSISTENT_VOTER_SET
    core.step(4, vote(4, 4, 3, 1))
    granted = drain(core)
    [out] = sent(granted, VoteResponse)
    assert out.message.vote_granted and core.epoch == 4 and core.voted_id == 4
    # Elected by this vote, its BeginQuorumEpoch is followed; another non-voter's is not.
    core.step(5, BeginQuorumEpochRequest(correlation_id=9, leader_id=5, leader_epoch=4))
    drain(core)
    assert core.leader_id == -1
    core.step(4, BeginQuorumEpochRequest(correlation_id=9, leader_id=4, leader_epoch=4))
    drain(core)
    assert core.role is Role.FOLLOWER and core.leader_id == 4 and core.epoch == 4
