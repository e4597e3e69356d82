"""The run's order: the slow files spread over the workers' shares, the units filling them.

`--dist worksteal` (pytest-xdist) hands each worker a contiguous share of the collection's
order (the first idle worker `len // n` items, the next `rest // (n - 1)`, ...) and lets an
idle worker take the far end of a busy one's queue. With the slow files all first, they fell
in one or two shares: one worker ran `tests/system/` file after file for most of the run
(476 s of a 540 s run), waiting on its servers' timers, while the others ran the units on
both cores and then ran out of work.

Here every share gets its part of the slow files (balanced by an estimate of their seconds)
and is filled up with units; every other share runs most of its units first, so while half
the workers wait on servers and JVMs the other half compute, and ends on a quarter of them,
so that no worker ends the run alone in a minute-long test (the driver archive's build ran
the last 17 s of a run by itself). Each file
moves whole, in its own order (its module-scoped fixtures, a server or a Spark session, are
built once); the files that start Spark in the test's own process go to one share together
(a process keeps its JVM after a session stops, and the next session reuses it), and so do
the static checks (parsing the whole tree costs about 6 CPU-seconds in each process that
does it). Every worker computes the same order, as xdist requires.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.paths import REPO

MODULE_RANKS = (("process", "spark"), ("process",), ("interop",), ("spark",), ("postgres",))
"""What a file's tests carry, slowest first: a file takes the rank of its slowest test."""

UNIT = len(MODULE_RANKS)
"""The rank of a test that carries none of MODULE_RANKS."""

RANK_SECONDS = (5.0, 0.5, 0.1, 1.5, 0.3)
"""One test's seconds by rank, on average over the files not in FILE_SECONDS (the suite's
durations, four workers); only the balance between the shares depends on it."""

TAIL_UNITS = 4
"""The units a share that runs its slow files late keeps for after them: one in this many."""

UNIT_SECONDS = 0.1
"""A unit's seconds, on average (about 450 s over some 4,100 of them, four workers)."""

FILE_SECONDS = {
    "tests/bench/test_bench_smoke.py": 170.0,
    "tests/replay/audit/test_audit_cluster.py": 110.0,
    "tests/replay/audit/test_audit.py": 100.0,
    "tests/system/test_archive_quorum.py": 85.0,
    "tests/api/raft/test_raft_membership_simulation.py": 80.0,
    "tests/replay/audit/test_driver_archive.py": 60.0,
    "tests/system/test_crash.py": 55.0,
    "tests/system/test_quorum_processes.py": 45.0,
    "tests/test_readme.py": 40.0,
    "tests/api/console/test_browser.py": 35.0,
    "tests/system/test_packaging.py": 35.0,
    "tests/metadata_log/test_integrity.py": 35.0,
    "tests/system/test_retention_processes.py": 30.0,
    "tests/api/test_python_api.py": 30.0,
    "tests/api/raft/test_raft_simulation.py": 30.0,
    "tests/replay/audit/test_parser_jvm.py": 30.0,
    "tests/system/test_quorum_pause.py": 30.0,
    "tests/replay/audit/test_audit_session.py": 25.0,
    "tests/replay/sql/test_increments.py": 25.0,
    "tests/system/test_quorum_membership.py": 25.0,
    "tests/system/test_broker_example.py": 25.0,
    "tests/replay/sql/test_snapshot_store.py": 25.0,
    "tests/api/raft/test_quorum_shell.py": 20.0,
    "tests/system/test_quorum_catch_up.py": 20.0,
    "tests/replay/sql/test_snapshot_store_edges.py": 20.0,
    "tests/api/protocol/test_generated_reader.py": 20.0,
}
"""The files of 20 s or more (the suite's durations with four workers, rounded to 5 s), paths
from the repository's root: where the ranks misjudge a file (a few tests of a minute or more,
or a unit file of long simulations), its own figure. A unit file here is placed as the slow
files are, whole, rather than poured in as filler."""

IN_PROCESS_SPARK = MODULE_RANKS.index(("spark",))
"""The rank of the files that start Spark in the test's own process (no `process` marker)."""


@dataclass
class _Group:
    """Files that go to one share together, in the collection's order."""

    items: list[pytest.Item] = field(default_factory=list)
    seconds: float = 0.0


def rank(item: pytest.Item) -> int:
    """The index in MODULE_RANKS of what `item` carries; UNIT if none."""
    carried = {mark.name for mark in item.iter_markers()}
    for index, names in enumerate(MODULE_RANKS):
        if carried.issuperset(names):
            return index
    return UNIT


def share_sizes(total: int, workers: int) -> list[int]:
    """The sizes of the contiguous shares worksteal hands out, first to last."""
    sizes = []
    for k in range(workers):
        size = total // (workers - k)
        sizes.append(size)
        total -= size
    return sizes


def _known_seconds(path: Path) -> float:
    """The file's seconds from FILE_SECONDS, or 0 if it is not there."""
    name = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    return FILE_SECONDS.get(name.as_posix(), 0.0)


def _file_boundary(items: Sequence[pytest.Item], index: int) -> int:
    """The last index at or before `index` where a file begins in `items` (a file stays whole)."""
    while 0 < index < len(items) and items[index].path == items[index - 1].path:
        index -= 1
    return index


def spread(
    items: Sequence[pytest.Item], workers: int, static: Callable[[pytest.Item], bool]
) -> list[pytest.Item]:
    """`items` ordered so that each of `workers` shares holds its part of the slow files.

    The slow files lead the even shares; the odd ones run them after three quarters of their
    units, and end on the rest.

    `static(item)` tells whether `item`'s module is a static check (parses the source tree).
    With one worker (no xdist) the order is the slow files first, then the units."""
    files: dict[Path, list[pytest.Item]] = {}
    item_ranks: dict[pytest.Item, int] = {}
    for item in items:
        files.setdefault(Path(item.path), []).append(item)
        item_ranks[item] = rank(item)
    ranks = {path: min(item_ranks[item] for item in tests) for path, tests in files.items()}
    known = {path: _known_seconds(path) for path in files}
    units = [p for p in files if ranks[p] == UNIT and not known[p]]
    units.sort(key=lambda p: not static(files[p][0]))  # the static checks first, together
    spark = _Group()
    groups: list[_Group] = []
    placed = (p for p in files if ranks[p] < UNIT or known[p])
    for path in sorted(placed, key=lambda p: ranks[p]):
        group = spark if ranks[path] == IN_PROCESS_SPARK else _Group()
        group.items.extend(files[path])
        seconds = known[path] or sum(
            RANK_SECONDS[min(item_ranks[i], UNIT - 1)] for i in files[path]
        )
        # Each test of the file takes the place of a unit in its share.
        group.seconds += seconds - UNIT_SECONDS * len(files[path])
        if group is not spark:
            groups.append(group)
    if spark.items:
        groups.append(spark)
    unit_items = [item for path in units for item in files[path]]
    if workers <= 1:
        return [item for group in groups for item in group.items] + unit_items
    # Longest first, each to the share with the fewest estimated seconds so far.
    shares: list[_Group] = [_Group() for _ in range(workers)]
    for group in sorted(groups, key=lambda g: -g.seconds):
        lightest = min(shares, key=lambda s: s.seconds)
        lightest.items.extend(group.items)
        lightest.seconds += group.seconds
    order: list[pytest.Item] = []
    filled = 0
    for index, (share, size) in enumerate(
        zip(shares, share_sizes(len(items), workers), strict=True)
    ):
        room = max(0, filled + size - len(order) - len(share.items))
        fill, unit_items[:room] = unit_items[:room], []
        if index % 2:
            # Every other share runs most of its units first: while half the workers wait on
            # servers and JVMs, the other half compute. A quarter of them still come last,
            # so no share ends on a minute-long test that no other worker can take over.
            cut = _file_boundary(fill, len(fill) - len(fill) // TAIL_UNITS)
            order.extend(fill[:cut] + share.items + fill[cut:])
        else:
            order.extend(share.items + fill)
        filled += size
    return order + unit_items
