"""The console's pages through aiohttp's test client: the session gate, login, logout, views."""

from __future__ import annotations

import re

from yarl import URL

from api.console.sessions import SESSION_COOKIE, SessionStore
from tests.support.console import PASSWORD, Client, sign_in


async def test_a_request_without_a_session_is_sent_to_the_login(client: Client) -> None:
    answer = await client.get("/cluster?at=3", allow_redirects=False)
    assert answer.status == 303
    location = URL(answer.headers["Location"])
    assert location.path == "/login"
    assert location.query["next"] == "/cluster?at=3"


async def test_login_sets_an_http_only_strict_cookie_and_goes_where_asked(
    client: Client,
) -> None:
    form = await client.get("/login?next=%2Fcluster%3Fat%3D3")
    html = await form.text()
    token = re.search(r'name="csrf" value="([^"]+)"', html)
    assert token is not None
    assert 'value="/cluster?at=3"' in html
    answer = await client.post(
        "/login",
        data={
            "csrf": token.group(1),
            "user": "alice",
            "password": PASSWORD,
            "next": "/cluster?at=3",
        },
        allow_redirects=False,
    )
    assert answer.status == 303
    assert answer.headers["Location"] == "/cluster?at=3"
    cookie = answer.cookies[SESSION_COOKIE]
    assert cookie["httponly"]
    assert cookie["samesite"] == "Strict"
    assert not cookie["secure"]  # plain HTTP here; Secure under TLS
    page = await client.get("/cluster?at=3")
    assert page.status == 200
    assert "User:alice" in await page.text()


async def test_a_wrong_password_or_unknown_user_is_refused_alike(client: Client) -> None:
    assert await sign_in(client, password="wrong") == 401
    assert await sign_in(client, user="mallory", password="x") == 401
    page = await client.get("/timeline", allow_redirects=False)
    assert page.status == 303


async def test_a_login_form_without_its_token_is_refused(client: Client) -> None:
    answer = await client.post(
        "/login", data={"csrf": "forged", "user": "alice", "password": PASSWORD}
    )
    assert answer.status == 403
    assert (await client.get("/timeline", allow_redirects=False)).status == 303


async def test_next_never_leaves_the_console(client: Client) -> None:
    form = await client.get("/login")
    token = re.search(r'name="csrf" value="([^"]+)"', await form.text())
    assert token is not None
    answer = await client.post(
        "/login",
        data={
            "csrf": token.group(1),
            "user": "alice",
            "password": PASSWORD,
            "next": "//evil.example/",
        },
        allow_redirects=False,
    )
    assert answer.headers["Location"] == "/timeline"


async def test_logout_needs_the_session_token_and_ends_the_session(client: Client) -> None:
    assert await sign_in(client) == 303
    page = await client.get("/timeline")
    csrf = re.search(r'name="csrf" value="([^"]+)"', await page.text())
    assert csrf is not None
    forged = await client.post("/logout", data={"csrf": "nope"}, allow_redirects=False)
    assert forged.status == 403
    assert (await client.get("/timeline", allow_redirects=False)).status == 200
    out = await client.post("/logout", data={"csrf": csrf.group(1)}, allow_redirects=False)
    assert out.status == 303
    assert out.headers["Location"] == "/login"
    assert (await client.get("/timeline", allow_redirects=False)).status == 303


async def test_a_session_expires(client: Client, sessions: SessionStore) -> None:
    assert await sign_in(client) == 303
    for session in list(sessions._sessions.values()):
        session.expires = 0.0
    assert (await client.get("/timeline", allow_redirects=False)).status == 303
    assert not sessions._sessions  # swept


async def test_every_page_says_there_is_no_authorizer(client: Client) -> None:
    login = await client.get("/login")
    assert "No authorizer" in await login.text()
    await sign_in(client)
    for path in (
        "/timeline",
        "/cluster",
        "/diff?from=0",
        "/entity?broker=1",
        "/cluster?at=x",
        "/map",
        "/charts",
    ):
        page = await client.get(path)
        assert "No authorizer" in await page.text(), path


async def test_pages_allow_only_the_consoles_own_script_and_no_other_host(
    client: Client,
) -> None:
    await sign_in(client)
    for path in ("/login", "/timeline", "/cluster", "/health", "/map", "/charts?after=-1"):
        answer = await client.get(path)
        policy = answer.headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy
        assert "script-src 'self';" in policy  # static/live.js, nothing inline
        assert "unsafe" not in policy
        assert answer.headers["X-Frame-Options"] == "DENY"
        assert "<script>" not in await answer.text()  # only <script src=...>


async def test_the_stylesheet_is_served_by_the_console(client: Client) -> None:
    answer = await client.get("/static/console.css")
    assert answer.status == 200
    assert "table.rows" in await answer.text()


async def test_a_second_login_page_keeps_the_first_forms_token(client: Client) -> None:
    first = await client.get("/login")
    token = re.search(r'name="csrf" value="([^"]+)"', await first.text())
    assert token is not None
    await client.get("/login?next=/favicon.ico")  # another tab, or the browser by itself
    assert (await client.get("/favicon.ico")).status == 204
    answer = await client.post(
        "/login",
        data={"csrf": token.group(1), "user": "alice", "password": PASSWORD},
        allow_redirects=False,
    )
    assert answer.status == 303
