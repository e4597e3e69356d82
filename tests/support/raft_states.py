"""Test helpers: the machine behind a core's facade, and its role state's timers.

`machine(core)` is the one door of the core's own tests to the internal machine (its role
state, timers, transitions); the shell's tests never use it
(`tests/api/raft/test_raft_boundaries.py`). The timers read NEVER/None where the role has none.
"""

from __future__ import annotations

from api.raft.core import RaftCore
from api.raft.core.machine import RaftMachine
from api.raft.core.states import (
    NEVER,
    ElectionTimed,
    FetchInFlight,
    FollowerState,
    ObserverState,
    ProspectiveState,
)
from api.raft.core.transfer import SnapshotTransfer


def machine(core: RaftCore) -> RaftMachine:
    """The machine behind `core`'s facade, for the core's own tests to look inside."""
    return core._machine


def election_at(core: RaftCore) -> int:
    """When the core's election timer fires (NEVER in a role without one)."""
    state = machine(core).state
    return state.election_at if isinstance(state, ElectionTimed) else NEVER


def prevote_at(core: RaftCore) -> int:
    """When a backing-off prospective asks for pre-votes (NEVER otherwise)."""
    state = machine(core).state
    return state.prevote_at if isinstance(state, ProspectiveState) else NEVER


def fetch_deadline(core: RaftCore) -> int:
    """When a follower gives its silent leader up (NEVER in another role)."""
    state = machine(core).state
    return state.fetch_deadline if isinstance(state, FollowerState) else NEVER


def leader_ended(core: RaftCore) -> bool:
    """Whether a follower heard that its leader stopped leading."""
    state = machine(core).state
    return isinstance(state, FollowerState) and state.leader_ended


def fetch_in_flight(core: RaftCore) -> FetchInFlight | None:
    """The outstanding Fetch of a follower or observer."""
    state = machine(core).state
    return state.fetch if isinstance(state, FollowerState | ObserverState) else None


def running_fetch(core: RaftCore) -> FetchInFlight:
    """The outstanding Fetch, which the test expects."""
    found = fetch_in_flight(core)
    assert found is not None
    return found


def transfer(core: RaftCore) -> SnapshotTransfer | None:
    """The snapshot transfer of a follower or observer, if one runs."""
    state = machine(core).state
    return state.transfer if isinstance(state, FollowerState | ObserverState) else None


def running_transfer(core: RaftCore) -> SnapshotTransfer:
    """The snapshot transfer, which the test expects to run."""
    found = transfer(core)
    assert found is not None
    return found
