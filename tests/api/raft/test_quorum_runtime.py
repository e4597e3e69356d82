"""What a quorum voter sets in its interpreter: the cyclic collector (the loaded image frozen,
then what each full collection leaves alive) and the switch interval."""

from __future__ import annotations

import gc
import sys

import pytest

from api.raft import node as node_module
from tests.support.collector import Cycle, a_new_cycle_is_collected


@pytest.mark.usefixtures("collector")
def test_each_long_full_collection_freezes_what_survived_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(node_module, "FREEZE_AFTER_COLLECTION_S", 0.0)  # every one is long
    node_module._freeze_image()
    node_module._freeze_image()  # loaded again (a snapshot installed): one callback still
    assert gc.callbacks.count(node_module._freeze_after_full_collection) == 1
    kept = [Cycle() for _ in range(1000)]
    frozen = gc.get_freeze_count()
    gc.collect(1)  # a younger generation's collection freezes nothing
    assert gc.get_freeze_count() == frozen
    gc.collect()
    assert gc.get_freeze_count() >= frozen + len(kept)


@pytest.mark.usefixtures("collector")
def test_a_short_full_collection_freezes_nothing() -> None:
    node_module._freeze_image()
    kept = [Cycle() for _ in range(100)]
    frozen = gc.get_freeze_count()
    gc.collect()  # a few objects since the freeze: far below FREEZE_AFTER_COLLECTION_S
    assert gc.get_freeze_count() == frozen
    assert kept


@pytest.mark.usefixtures("collector")
def test_garbage_is_collected_before_the_freeze(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_module, "FREEZE_AFTER_COLLECTION_S", 0.0)
    node_module._freeze_image()
    assert a_new_cycle_is_collected()  # freed by the full collection, not frozen alive
    # What is made after a freeze is collected as usual.
    assert a_new_cycle_is_collected()


def test_a_voter_lowers_the_switch_interval_never_raises_it() -> None:
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)  # CPython's default
        node_module._share_the_interpreter()
        assert sys.getswitchinterval() == pytest.approx(node_module.SWITCH_INTERVAL_S)
        sys.setswitchinterval(0.0001)
        node_module._share_the_interpreter()
        assert sys.getswitchinterval() == pytest.approx(0.0001)
    finally:
        sys.setswitchinterval(before)
