"""The election state a node must remember across restarts: epoch, vote, leader, voters.

The core decides what to persist and when (always before the message that depends on it is
sent) and hands it over in `Ready.quorum_state`; the shell stores it, as Kafka's
`quorum-state` file (`api/raft/quorum_state_file.py`). A node without it (never formatted,
or its data directory wiped) starts with `state=None`, and the core then refuses to vote
until it has caught up (see `RaftMachine.catching_up`).
"""

from __future__ import annotations

from dataclasses import dataclass

from api.protocol.quorum.bounds import LAST_EPOCH
from api.protocol.quorum.messages import NO_LEADER
from api.raft.core.errors import QuorumStateError

MAX_EPOCH = LAST_EPOCH
"""The largest epoch stored: the last an election can reach (`bounds.LAST_EPOCH`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class QuorumState:
    """What a node must remember across restarts to vote at most once per epoch."""

    leader_epoch: int
    leader_id: int = NO_LEADER
    voted_id: int = NO_LEADER
    voters: frozenset[int]

    def __post_init__(self) -> None:
        if not 0 <= self.leader_epoch <= MAX_EPOCH:
            raise QuorumStateError(f"leader epoch {self.leader_epoch} is not in 0..{MAX_EPOCH}")
