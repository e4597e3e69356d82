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
    entries, and then none.
    """

    def __init__(self, quiet_s: float) -> None:
        self.quiet_s = quiet_s
        self._timer: asyncio.TimerHandle | None = None

    def busy(self) -> None:
        """Another step of the mass change (on the event loop's thread)."""
        if self._timer is None:
            begin_mass_change()
        else:
            self._timer.cancel()
        import asyncio  # here: the commands that import the service run without asyncio

        self._timer = asyncio.get_running_loop().call_later(self.quiet_s, self.end)

    def end(self) -> None:
        """End it now, if it is under way (also what the timer calls)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            end_mass_change()
