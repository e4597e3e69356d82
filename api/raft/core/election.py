"""Election rules as pure functions: whose log is up to date, vote decisions, backoffs."""

from __future__ import annotations

import random

from api.protocol.quorum.messages import NO_LEADER


def log_at_least_as_up_to_date(
    *, last_epoch: int, end_offset: int, than_epoch: int, than_end_offset: int
) -> bool:
    """KIP-595's rule: compare the last epoch, then the end offset."""
    return (last_epoch, end_offset) >= (than_epoch, than_end_offset)


def may_grant_vote(
    *,
    candidate: int,
    voted_id: int,
    leader_id: int,
    is_leader: bool,
    log_ok: bool,
    catching_up: bool,
) -> bool:
    """Whether a voter already in the candidate's epoch grants it a (real) vote.

    One vote per epoch: only if it has not voted for someone else and knows no leader of the
    epoch. A voter without durable election state (wiped, catching up) never votes.
    """
    if catching_up or is_leader or not log_ok:
        return False
    if leader_id != NO_LEADER:
        return False
    return voted_id in (NO_LEADER, candidate)


def may_grant_pre_vote(*, has_live_leader: bool, log_ok: bool, catching_up: bool) -> bool:
    """KIP-996: a pre-vote is granted only when the voter is not hearing from a leader."""
    return not catching_up and not has_live_leader and log_ok


def election_timeout(rng: random.Random, timeout_ms: int) -> int:
    """A randomized election timeout in [t, 2t)."""
    return timeout_ms + rng.randrange(timeout_ms)


def election_backoff(rng: random.Random, backoff_max_ms: int) -> int:
    """The wait after a lost election before the next pre-vote round, in [0, max)."""
    return rng.randrange(backoff_max_ms)


def successor_backoff(position: int, backoff_max_ms: int) -> int:
    """How long a preferred successor waits before standing (Kafka's strict exponential rule).

    The first successor stands at once; the next ones later, so the most caught-up voter
    usually wins the graceful leader change without a split vote.
    """
    if position <= 0:
        return 0
    return min(backoff_max_ms, 50 << min(position - 1, 20))
