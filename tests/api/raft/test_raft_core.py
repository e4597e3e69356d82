"""One rule at a time: the core fed by hand, its `Ready` inspected."""

from __future__ import annotations

import pytest

from api.protocol.quorum.messages import (
    NO_HIGH_WATERMARK,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    EntryKind,
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    VoteRequest,
)
from api.raft.core import (
    LogView,
    NotLeader,
    OffsetRange,
    QuorumState,
    ReadyDone,
    Role,
)
from api.raft.core.errors import RaftError
from api.raft.core.ready import Batch
from api.raft.core.replication import diverging_epoch, truncation_offset
from tests.support.raft_core import (
    VOTERS,
    answer,
    drain,
    elect,
    fetch,
    make,
    role,
    sent,
    vote,
)
from tests.support.raft_states import machine

# --- votes ----------------------------------------------------------------------------------


def test_a_vote_is_refused_to_a_less_up_to_date_log() -> None:
    core = make(2, epoch=2, epochs=[(1, 0), (2, 3)], end=5)
    drain(core)
    core.step(1, vote(1, 3, 1, 10))  # longer log, but older last epoch
    ready = drain(core)
    assert not answer(ready).vote_granted
    assert ready.quorum_state is not None and ready.quorum_state.leader_epoch == 3
    assert ready.quorum_state.voted_id == -1
    core.step(3, vote(3, 3, 2, 4))  # same epoch, shorter
    assert not answer(drain(core)).vote_granted
    core.step(3, vote(3, 3, 2, 5))
    assert answer(drain(core)).vote_granted


def test_one_vote_per_epoch_is_persisted_before_the_answer_and_survives_a_restart() -> None:
    core = make(3, epoch=1)
    drain(core)
    core.step(1, vote(1, 2, 0, 0))
    ready = drain(core)
    # The shell writes quorum_state before it sends: the grant and its record are one Ready.
    assert ready.quorum_state == QuorumState(leader_epoch=2, voted_id=1, voters=VOTERS)
    assert answer(ready).vote_granted
    core.step(2, vote(2, 2, 0, 0))
    assert not answer(drain(core)).vote_granted
    core.step(1, vote(1, 2, 0, 0))  # a retried request gets the same answer
    assert answer(drain(core)).vote_granted
    restarted = make(3, epoch=2, voted=1)
    drain(restarted)
    restarted.step(2, vote(2, 2, 0, 0))
    assert not answer(drain(restarted)).vote_granted


def test_a_stale_epoch_vote_is_refused_and_tells_the_current_epoch() -> None:
    core = make(2, epoch=5)
    drain(core)
    core.step(1, vote(1, 4, 0, 0))
    response = answer(drain(core))
    assert not response.vote_granted and response.leader_epoch == 5


def test_pre_vote_does_not_disturb_a_live_leader() -> None:
    follower = make(2, epoch=3, leader=1, epochs=[(3, 0)], end=1)
    ready = drain(follower)
    [out] = sent(ready, FetchRequest)
    follower.step(
        1,
        FetchResponse(
            correlation_id=out.message.correlation_id,
            error_code=ErrorCode.NONE,
            high_watermark=1,
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=3),
        ),
    )
    drain(follower)
    follower.step(3, vote(3, 3, 3, 1, pre=True))
    ready = drain(follower)
    assert not answer(ready).vote_granted
    assert ready.quorum_state is None and follower.epoch == 3 and follower.role is Role.FOLLOWER
    # Once the leader has been silent for the fetch timeout, the same pre-vote is granted
    # (and still changes nothing).
    follower.tick(machine(follower).config.fetch_timeout_ms - 1)
    drain(follower)
    other = make(3, epoch=3, leader=1, epochs=[(3, 0)], end=1)
    drain(other)
    other.tick(machine(other).config.fetch_timeout_ms + 1)
    drain(other)
    other.step(2, vote(2, 3, 3, 1, pre=True))
    ready = drain(other)
    assert answer(ready).vote_granted and other.epoch == 3 and ready.quorum_state is None


def test_the_leader_refuses_pre_votes() -> None:
    core = make(1)
    elect(core)
    drain(core)
    core.step(3, vote(3, core.epoch, 9, 99, pre=True))
    assert not answer(drain(core)).vote_granted
    assert core.role is Role.LEADER


def test_votes_from_non_voters_and_garbage_are_refused_or_dropped() -> None:
    core = make(2)
    drain(core)
    core.step(7, vote(7, 1, 0, 0))
    response = answer(drain(core))
    assert response.error_code is ErrorCode.INCONSISTENT_VOTER_SET and not response.vote_granted
    for bad in (vote(1, -1, 0, 0), vote(1, 1, -5, 0), vote(1, 1, 0, -1), vote(1, 2**63, 0, 0)):
        core.step(1, bad)
        assert drain(core).empty
    core.step(3, vote(1, 1, 0, 0))  # replica_id does not match the sender
    assert drain(core).empty


def test_a_voter_without_durable_state_never_votes_until_caught_up() -> None:
    core = make(2, state=False)
    assert core.role is Role.OBSERVER and machine(core).catching_up
    drain(core)
    core.step(1, vote(1, 1, 0, 0))
    ready = drain(core)
    assert not answer(ready).vote_granted and ready.quorum_state is None
    core.tick(10 * machine(core).config.election_timeout_ms)
    assert not sent(drain(core), VoteRequest)


# --- leading ---------------------------------------------------------------------------------


def test_a_new_leader_appends_its_marker_and_announces_itself() -> None:
    core = make(1)
    elect(core)
    ready = drain(core)
    assert ready.quorum_state is not None and ready.quorum_state.leader_id == 1
    [marker] = ready.append
    assert marker.kind is EntryKind.LEADER_CHANGE
    assert marker.epoch == core.epoch and marker.offset == 0
    assert {out.destination for out in sent(ready, BeginQuorumEpochRequest)} == {2, 3}


def test_the_high_watermark_counts_only_past_the_leaders_epoch_start() -> None:
    core = make(1, epoch=1, epochs=[(1, 0)], end=5)
    elect(core)  # epoch 2, marker at offset 5
    drain(core)
    core.step(2, fetch(2, core.epoch, 5, 1))  # node 2 has the old entries only
    ready = drain(core)
    assert core.high_watermark == 0 and ready.high_watermark is None
    [out] = sent(ready, FetchResponse)
    assert out.message.high_watermark == NO_HIGH_WATERMARK
    core.step(2, fetch(2, core.epoch, 6, core.epoch, correlation=2))
    ready = drain(core)
    assert ready.high_watermark == 6 and core.high_watermark == 6


def test_the_high_watermark_counts_the_leaders_flushed_offset_only() -> None:
    core = make(1)
    elect(core)
    drain(core)
    core.step(2, fetch(2, core.epoch, 1, core.epoch))
    drain(core)
    assert core.high_watermark == 1
    answer_range = core.propose([Batch(payload=b"a"), Batch(payload=b"b")])
    assert answer_range == OffsetRange(epoch=core.epoch, first=1, last=2)
    core.ready()
    core.advance(ReadyDone(flushed_offset=1))  # the leader has not flushed them yet
    core.step(2, fetch(2, core.epoch, 3, core.epoch, correlation=2))
    core.ready()
    core.advance(ReadyDone(flushed_offset=1))
    assert core.high_watermark == 1
    core.advance(ReadyDone(flushed_offset=3))
    assert core.high_watermark == 3


def test_a_diverging_fetch_gets_the_epoch_and_end_to_truncate_to() -> None:
    leader = LogView.from_log(end_offset=8, epochs=[(1, 0), (3, 5)])
    assert diverging_epoch(leader, fetch_offset=7, last_fetched_epoch=2) == EpochEndOffset(
        epoch=1, end_offset=5
    )
    assert diverging_epoch(leader, fetch_offset=6, last_fetched_epoch=1) == EpochEndOffset(
        epoch=1, end_offset=5
    )
    assert diverging_epoch(leader, fetch_offset=5, last_fetched_epoch=1) is None
    assert diverging_epoch(leader, fetch_offset=8, last_fetched_epoch=3) is None
    follower = LogView.from_log(end_offset=7, epochs=[(1, 0), (2, 4)])
    assert truncation_offset(follower, EpochEndOffset(epoch=1, end_offset=5)) == 4


def test_a_follower_truncates_on_divergence_then_fetches_again() -> None:
    core = make(2, epoch=3, leader=1, epochs=[(1, 0), (2, 4)], end=7)
    ready = drain(core)
    [out] = sent(ready, FetchRequest)
    assert (out.message.fetch_offset, out.message.last_fetched_epoch) == (7, 2)
    response = FetchResponse(
        correlation_id=out.message.correlation_id,
        error_code=ErrorCode.NONE,
        high_watermark=4,
        current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=3),
        diverging_epoch=EpochEndOffset(epoch=1, end_offset=5),
    )
    core.step(1, response)
    ready = drain(core)
    assert ready.truncate_to == 4 and core.log.end_offset == 4
    [again] = sent(ready, FetchRequest)
    assert (again.message.fetch_offset, again.message.last_fetched_epoch) == (4, 1)
    core.step(1, response)  # the same answer again (duplicated): ignored
    assert drain(core).truncate_to is None and core.log.end_offset == 4


def test_check_quorum_makes_a_leader_without_fetches_resign() -> None:
    core = make(1)
    elect(core)
    drain(core)
    core.tick(machine(core).config.check_quorum_timeout_ms - 1)
    assert role(core) is Role.LEADER
    core.step(2, fetch(2, core.epoch, 0, 0))
    drain(core)
    core.tick(2 * machine(core).config.check_quorum_timeout_ms)
    ready = drain(core)
    assert core.role is Role.RESIGNED and ready.role is Role.RESIGNED
    assert {out.destination for out in sent(ready, EndQuorumEpochRequest)} == {2, 3}
    assert isinstance(core.propose([Batch(payload=b"x")]), NotLeader)


def test_graceful_resignation_names_the_most_caught_up_successor_first() -> None:
    core = make(1)
    elect(core)
    drain(core)
    core.propose([Batch(payload=b"x")])
    drain(core)
    core.step(3, fetch(3, core.epoch, 2, core.epoch))
    core.step(2, fetch(2, core.epoch, 1, core.epoch))
    drain(core)
    core.resign()
    ready = drain(core)
    [first, *_] = sent(ready, EndQuorumEpochRequest)
    assert first.message.preferred_successors == (3, 2)
    successor = make(3, epoch=core.epoch, leader=1)
    drain(successor)
    successor.step(1, first.message)
    drain(successor)
    successor.tick(successor.now_ms)
    assert successor.role is Role.PROSPECTIVE  # the first successor stands at once


def test_begin_quorum_epoch_makes_a_voter_follow() -> None:
    core = make(3, epoch=1)
    drain(core)
    core.step(2, BeginQuorumEpochRequest(correlation_id=1, leader_id=2, leader_epoch=4))
    ready = drain(core)
    assert core.role is Role.FOLLOWER and core.leader_id == 2 and core.epoch == 4
    assert ready.quorum_state == QuorumState(leader_epoch=4, leader_id=2, voters=VOTERS)
    core.step(1, BeginQuorumEpochRequest(correlation_id=2, leader_id=1, leader_epoch=4))
    drain(core)
    assert core.leader_id == 2  # a second leader of the same epoch is refused


def test_proposals_are_refused_off_the_leader_with_a_hint() -> None:
    core = make(2, epoch=3, leader=1)
    assert core.propose([Batch(payload=b"x")]) == NotLeader(leader_id=1, leader_epoch=3)
    leader = make(1)
    elect(leader)
    with pytest.raises(RaftError):
        leader.propose([])


def test_a_restarted_leader_does_not_lead_again_in_its_epoch() -> None:
    core = make(1, epoch=4, leader=1, voted=1)
    assert core.role is Role.RESIGNED
    assert isinstance(core.propose([Batch(payload=b"x")]), NotLeader)


def test_a_follower_whose_leader_says_it_no_longer_leads_stands_at_once() -> None:
    core = make(2, epoch=3, leader=1)
    [out] = sent(drain(core), FetchRequest)
    core.step(
        1,
        FetchResponse(
            correlation_id=out.message.correlation_id,
            error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
            high_watermark=NO_HIGH_WATERMARK,
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=3),
        ),
    )
    drain(core)
    core.tick(core.now_ms)
    ready = drain(core)
    assert core.role is Role.PROSPECTIVE
    assert {o.destination for o in sent(ready, VoteRequest)} == {1, 3}
    assert all(o.message.pre_vote for o in sent(ready, VoteRequest))


def test_a_late_fetch_answer_from_another_request_is_ignored() -> None:
    core = make(2, epoch=3, leader=1)
    [out] = sent(drain(core), FetchRequest)
    core.step(
        1,
        FetchResponse(
            correlation_id=out.message.correlation_id + 100,
            error_code=ErrorCode.NONE,
            high_watermark=0,
            current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=3),
            diverging_epoch=EpochEndOffset(epoch=0, end_offset=0),
        ),
    )
    assert drain(core).empty


def test_describe_quorum_shows_each_voters_lag_on_the_leader_only() -> None:
    core = make(1)
    elect(core)
    drain(core)
    core.propose([Batch(payload=b"a"), Batch(payload=b"b")])
    drain(core)
    core.step(2, fetch(2, core.epoch, 3, core.epoch))
    core.step(9, fetch(9, core.epoch, 1, core.epoch))  # an observer
    drain(core)
    described = core.describe_quorum()
    assert described.error_code is ErrorCode.NONE and described.leader_id == 1
    assert described.high_watermark == 3
    ends = {r.replica_id: r.log_end_offset for r in described.current_voters}
    assert ends == {1: 3, 2: 3, 3: -1}
    assert [r.replica_id for r in described.observers] == [9]
    follower = make(2, epoch=1, leader=1)
    assert follower.describe_quorum().error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
