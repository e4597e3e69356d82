"""The role states the core owns: one class per role, holding only that role's timers.

`LeaderState` (replication.py) is the leader's. Kafka's raft keeps `UnattachedState`,
`CandidateState`, `FollowerState`, `LeaderState`, `ResignedState` (and the prospective state
of KIP-996) behind its `QuorumState`; here the core holds one of these at a time
(`RaftMachine.state`) and a role change makes a fresh one, so no timer of an old role survives
into the next.
What outlives a role (the epoch, the vote, the leader known, the votes of the current round)
stays on the machine (machine.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from api.raft.core.replication import LeaderState
from api.raft.core.roles import Role
from api.raft.core.transfer import SnapshotTransfer

NEVER = 2**62
"""A deadline that does not come."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchInFlight:
    """The outstanding Fetch: its correlation id, destination, position, and when to retry."""

    correlation: int
    destination: int
    offset: int
    last_epoch: int
    retry_at: int


@dataclass(slots=True, kw_only=True)
class UnattachedState:
    """A voter in an epoch without a leader it follows: it stands once its timer fires."""

    role: ClassVar[Role] = Role.UNATTACHED
    election_at: int = NEVER


@dataclass(slots=True, kw_only=True)
class ResignedState:
    """A leader that stopped leading its epoch (or restarted in it): it stands again later."""

    role: ClassVar[Role] = Role.RESIGNED
    election_at: int = NEVER


@dataclass(slots=True, kw_only=True)
class ProspectiveState:
    """KIP-996: asking for pre-votes before standing (after `prevote_at` when backing off)."""

    role: ClassVar[Role] = Role.PROSPECTIVE
    election_at: int = NEVER
    prevote_at: int = NEVER
    ask_again: dict[int, int] = field(default_factory=dict)
    """Voters to ask again for a pre-vote, and when: each refused it naming the leader that
    resigned (its EndQuorumEpoch had not reached them yet)."""


@dataclass(slots=True, kw_only=True)
class CandidateState:
    """Standing in a new epoch, asking for votes until `election_at`."""

    role: ClassVar[Role] = Role.CANDIDATE
    election_at: int = NEVER


@dataclass(slots=True, kw_only=True)
class FollowerState:
    """Fetching from the leader of its epoch; stands if the leader is silent past the deadline."""

    role: ClassVar[Role] = Role.FOLLOWER
    fetch_deadline: int = NEVER
    leader_ended: bool = False
    """The leader said it stopped leading (EndQuorumEpoch, NOT_LEADER_OR_FOLLOWER)."""
    fetch: FetchInFlight | None = None
    transfer: SnapshotTransfer | None = None
    """A snapshot being copied from the leader (FetchSnapshot), while one is."""


@dataclass(slots=True, kw_only=True)
class ObserverState:
    """A non-voter, or a voter without durable state: fetching, never voting."""

    role: ClassVar[Role] = Role.OBSERVER
    fetch: FetchInFlight | None = None
    transfer: SnapshotTransfer | None = None


RoleState = (
    UnattachedState
    | ResignedState
    | ProspectiveState
    | CandidateState
    | FollowerState
    | ObserverState
    | LeaderState
)
"""The state of one role; the core holds exactly one."""

ElectionTimed = UnattachedState | ResignedState | ProspectiveState | CandidateState
"""The roles whose election timer makes the node stand (again)."""

Fetching = FollowerState | ObserverState
"""The roles that fetch from a leader (and may copy its snapshot)."""


@dataclass(slots=True, kw_only=True)
class VoteRound:
    """The (pre-)vote requests of the current round and who granted them."""

    requests: set[int] = field(default_factory=set)
    granted: set[int] = field(default_factory=set)
