"""A bounded cache of PLAIN key derivations, so a password checked once costs no PBKDF2 again.

A PLAIN login derives the salted password (PBKDF2, thousands of rounds) to compare its StoredKey
with the stored one. The cache maps HMAC(process secret, mechanism, salt, iterations, password)
to that StoredKey: a client logging in again, or a guesser repeating a guess for a user known
or unknown, costs one HMAC. The password itself is never kept, only the keyed digest of it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict

from records.model import ScramMechanism
from replay.security.scram_keys import h, hmac_of, salted_password

DEFAULT_ENTRIES = 4096
"""Derivations kept (about 100 bytes each); the least recently used goes first."""


class DerivedKeys:
    """StoredKey = H(HMAC(PBKDF2(password, salt, i), "Client Key")), derived once per input."""

    def __init__(self, entries: int = DEFAULT_ENTRIES) -> None:
        self._entries = entries
        self._secret = secrets.token_bytes(32)
        self._cache: OrderedDict[bytes, bytes] = OrderedDict()
        self._lock = threading.Lock()  # derivations run on the login threads
        self.derivations = 0
        """PBKDF2 runs so far (for tests and stats)."""

    def stored_key(
        self, mechanism: ScramMechanism, password: bytes, salt: bytes, iterations: int
    ) -> bytes:
        """The StoredKey `password` gives with this salt and count (cached)."""
        digest = hmac.new(
            self._secret,
            b"%d,%d,%d,%b%b" % (mechanism.value, iterations, len(salt), salt, password),
            hashlib.sha256,
        ).digest()
        with self._lock:
            found = self._cache.get(digest)
            if found is not None:
                self._cache.move_to_end(digest)
                return found
        salted = salted_password(mechanism, password, salt, iterations)
        key = h(mechanism, hmac_of(mechanism, salted, b"Client Key"))
        with self._lock:
            self.derivations += 1
            self._cache[digest] = key
            if len(self._cache) > self._entries:
                self._cache.popitem(last=False)
        return key
