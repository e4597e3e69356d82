"""Spark stage progress for a waiting user, read from the status tracker (no JVM here)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from replay.audit.progress import StageProgress, stage_summary


@dataclass
class _Stage:
    numCompletedTasks: int  # noqa: N815 - PySpark's names
    numTasks: int  # noqa: N815


class _Tracker:
    def __init__(self, stages: dict[int, _Stage | None]) -> None:
        self.stages = stages

    def getActiveStageIds(self) -> list[int]:  # noqa: N802
        return list(self.stages)

    def getStageInfo(self, stage_id: int) -> _Stage | None:  # noqa: N802
        return self.stages[stage_id]


class _Context:
    def __init__(self, *states: dict[int, _Stage | None]) -> None:
        self.states = list(states)
        self.calls = 0

    def statusTracker(self) -> _Tracker:  # noqa: N802
        state = self.states[min(self.calls, len(self.states) - 1)]
        self.calls += 1
        return _Tracker(state)


def test_one_line_for_one_or_many_stages() -> None:
    context: Any = _Context({})
    assert stage_summary(context) == ""
    context = _Context({3: _Stage(5, 8)})
    assert stage_summary(context) == "stage 3: 5/8 tasks"
    # A stage that ends between the two calls is left out; the others add up.
    context = _Context({12: _Stage(1, 2), 9: _Stage(0, 3), 10: None})
    assert stage_summary(context) == "2 stages (9-12): 1/5 tasks"


def test_changes_are_reported_until_the_block_ends() -> None:
    context: Any = _Context({}, {0: _Stage(0, 2)}, {0: _Stage(0, 2)}, {0: _Stage(1, 2)}, {})
    seen: list[str] = []
    done = threading.Event()

    def report(text: str) -> None:
        seen.append(text)
        if len(seen) == 2:
            done.set()

    with StageProgress(context, report, interval=0.01):
        assert done.wait(30)
    assert seen == ["stage 0: 0/2 tasks", "stage 0: 1/2 tasks"]


def test_a_tracker_that_fails_stops_the_reports() -> None:
    class Gone:
        def statusTracker(self) -> Any:  # noqa: N802
            raise ConnectionError("the JVM went away")

    seen: list[str] = []
    with StageProgress(Gone(), seen.append, interval=0.01):  # type: ignore[arg-type]
        threading.Event().wait(0.1)
    assert seen == []
