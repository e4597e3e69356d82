"""SCRAM's stored credential: what a server keeps, and how it is derived from a password.

A server keeps, per user and mechanism, the salt, the iteration count, StoredKey = H(ClientKey)
and ServerKey, never the password: ClientKey = HMAC(SaltedPassword, "Client Key"), ServerKey =
HMAC(SaltedPassword, "Server Key"), SaltedPassword = PBKDF2-HMAC(password, salt, iterations).
The login exchanges that use these keys are in `api.security.scram`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from records.model import ScramMechanism
from replay.security.scram_rules import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    hash_name,
)


def salted_password(
    mechanism: ScramMechanism, password: bytes, salt: bytes, iterations: int
) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password, salt, iterations)


def hmac_of(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    """HMAC(key, message) with the mechanism's hash."""
    return hmac.new(key, message, hash_name(mechanism)).digest()


def h(mechanism: ScramMechanism, data: bytes) -> bytes:
    """H(data): the mechanism's hash."""
    return hashlib.new(hash_name(mechanism), data).digest()


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredential:
    """What a server stores for one user and mechanism."""

    mechanism: ScramMechanism
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def credential_from_salted(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The stored credential of a salted password (what AlterUserScramCredentials sends)."""
    client_key = hmac_of(mechanism, salted, b"Client Key")
    return ScramCredential(
        mechanism=mechanism,
        salt=salt,
        stored_key=h(mechanism, client_key),
        server_key=hmac_of(mechanism, salted, b"Server Key"),
        iterations=iterations,
    )


def new_credential(
    mechanism: ScramMechanism,
    password: str,
    *,
    iterations: int = DEFAULT_ITERATIONS,
    salt: bytes | None = None,
) -> ScramCredential:
    """A credential for a password, with a fresh random salt unless one is given.

    The password is used as its UTF-8 bytes, as Kafka does (it applies no SASLprep), so a
    credential made here works with every Kafka client.
    """
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(
            f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}, not {iterations}"
        )
    salt = secrets.token_bytes(32) if salt is None else salt
    salted = salted_password(mechanism, password.encode("utf-8"), salt, iterations)
    return credential_from_salted(mechanism, salt, salted, iterations)
