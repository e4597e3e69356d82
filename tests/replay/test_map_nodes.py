"""The image's map nodes kept out of the cyclic collector's walks (`replay.map_nodes`)."""

from __future__ import annotations

import gc
import weakref

import pytest
from immutables import Map

from replay.map_nodes import (
    NODE_TYPES,
    made_out_of_view,
    nodes_of,
    untrack_young_nodes,
    untracking_available,
)
from tests.support.collector import Cycle

pytestmark = [
    pytest.mark.usefixtures("collector"),
    pytest.mark.skipif(
        not untracking_available(), reason="replay._untrack is not built (no compiler)"
    ),
]


def _grown(size: int) -> Map[object, object]:
    """A map built one key at a time, as replay builds the image's (keys -1 and -2 collide)."""
    built: Map[object, object] = Map()
    for key in range(-2, size):
        built = built.set(key, (key, str(key)))
    return built


def test_the_three_kinds_of_node_are_known() -> None:
    assert sorted(kind.__name__ for kind in NODE_TYPES) == [
        "map_array_node",
        "map_bitmap_node",
        "map_collision_node",
    ]


def test_young_nodes_are_untracked_and_nothing_else() -> None:
    gc.disable()  # no collection moves them out of the young generation meanwhile
    gc.collect()
    built = _grown(3000)
    nodes = nodes_of(built)
    assert {type(node).__name__ for node in nodes} == {kind.__name__ for kind in NODE_TYPES}
    values = list(built.values())
    assert all(gc.is_tracked(node) for node in nodes)
    assert untrack_young_nodes() >= len(nodes)
    assert not any(gc.is_tracked(node) for node in nodes)
    assert gc.is_tracked(built)  # the map itself, and what it holds, stay tracked
    assert all(gc.is_tracked(value) for value in values)
    assert untrack_young_nodes() == 0  # nothing new since


def test_an_untracked_map_reads_changes_and_frees_as_before() -> None:
    gc.disable()
    built = _grown(2000)
    untrack_young_nodes()
    assert built[-1] == (-1, "-1") and built[-2] == (-2, "-2")  # the collision node
    assert len(built) == 2002 and sum(1 for _ in built.items()) == 2002
    changed = built.delete(-1).set(5000, None).delete(17)
    assert -1 not in changed and 17 not in changed and changed[5000] is None
    assert built == _grown(2000)  # the old version is untouched
    gc.enable()
    gone = weakref.ref(built)
    del built, changed
    gc.collect()
    assert gone() is None  # maps are freed by reference counting, as ever


def test_a_value_is_collected_once_its_untracked_map_is_gone() -> None:
    """Untracking keeps no value alive: a cycle held by a map is collected after the map."""
    gc.disable()
    held = Cycle()
    gone = weakref.ref(held)
    built = _grown(500).set("held", held)
    del held
    untrack_young_nodes()
    gc.enable()
    gc.collect()
    assert gone() is not None  # reachable through the map
    del built
    gc.collect()
    assert gone() is None


def test_the_helper_takes_only_types_the_collector_tracks() -> None:
    from replay import _untrack  # type: ignore[attr-defined]  # built: see pytestmark

    with pytest.raises(TypeError, match="not a type the collector tracks"):
        _untrack.untrack_instances([1, 2], (int,))
    with pytest.raises(TypeError, match="not a type"):
        _untrack.untrack_instances([], ("map_bitmap_node",))
    with pytest.raises(ValueError, match="at most three"):
        _untrack.untrack_instances([], (list, dict, set, tuple))
    kept = [[1], [[2]]]
    assert _untrack.untrack_instances(kept, (set,)) == 0
    assert all(gc.is_tracked(item) for item in kept)


@pytest.mark.parametrize("enabled", [True, False])
def test_nodes_made_out_of_view_are_untracked_and_the_collector_as_it_was(enabled: bool) -> None:
    (gc.enable if enabled else gc.disable)()
    try:
        with made_out_of_view():
            assert not gc.isenabled()
            grown = _grown(5000)
        assert gc.isenabled() is enabled
        assert not any(gc.is_tracked(node) for node in nodes_of(grown))
    finally:
        gc.enable()


def test_made_out_of_view_restores_the_collector_when_the_work_fails() -> None:
    with pytest.raises(ZeroDivisionError), made_out_of_view():
        _ = 1 / 0
    assert gc.isenabled()
