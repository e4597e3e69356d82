"""How much of a sweep a run checks: all of it in `make test`, a sample in `make test-fast`.

`MLOG_SWEEP_STRIDE=N` (the fast tier sets 5) keeps every Nth point of a sweep, the first and
the last always; unset, every point is checked.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

SWEEP_STRIDE = int(os.environ.get("MLOG_SWEEP_STRIDE", "1"))
"""1 (every point) unless `MLOG_SWEEP_STRIDE` says otherwise."""


def swept(points: Sequence[T]) -> list[T]:
    """The points of a sweep this run checks: every `SWEEP_STRIDE`th, and the last."""
    chosen = list(points[::SWEEP_STRIDE])
    if points and (len(points) - 1) % SWEEP_STRIDE:
        chosen.append(points[-1])
    return chosen
