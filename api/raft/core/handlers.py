"""How the core answers each message, and the leader's timers (KIP-595 / KIP-996 rules).

Functions of `RaftCore` kept apart from its state and transitions (core.py) so each module
has one job; they use the core's public transitions and helpers and its role states
(states.py), and never do I/O.
This module starts a snapshot transfer (snapshot_fetch.py), which needs nothing of it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from api.protocol.quorum.messages import (
    NO_HIGH_WATERMARK,
    NO_LEADER,
    UNCOUNTED_REPLICA,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    EntryKind,
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    ReplicaState,
    VoteRequest,
    VoteResponse,
)
from api.raft.core.election import (
    log_at_least_as_up_to_date,
    may_grant_pre_vote,
    may_grant_vote,
    successor_backoff,
)
from api.raft.core.errors import RaftError
from api.raft.core.replication import (
    VoterProgress,
    diverging_epoch,
    leader_refusal,
    truncation_offset,
)
from api.raft.core.roles import Role
from api.raft.core.snapshot_fetch import start_transfer
from api.raft.core.states import (
    FollowerState,
    ObserverState,
    UnattachedState,
)
from api.raft.core.voters import VoterSet

if TYPE_CHECKING:
    from api.raft.core.core import RaftCore


# ------------------------------------------------------------------------------- the door


def hears_leader(core: RaftCore) -> bool:
    """Whether this node leads, or heard its leader within the fetch timeout (KIP-996).

    Such a node neither grants a pre-vote nor lets a Vote, a BeginQuorumEpoch or an
    EndQuorumEpoch of another node move it to a newer epoch (Raft's leader stickiness,
    Ongaro's thesis 4.2.3): a real election needs a majority that no longer hears the leader
    (pre-votes first), so only a request that could not win (or a forged one) is turned away,
    and a leader cut off from its majority resigns by check-quorum within the same timeout.
    """
    state = core.state
    return core.role is Role.LEADER or (
        (
            (isinstance(state, FollowerState) and not state.leader_ended)
            or (isinstance(state, ObserverState) and core.leader_id != NO_LEADER)
        )
        and core.now_ms - core.fetched_ms < core.config.fetch_timeout_ms
    )


def _known_candidate(core: RaftCore, msg: VoteRequest) -> bool:
    """Whether a candidate may be a voter as far as this node can tell.

    A voter of the set in force is. In a dynamic quorum another may be too, made one by a
    voters entry this node lacks: its log then holds that entry, so it is strictly ahead of
    this one (logs of the same last epoch and end are the same log). A candidate that is
    neither is no voter, and its request changes nothing here.
    """
    if msg.replica_id in core.voters:
        return True
    return core.dynamic and (msg.last_offset_epoch, msg.last_offset) > (
        core.log.last_epoch,
        core.log.end_offset,
    )


# ------------------------------------------------------------------------------- votes


def on_vote_request(core: RaftCore, sender: int, msg: VoteRequest) -> None:
    """Grant or refuse a vote or pre-vote; a real vote is persisted before the answer."""

    def reply(granted: bool, error: ErrorCode = ErrorCode.NONE) -> None:
        # Only a live leader is named: a prospective must not go back to a dead one.
        live_leader = core.leader_id if core.role in (Role.LEADER, Role.FOLLOWER) else NO_LEADER
        core.send(
            sender,
            VoteResponse(
                correlation_id=msg.correlation_id,
                error_code=error,
                leader_id=live_leader,
                leader_epoch=core.epoch,
                vote_granted=granted,
            ),
        )

    if sender != msg.replica_id or sender == core.id:
        return
    if not core.dynamic and (sender not in core.voters or not core.is_voter):
        reply(False, ErrorCode.INCONSISTENT_VOTER_SET)
        return
    if not _known_candidate(core, msg):
        reply(False, ErrorCode.INCONSISTENT_VOTER_SET)
        return
    # A dynamic quorum's node votes whatever its own voter set says (KIP-853, as in Raft):
    # its set may lag the candidate's (it lacks the entry that made it or the candidate a
    # voter), and the election needs it. Safety needs only one durable vote per epoch and
    # the log check, which hold for every node with durable state.
    log_ok = log_at_least_as_up_to_date(
        last_epoch=msg.last_offset_epoch,
        end_offset=msg.last_offset,
        than_epoch=core.log.last_epoch,
        than_end_offset=core.log.end_offset,
    )
    if msg.pre_vote:
        # KIP-996: nothing changes here, whatever the answer.
        live = hears_leader(core)
        granted = msg.replica_epoch >= core.epoch and may_grant_pre_vote(
            has_live_leader=live, log_ok=log_ok, catching_up=core.catching_up
        )
        if granted and core.role is Role.PROSPECTIVE and sender > core.id:
            # Two prospectives at once (both followers saw the leader die together): granting
            # each other makes two candidates and a split vote, a backoff more. With equal
            # logs the lower id stands; a more up-to-date log still gets the grant. Pre-votes
            # change no state, so this is about liveness only.
            granted = (msg.last_offset_epoch, msg.last_offset) != (
                core.log.last_epoch,
                core.log.end_offset,
            )
        reply(granted)
        return
    if msg.replica_epoch < core.epoch:
        reply(False)
        return
    if msg.replica_epoch > core.epoch and hears_leader(core):
        reply(False)  # sticky: the leader it hears is alive (see `hears_leader`)
        return
    if msg.replica_epoch > core.epoch:
        core.become_unattached(msg.replica_epoch)
    granted = may_grant_vote(
        candidate=sender,
        voted_id=core.voted_id,
        leader_id=core.leader_id,
        is_leader=core.role is Role.LEADER,
        log_ok=log_ok,
        catching_up=core.catching_up,
    )
    if granted and core.voted_id != sender:
        core.voted_id = sender
        core.persist()
        if isinstance(core.state, UnattachedState):
            core.state.election_at = core.now_ms + core.config.election_timeout_ms
    reply(granted)


def on_vote_response(core: RaftCore, sender: int, msg: VoteResponse) -> None:
    """Count (pre-)votes of the current round; learn of a newer epoch or a leader."""
    if msg.leader_epoch > core.epoch:
        if core.may_follow(msg.leader_id):
            core.become_follower(msg.leader_epoch, msg.leader_id)
        else:
            core.become_unattached(msg.leader_epoch)
        return
    if msg.correlation_id not in core.votes.requests or msg.leader_epoch != core.epoch:
        return
    if core.role is Role.PROSPECTIVE:
        if (
            not msg.vote_granted
            and core.may_follow(msg.leader_id)
            and (core.epoch, msg.leader_id) != core.ended
        ):
            # KIP-996: a prospective that hears of a leader of its epoch follows it again.
            core.become_follower(core.epoch, msg.leader_id)
            return
        if msg.vote_granted:
            core.votes.granted.add(sender)
            if core.has_majority(core.votes.granted):
                core.become_candidate()
        elif msg.leader_id != NO_LEADER and (core.epoch, msg.leader_id) == core.ended:
            # The voter still follows the leader that resigned: the EndQuorumEpoch sent to it
            # is on its way. Asked again soon, it grants (or stands itself, if its log is the
            # longer); otherwise this election would wait for the election timeout.
            core.ask_pre_vote_again(sender)
    elif core.role is Role.CANDIDATE and msg.vote_granted:
        core.votes.granted.add(sender)
        if core.has_majority(core.votes.granted):
            core.become_leader()


def on_begin_quorum_epoch(core: RaftCore, sender: int, msg: BeginQuorumEpochRequest) -> None:
    """A new leader announces its epoch: follow it."""

    def reply(error: ErrorCode) -> None:
        core.send(
            sender,
            BeginQuorumEpochResponse(
                correlation_id=msg.correlation_id,
                error_code=error,
                leader_id=core.leader_id,
                leader_epoch=core.epoch,
            ),
        )

    if sender != msg.leader_id or not core.may_follow(sender):
        reply(ErrorCode.INCONSISTENT_VOTER_SET)
        return
    # A leader this node does not know as a voter was elected by votes this node may have
    # cast (then it follows): else it hears of that leader from its fetches and pre-votes.
    voted_for = core.voted_id == sender and msg.leader_epoch == core.epoch
    if sender not in core.voters and not voted_for:
        reply(ErrorCode.INCONSISTENT_VOTER_SET)
        return
    if msg.leader_epoch < core.epoch or (
        msg.leader_epoch == core.epoch and core.leader_id not in (NO_LEADER, sender)
    ):
        reply(ErrorCode.FENCED_LEADER_EPOCH)
        return
    if msg.leader_epoch > core.epoch and hears_leader(core):
        # Sticky: a leader of this epoch is alive here (the same id too: a forged request
        # may name it). A real new one retries until this node no longer hears the old.
        reply(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return
    if not (core.role is Role.FOLLOWER and core.leader_id == sender):
        core.become_follower(msg.leader_epoch, sender)
    core.fetched_ms = core.now_ms
    reply(ErrorCode.NONE)


def on_end_quorum_epoch(core: RaftCore, sender: int, msg: EndQuorumEpochRequest) -> None:
    """The leader resigned: its preferred successors stand soon, the first at once."""
    stale = msg.leader_epoch < core.epoch or sender != msg.leader_id
    # Sticky: only the leader this node hears may end an epoch here (see `hears_leader`).
    other = (
        not stale
        and hears_leader(core)
        and (sender, msg.leader_epoch)
        != (
            core.leader_id,
            core.epoch,
        )
    )
    error = ErrorCode.NONE
    if stale:
        error = ErrorCode.FENCED_LEADER_EPOCH
    elif other:
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    core.send(
        sender,
        EndQuorumEpochResponse(
            correlation_id=msg.correlation_id,
            error_code=error,
            leader_id=core.leader_id,
            leader_epoch=core.epoch,
        ),
    )
    if error is not ErrorCode.NONE or not (sender in core.voters or sender == core.leader_id):
        return
    if msg.leader_epoch > core.epoch:
        core.become_unattached(msg.leader_epoch)
    if core.catching_up or not core.may_stand:
        return
    successors = msg.preferred_successors
    position = successors.index(core.id) if core.id in successors else len(successors)
    at = core.now_ms + successor_backoff(position, core.config.election_backoff_max_ms)
    state = core.state
    if isinstance(state, FollowerState) and core.leader_id == sender:
        state.leader_ended = True
        core.ended = (core.epoch, sender)
        state.fetch_deadline = min(state.fetch_deadline, at)
    elif isinstance(state, UnattachedState):
        state.election_at = min(state.election_at, at)


# --------------------------------------------------------------------------- fetching


def _leader_high_watermark(core: RaftCore) -> int:
    leader = core.leader_state
    if leader is None or core.high_watermark <= leader.epoch_start_offset:
        return NO_HIGH_WATERMARK
    return core.high_watermark


def _answer_fetch(core: RaftCore, replica: int, msg: FetchRequest) -> None:
    high_watermark = _leader_high_watermark(core)
    if core.leader_state is not None:
        core.leader_state.told[replica] = high_watermark
    core.send(
        replica,
        FetchResponse(
            correlation_id=msg.correlation_id,
            error_code=ErrorCode.NONE,
            high_watermark=high_watermark,
            current_leader=core.current_leader(),
        ),
        read_from=msg.fetch_offset,
        until=core.log.end_offset,
    )


def on_fetch_request(core: RaftCore, sender: int, msg: FetchRequest) -> None:
    """Answer a fetch as leader: diverging epoch, records, or park it until there is news."""

    def refuse(error: ErrorCode) -> None:
        core.send(
            sender,
            FetchResponse(
                correlation_id=msg.correlation_id,
                error_code=error,
                high_watermark=NO_HIGH_WATERMARK,
                current_leader=core.current_leader(),
            ),
        )

    if msg.replica_id not in (sender, UNCOUNTED_REPLICA) or sender == core.id:
        return
    # A fetch without a replica id (a voter without durable state) is answered, never counted:
    # not toward the high watermark, not as alive for check-quorum.
    counted = msg.replica_id == sender
    leader = core.leader_state
    refusal = leader_refusal(
        core.state, epoch=core.epoch, current_leader_epoch=msg.current_leader_epoch
    )
    if refusal is not None or leader is None:
        refuse(refusal or ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return
    if not counted:
        leader.record_uncounted(
            sender, msg.fetch_offset, core.now_ms, core.log.end_offset, msg.replica_directory_id
        )
    snapshot = core.log.snapshot
    below_start = snapshot is not None and core.log.below_start(
        fetch_offset=msg.fetch_offset, last_fetched_epoch=msg.last_fetched_epoch
    )
    diverging = None
    if below_start:
        # KIP-630: the log cannot show this fetcher where it agrees; the snapshot can.
        if counted:
            leader.progress.setdefault(sender, VoterProgress()).last_fetch_ms = core.now_ms
    else:
        diverging = diverging_epoch(
            core.log, fetch_offset=msg.fetch_offset, last_fetched_epoch=msg.last_fetched_epoch
        )
    if below_start or diverging is not None:
        core.send(
            sender,
            FetchResponse(
                correlation_id=msg.correlation_id,
                error_code=ErrorCode.NONE,
                high_watermark=_leader_high_watermark(core),
                current_leader=core.current_leader(),
                snapshot_id=snapshot if below_start else None,
                diverging_epoch=diverging,
            ),
        )
        return
    leader.parked.pop(sender, None)
    if counted:
        leader.begin_sent_ms.pop(sender, None)
        leader.record_fetch(
            sender, msg.fetch_offset, core.now_ms, core.log.end_offset, msg.replica_directory_id
        )
        update_high_watermark(core)
    if (
        msg.fetch_offset < core.log.end_offset
        or msg.max_wait_ms == 0
        # A fetcher that has not heard the current high watermark (its own fetch may just
        # have moved it) learns it now: parked, its reads would lag by the whole wait.
        or leader.knows_less(sender, _leader_high_watermark(core))
    ):
        _answer_fetch(core, sender, msg)
    else:
        wait = min(msg.max_wait_ms, core.config.fetch_max_wait_ms)
        leader.parked[sender] = (msg, core.now_ms + wait)


def update_high_watermark(core: RaftCore) -> None:
    """Move the leader's HW to the majority's flushed end, once past its epoch start."""
    leader = core.leader_state
    if leader is None:
        return
    hw = leader.high_watermark(
        leader=core.id, flushed_offset=core.log.flushed_offset, majority=core.majority
    )
    if hw > leader.epoch_start_offset and hw > core.high_watermark:
        core.set_high_watermark(hw)
        answer_parked(core, force=True)
        if not core.is_voter and core.high_watermark > core.history.latest_offset:
            # KIP-853: a leader that removed itself leads until that change is committed.
            core.resign()


def answer_parked(core: RaftCore, *, force: bool) -> None:
    """Answer parked fetches: all of them (news), or those whose wait is over."""
    leader = core.leader_state
    if leader is None:
        return
    for replica, (msg, deadline) in list(leader.parked.items()):
        if force or core.now_ms >= deadline:
            del leader.parked[replica]
            _answer_fetch(core, replica, msg)


def tick_leader(core: RaftCore, now: int) -> None:
    """Check-quorum, parked fetches and BeginQuorumEpoch retries."""
    leader = core.leader_state
    if leader is None:
        return
    if not leader.has_quorum(
        leader=core.id,
        now_ms=now,
        timeout_ms=core.config.fetch_timeout_ms,
        majority=core.majority,
    ):
        core.resign()
        return
    answer_parked(core, force=False)
    for voter, sent in list(leader.begin_sent_ms.items()):
        if now >= sent + core.config.request_timeout_ms:
            core.send_begin(voter)


def on_fetch_response(core: RaftCore, sender: int, msg: FetchResponse) -> None:
    """Truncate on divergence, or append and learn the high watermark; then fetch again."""
    hint = msg.current_leader
    if hint.leader_epoch > core.epoch:
        if core.may_follow(hint.leader_id):
            core.become_follower(hint.leader_epoch, hint.leader_id)
        else:
            core.become_unattached(hint.leader_epoch)
        return
    state = core.state
    fetch = state.fetch if isinstance(state, FollowerState | ObserverState) else None
    if fetch is None or fetch.correlation != msg.correlation_id or fetch.destination != sender:
        return  # late, duplicated or from another incarnation's request
    if (fetch.offset, fetch.last_epoch) != (core.log.end_offset, core.log.last_epoch):
        return
    if msg.error_code != ErrorCode.NONE or hint.leader_id != sender:
        known = hint.leader_epoch == core.epoch and core.may_follow(hint.leader_id)
        if known and hint.leader_id not in (sender, core.id) and core.leader_id == NO_LEADER:
            core.become_follower(core.epoch, hint.leader_id)
            if core.role is Role.OBSERVER:
                return
        state = core.state
        if (
            isinstance(state, FollowerState)
            and sender == core.leader_id
            and msg.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        ):
            # Our leader says it no longer leads this epoch (it resigned or restarted).
            state.leader_ended = True
            core.ended = (core.epoch, sender)
            state.fetch_deadline = core.now_ms
        if isinstance(state, FollowerState | ObserverState):
            state.fetch = replace(fetch, retry_at=core.now_ms + core.config.retry_backoff_ms)
        return
    if hint.leader_epoch != core.epoch:
        return
    if isinstance(state, FollowerState):
        if core.leader_id != sender:
            return
        state.fetch_deadline = core.now_ms + core.config.fetch_timeout_ms
        core.fetched_ms = core.now_ms
    elif core.role is Role.OBSERVER:
        core.leader_id = sender
        core.fetch_target = sender
        core.fetched_ms = core.now_ms
    else:
        return
    if msg.snapshot_id is not None:
        start_transfer(core, sender, msg.snapshot_id)
        return
    if msg.diverging_epoch is not None:
        _truncate_to(core, msg.diverging_epoch)
    else:
        _append_records(core, msg)
    state = core.state
    if isinstance(state, FollowerState | ObserverState):
        state.fetch = None
        core.send_fetch()


def _truncate_to(core: RaftCore, diverging: EpochEndOffset) -> None:
    core.truncate_log(truncation_offset(core.log, diverging))


def _append_records(core: RaftCore, msg: FetchResponse) -> None:
    for entry in msg.records:
        # Only what continues this log in order is taken; the rest comes on the next fetch.
        if entry.offset != core.log.end_offset or not (
            core.log.last_epoch <= entry.epoch <= core.epoch
        ):
            break
        voters = None
        if entry.kind is EntryKind.VOTERS:
            try:
                voters = VoterSet.decode(entry.payload)
            except RaftError:
                break  # garbage: the leader's log never holds it
        core.append_entry(entry, voters=voters)
    if msg.high_watermark >= 0:
        core.set_high_watermark(min(msg.high_watermark, core.log.end_offset))
        if core.catching_up and core.log.end_offset >= msg.high_watermark:
            caught_up(core)


def caught_up(core: RaftCore) -> None:
    """A voter without durable state becomes a voter again once it is safe to vote.

    It has heard every other voter's epoch: it may have voted, before it lost its state, in
    any epoch up to the largest of those (a candidate persists its epoch before asking), so it
    takes that epoch with its vote spent. And it holds everything committed up to then: the
    high watermark it reached was reported by the leader of that same newest epoch. A high
    watermark of an older epoch's leader will not do: it may lack entries of a later epoch
    that this voter acknowledged before it lost its disk, and its vote could then elect a
    leader without them. Hearing a newer epoch, it moves to it and looks for that leader.
    """
    others = core.voters - {core.id}
    if not others <= set(core.heard):
        return
    fence = max([core.epoch, *core.heard.values()])
    if fence > core.epoch:
        core.new_epoch(fence)
        core.fetch_target = NO_LEADER
        return
    core.rejoin_as_voter()


def describe_quorum(core: RaftCore) -> DescribeQuorumResponse:
    """DescribeQuorum: the leader's view of every replica (the lag `mlog quorum describe` shows)."""
    leader = core.leader_state
    if leader is None:
        return DescribeQuorumResponse(
            error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER,
            leader_id=core.leader_id,
            leader_epoch=core.epoch,
            high_watermark=NO_HIGH_WATERMARK,
            current_voters=(),
            observers=(),
        )

    def state(replica: int) -> ReplicaState:
        if replica == core.id:
            now = core.now_ms
            return ReplicaState(
                replica_id=replica,
                log_end_offset=core.log.end_offset,
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
        leader_id=core.id,
        leader_epoch=core.epoch,
        high_watermark=_leader_high_watermark(core),
        current_voters=tuple(state(voter) for voter in sorted(core.voters)),
        observers=tuple(state(replica) for replica in leader.described_observers(core.voters)),
    )
