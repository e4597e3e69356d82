"""The run's order (tests/support/schedule.py): slow files spread over worksteal's shares."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pytest

from tests.support.paths import REPO
from tests.support.schedule import FILE_SECONDS, UNIT, rank, share_sizes, spread


@dataclass(frozen=True)
class _Mark:
    name: str


@dataclass(frozen=True)
class _Item:
    """What the scheduler reads of a pytest.Item: its path and its markers."""

    path: Path
    number: int
    marks: tuple[str, ...] = field(default=())

    def iter_markers(self) -> list[_Mark]:
        return [_Mark(name) for name in self.marks]


def _file(name: str, tests: int, *marks: str) -> list[pytest.Item]:
    return [cast(pytest.Item, _Item(Path(name), n, marks)) for n in range(tests)]


def _files_of(items: list[pytest.Item]) -> list[str]:
    names: list[str] = []
    for item in items:
        if not names or names[-1] != str(item.path):
            names.append(str(item.path))
    return names


def test_share_sizes_are_worksteals() -> None:
    assert share_sizes(10, 4) == [2, 2, 3, 3]
    assert share_sizes(5486, 4) == [1371, 1371, 1372, 1372]
    assert sum(share_sizes(7, 3)) == 7


def test_a_file_takes_the_rank_of_what_its_tests_carry() -> None:
    assert rank(_file("a", 1, "process", "spark")[0]) == 0
    assert rank(_file("a", 1, "spark")[0]) == 3
    assert rank(_file("a", 1)[0]) == UNIT


def test_each_share_has_its_part_of_the_slow_files_half_of_them_first() -> None:
    slow = [_file(f"system/s{i}.py", 4, "process") for i in range(8)]
    units = [_file(f"u{i}.py", 10) for i in range(40)]
    items = [i for f in units for i in f] + [i for f in slow for i in f]
    order = spread(items, 4, lambda item: False)
    assert sorted(map(id, order)) == sorted(map(id, items))  # every test, once
    start = 0
    for index, size in enumerate(share_sizes(len(order), 4)):
        share = order[start : start + size]
        start += size
        files = _files_of(share)
        # Two slow files each, at the start of every other share and after most units of the
        # rest: half the workers wait on servers while the other half compute. Those end on
        # a quarter of their units, cut where a file begins, so no share ends on a slow test.
        slow_at = [i for i, f in enumerate(files) if f.startswith("system/")]
        if index % 2 == 0:
            assert slow_at == [0, 1], files
        else:
            assert slow_at == [slow_at[0], slow_at[0] + 1] and slow_at[0] > 0, files
            mine = [i for i in share if not str(i.path).startswith("system/")]
            after = (
                len(share)
                - 1
                - max(n for n, i in enumerate(share) if str(i.path).startswith("system/"))
            )
            # A quarter of the units at least, more to keep a file whole.
            assert len(mine) // 4 <= after < len(mine) // 4 + 10, (index, after, len(mine))


def test_files_stay_whole_and_in_their_order() -> None:
    items = _file("system/a.py", 30, "process") + _file("u.py", 200) + _file("b.py", 5, "spark")
    order = spread(items, 4, lambda item: False)
    for name in ("system/a.py", "b.py", "u.py"):
        mine = [cast(_Item, i).number for i in order if str(i.path) == name]
        assert mine == sorted(mine)
    assert _files_of(order).count("system/a.py") == 1 and _files_of(order).count("b.py") == 1


def test_in_process_spark_files_and_static_checks_go_together() -> None:
    spark = [_file(f"audit{i}.py", 10, "spark") for i in range(3)]
    static = [_file(f"static{i}.py", 3) for i in range(2)]
    slow = [_file(f"system/s{i}.py", 20, "process") for i in range(4)]
    units = _file("u.py", 400)
    items = units + [i for f in spark + static + slow for i in f]
    order = spread(items, 4, lambda item: str(item.path).startswith("static"))
    files = _files_of(order)
    first = files.index("audit0.py")
    assert files[first : first + 3] == ["audit0.py", "audit1.py", "audit2.py"]
    first = files.index("static0.py")
    assert files[first : first + 2] == ["static0.py", "static1.py"]


def test_one_worker_runs_the_slow_files_first() -> None:
    items = _file("u.py", 3) + _file("system/a.py", 2, "process") + _file("p.py", 2, "postgres")
    assert _files_of(spread(items, 1, lambda item: False)) == ["system/a.py", "p.py", "u.py"]


def test_the_files_of_known_seconds_exist_and_weigh_as_much() -> None:
    assert all((REPO / name).is_file() for name in FILE_SECONDS), FILE_SECONDS
    # One two-test file of 170 s outweighs three files of ten ordinary process tests each
    # (5 s each by rank; by its rank alone it would weigh 1 s): it gets a share of its own.
    long = _file(str(REPO / "tests/bench/test_bench_smoke.py"), 2, "process")
    others = [_file(f"system/s{i}.py", 10, "process") for i in range(3)]
    items = long + [i for f in others for i in f] + _file("u.py", 40)
    order = spread(items, 2, lambda item: False)
    first, second = order[: len(order) // 2], order[len(order) // 2 :]
    holder = first if long[0] in first else second
    assert not any(str(i.path).startswith("system/") for i in holder)
