"""SASL PLAIN (RFC 4616), with the password checked against the user's stored SCRAM credential.

The server never keeps a password: a PLAIN login derives the salted password with the stored
salt and iteration count (of SCRAM-SHA-512 if the user has it, else SCRAM-SHA-256) and compares
the StoredKey it gives with the stored one in constant time. PLAIN sends the password itself,
so use it over TLS (SASL_SSL) only.

A server passes `DerivedKeys` (a derivation is done once per password, salt and count) and
`unknown` (the mechanism, salt and count an unknown user is checked with: drawn per name from
the real users', `unknown_users.UnknownIterations`), so a guess costs the same work, and
repeated guesses nothing, whether the user exists or not: an unknown user's password is
derived and compared in constant time against a key no password gives, as a real user's is.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import TYPE_CHECKING

from api.security.errors import AuthenticationFailed
from api.security.scram import StoredCredential
from records.model import ScramMechanism
from replay.security.scram_keys import h, hmac_of, salted_password
from replay.security.scram_rules import DEFAULT_ITERATIONS, key_size

if TYPE_CHECKING:
    from api.security.derived_keys import DerivedKeys

UnknownUser = Callable[[str], tuple[ScramMechanism, bytes, int]]
"""`user name -> (mechanism, salt, iterations)`: what checks a guess for an unknown user."""

MECHANISM_NAME = "PLAIN"

MAX_TOKEN_BYTES = 16384
"""The longest PLAIN message read (RFC 4616 allows 255 bytes per field after SASLprep)."""

_PREFERENCE = (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256)
"""Which stored credential checks a PLAIN password: the stronger hash first."""

_DUMMY_SALT = bytes(32)

_NO_KEY = {mechanism: bytes(key_size(mechanism)) for mechanism in _PREFERENCE}
"""What an unknown user's derived key is compared with (a hash is never all zeros)."""


def plain_token(username: str, password: str, authzid: str = "") -> bytes:
    """The client's PLAIN message: `authzid NUL authcid NUL passwd`, UTF-8."""
    for what, value in (("user name", username), ("password", password), ("authzid", authzid)):
        if "\x00" in value:
            raise ValueError(f"a PLAIN {what} cannot hold a NUL")
    if not username or not password:
        raise ValueError("PLAIN needs a user name and a password")
    return f"{authzid}\x00{username}\x00{password}".encode()


def _refused(message: str) -> AuthenticationFailed:
    return AuthenticationFailed(f"Authentication failed: {message}")


class PlainServer:
    """The server side of one PLAIN login (sans-IO): one message in, an empty answer out.

    `lookup(name, mechanism)` gives a user's stored SCRAM credential (`ScramImage.get` fits).
    A malformed message, an authzid other than the user name, an unknown user or a wrong
    password is one `AuthenticationFailed`; the last two have the same message (Kafka's) and
    cost the same time, so the answer never reveals whether the user exists.
    """

    mechanism_name = MECHANISM_NAME

    def __init__(
        self,
        lookup: Callable[[str, ScramMechanism], StoredCredential | None],
        *,
        keys: DerivedKeys | None = None,
        unknown: UnknownUser | None = None,
    ) -> None:
        self._lookup = lookup
        self._keys = keys
        self._unknown = unknown
        self._done = False
        self.username: str | None = None
        """The authenticated user name, once `evaluate` succeeded; None before."""
        self.attempted_username: str | None = None
        """The user name the client gave (for the log of a failed login), once parsed."""

    @property
    def complete(self) -> bool:
        """Whether the client is authenticated."""
        return self.username is not None

    def evaluate(self, response: bytes) -> bytes:
        """Check the client's PLAIN message; the (empty) answer, or `AuthenticationFailed`."""
        if self._done:
            raise _refused("the PLAIN exchange is already over")
        self._done = True
        username, password = self._parse(response)
        self.attempted_username = username
        found = [
            (mechanism, credential)
            for mechanism in _PREFERENCE
            if (credential := self._lookup(username, mechanism)) is not None
        ]
        if found:
            mechanism, credential = found[0]
            salt, iterations, expected = (
                credential.salt,
                credential.iterations,
                credential.stored_key,
            )
        else:
            # The same steps as a real user's check (a derivation at a mechanism and count
            # drawn from the real users', then a constant-time compare against a key of the
            # right size that no password gives), so the time taken does not tell an unknown
            # user from a wrong password.
            mechanism, salt, iterations = (
                (_PREFERENCE[0], _DUMMY_SALT, DEFAULT_ITERATIONS)
                if self._unknown is None
                else self._unknown(username)
            )
            expected = _NO_KEY[mechanism]
        stored_key = self._stored_key(mechanism, password, salt, iterations)
        if not (hmac.compare_digest(stored_key, expected) and found):
            raise _refused("Invalid username or password")
        self.username = username
        return b""

    def _stored_key(
        self, mechanism: ScramMechanism, password: bytes, salt: bytes, iterations: int
    ) -> bytes:
        if self._keys is not None:
            return self._keys.stored_key(mechanism, password, salt, iterations)
        salted = salted_password(mechanism, password, salt, iterations)
        return h(mechanism, hmac_of(mechanism, salted, b"Client Key"))

    @staticmethod
    def _parse(response: bytes) -> tuple[str, bytes]:
        """(user name, password bytes) of a PLAIN message; `AuthenticationFailed` if malformed."""
        if len(response) > MAX_TOKEN_BYTES:
            raise _refused(f"the SASL/PLAIN message is longer than {MAX_TOKEN_BYTES} bytes")
        fields = response.split(b"\x00")
        if len(fields) != 3:
            # Kafka's wording; the count tells a client author what went wrong, not a secret.
            raise AuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(fields)}"
            )
        try:
            authzid, username = (field.decode("utf-8") for field in fields[:2])
            fields[2].decode("utf-8")
        except UnicodeDecodeError:
            raise _refused("the SASL/PLAIN message is not UTF-8") from None
        if not username:
            raise _refused("username not specified")
        if not fields[2]:
            raise _refused("password not specified")
        if authzid and authzid != username:
            raise _refused("Client requested an authorization id that is different from username")
        return username, fields[2]
