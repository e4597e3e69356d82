"""A wiped voter rejoins only from a leader of the newest epoch it heard, directed.

The schedule: leader A of epoch e is cut off from the other two voters but has not resigned
yet; B and C elect a leader of epoch E = e+1 (call it L) and commit its marker and an entry X
with both acknowledging them. The other one, W, is wiped and restarts reaching only A: it
catches up to A's high watermark (A's epoch e), which cannot hold X. L loses its quorum,
resigns, and asks W for a pre-vote at epoch E (W hears E, but a pre-vote moves no epoch).
Under the old rule W had then heard every voter's epoch and reached a leader's high
watermark, so it took epoch E with its vote spent, lacking X. L is then cut off for good;
A resigns, stands in E+1, and W grants its vote (its log is A's): A's marker is committed
where X was. Under the rule that the high watermark must come from a leader of the newest
epoch heard, W stays an observer until it has caught up from a leader of epoch E or later.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from api.protocol.quorum.messages import NO_LEADER
from api.raft.core import Role, handlers
from api.raft.core.machine import RaftMachine
from api.raft.core.states import UnattachedState
from tests.support.raft_sim import Cluster, InvariantViolation, SimNode
from tests.support.raft_states import machine


def _leader_in(c: Cluster, ids: set[int], above: int) -> SimNode | None:
    for i in sorted(ids):
        core = c.nodes[i].core
        if core is not None and core.role is Role.LEADER and core.epoch > above:
            return c.nodes[i]
    return None


def wiped_voter_hears_a_newer_epoch(seed: int) -> Cluster:
    """Run the schedule; raises InvariantViolation if a committed entry is overwritten."""
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
    rest = set(c.voter_ids - {a.id})
    c.partition({a.id})
    assert c.run_until(c.now + 10_000, until=lambda: _leader_in(c, rest, old_epoch) is not None)
    new = _leader_in(c, rest, old_epoch)
    assert new is not None and new.core is not None
    wiped = c.nodes[(rest - {new.id}).pop()]
    c.propose()  # X, on L
    x = new.core.log.end_offset - 1
    assert c.run_until(c.now + 2000, until=lambda: new.core.high_watermark > x)  # type: ignore[union-attr] # it keeps running
    assert c.checker.holds(wiped, x) and not c.checker.holds(a, x)
    c.wipe(wiped)
    # W reaches A both ways; L does not hear W, and W does not hear L yet.
    c.blocked = {(a.id, new.id), (new.id, a.id), (wiped.id, new.id), (new.id, wiped.id)}
    c.start(wiped)
    # L resigns by check-quorum (3 s without fetches), then stands after an election timeout.
    assert c.run_until(c.now + 8000, until=lambda: new.core.role is Role.PROSPECTIVE)  # type: ignore[union-attr] # it keeps running
    assert wiped.state is None  # it has heard nothing from L: still catching up
    assert wiped.core is not None and wiped.core.epoch == old_epoch
    # L's next pre-vote rounds reach W (at epoch E); W's answers do not reach L.
    c.blocked.discard((new.id, wiped.id))
    c.run_until(c.now + 5000)
    assert not c.checker.holds(wiped, x)
    # L is cut off for good (as if it died); A resumes and resigns by check-quorum. A alone
    # cannot elect itself, and W, without state, does not vote.
    c.blocked |= {(new.id, wiped.id)}
    machine(a.core).config = config
    c.process(a)  # its next tick was set by the long timeout
    stale = a.core
    assert c.run_until(
        c.now + 2 * config.check_quorum_timeout_ms, until=lambda: stale.role is not Role.LEADER
    )
    c.run_until(c.now + 10_000)
    assert wiped.state is None and _leader_in(c, {a.id, wiped.id}, old_epoch) is None
    # L comes back: W catches up from a leader of epoch E or later, and only then votes.
    c.heal()
    assert c.run_until(c.now + 20_000, until=lambda: wiped.state is not None)
    c.propose()
    c.run_until(c.now + 2000)
    c.checker.check_all_committed()
    assert c.checker.holds(wiped, x)
    return c


@pytest.mark.parametrize("seed", range(10))
def test_a_wiped_voter_rejoins_only_from_a_leader_of_the_newest_epoch(seed: int) -> None:
    wiped_voter_hears_a_newer_epoch(seed)


def _rejoin_at_any_high_watermark(machine: RaftMachine) -> None:
    """The planted bug (the old rule): any leader's high watermark will do."""
    fence = max([machine.epoch, *machine.heard.values()])
    if fence > machine.epoch and set(machine.heard) >= machine.config.voters - {machine.id}:
        machine.catching_up = False
        machine.heard = {}
        machine.epoch = fence
        machine.leader_id = NO_LEADER
        machine.voted_id = machine.id
        machine.set_role(
            UnattachedState(election_at=machine.now_ms + machine.config.election_timeout_ms)
        )
        machine.persist()
        return
    handlers_caught_up(machine)


handlers_caught_up = handlers.caught_up


def test_rejoining_from_an_older_epoch_loses_a_committed_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(handlers, "caught_up", _rejoin_at_any_high_watermark)
    caught = 0
    for seed in range(10):
        try:
            wiped_voter_hears_a_newer_epoch(seed)
        except (InvariantViolation, AssertionError) as exc:
            caught += "lacks acknowledged" in str(exc) or "was committed" in str(exc)
    # A seed whose wiped voter's probe of L overtakes A's answer follows L and never meets
    # the bug (seed 5 since parked fetches are answered when the high watermark moves).
    assert caught >= 8
