"""The quorum's pure rules, messages and election state at their edges."""

from __future__ import annotations

import pytest

from api.protocol.quorum.messages import (
    NO_HIGH_WATERMARK,
    NO_LEADER,
    Entry,
    EntryKind,
    ErrorCode,
    FetchRequest,
    FetchSnapshotResponse,
    LeaderChangeMessage,
    LeaderIdAndEpoch,
    SnapshotId,
    VoteRequest,
)
from api.raft.core import QuorumState, QuorumStateError, Role
from api.raft.core.election import may_grant_pre_vote, may_grant_vote, successor_backoff
from api.raft.core.quorum_state import MAX_EPOCH
from api.raft.core.replication import LeaderState, majority_offset
from tests.support.raft_core import answer, drain, fetch, leader, make, role, vote
from tests.support.raft_states import machine

VOTERS = frozenset({1, 2, 3})


def test_the_majority_offset_of_an_even_number_of_voters() -> None:
    assert majority_offset([5, 3, 9, 1], 3) == 3  # three of four have reached 3
    assert majority_offset([5, 3, 9], 2) == 5
    assert majority_offset([7], 1) == 7
    state = LeaderState(epoch_start_offset=0, started_ms=0, voters=frozenset({1, 2, 3, 4}))
    state.record_fetch(2, 6, 0, 9)
    state.record_fetch(3, 4, 0, 9)
    assert state.high_watermark(leader=1, flushed_offset=9, majority=3) == 4


def test_vote_decisions_are_booleans() -> None:
    def grant(
        *, voted: int = -1, leader: int = -1, log_ok: bool = True, wiped: bool = False
    ) -> bool:
        return may_grant_vote(
            candidate=3,
            voted_id=voted,
            leader_id=leader,
            is_leader=False,
            log_ok=log_ok,
            catching_up=wiped,
        )

    assert grant() is True
    assert grant(log_ok=False) is False
    assert grant(wiped=True) is False
    assert grant(leader=1) is False
    assert grant(voted=2) is False
    assert grant(voted=3) is True
    assert may_grant_pre_vote(has_live_leader=False, log_ok=True, catching_up=False) is True


def test_a_voter_that_knows_the_leader_of_an_epoch_votes_for_no_one_else_in_it() -> None:
    core = make(2, epoch=3, leader=1)  # learnt from BeginQuorumEpoch: no vote cast
    drain(core)
    core.step(3, vote(3, 3, 9, 99))
    response = answer(drain(core))
    assert response.vote_granted is False and core.voted_id == -1


def test_later_successors_wait_twice_as_long_each_up_to_a_bound() -> None:
    assert [successor_backoff(p, 10_000) for p in range(-1, 6)] == [0, 0, 50, 100, 200, 400, 800]
    assert successor_backoff(12, 10_000) == 10_000
    assert successor_backoff(40, 86_400_000) == 50 << 20  # the shift is bounded


def test_a_fetch_at_the_leaders_end_is_caught_up() -> None:
    core = leader()
    end = core.log.end_offset
    core.tick(core.now_ms + 10)
    core.step(2, fetch(2, core.epoch, end, core.epoch))
    [two] = [r for r in core.describe_quorum().current_voters if r.replica_id == 2]
    assert two.last_caught_up_timestamp == core.now_ms == two.last_fetch_timestamp


def test_check_quorum_at_its_exact_bounds() -> None:
    # Its timeout is 1.5 fetch timeouts (Kafka's CHECK_QUORUM_TIMEOUT_FACTOR), rounded down.
    assert machine(leader(fetch_timeout_ms=1001)).config.check_quorum_timeout_ms == 1501
    core = leader(fetch_timeout_ms=1000)
    start = core.now_ms
    core.tick(start + 1499)
    assert core.role is Role.LEADER  # its first timeout: grace, no fetch needed yet
    core.tick(start + 1500)  # the first timeout has passed: checked, no fetch at all
    assert role(core) is Role.RESIGNED
    core = leader(fetch_timeout_ms=1000)
    start = core.now_ms
    core.tick(start + 500)
    core.step(2, fetch(2, core.epoch, 1, core.epoch))
    core.tick(start + 1999)
    assert core.role is Role.LEADER  # node 2 fetched 1,499 ms ago
    core.tick(start + 2000)
    assert role(core) is Role.RESIGNED  # exactly the timeout ago: not recent


# --- quorum-state ---------------------------------------------------------------------------


def test_a_quorum_state_epoch_is_one_an_election_can_pass() -> None:
    # One below int32's top: the next election's epoch must still fit an int32.
    assert MAX_EPOCH == 2**31 - 2
    assert QuorumState(leader_epoch=MAX_EPOCH, voters=VOTERS).leader_epoch == MAX_EPOCH
    for epoch in (-1, MAX_EPOCH + 1):
        with pytest.raises(QuorumStateError, match=f"leader epoch {epoch} is not in 0.."):
            QuorumState(leader_epoch=epoch, voters=VOTERS)


def test_every_role_is_its_own() -> None:
    assert len(Role) == len({role.value for role in Role}) == 7  # no value is an alias
    assert [role.name for role in Role] == [
        "UNATTACHED", "PROSPECTIVE", "CANDIDATE", "LEADER", "FOLLOWER", "RESIGNED", "OBSERVER"
    ]  # fmt: skip


# --- messages -------------------------------------------------------------------------------


def test_error_codes_and_sentinels_are_kafkas() -> None:
    assert {code.name: code.value for code in ErrorCode} == {
        "NONE": 0,
        "NOT_LEADER_OR_FOLLOWER": 6,
        "REQUEST_TIMED_OUT": 7,
        "UNSUPPORTED_VERSION": 35,
        "INVALID_REQUEST": 42,
        "FENCED_LEADER_EPOCH": 74,
        "UNKNOWN_LEADER_EPOCH": 75,
        "INCONSISTENT_VOTER_SET": 94,
        "SNAPSHOT_NOT_FOUND": 98,
        "POSITION_OUT_OF_RANGE": 99,
        "DUPLICATE_VOTER": 126,
        "VOTER_NOT_FOUND": 127,
    }
    assert NO_HIGH_WATERMARK == NO_LEADER == -1


def test_the_leader_change_marker_is_kafkas_json() -> None:
    marker = LeaderChangeMessage(leader_id=2, voters=(1, 2, 3), granting_voters=(2, 3))
    assert marker.encode() == b'{"version":0,"leaderId":2,"voters":[1,2,3],"grantingVoters":[2,3]}'


def test_message_defaults() -> None:
    entry = Entry(offset=0, epoch=1, payload=b"")
    assert entry.kind is EntryKind.DATA and entry.count == 1
    assert LeaderIdAndEpoch() == LeaderIdAndEpoch(leader_id=-1, leader_epoch=0)
    request = VoteRequest(
        correlation_id=1, replica_epoch=1, replica_id=1, last_offset_epoch=0, last_offset=0
    )
    assert request.pre_vote is False
    fetch_request = FetchRequest(
        correlation_id=1, replica_id=1, current_leader_epoch=1, fetch_offset=0,
        last_fetched_epoch=0,
    )  # fmt: skip
    assert fetch_request.max_wait_ms == 0
    chunk = FetchSnapshotResponse(
        correlation_id=1,
        error_code=ErrorCode.NONE,
        snapshot_id=SnapshotId(end_offset=5, epoch=1),
        current_leader=LeaderIdAndEpoch(leader_id=1, leader_epoch=1),
        size=10,
        position=0,
        unaligned_records=b"\x00secret-ish bytes",
    )
    assert chunk.unaligned_records and "unaligned_records" not in repr(chunk)  # bytes kept out
