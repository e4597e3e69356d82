"""The quorum under a seeded, faulty world: 2,000 seeds, invariants after every event.

Each seed picks a scenario (election, leader kill and restart, all killed then a majority
restarted, leader partitioned away, a 2|3 split of five voters, back-to-back failures, a wiped
node, one-way partitions, chaos, a follower stopped while the others snapshot and trim past it
so it catches up by FetchSnapshot) and network faults; `tests/support/raft_sim.py` holds the
world and the checker and runs millions of seeds from the command line.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from api.raft.core import handlers, replication
from tests.support.raft_sim import SCENARIOS, InvariantViolation, run_seed

SEEDS = int(os.environ.get("MLOG_SIM_SEEDS", "2000"))
"""2,000 in CI; `tools/mutate/runner.py` sets `MLOG_SIM_SEEDS` lower for the raft modules (every
surviving mutant runs every seed test of its line: 2,000 seeds are ~10 s a mutant)."""
CHUNK = min(250, SEEDS)


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_seeds_keep_every_invariant(first: int) -> None:
    failures = []
    for seed in range(first, first + CHUNK):
        try:
            run_seed(seed)
        except AssertionError as exc:
            failures.append(
                f"{exc} (replay: python tests/support/raft_sim.py --seed {seed} --trace)"
            )
    assert not failures, "\n".join(failures[:5])


BATCH_SEEDS = max(SEEDS // 4, 1)
"""Seeds run again with proposals of several offsets each (blocks of many records)."""


@pytest.mark.parametrize("first", range(0, BATCH_SEEDS, CHUNK))
def test_batches_of_several_offsets_keep_every_invariant(first: int) -> None:
    """Entries are whole batches: kills, trims, truncations and fetches never split one."""
    failures = []
    for seed in range(first, min(first + CHUNK, BATCH_SEEDS)):
        try:
            cluster = run_seed(seed, batch_max=4)
        except AssertionError as exc:
            failures.append(f"{exc} (seed {seed}, batch_max=4)")
            continue
        committed = cluster.checker.committed
        assert all(committed[e.offset] == e for e in committed), seed
    assert not failures, "\n".join(failures[:5])


def test_batched_seeds_commit_batches_of_several_offsets() -> None:
    """The batched run is not the plain one: batches of more than one offset commit."""
    committed = [e for seed in range(20) for e in run_seed(seed, batch_max=4).checker.committed]
    assert any(e.count > 1 for e in committed)


def test_the_seeds_exercise_what_they_claim() -> None:
    """A simulation that never kills, truncates or wipes would prove nothing."""
    stats: Counter[str] = Counter()
    for seed in range(0, 4 * len(SCENARIOS)):
        stats.update(run_seed(seed).stats)
    for what in (
        "leaders elected",
        "kills",
        "entries lost on kill",
        "truncations",
        "wipes",
        "wiped voters caught up",
        "resignations",
        "trims",
        "snapshots installed",
    ):
        assert stats[what] > 0, f"no seed exercised {what}: {dict(stats)}"
    # Every seed elects a first leader, most another after their faults (79 in these 40).
    assert stats["leaders elected"] > 3 * 4 * len(SCENARIOS) // 2


def test_a_seed_replays_identically() -> None:
    first, second = run_seed(7), run_seed(7)
    assert first.events == second.events
    assert first.checker.committed == second.checker.committed
    assert first.checker.committed


def test_every_scenario_commits_and_changes_leaders_under_faults() -> None:
    for index, name in enumerate(SCENARIOS):
        cluster = run_seed(index, scenario=name)
        assert len(cluster.checker.acked) >= 2, name
        if name in ("leader_kill_restart", "back_to_back", "all_killed_majority_restarted"):
            assert len(cluster.checker.leaders) >= 2, name
        if name == "lagging_trimmed":
            # Whether the lagging node needs the snapshot depends on the seed's schedule.
            runs = [run_seed(index + k * len(SCENARIOS), scenario=name) for k in range(4)]
            assert any(run.stats["snapshots installed"] >= 1 for run in runs), name


# --- the checker catches planted bugs -------------------------------------------------------


def _first_failure(seeds: int) -> str | None:
    for seed in range(seeds):
        try:
            run_seed(seed)
        except InvariantViolation as exc:
            return str(exc)
    return None


@contextmanager
def _planted(monkeypatch: pytest.MonkeyPatch, bug: str) -> Iterator[None]:
    if bug == "two votes per epoch":
        # Forget the vote already cast in this epoch.
        monkeypatch.setattr(
            handlers,
            "may_grant_vote",
            lambda **kw: kw["log_ok"] and not kw["is_leader"] and not kw["catching_up"],
        )
    elif bug == "unflushed offsets in the high watermark":
        original = replication.LeaderState.high_watermark

        def counts_unflushed(
            self: replication.LeaderState, *, leader: int, flushed_offset: int, majority: int
        ) -> int:
            return original(self, leader=leader, flushed_offset=2**40, majority=majority)

        monkeypatch.setattr(replication.LeaderState, "high_watermark", counts_unflushed)
    elif bug == "votes ignore the log":
        monkeypatch.setattr(handlers, "log_at_least_as_up_to_date", lambda **kw: True)
    yield


@pytest.mark.parametrize(
    ("bug", "expected"),
    [
        ("two votes per epoch", ("two leaders in epoch",)),
        ("unflushed offsets in the high watermark", ("committed offset",)),
        ("votes ignore the log", ("lacks acknowledged", "below its high watermark")),
    ],
)
def test_the_checker_catches_a_planted_bug(
    monkeypatch: pytest.MonkeyPatch, bug: str, expected: tuple[str, ...]
) -> None:
    with _planted(monkeypatch, bug):
        failure = _first_failure(300)
    assert failure is not None, f"no seed caught: {bug}"
    assert any(what in failure for what in expected), failure
