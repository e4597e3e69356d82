"""Fixtures of the tests that start real processes (every test here is marked `process`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.quorum_processes import TIMERS, Quorum


@pytest.fixture
def quorum_env() -> dict[str, str]:
    """Environment variables the `quorum` fixture's processes inherit (a module overrides it)."""
    return {}


@pytest.fixture
def quorum(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quorum_env: dict[str, str]
) -> Iterator[Quorum]:
    """Three `mlog serve` nodes of one quorum with quick elections, brokers registered."""
    for name, value in quorum_env.items():
        monkeypatch.setenv(name, value)
    q = Quorum(tmp_path, timers=TIMERS)
    q.start_all()
    try:
        asyncio.run(q.register_brokers())
        yield q
    finally:
        q.stop_all()
