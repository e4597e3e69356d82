"""What a login tells of a user that does not exist: nothing a real user's login would not.

SCRAM's server-first message names a salt and an iteration count, and PLAIN's check costs a
key derivation at the user's mechanism and iteration count. An unknown user is answered with a
salt derived from a server secret and the name (the same every time, as a real user's is), and
with an iteration count drawn, per name and from that secret, from the counts the real users'
credentials of the mechanism have (`UnknownIterations`): if a third of the real users have
8192 and the rest 4096, a third of all names, real or not, are answered 8192, each one every
time. A single count for every unknown name (the default, or the most common one) would name
every real user whose count differs as real.

PLAIN draws the same way which mechanism's derivation an unknown name costs (a real user's
PLAIN check uses SCRAM-SHA-512 when the user has it, else SCRAM-SHA-256), then its count as
SCRAM answers it for that name, so the work a guess costs follows the real users' too.

The draw is a quantile: the name's keyed hash, read as a number in [0, 1), picks that fraction
of the way along the real counts in order. A user added or removed moves few names' counts.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from records.model import ScramMechanism
from replay.security.scram_keys import hmac_of
from replay.security.scram_rules import DEFAULT_ITERATIONS

FAKE_SALT_BYTES = 32
"""Bytes of an unknown user's salt (as many as a salt drawn by this project's CLI)."""

_PLAIN_PREFERENCE = (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256)
"""The credential a PLAIN login is checked with: the stronger hash first (as `plain` does)."""

_T = TypeVar("_T")

_Distributions = tuple[dict[ScramMechanism, tuple[int, ...]], tuple[ScramMechanism, ...]]
"""(each mechanism's counts, sorted; the mechanism each user's PLAIN check uses, sorted)."""


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
        """The credentials (each with `.name`, `.mechanism` and `.iterations`)."""


class UnknownIterations:
    """The iteration count (and PLAIN's mechanism) answered for an unknown user name.

    Drawn per name, keyed by a server secret, from the real credentials' counts (see the
    module's docstring); DEFAULT_ITERATIONS when no user has the mechanism. The counts are
    recomputed only when the credentials' map changes (an image's map is immutable, so its
    identity says whether it changed).
    """

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secrets.token_bytes(32) if secret is None else secret
        self._known: tuple[object, _Distributions] = (None, ({}, ()))
        """(the credentials' map, its distributions), replaced whole: logins run on threads."""

    def of(self, credentials: Credentials, mechanism: ScramMechanism, name: str) -> int:
        """The count SCRAM answers for `name` with `mechanism` when it has no credential."""
        counts = self._refreshed(credentials)[0].get(mechanism, ())
        if not counts:
            return DEFAULT_ITERATIONS
        return self._draw(b"iterations", mechanism.mechanism_name, name, counts)

    def plain_of(self, credentials: Credentials, name: str) -> tuple[ScramMechanism, int]:
        """The mechanism and count a PLAIN check of `name` derives with when it is unknown."""
        mechanisms = self._refreshed(credentials)[1]
        mechanism = (
            self._draw(b"plain", "", name, mechanisms) if mechanisms else _PLAIN_PREFERENCE[0]
        )
        return mechanism, self.of(credentials, mechanism, name)

    def _refreshed(self, credentials: Credentials) -> _Distributions:
        source, found = self._known
        if credentials is not source:
            found = _distributions(credentials.values())
            self._known = (credentials, found)
        return found

    def _draw(self, domain: bytes, mechanism: str, name: str, values: Sequence[_T]) -> _T:
        message = b"\x00".join((domain, mechanism.encode(), name.encode("utf-8")))
        digest = hmac.new(self._secret, message, hashlib.sha256).digest()
        fraction = int.from_bytes(digest[:8], "big")  # in [0, 2**64)
        return values[(fraction * len(values)) >> 64]


def _distributions(credentials: Iterable[object]) -> _Distributions:
    """(every mechanism's counts, sorted; PLAIN's mechanism for each user, sorted)."""
    counts: dict[ScramMechanism, list[int]] = {}
    users: dict[str, set[ScramMechanism]] = {}
    for credential in credentials:
        mechanism = getattr(credential, "mechanism", None)
        iterations = getattr(credential, "iterations", None)
        name = getattr(credential, "name", None)
        if not isinstance(mechanism, ScramMechanism) or not isinstance(iterations, int):
            continue
        counts.setdefault(mechanism, []).append(iterations)
        if isinstance(name, str):
            users.setdefault(name, set()).add(mechanism)
    plain = sorted(
        (
            next(m for m in _PLAIN_PREFERENCE if m in held)
            for held in users.values()
            if not held.isdisjoint(_PLAIN_PREFERENCE)
        ),
        key=lambda mechanism: mechanism.value,
    )
    return {m: tuple(sorted(c)) for m, c in counts.items()}, tuple(plain)
