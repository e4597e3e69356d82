"""Ending a task the caller started, without hiding the caller's own cancellation.

Two asyncio habits swallow a cancellation on Python 3.11, and a task that swallowed one runs
on: a broker asked to stop kept looking for a controller, a `TaskGroup` waited forever.

- `asyncio.wait_for(step, t)`: when `step` ends in the same turn of the loop as the caller is
  cancelled, 3.11 returns (or raises) `step`'s outcome and drops the cancellation (fixed in
  3.12). The product bounds a step with `async with asyncio.timeout(t)` instead, which hands
  the cancellation on (`tests/test_cancellation_rules.py` keeps `wait_for` out).
- `with suppress(BaseException): await task` after `task.cancel()`: meant to drop the task's
  outcome, it drops a cancellation of the caller too. `cancel_and_wait` waits for the task's
  end without raising its outcome, and raises the caller's cancellation.
"""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel `task` (if still running) and wait for its end.

    Its outcome (a result, an error, its cancellation) is retrieved, never raised: nothing is
    reported as "never retrieved". A cancellation of the caller while it waits is raised (the
    task, already cancelled, ends on its own).
    """
    if not task.done():
        task.cancel()
        await asyncio.wait([task])
    if not task.cancelled():
        task.exception()
