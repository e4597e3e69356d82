"""Drive a RaftCore by hand: build one, elect it, deliver messages, read what it sent."""

from __future__ import annotations

import random

from api.protocol.quorum.messages import (
    Entry,
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    LeaderIdAndEpoch,
    VoteRequest,
    VoteResponse,
)
from api.raft.core import (
    LogView,
    QuorumConfig,
    QuorumState,
    RaftCore,
    Ready,
    ReadyDone,
    Role,
)
from tests.support.raft_states import fetch_in_flight, running_fetch

VOTERS = frozenset({1, 2, 3})


def make(
    node: int = 1,
    *,
    epoch: int = 0,
    voted: int = -1,
    leader: int = -1,
    epochs: list[tuple[int, int]] | None = None,
    end: int = 0,
    state: bool = True,
) -> RaftCore:
    quorum = (
        QuorumState(leader_epoch=epoch, voted_id=voted, leader_id=leader, voters=VOTERS)
        if state
        else None
    )
    return RaftCore(
        QuorumConfig(node_id=node, voters=VOTERS),
        state=quorum,
        log=LogView.from_log(end_offset=end, epochs=epochs or []),
        rng=random.Random(0),
        now_ms=0,
    )


def drain(core: RaftCore) -> Ready:
    """The core's Ready, carried out by a perfect shell (everything flushed)."""
    ready = core.ready()
    core.advance(ReadyDone(flushed_offset=core.log.end_offset))
    return ready


def sent(ready: Ready, kind: type) -> list:  # type: ignore[type-arg] # any message class
    return [out for out in ready.messages if isinstance(out.message, kind)]


def vote(candidate: int, epoch: int, last_epoch: int, last_offset: int, *, pre: bool = False):  # type: ignore[no-untyped-def] # a VoteRequest
    return VoteRequest(
        correlation_id=9,
        replica_epoch=epoch,
        replica_id=candidate,
        last_offset_epoch=last_epoch,
        last_offset=last_offset,
        pre_vote=pre,
    )


def answer(ready: Ready) -> VoteResponse:
    [out] = sent(ready, VoteResponse)
    message = out.message
    assert isinstance(message, VoteResponse)
    return message


def elect(core: RaftCore) -> None:
    """Win pre-vote and vote with node 2's help."""
    drain(core)
    core.tick(core.next_deadline_ms())
    ready = drain(core)
    for out in sent(ready, VoteRequest):
        if out.destination == 2:
            core.step(2, _grant(core, out.message))
    ready = drain(core)
    assert role(core) is Role.CANDIDATE
    for out in sent(ready, VoteRequest):
        if out.destination == 2:
            core.step(2, _grant(core, out.message))
    assert core.role is Role.LEADER


def role(core: RaftCore) -> Role:
    """The role now (a call, so that mypy does not narrow it across steps)."""
    return core.role


def _grant(core: RaftCore, request: VoteRequest) -> VoteResponse:
    return VoteResponse(
        correlation_id=request.correlation_id,
        error_code=ErrorCode.NONE,
        leader_id=-1,
        leader_epoch=core.epoch,
        vote_granted=True,
    )


def fetch(
    node: int, epoch: int, offset: int, last_epoch: int, correlation: int = 1
) -> FetchRequest:
    return FetchRequest(
        correlation_id=correlation,
        replica_id=node,
        current_leader_epoch=epoch,
        fetch_offset=offset,
        last_fetched_epoch=last_epoch,
        max_wait_ms=0,
    )


def core_with(
    node: int = 1,
    *,
    voters: frozenset[int] = VOTERS,
    state: QuorumState | None = None,
    end: int = 0,
    epochs: list[tuple[int, int]] | None = None,
    request_timeout_ms: int = 2000,
    fetch_timeout_ms: int = 2000,
    fetch_max_wait_ms: int = 500,
    append_linger_ms: int = 25,
    election_timeout_ms: int = 1000,
    election_backoff_max_ms: int = 1000,
) -> RaftCore:
    """A core with chosen timers (make() keeps Kafka's defaults)."""
    return RaftCore(
        QuorumConfig(
            node_id=node,
            voters=voters,
            request_timeout_ms=request_timeout_ms,
            fetch_timeout_ms=fetch_timeout_ms,
            fetch_max_wait_ms=fetch_max_wait_ms,
            append_linger_ms=append_linger_ms,
            election_timeout_ms=election_timeout_ms,
            election_backoff_max_ms=election_backoff_max_ms,
        ),
        state=state,
        log=LogView.from_log(end_offset=end, epochs=epochs or []),
        rng=random.Random(0),
        now_ms=0,
    )


def respond(
    core: RaftCore,
    sender: int,
    *,
    epoch: int,
    leader: int | None = None,
    records: tuple[Entry, ...] = (),
    high_watermark: int = -1,
    error: ErrorCode = ErrorCode.NONE,
    diverging: EpochEndOffset | None = None,
) -> None:
    """Answer the core's outstanding fetch (to `sender`) as that node would."""
    assert fetch_in_flight(core) is not None and running_fetch(core).destination == sender
    core.step(
        sender,
        FetchResponse(
            correlation_id=running_fetch(core).correlation,
            error_code=error,
            high_watermark=high_watermark,
            current_leader=LeaderIdAndEpoch(
                leader_id=sender if leader is None else leader, leader_epoch=epoch
            ),
            records=records,
            diverging_epoch=diverging,
        ),
    )


def entries(first: int, epochs: list[int]) -> tuple[Entry, ...]:
    return tuple(
        Entry(offset=first + i, epoch=epoch, payload=b"p%d" % (first + i))
        for i, epoch in enumerate(epochs)
    )


def leader(
    *, request_timeout_ms: int = 2000, fetch_timeout_ms: int = 2000, fetch_max_wait_ms: int = 500
) -> RaftCore:
    """Node 1, just elected (with node 2's votes) and drained."""
    core = core_with(
        1,
        state=QuorumState(leader_epoch=0, voters=frozenset({1, 2, 3})),
        request_timeout_ms=request_timeout_ms,
        fetch_timeout_ms=fetch_timeout_ms,
        fetch_max_wait_ms=fetch_max_wait_ms,
    )
    elect(core)
    drain(core)
    return core
