"""SCRAM (RFC 5802, RFC 7677): the stored credential and the login exchange, as Kafka does them.

A server keeps, per user and mechanism, the salt, the iteration count, StoredKey = H(ClientKey)
and ServerKey, never the password: ClientKey = HMAC(SaltedPassword, "Client Key"), ServerKey =
HMAC(SaltedPassword, "Server Key"), SaltedPassword = PBKDF2-HMAC(password, salt, iterations).

`ScramServer` and `ScramClient` are the two sides of a login, sans-IO (bytes in, bytes out):
the server's lookup gives it the stored credential of a user name, the client derives its
proof from the password; `scram_messages` holds the messages' grammar.

The stored credential and its derivation are pure rules below the service:
`replay.security.scram_keys` and `replay.security.scram_rules`.
"""

from __future__ import annotations

import enum
import hmac
import secrets
from collections.abc import Callable
from typing import Protocol

from api.security.errors import (
    AuthenticationFailed,
    SaslClientError,
    invalid_credentials,
)
from api.security.scram_messages import (
    ClientFirst,
    attribute,
    b64,
    b64decode,
    escape_name,
    extensions,
    message_text,
    parse_client_first,
    printable,
    xor,
)
from records.model import ScramMechanism
from replay.security.scram_keys import h, hmac_of, salted_password
from replay.security.scram_rules import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    hash_name,
    key_size,
)

# --------------------------------------------------------------------------- the exchange

_TOKEN_AUTH = "tokenauth"
"""Kafka's client-first extension that asks for a delegation-token login (refused here)."""

_FAKE_SALT_KEY = secrets.token_bytes(32)
"""Keys the salt answered for an unknown user: the same name gets the same salt all along."""


class StoredCredential(Protocol):
    """What a server needs of a stored credential: a `ScramCredential` or the image's record."""

    @property
    def salt(self) -> bytes:
        """The salt of the salted password."""

    @property
    def stored_key(self) -> bytes:
        """H(ClientKey)."""

    @property
    def server_key(self) -> bytes:
        """HMAC(SaltedPassword, "Server Key")."""

    @property
    def iterations(self) -> int:
        """The PBKDF2 iteration count."""


class _State(enum.Enum):
    FIRST = "first"
    FINAL = "final"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramServer:
    """The server side of one SCRAM login (sans-IO): feed client messages, get the answers.

    `first(client_first)` answers the server-first message, `final(client_final)` checks the
    proof and answers the server-final one (`v=`); then `username` is the authenticated user.
    Every refusal is one `AuthenticationFailed` and ends the exchange. An unknown user gets a
    salt and iteration count like a known one's (the same ones every time) and fails only at
    the proof, like a wrong password, so the answers never reveal whether a user exists.
    """

    def __init__(
        self,
        lookup: Callable[[str], StoredCredential | None],
        mechanism: ScramMechanism,
        *,
        server_nonce: str | None = None,
        fake_salt_key: bytes | None = None,
        unknown_iterations: Callable[[str], int] | None = None,
    ) -> None:
        """A login's server side; `unknown_iterations(name)` is the count an unknown user is told.

        Drawn per name from the real users' counts (`unknown_users.UnknownIterations`), so the
        count does not tell whether a user exists; DEFAULT_ITERATIONS for every name without it.
        """
        hash_name(mechanism)
        if server_nonce is not None and not printable(server_nonce):
            raise ValueError("a server nonce must be printable ASCII without commas")
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._fake_salt_key = _FAKE_SALT_KEY if fake_salt_key is None else fake_salt_key
        self._unknown_iterations = unknown_iterations
        self.attempted_username: str | None = None
        """The user name the client gave (for the log of a failed login), once parsed."""
        self._state = _State.FIRST
        self.username: str | None = None
        """The authenticated user name, once `final` succeeded; None before."""
        self._first: ClientFirst | None = None
        self._credential: StoredCredential | None = None
        self._nonce = ""
        self._server_first = ""

    @property
    def complete(self) -> bool:
        """Whether the exchange ended with the client authenticated."""
        return self._state is _State.COMPLETE

    def evaluate(self, response: bytes) -> bytes:
        """The answer to the client's next message: `first`, then `final`."""
        if self._state is _State.FIRST:
            return self.first(response)
        if self._state is _State.FINAL:
            return self.final(response)
        self._state = _State.FAILED
        raise AuthenticationFailed("Authentication failed: the SCRAM exchange is already over")

    def _fail(self) -> AuthenticationFailed:
        self._state = _State.FAILED
        return invalid_credentials(self.mechanism.mechanism_name)

    def _malformed(self, what: str, reason: str) -> AuthenticationFailed:
        self._state = _State.FAILED
        return AuthenticationFailed(f"Authentication failed: invalid SCRAM {what}: {reason}")

    def first(self, client_first: bytes) -> bytes:
        """The server-first message answering a client-first one."""
        if self._state is not _State.FIRST:
            self._state = _State.FAILED
            raise AuthenticationFailed("Authentication failed: unexpected SCRAM client-first")
        try:
            first = parse_client_first(client_first)
        except ValueError as exc:
            raise self._malformed("client-first message", str(exc)) from None
        self.attempted_username = first.username
        if _TOKEN_AUTH in first.extensions:
            self._state = _State.FAILED
            raise AuthenticationFailed(
                "Authentication failed: delegation tokens (tokenauth) are not supported; log "
                "in with a user's SCRAM credential"
            )
        if first.authzid and first.authzid != first.username:
            self._state = _State.FAILED
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        # The fake salt is computed for every user, so known and unknown ones cost the same.
        fake_salt = hmac_of(
            self.mechanism,
            self._fake_salt_key,
            self.mechanism.mechanism_name.encode() + b"\x00" + first.username.encode("utf-8"),
        )[:32]
        credential = self._lookup(first.username)
        # Drawn for every user (one HMAC), so known and unknown ones cost the same here too.
        unknown = (
            DEFAULT_ITERATIONS
            if self._unknown_iterations is None
            else self._unknown_iterations(first.username)
        )
        salt, iterations = (
            (fake_salt, unknown) if credential is None else (credential.salt, credential.iterations)
        )
        server_nonce = self._server_nonce or secrets.token_urlsafe(24)
        self._first = first
        self._credential = credential
        self._nonce = first.nonce + server_nonce
        self._server_first = f"r={self._nonce},s={b64(salt)},i={iterations}"
        self._state = _State.FINAL
        return self._server_first.encode("ascii")

    def final(self, client_final: bytes) -> bytes:
        """The server-final message (`v=`) answering a client-final one with a valid proof."""
        first = self._first
        if self._state is not _State.FINAL or first is None:
            self._state = _State.FAILED
            raise AuthenticationFailed("Authentication failed: unexpected SCRAM client-final")
        size = key_size(self.mechanism)
        try:
            text = message_text(client_final, "client-final message")
            parts = text.split(",")
            if len(parts) < 3:
                raise ValueError("it has fewer than three fields")
            binding = attribute(parts[0], "c")
            nonce = attribute(parts[1], "r")
            proof = b64decode(attribute(parts[-1], "p"))
            extensions(parts[2:-1])
            if len(proof) != size:
                raise ValueError(f"the proof is not {size} bytes")
        except ValueError as exc:
            raise self._malformed("client-final message", str(exc)) from None
        credential = self._credential
        stored_key, server_key = (
            (secrets.token_bytes(size), secrets.token_bytes(size))
            if credential is None
            else (credential.stored_key, credential.server_key)
        )
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{first.bare},{self._server_first},{without_proof}".encode()
        client_signature = hmac_of(self.mechanism, stored_key, auth_message)
        client_key = xor(proof, client_signature)
        proof_ok = hmac.compare_digest(h(self.mechanism, client_key), stored_key)
        nonce_ok = hmac.compare_digest(nonce.encode(), self._nonce.encode())
        binding_ok = binding == b64(first.gs2_header.encode())
        if not (proof_ok and nonce_ok and binding_ok and credential is not None):
            raise self._fail()
        self.username = first.username
        self._state = _State.COMPLETE
        server_signature = hmac_of(self.mechanism, server_key, auth_message)
        return f"v={b64(server_signature)}".encode("ascii")


class ScramClient:
    """The client side of one SCRAM login (sans-IO): `first()`, `final(...)`, `verify(...)`.

    The password is used as its UTF-8 bytes, as Kafka's clients do. A server that asks for an
    iteration count outside MIN_ITERATIONS..MAX_ITERATIONS, answers a nonce that does not
    extend ours, or cannot prove it knows the credential is refused with `SaslClientError`.
    """

    def __init__(
        self,
        username: str,
        password: str,
        mechanism: ScramMechanism,
        *,
        nonce: str | None = None,
    ) -> None:
        hash_name(mechanism)
        if not username or "\x00" in username:
            raise ValueError("a SCRAM user name must be non-empty and hold no NUL")
        if nonce is not None and not printable(nonce):
            raise ValueError("a client nonce must be printable ASCII without commas")
        self.mechanism = mechanism
        self.username = username
        self._password = password.encode("utf-8")
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._bare = f"n={escape_name(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self.complete = False
        """Whether the server proved it knows the credential (`verify` succeeded)."""

    def first(self) -> bytes:
        """The client-first message (gs2 header `n,,`: no channel binding, no authzid)."""
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final message (with the proof) answering the server-first one."""
        if self._server_signature is not None:
            raise SaslClientError("the server sent a second SCRAM server-first message")
        try:
            text = message_text(server_first, "server-first message")
            parts = text.split(",")
            if len(parts) < 3:
                raise ValueError("it has fewer than three fields")
            if parts[0].startswith("m="):
                raise ValueError("it asks for a mandatory extension (m=) this client lacks")
            nonce = attribute(parts[0], "r")
            salt = b64decode(attribute(parts[1], "s"))
            count = attribute(parts[2], "i")
            extensions(parts[3:])
            if not (nonce.startswith(self._nonce) and len(nonce) > len(self._nonce)):
                raise ValueError("its nonce does not extend the client's")
            if not printable(nonce):
                raise ValueError("its nonce is not printable ASCII")
            if not salt:
                raise ValueError("its salt is empty")
            if not (count.isascii() and count.isdigit() and len(count) <= 10):
                raise ValueError("its iteration count is not a number")
        except ValueError as exc:
            raise SaslClientError(
                f"the server's SCRAM server-first message is invalid: {exc}"
            ) from None
        iterations = int(count)
        if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
            raise SaslClientError(
                f"the server asks for {iterations} SCRAM iterations; this client accepts "
                f"{MIN_ITERATIONS} to {MAX_ITERATIONS} (Kafka's limits)"
            )
        salted = salted_password(self.mechanism, self._password, salt, iterations)
        client_key = hmac_of(self.mechanism, salted, b"Client Key")
        stored_key = h(self.mechanism, client_key)
        without_proof = f"c={b64(b'n,,')},r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        proof = xor(client_key, hmac_of(self.mechanism, stored_key, auth_message))
        server_key = hmac_of(self.mechanism, salted, b"Server Key")
        self._server_signature = hmac_of(self.mechanism, server_key, auth_message)
        return f"{without_proof},p={b64(proof)}".encode("ascii")

    def verify(self, server_final: bytes) -> None:
        """Check the server-final message: the server must prove it holds the credential."""
        if self._server_signature is None:
            raise SaslClientError("the SCRAM server-final message came before the server-first")
        try:
            text = message_text(server_final, "server-final message")
            parts = text.split(",")
            if parts[0].startswith("e="):
                raise SaslClientError(f"the server refused the login: {parts[0][2:][:100]!r}")
            signature = b64decode(attribute(parts[0], "v"))
            extensions(parts[1:])
        except ValueError as exc:
            raise SaslClientError(
                f"the server's SCRAM server-final message is invalid: {exc}"
            ) from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslClientError(
                "the server's SCRAM signature is wrong: it does not hold this user's credential "
                "(is this the server you meant to reach?)"
            )
        self.complete = True
