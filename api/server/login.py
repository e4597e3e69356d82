"""The SASL login of a connection, step by step: each frame before it has logged in.

A connection on a SASL listener logs in first (the mechanisms' sans-IO steps are in sasl.py).
`Logins` answers each frame it sends meanwhile: SaslHandshake and SaslAuthenticate (or a raw
token, for clients that send them so) go to the connection's `SaslAuthenticator`, ApiVersions
is answered as on any connection, anything else closes it. PLAIN's check derives a key
(PBKDF2, thousands of rounds): it runs on the login threads (`LoginPool`), a bounded number per
client address; SCRAM's steps are a few HMACs, on the default executor. A failed login is
answered after `connection.failed.authentication.delay.ms`, holding up no other connection, and
logged at most once per interval with a summary of the rest (`FailedLogins`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import struct
from collections.abc import Awaitable, Callable

from api.protocol.codec import SASL_AUTHENTICATE_KEY, encode_response
from api.protocol.connection import Event, PrivateRequest, Reply, Request, SaslToken
from api.protocol.private import PRIVATE_APIS
from api.security.derived_keys import DerivedKeys
from api.security.scram import StoredCredential
from api.security.unknown_users import FakeSalts, UnknownIterations
from api.server.channel import Channel
from api.server.config import DEFAULT_FAILED_AUTHENTICATION_DELAY_MS
from api.server.login_guard import FailedLogins, LoginPool
from api.server.sasl import LoginCosts, SaslAuthenticator, SaslStep
from records.model import ScramMechanism
from replay.image import MetadataImage

logger = logging.getLogger("api.server")

Answer = Callable[[Event, Channel], Awaitable[bool]]
"""How a logged-in connection's event is answered (False: the connection must close)."""


class Logins:
    """Answers the frames of connections that have not logged in yet, on every SASL listener."""

    def __init__(
        self,
        image: Callable[[], MetadataImage],
        *,
        failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS,
    ) -> None:
        """`image` is the committed image, read at each login step (never a copy)."""
        self._image = image
        self.failed_authentication_delay = failed_authentication_delay_ms / 1000
        """Seconds a failed login waits before it is answered and closed."""
        self.failed_logins = FailedLogins(logger)
        """Failed logins, logged at most once per interval with a summary of the rest."""
        self._pool: LoginPool | None = None
        unknown = UnknownIterations()
        self._costs = LoginCosts(
            keys=DerivedKeys(),
            unknown_iterations=lambda mechanism, name: unknown.of(
                image().scram.credentials, mechanism, name
            ),
            unknown_plain=lambda name: unknown.plain_of(image().scram.credentials, name),
            fake_salts=FakeSalts(),
        )

    def start(self) -> None:
        """Start the login threads (the server starts listening)."""
        self._pool = LoginPool()

    def close(self) -> None:
        """Log the failed logins not yet summed up, and stop the login threads."""
        self.failed_logins.flush()
        if self._pool is not None:
            self._pool.close()

    def authenticators(self, mechanisms: tuple[str, ...]) -> Callable[[], SaslAuthenticator]:
        """A maker of each new connection's authenticator, for a listener's `mechanisms`."""
        image = self._image

        def credentials(name: str, mechanism: ScramMechanism) -> StoredCredential | None:
            # Read from the committed image at each login step, never a copy.
            return image().scram.get(name, mechanism)

        costs = self._costs

        def new_authenticator() -> SaslAuthenticator:
            return SaslAuthenticator(mechanisms, credentials, costs=costs)

        return new_authenticator

    async def step(
        self, event: Event, channel: Channel, sasl: SaslAuthenticator, answer: Answer
    ) -> bool:
        """One frame of a connection that has not logged in; False when it must close.

        `answer` answers what is answered as on any connection (ApiVersions).
        """
        # PLAIN's check derives a key (PBKDF2, thousands of rounds): off the event loop, on
        # the login threads, a bounded number per client address. SCRAM's steps are a few
        # HMACs: on the default executor as before (answering them inline measured slower
        # over TLS: bench/auth_bench.py's logins, interleaved with the code before).
        pool = self._pool if sasl.mechanism == "PLAIN" else None
        if isinstance(event, Request):
            if event.request.header.api_key == SASL_AUTHENTICATE_KEY and pool is not None:
                step = await pool.run(channel.ip, functools.partial(sasl.on_request, event.request))
            elif event.request.header.api_key == SASL_AUTHENTICATE_KEY:
                step = await asyncio.to_thread(sasl.on_request, event.request)
            else:
                step = sasl.on_request(event.request)
            if step.handle:
                channel.sasl = None  # ApiVersions is answered as on any connection
                try:
                    return await answer(event, channel)
                finally:
                    channel.sasl = sasl
        elif isinstance(event, SaslToken):
            if pool is not None:
                step = await pool.run(channel.ip, functools.partial(sasl.on_token, event.data))
            else:
                step = await asyncio.to_thread(sasl.on_token, event.data)
        elif isinstance(event, PrivateRequest):
            step = sasl.on_private(PRIVATE_APIS[event.header.api_key].name)
        elif isinstance(event, Reply):  # an ApiVersions of a version not served
            channel.write(event.data)
            return True
        else:
            logger.warning("closing connection from %s: %s", channel.peer, event.reason)
            return False
        return await self._sasl_step(step, event, channel, sasl)

    async def _sasl_step(
        self, step: SaslStep, event: Event, channel: Channel, sasl: SaslAuthenticator
    ) -> bool:
        if step.close is not None:
            logger.warning(
                "closing connection from %s on listener %s: %s",
                channel.peer,
                channel.listener,
                step.close,
            )
            channel.authenticated(None)
            return False
        if step.failure is not None:
            self.failed_logins.failed(
                peer=channel.peer,
                ip=channel.ip,
                listener=channel.listener,
                user=step.user,
                reason=step.failure,
            )
            channel.authenticated(None)
            # Kafka answers a failed login only after the delay (slowing password guessing),
            # then closes; the wait is this connection's task only.
            await asyncio.sleep(self.failed_authentication_delay)
            if step.answer is not None and isinstance(event, Request):
                channel.write(encode_response(event.request.header.correlation_id, step.answer))
            return False
        if step.answer is not None and isinstance(event, Request):
            channel.write(encode_response(event.request.header.correlation_id, step.answer))
        if step.raw is not None:
            channel.write(struct.pack(">i", len(step.raw)) + step.raw)
        if step.principal is not None:
            channel.authenticated(step.principal)
            logger.debug(
                "%s authenticated from %s on listener %s with %s",
                step.principal,
                channel.peer,
                channel.listener,
                sasl.mechanism,
            )
        else:
            channel.expect_raw_tokens(sasl.raw_tokens)
        return True
