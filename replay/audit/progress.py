"""Spark job progress for a waiting user: a thread polling the SparkContext's status tracker.

Spark's own console progress bar is off in audits (it writes over other output and cannot be
told where to go); `StageProgress` reads `SparkContext.statusTracker()` every `interval`
seconds and hands a one-line summary of the running stages (`stage 3: 5/8 tasks`) to a
callback, whenever the summary changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import SparkContext

PROGRESS_INTERVAL = 0.5
"""Seconds between two polls of the status tracker."""


def stage_summary(context: SparkContext) -> str:
    """The running stages in one line; '' if none.

    One stage: `stage 3: 5/8 tasks`; several (a state replay runs many at once): `4 stages
    (9-12): 1/5 tasks`, their tasks added up.
    """
    tracker = context.statusTracker()
    stages = []
    for stage_id in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage_id)
        if info is not None:  # None: finished between the two calls
            stages.append((stage_id, info.numCompletedTasks, info.numTasks))
    if not stages:
        return ""
    done = sum(s[1] for s in stages)
    total = sum(s[2] for s in stages)
    if len(stages) == 1:
        return f"stage {stages[0][0]}: {done}/{total} tasks"
    return f"{len(stages)} stages ({stages[0][0]}-{stages[-1][0]}): {done}/{total} tasks"


class StageProgress:
    """A daemon thread reporting `stage_summary` changes to `report` while the block runs.

    `report("")` is not called: between stages the last summary stays shown.
    """

    def __init__(
        self,
        context: SparkContext,
        report: Callable[[str], None],
        *,
        interval: float = PROGRESS_INTERVAL,
    ) -> None:
        self.context = context
        self.report = report
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="audit-progress", daemon=True)

    def __enter__(self) -> StageProgress:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _poll(self) -> None:
        shown = ""
        while not self._stop.wait(self.interval):
            try:
                summary = stage_summary(self.context)
            except Exception:  # the JVM is going away (Ctrl-C, a failed job): stop reporting
                return
            if summary and summary != shown:
                shown = summary
                self.report(summary)
