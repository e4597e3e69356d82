"""What a login tells of a user that does not exist: nothing a real user's login would not.

SCRAM's server-first message names a salt and an iteration count, and PLAIN's check costs a
key derivation at the user's iteration count. An unknown user is answered with a salt derived
from a server secret and the name (the same every time, as a real user's is) and with the
iteration count most stored credentials of the mechanism have (`TypicalIterations`), so
neither the answer nor the time it takes tells it from a real user with a wrong password.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Iterable
from typing import Protocol

from records.model import ScramMechanism
from replay.security.scram_keys import hmac_of
from replay.security.scram_rules import DEFAULT_ITERATIONS

FAKE_SALT_BYTES = 32
"""Bytes of an unknown user's salt (as many as a salt drawn by this project's CLI)."""


class FakeSalts:
    """The salt answered for an unknown user: HMAC(server secret, mechanism, name)."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secrets.token_bytes(32) if secret is None else secret

    def salt(self, mechanism: ScramMechanism, name: str) -> bytes:
        """The same salt for the same mechanism and name, for the life of this object."""
        message = mechanism.mechanism_name.encode() + b"\x00" + name.encode("utf-8")
        return hmac_of(mechanism, self._secret, message)[:FAKE_SALT_BYTES]


class Credentials(Protocol):
    """A map of stored credentials (an image's persistent map): only its values are read."""

    def values(self) -> Iterable[object]:
        """The credentials (each with `.mechanism` and `.iterations`)."""


class TypicalIterations:
    """The iteration count most stored credentials of a mechanism have (ties: the higher).

    Recomputed only when the credentials' map changes (an image's map is immutable, so its
    identity says whether it changed); DEFAULT_ITERATIONS when no user has the mechanism.
    """

    def __init__(self) -> None:
        self._source: object = None
        self._counts: dict[ScramMechanism, int] = {}

    def of(self, credentials: Credentials, mechanism: ScramMechanism) -> int:
        """The typical count of `mechanism` among `credentials`' values (with `.mechanism`)."""
        if credentials is not self._source:
            self._counts = _typical(credentials.values())
            self._source = credentials
        return self._counts.get(mechanism, DEFAULT_ITERATIONS)


def _typical(credentials: Iterable[object]) -> dict[ScramMechanism, int]:
    counts: dict[ScramMechanism, Counter[int]] = {}
    for credential in credentials:
        mechanism = getattr(credential, "mechanism", None)
        iterations = getattr(credential, "iterations", None)
        if isinstance(mechanism, ScramMechanism) and isinstance(iterations, int):
            counts.setdefault(mechanism, Counter())[iterations] += 1
    return {
        mechanism: max(counter.items(), key=lambda item: (item[1], item[0]))[0]
        for mechanism, counter in counts.items()
    }
