"""Requests awaiting the core's answer, refusals made without it, DescribeQuorum's voters."""

from __future__ import annotations

import asyncio

from api.protocol.quorum.messages import (
    DescribeQuorumResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from api.raft.core.voters import Voter, VoterSet
from api.raft.requests import AwaitedAnswers, Request, Response, by_directory, refusal

LEADER = LeaderIdAndEpoch(leader_id=2, leader_epoch=7)


def _refused(message: Request) -> Response:
    return refusal(message, LEADER)


def _fetch(correlation: int) -> FetchRequest:
    return FetchRequest(
        correlation_id=correlation,
        replica_id=3,
        current_leader_epoch=7,
        fetch_offset=0,
        last_fetched_epoch=0,
        max_wait_ms=500,
    )


def _vote(correlation: int) -> VoteRequest:
    return VoteRequest(
        correlation_id=correlation,
        replica_epoch=8,
        replica_id=3,
        last_offset_epoch=7,
        last_offset=10,
    )


def _answer(correlation: int) -> FetchResponse:
    return FetchResponse(
        correlation_id=correlation,
        error_code=ErrorCode.NONE,
        high_watermark=5,
        current_leader=LEADER,
    )


async def test_the_cores_answer_goes_to_the_request_that_awaits_it() -> None:
    answers = AwaitedAnswers(_refused)
    request = _fetch(1)
    future = answers.expect(3, request)
    answers.answer(3, _answer(1))
    assert await answers.wait(3, request, future, 1.0) == _answer(1)
    answers.answer(3, _answer(1))  # answered already: nothing awaits it now


async def test_a_request_unanswered_in_time_is_refused_naming_the_leader() -> None:
    answers = AwaitedAnswers(_refused)
    request = _fetch(1)
    future = answers.expect(3, request)
    refused = await answers.wait(3, request, future, 0.01)
    assert isinstance(refused, FetchResponse)
    assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert refused.current_leader == LEADER
    answers.answer(3, _answer(1))  # a late answer finds nobody waiting
    assert not answers.expect(3, request).done()  # forgotten: no earlier one to refuse


async def test_a_sender_that_asks_again_has_its_earlier_request_refused() -> None:
    answers = AwaitedAnswers(_refused)
    first = answers.expect(3, _fetch(1))
    second = answers.expect(3, _fetch(1))
    assert first.result().error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert not second.done()
    answers.answer(3, _answer(1))
    assert second.result() == _answer(1)


async def test_a_lost_leadership_refuses_the_fetches_and_a_stop_everything() -> None:
    answers = AwaitedAnswers(_refused)
    fetch = answers.expect(3, _fetch(1))
    vote = answers.expect(3, _vote(2))
    answers.refuse(fetches_only=True)
    assert fetch.result().error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert not vote.done()
    answers.refuse(fetches_only=False)
    refused = vote.result()
    assert isinstance(refused, VoteResponse) and not refused.vote_granted


async def test_wait_forgets_the_request_it_waited_for() -> None:
    answers = AwaitedAnswers(_refused)
    request = _fetch(1)
    future = answers.expect(3, request)
    waiting = asyncio.ensure_future(answers.wait(3, request, future, 5.0))
    await asyncio.sleep(0)
    answers.answer(3, _answer(1))
    assert await waiting == _answer(1)
    again = answers.expect(3, request)  # the same key anew: no earlier one to refuse
    assert not again.done()


def _state(replica: int, *, directory: str = "", fetched: int = 100) -> ReplicaState:
    return ReplicaState(
        replica_id=replica,
        log_end_offset=10,
        last_fetch_timestamp=fetched,
        last_caught_up_timestamp=fetched,
        directory_id=directory,
    )


def test_describe_names_each_voters_directory_and_tells_another_incarnation_apart() -> None:
    voters = VoterSet.of([Voter(id=1, directory_id="d1"), Voter(id=2, directory_id="d2")])
    answer = DescribeQuorumResponse(
        error_code=ErrorCode.NONE,
        leader_id=1,
        leader_epoch=7,
        high_watermark=10,
        # Node 1 fetched without a directory id; node 2's id fetched from a wiped directory.
        current_voters=(_state(1), _state(2, directory="wiped")),
        observers=(_state(9, directory="d9"),),
    )
    described = by_directory(answer, voters)
    one, two = described.current_voters
    assert one == _state(1, directory="d1")
    assert (two.directory_id, two.log_end_offset, two.last_fetch_timestamp) == ("d2", -1, -1)
    assert described.observers == (_state(2, directory="wiped"), _state(9, directory="d9"))
