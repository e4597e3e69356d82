"""The cyclic garbage collector during mass changes: off while one runs, its growth frozen after.

A mass change (a fence moving a broker's leaderships in batches, a follower replaying such
batches or catching up) makes objects that join the image and live as long as it: new
partition records, map nodes, topic images. The collector would walk each of them in its
young collection, again in its middle one, and again in full collections until a long one
freezes what survived (`api/raft/node.py`): ~15% of a voter's CPU during a 20% fence at 1M
partitions, and full collections of tens of milliseconds on the event loop, which is where
the heartbeats' tail came from. So while a mass change runs the collector makes no
automatic collection, and when the last one ends what is alive is frozen (`gc.freeze`), as
after an image's load, and collections resume.

The bargain is the freeze's: a cycle of garbage that exists at that moment (made by the
requests answered meanwhile) is never freed. It is bounded by one mass change, as the
freeze after a load is by the load, and mass changes are rare events (a broker fenced or
shut down, a node catching up), not every write's.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio


class _MassChanges:
    """The mass changes under way in this process (the collector is process-wide)."""

    def __init__(self) -> None:
        self.holders = 0
        self.was_enabled = False


_UNDER_WAY = _MassChanges()


def begin_mass_change() -> None:
    """A mass change begins: no automatic collection until the last one ends."""
    if _UNDER_WAY.holders == 0:
        _UNDER_WAY.was_enabled = gc.isenabled()
        gc.disable()
    _UNDER_WAY.holders += 1


def end_mass_change() -> None:
    """A mass change ends; after the last, freeze what is alive and let collections resume."""
    if _UNDER_WAY.holders <= 0:
        return
    _UNDER_WAY.holders -= 1
    if _UNDER_WAY.holders == 0:
        gc.freeze()
        if _UNDER_WAY.was_enabled:
            gc.enable()


def mass_changes_under_way() -> int:
    """How many mass changes have begun and not ended."""
    return _UNDER_WAY.holders


class MassChangeUntilQuiet:
    """A mass change that lasts while `busy()` is called, until `quiet_s` pass without a call.

    A follower cannot tell when the leader's mass change ends; it sees commits of many
    entries, and then none. Big commits that never stop (a sender keeping it busy on
    purpose, a very long catch-up) would keep the collector off for good and freeze all the
    garbage made meanwhile: after `longest_s` the mass change ends all the same, and the
    collector works as usual until a quiet spell ends that busy stretch.
    """

    def __init__(self, quiet_s: float, longest_s: float) -> None:
        self.quiet_s = quiet_s
        self.longest_s = longest_s
        self._timer: asyncio.TimerHandle | None = None
        """The quiet spell's timer, while a busy stretch lasts."""
        self._began: float | None = None
        """When this stretch's mass change began (None: none under way, or it ran too long)."""

    def busy(self) -> None:
        """Another step of the mass change (on the event loop's thread)."""
        import asyncio  # here: the commands that import the service run without asyncio

        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._timer is None:
            begin_mass_change()
            self._began = now
        else:
            self._timer.cancel()
            if self._began is not None and now - self._began >= self.longest_s:
                self._began = None
                end_mass_change()
        self._timer = loop.call_later(self.quiet_s, self.end)

    def under_way(self) -> bool:
        """Whether it holds the collector off now."""
        return self._began is not None

    def end(self) -> None:
        """End the busy stretch now, if there is one (also what the timer calls)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._began is not None:
            self._began = None
            end_mass_change()
