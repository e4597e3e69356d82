"""Objects for tests of the cyclic collector's settings (the fixture: `collector`, conftest)."""

from __future__ import annotations

import gc
import weakref


class Cycle:
    """An object that refers to itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def a_new_cycle_is_collected() -> bool:
    """Whether a cycle of garbage made now is freed by a full collection (not kept frozen)."""
    garbage = Cycle()
    gone = weakref.ref(garbage)
    del garbage
    gc.collect()
    return gone() is None
