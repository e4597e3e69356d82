"""How much of a sweep a run checks: all of it in `make test`, a sample in `make test-fast`.

`MLOG_SWEEP_STRIDE=N` (the fast tier sets 5) keeps every Nth point of a sweep, the first and
the last always, and gives each property test (Hypothesis) an Nth of its examples, at least
`MIN_EXAMPLES`; unset, every point and every example is checked.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

SWEEP_STRIDE = int(os.environ.get("MLOG_SWEEP_STRIDE", "1"))
"""1 (every point) unless `MLOG_SWEEP_STRIDE` says otherwise."""


MIN_EXAMPLES = 5
"""The fewest examples a property test runs in a sampled run."""


def sampled_examples(max_examples: int) -> int:
    """A property test's examples in this run: all of them, or a `SWEEP_STRIDE`th of them."""
    if SWEEP_STRIDE <= 1:
        return max_examples
    return min(max_examples, max(MIN_EXAMPLES, max_examples // SWEEP_STRIDE))


def swept(points: Sequence[T]) -> list[T]:
    """The points of a sweep this run checks: every `SWEEP_STRIDE`th, and the last."""
    chosen = list(points[::SWEEP_STRIDE])
    if points and (len(points) - 1) % SWEEP_STRIDE:
        chosen.append(points[-1])
    return chosen
