"""Fixtures of the tests that start real processes (every test here is marked `process`)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.quorum_processes import TIMERS, Quorum


@contextmanager
def _running_quorum(root: Path) -> Iterator[Quorum]:
    """Three `mlog serve` nodes under `root`, quick elections, brokers registered; stopped after."""
    q = Quorum(root, timers=TIMERS)
    q.start_all()
    try:
        asyncio.run(q.register_brokers())
        yield q
    finally:
        q.stop_all()


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
    with _running_quorum(tmp_path) as q:
        yield q


@pytest.fixture(scope="module")
def module_quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Quorum]:
    """`quorum`'s three nodes shared by a file's tests that only talk to them.

    For tests that stop no node, cut no link and touch no file (a start is ~3 CPU-seconds and
    seconds of waiting on a loaded host); one that does takes `quorum`.
    """
    with _running_quorum(tmp_path_factory.mktemp("quorum")) as q:
        yield q
