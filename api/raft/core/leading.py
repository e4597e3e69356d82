"""The leader's duties besides answering a message: its high watermark, parked fetches, timers.

The leader moves its high watermark to what a majority flushed (never below its epoch's
start: Raft's figure 8), answers the fetches it parked when there is news or their wait is
over, resigns when a majority stops fetching (check-quorum), resends BeginQuorumEpoch, and
describes the quorum (DescribeQuorum). Functions of the machine (machine.py), used by the
message rules (handlers.py), the elections (election.py), the timers and the proposals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.protocol.quorum.messages import (
    NO_HIGH_WATERMARK,
    DescribeQuorumResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    ReplicaState,
)

if TYPE_CHECKING:
    from api.raft.core.machine import RaftMachine


# ------------------------------------------------------------------------ high watermark


def update_high_watermark(machine: RaftMachine) -> None:
    """Move the leader's HW to the majority's flushed end, once past its epoch start."""
    leader = machine.leader_state
    if leader is None:
        return
    hw = leader.high_watermark(
        leader=machine.id, flushed_offset=machine.log.flushed_offset, majority=machine.majority
    )
    if hw > leader.epoch_start_offset and hw > machine.high_watermark:
        machine.set_high_watermark(hw)
        answer_parked(machine, force=True)
        if not machine.is_voter and machine.high_watermark > machine.history.latest_offset:
            # KIP-853: a leader that removed itself leads until that change is committed.
            machine.resign()


def answer_parked(machine: RaftMachine, *, force: bool) -> None:
    """Answer parked fetches: all of them (news), or those whose wait is over."""
    leader = machine.leader_state
    if leader is None:
        return
    for replica, (msg, deadline) in list(leader.parked.items()):
        if force or machine.now_ms >= deadline:
            del leader.parked[replica]
            answer_fetch(machine, replica, msg)


def leader_high_watermark(machine: RaftMachine) -> int:
    """The high watermark a leader tells fetchers: none until it has committed its epoch."""
    leader = machine.leader_state
    if leader is None or machine.high_watermark <= leader.epoch_start_offset:
        return NO_HIGH_WATERMARK
    return machine.high_watermark


def answer_fetch(machine: RaftMachine, replica: int, msg: FetchRequest) -> None:
    """Answer `replica`'s fetch with the entries from its offset on (the shell fills them)."""
    high_watermark = leader_high_watermark(machine)
    if machine.leader_state is not None:
        machine.leader_state.told[replica] = high_watermark
    machine.send(
        replica,
        FetchResponse(
            correlation_id=msg.correlation_id,
            error_code=ErrorCode.NONE,
            high_watermark=high_watermark,
            current_leader=machine.current_leader(),
        ),
        read_from=msg.fetch_offset,
        until=machine.log.end_offset,
    )


# ---------------------------------------------------------------------------- timers


def tick_leader(machine: RaftMachine, now: int) -> None:
    """Check-quorum, parked fetches and BeginQuorumEpoch retries."""
    leader = machine.leader_state
    if leader is None:
        return
    if not leader.has_quorum(
        leader=machine.id,
        now_ms=now,
        timeout_ms=machine.config.check_quorum_timeout_ms,
        majority=machine.majority,
    ):
        machine.resign()
        return
    answer_parked(machine, force=False)
    for voter, sent in list(leader.begin_sent_ms.items()):
        if now >= sent + machine.config.request_timeout_ms:
            machine.send_begin(voter)


# ------------------------------------------------------------------------- describing


def describe_quorum(machine: RaftMachine) -> DescribeQuorumResponse:
    """DescribeQuorum: the leader's view of every replica (the lag `mlog quorum describe` shows)."""
    leader = machine.leader_state
    if leader is None:
        return DescribeQuorumResponse(
            error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
            leader_id=machine.leader_id,
            leader_epoch=machine.epoch,
            high_watermark=NO_HIGH_WATERMARK,
            current_voters=(),
            observers=(),
        )

    def state(replica: int) -> ReplicaState:
        if replica == machine.id:
            now = machine.now_ms
            return ReplicaState(
                replica_id=replica,
                log_end_offset=machine.log.end_offset,
                last_fetch_timestamp=now,
                last_caught_up_timestamp=now,
            )
        progress = leader.described(replica)
        return ReplicaState(
            replica_id=replica,
            log_end_offset=progress.end_offset,
            last_fetch_timestamp=progress.last_fetch_ms,
            last_caught_up_timestamp=progress.last_caught_up_ms,
            directory_id=progress.directory_id,
        )

    return DescribeQuorumResponse(
        error_code=ErrorCode.NONE,
        leader_id=machine.id,
        leader_epoch=machine.epoch,
        high_watermark=leader_high_watermark(machine),
        current_voters=tuple(state(voter) for voter in sorted(machine.voters)),
        observers=tuple(
            state(replica) for replica in leader.described_observers(machine.voters, machine.now_ms)
        ),
    )
