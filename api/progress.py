"""A minimal progress line on stderr for long operations, shown only on a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts work done and redraws one status line at most ten times a second."""

    def __init__(self, label: str, *, total: int | None = None, stream: TextIO | None = None):
        self.label = label
        self.total = total
        self.done = 0
        self._stream = stream or sys.stderr
        self._enabled = self._stream.isatty()
        self._last_draw = 0.0
        self._started = time.monotonic()

    def advance(self, amount: int) -> None:
        """Record `amount` more units of work."""
        self.done += amount
        now = time.monotonic()
        if self._enabled and now - self._last_draw >= 0.1:
            self._last_draw = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.done / max(now - self._started, 1e-9)
        if self.total:
            share = min(self.done / self.total, 1.0)
            bar = "#" * int(share * 30)
            text = f"{self.label} [{bar:<30}] {self.done:,}/{self.total:,} ({rate:,.0f}/s)"
        else:
            text = f"{self.label} {self.done:,} ({rate:,.0f}/s)"
        self._stream.write("\r" + text)
        self._stream.flush()

    def finish(self) -> None:
        """Clear the status line."""
        if self._enabled:
            self._stream.write("\r\033[K")
            self._stream.flush()
