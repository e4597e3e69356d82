"""Objects for tests of the cyclic collector's settings (the fixture: `collector`, conftest)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Sequence


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


def frozen(objects: Sequence[object]) -> list[bool]:
    """Whether each of `objects` is frozen: tracked by the collector, yet in no generation
    `gc.get_objects()` lists (the permanent one). Asked of the objects themselves, not of
    `gc.get_freeze_count()`, which frozen objects freed meanwhile (an earlier test's
    tasks or threads winding down) lower. An object the collector never tracked is not
    frozen."""
    listed = {id(obj) for obj in gc.get_objects()}
    return [gc.is_tracked(obj) and id(obj) not in listed for obj in objects]


def all_frozen(objects: Sequence[object]) -> bool:
    """Whether every one of `objects` is frozen."""
    return all(frozen(objects))


def none_frozen(objects: Sequence[object]) -> bool:
    """Whether none of `objects` is frozen."""
    return not any(frozen(objects))
