"""A voter without durable state must not count toward any leader's high watermark, directed.

The schedule (found by a random seed, 1046, before the fix): leader A of epoch e is cut off
from the other two voters but has not resigned yet (a paused process, or a check-quorum that
has not fired); B and C elect a leader of epoch e+1 and commit its marker and an entry X with
both acknowledging them. C's data directory is then wiped and C restarts reaching only A. If
C's fetches counted as a voter's acknowledgement, A's majority {A, C} would commit A's own
entries at the offsets where epoch e+1's committed ones sit: C no longer remembers that it
acknowledged them. Fetching as an observer (replica id -1) until it has written its quorum
state again, C counts for no one.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from api.protocol.quorum.messages import UNCOUNTED_REPLICA, FetchRequest
from api.raft.core import Role, handlers
from api.raft.core.machine import RaftMachine
from api.raft.core.ready import Batch
from tests.support.raft_sim import Cluster, InvariantViolation, SimNode
from tests.support.raft_states import machine


def _leader_in(c: Cluster, ids: set[int], above: int) -> SimNode | None:
    for i in sorted(ids):
        core = c.nodes[i].core
        if core is not None and core.role is Role.LEADER and core.epoch > above:
            return c.nodes[i]
    return None


def stale_leader_and_wiped_voter(seed: int) -> Cluster:
    """Run the schedule; raises InvariantViolation if two different entries are committed."""
    c = Cluster(seed, voters=3, faults=False)
    assert c.run_until(6000, until=lambda: c.leader() is not None)
    for _ in range(2):
        c.propose()
        c.run_until(c.now + 100)
    a = c.leader()
    assert a is not None and a.core is not None
    old_epoch = a.core.epoch
    # A stays leader while cut off, as a paused process does (its check-quorum has not fired).
    config = machine(a.core).config
    machine(a.core).config = replace(config, fetch_timeout_ms=600_000)
    b_id, c_id = sorted(c.voter_ids - {a.id})
    rest = {b_id, c_id}
    c.partition({a.id})
    assert c.run_until(c.now + 10_000, until=lambda: _leader_in(c, rest, old_epoch) is not None)
    new = _leader_in(c, rest, old_epoch)
    assert new is not None and new.core is not None
    wiped = c.nodes[(rest - {new.id}).pop()]
    c.propose()  # X, on the new leader
    x = new.core.log.end_offset - 1
    assert c.run_until(c.now + 2000, until=lambda: new.core.high_watermark > x)  # type: ignore[union-attr] # it keeps running
    assert c.checker.holds(wiped, x)
    # A writes its own entries where the new epoch's marker and X are committed.
    a_end = a.core.log.end_offset
    assert a_end <= x
    for _ in range(x - a_end + 2):
        assert hasattr(a.core.propose([Batch(payload=b"stale")]), "first")
    c.process(a)
    c.wipe(wiped)
    c.blocked = {
        pair
        for pair in c.blocked | {(wiped.id, new.id), (new.id, wiped.id)}
        if pair not in {(wiped.id, a.id), (a.id, wiped.id)}
    }
    c.start(wiped)
    c.run_until(c.now + 5000)
    assert wiped.state is None  # it never heard the other side: still catching up
    assert wiped.core is not None and machine(wiped.core).fetch_replica_id == UNCOUNTED_REPLICA
    assert a.core.high_watermark <= a_end
    # A resumes: C's fetches do not keep it alive either, check-quorum makes it resign.
    machine(a.core).config = config
    c.process(a)  # its next check-quorum is due at the restored timeout's pace, not 150 s away
    stale = a.core
    assert c.run_until(
        c.now + 2 * config.check_quorum_timeout_ms, until=lambda: stale.role is not Role.LEADER
    )
    c.heal()
    assert c.run_until(c.now + 10_000, until=lambda: wiped.state is not None)
    c.propose()
    c.run_until(c.now + 2000)
    c.checker.check_all_committed()
    assert c.checker.holds(wiped, x)
    assert wiped.core is not None and machine(wiped.core).fetch_replica_id == wiped.id
    return c


@pytest.mark.parametrize("seed", range(10))
def test_a_stale_leader_does_not_count_a_wiped_voter(seed: int) -> None:
    stale_leader_and_wiped_voter(seed)


def _count_uncounted_fetches(machine: RaftMachine, sender: int, msg: FetchRequest) -> None:
    """The planted bug: a fetch without durable state is a voter's acknowledgement."""
    handlers_on_fetch(machine, sender, replace(msg, replica_id=sender))


handlers_on_fetch = handlers.on_fetch_request


def test_counting_the_wiped_voter_commits_a_conflicting_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(handlers, "on_fetch_request", _count_uncounted_fetches)
    caught = 0
    for seed in range(10):
        try:
            stale_leader_and_wiped_voter(seed)
        except InvariantViolation:
            caught += 1
    assert caught == 10
