"""The console's pages: login and logout, the timeline and its exports, the cluster, compare.

Each handler reads its parameters (`timeline.parse_filters`, `travel.parse_point`: a bad
one is `BadInput`, a 400 page), asks the session's handle on a worker thread, and renders a
template; every value reaches the page through Jinja2's escaping, so names, principals,
client ids and config values are text whatever they hold.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from api.console import entity, exports, timeline, travel
from api.console.changes import ENTITY_KINDS
from api.console.errors import BadInput, LoginFailed
from api.console.login import log_in
from api.console.sessions import LOGIN_CSRF_COOKIE, SESSION_COOKIE, new_token, same_token
from api.console.state import LOCAL, ORIGIN, SECURE, SESSION, SESSIONS, TEMPLATES, session_of

KINDS = (
    "Topic",
    "RemoveTopic",
    "Partition",
    "PartitionChange",
    "MoveTopic",
    "DeleteTopicPartitions",
    "PurgeTopicPartitions",
    "CancelTopicPartitionsDeletion",
    "Config",
    "Namespace",
    "RemoveNamespace",
    "RegisterBroker",
    "UnregisterBroker",
    "BrokerRegistrationChange",
    "AccessControlEntry",
    "RemoveAccessControlEntry",
    "UserScramCredential",
    "RemoveUserScramCredential",
    "FeatureLevel",
    "ClientWrite",
    "Voters",
    "KRaftVersion",
    "LeaderChange",
)
"""The kinds of change the timeline's filter offers (record types without `Record`)."""


def url(path: str, params: dict[str, str] | None = None) -> str:
    """A console URL with its query (for links in templates)."""
    return f"{path}?{urlencode(params)}" if params else path


def render(request: web.Request, name: str, status: int = 200, **values: Any) -> web.Response:
    """A page from a template, with what every page shows (principal, origin, authorizer)."""
    origin = request.app[ORIGIN]
    session = request.get(SESSION)
    page = (
        request.app[TEMPLATES]
        .get_template(name)
        .render(
            origin=origin.shown,
            remote=origin.remote,
            principal=None if session is None else session.principal,
            csrf=None if session is None else session.csrf,
            url=url,
            **values,
        )
    )
    return web.Response(text=page, status=status, content_type="text/html")


def error_page(request: web.Request, status: int, title: str, message: str) -> web.Response:
    """A page saying what went wrong, with the HTTP status of it."""
    return render(request, "error.html", status=status, title=title, message=message)


_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")
"""What `new_token` makes (32 random bytes, URL-safe base64)."""


def _cookie_options(request: web.Request) -> dict[str, Any]:
    return {
        "httponly": True,
        "samesite": "Strict",
        "secure": request.app[SECURE],
        "path": "/",
    }


def _safe_next(text: str | None) -> str:
    """Where to go after the login: a path on this console only, else the timeline."""
    if not text or not text.startswith("/") or text.startswith("//") or "\\" in text:
        return "/timeline"
    return text


# ------------------------------------------------------------------------ login and logout


async def home(request: web.Request) -> web.StreamResponse:
    """The console's front page is the timeline."""
    raise web.HTTPSeeOther("/timeline")


def _login_page(request: web.Request, *, error: str | None, status: int = 200) -> web.Response:
    # One token per browser while it signs in: a second login page (another tab, or a
    # request the browser makes by itself) must not void the form already shown.
    token = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    if not _TOKEN.fullmatch(token):
        token = new_token()
    response = render(
        request,
        "login.html",
        status=status,
        error=error,
        login_csrf=token,
        next=_safe_next(request.query.get("next")),
    )
    response.set_cookie(LOGIN_CSRF_COOKIE, token, max_age=3600, **_cookie_options(request))
    return response


async def no_icon(request: web.Request) -> web.StreamResponse:
    """The console has no icon (browsers ask for one by themselves)."""
    return web.Response(status=204)


async def login_form(request: web.Request) -> web.StreamResponse:
    """The login form."""
    return _login_page(request, error=None)


async def login(request: web.Request) -> web.StreamResponse:
    """Check the user and password by SCRAM, open a session, go where the user was going."""
    form = await request.post()
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    if not same_token(fields.get("csrf"), request.cookies.get(LOGIN_CSRF_COOKIE, "\x00")):
        return _login_page(
            request, error="the form expired or came from elsewhere: sign in again", status=403
        )
    try:
        done = await log_in(
            request.app[ORIGIN],
            request.app[LOCAL],
            fields.get("user", ""),
            fields.get("password", ""),
        )
    except LoginFailed as exc:
        return _login_page(request, error=str(exc), status=401)
    session = request.app[SESSIONS].open(done.principal, done.source, shared=done.shared)
    response = web.HTTPSeeOther(_safe_next(fields.get("next")))
    response.set_cookie(
        SESSION_COOKIE,
        session.token,
        max_age=int(request.app[SESSIONS].ttl_seconds),
        **_cookie_options(request),
    )
    response.del_cookie(LOGIN_CSRF_COOKIE, path="/")
    raise response


async def logout(request: web.Request) -> web.StreamResponse:
    """End the session (the form carries its CSRF token) and go to the login."""
    session = session_of(request)
    form = await request.post()
    given = form.get("csrf")
    if not same_token(given if isinstance(given, str) else None, session.csrf):
        return error_page(request, 403, "Forbidden", "the logout form did not come from this page")
    ended = request.app[SESSIONS].end(session.token)
    if ended is not None and not ended.shared:
        await ended.source.close()
    response = web.HTTPSeeOther("/login")
    response.del_cookie(SESSION_COOKIE, path="/")
    raise response


# ------------------------------------------------------------------------ the timeline


async def timeline_page(request: web.Request) -> web.StreamResponse:
    """The timeline page: a page of filtered rows, its cursors and its exports."""
    filters = timeline.parse_filters(request.query)
    session = session_of(request)
    if filters.newest:
        newest = await session.source.call(lambda md: timeline.newest_cursor(md, filters.limit))
        raise web.HTTPSeeOther(url("/timeline", filters.query(after=newest, newest=False)))
    page = await session.source.call(lambda md: timeline.read_page(md, filters))
    return render(
        request,
        "timeline.html",
        filters=filters,
        page=page,
        query=filters.query(),
        next_query=None if page.next_after is None else filters.query(after=page.next_after),
        first_query=filters.query(after=-1),
        follow_query=filters.query(after=page.last_read),
        newest_query=filters.query(after=-1, newest=True),
        entity_kinds=ENTITY_KINDS,
        kinds=KINDS,
    )


async def _export(request: web.Request) -> timeline.Page:
    filters = timeline.parse_filters(request.query)
    session = session_of(request)
    return await session.source.call(
        lambda md: timeline.read_page(md, filters, limit=timeline.EXPORT_ROWS)
    )


async def timeline_csv(request: web.Request) -> web.StreamResponse:
    """The filtered rows from the cursor on, as CSV (up to `EXPORT_ROWS`)."""
    page = await _export(request)
    headers = {"Content-Disposition": 'attachment; filename="timeline.csv"'}
    if page.next_after is not None:
        # Where the rest starts (`after=`): a CSV has no room to say it.
        headers["X-Mlog-Next-After"] = str(page.next_after)
    return web.Response(text=exports.to_csv(page), content_type="text/csv", headers=headers)


async def timeline_json(request: web.Request) -> web.StreamResponse:
    """The filtered rows from the cursor on, as JSON (with the cursor of the rest)."""
    page = await _export(request)
    return web.Response(
        text=exports.to_json(page),
        content_type="application/json",
        headers={"Content-Disposition": 'attachment; filename="timeline.json"'},
    )


# ------------------------------------------------------------------------ time travel


def _short(request: web.Request, name: str) -> str:
    text = request.query.get(name, "").strip()
    if len(text) > timeline.MAX_FILTER:
        raise BadInput(f"{name} is {len(text)} characters long: at most {timeline.MAX_FILTER}")
    return text


async def cluster(request: web.Request) -> web.StreamResponse:
    """The cluster at a point (`at`: an offset or a time; the end of the log without it)."""
    point = travel.parse_point(request.query.get("at"), "at")
    q, topic = _short(request, "q"), _short(request, "topic")
    session = session_of(request)

    def read(md: Any) -> tuple[travel.ClusterView, int]:
        image, last = travel.image_and_last(md, point)
        return travel.cluster_view(image, q=q, topic=topic), last

    view, last = await session.source.call(read)
    return render(
        request,
        "cluster.html",
        view=view,
        point=point,
        last=last,
        q=q,
        topic=topic,
        time=timeline.iso_time(view.timestamp) if view.timestamp >= 0 else "-",
    )


async def compare(request: web.Request) -> web.StreamResponse:
    """What changed between two points (`from`, and `to`: the end of the log without it)."""
    start = travel.parse_point(request.query.get("from"), "from")
    end = travel.parse_point(request.query.get("to"), "to")
    session = session_of(request)
    if start.diff_arg() is None:
        return render(request, "diff.html", view=None, start=start, end=end, shown=travel.shown)
    view = await session.source.call(lambda md: travel.diff_view(md, start, end))
    return render(request, "diff.html", view=view, start=start, end=end, shown=travel.shown)


# ------------------------------------------------------------------------ an entity


async def entity_page(request: web.Request) -> web.StreamResponse:
    """Every entry that touched one topic, namespace, broker or user (`mlog history`)."""
    session = session_of(request)
    params = dict(request.query)
    page = await session.source.call(lambda md: entity.read_entity(md, params))
    return render(request, "entity.html", page=page)
