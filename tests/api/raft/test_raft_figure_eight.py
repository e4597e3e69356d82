"""Raft's "figure 8" schedule, directed: why a new leader commits only past its epoch start.

An entry X of epoch e reaches two of five voters; the leader dies; a leader of epoch e+1 (L2)
writes its marker where X sits and dies at once; a leader N of epoch e+2 copies X to a third
voter. Counting X committed then would be wrong: L2 can come back, win epoch e+3 with the votes
of the voters that do not have N's marker (their last epoch is older than L2's) and overwrite
X. The rule (the high watermark moves only past N's own marker) keeps X uncommitted until the
marker is on a majority, and then L2 cannot win.
"""

from __future__ import annotations

import pytest

from api.raft.core import Role, leading
from api.raft.core.machine import RaftMachine
from tests.support.raft_sim import Cluster, InvariantViolation, SimNode


def _split(c: Cluster, *groups: set[int]) -> None:
    c.blocked = {(a, b) for g in groups for h in groups if g is not h for a in g for b in h}


def _leader_among(c: Cluster, ids: set[int], above: int = -1) -> SimNode | None:
    for i in sorted(ids):
        core = c.nodes[i].core
        if core is not None and core.role is Role.LEADER and core.epoch > above:
            return c.nodes[i]
    return None


def figure_eight(seed: int) -> Cluster:
    """Run the schedule; raises InvariantViolation if a committed entry is lost."""
    c = Cluster(seed, voters=5, faults=False)
    everyone = set(c.voter_ids)
    assert c.run_until(6000, until=lambda: c.leader() is not None)
    c.run_until(c.now + 300)
    a = c.leader()
    assert a is not None and a.core is not None
    b, *rest_ids = sorted(everyone - {a.id})
    rest = set(rest_ids)
    _split(c, {a.id, b}, rest)
    c.propose()
    x = a.core.log.end_offset - 1
    assert c.run_until(c.now + 1000, until=lambda: a.log.flushed > x and c.nodes[b].log.flushed > x)
    c.kill(a)
    assert c.run_until(c.now + 8000, until=lambda: _leader_among(c, rest) is not None)
    l2 = _leader_among(c, rest)
    assert l2 is not None and l2.core is not None
    l2_epoch = l2.core.epoch
    followers = rest - {l2.id}
    _split(c, {a.id, b}, {l2.id}, followers)  # L2's marker reaches nobody
    c.run_until(c.now + 20)
    c.kill(l2)
    assert len(l2.log.entries) > x and l2.log.entries[x].epoch == l2_epoch
    c.blocked = set()
    c.start(a)
    group = {a.id, b}
    assert c.run_until(c.now + 8000, until=lambda: _leader_among(c, group, l2_epoch) is not None)
    n = _leader_among(c, group, l2_epoch)
    assert n is not None and n.core is not None
    core = n.core

    def x_committed_or_marker_replicated() -> bool:
        return core.high_watermark > x or all(
            len(c.nodes[f].log.entries) > x + 1 for f in followers
        )

    assert c.run_until(c.now + 4000, until=x_committed_or_marker_replicated)
    # Cut N's side off at once (answers in flight are lost) and bring L2 back.
    _split(c, group, followers | {l2.id})
    c.start(l2)
    c.run_until(c.now + 8000)
    c.checker.check_all_committed()
    return c


@pytest.mark.parametrize("seed", range(20))
def test_the_epoch_start_rule_survives_figure_eight(seed: int) -> None:
    figure_eight(seed)


def _commit_past_epochs(machine: RaftMachine) -> None:
    """The planted bug: the leader's HW moves as soon as a majority has an offset."""
    leader = machine.leader_state
    if leader is None:
        return
    hw = leader.high_watermark(
        leader=machine.id,
        flushed_offset=machine.log.flushed_offset,
        majority=machine.config.majority,
    )
    if hw > machine.high_watermark:
        machine.set_high_watermark(hw)
        leading.answer_parked(machine, force=True)


def test_without_the_rule_figure_eight_loses_a_committed_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(leading, "update_high_watermark", _commit_past_epochs)
    monkeypatch.setattr(leading, "leader_high_watermark", lambda machine: machine.high_watermark)
    caught = 0
    for seed in range(20):
        try:
            figure_eight(seed)
        except InvariantViolation:
            caught += 1
    assert caught >= 10  # 19 of these 20 seeds lose the entry
