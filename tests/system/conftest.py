"""Fixtures of the tests that start real processes (every test here is marked `process`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.quorum_processes import TIMERS, Quorum


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[Quorum]:
    """Three `mlog serve` nodes of one quorum with quick elections, brokers registered."""
    q = Quorum(tmp_path, timers=TIMERS)
    q.start_all()
    try:
        asyncio.run(q.register_brokers())
        yield q
    finally:
        q.stop_all()
