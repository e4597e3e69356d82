"""The cyclic collector's policy: a loaded image and long collections frozen, mass changes.

Whether something was frozen is asked of the objects themselves (`tests.support.collector`):
`gc.get_freeze_count()` also falls when frozen objects of an earlier test are freed meanwhile.
"""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest
from immutables import Map

from api.service import gc_policy as gc_policy_module
from api.service.gc_policy import (
    MassChangeUntilQuiet,
    begin_mass_change,
    end_mass_change,
    freeze_loaded_image,
    image_frozen_as_loaded,
    mass_changes_under_way,
    sweep_frozen,
)
from replay.map_nodes import nodes_of, untracking_available
from tests.support.collector import Cycle, a_new_cycle_is_collected, all_frozen, none_frozen

pytestmark = pytest.mark.usefixtures("collector")


def test_no_collection_while_one_runs_and_what_it_made_is_frozen_after_the_last() -> None:
    gc.enable()
    begin_mass_change()
    begin_mass_change()  # two at once (a fence beside a follower's catch-up)
    assert not gc.isenabled()
    made = [Cycle() for _ in range(1000)]
    end_mass_change()
    assert not gc.isenabled()  # one is still under way
    assert none_frozen(made)
    end_mass_change()
    assert gc.isenabled()
    assert mass_changes_under_way() == 0
    assert all_frozen(made)
    end_mass_change()  # one too many: nothing happens
    assert mass_changes_under_way() == 0
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    begin_mass_change()
    end_mass_change()
    assert not gc.isenabled()


def test_what_is_made_after_it_is_collected_as_usual() -> None:
    gc.enable()
    begin_mass_change()
    end_mass_change()
    assert a_new_cycle_is_collected()


def test_a_mass_change_lasts_until_it_is_quiet() -> None:
    async def run() -> None:
        gc.enable()
        change = MassChangeUntilQuiet(0.5, 60.0)
        change.busy()
        assert mass_changes_under_way() == 1
        for _ in range(4):  # each step keeps it going
            await asyncio.sleep(0.01)
            change.busy()
            assert mass_changes_under_way() == 1
        for _ in range(500):  # then it ends once quiet
            if mass_changes_under_way() == 0:
                break
            await asyncio.sleep(0.01)
        assert mass_changes_under_way() == 0
        assert gc.isenabled()
        change.busy()
        change.end()  # ended at once (the node stops); the timer does nothing more
        change.end()
        assert mass_changes_under_way() == 0
        await asyncio.sleep(0.1)
        assert mass_changes_under_way() == 0

    asyncio.run(run())


def test_a_mass_change_that_never_quiets_ends_after_its_longest() -> None:
    async def run() -> None:
        gc.enable()
        change = MassChangeUntilQuiet(60.0, 0.05)
        change.busy()
        assert change.under_way()
        assert not gc.isenabled()
        await asyncio.sleep(0.1)
        change.busy()  # still busy, but past its longest: the collector works again
        assert not change.under_way()
        assert mass_changes_under_way() == 0
        assert gc.isenabled()
        change.busy()  # and stays at work for the rest of this busy stretch
        assert mass_changes_under_way() == 0
        change.end()  # the stretch ends (quiet); the next big commit begins another
        change.busy()
        assert change.under_way()
        change.end()
        assert mass_changes_under_way() == 0
        assert gc.isenabled()

    asyncio.run(run())


def test_each_long_middle_or_full_collection_freezes_what_survived_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gc_policy_module, "FREEZE_AFTER_COLLECTION_S", 0.0)  # every one is long
    freeze_loaded_image()
    freeze_loaded_image()  # loaded again (a snapshot installed): one callback still
    assert gc.callbacks.count(gc_policy_module._freeze_after_long_collection) == 1
    kept = [Cycle() for _ in range(1000)]
    gc.collect(0)  # a short young collection freezes nothing
    assert none_frozen(kept)
    gc.collect(1)
    assert all_frozen(kept)
    more = [Cycle() for _ in range(1000)]
    gc.collect()
    assert all_frozen(more)


def test_a_long_young_collection_freezes_what_survived_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gc_policy_module, "FREEZE_AFTER_YOUNG_COLLECTION_S", 0.0)
    freeze_loaded_image()
    kept = [Cycle() for _ in range(1000)]
    gc.collect(0)
    assert all_frozen(kept)
    assert a_new_cycle_is_collected(0)  # young garbage is freed by it, not frozen after it


def test_a_loaded_image_raises_the_young_threshold_unless_the_collector_is_off() -> None:
    gc.set_threshold(700, 10, 10)
    freeze_loaded_image()
    assert gc.get_threshold()[0] == gc_policy_module.YOUNG_COLLECTION_THRESHOLD
    gc.set_threshold(0, 10, 10)
    freeze_loaded_image()
    assert gc.get_threshold()[0] == 0


def test_a_short_collection_freezes_nothing() -> None:
    freeze_loaded_image()
    kept = [Cycle() for _ in range(100)]
    gc.collect(1)  # a few objects since the freeze: far below FREEZE_AFTER_COLLECTION_S
    gc.collect()
    assert none_frozen(kept)


def test_garbage_is_collected_before_the_freeze(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc_policy_module, "FREEZE_AFTER_COLLECTION_S", 0.0)
    freeze_loaded_image()
    assert a_new_cycle_is_collected()  # freed by the full collection, not frozen alive
    # What is made after a freeze is collected as usual.
    assert a_new_cycle_is_collected()


@pytest.mark.skipif(not untracking_available(), reason="replay._untrack is not built")
def test_each_collection_first_untracks_the_young_map_nodes() -> None:
    freeze_loaded_image()
    freeze_loaded_image()
    order = [
        gc.callbacks.index(gc_policy_module._untrack_young_map_nodes),
        gc.callbacks.index(gc_policy_module._freeze_after_long_collection),
    ]
    assert order == sorted(order)  # untracked first: the freeze's timer times the walk alone
    assert gc.callbacks.count(gc_policy_module._untrack_young_map_nodes) == 1
    grown: Map[int, int] = Map()
    for key in range(2000):
        grown = grown.set(key, key)
    gc.collect(0)
    nodes = nodes_of(grown)
    assert nodes and not any(gc.is_tracked(node) for node in nodes)
    assert a_new_cycle_is_collected(0)  # the rest of the young generation as usual


def test_an_image_is_loaded_with_the_collector_off_and_frozen_as_it_ends() -> None:
    gc.enable()
    with image_frozen_as_loaded():
        assert not gc.isenabled()
        loaded = [Cycle() for _ in range(1000)]
    assert gc.isenabled()
    assert all_frozen(loaded)
    assert a_new_cycle_is_collected()  # what comes after the load is collected as usual


def test_a_load_that_fails_freezes_nothing_and_leaves_its_garbage_to_the_collector() -> None:
    gc.enable()
    with pytest.raises(RuntimeError), image_frozen_as_loaded():
        half = [Cycle() for _ in range(1000)]
        raise RuntimeError("a damaged log")
    assert gc.isenabled()
    assert none_frozen(half)
    gc.disable()
    with image_frozen_as_loaded():
        pass
    assert not gc.isenabled()  # a collector that was off stays off


def test_a_sweep_frees_the_cycles_a_freeze_kept_and_freezes_what_is_alive() -> None:
    garbage, alive = Cycle(), Cycle()
    gone = weakref.ref(garbage)
    del garbage
    gc.freeze()  # a freeze after a long collection kept this cycle of garbage from the collector
    gc.collect()
    assert gone() is not None
    assert sweep_frozen() >= 1
    assert gone() is None
    assert all_frozen([alive]) and alive.me is alive  # what is alive is frozen again
    assert a_new_cycle_is_collected()  # and what comes after is collected as usual
