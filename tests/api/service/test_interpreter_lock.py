"""What a server sets in its interpreter: the switch interval, lowered, never raised."""

from __future__ import annotations

import sys

import pytest

from api.service.interpreter_lock import SWITCH_INTERVAL_S, share_the_interpreter_lock


def test_a_server_lowers_the_switch_interval_never_raises_it() -> None:
    before = sys.getswitchinterval()
    try:
        sys.setswitchinterval(0.005)  # CPython's default
        share_the_interpreter_lock()
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
        sys.setswitchinterval(0.0001)
        share_the_interpreter_lock()
        assert sys.getswitchinterval() == pytest.approx(0.0001)
    finally:
        sys.setswitchinterval(before)
