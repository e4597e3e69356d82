"""The quorum requests a node answers, and the answers its shell makes without the core.

A request waits for the core's answer (`AwaitedAnswers`); one the core dropped (the node is
stopping, or failed, or no answer came in time) is refused naming the leader this node knows.
DescribeQuorum's timestamps are turned from the core's monotonic clock to wall-clock
milliseconds, as Kafka's are, and its voters are matched by directory id (`by_directory`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace

from api.protocol.quorum.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    LeaderIdAndEpoch,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from api.raft.core.voters import VoterSet

Request = (
    VoteRequest
    | BeginQuorumEpochRequest
    | EndQuorumEpochRequest
    | FetchRequest
    | FetchSnapshotRequest
)
"""A request another node sends (the core answers it)."""

Response = (
    VoteResponse
    | BeginQuorumEpochResponse
    | EndQuorumEpochResponse
    | FetchResponse
    | FetchSnapshotResponse
)
"""The answer to a `Request`."""


def refusal(message: Request, leader: LeaderIdAndEpoch) -> Response:
    """NOT_LEADER_OR_FOLLOWER for `message`, naming `leader`."""
    error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    if isinstance(message, FetchRequest):
        return FetchResponse(
            correlation_id=message.correlation_id,
            error_code=error,
            high_watermark=-1,
            current_leader=leader,
        )
    if isinstance(message, FetchSnapshotRequest):
        return FetchSnapshotResponse(
            correlation_id=message.correlation_id,
            error_code=error,
            snapshot_id=message.snapshot_id,
            current_leader=leader,
            size=0,
            position=message.position,
        )
    if isinstance(message, VoteRequest):
        return VoteResponse(
            correlation_id=message.correlation_id,
            error_code=error,
            leader_id=leader.leader_id,
            leader_epoch=leader.leader_epoch,
            vote_granted=False,
        )
    kind = (
        BeginQuorumEpochResponse
        if isinstance(message, BeginQuorumEpochRequest)
        else EndQuorumEpochResponse
    )
    return kind(
        correlation_id=message.correlation_id,
        error_code=error,
        leader_id=leader.leader_id,
        leader_epoch=leader.leader_epoch,
    )


class AwaitedAnswers:
    """Requests from other nodes awaiting the core's answer, by (sender, correlation id)."""

    def __init__(self, unanswered: Callable[[Request], Response]) -> None:
        """`unanswered(request)`: a refusal naming the leader this node knows (now)."""
        self._unanswered = unanswered
        self._waiting: dict[tuple[int, int], tuple[asyncio.Future[Response], Request]] = {}

    def expect(self, sender: int, message: Request) -> asyncio.Future[Response]:
        """The future of the core's answer to `message`.

        An earlier request of the same key (a sender that asked again) is refused now.
        """
        key = (sender, message.correlation_id)
        previous = self._waiting.pop(key, None)
        if previous is not None and not previous[0].done():
            previous[0].set_result(self._unanswered(previous[1]))
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._waiting[key] = (future, message)
        return future

    async def wait(
        self, sender: int, message: Request, future: asyncio.Future[Response], seconds: float
    ) -> Response:
        """The answer `future` (`expect`) brings within `seconds`, else a refusal."""
        try:
            if future.done():
                return future.result()
            async with asyncio.timeout(seconds):
                return await future
        except TimeoutError:
            return self._unanswered(message)
        finally:
            key = (sender, message.correlation_id)
            waiting = self._waiting.get(key)
            if waiting is not None and waiting[0] is future:
                del self._waiting[key]

    def answer(self, destination: int, message: Response) -> None:
        """Hand the core's answer to the request that awaits it (if it still does)."""
        waiting = self._waiting.pop((destination, message.correlation_id), None)
        if waiting is not None and not waiting[0].done():
            waiting[0].set_result(message)

    def refuse(self, *, fetches_only: bool) -> None:
        """Answer the waiting requests (the fetches alone, or all) now with a refusal."""
        for key, (future, message) in list(self._waiting.items()):
            if fetches_only and not isinstance(message, FetchRequest):
                continue
            del self._waiting[key]
            if not future.done():
                future.set_result(self._unanswered(message))


def by_directory(answer: DescribeQuorumResponse, voters: VoterSet) -> DescribeQuorumResponse:
    """`answer`'s voters as `voters` knows them (KIP-853): each with its directory id.

    Another incarnation (wiped, formatted anew) that fetches under a voter's id is not the
    voter, whose directory has not fetched (Kafka's ReplicaKey rule): it is listed among the
    observers, and the voter's row shows no fetch.
    """
    rows: list[ReplicaState] = []
    others: list[ReplicaState] = []
    for fetched in answer.current_voters:
        voter = voters.get(fetched.replica_id)
        known = voter.directory_id if voter is not None else ""
        row = fetched
        if known and fetched.directory_id not in ("", known):
            others.append(fetched)
            row = ReplicaState(
                replica_id=fetched.replica_id,
                log_end_offset=-1,
                last_fetch_timestamp=-1,
                last_caught_up_timestamp=-1,
            )
        rows.append(replace(row, directory_id=row.directory_id or known))
    return replace(answer, current_voters=tuple(rows), observers=(*others, *answer.observers))


def on_wall_clock(answer: DescribeQuorumResponse, *, now_ms: int) -> DescribeQuorumResponse:
    """`answer` (timestamps of the core's clock, now `now_ms`) in wall-clock milliseconds.

    -1 stays -1: never.
    """
    shift = time.time_ns() // 1_000_000 - now_ms

    def wall(replica: ReplicaState) -> ReplicaState:
        return replace(
            replica,
            last_fetch_timestamp=_shifted(replica.last_fetch_timestamp, shift),
            last_caught_up_timestamp=_shifted(replica.last_caught_up_timestamp, shift),
        )

    return replace(
        answer,
        current_voters=tuple(wall(r) for r in answer.current_voters),
        observers=tuple(wall(r) for r in answer.observers),
    )


def _shifted(timestamp: int, shift: int) -> int:
    return timestamp if timestamp < 0 else timestamp + shift
