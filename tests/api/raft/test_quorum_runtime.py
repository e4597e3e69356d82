"""What a quorum voter sets in its interpreter: the switch interval."""

from __future__ import annotations

import sys

import pytest

from api.raft import node as node_module


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
