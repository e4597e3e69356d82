"""A dynamic quorum (KIP-853) under the seeded faulty world: 2,000 seeds, invariants after every
event, membership changes and their hazards (tests/support/raft_sim_membership.py)."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from api.raft.core import leading, proposals
from api.raft.core.machine import RaftMachine
from tests.support.raft_sim import InvariantViolation
from tests.support.raft_sim_membership import SCENARIOS, STATIC_UPGRADE, run_membership_seed

SEEDS = int(os.environ.get("MLOG_SIM_SEEDS", "2000"))
"""2,000 in CI (~55 s of CPU); `python -m tests.support.raft_sim_membership --seeds N` runs more."""
CHUNK = min(250, SEEDS)


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_membership_seeds_keep_every_invariant(first: int) -> None:
    failures = []
    for seed in range(first, first + CHUNK):
        try:
            run_membership_seed(seed)
        except AssertionError as exc:
            failures.append(
                f"{exc} (replay: python -m tests.support.raft_sim_membership --seed {seed} --trace)"
            )
    assert not failures, "\n".join(failures[:5])


def test_the_membership_seeds_exercise_what_they_claim() -> None:
    """Changes commit, are refused while one is pending, get cut, and leaders remove themselves."""
    stats: Counter[str] = Counter()
    for seed in range(0, 20 * len(SCENARIOS)):
        stats.update(run_membership_seed(seed).stats)
    for what in (
        "voter changes appended",
        "voter changes committed",
        "voter changes refused",
        "voters entries truncated",
        "removed leaders stepped aside",
        "leaders elected",
        "kills",
        "wipes",
        "wiped voters caught up",
        "snapshots installed",
    ):
        assert stats[what] > 0, f"no seed exercised {what}: {dict(stats)}"


def test_grow_and_shrink_ends_with_the_new_voter_and_without_voter_1() -> None:
    """3 voters -> add a 4th -> remove voter 1 -> kill the leader: the rest go on."""
    done = 0
    for seed in range(0, 10 * len(SCENARIOS), len(SCENARIOS)):
        cluster = run_membership_seed(seed, scenario="grow_and_shrink")
        voters = cluster.checker.committed_voters
        if 1 not in voters and len(voters) == 3 and voters - {2, 3}:
            done += 1
    assert done >= 5, done


@pytest.mark.parametrize(
    ("seed", "what"),
    [
        (43060, "a removed leader took a newer epoch and led on in it"),
        (16974, "a removed leader with the newest log could not stand: no leader"),
        (41499, "a removed leader with the newest log could not stand: no leader"),
    ],
)
def test_the_seeds_the_50000_seed_sweep_failed_now_pass(seed: int, what: str) -> None:
    """The failing seeds of the first 50,000-seed sweep replayed (what each one broke)."""
    cluster = run_membership_seed(seed)
    leader = cluster.leader()
    assert leader is not None and leader.core is not None, what
    assert leader.id in cluster.checker.committed_voters, what


def test_a_seed_replays_identically() -> None:
    first, second = run_membership_seed(11), run_membership_seed(11)
    assert first.events == second.events
    assert first.checker.committed == second.checker.committed


# --- the checker catches planted bugs -------------------------------------------------------


def _first_failure(seeds: int) -> str | None:
    for seed in range(seeds):
        try:
            run_membership_seed(seed)
        except InvariantViolation as exc:
            return str(exc)
    return None


def test_the_checker_catches_two_changes_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the pending-change rule a leader changes the voters again before it commits."""
    original = proposals.change_voters

    def no_pending_rule(machine: RaftMachine, **kw: object) -> object:
        # The leader believes everything it holds is committed (only while it decides).
        high_watermark = machine.high_watermark
        machine.high_watermark = 2**62
        try:
            return original(machine, **kw)  # type: ignore[arg-type] # the planted bug's shim
        finally:
            machine.high_watermark = high_watermark

    monkeypatch.setattr(proposals, "change_voters", no_pending_rule)
    failure = _first_failure(200)
    # Caught either as the change itself or as what it breaks: an entry committed on too few.
    assert failure is not None, "no seed caught two changes at once"
    assert "commits" in failure or "voters only" in failure, failure


def test_the_checker_catches_a_removed_leader_that_leads_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = leading.update_high_watermark

    def never_resigns(machine: RaftMachine) -> None:
        resign = machine.resign
        machine.resign = lambda: None  # type: ignore[method-assign] # the planted bug
        try:
            original(machine)
        finally:
            machine.resign = resign  # type: ignore[method-assign]

    monkeypatch.setattr(leading, "update_high_watermark", never_resigns)
    failure = _first_failure(200)
    assert failure is not None and "leads on after its removal" in failure, failure


def test_the_checker_catches_a_voter_set_not_put_back_on_a_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("api.raft.core.voters.VoterHistory.truncate", lambda self, offset: None)
    failure = _first_failure(300)
    assert failure is not None and "its log says" in failure, failure


UPGRADE_SEEDS = max(50, SEEDS // 8)
"""Seeds of a static quorum upgraded in place (its own scenario, on its own seeds)."""


def test_a_static_quorum_upgraded_in_place_keeps_every_invariant() -> None:
    """The kraft.version upgrade under faults: lost or cut with its leader, then changes."""
    failures = []
    stats: Counter[str] = Counter()
    grown = 0
    for seed in range(UPGRADE_SEEDS):
        try:
            cluster = run_membership_seed(seed, scenario=STATIC_UPGRADE)
        except AssertionError as exc:
            failures.append(f"{exc} (seed {seed}, scenario {STATIC_UPGRADE})")
            continue
        stats.update(cluster.stats)
        grown += bool(cluster.checker.committed_voters - {1, 2, 3})
    assert not failures, "\n".join(failures[:5])
    for what in ("upgrades appended", "upgrades refused", "voters entries truncated"):
        assert stats[what] > 0, f"no seed exercised {what}: {dict(stats)}"
    assert grown > UPGRADE_SEEDS // 4, dict(stats)  # upgraded, then a spare was added
