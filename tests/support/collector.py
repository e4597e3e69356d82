"""Objects for tests of the cyclic collector's settings (the fixture: `collector`, conftest)."""

from __future__ import annotations


class Cycle:
    """An object that refers to itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self
