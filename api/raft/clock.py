"""The quorum's clock: monotonic milliseconds, the time of the Raft core's timers and fetches.

The node ticks its core with it and the links stamp a lost connection with it, so the two
compare (a link lost after a voter's last fetch: that voter has stopped).
"""

from __future__ import annotations

import time


def now_ms() -> int:
    """Monotonic milliseconds (never moved by a change of the wall clock)."""
    return time.monotonic_ns() // 1_000_000
