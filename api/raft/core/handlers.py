"""How the core answers each message (KIP-595 / KIP-996 rules), from the door on.

`step` drops a malformed message and hands each other one to its rule; the rules are
functions of the machine (machine.py), using its transitions, the elections (election.py)
and the leader's duties (leading.py), and never do I/O. The rules for FetchSnapshot are in
snapshot_fetch.py, which a Fetch answered by a snapshot id starts and which needs nothing of
this module.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from api.protocol.quorum.bounds import out_of_range
from api.protocol.quorum.messages import (
    NO_HIGH_WATERMARK,
    NO_LEADER,
    UNCOUNTED_REPLICA,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EntryKind,
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from api.raft.core import leading, snapshot_fetch
from api.raft.core.election import (
    ask_pre_vote_again,
    become_candidate,
    become_leader,
    log_at_least_as_up_to_date,
    may_grant_pre_vote,
    may_grant_vote,
    successor_backoff,
)
from api.raft.core.errors import RaftError
from api.raft.core.replication import (
    LeaderState,
    VoterProgress,
    diverging_epoch,
    leader_refusal,
    truncation_offset,
)
from api.raft.core.roles import Role
from api.raft.core.states import (
    FollowerState,
    ObserverState,
    UnattachedState,
)
from api.raft.core.voters import VoterSet

if TYPE_CHECKING:
    from api.raft.core.machine import RaftMachine


# ------------------------------------------------------------------------------- the door


def step(machine: RaftMachine, sender: int, message: Message) -> None:
    """Handle one message from `sender`."""
    if not well_formed(message):
        # Dropped before it changes anything, as a lost message: the transport refused it
        # already (INVALID_REQUEST) if it came over the wire.
        return
    _hear(machine, sender, message)
    if isinstance(message, VoteRequest):
        on_vote_request(machine, sender, message)
    elif isinstance(message, VoteResponse):
        on_vote_response(machine, sender, message)
    elif isinstance(message, BeginQuorumEpochRequest):
        on_begin_quorum_epoch(machine, sender, message)
    elif isinstance(message, EndQuorumEpochRequest):
        on_end_quorum_epoch(machine, sender, message)
    elif isinstance(message, FetchRequest):
        on_fetch_request(machine, sender, message)
    elif isinstance(message, FetchResponse):
        on_fetch_response(machine, sender, message)
    elif isinstance(message, FetchSnapshotRequest):
        snapshot_fetch.on_fetch_snapshot_request(machine, sender, message)
    elif isinstance(message, FetchSnapshotResponse):
        snapshot_fetch.on_fetch_snapshot_response(machine, sender, message)
    elif isinstance(message, BeginQuorumEpochResponse):
        state = machine.state
        if isinstance(state, LeaderState) and message.leader_epoch == machine.epoch:
            state.begin_sent_ms.pop(sender, None)
    elif isinstance(message, EndQuorumEpochResponse):
        pass  # Nothing to do: the election that follows tells the rest.


def well_formed(message: Message) -> bool:
    """Whether every number of `message` is in its range (`bounds.out_of_range`)."""
    return out_of_range(message) is None


def message_epoch(message: Message) -> int | None:
    """The epoch a message shows its sender is in (None for a message that shows none)."""
    if isinstance(message, VoteRequest):
        return message.replica_epoch
    if isinstance(message, FetchResponse):
        return message.current_leader.leader_epoch
    if isinstance(message, FetchRequest | FetchSnapshotRequest):
        return message.current_leader_epoch
    if isinstance(message, FetchSnapshotResponse):
        return message.current_leader.leader_epoch
    if isinstance(
        message,
        VoteResponse | BeginQuorumEpochRequest | BeginQuorumEpochResponse | EndQuorumEpochRequest,
    ):
        return message.leader_epoch
    return None


def _hear(machine: RaftMachine, sender: int, message: Message) -> None:
    """A voter without durable state learns the epochs the others are in (its vote fence)."""
    if not machine.catching_up or sender not in machine.voters:
        return
    epoch = message_epoch(message)
    if epoch is not None:
        machine.heard[sender] = max(machine.heard.get(sender, 0), epoch)


def hears_leader(machine: RaftMachine) -> bool:
    """Whether this node leads, or heard its leader within the fetch timeout (KIP-996).

    Such a node neither grants a pre-vote nor lets a Vote, a BeginQuorumEpoch or an
    EndQuorumEpoch of another node move it to a newer epoch (Raft's leader stickiness,
    Ongaro's thesis 4.2.3): a real election needs a majority that no longer hears the leader
    (pre-votes first), so only a request that could not win (or a forged one) is turned away,
    and a leader cut off from its majority resigns by check-quorum half a timeout later.
    """
    state = machine.state
    return machine.role is Role.LEADER or (
        (
            (isinstance(state, FollowerState) and not state.leader_ended)
            or (isinstance(state, ObserverState) and machine.leader_id != NO_LEADER)
        )
        and machine.now_ms - machine.fetched_ms < machine.config.fetch_timeout_ms
    )


def _known_candidate(machine: RaftMachine, msg: VoteRequest) -> bool:
    """Whether a candidate may be a voter as far as this node can tell.

    A voter of the set in force is. In a dynamic quorum another may be too, made one by a
    voters entry this node lacks: its log then holds that entry, so it is strictly ahead of
    this one (logs of the same last epoch and end are the same log). A candidate that is
    neither is no voter, and its request changes nothing here.
    """
    if msg.replica_id in machine.voters:
        return True
    return machine.dynamic and (msg.last_offset_epoch, msg.last_offset) > (
        machine.log.last_epoch,
        machine.log.end_offset,
    )


# ------------------------------------------------------------------------------- votes


def on_vote_request(machine: RaftMachine, sender: int, msg: VoteRequest) -> None:
    """Grant or refuse a vote or pre-vote; a real vote is persisted before the answer."""

    def reply(granted: bool, error: ErrorCode = ErrorCode.NONE) -> None:
        # Only a live leader is named: a prospective must not go back to a dead one.
        live_leader = (
            machine.leader_id if machine.role in (Role.LEADER, Role.FOLLOWER) else NO_LEADER
        )
        machine.send(
            sender,
            VoteResponse(
                correlation_id=msg.correlation_id,
                error_code=error,
                leader_id=live_leader,
                leader_epoch=machine.epoch,
                vote_granted=granted,
            ),
        )

    if sender != msg.replica_id or sender == machine.id:
        return
    if not machine.dynamic and (sender not in machine.voters or not machine.is_voter):
        reply(False, ErrorCode.INCONSISTENT_VOTER_SET)
        return
    if not _known_candidate(machine, msg):
        reply(False, ErrorCode.INCONSISTENT_VOTER_SET)
        return
    # A dynamic quorum's node votes whatever its own voter set says (KIP-853, as in Raft):
    # its set may lag the candidate's (it lacks the entry that made it or the candidate a
    # voter), and the election needs it. Safety needs only one durable vote per epoch and
    # the log check, which hold for every node with durable state.
    log_ok = log_at_least_as_up_to_date(
        last_epoch=msg.last_offset_epoch,
        end_offset=msg.last_offset,
        than_epoch=machine.log.last_epoch,
        than_end_offset=machine.log.end_offset,
    )
    if msg.pre_vote:
        # KIP-996: nothing changes here, whatever the answer.
        live = hears_leader(machine)
        granted = msg.replica_epoch >= machine.epoch and may_grant_pre_vote(
            has_live_leader=live, log_ok=log_ok, catching_up=machine.catching_up
        )
        if granted and machine.role is Role.PROSPECTIVE and sender > machine.id:
            # Two prospectives at once (both followers saw the leader die together): granting
            # each other makes two candidates and a split vote, a backoff more. With equal
            # logs the lower id stands; a more up-to-date log still gets the grant. Pre-votes
            # change no state, so this is about liveness only.
            granted = (msg.last_offset_epoch, msg.last_offset) != (
                machine.log.last_epoch,
                machine.log.end_offset,
            )
        reply(granted)
        return
    if msg.replica_epoch < machine.epoch:
        reply(False)
        return
    if msg.replica_epoch > machine.epoch and hears_leader(machine):
        reply(False)  # sticky: the leader it hears is alive (see `hears_leader`)
        return
    if msg.replica_epoch > machine.epoch:
        machine.become_unattached(msg.replica_epoch)
    granted = may_grant_vote(
        candidate=sender,
        voted_id=machine.voted_id,
        leader_id=machine.leader_id,
        is_leader=machine.role is Role.LEADER,
        log_ok=log_ok,
        catching_up=machine.catching_up,
    )
    if granted and machine.voted_id != sender:
        machine.voted_id = sender
        machine.persist()
        if isinstance(machine.state, UnattachedState):
            machine.state.election_at = machine.now_ms + machine.config.election_timeout_ms
    reply(granted)


def on_vote_response(machine: RaftMachine, sender: int, msg: VoteResponse) -> None:
    """Count (pre-)votes of the current round; learn of a newer epoch or a leader."""
    if msg.leader_epoch > machine.epoch:
        if machine.may_follow(msg.leader_id):
            machine.become_follower(msg.leader_epoch, msg.leader_id)
        else:
            machine.become_unattached(msg.leader_epoch)
        return
    if msg.correlation_id not in machine.votes.requests or msg.leader_epoch != machine.epoch:
        return
    if machine.role is Role.PROSPECTIVE:
        if (
            not msg.vote_granted
            and machine.may_follow(msg.leader_id)
            and (machine.epoch, msg.leader_id) != machine.ended
        ):
            # KIP-996: a prospective that hears of a leader of its epoch follows it again.
            machine.become_follower(machine.epoch, msg.leader_id)
            return
        if msg.vote_granted:
            machine.votes.granted.add(sender)
            if machine.has_majority(machine.votes.granted):
                become_candidate(machine)
        elif msg.leader_id != NO_LEADER and (machine.epoch, msg.leader_id) == machine.ended:
            # The voter still follows the leader that resigned: the EndQuorumEpoch sent to it
            # is on its way. Asked again soon, it grants (or stands itself, if its log is the
            # longer); otherwise this election would wait for the election timeout.
            ask_pre_vote_again(machine, sender)
    elif machine.role is Role.CANDIDATE and msg.vote_granted:
        machine.votes.granted.add(sender)
        if machine.has_majority(machine.votes.granted):
            become_leader(machine)


def on_begin_quorum_epoch(machine: RaftMachine, sender: int, msg: BeginQuorumEpochRequest) -> None:
    """A new leader announces its epoch: follow it."""

    def reply(error: ErrorCode) -> None:
        machine.send(
            sender,
            BeginQuorumEpochResponse(
                correlation_id=msg.correlation_id,
                error_code=error,
                leader_id=machine.leader_id,
                leader_epoch=machine.epoch,
            ),
        )

    if sender != msg.leader_id or not machine.may_follow(sender):
        reply(ErrorCode.INCONSISTENT_VOTER_SET)
        return
    # A leader this node does not know as a voter was elected by votes this node may have
    # cast (then it follows): else it hears of that leader from its fetches and pre-votes.
    voted_for = machine.voted_id == sender and msg.leader_epoch == machine.epoch
    if sender not in machine.voters and not voted_for:
        reply(ErrorCode.INCONSISTENT_VOTER_SET)
        return
    if msg.leader_epoch < machine.epoch or (
        msg.leader_epoch == machine.epoch and machine.leader_id not in (NO_LEADER, sender)
    ):
        reply(ErrorCode.FENCED_LEADER_EPOCH)
        return
    if msg.leader_epoch > machine.epoch and hears_leader(machine):
        # Sticky: a leader of this epoch is alive here (the same id too: a forged request
        # may name it). A real new one retries until this node no longer hears the old.
        reply(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return
    if not (machine.role is Role.FOLLOWER and machine.leader_id == sender):
        machine.become_follower(msg.leader_epoch, sender)
    machine.fetched_ms = machine.now_ms
    reply(ErrorCode.NONE)


def on_end_quorum_epoch(machine: RaftMachine, sender: int, msg: EndQuorumEpochRequest) -> None:
    """The leader resigned: its preferred successors stand soon, the first at once."""
    stale = msg.leader_epoch < machine.epoch or sender != msg.leader_id
    # Sticky: only the leader this node hears may end an epoch here (see `hears_leader`).
    other = (
        not stale
        and hears_leader(machine)
        and (sender, msg.leader_epoch)
        != (
            machine.leader_id,
            machine.epoch,
        )
    )
    error = ErrorCode.NONE
    if stale:
        error = ErrorCode.FENCED_LEADER_EPOCH
    elif other:
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    machine.send(
        sender,
        EndQuorumEpochResponse(
            correlation_id=msg.correlation_id,
            error_code=error,
            leader_id=machine.leader_id,
            leader_epoch=machine.epoch,
        ),
    )
    if error is not ErrorCode.NONE or not (sender in machine.voters or sender == machine.leader_id):
        return
    if msg.leader_epoch > machine.epoch:
        machine.become_unattached(msg.leader_epoch)
    if machine.catching_up or not machine.may_stand:
        return
    successors = msg.preferred_successors
    position = successors.index(machine.id) if machine.id in successors else len(successors)
    at = machine.now_ms + successor_backoff(position, machine.config.election_backoff_max_ms)
    state = machine.state
    if isinstance(state, FollowerState) and machine.leader_id == sender:
        state.leader_ended = True
        machine.ended = (machine.epoch, sender)
        state.fetch_deadline = min(state.fetch_deadline, at)
    elif isinstance(state, UnattachedState):
        state.election_at = min(state.election_at, at)


# --------------------------------------------------------------------------- fetching


def on_fetch_request(machine: RaftMachine, sender: int, msg: FetchRequest) -> None:
    """Answer a fetch as leader: diverging epoch, records, or park it until there is news."""

    def refuse(error: ErrorCode) -> None:
        machine.send(
            sender,
            FetchResponse(
                correlation_id=msg.correlation_id,
                error_code=error,
                high_watermark=NO_HIGH_WATERMARK,
                current_leader=machine.current_leader(),
            ),
        )

    if msg.replica_id not in (sender, UNCOUNTED_REPLICA) or sender == machine.id:
        return
    # A fetch without a replica id (a voter without durable state) is answered, never counted:
    # not toward the high watermark, not as alive for check-quorum.
    counted = msg.replica_id == sender
    leader = machine.leader_state
    refusal = leader_refusal(
        machine.state, epoch=machine.epoch, current_leader_epoch=msg.current_leader_epoch
    )
    if refusal is not None or leader is None:
        refuse(refusal or ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return
    if not counted:
        leader.record_uncounted(
            sender,
            msg.fetch_offset,
            machine.now_ms,
            machine.log.end_offset,
            msg.replica_directory_id,
        )
    snapshot = machine.log.snapshot
    below_start = snapshot is not None and machine.log.below_start(
        fetch_offset=msg.fetch_offset, last_fetched_epoch=msg.last_fetched_epoch
    )
    diverging = None
    if below_start:
        # KIP-630: the log cannot show this fetcher where it agrees; the snapshot can.
        if counted:
            leader.progress.setdefault(sender, VoterProgress()).last_fetch_ms = machine.now_ms
    else:
        diverging = diverging_epoch(
            machine.log, fetch_offset=msg.fetch_offset, last_fetched_epoch=msg.last_fetched_epoch
        )
    if below_start or diverging is not None:
        machine.send(
            sender,
            FetchResponse(
                correlation_id=msg.correlation_id,
                error_code=ErrorCode.NONE,
                high_watermark=leading.leader_high_watermark(machine),
                current_leader=machine.current_leader(),
                snapshot_id=snapshot if below_start else None,
                diverging_epoch=diverging,
            ),
        )
        return
    leader.parked.pop(sender, None)
    if counted:
        leader.begin_sent_ms.pop(sender, None)
        leader.record_fetch(
            sender,
            msg.fetch_offset,
            machine.now_ms,
            machine.log.end_offset,
            msg.replica_directory_id,
        )
        leading.update_high_watermark(machine)
    if (
        msg.fetch_offset < machine.log.end_offset
        or msg.max_wait_ms == 0
        # A fetcher that has not heard the current high watermark (its own fetch may just
        # have moved it) learns it now: parked, its reads would lag by the whole wait.
        or leader.knows_less(sender, leading.leader_high_watermark(machine))
    ):
        leading.answer_fetch(machine, sender, msg)
    else:
        wait = min(msg.max_wait_ms, machine.config.fetch_max_wait_ms)
        leader.parked[sender] = (msg, machine.now_ms + wait)


def on_fetch_response(machine: RaftMachine, sender: int, msg: FetchResponse) -> None:
    """Truncate on divergence, or append and learn the high watermark; then fetch again."""
    hint = msg.current_leader
    if hint.leader_epoch > machine.epoch:
        if machine.may_follow(hint.leader_id):
            machine.become_follower(hint.leader_epoch, hint.leader_id)
        else:
            machine.become_unattached(hint.leader_epoch)
        return
    state = machine.state
    fetch = state.fetch if isinstance(state, FollowerState | ObserverState) else None
    if fetch is None or fetch.correlation != msg.correlation_id or fetch.destination != sender:
        return  # late, duplicated or from another incarnation's request
    if (fetch.offset, fetch.last_epoch) != (machine.log.end_offset, machine.log.last_epoch):
        return
    if msg.error_code != ErrorCode.NONE or hint.leader_id != sender:
        known = hint.leader_epoch == machine.epoch and machine.may_follow(hint.leader_id)
        if known and hint.leader_id not in (sender, machine.id) and machine.leader_id == NO_LEADER:
            machine.become_follower(machine.epoch, hint.leader_id)
            if machine.role is Role.OBSERVER:
                return
        state = machine.state
        if (
            isinstance(state, FollowerState)
            and sender == machine.leader_id
            and msg.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        ):
            # Our leader says it no longer leads this epoch (it resigned or restarted).
            state.leader_ended = True
            machine.ended = (machine.epoch, sender)
            state.fetch_deadline = machine.now_ms
        if isinstance(state, FollowerState | ObserverState):
            state.fetch = replace(fetch, retry_at=machine.now_ms + machine.config.retry_backoff_ms)
        return
    if hint.leader_epoch != machine.epoch:
        return
    if isinstance(state, FollowerState):
        if machine.leader_id != sender:
            return
        state.fetch_deadline = machine.now_ms + machine.config.fetch_timeout_ms
        machine.fetched_ms = machine.now_ms
    elif machine.role is Role.OBSERVER:
        machine.leader_id = sender
        machine.fetch_target = sender
        machine.fetched_ms = machine.now_ms
    else:
        return
    if msg.snapshot_id is not None:
        snapshot_fetch.start_transfer(machine, sender, msg.snapshot_id)
        return
    if msg.diverging_epoch is not None:
        _truncate_to(machine, msg.diverging_epoch)
    else:
        _append_records(machine, msg)
    state = machine.state
    if isinstance(state, FollowerState | ObserverState):
        state.fetch = None
        machine.send_fetch()


def _truncate_to(machine: RaftMachine, diverging: EpochEndOffset) -> None:
    machine.truncate_log(truncation_offset(machine.log, diverging))


def _append_records(machine: RaftMachine, msg: FetchResponse) -> None:
    for entry in msg.records:
        # Only what continues this log in order is taken; the rest comes on the next fetch.
        if entry.offset != machine.log.end_offset or not (
            machine.log.last_epoch <= entry.epoch <= machine.epoch
        ):
            break
        voters = None
        if entry.kind is EntryKind.VOTERS:
            try:
                voters = VoterSet.decode(entry.payload)
            except RaftError:
                break  # garbage: the leader's log never holds it
        machine.append_entry(entry, voters=voters)
    if msg.high_watermark >= 0:
        machine.set_high_watermark(min(msg.high_watermark, machine.log.end_offset))
        if machine.catching_up and machine.log.end_offset >= msg.high_watermark:
            caught_up(machine)


def caught_up(machine: RaftMachine) -> None:
    """A voter without durable state becomes a voter again once it is safe to vote.

    It has heard every other voter's epoch: it may have voted, before it lost its state, in
    any epoch up to the largest of those (a candidate persists its epoch before asking), so it
    takes that epoch with its vote spent. And it holds everything committed up to then: the
    high watermark it reached was reported by the leader of that same newest epoch. A high
    watermark of an older epoch's leader will not do: it may lack entries of a later epoch
    that this voter acknowledged before it lost its disk, and its vote could then elect a
    leader without them. Hearing a newer epoch, it moves to it and looks for that leader.
    """
    others = machine.voters - {machine.id}
    if not others <= set(machine.heard):
        return
    fence = max([machine.epoch, *machine.heard.values()])
    if fence > machine.epoch:
        machine.new_epoch(fence)
        machine.fetch_target = NO_LEADER
        return
    machine.rejoin_as_voter()
