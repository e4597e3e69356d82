"""The simulated quorum changing its voters (KIP-853) under the faults of `raft_sim`.

Each seed is a dynamic quorum: three voters formatted with their voter set at offset 0 and two
spare nodes formatted with none, which fetch as observers until a leader adds them. Every
invariant of `raft_sim.Checker` holds after every event, with the membership checks: the voter
set a node uses is its log's; a leader changes one voter of a committed set; only a voter is
elected; a node that is no voter only observes, or leads until its removal commits; committed
entries are on a majority of the committed voter set.

Scenarios, after the classic hazards of single-server changes: grow and shrink (the process
test's 3 voters -> add a 4th -> remove voter 1 -> kill the leader), a leader that removes
itself, two changes racing (at one leader, and at two leaders either side of a partition), a
change whose leader is cut off at once, and chaos (kills, restarts, wipes, partitions, trims
and changes at random). `STATIC_UPGRADE`, run on its own seeds, starts from a static quorum
(`controller.quorum.voters`) that the kraft.version upgrade moves into the log, its leader
killed or cut off around the upgrade, then grows and shrinks.

    python -m tests.support.raft_sim_membership --seeds 50000
    python -m tests.support.raft_sim_membership --seed 42 --trace
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial

from tests.support.raft_sim import Cluster, InvariantViolation

SCENARIOS = (
    "grow_and_shrink",
    "removed_leader",
    "racing_changes",
    "change_partitioned",
    "membership_chaos",
)

STATIC_UPGRADE = "static_upgrade"
"""The scenario of a static quorum upgraded in place (not in `SCENARIOS`: seeds keep theirs)."""

MIN_VOTERS = 3
"""Removals stop at three voters: with two, a wiped voter could never catch up (the other
cannot elect alone), a liveness limit the static quorum shares, not a safety one."""


def _voters(c: Cluster) -> frozenset[int]:
    """The voter set in force at the leader (or the committed one, without a leader)."""
    node = c.leader()
    if node is not None and node.core is not None:
        return node.core.voters
    return c.checker.committed_voters


def _retry(c: Cluster, attempt: Callable[[], bool], *, every: int, until: int) -> None:
    """Call `attempt` now and every `every` ms until it returns True or `until` passes."""

    def step() -> None:
        if not attempt() and c.now + every <= until:
            c.at(c.now + every, step)

    step()


def _add_spare(c: Cluster) -> bool:
    # As `mlog quorum add-controller` is run: for a controller that is up, with its state
    # (a node down or wiped since it last fetched may still look caught up to the leader).
    spares = sorted(
        i
        for i in set(c.nodes) - _voters(c)
        if c.nodes[i].core is not None and c.nodes[i].state is not None
    )
    return bool(spares) and c.change_voters(add=c.rng.choice(spares))


def _remove_one(c: Cluster, *, leader: bool = False) -> bool:
    voters = _voters(c)
    if len(voters) <= MIN_VOTERS:
        return False
    node = c.leader()
    if leader:
        if node is None:
            return False
        return c.change_voters(remove=node.id)
    return c.change_voters(remove=c.rng.choice(sorted(voters)))


def _unblock(c: Cluster) -> None:
    """End every partition."""
    c.blocked.clear()


def _kill_leader(c: Cluster, *, restart_in: tuple[int, int] = (200, 3000)) -> None:
    node = c.leader()
    if node is not None:
        c.kill(node)
        c.at(c.now + c.rng.randint(*restart_in), lambda: c.start(node))


def _cut_leader_off(c: Cluster) -> None:
    node = c.leader()
    if node is not None:
        c.partition({node.id})


def _stale_leader_change(c: Cluster) -> None:
    """Cut the leader off, let it append a change the majority never sees, change on the other
    side too: when the partition heals, the stale change is cut and the set goes back."""
    node = c.leader()
    if node is None or node.core is None:
        return
    c.partition({node.id})
    spares = sorted(set(c.nodes) - node.core.voters)
    if spares:
        c.change_voters(add=spares[0], at=node)
    else:
        c.change_voters(remove=c.rng.choice(sorted(node.core.voters - {node.id})), at=node)


def _chaos_step(c: Cluster) -> None:
    rng = c.rng
    live = [n for n in c.nodes.values() if n.core is not None]
    down = [n for n in c.nodes.values() if n.core is None]
    voters = _voters(c)
    choice = rng.random()
    if choice < 0.2 and down:
        c.start(rng.choice(down))
    elif choice < 0.4 and len([n for n in down if n.id in voters]) < (len(voters) - 1) // 2:
        c.kill(rng.choice(live))
    elif choice < 0.5 and all(n.state is not None for n in c.nodes.values()) and not down:
        # One wipe at a time, with every other node up: a node that lost its state catches
        # up from the others before it may vote (or another one lose its state).
        node = rng.choice(live)
        c.wipe(node)
        c.at(c.now + rng.randint(100, 2000), lambda: c.start(node))
    elif choice < 0.6:
        c.snapshot_and_trim(rng.choice(list(c.nodes.values())))
    elif choice < 0.7:
        c.partition(set(rng.sample(sorted(c.nodes), rng.randint(1, 2))), one_way=rng.random() < 0.3)
    elif choice < 0.75:
        c.blocked.clear()
    elif choice < 0.9:
        _add_spare(c)
    else:
        _remove_one(c, leader=rng.random() < 0.3)


def run_membership_seed(seed: int, *, trace: bool = False, scenario: str | None = None) -> Cluster:
    """Run one seed of a dynamic quorum to the end; raises InvariantViolation on a bug."""
    name = scenario or SCENARIOS[seed % len(SCENARIOS)]
    c = Cluster(seed, voters=3, observers=2, trace=trace, dynamic=name != STATIC_UPGRADE)
    c.log(f"membership scenario {name}")
    rng = c.rng
    start = rng.randint(1500, 2500)
    every = rng.choice([50, 150, 400])
    for t in range(500, 9000, rng.choice([200, 400, 800])):
        c.at(t, c.propose)
    if name == "grow_and_shrink":
        # 3 voters -> add a 4th -> remove voter 1 -> kill the leader (the process test).
        c.at(start, lambda: _retry(c, lambda: _add_spare(c), every=every, until=start + 3000))
        c.at(
            start + 3000,
            lambda: _retry(c, lambda: c.change_voters(remove=1), every=every, until=start + 5000),
        )
        c.at(start + rng.randint(3000, 6000), lambda: _kill_leader(c))
    elif name == "removed_leader":
        c.at(start, lambda: _retry(c, lambda: _add_spare(c), every=every, until=start + 2500))
        at = start + rng.randint(1000, 3000)
        c.at(
            at,
            lambda: _retry(c, lambda: _remove_one(c, leader=True), every=every, until=at + 3000),
        )
        if rng.random() < 0.5:
            # Killed while its own removal is in flight (`change_partitioned` cuts a leader
            # off just after a change, which may be its own removal).
            c.at(at + rng.randint(0, 60), lambda: _kill_leader(c))
    elif name == "racing_changes":

        def race() -> None:
            _add_spare(c)
            _remove_one(c)
            _add_spare(c)

        c.at(start, lambda: _retry(c, lambda: _add_spare(c), every=every, until=start + 2000))
        c.at(start + rng.randint(0, 2500), race)
        c.at(start + rng.randint(2500, 4000), lambda: _stale_leader_change(c))
        at = start + 4100
        c.at(at, lambda: _retry(c, lambda: _add_spare(c), every=every, until=at + 2000))
        c.at(at + rng.randint(500, 2500), partial(_unblock, c))
    elif name == "change_partitioned":

        def change_then_cut() -> None:
            node = c.leader()
            if node is not None and (_add_spare(c) or _remove_one(c)):
                group = {node.id} | set(rng.sample(sorted(c.nodes), rng.randint(0, 1)))
                c.partition(group, one_way=rng.random() < 0.3)

        for k in range(3):
            c.at(start + k * rng.randint(800, 2000), change_then_cut)
            c.at(start + k * 2000 + rng.randint(500, 1500), partial(_unblock, c))
    elif name == STATIC_UPGRADE:
        c.at(start, lambda: _retry(c, c.upgrade_voters, every=every, until=start + 3000))
        if rng.random() < 0.5:
            # Around the upgrade: its entry may be lost with the leader (the quorum is static
            # again until a retry) or cut off with it (a stale upgrade, truncated on healing).
            hazard = _kill_leader if rng.random() < 0.5 else _cut_leader_off
            c.at(start + rng.randint(0, 60), lambda: hazard(c))
            c.at(start + rng.randint(800, 1500), partial(_unblock, c))
        at = start + 3000
        c.at(at, lambda: _retry(c, lambda: _add_spare(c), every=every, until=at + 2500))
        c.at(
            at + 2500,
            lambda: _retry(c, lambda: c.change_voters(remove=1), every=every, until=at + 4500),
        )
        c.at(at + rng.randint(2500, 5000), lambda: _kill_leader(c))
    elif name == "membership_chaos":
        for k in range(8):
            c.at(start - 1000 + k * rng.randint(300, 900), lambda: _chaos_step(c))
    heal_at = 9000
    c.run_until(heal_at)
    c.heal()
    # Liveness once healed: proposals acknowledged within 10 s; a removed leader stepped aside.
    acked = len(c.checker.acked)

    def settled() -> bool:
        leader = c.leader()
        voter = leader is not None and leader.core is not None and leader.id in leader.core.voters
        return voter and len(c.checker.acked) >= acked + 2

    while not settled() and c.now < heal_at + 10_000:
        c.propose()
        c.run_until(c.now + 250)
    if len(c.checker.acked) < acked + 2:
        raise InvariantViolation(f"seed {seed}: no proposal acknowledged 10 s after healing")
    if not settled():
        raise InvariantViolation(f"seed {seed}: the leader 10 s after healing is no voter")
    c.checker.check_all_committed()
    c.stats["voter changes committed"] += c.checker.voter_changes
    return c


def main(argv: list[str] | None = None) -> int:
    """Run many seeds (or replay one) and print any failing seed with its replay command."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds to run")
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--seed", type=int, help="run only this seed")
    parser.add_argument("--trace", action="store_true", help="print every event")
    args = parser.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    failures = 0
    began = time.monotonic()
    events = 0
    changes = 0
    for done, seed in enumerate(seeds, start=1):
        try:
            cluster = run_membership_seed(seed, trace=args.trace)
            events += cluster.events
            changes += cluster.checker.voter_changes
        except AssertionError as exc:
            failures += 1
            print(
                f"FAIL {exc}\n  replay: python -m tests.support.raft_sim_membership "
                f"--seed {seed} --trace",
                flush=True,
            )
        if done % 1000 == 0 and done < len(seeds):
            print(f"... {done} seeds (to {seed}), {failures} failed", flush=True)
    took = time.monotonic() - began
    print(
        f"{len(seeds)} seeds, {events} events, {changes} voter changes committed, "
        f"{failures} failed, {took:.1f} s"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
