"""A connection's SASL authentication, sans-IO: Kafka's `SaslServerAuthenticator` state machine.

On a SASL_PLAINTEXT or SASL_SSL listener a connection must authenticate before anything else.
Kafka's order is the rule: an optional ApiVersions, then SaslHandshake (the mechanism), then
the mechanism's tokens in SaslAuthenticate requests, or, after a SaslHandshake v0, as raw
tokens framed by a size only. Any other request before the end closes the connection ("Unexpected
Kafka request of type METADATA during SASL handshake."). An unknown or disabled mechanism is
answered UNSUPPORTED_SASL_MECHANISM (33) with the enabled list; a refused login
SASL_AUTHENTICATION_FAILED (58) with Kafka's message; both close the connection after
`connection.failed.authentication.delay.ms` (the server does the waiting and the closing).

`SaslAuthenticator` takes one decoded frame at a time and returns a `SaslStep`: what to answer
and what happens to the connection. It does no I/O and never holds a secret after a step.
Re-authentication (KIP-368) is not offered: a SaslHandshake or SaslAuthenticate after the
login is answered ILLEGAL_SASL_STATE (34), as Kafka answers one on a listener without SASL.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from api.protocol import codec
from api.protocol.codec import (
    API_NAMES,
    API_VERSIONS_KEY,
    SASL_AUTHENTICATE_KEY,
    SASL_HANDSHAKE_KEY,
    KafkaRequest,
    response_class,
)
from api.security.derived_keys import DerivedKeys
from api.security.errors import AuthenticationFailed
from api.security.plain import PlainServer
from api.security.scram import ScramServer, StoredCredential
from api.security.unknown_users import FakeSalts
from records.model import ScramMechanism
from replay.security.scram_rules import DEFAULT_ITERATIONS

SASL_MAX_RECEIVE_SIZE = 524288
"""Largest frame taken before authentication (Kafka's `sasl.server.max.receive.size`)."""

UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58

Credentials = Callable[[str, ScramMechanism], StoredCredential | None]
"""`(user name, mechanism) -> stored SCRAM credential or None` (the committed image's)."""


class MechanismServer(Protocol):
    """The server side of one SASL mechanism's exchange (api/security's SCRAM and PLAIN)."""

    @property
    def complete(self) -> bool:
        """Whether the client is authenticated."""

    @property
    def username(self) -> str | None:
        """The authenticated user name once complete."""

    @property
    def attempted_username(self) -> str | None:
        """The user name the client gave, once its message was parsed (for the log)."""

    def evaluate(self, response: bytes) -> bytes:
        """The answer to the client's next token; `AuthenticationFailed` ends the login."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoginCosts:
    """What makes a login cost the same, and little, for a user known or not (one per server)."""

    keys: DerivedKeys | None = None
    """PLAIN's derivations, done once per password, salt and count."""
    unknown_iterations: Callable[[ScramMechanism, str], int] | None = None
    """The iteration count answered for an unknown user name (drawn from the real users')."""
    unknown_plain: Callable[[str], tuple[ScramMechanism, int]] | None = None
    """The mechanism and count a PLAIN guess of an unknown user name is derived with."""
    fake_salts: FakeSalts | None = None
    """The salt a PLAIN guess of an unknown user is checked with."""


def mechanism_server(
    name: str, credentials: Credentials, costs: LoginCosts | None = None
) -> MechanismServer:
    """The exchange of the mechanism `name` (one of `config.SUPPORTED_MECHANISMS`)."""
    costs = costs or LoginCosts()
    if name == "PLAIN":
        return PlainServer(
            credentials,
            keys=costs.keys,
            unknown=None
            if costs.unknown_plain is None
            else functools.partial(_unknown_plain, costs),
        )
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        if mechanism.mechanism_name == name:
            iterations = costs.unknown_iterations
            return ScramServer(
                functools.partial(_lookup, credentials, mechanism),
                mechanism,
                unknown_iterations=(
                    None if iterations is None else functools.partial(iterations, mechanism)
                ),
            )
    raise ValueError(f"no SASL mechanism {name!r}")


def _unknown_plain(costs: LoginCosts, name: str) -> tuple[ScramMechanism, bytes, int]:
    salts = costs.fake_salts or _FAKE_SALTS
    draw = costs.unknown_plain
    mechanism, iterations = (
        draw(name) if draw else (ScramMechanism.SCRAM_SHA_512, DEFAULT_ITERATIONS)
    )
    return mechanism, salts.salt(mechanism, name), iterations


_FAKE_SALTS = FakeSalts()


def _lookup(
    credentials: Credentials, mechanism: ScramMechanism, name: str
) -> StoredCredential | None:
    return credentials(name, mechanism)


class SaslState(enum.Enum):
    """Where a connection is in its login (Kafka's `SaslState`, less re-authentication)."""

    HANDSHAKE_OR_VERSIONS = "handshake or versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


@dataclass(frozen=True, slots=True, kw_only=True)
class SaslStep:
    """What the server does with one frame of a connection that has not authenticated."""

    answer: codec.Answer | None = None
    """A response to the request, to write (after the delay when `failure` is set)."""
    raw: bytes | None = None
    """A raw SASL token to write, framed by its size (after a SaslHandshake v0)."""
    handle: bool = False
    """Answer the request as any other (ApiVersions)."""
    principal: str | None = None
    """The login succeeded: the connection's principal from now on."""
    failure: str | None = None
    """The login failed (for the log, never a secret): answer after the delay, then close."""
    user: str | None = None
    """The user name a failed login gave, made printable (for the log), if it got that far."""
    close: str | None = None
    """A protocol violation (for the log): close at once, answering nothing."""


class SaslAuthenticator:
    """One connection's login: feed it the connection's frames until `done`."""

    def __init__(
        self,
        mechanisms: tuple[str, ...],
        credentials: Credentials,
        *,
        costs: LoginCosts | None = None,
    ) -> None:
        self.mechanisms = mechanisms
        self._credentials = credentials
        self._costs = costs
        self._attempted: str | None = None
        self.state = SaslState.HANDSHAKE_OR_VERSIONS
        self.mechanism: str | None = None
        """The mechanism chosen by the client's SaslHandshake."""
        self.raw_tokens = False
        """The client sends raw tokens (it sent SaslHandshake v0) until the login ends."""
        self._server: MechanismServer | None = None

    @property
    def done(self) -> bool:
        """The login is over (succeeded or failed): no more frames for this machine."""
        return self.state in (SaslState.COMPLETE, SaslState.FAILED)

    def on_request(self, request: KafkaRequest) -> SaslStep:
        """The step for a decoded Kafka request received before the login ended."""
        key = request.header.api_key
        if self.state is SaslState.HANDSHAKE_OR_VERSIONS and key == API_VERSIONS_KEY:
            self.state = SaslState.HANDSHAKE
            return SaslStep(handle=True)
        if self.state in (SaslState.HANDSHAKE_OR_VERSIONS, SaslState.HANDSHAKE):
            if key == SASL_HANDSHAKE_KEY:
                return self._handshake(request)
            return self._violation(
                f"Unexpected Kafka request of type {_kafka_name(key)} during SASL handshake."
            )
        if (
            self.state is SaslState.AUTHENTICATE
            and not self.raw_tokens
            and key == SASL_AUTHENTICATE_KEY
        ):
            return self._authenticate(request)
        return self._violation(
            f"Unexpected Kafka request of type {_kafka_name(key)} during SASL authentication."
        )

    def on_private(self, name: str) -> SaslStep:
        """The step for one of our own APIs before the login ended: a violation."""
        return self._violation(f"Unexpected request {name} before SASL authentication")

    def on_token(self, token: bytes) -> SaslStep:
        """The step for a raw token (after a SaslHandshake v0)."""
        if self.state is not SaslState.AUTHENTICATE or not self.raw_tokens:
            return self._violation("unexpected raw SASL token")
        try:
            reply, principal = self._evaluate(token)
        except AuthenticationFailed as exc:
            return SaslStep(failure=self._failed(str(exc)), user=self._attempted_user())
        return SaslStep(raw=reply, principal=principal)

    # ------------------------------------------------------------------ the steps

    def _handshake(self, request: KafkaRequest) -> SaslStep:
        mechanism = request.body.mechanism
        if mechanism not in self.mechanisms:
            failure = self._failed(
                f"Unsupported SASL mechanism {_printable(mechanism)} (enabled: "
                f"{', '.join(self.mechanisms)})"
            )
            answer = _answer(
                request,
                error_code=UNSUPPORTED_SASL_MECHANISM,
                mechanisms=list(self.mechanisms),
            )
            return SaslStep(answer=answer, failure=failure)
        self.mechanism = mechanism
        self._server = mechanism_server(mechanism, self._credentials, self._costs)
        self.state = SaslState.AUTHENTICATE
        self.raw_tokens = request.header.api_version == 0
        return SaslStep(answer=_answer(request, error_code=0, mechanisms=list(self.mechanisms)))

    def _authenticate(self, request: KafkaRequest) -> SaslStep:
        try:
            reply, principal = self._evaluate(bytes(request.body.auth_bytes))
        except AuthenticationFailed as exc:
            message = str(exc)
            answer = _answer(
                request,
                error_code=SASL_AUTHENTICATION_FAILED,
                error_message=message,
                auth_bytes=b"",
            )
            return SaslStep(
                answer=answer, failure=self._failed(message), user=self._attempted_user()
            )
        answer = _answer(request, error_code=0, error_message=None, auth_bytes=reply)
        return SaslStep(answer=answer, principal=principal)

    def _evaluate(self, token: bytes) -> tuple[bytes, str | None]:
        """The mechanism's reply and, once it completes, the principal."""
        server = self._server
        if server is None:  # pragma: no cover - AUTHENTICATE always has a server
            raise AuthenticationFailed("Authentication failed: no SASL mechanism chosen")
        try:
            reply = server.evaluate(token)
        except AuthenticationFailed:
            self._attempted = server.attempted_username
            self._server = None
            raise
        if not server.complete:
            return reply, None
        username = server.username
        if not username:  # pragma: no cover - a complete exchange names its user
            raise AuthenticationFailed("Authentication failed: no user name")
        self._server = None
        self.state = SaslState.COMPLETE
        self.raw_tokens = False
        return reply, f"User:{username}"

    def _attempted_user(self) -> str | None:
        return None if self._attempted is None else _printable(self._attempted)

    def _failed(self, reason: str) -> str:
        self.state = SaslState.FAILED
        self.raw_tokens = False
        self._server = None
        return f"{self.mechanism}: {reason}" if self.mechanism else reason

    def _violation(self, reason: str) -> SaslStep:
        self.state = SaslState.FAILED
        self.raw_tokens = False
        self._server = None
        return SaslStep(close=reason)


async def refuse_outside_login(request: KafkaRequest, session: object) -> codec.Answer:
    """Kafka's answer to a SaslHandshake or SaslAuthenticate where no login is under way.

    ILLEGAL_SASL_STATE (34): on a listener without SASL, or after the connection has logged in
    (re-authentication is not offered).
    """
    if request.header.api_key == SASL_HANDSHAKE_KEY:
        return _answer(request, error_code=ILLEGAL_SASL_STATE, mechanisms=[])
    return _answer(
        request,
        error_code=ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
    )


def _answer(request: KafkaRequest, **values: Any) -> codec.Answer:
    header = request.header
    return codec.Answer(response_class(header.api_key, header.api_version), values)


def _kafka_name(api_key: int) -> str:
    """Kafka's `ApiKeys` name of an API (METADATA, CREATE_TOPICS), as its messages spell it."""
    name = API_NAMES.get(api_key)
    if name is None:
        return str(api_key)
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name).upper()


def _printable(text: str) -> str:
    """A client's string for a log line: control characters and length cut (no log forging)."""
    cleaned = re.sub(r"[^\x20-\x7e]", "?", text)
    return repr(cleaned[:64] + ("..." if len(cleaned) > 64 else ""))
