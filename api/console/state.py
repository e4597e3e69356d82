"""What the console's handlers share: the application's keys and the request's session."""

from __future__ import annotations

import jinja2
from aiohttp import web

from api.console.sessions import Session, SessionStore
from api.console.source import HistorySource, Origin

ORIGIN: web.AppKey[Origin] = web.AppKey("origin", Origin)
"""Where the console reads."""
LOCAL: web.AppKey[HistorySource | None] = web.AppKey("local")
"""The console's handle on its data directory (None when it reads servers)."""
SESSIONS: web.AppKey[SessionStore] = web.AppKey("sessions", SessionStore)
TEMPLATES: web.AppKey[jinja2.Environment] = web.AppKey("templates", jinja2.Environment)
SECURE: web.AppKey[bool] = web.AppKey("secure", bool)
"""Served over TLS: cookies carry Secure."""

SESSION: web.RequestKey[Session] = web.RequestKey("session", Session)
"""The request's live session (set by the session gate)."""


def session_of(request: web.Request) -> Session:
    """The request's session (the gate let it through, so there is one)."""
    return request[SESSION]
