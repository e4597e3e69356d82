"""FetchSnapshot (KIP-630): a follower below the leader's log start copies its snapshot.

The leader answers a Fetch below its log start with its newest snapshot's id (handlers.py,
which starts the transfer here; this module needs nothing of it);
the follower then asks for the snapshot in chunks (`FetchSnapshotRequest`: id, position, max
bytes), the leader's core checks each request and its shell fills the bytes, and once the last
chunk is in and its checksum holds, the follower's core hands its shell a `SnapshotInstall`
and fetches on from the snapshot's end. The bytes are opaque here but for their framing: the
last 4 are a big-endian CRC32 of the rest. A transfer starts over (with a Fetch, which names
the leader's snapshot again) whenever anything disagrees: another leader, SNAPSHOT_NOT_FOUND
(the leader has a newer snapshot), a position that is not the one asked for, a bad checksum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.protocol.quorum.messages import (
    NO_LEADER,
    UNCOUNTED_REPLICA,
    ErrorCode,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    SnapshotId,
)
from api.raft.core.replication import VoterProgress, leader_refusal
from api.raft.core.states import FetchInFlight, FollowerState, ObserverState
from api.raft.core.transfer import SnapshotTransfer, snapshot_checksum_ok

if TYPE_CHECKING:
    from api.raft.core.machine import RaftMachine


# ------------------------------------------------------------------------------ the leader


def on_fetch_snapshot_request(machine: RaftMachine, sender: int, msg: FetchSnapshotRequest) -> None:
    """Check a chunk request; the shell fills the bytes of the answer."""

    def answer(error: ErrorCode, until: int = 0) -> None:
        machine.send(
            sender,
            FetchSnapshotResponse(
                correlation_id=msg.correlation_id,
                error_code=error,
                snapshot_id=msg.snapshot_id,
                current_leader=machine.current_leader(),
                size=0,
                position=msg.position,
            ),
            read_from=msg.position,
            until=until,
        )

    if msg.replica_id not in (sender, UNCOUNTED_REPLICA) or sender == machine.id:
        return
    leader = machine.leader_state
    refusal = leader_refusal(
        machine.state, epoch=machine.epoch, current_leader_epoch=msg.current_leader_epoch
    )
    if refusal is not None or leader is None:
        answer(refusal or ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return
    if msg.snapshot_id != machine.log.snapshot:
        answer(ErrorCode.SNAPSHOT_NOT_FOUND)
        return
    if msg.replica_id == sender:
        # A replica copying a snapshot is alive (check-quorum), though it acknowledges nothing.
        leader.progress.setdefault(sender, VoterProgress()).last_fetch_ms = machine.now_ms
    size = min(msg.max_bytes, machine.config.fetch_snapshot_max_bytes)
    answer(ErrorCode.NONE, msg.position + max(size, 1))


# ---------------------------------------------------------------------------- the follower


def start_transfer(machine: RaftMachine, source: int, snapshot_id: SnapshotId) -> None:
    """The leader says our position is below its log start: copy its snapshot from byte 0."""
    state = machine.state
    if not isinstance(state, FollowerState | ObserverState):
        return
    state.fetch = None
    state.transfer = SnapshotTransfer(snapshot_id=snapshot_id, source=source)
    machine.snapshot_transfers += 1
    request_chunk(machine)


def request_chunk(machine: RaftMachine) -> None:
    """Ask for the next chunk (again, after a timeout)."""
    transfer = _transfer(machine)
    if transfer is None:
        return
    transfer.correlation = machine.next_correlation()
    transfer.retry_at = machine.now_ms + machine.config.request_timeout_ms
    machine.send(
        transfer.source,
        FetchSnapshotRequest(
            correlation_id=transfer.correlation,
            replica_id=machine.fetch_replica_id,
            current_leader_epoch=machine.epoch,
            snapshot_id=transfer.snapshot_id,
            position=len(transfer.data),
            max_bytes=machine.config.fetch_snapshot_max_bytes,
        ),
    )


def abandon(machine: RaftMachine, *, retry_in_ms: int) -> None:
    """Give the transfer up; a Fetch after `retry_in_ms` finds out what the leader offers now."""
    state = machine.state
    if not isinstance(state, FollowerState | ObserverState):
        return
    state.transfer = None
    if retry_in_ms == 0:
        machine.send_fetch()
        return
    # Correlation id 0 is never sent: no answer matches it, and at its retry time the tick
    # sends a real Fetch.
    state.fetch = FetchInFlight(
        correlation=0,
        destination=machine.fetch_target,
        offset=machine.log.end_offset,
        last_epoch=machine.log.last_epoch,
        retry_at=machine.now_ms + retry_in_ms,
    )


def tick_transfer(machine: RaftMachine, now: int) -> None:
    """A chunk request went unanswered: ask again (an observer asks around for the leader)."""
    state = machine.state
    transfer = _transfer(machine)
    if transfer is None or now < transfer.retry_at:
        return
    if isinstance(state, ObserverState):
        state.transfer = None
        machine.leader_id = NO_LEADER
        machine.fetch_target = NO_LEADER
        machine.send_fetch()
        return
    request_chunk(machine)


def on_fetch_snapshot_response(
    machine: RaftMachine, sender: int, msg: FetchSnapshotResponse
) -> None:
    """Take a chunk: ask for the next one, install the whole snapshot, or start over."""
    hint = msg.current_leader
    if hint.leader_epoch > machine.epoch:
        if machine.may_follow(hint.leader_id):
            machine.become_follower(hint.leader_epoch, hint.leader_id)
        else:
            machine.become_unattached(hint.leader_epoch)
        return
    transfer = _transfer(machine)
    if transfer is None or transfer.correlation != msg.correlation_id or transfer.source != sender:
        return  # late, duplicated, or for a transfer given up
    if msg.error_code != ErrorCode.NONE or hint.leader_id != sender:
        abandon(machine, retry_in_ms=machine.config.retry_backoff_ms)
        return
    chunk = msg.unaligned_records
    position = len(transfer.data)
    if (
        msg.snapshot_id != transfer.snapshot_id
        or msg.position != position
        or position + len(chunk) > msg.size
        or (not chunk and position < msg.size)
    ):
        abandon(machine, retry_in_ms=0)
        return
    state = machine.state
    if isinstance(state, FollowerState) and machine.leader_id == sender:
        state.fetch_deadline = machine.now_ms + machine.config.fetch_timeout_ms
        machine.fetched_ms = machine.now_ms
    transfer.data += chunk
    if len(transfer.data) < msg.size:
        request_chunk(machine)
        return
    data = bytes(transfer.data)
    if not snapshot_checksum_ok(data):
        abandon(machine, retry_in_ms=0)
        return
    install(machine, transfer.snapshot_id, data)


def install(machine: RaftMachine, snapshot_id: SnapshotId, data: bytes) -> None:
    """Replace the log by the snapshot (the shell does it first in the next Ready), fetch on."""
    machine.install_snapshot(snapshot_id, data)
    machine.send_fetch()


def _transfer(machine: RaftMachine) -> SnapshotTransfer | None:
    state = machine.state
    return state.transfer if isinstance(state, FollowerState | ObserverState) else None
