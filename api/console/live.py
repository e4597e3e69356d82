"""Live pages: the timeline and the cluster "now" follow new entries as they commit.

A page at the log's end carries its cursor (the last offset it read); `static/live.js` asks
`/timeline/follow?after=CURSOR&<the page's filters>` (or `/cluster/follow?after=LAST`),
which waits up to `FOLLOW_SECONDS` for an entry past the cursor and answers then, or empty
when none came: the timeline's new rows as an HTML fragment (rendered by the same template
as the page, every value escaped) with the new cursor in `X-Mlog-After`; the cluster's last
offset as JSON. The script appends the rows (or reloads the cluster view's content) and asks
again; a failed request (the console's node killed, the session expired) is retried with a
growing pause. Without JavaScript the pages are what they were.

The wait is the service's own long poll (`Metadata.wait_past`: FetchLog's `max_wait_ms`
through a server, the segment files on a data directory), asked in slices of at most
`SLICE_MS` so the session's other pages, which share its handle one call at a time, wait at
most a slice behind a follower; a data directory's handle, which every session shares, is
only held for a look at its files (`LOCAL_POLL_SECONDS` apart). A follow whose browser went
away ends at its next slice; a session has at most `MAX_FOLLOWS` waiting at once. A server
lost mid-wait (a leader killed) is reconnected to another node by the session's handle
(`HistorySource.call`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator
from functools import partial

from aiohttp import web

from api.console import timeline
from api.console.source import HistorySource
from api.console.state import TEMPLATES, session_of
from api.console.views import url
from api.python_api import Metadata

FOLLOW_SECONDS = 25.0
"""How long one follow request waits for a new entry before answering with none."""

SLICE_MS = 500
"""The longest one wait holds a server session's handle (its other pages wait behind it)."""

LOCAL_POLL_SECONDS = 0.5
"""How often a follower of a data directory looks at its segment files."""

MAX_FOLLOWS = 8
"""Follow requests one session may have waiting at once (one per open live page): each asks
the session's handle every slice, so a client opening thousands would starve its pages."""

AFTER_HEADER = "X-Mlog-After"
"""The follow answer's new cursor (the last offset read)."""


async def wait_past(
    source: HistorySource,
    after: int,
    seconds: float | None = None,
    gone: Callable[[], bool] = lambda: False,
) -> int:
    """The log's last offset once past `after`, or after `seconds` (default `FOLLOW_SECONDS`).

    Ends early, answering `after`, once `gone()` says nobody waits for the answer any more.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + (FOLLOW_SECONDS if seconds is None else seconds)
    remote = source.metadata.remote
    while True:
        left_ms = max(0, int((deadline - loop.time()) * 1000))
        # A server waits for us (FetchLog's long poll); a data directory's files are looked
        # at between pauses that hold no lock (its handle is every session's).
        wait_ms = min(SLICE_MS, left_ms) if remote else 0
        last = await source.call(partial(_wait_past, after=after, wait_ms=wait_ms))
        if last > after or left_ms == 0:
            return last
        if gone():
            return after
        if not remote:
            await asyncio.sleep(min(LOCAL_POLL_SECONDS, left_ms / 1000))


STOPPING: web.AppKey[asyncio.Event] = web.AppKey("live_stopping", asyncio.Event)
"""Set when the console stops: follow requests answer at their next slice, not in 25 s."""


def setup(app: web.Application) -> None:
    """Make `app`'s follow requests end when it shuts down."""
    app[STOPPING] = asyncio.Event()
    app.on_shutdown.append(_stop)


async def _stop(app: web.Application) -> None:
    app[STOPPING].set()


def _gone(request: web.Request) -> Callable[[], bool]:
    """Whether the browser closed the request's connection, or the console is stopping."""
    stopping = request.app[STOPPING]
    return lambda: stopping.is_set() or request.transport is None or request.transport.is_closing()


@contextlib.contextmanager
def _following(request: web.Request) -> Iterator[HistorySource]:
    """The session's handle for one more follow request; 429 beyond `MAX_FOLLOWS`."""
    session = session_of(request)
    if session.follows >= MAX_FOLLOWS:
        raise web.HTTPTooManyRequests(
            text=f"this session already follows the log in {MAX_FOLLOWS} pages: close some "
            "of its live pages (each holds one request open) and reload this one"
        )
    session.follows += 1
    try:
        yield session.source
    finally:
        session.follows -= 1


def _wait_past(md: Metadata, *, after: int, wait_ms: int) -> int:
    return md.wait_past(after, wait_ms=wait_ms)


def _after(request: web.Request) -> int:
    value = timeline.optional_int_param(request.query, "after", low=-1, high=timeline.OFFSET_MAX)
    return -1 if value is None else value


async def timeline_follow(request: web.Request) -> web.StreamResponse:
    """The timeline's rows after `after` that pass the page's filters, once there are entries.

    200 with the rows (maybe none: the entries that came did not pass the filters, or none
    came in time) and the new cursor in `X-Mlog-After`.
    """
    filters = timeline.parse_filters(request.query)
    after = filters.after
    rows: list[timeline.Row] = []
    cursor = after
    with _following(request) as source:
        last = await wait_past(source, after, gone=_gone(request))
        if last > after:
            wanted = dataclasses.replace(filters, after=after)
            page = await source.call(
                lambda md: timeline.read_page(md, wanted, limit=timeline.MAX_ROWS)
            )
            rows, cursor = page.rows, page.last_read
    html = request.app[TEMPLATES].get_template("timeline_rows.html").render(rows=rows, url=url)
    return web.Response(text=html, content_type="text/html", headers={AFTER_HEADER: str(cursor)})


async def cluster_follow(request: web.Request) -> web.StreamResponse:
    """`{"last": OFFSET}` once the log is past `after` (or `after` when nothing came in time)."""
    after = _after(request)
    with _following(request) as source:
        last = await wait_past(source, after, gone=_gone(request))
    return web.Response(
        text=json.dumps({"last": max(last, after)}), content_type="application/json"
    )
