"""The console tests' history (built once per module), a client of the console over it, and a
server over the same history (SASL, the users of tests/support/sasl_users.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.console.app import make_app
from api.console.sessions import SessionStore
from api.console.source import HistorySource, Origin, open_local
from api.server.server import MetadataServer
from tests.support.console import Client, build_history
from tests.support.sasl_users import SASL
from tests.support.server_thread import running_server


@pytest.fixture(scope="module")
def history_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("console") / "data"
    build_history(data_dir)
    return data_dir


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetadataServer]:
    """A server over a history of the module's own, with a SASL listener."""
    data_dir = tmp_path_factory.mktemp("served") / "data"
    build_history(data_dir)
    with running_server(data_dir / "log", brokers=0, listeners=[SASL]) as running:
        yield running


@pytest.fixture
def sessions() -> SessionStore:
    return SessionStore()


@pytest.fixture
async def client(history_dir: Path, sessions: SessionStore) -> AsyncIterator[Client]:
    local = HistorySource(open_local(history_dir))
    app = make_app(Origin(data_dir=history_dir), local, sessions=sessions)
    async with TestClient(TestServer(app, host="127.0.0.1")) as test_client:
        yield test_client
