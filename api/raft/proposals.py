"""A leader's writes from proposed to committed: queued, placed as one block, then answered.

The service's writes (`QuorumNode.propose`) wait in a queue while a `Ready` is carried out;
the node's loop places the queued ones between two `Ready`s as one block at the log's end
(`Proposals.place`), and each is then tracked with where it went until the high watermark
passes it (`resolve`: its answer) or leadership is lost (`fail`). A voter change's entry is
tracked the same way (`track`), so it commits, fails and is applied in offset order with the
writes.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from api.raft.blocks import ReplicaBlocks
from api.raft.core.core import RaftCore
from api.raft.core.ready import Batch, NotLeader
from api.raft.core.roles import Role
from api.service.replicated import ReplicatedService
from metadata_log.log import AppendResult
from metadata_log.timings import LatencyCounts
from records.model import Record
from replay.controller.errors import ApiError, ErrorCode


@dataclass(slots=True, eq=False)
class Proposal:
    """Records proposed at `first` (the working image's offset) and their answer to be."""

    records: tuple[Record, ...]
    principal: str | None
    first: int
    """The offset the working image gave its first record."""
    future: asyncio.Future[AppendResult]
    proposed_at: float = field(default_factory=time.monotonic)


class Proposals:
    """A node's proposals: queued for its loop's next turn, then in flight until committed."""

    def __init__(
        self,
        core: RaftCore,
        blocks: ReplicaBlocks,
        service: ReplicatedService,
        *,
        not_controller: Callable[[], ApiError],
        latency: LatencyCounts,
    ) -> None:
        """`not_controller()`: the refusal of a write on a node that does not lead (now).

        `latency` observes each proposal's time from proposed to committed.
        """
        self.core = core
        self.service = service
        self._blocks = blocks
        self._not_controller = not_controller
        self._latency = latency
        self._queued: list[Proposal] = []
        self._inflight: deque[tuple[Proposal, AppendResult]] = deque()
        """Proposed and not yet committed, in offset order, with where each went."""

    @property
    def queued(self) -> bool:
        """Whether proposals wait for the loop's next turn."""
        return bool(self._queued)

    def queue(
        self, records: Sequence[Record], *, principal: str | None, first: int
    ) -> asyncio.Future[AppendResult]:
        """Queue `records` for the loop's next turn; the future is their commit (or refusal)."""
        future: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
        self._queued.append(
            Proposal(records=tuple(records), principal=principal, first=first, future=future)
        )
        return future

    def place(self, *, leading: bool) -> None:
        """Propose the queued writes to the core as one block at the log's end.

        Between two `Ready`s. Each is refused instead when the node does not lead (`leading`:
        it takes writes) or the working image expected another offset.
        """
        group, self._queued = self._queued, []
        core = self.core
        if core.role is not Role.LEADER or not leading:
            self._refuse(group, self._not_controller())
            return
        first = core.log.end_offset
        if group[0].first != first:
            # The working image and the log disagree: a bug; refuse rather than misplace.
            error = ApiError(
                ErrorCode.NOT_CONTROLLER,
                f"internal: the write expected offset {group[0].first}, the log is at {first}",
            )
            self._refuse(group, error)
            self.service.drop_uncommitted()
            return
        block = self._blocks.encode(
            [(p.records, p.principal) for p in group], first=first, epoch=core.epoch
        )
        placed = core.propose([Batch(payload=block.encode(), count=block.count)])
        if isinstance(placed, NotLeader):
            self._refuse(group, self._not_controller())
            return
        self._blocks.keep(block)
        offset = first
        for proposal in group:
            last = offset + len(proposal.records) - 1
            self._inflight.append((proposal, AppendResult(offset, last, block.timestamp)))
            offset = last + 1

    def track(
        self, records: tuple[Record, ...], *, principal: str | None, placed: AppendResult
    ) -> asyncio.Future[AppendResult]:
        """Track an entry the node placed itself (`placed`: where) as in flight.

        It comes after the proposals placed before it; the future is its commit.
        """
        future: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
        proposal = Proposal(records=records, principal=principal, first=placed[0], future=future)
        self._inflight.append((proposal, placed))
        return future

    def resolve(self, high_watermark: int) -> None:
        """Answer the proposals below the high watermark: they are committed."""
        while self._inflight and self._inflight[0][1][1] < high_watermark:
            proposal, result = self._inflight.popleft()
            self._latency.observe(time.monotonic() - proposal.proposed_at)
            if not proposal.future.done():
                proposal.future.set_result(result)

    def fail(self, error: ApiError) -> None:
        """Refuse every proposal in flight or queued with `error` (leadership lost, stopped)."""
        pending = [*(proposal for proposal, _ in self._inflight), *self._queued]
        self._inflight.clear()
        self._queued = []
        self._refuse(pending, error)

    @staticmethod
    def _refuse(proposals: list[Proposal], error: ApiError) -> None:
        for proposal in proposals:
            if not proposal.future.done():
                proposal.future.set_exception(error)
