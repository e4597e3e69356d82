"""Console sessions: a random token in an HttpOnly, SameSite=Strict cookie, expiry, CSRF.

A session lives in the console's memory only (a restart signs everyone out) and ends at its
expiry, at logout, or when the console stops. Each carries its own CSRF token, which every
form that changes something (logout) must return. Before a login there is no session: the
login form's token is a double-submit cookie (the form's field must equal the cookie),
which a page of another site can neither read nor set.
"""

from __future__ import annotations

import dataclasses
import hmac
import secrets
import time

from api.console.source import HistorySource

SESSION_COOKIE = "mlog_console_session"
LOGIN_CSRF_COOKIE = "mlog_console_login"
DEFAULT_TTL_SECONDS = 3600
"""How long a session lasts from its login (`mlog console --session-minutes`)."""


@dataclasses.dataclass(slots=True, kw_only=True)
class Session:
    """A signed-in principal, its handle and its CSRF token."""

    token: str
    principal: str
    source: HistorySource
    shared: bool
    """Whether the handle is the console's own (not closed when the session ends)."""
    csrf: str
    expires: float
    """time.monotonic() after which the session is over."""
    follows: int = 0
    """Live follow requests of this session waiting now (`api.console.live` bounds them)."""


def same_token(given: str | None, expected: str) -> bool:
    """Whether a submitted token equals the expected one (in constant time)."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


class SessionStore:
    """The live sessions by token; expired ones are dropped when met or swept."""

    def __init__(self, ttl_seconds: float = DEFAULT_TTL_SECONDS) -> None:
        self.ttl_seconds = ttl_seconds
        self._sessions: dict[str, Session] = {}

    def open(self, principal: str, source: HistorySource, *, shared: bool) -> Session:
        """A new session for `principal` reading through `source`."""
        session = Session(
            token=new_token(),
            principal=principal,
            source=source,
            shared=shared,
            csrf=new_token(),
            expires=time.monotonic() + self.ttl_seconds,
        )
        self._sessions[session.token] = session
        return session

    def get(self, token: str | None) -> Session | None:
        """The live session of a cookie's token, or None (unknown or expired; `expired` ends it)."""
        if token is None:
            return None
        session = self._sessions.get(token)
        if session is None or time.monotonic() >= session.expires:
            return None
        return session

    def expired(self) -> list[Session]:
        """Remove and return the sessions past their expiry (their handles to close)."""
        now = time.monotonic()
        gone = [s for s in self._sessions.values() if now >= s.expires]
        for session in gone:
            del self._sessions[session.token]
        return gone

    def end(self, token: str) -> Session | None:
        """End a session (logout); the session, to close its handle, or None."""
        return self._sessions.pop(token, None)

    def end_all(self) -> list[Session]:
        """End every session (the console stops)."""
        sessions = list(self._sessions.values())
        self._sessions.clear()
        return sessions
