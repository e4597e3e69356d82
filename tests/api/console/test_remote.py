"""The console over a server: the login is the server's SASL SCRAM, reads go through it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api.console.app import make_app
from api.console.sessions import SessionStore
from api.console.source import HistorySource, Origin, connect_as, open_local
from api.server.server import MetadataServer
from tests.support.console import PASSWORD, Client, sign_in


@pytest.fixture
async def remote(server: MetadataServer, sessions: SessionStore) -> AsyncIterator[Client]:
    app = make_app(Origin(bootstrap_server=server.address), None, sessions=sessions)
    async with TestClient(TestServer(app, host="127.0.0.1")) as test_client:
        yield test_client


async def test_the_server_checks_the_password(remote: Client, sessions: SessionStore) -> None:
    assert await sign_in(remote, password="wrong") == 401
    assert not sessions._sessions
    assert await sign_in(remote) == 303
    (session,) = sessions._sessions.values()
    assert session.principal == "User:alice"
    assert not session.shared  # its own connection, logged in as alice


async def test_pages_read_through_the_server(remote: Client) -> None:
    assert await sign_in(remote) == 303
    answer = await remote.get("/timeline.json?entity=config")
    rows = (await answer.json())["rows"]
    assert [r["change"] for r in rows][:2] == [
        "config topic orders: retention.ms set to 86400000",
        "config topic orders: retention.ms 86400000 -> 3600000",
    ]
    page = await remote.get("/cluster?at=9&topic=orders")
    html = await page.text()
    assert page.status == 200
    assert "Reading servers" in html
    assert "No authorizer" not in html
    assert "retention.ms" in html


async def test_logout_closes_the_sessions_connection(
    remote: Client, sessions: SessionStore
) -> None:
    assert await sign_in(remote) == 303
    page = await remote.get("/timeline")
    assert page.status == 200
    (session,) = sessions._sessions.values()
    csrf = session.csrf
    out = await remote.post("/logout", data={"csrf": csrf}, allow_redirects=False)
    assert out.status == 303
    assert not sessions._sessions


async def test_servers_that_do_not_answer_say_so(tmp_path: Path) -> None:
    app = make_app(Origin(bootstrap_server="127.0.0.1:1"), None)
    async with TestClient(TestServer(app, host="127.0.0.1")) as test_client:
        form = await test_client.get("/login")
        assert form.status == 200
        token = re.search(r'name="csrf" value="([^"]+)"', await form.text())
        assert token is not None
        answer = await test_client.post(
            "/login", data={"csrf": token.group(1), "user": "alice", "password": "x"}
        )
        assert answer.status == 401
        assert "could not be asked" in await answer.text()


def test_only_a_data_directory_s_handle_carries_the_map_counts(
    server: MetadataServer, history_dir: Path
) -> None:
    # A server's images are decoded apart: two of them share nothing a count could carry.
    with connect_as(Origin(bootstrap_server=server.address), "alice", PASSWORD) as md:
        assert HistorySource(md).map_counts is None
    with open_local(history_dir) as md:
        assert HistorySource(md).map_counts is not None
