"""The client side of a SASL login, one interface for every mechanism (sans-IO).

`start()` gives the first token to send; each answer of the server goes to `respond`, which
gives the next token or None when the client has nothing more to send; then `complete` says
whether the login is proven (for SCRAM: the server proved it holds the credential too).
"""

from __future__ import annotations

from api.security.errors import SaslClientError
from api.security.plain import MECHANISM_NAME as PLAIN
from api.security.plain import plain_token
from api.security.scram import ScramClient
from replay.security.scram_rules import mechanism_by_name

MECHANISMS = (PLAIN, "SCRAM-SHA-256", "SCRAM-SHA-512")
"""The SASL mechanisms our client (and server) speak, by their SASL names."""


class SaslClient:
    """One SASL login of `username` with `password` by `mechanism` (a name of MECHANISMS)."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"unsupported SASL mechanism {mechanism!r}; use one of {MECHANISMS}")
        self.mechanism_name = mechanism
        self._scram: ScramClient | None = None
        self._plain = b""
        if mechanism == PLAIN:
            self._plain = plain_token(username, password)
        else:
            self._scram = ScramClient(username, password, mechanism_by_name(mechanism))
        self._step = 0
        self.complete = False
        """Whether the login is done and proven."""

    def start(self) -> bytes:
        """The first token (PLAIN's message or SCRAM's client-first)."""
        if self._step != 0:
            raise SaslClientError("the SASL login has already started")
        self._step = 1
        return self._plain if self._scram is None else self._scram.first()

    def respond(self, challenge: bytes) -> bytes | None:
        """The next token answering the server's, or None when the login is over."""
        step, self._step = self._step, self._step + 1
        if self._scram is None:
            if step != 1:
                raise SaslClientError("the server sent more than one answer to a PLAIN login")
            if challenge:
                raise SaslClientError("the server's answer to a PLAIN login is not empty")
            self.complete = True
            return None
        if step == 1:
            return self._scram.final(challenge)
        if step == 2:
            self._scram.verify(challenge)
            self.complete = True
            return None
        raise SaslClientError("the server sent more SCRAM messages than the exchange has")
