"""Helpers the area deltas share: folding a dict of changes into a persistent map."""

from __future__ import annotations

from typing import Any, Final

from immutables import Map

MISSING: Final = object()
"""Marks a key a delta has no change for (None is a change: the key was removed)."""


def updated(base: Map[Any, Any], changes: dict[Any, Any]) -> Map[Any, Any]:
    """`base` with `changes` applied; a value of None removes the key."""
    with base.mutate() as mutable:
        for key, value in changes.items():
            if value is None:
                mutable.pop(key, None)
            else:
                mutable[key] = value
        finished: Map[Any, Any] = mutable.finish()
    return finished
