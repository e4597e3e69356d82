"""The live pages' follow requests: a long poll on the log that answers with what committed."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer

from api import Metadata
from api.console import live
from api.console.app import make_app
from api.console.sessions import SESSION_COOKIE
from api.console.source import HistorySource, Origin, connect_as, open_local
from api.console.state import SESSIONS
from api.server.server import MetadataServer
from records.model import ConfigRecord, ConfigResourceType
from tests.support.console import (
    HOSTILE,
    HOSTILE_PRINCIPAL,
    PASSWORD,
    Client,
    sign_in,
)

LAST = 18
"""The history's last offset (tests.support.console.build_history)."""


@pytest.fixture
def data_dir(history_dir: Path, tmp_path: Path) -> Path:
    """A copy of the history, for a test to write to."""
    copy = tmp_path / "data"
    shutil.copytree(history_dir, copy)
    return copy


@pytest.fixture
async def own(data_dir: Path) -> AsyncIterator[Client]:
    app = make_app(Origin(data_dir=data_dir), HistorySource(open_local(data_dir)))
    async with TestClient(TestServer(app, host="127.0.0.1")) as test_client:
        yield test_client


def _write_hostile(data_dir: Path) -> None:
    with Metadata.open(data_dir, principal=HOSTILE_PRINCIPAL) as md:
        md.append(
            [
                ConfigRecord(
                    resource_type=ConfigResourceType.TOPIC,
                    resource_name="orders",
                    name="x.live",
                    value=HOSTILE,
                )
            ]
        )


async def _started(request: asyncio.Task[object]) -> None:
    """Let the follow request reach its wait (it answers nothing before an entry comes)."""
    await asyncio.sleep(0.3)
    assert not request.done()


async def test_a_follow_answers_an_entry_written_after_it_started(
    own: Client, data_dir: Path
) -> None:
    await sign_in(own)
    request = asyncio.ensure_future(own.get(f"/timeline/follow?after={LAST}"))
    await _started(request)
    await asyncio.to_thread(_write_hostile, data_dir)
    answer = await asyncio.wait_for(request, 60)
    html = await answer.text()
    assert answer.status == 200
    assert answer.headers[live.AFTER_HEADER] == str(LAST + 1)
    assert f'<td class="num">{LAST + 1}</td>' in html
    assert "x.live" in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html  # the value and the principal
    assert "<script>alert" not in html and "<img src=x" not in html


async def test_a_follow_with_nothing_new_answers_empty_in_time(
    own: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "FOLLOW_SECONDS", 0.5)
    await sign_in(own)
    answer = await own.get(f"/timeline/follow?after={LAST}")
    assert answer.status == 200
    assert answer.headers[live.AFTER_HEADER] == str(LAST)
    assert not (await answer.text()).strip()


async def test_entries_the_filters_leave_out_move_the_cursor_only(
    own: Client, data_dir: Path
) -> None:
    await sign_in(own)
    request = asyncio.ensure_future(own.get(f"/timeline/follow?after={LAST}&principal=User:alice"))
    await _started(request)
    await asyncio.to_thread(_write_hostile, data_dir)
    answer = await asyncio.wait_for(request, 60)
    assert answer.headers[live.AFTER_HEADER] == str(LAST + 1)
    assert "<tr>" not in await answer.text()


async def test_a_stopping_console_ends_its_follows(
    own: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live, "FOLLOW_SECONDS", 3600.0)  # only the stop can end it in time
    await sign_in(own)
    request = asyncio.ensure_future(own.get(f"/timeline/follow?after={LAST}"))
    await _started(request)
    app = own.app
    assert app is not None
    await app.shutdown()
    answer = await asyncio.wait_for(request, 60)
    assert answer.status == 200
    assert answer.headers[live.AFTER_HEADER] == str(LAST)


async def test_the_cluster_now_is_told_when_the_log_moves(own: Client, data_dir: Path) -> None:
    await sign_in(own)
    page = await (await own.get("/cluster")).text()
    assert f'data-follow="/cluster/follow?after={LAST}"' in page
    assert "data-follow" not in await (await own.get("/cluster?at=3")).text()  # not "now"
    request = asyncio.ensure_future(own.get(f"/cluster/follow?after={LAST}"))
    await _started(request)
    await asyncio.to_thread(_write_hostile, data_dir)
    answer = await asyncio.wait_for(request, 60)
    assert await answer.json() == {"last": LAST + 1}


async def test_only_a_page_at_the_logs_end_follows(client: Client) -> None:
    await sign_in(client)
    end = await (await client.get("/timeline?after=10")).text()
    assert f'data-follow="/timeline/follow?after={LAST}"' in end
    assert '<script src="/static/live.js" defer></script>' in end
    middle = await (await client.get("/timeline?limit=2")).text()
    assert "data-follow" not in middle
    bounded = await (await client.get("/timeline?until=2000-01-01T00:00:00Z")).text()
    assert "data-follow" not in bounded  # nothing new can fall in a range in the past
    script = await client.get("/static/live.js")
    assert script.status == 200
    assert "X-Mlog-After" in await script.text()


@pytest.mark.parametrize("query", ["after=x", "after=-2", "after=1&since=nope"])
async def test_a_bad_follow_is_a_400(client: Client, query: str) -> None:
    await sign_in(client)
    for path in ("/timeline/follow", "/cluster/follow"):
        if path == "/cluster/follow" and "since" in query:
            continue
        answer = await client.get(f"{path}?{query}")
        assert answer.status == 400
        assert "Traceback" not in await answer.text()


async def test_a_follow_without_a_session_is_sent_to_the_login(client: Client) -> None:
    answer = await client.get(f"/timeline/follow?after={LAST}", allow_redirects=False)
    assert answer.status == 303
    assert answer.headers["Location"].startswith("/login")


# ---------------------------------------------------------------------- through a server


async def test_through_a_server_the_follow_is_fetch_logs_long_poll(
    server: MetadataServer,
) -> None:
    origin = Origin(bootstrap_server=server.address)
    app = make_app(origin, None)
    async with TestClient(TestServer(app, host="127.0.0.1")) as remote:
        assert await sign_in(remote) == 303
        request = asyncio.ensure_future(remote.get(f"/timeline/follow?after={LAST}"))
        await _started(request)

        def write() -> None:
            with connect_as(origin, "alice", PASSWORD) as md:
                md.create_namespace("live")

        await asyncio.to_thread(write)
        answer = await asyncio.wait_for(request, 60)
        html = await answer.text()
    assert answer.status == 200
    assert int(answer.headers[live.AFTER_HEADER]) > LAST
    assert "namespace" in html and "<b>live</b>" in html
    assert "User:alice" in html


async def test_a_session_follows_in_at_most_max_follows_requests(
    own: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A client that opens follow requests and never lets them end holds them all: beyond the
    # bound each is refused at once, and a place freed is taken again.
    monkeypatch.setattr(live, "MAX_FOLLOWS", 2)
    monkeypatch.setattr(live, "FOLLOW_SECONDS", 3600.0)
    await sign_in(own)
    held = [asyncio.ensure_future(own.get(f"/timeline/follow?after={LAST}")) for _ in range(2)]
    for request in held:
        await _started(request)
    refused = await own.get(f"/cluster/follow?after={LAST}")
    assert refused.status == 429
    assert "follows the log in 2 pages" in await refused.text()
    held[0].cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await held[0]

    # The browser went away: its request ends at its next slice.
    token = own.session.cookie_jar.filter_cookies(own.make_url("/"))[SESSION_COOKIE].value
    app = own.app
    assert app is not None
    session = app[SESSIONS].get(token)
    assert session is not None

    async def freed() -> None:
        while session.follows > 1:
            await asyncio.sleep(0.02)

    await asyncio.wait_for(freed(), 60)
    again = asyncio.ensure_future(own.get(f"/cluster/follow?after={LAST}"))
    await _started(again)
    for request in (held[1], again):
        request.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await request
