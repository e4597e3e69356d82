"""Objects for tests of the cyclic collector's settings (the fixture: `collector`, conftest)."""

from __future__ import annotations

import gc
import weakref


class Cycle:
    """An object that refers to itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def a_new_cycle_is_collected(generation: int = 2) -> bool:
    """Whether a cycle of garbage made now is freed by a collection of `generation` (a full
    one by default), not kept frozen."""
    garbage = Cycle()
    gone = weakref.ref(garbage)
    del garbage
    gc.collect(generation)
    return gone() is None
