"""A console login: a user and password checked by SCRAM against the service, as a client would.

Through servers, the console connects as the user (SASL SCRAM over the configured TLS): the
server checks the password, and the connection then reads with that principal's rights, so
the console sees what the principal may DESCRIBE and nothing else. On a data directory there
is no server to ask: the password is checked against the image's SCRAM credentials by the
same sans-IO exchange a server runs (`api.security.scram`), a client and a server side fed
to each other in memory. The password is written nowhere: on a data directory it is used for
the exchange only; through servers the session's client keeps it with its connection, in
memory, to sign in again to another node after a failover, until the session ends.
"""

from __future__ import annotations

import asyncio
import dataclasses

from api.console.errors import LoginFailed
from api.console.source import HistorySource, Origin, connect_as
from api.python_api import Metadata
from api.security.errors import AuthenticationFailed, SaslClientError
from records.errors import MetadataLogError
from records.model import ScramMechanism, UserScramCredentialRecord
from replay.image import MetadataImage

REFUSED = "user or password refused"
"""What a refused login says (the same whether the user exists or not)."""

FAILED_LOGIN_DELAY_SECONDS = 1.0
"""How long a refused login on a data directory waits before it answers (as a server's
`connection.failed.authentication.delay.ms`): guessing passwords gets slow."""

MAX_FIELD = 256
"""The longest user name or password a login form takes (characters)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoggedIn:
    """A login that worked: the principal, and the handle its session reads through."""

    principal: str
    source: HistorySource
    shared: bool
    """Whether `source` is the console's own (a data directory), not closed with the session."""


def check_fields(user: str, password: str) -> None:
    """Refuse an empty or oversized user or password before any work is done."""
    if not user or not password:
        raise LoginFailed("give a user and a password")
    if len(user) > MAX_FIELD or len(password) > MAX_FIELD:
        raise LoginFailed(f"a user or password is at most {MAX_FIELD} characters")
    if "\x00" in user:
        raise LoginFailed(REFUSED)


def scram_matches(image: MetadataImage, user: str, password: str) -> bool:
    """Whether `password` is `user`'s by any SCRAM credential of the image.

    Runs the whole exchange (client-first, server-first, client-final with the proof,
    server-final) between `ScramClient` and `ScramServer`, the server looking credentials up
    in the image; an unknown user costs the same as a wrong password (the server's fake salt).
    """
    from api.security.scram import ScramClient, ScramServer  # noqa: PLC0415 - hashlib on demand

    known = [m for m in _MECHANISMS if image.scram.get(user, m) is not None] or [_MECHANISMS[0]]
    for mechanism in known:

        def lookup(name: str, m: ScramMechanism = mechanism) -> UserScramCredentialRecord | None:
            return image.scram.get(name, m)

        server = ScramServer(lookup, mechanism)
        try:
            client = ScramClient(user, password, mechanism)
            server_first = server.evaluate(client.first())
            server_final = server.evaluate(client.final(server_first))
            client.verify(server_final)
        except (AuthenticationFailed, SaslClientError, ValueError):
            continue
        if server.complete and client.complete:
            return True
    return False


_MECHANISMS = (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256)


async def log_in(origin: Origin, local: HistorySource | None, user: str, password: str) -> LoggedIn:
    """Check `user` and `password` against the service; the principal and its handle.

    `local` is the console's handle on its data directory (None when it reads servers).
    `LoginFailed` says why a login did not work, never which of user or password was wrong.
    """
    check_fields(user, password)
    if origin.remote:
        try:
            metadata = await asyncio.to_thread(connect_as, origin, user, password)
        except MetadataLogError as exc:
            text = str(exc)
            if "authentication failed" in text:
                raise LoginFailed(REFUSED) from None
            raise LoginFailed(f"the servers could not be asked: {text}") from None
        return LoggedIn(principal=f"User:{user}", source=HistorySource(metadata), shared=False)
    if local is None:
        raise ValueError("a console on a data directory has its own handle")
    image = await local.call(_current_image)
    if not image.scram.credentials:
        raise LoginFailed(
            "this data directory has no SCRAM users, so nobody can sign in: add one with "
            "`mlog users scram-set --name NAME --mechanism SCRAM-SHA-512 --password-stdin`"
        )
    if not await asyncio.to_thread(scram_matches, image, user, password):
        await asyncio.sleep(FAILED_LOGIN_DELAY_SECONDS)
        raise LoginFailed(REFUSED)
    return LoggedIn(principal=f"User:{user}", source=local, shared=True)


def _current_image(metadata: Metadata) -> MetadataImage:
    return metadata.image()
