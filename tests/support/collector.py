"""Objects for tests of the cyclic collector's settings (the fixture: `collector`, conftest)."""

from __future__ import annotations

import gc
import weakref

from replay.map_nodes import NODE_TYPES


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


def map_nodes(root: object) -> list[object]:
    """The nodes of an `immutables.Map` (`replay.map_nodes.NODE_TYPES`), found by references."""
    found: list[object] = []
    pending: list[object] = [root]
    while pending:
        for child in gc.get_referents(pending.pop()):
            if type(child) in NODE_TYPES:
                found.append(child)
                pending.append(child)
    return found
