"""The image's persistent maps' nodes, kept out of the cyclic collector's walks.

Every change to the image copies the path of map nodes (`immutables.Map`'s bitmap, array and
collision nodes) from the root to the changed key: a topic created makes a few dozen new
nodes, each a container the cyclic collector tracks. On a server whose image grows (a quorum
taking a topic per write, a fence's moves) they are most of what survives each young
collection, and walking them is dear: a node's children are older objects spread over the
heap, each a cache miss. In process, a young collection over the objects of 10,000 new topics
on a 200,000-topic image took 56 ms, 6.5 ms with the map nodes untracked; they were 88% of
the walk.

`untrack_young_nodes` untracks the map nodes of the youngest generation (the collector's
policy calls it as each collection starts, `api.service.gc_policy`). What the collector
looks for is a cycle of garbage; a map node is only ever in one if a map holds, through its
values, a container that holds the map again. The image never does that: its maps hold
records, images and tuples, made once and never pointed back at their maps. An untracked
node is still freed by reference counting as before; what untracking costs, if that ever
changed, is a leak of such a cycle, never a wrong free.

Untracking a node takes the compiled helper (`replay._untrack`, built with the package): a
pass over the young generation costs ~9 ns an object (`gc.get_objects(0)` ~8 ns, the type
check in C ~1 ns), where a call through ctypes cost ~0.5 µs a node, about what walking it
costs. Without the helper nothing is untracked.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from immutables import Map

try:
    from replay import _untrack  # type: ignore[attr-defined]  # optional C extension
except ImportError:  # built without a C compiler: collections walk the nodes, as before
    _untrack = None


def _reachable(root: object, is_node: Callable[[object], bool]) -> list[object]:
    """The objects reachable from `root` through objects for which `is_node` holds."""
    found: list[object] = []
    pending: list[object] = [root]
    while pending:
        for child in gc.get_referents(pending.pop()):
            if is_node(child):
                found.append(child)
                pending.append(child)
    return found


def _node_types() -> tuple[type, ...]:
    """The map's node types, found through a map that has all three kinds of node."""
    # hash(-1) == hash(-2) in CPython: the two keys share a collision node.
    sample = Map({key: None for key in range(-2, 4096)})
    named = {type(node).__name__: type(node) for node in _reachable(sample, _named_node)}
    return tuple(named[name] for name in sorted(named))


def _named_node(child: object) -> bool:
    name = type(child).__name__
    return name.startswith("map_") and name.endswith("_node")


NODE_TYPES: tuple[type, ...] = _node_types()
"""`immutables`' node types: `map_array_node`, `map_bitmap_node`, `map_collision_node`."""


def nodes_of(root: Map[Any, Any]) -> list[object]:
    """The nodes of a map (what `untrack_young_nodes` would untrack of it)."""
    return _reachable(root, lambda child: type(child) in NODE_TYPES)


def untracking_available() -> bool:
    """Whether map nodes can be untracked here (the compiled helper was built)."""
    return _untrack is not None


def untrack_young_nodes() -> int:
    """Untrack the map nodes of the collector's youngest generation; returns how many."""
    if _untrack is None:
        return 0
    untracked: int = _untrack.untrack_instances(gc.get_objects(generation=0), NODE_TYPES)
    return untracked


@contextmanager
def made_out_of_view() -> Iterator[None]:
    """Make a mass of long-lived map nodes with the collector off, and untrack them at the end.

    A snapshot's load and its deferred per-broker index make hundreds of thousands of nodes
    and no cycles: with the collector on, each collection meanwhile would walk them (and,
    in a process that has not frozen it, the image); untracked as they end, the first young
    collection after does not walk them either.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        untrack_young_nodes()
        if was_enabled:
            gc.enable()
