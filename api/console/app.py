"""The console's aiohttp application: routes, the session gate, errors as pages, headers.

Every page but the login and the stylesheet needs a session; a request without one is sent
to the login (with where it was going, a path on this console only). Every answer carries a
Content-Security-Policy that allows no script but the console's own `static/live.js` (no
inline script, nothing from another host), and frames nowhere. A bad parameter is a 400
page saying what is wrong; anything unexpected is a 500 page with one line, the traceback
in the console's log only.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import quote

import jinja2
from aiohttp import web

from api.console import health, live, overview_views, views
from api.console.errors import BadInput
from api.console.sessions import SESSION_COOKIE, SessionStore
from api.console.source import HistorySource, Origin
from api.console.state import LOCAL, ORIGIN, SECURE, SESSION, SESSIONS, TEMPLATES
from records.errors import MetadataLogError
from replay.controller.errors import ApiError

logger = logging.getLogger(__name__)

PACKAGE = Path(__file__).parent

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        # live.js only, from the console itself (no inline script), and its follow requests.
        "script-src 'self'; connect-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def templates() -> jinja2.Environment:
    """The pages' templates, HTML-escaped by default (every value is text)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(PACKAGE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )


def _public(path: str) -> bool:
    return path in ("/login", "/favicon.ico") or path.startswith("/static/")


@web.middleware
async def gate(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Send a request without a live session to the login; sweep expired sessions."""
    store = request.app[SESSIONS]
    for gone in store.expired():
        if not gone.shared:
            await gone.source.close()
    if _public(request.path):
        return await handler(request)
    session = store.get(request.cookies.get(SESSION_COOKIE))
    if session is None:
        target = request.path_qs if request.method == "GET" else "/"
        raise web.HTTPSeeOther(f"/login?next={quote(target, safe='')}")
    request[SESSION] = session
    return await handler(request)


@web.middleware
async def pages_for_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Bad input as a 400 page, the service's refusals as theirs, the unexpected as a 500."""
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except BadInput as exc:
        return views.error_page(request, 400, "Bad request", str(exc))
    except ApiError as exc:
        if exc.error_code.name.endswith("AUTHORIZATION_FAILED"):
            # The principal may not read this (FetchLog needs the log's readers' right).
            return views.error_page(request, 403, "Not allowed", str(exc))
        return views.error_page(request, 400, "The service refused", str(exc))
    except MetadataLogError as exc:
        logger.warning("console: %s", exc)
        return views.error_page(request, 502, "The service could not answer", str(exc))
    except Exception:
        logger.exception("console: %s %s failed", request.method, request.path)
        return views.error_page(
            request, 500, "Internal error", "the console failed to answer; its log says why"
        )


@web.middleware
async def headers(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The security headers on every answer, errors and redirects included."""
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        exc.headers.update(SECURITY_HEADERS)
        raise
    response.headers.update(SECURITY_HEADERS)
    return response


def make_app(
    origin: Origin,
    local: HistorySource | None,
    *,
    sessions: SessionStore | None = None,
    secure: bool = False,
) -> web.Application:
    """The console over `origin`; `local` is its handle on a data directory (else None).

    `secure`: served over TLS (cookies then carry Secure).
    """
    app = web.Application(middlewares=[headers, pages_for_errors, gate])
    app[ORIGIN] = origin
    app[LOCAL] = local
    app[SESSIONS] = sessions or SessionStore()
    app[TEMPLATES] = templates()
    app[SECURE] = secure
    app.add_routes(
        [
            web.get("/", views.home),
            web.get("/login", views.login_form),
            web.get("/favicon.ico", views.no_icon),
            web.post("/login", views.login),
            web.post("/logout", views.logout),
            web.get("/timeline", views.timeline_page),
            web.get("/timeline.csv", views.timeline_csv),
            web.get("/timeline.json", views.timeline_json),
            web.get("/cluster", views.cluster),
            web.get("/diff", views.compare),
            web.get("/entity", views.entity_page),
            web.get("/map", overview_views.map_page),
            web.get("/charts", overview_views.charts_page),
            # Health and trust; the live pages' follow requests (static/live.js).
            web.get("/health", health.health_page),
            web.get("/timeline/follow", live.timeline_follow),
            web.get("/cluster/follow", live.cluster_follow),
            web.static("/static", PACKAGE / "static", append_version=False),
        ]
    )
    live.setup(app)
    app.on_cleanup.append(_close_sessions)
    return app


async def _close_sessions(app: web.Application) -> None:
    for session in app[SESSIONS].end_all():
        if not session.shared:
            await session.source.close()
    local = app[LOCAL]
    if local is not None:
        await local.close()
