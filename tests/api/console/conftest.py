"""The console tests' history (built once per module) and a client of the console over it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.console.app import make_app
from api.console.sessions import SessionStore
from api.console.source import HistorySource, Origin, open_local
from tests.support.console import Client, build_history


@pytest.fixture(scope="module")
def history_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("console") / "data"
    build_history(data_dir)
    return data_dir


@pytest.fixture
def sessions() -> SessionStore:
    return SessionStore()


@pytest.fixture
async def client(history_dir: Path, sessions: SessionStore) -> AsyncIterator[Client]:
    local = HistorySource(open_local(history_dir))
    app = make_app(Origin(data_dir=history_dir), local, sessions=sessions)
    async with TestClient(TestServer(app, host="127.0.0.1")) as test_client:
        yield test_client
