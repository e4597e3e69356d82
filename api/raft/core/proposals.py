"""What the shell asks of a leader: entries to append, and voter changes (KIP-853).

A leader appends a proposal in its epoch at once and flushes it after the append linger (or
sooner, with the next flush); it is committed when the high watermark passes it (leading.py).
A node in any other role refuses, naming the leader it knows (`NotLeader`). A voter change is
one more entry, of kind VOTERS, under the rules `change_voters` spells out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from api.protocol.quorum.messages import Entry, EntryKind, ErrorCode
from api.raft.core import leading
from api.raft.core.errors import RaftError
from api.raft.core.ready import Batch, NotLeader, OffsetRange, VoterChangeRefused
from api.raft.core.roles import Role
from api.raft.core.voters import Voter, VoterSet

if TYPE_CHECKING:
    from api.raft.core.machine import RaftMachine


def propose(machine: RaftMachine, entries: Sequence[Batch]) -> OffsetRange | NotLeader:
    """Append `entries` (each a batch of `count` offsets) in this leader's epoch, or refuse."""
    if machine.role is not Role.LEADER:
        return NotLeader(leader_id=machine.leader_id, leader_epoch=machine.epoch)
    if not entries:
        raise RaftError("a proposal needs at least one entry")
    first = machine.log.end_offset
    for batch in entries:
        machine.append_entry(
            Entry(
                offset=machine.log.end_offset,
                epoch=machine.epoch,
                count=batch.count,
                payload=batch.payload,
            )
        )
    machine.start_linger()
    leading.answer_parked(machine, force=True)
    return OffsetRange(epoch=machine.epoch, first=first, last=machine.log.end_offset - 1)


def change_voters(
    machine: RaftMachine,
    *,
    add: Voter | None = None,
    remove: int | None = None,
    directory_id: str = "",
) -> OffsetRange | NotLeader | VoterChangeRefused:
    """KIP-853's AddRaftVoter / RemoveRaftVoter: append the new voter set, or refuse.

    One change at a time: the leader must have committed its own epoch (its LeaderChange
    marker) and the previous voters entry, so consecutive voter sets always share a
    majority. A voter is added only once caught up: it fetched (with its id, as an
    observer) up to the leader's end within the fetch timeout. The change counts at once
    (the latest voter set is in force); it is done when the high watermark passes it. A
    leader that removes itself leads until then and resigns.
    """
    leader = machine.leader_state
    if leader is None:
        return NotLeader(leader_id=machine.leader_id, leader_epoch=machine.epoch)

    def refuse(code: ErrorCode, message: str) -> VoterChangeRefused:
        return VoterChangeRefused(error_code=code, message=message)

    if not machine.dynamic:
        return refuse(
            ErrorCode.UNSUPPORTED_VERSION,
            "the voters are fixed by controller.quorum.voters (kraft.version 0); "
            "a quorum formatted with --standalone or --initial-controllers can change them",
        )
    if machine.high_watermark <= leader.epoch_start_offset:
        return refuse(
            ErrorCode.REQUEST_TIMED_OUT,
            "the leader has not committed its epoch yet; retry in a moment",
        )
    if machine.history.latest_offset >= machine.high_watermark:
        return refuse(
            ErrorCode.REQUEST_TIMED_OUT,
            "another voter change is not committed yet; retry once it is",
        )
    current = machine.history.latest
    if add is not None:
        if add.id in machine.voters:
            return refuse(ErrorCode.DUPLICATE_VOTER, f"node {add.id} is already a voter")
        progress = leader.progress.get(add.id)
        caught_up = (
            progress is not None
            and progress.last_caught_up_ms >= 0
            and machine.now_ms - progress.last_caught_up_ms < machine.config.fetch_timeout_ms
        )
        if not caught_up:
            return refuse(
                ErrorCode.REQUEST_TIMED_OUT,
                f"node {add.id} has not caught up with the leader's log; start it as an "
                "observer (controller.quorum.bootstrap.servers) and retry once it has",
            )
        new = current.adding(add)
    elif remove is not None:
        voter = current.get(remove)
        if voter is None or (directory_id and voter.directory_id != directory_id):
            return refuse(
                ErrorCode.VOTER_NOT_FOUND,
                f"node {remove}{' with directory ' + directory_id if directory_id else ''}"
                f" is not a voter (voters: {sorted(machine.voters)})",
            )
        if len(machine.voters) == 1:
            return refuse(ErrorCode.INVALID_REQUEST, "the last voter cannot be removed")
        new = current.removing(remove)
    else:
        raise RaftError("a voter change adds or removes a voter")
    return _append_voters(machine, new)


def upgrade_voters(
    machine: RaftMachine, voters: VoterSet, *, count: int = 1
) -> OffsetRange | NotLeader | VoterChangeRefused:
    """The kraft.version upgrade of a static quorum (KIP-853): its voters into the log.

    The leader appends `voters` (the static voters of `controller.quorum.voters`, with
    their endpoints) as the log's first voters entry: from then on every node that holds it
    takes its voters from the log, and voter changes may follow once it is committed. Each
    voter's directory id the caller does not know is the one it fetches with. Refused
    (REQUEST_TIMED_OUT) until the leader's epoch is committed; INVALID_REQUEST on a quorum
    whose voters are already in the log, or for another set than the static one. The entry
    spans `count` offsets (the shell's block: the kraft.version records with the voters).
    """
    leader = machine.leader_state
    if leader is None:
        return NotLeader(leader_id=machine.leader_id, leader_epoch=machine.epoch)
    if machine.dynamic:
        return VoterChangeRefused(
            error_code=ErrorCode.INVALID_REQUEST,
            message="the voters are in the log already (kraft.version 1)",
        )
    if voters.ids != machine.voters:
        return VoterChangeRefused(
            error_code=ErrorCode.INVALID_REQUEST,
            message=f"the upgrade names voters {sorted(voters.ids)}, the quorum's are "
            f"{sorted(machine.voters)}",
        )
    if machine.high_watermark <= leader.epoch_start_offset:
        return VoterChangeRefused(
            error_code=ErrorCode.REQUEST_TIMED_OUT,
            message="the leader has not committed its epoch yet; retry in a moment",
        )
    filled = []
    for voter in voters.voters:
        progress = leader.progress.get(voter.id)
        fetched = "" if progress is None else progress.directory_id
        filled.append(replace(voter, directory_id=voter.directory_id or fetched))
    return _append_voters(machine, VoterSet.of(filled), count=count)


def _append_voters(machine: RaftMachine, voters: VoterSet, *, count: int = 1) -> OffsetRange:
    """Append `voters` as a voters entry of the leader's epoch (in force at once)."""
    offset = machine.log.end_offset
    machine.append_entry(
        Entry(
            offset=offset,
            epoch=machine.epoch,
            payload=voters.encode(),
            count=count,
            kind=EntryKind.VOTERS,
        ),
        voters=voters,
    )
    machine.start_linger()
    leading.answer_parked(machine, force=True)
    leading.update_high_watermark(machine)
    return OffsetRange(epoch=machine.epoch, first=offset, last=offset + count - 1)
