"""How the core answers each message, one rule at a time (api/raft/core/handlers.py).

The paths the simulation's seeds walk in bulk, pinned one by one: pre-vote ties between two
prospectives, vote answers from a newer epoch, BeginQuorumEpoch and EndQuorumEpoch refusals,
a leader's fetch refusals and parked fetches, a follower's fetch errors and retries, what an
observer and a voter without durable state take from a fetch answer.
"""

from __future__ import annotations

import dataclasses

from api.protocol.quorum.messages import (
    NO_HIGH_WATERMARK,
    UNCOUNTED_REPLICA,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    VoteResponse,
)
from api.raft.core import QuorumState, RaftCore, ReadyDone, Role
from api.raft.core.ready import Batch
from api.raft.core.replication import OBSERVER_SESSION_TIMEOUT_MS
from api.raft.core.states import NEVER
from tests.support.raft_core import (
    answer,
    core_with,
    drain,
    entries,
    fetch,
    leader,
    make,
    respond,
    role,
    sent,
    vote,
)
from tests.support.raft_states import (
    election_at,
    fetch_deadline,
    fetch_in_flight,
    leader_ended,
    machine,
    running_fetch,
)


def prospective(node: int, *, epoch: int = 3, end: int = 0) -> RaftCore:
    """A voter whose leader (node 1 or 2) went silent: standing, pre-votes sent."""
    leader = 1 if node != 1 else 2
    epochs = [(epoch, 0)] if end else []
    core = make(node, epoch=epoch, leader=leader, epochs=epochs, end=end)
    drain(core)
    core.tick(machine(core).config.fetch_timeout_ms)
    assert role(core) is Role.PROSPECTIVE
    return core


def vote_answer(
    core: RaftCore,
    sender: int,
    *,
    granted: bool,
    epoch: int | None = None,
    leader: int = -1,
    correlation: int | None = None,
) -> VoteResponse:
    """An answer to the core's (pre-)vote request to `sender`."""
    if correlation is None:
        correlation = max(machine(core).votes.requests)
    return VoteResponse(
        correlation_id=correlation,
        error_code=ErrorCode.NONE,
        leader_id=leader,
        leader_epoch=core.epoch if epoch is None else epoch,
        vote_granted=granted,
    )


# --- votes ----------------------------------------------------------------------------------


def test_of_two_prospectives_with_equal_logs_the_lower_id_stands() -> None:
    low = prospective(2, end=4)
    drain(low)
    low.step(3, vote(3, 3, 3, 4, pre=True))  # equal log, higher id: refused
    assert not answer(drain(low)).vote_granted
    low.step(3, vote(3, 3, 3, 5, pre=True))  # a longer log still gets the grant
    assert answer(drain(low)).vote_granted
    high = prospective(3, end=4)
    drain(high)
    high.step(2, vote(2, 3, 3, 4, pre=True))  # equal log, lower id: granted
    assert answer(drain(high)).vote_granted
    assert high.role is Role.PROSPECTIVE and high.epoch == 3  # a pre-vote changes nothing


def test_a_pre_vote_from_a_stale_epoch_is_refused() -> None:
    core = make(2, epoch=5)
    drain(core)
    core.step(3, vote(3, 4, 0, 0, pre=True))
    assert not answer(drain(core)).vote_granted
    core.step(3, vote(3, 5, 0, 0, pre=True))
    assert answer(drain(core)).vote_granted


def test_a_follower_whose_leader_resigned_grants_pre_votes_at_once() -> None:
    core = make(2, epoch=3, leader=1)
    drain(core)
    core.step(1, EndQuorumEpochRequest(correlation_id=1, leader_id=1, leader_epoch=3,
                                       preferred_successors=(3, 2)))  # fmt: skip
    drain(core)
    core.step(3, vote(3, 3, 0, 0, pre=True))
    assert answer(drain(core)).vote_granted  # the leader said it stopped: not live


def test_only_a_live_leader_is_named_in_a_vote_answer() -> None:
    follower = make(2, epoch=3, leader=1)
    drain(follower)
    follower.step(3, vote(3, 3, 0, 0, pre=True))
    assert answer(drain(follower)).leader_id == 1
    resigned = make(1, epoch=3, leader=1, voted=1)
    drain(resigned)
    resigned.step(3, vote(3, 3, 0, 0, pre=True))
    assert answer(drain(resigned)).leader_id == -1


def test_a_granted_vote_restarts_an_unattached_voters_election_timer() -> None:
    core = make(3, epoch=1)
    drain(core)
    core.tick(900)
    core.step(1, vote(1, 1, 0, 0))
    assert answer(drain(core)).vote_granted
    assert core.next_deadline_ms() == 900 + machine(core).config.election_timeout_ms
    core.tick(900 + machine(core).config.election_timeout_ms - 1)
    assert core.role is Role.UNATTACHED


def test_a_vote_answer_from_a_newer_epoch_makes_the_candidate_follow_or_wait() -> None:
    core = prospective(1)
    core.step(2, vote_answer(core, 2, granted=False, epoch=5, leader=3))
    assert core.role is Role.FOLLOWER and (core.epoch, core.leader_id) == (5, 3)
    for named in (-1, 1, 7):  # no leader, itself, a non-voter: not followed
        core = prospective(1)
        core.step(2, vote_answer(core, 2, granted=False, epoch=5, leader=named))
        assert core.role is Role.UNATTACHED and (core.epoch, core.leader_id) == (5, -1)


def test_vote_answers_of_another_round_or_epoch_are_not_counted() -> None:
    core = prospective(1)
    core.step(
        2, vote_answer(core, 2, granted=True, correlation=max(machine(core).votes.requests) + 50)
    )
    assert core.role is Role.PROSPECTIVE
    core.step(2, vote_answer(core, 2, granted=True, epoch=core.epoch - 1))
    assert core.role is Role.PROSPECTIVE
    core.step(2, vote_answer(core, 2, granted=True))
    assert role(core) is Role.CANDIDATE
    core.step(3, vote_answer(core, 3, granted=False))
    assert role(core) is Role.CANDIDATE  # a refusal is not a vote
    core.step(3, vote_answer(core, 3, granted=True))
    assert role(core) is Role.LEADER


def test_a_prospective_told_of_a_leader_of_its_epoch_follows_it_again() -> None:
    core = prospective(1)
    core.step(2, vote_answer(core, 2, granted=False, leader=3))
    assert core.role is Role.FOLLOWER and (core.epoch, core.leader_id) == (3, 3)
    for named in (-1, 1, 7):  # nobody, itself, a non-voter
        core = prospective(1)
        core.step(2, vote_answer(core, 2, granted=False, leader=named))
        assert core.role is Role.PROSPECTIVE


def test_a_prospective_does_not_follow_again_a_leader_that_said_it_stopped() -> None:
    core = make(2, epoch=3, leader=1)
    drain(core)
    core.step(1, EndQuorumEpochRequest(correlation_id=1, leader_id=1, leader_epoch=3,
                                       preferred_successors=(2, 3)))  # fmt: skip
    core.tick(core.now_ms)
    assert core.role is Role.PROSPECTIVE
    core.step(3, vote_answer(core, 3, granted=False, leader=1))
    assert core.role is Role.PROSPECTIVE  # (3, 1) ended: not followed again


# --- BeginQuorumEpoch, EndQuorumEpoch -------------------------------------------------------


def _begin_answer(core: RaftCore) -> BeginQuorumEpochResponse:
    [out] = sent(drain(core), BeginQuorumEpochResponse)
    assert isinstance(out.message, BeginQuorumEpochResponse)
    return out.message


def test_begin_quorum_epoch_from_someone_else_or_a_non_voter_is_refused() -> None:
    for sender, named in ((2, 1), (7, 7), (3, 3)):
        core = make(3, epoch=1)
        drain(core)
        core.step(sender, BeginQuorumEpochRequest(correlation_id=1, leader_id=named,
                                                  leader_epoch=4))  # fmt: skip
        assert _begin_answer(core).error_code is ErrorCode.INCONSISTENT_VOTER_SET
        assert core.epoch == 1 and core.role is Role.UNATTACHED


def test_begin_quorum_epoch_of_an_older_epoch_is_fenced() -> None:
    core = make(3, epoch=4)
    drain(core)
    core.step(1, BeginQuorumEpochRequest(correlation_id=1, leader_id=1, leader_epoch=3))
    response = _begin_answer(core)
    assert response.error_code is ErrorCode.FENCED_LEADER_EPOCH and response.leader_epoch == 4
    core.step(1, BeginQuorumEpochRequest(correlation_id=2, leader_id=1, leader_epoch=4))
    assert _begin_answer(core).error_code is ErrorCode.NONE
    assert core.role is Role.FOLLOWER
    core.step(1, BeginQuorumEpochRequest(correlation_id=3, leader_id=1, leader_epoch=4))
    ready = drain(core)  # a retry from the same leader: answered, nothing else changes
    assert ready.quorum_state is None and not sent(ready, FetchRequest)


def test_end_quorum_epoch_from_a_stale_or_foreign_leader_is_fenced_and_ignored() -> None:
    core = make(2, epoch=4, leader=1)
    drain(core)
    for sender, request in (
        (1, EndQuorumEpochRequest(correlation_id=1, leader_id=1, leader_epoch=3,
                                  preferred_successors=(2,))),
        (3, EndQuorumEpochRequest(correlation_id=1, leader_id=1, leader_epoch=4,
                                  preferred_successors=(2,))),
    ):  # fmt: skip
        core.step(sender, request)
        [out] = sent(drain(core), EndQuorumEpochResponse)
        assert out.message.error_code is ErrorCode.FENCED_LEADER_EPOCH
        assert fetch_deadline(core) == machine(core).config.fetch_timeout_ms  # unchanged
    core.step(7, EndQuorumEpochRequest(correlation_id=1, leader_id=7, leader_epoch=4,
                                       preferred_successors=(2,)))  # fmt: skip
    [out] = sent(drain(core), EndQuorumEpochResponse)
    assert out.message.error_code is ErrorCode.NONE
    assert fetch_deadline(core) == machine(core).config.fetch_timeout_ms and not leader_ended(core)


def test_a_later_successor_waits_its_backoff_and_an_unattached_voter_moves_its_timer() -> None:
    core = make(3, epoch=4, leader=1)
    drain(core)
    core.tick(100)
    core.step(1, EndQuorumEpochRequest(correlation_id=1, leader_id=1, leader_epoch=4,
                                       preferred_successors=(2, 3)))  # fmt: skip
    assert fetch_deadline(core) == 100 + 50  # the second successor: 50 ms
    assert machine(core).ended == (4, 1) and leader_ended(core)
    unattached = make(3, epoch=4)
    drain(unattached)
    unattached.step(1, EndQuorumEpochRequest(correlation_id=1, leader_id=1, leader_epoch=6,
                                             preferred_successors=(2,)))  # fmt: skip
    # A newer epoch: unattached in it; not named, so it waits like the last successor.
    assert unattached.epoch == 6 and unattached.role is Role.UNATTACHED
    assert unattached.next_deadline_ms() == 50
    caught_up = make(3, state=False)
    drain(caught_up)
    caught_up.step(1, EndQuorumEpochRequest(correlation_id=1, leader_id=1, leader_epoch=6,
                                            preferred_successors=(3,)))  # fmt: skip
    assert caught_up.role is Role.OBSERVER and election_at(caught_up) == NEVER


# --- the leader's side of fetching ----------------------------------------------------------


def _fetch_answer(core: RaftCore) -> FetchResponse:
    [out] = sent(drain(core), FetchResponse)
    assert isinstance(out.message, FetchResponse)
    return out.message


def test_a_fetch_is_refused_off_the_leader_or_in_another_epoch() -> None:
    follower = make(2, epoch=3, leader=1)
    drain(follower)
    follower.step(3, fetch(3, 3, 0, 0))
    refused = _fetch_answer(follower)
    assert refused.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert refused.current_leader == LeaderIdAndEpoch(leader_id=1, leader_epoch=3)
    assert refused.high_watermark == NO_HIGH_WATERMARK
    core = leader()
    core.step(2, fetch(2, core.epoch - 1, 0, 0))
    assert _fetch_answer(core).error_code is ErrorCode.FENCED_LEADER_EPOCH
    core.step(2, fetch(2, core.epoch + 1, 0, 0))
    assert _fetch_answer(core).error_code is ErrorCode.UNKNOWN_LEADER_EPOCH
    core.step(2, fetch(3, core.epoch, 0, 0))  # replica id is not the sender
    core.step(1, fetch(1, core.epoch, 0, 0))  # itself
    assert drain(core).empty
    state = machine(core).leader_state
    assert state is not None and state.progress == {}


def test_a_diverging_fetch_is_not_an_acknowledgement() -> None:
    core = leader()
    core.step(2, fetch(2, core.epoch, 5, core.epoch))  # past the leader's end
    response = _fetch_answer(core)
    assert response.diverging_epoch == EpochEndOffset(epoch=core.epoch, end_offset=1)
    assert response.error_code is ErrorCode.NONE
    state = machine(core).leader_state
    assert state is not None and 2 not in state.progress
    assert core.high_watermark == 0


def _told(core: RaftCore, *replicas: int) -> None:
    """Each replica fetches at the leader's end once and learns its high watermark."""
    for replica in replicas:
        core.step(replica, fetch(replica, core.epoch, core.log.end_offset, core.epoch))
    drain(core)


def test_a_fetch_with_nothing_new_waits_for_news_or_its_time() -> None:
    core = leader(fetch_max_wait_ms=500)
    _told(core, 2, 3)
    end = core.log.end_offset
    start = core.now_ms
    core.step(2, dataclasses.replace(fetch(2, core.epoch, end, core.epoch), max_wait_ms=200))
    assert not sent(drain(core), FetchResponse)
    core.tick(start + 199)
    assert not sent(drain(core), FetchResponse)
    core.tick(start + 200)
    assert _fetch_answer(core).high_watermark == end  # node 2 and the leader hold the marker
    core.step(3, dataclasses.replace(fetch(3, core.epoch, end, core.epoch), max_wait_ms=9000))
    drain(core)
    core.propose([Batch(payload=b"news")])
    [out] = sent(core.ready(), FetchResponse)
    assert out.destination == 3 and (out.read_from, out.read_until) == (end, end + 1)


def test_a_parked_fetch_is_answered_when_the_high_watermark_moves() -> None:
    core = leader()
    _told(core, 3)
    core.propose([Batch(payload=b"x")])
    core.ready()  # handed over, not yet flushed by the leader
    end = core.log.end_offset
    core.step(3, dataclasses.replace(fetch(3, core.epoch, end, core.epoch), max_wait_ms=400))
    assert not sent(core.ready(), FetchResponse)  # parked
    assert core.high_watermark == 1  # the marker, as node 3 was told
    core.advance(ReadyDone(flushed_offset=end))  # the leader's flush moves it to the end
    assert core.high_watermark == end
    [out] = sent(core.ready(), FetchResponse)
    assert out.destination == 3


def test_a_fetch_that_moves_the_high_watermark_is_answered_at_once() -> None:
    """The follower whose acknowledgement commits an entry learns so in one round trip.

    Parked for the whole wait instead, a write it forwarded stayed invisible to its own reads
    for ~500 ms (Kafka completes parked fetches when the high watermark moves; KIP-1166 also
    answers at once a fetcher that was told an older one).
    """
    core = leader(fetch_max_wait_ms=500)
    _told(core, 2, 3)
    core.propose([Batch(payload=b"written at node 2")])
    drain(core)
    end = core.log.end_offset
    core.advance(ReadyDone(flushed_offset=end))  # the leader's own flush: one of three
    drain(core)
    start, before = core.now_ms, core.high_watermark
    wait = dataclasses.replace(fetch(2, core.epoch, end, core.epoch), max_wait_ms=500)
    core.step(2, wait)
    assert core.high_watermark == end > before
    [out] = sent(drain(core), FetchResponse)  # not parked: answered with the news
    assert out.destination == 2 and out.message.high_watermark == end
    assert core.now_ms == start
    # Node 3, told the older high watermark, is answered at once too; then it waits.
    core.step(3, dataclasses.replace(fetch(3, core.epoch, end, core.epoch), max_wait_ms=500))
    [out] = sent(drain(core), FetchResponse)
    assert out.destination == 3 and out.message.high_watermark == end
    core.step(
        3,
        dataclasses.replace(fetch(3, core.epoch, end, core.epoch, correlation=2), max_wait_ms=500),
    )
    assert not sent(drain(core), FetchResponse)


def test_a_leader_retries_begin_quorum_epoch_to_voters_that_have_not_answered() -> None:
    core = leader(request_timeout_ms=300)
    start = core.now_ms
    core.step(2, fetch(2, core.epoch, 1, core.epoch))  # a fetch answers it too
    drain(core)
    core.tick(start + 299)
    assert not sent(drain(core), BeginQuorumEpochRequest)
    core.tick(start + 300)
    [out] = sent(drain(core), BeginQuorumEpochRequest)
    assert out.destination == 3
    core.tick(start + 599)
    assert not sent(drain(core), BeginQuorumEpochRequest)


def test_check_quorum_counts_only_recent_fetches() -> None:
    core = leader(fetch_timeout_ms=1000)  # check-quorum: 1.5 fetch timeouts, as Kafka's
    start = core.now_ms
    core.tick(start + 1499)  # its first check-quorum timeout: grace
    assert core.role is Role.LEADER
    core.step(2, fetch(2, core.epoch, 1, core.epoch))
    core.tick(start + 2600)
    assert core.role is Role.LEADER  # node 2 fetched 1,101 ms ago: past the fetch timeout
    core.tick(start + 2998)
    assert core.role is Role.LEADER  # 1,499 ms ago
    core.tick(start + 2999)
    assert role(core) is Role.RESIGNED  # 1,500 ms since: no majority


# --- the follower's side of fetching --------------------------------------------------------


def test_a_fetch_answer_from_a_newer_epoch_makes_a_follower_follow_its_leader() -> None:
    core = make(2, epoch=3, leader=1)
    drain(core)
    respond(core, 1, epoch=5, leader=3, error=ErrorCode.FENCED_LEADER_EPOCH)
    assert core.role is Role.FOLLOWER and (core.epoch, core.leader_id) == (5, 3)
    for named in (-1, 2, 7):
        core = make(2, epoch=3, leader=1)
        drain(core)
        respond(core, 1, epoch=5, leader=named, error=ErrorCode.FENCED_LEADER_EPOCH)
        assert core.role is Role.UNATTACHED and (core.epoch, core.leader_id) == (5, -1)


def test_a_fetch_answer_for_an_older_position_is_ignored() -> None:
    core = make(2, epoch=3, leader=1)
    drain(core)
    # The log moved after the fetch left (another answer appended): its answer is for an old
    # position and is dropped.
    core.log.append(3, 2)
    respond(core, 1, epoch=3, records=entries(2, [3]))
    ready = drain(core)
    assert core.log.end_offset == 2 and not ready.append and not ready.messages


def test_an_observer_told_of_the_leader_in_an_error_fetches_from_it_at_once() -> None:
    core = core_with(9, state=None, request_timeout_ms=300)
    [out] = sent(drain(core), FetchRequest)
    respond(core, out.destination, epoch=2)  # epoch 2 learnt
    drain(core)
    core.tick(core.now_ms + 300)  # no answer: ask some voter who leads
    [asked] = sent(drain(core), FetchRequest)
    named = min({1, 2, 3} - {asked.destination})
    respond(core, asked.destination, epoch=2, leader=named, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert core.leader_id == named
    [again] = sent(drain(core), FetchRequest)
    assert again.destination == named
    respond(core, named, epoch=2, records=entries(0, [2]))  # the new fetch is the one answered
    assert core.log.end_offset == 1


def test_after_an_error_a_follower_asks_again_after_the_retry_backoff() -> None:
    core = core_with(2, state=QuorumState(leader_epoch=3, leader_id=1, voters=frozenset({1, 2, 3})))
    drain(core)
    core.tick(100)
    respond(core, 1, epoch=3, error=ErrorCode.UNKNOWN_LEADER_EPOCH)
    assert not sent(drain(core), FetchRequest)
    assert (
        fetch_in_flight(core) is not None
        and running_fetch(core).retry_at == 100 + machine(core).config.retry_backoff_ms
    )
    assert not leader_ended(core) and core.role is Role.FOLLOWER
    core.tick(100 + machine(core).config.retry_backoff_ms)
    [out] = sent(drain(core), FetchRequest)
    assert out.destination == 1


def test_a_follower_keeps_what_it_fetched_when_a_fetch_is_lost() -> None:
    """A fetch lost with its link (no answer within the request timeout) is sent again from
    the log's end: what earlier answers brought is kept, never fetched again from 0."""
    core = core_with(2, state=QuorumState(leader_epoch=3, leader_id=1, voters=frozenset({1, 2, 3})))
    drain(core)
    respond(core, 1, epoch=3, records=entries(0, [3, 3, 3]), high_watermark=3)
    drain(core)
    assert core.log.end_offset == 3
    lost = running_fetch(core)
    core.tick(core.now_ms + machine(core).config.request_timeout_ms)
    [out] = sent(drain(core), FetchRequest)
    assert out.destination == 1 and out.message.correlation_id != lost.correlation
    assert (out.message.fetch_offset, out.message.last_fetched_epoch) == (3, 3)


def test_a_fetch_answer_of_another_epoch_or_leader_is_ignored() -> None:
    core = make(2, epoch=3, leader=1)
    drain(core)
    respond(core, 1, epoch=2, records=entries(0, [2]))
    assert core.log.end_offset == 0 and not sent(drain(core), FetchRequest)
    core = make(2, epoch=3, leader=1)
    drain(core)
    machine(core).fetch_target = 3
    machine(core).send_fetch()
    drain(core)
    respond(core, 3, epoch=3, leader=3, records=entries(0, [3]))  # 3 says it leads; 1 does
    assert core.log.end_offset == 0
    candidate = prospective(1)
    # A prospective holds no Fetch at all (its role state has none), so no answer matches.
    assert fetch_in_flight(candidate) is None
    answer = FetchResponse(
        correlation_id=77,
        error_code=ErrorCode.NONE,
        high_watermark=-1,
        current_leader=LeaderIdAndEpoch(leader_id=2, leader_epoch=candidate.epoch),
        records=entries(0, [candidate.epoch]),
    )
    candidate.step(2, answer)
    assert candidate.log.end_offset == 0


def test_a_good_fetch_answer_keeps_the_follower_and_sets_its_timers() -> None:
    core = core_with(2, state=QuorumState(leader_epoch=3, leader_id=1, voters=frozenset({1, 2, 3})),
                     fetch_timeout_ms=1000)  # fmt: skip
    drain(core)
    core.tick(700)
    respond(core, 1, epoch=3, records=entries(0, [3]), high_watermark=1)
    assert fetch_deadline(core) == 1700 and machine(core).fetched_ms == 700
    [out] = sent(drain(core), FetchRequest)
    assert out.destination == 1 and out.message.fetch_offset == 1


def test_only_entries_that_continue_the_log_in_order_are_taken() -> None:
    core = make(2, epoch=3, leader=1, epochs=[(2, 0)], end=2)
    drain(core)
    respond(core, 1, epoch=3, records=entries(3, [3]))  # a gap
    assert core.log.end_offset == 2
    respond(core, 1, epoch=3, records=entries(2, [1]))  # an epoch older than the log's last
    assert core.log.end_offset == 2
    respond(core, 1, epoch=3, records=entries(2, [4]))  # an epoch newer than the leader's
    assert core.log.end_offset == 2
    respond(core, 1, epoch=3, records=entries(2, [2, 3, 2, 3]), high_watermark=9)
    assert core.log.end_offset == 4  # stops at the first entry out of order
    assert core.high_watermark == 4  # never past its own end


def test_an_observer_follows_whoever_answers_as_leader() -> None:
    core = core_with(9, state=None, request_timeout_ms=300)
    [out] = sent(drain(core), FetchRequest)
    respond(core, out.destination, epoch=2)  # a newer epoch: learnt, then fetched again
    [again] = sent(drain(core), FetchRequest)
    assert again.destination == out.destination and again.message.current_leader_epoch == 2
    respond(core, out.destination, epoch=2, records=entries(0, [2]), high_watermark=1)
    assert core.role is Role.OBSERVER and core.leader_id == out.destination
    assert core.high_watermark == 1 and core.log.end_offset == 1
    drain(core)
    core.tick(core.now_ms + 300)  # no answer: ask some voter who leads
    assert core.leader_id == -1
    [asked] = sent(drain(core), FetchRequest)
    respond(core, asked.destination, epoch=2)  # it answers as the leader of the epoch
    assert core.leader_id == asked.destination and machine(core).fetch_target == asked.destination
    [next_fetch] = sent(drain(core), FetchRequest)
    assert next_fetch.destination == asked.destination


def test_an_observer_told_of_the_leader_fetches_from_it() -> None:
    core = core_with(9, state=None)
    [out] = sent(drain(core), FetchRequest)
    other = min({1, 2, 3} - {out.destination})
    respond(core, out.destination, epoch=2, leader=other, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    [again] = sent(drain(core), FetchRequest)
    assert again.destination == other and core.leader_id == other
    assert core.role is Role.OBSERVER and core.epoch == 2


def test_a_voter_without_state_votes_again_once_caught_up_and_fenced() -> None:
    core = core_with(2, state=None)
    drain(core)
    core.step(1, BeginQuorumEpochRequest(correlation_id=1, leader_id=1, leader_epoch=4))
    drain(core)
    respond(core, 1, epoch=4, records=entries(0, [4, 4]), high_watermark=2)
    assert machine(core).catching_up  # node 3 not heard yet: it may have had this node's vote
    drain(core)
    core.step(3, BeginQuorumEpochResponse(correlation_id=1, error_code=ErrorCode.NONE,
                                          leader_id=1, leader_epoch=4))  # fmt: skip
    respond(core, 1, epoch=4, high_watermark=2)
    ready = drain(core)
    assert not machine(core).catching_up and core.role is Role.FOLLOWER and core.leader_id == 1
    assert ready.quorum_state == QuorumState(
        leader_epoch=4, leader_id=1, voted_id=2, voters=frozenset({1, 2, 3})
    )
    now = core.now_ms  # a follower now: it gives up on a silent leader after the fetch timeout
    core.tick(now + machine(core).config.fetch_timeout_ms - 1)
    assert core.role is Role.FOLLOWER
    core.tick(now + machine(core).config.fetch_timeout_ms)
    assert role(core) is Role.PROSPECTIVE
    fenced = core_with(2, state=None)
    drain(fenced)
    fenced.step(1, BeginQuorumEpochRequest(correlation_id=1, leader_id=1, leader_epoch=4))
    drain(fenced)
    fenced.step(3, vote(3, 6, 0, 0, pre=True))  # node 3 is (at least) in epoch 6
    respond(fenced, 1, epoch=4, records=entries(0, [4]), high_watermark=1)
    ready = drain(fenced)
    # Caught up from epoch 4's leader only, it may lack what it acknowledged in epoch 6: it
    # moves to epoch 6 in memory, writes no state and keeps catching up from 6's leader.
    assert machine(fenced).catching_up and fenced.epoch == 6
    assert ready.quorum_state is None


def test_a_voter_without_state_below_the_high_watermark_keeps_catching_up() -> None:
    core = core_with(2, state=None)
    drain(core)
    core.step(3, vote(3, 4, 0, 0))
    machine(core).fetch_target = 1
    machine(core).send_fetch()
    drain(core)
    respond(core, 1, epoch=4, records=entries(0, [4]), high_watermark=3)
    assert machine(core).catching_up and core.role is Role.OBSERVER


def test_describe_quorum_never_shows_a_wiped_nodes_old_progress() -> None:
    """A node back without its state (wiped, formatted anew) is shown where it is now.

    Its old incarnation fetched up to the leader's end; the new one fetches from 0 without
    a replica id. Describe showed the old one's offset (lag 0), which is what operators are
    told to wait for before the next step of a replace procedure.
    """
    core = leader()
    for _ in range(3):
        core.propose([Batch(payload=b"topic")])
    drain(core)
    end = core.log.end_offset
    core.step(3, fetch(3, core.epoch, end, core.epoch))
    drain(core)
    [three] = [r for r in core.describe_quorum().current_voters if r.replica_id == 3]
    assert three.log_end_offset == end
    core.tick(core.now_ms + 10)
    core.step(3, dataclasses.replace(fetch(3, core.epoch, 0, 0), replica_id=UNCOUNTED_REPLICA))
    drain(core)
    described = core.describe_quorum()
    [three] = [r for r in described.current_voters if r.replica_id == 3]
    assert three.log_end_offset == 0 and three.last_fetch_timestamp == core.now_ms
    assert three.last_caught_up_timestamp == -1
    assert not described.observers
    # Its old acknowledgements are void: nothing of node 3 counts toward the high watermark.
    state = machine(core).leader_state
    assert state is not None and 3 not in state.progress


def test_describe_quorum_shows_a_replica_by_the_directory_it_fetched_with() -> None:
    """A node formatted anew (a new directory id) is not its old incarnation, caught up."""
    core = leader()
    end = core.log.end_offset
    old, new = "AAAAAAAAQACAAAAAAAAAAw", "BBBBBBBBQACAAAAAAAAAAw"
    core.step(
        3, dataclasses.replace(fetch(3, core.epoch, end, core.epoch), replica_directory_id=old)
    )
    drain(core)
    [three] = [r for r in core.describe_quorum().current_voters if r.replica_id == 3]
    assert (three.directory_id, three.log_end_offset) == (old, end)
    assert three.last_caught_up_timestamp == core.now_ms
    core.tick(core.now_ms + 10)
    core.step(3, dataclasses.replace(fetch(3, core.epoch, 0, 0), replica_directory_id=new))
    drain(core)
    [three] = [r for r in core.describe_quorum().current_voters if r.replica_id == 3]
    assert (three.directory_id, three.log_end_offset) == (new, 0)
    assert three.last_caught_up_timestamp == -1  # the old one's, not carried over


def test_describe_quorum_reports_a_replica_that_never_fetched() -> None:
    core = leader()
    described = core.describe_quorum()
    [me] = [r for r in described.current_voters if r.replica_id == 1]
    assert me.log_end_offset == 1 and me.last_fetch_timestamp == core.now_ms
    assert me.last_caught_up_timestamp == core.now_ms
    [two] = [r for r in described.current_voters if r.replica_id == 2]
    assert (two.log_end_offset, two.last_fetch_timestamp, two.last_caught_up_timestamp) == (
        -1,
        -1,
        -1,
    )
    assert described.high_watermark == NO_HIGH_WATERMARK  # nothing past its epoch start yet
    core.tick(core.now_ms + 10)
    core.step(2, fetch(2, core.epoch, 0, 0))
    [two] = [r for r in core.describe_quorum().current_voters if r.replica_id == 2]
    assert two.last_fetch_timestamp == core.now_ms and two.last_caught_up_timestamp == -1


def test_describe_quorum_lists_no_observer_for_a_fetch_without_an_id() -> None:
    """A fetch from nobody (id -1 over the wire: a node catching up sends no id) is answered
    and never shown as an observer `-1` that lingers for the rest of the epoch (Kafka ignores
    a fetch from a negative replica id)."""
    core = leader()
    end = core.log.end_offset
    nobody = dataclasses.replace(fetch(-1, core.epoch, end, core.epoch), replica_id=-1)
    core.step(-1, nobody)
    assert sent(drain(core), FetchResponse)  # still answered
    core.step(4, fetch(4, core.epoch, end, core.epoch))
    drain(core)
    assert [r.replica_id for r in core.describe_quorum().observers] == [4]


def test_describe_quorum_forgets_an_observer_after_kafkas_session_timeout() -> None:
    core = leader(fetch_timeout_ms=400_000)  # the voters stay silent: no check-quorum here
    end = core.log.end_offset
    core.step(4, fetch(4, core.epoch, end, core.epoch))
    core.step(5, fetch(5, core.epoch, end, core.epoch))
    drain(core)
    start = core.now_ms
    core.tick(start + OBSERVER_SESSION_TIMEOUT_MS - 1)
    core.step(5, fetch(5, core.epoch, end, core.epoch, correlation=2))
    drain(core)
    assert [r.replica_id for r in core.describe_quorum().observers] == [4, 5]
    core.tick(start + OBSERVER_SESSION_TIMEOUT_MS)
    described = core.describe_quorum()
    assert [r.replica_id for r in described.observers] == [5]  # 4 was silent for 5 minutes
    assert {r.replica_id for r in described.current_voters} == {1, 2, 3}  # voters stay


# --- edges: pre-votes after a leader is gone, parked fetches, refusals that change nothing --


def test_a_follower_that_never_heard_from_its_leader_grants_pre_votes() -> None:
    core = make(2, epoch=3, leader=1)
    drain(core)
    core.tick(100)
    core.step(3, vote(3, 3, 0, 0, pre=True))
    assert answer(drain(core)).vote_granted  # no fetch answered since it started: not live


def test_a_new_fetch_replaces_the_parked_one_of_its_replica() -> None:
    core = leader()
    _told(core, 3)
    end = core.log.end_offset
    parked = dataclasses.replace(fetch(3, core.epoch, end, core.epoch), max_wait_ms=400)
    core.step(3, parked)
    core.step(3, fetch(3, core.epoch, end, core.epoch, correlation=2))  # max_wait 0: answered
    [out] = sent(drain(core), FetchResponse)
    assert out.message.correlation_id == 2
    core.propose([Batch(payload=b"news")])
    assert not sent(core.ready(), FetchResponse)  # the first one is not answered too


def test_a_fetch_waits_even_one_millisecond_when_asked_to() -> None:
    core = leader()
    _told(core, 2)
    end = core.log.end_offset
    start = core.now_ms
    core.step(2, dataclasses.replace(fetch(2, core.epoch, end, core.epoch), max_wait_ms=1))
    assert not sent(drain(core), FetchResponse)
    core.tick(start + 1)
    assert sent(drain(core), FetchResponse)


def test_a_high_watermark_that_did_not_move_answers_no_parked_fetch() -> None:
    core = leader()
    end = core.log.end_offset
    core.step(2, fetch(2, core.epoch, end, core.epoch))
    drain(core)
    assert core.high_watermark == end
    _told(core, 3)
    core.step(3, dataclasses.replace(fetch(3, core.epoch, end, core.epoch), max_wait_ms=400))
    core.step(2, fetch(2, core.epoch, end, core.epoch, correlation=2))  # same HW again
    ready = drain(core)
    assert [out.destination for out in sent(ready, FetchResponse)] == [2]


def test_a_follower_told_its_leader_stopped_grants_pre_votes_and_does_not_follow_it_again() -> None:
    core = make(2, epoch=3, leader=1)
    drain(core)
    core.tick(100)
    respond(core, 1, epoch=3, high_watermark=0)  # a good answer: the leader is live
    drain(core)
    respond(core, 1, epoch=3, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    drain(core)
    core.step(3, vote(3, 3, 0, 0, pre=True))
    assert answer(drain(core)).vote_granted
    core.tick(core.now_ms)
    assert role(core) is Role.PROSPECTIVE
    core.step(3, vote_answer(core, 3, granted=False, leader=1))
    assert core.role is Role.PROSPECTIVE  # (3, 1) said it stopped: not followed again


def test_end_quorum_epoch_of_another_voter_than_the_leader_changes_nothing() -> None:
    core = make(2, epoch=3, leader=1)
    drain(core)
    core.step(3, EndQuorumEpochRequest(correlation_id=1, leader_id=3, leader_epoch=3,
                                       preferred_successors=(2,)))  # fmt: skip
    drain(core)
    assert not leader_ended(core) and fetch_deadline(core) == machine(core).config.fetch_timeout_ms


def test_an_error_naming_no_leader_or_a_non_voter_only_backs_off() -> None:
    for named in (-1, 7):
        core = core_with(9, state=None, request_timeout_ms=300)
        [out] = sent(drain(core), FetchRequest)
        respond(core, out.destination, epoch=2)  # epoch 2 learnt
        drain(core)
        core.tick(core.now_ms + 300)
        [asked] = sent(drain(core), FetchRequest)
        respond(
            core, asked.destination, epoch=2, leader=named, error=ErrorCode.NOT_LEADER_OR_FOLLOWER
        )
        assert core.leader_id == -1 and not sent(drain(core), FetchRequest)
        assert core.next_deadline_ms() == core.now_ms + machine(core).config.retry_backoff_ms
