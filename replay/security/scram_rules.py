"""SCRAM's limits and mechanisms (RFC 5802, RFC 7677), as Kafka has them; no hashing here.

Replay checks every stored credential against these (`replay.rules.scram_problem`), the
controller every upsertion, and the SASL exchange every login: one declaration for all.
Kept free of `hashlib`, whose import every command's start-up would pay through replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from records.model import ScramMechanism

MIN_ITERATIONS: Final = 4096
"""The fewest PBKDF2 iterations accepted (RFC 7677's minimum; Kafka's too)."""

MAX_ITERATIONS: Final = 16384
"""The most PBKDF2 iterations accepted (Kafka's `ScramMechanism.maxIterations`)."""

DEFAULT_ITERATIONS: Final = 4096
"""The iterations of a credential made without a count."""

HASH_NAMES: Final[Mapping[ScramMechanism, str]] = MappingProxyType(
    {ScramMechanism.SCRAM_SHA_256: "sha256", ScramMechanism.SCRAM_SHA_512: "sha512"}
)
"""The hashlib name of each SCRAM mechanism's hash."""

KEY_SIZES: Final[Mapping[ScramMechanism, int]] = MappingProxyType(
    {ScramMechanism.SCRAM_SHA_256: 32, ScramMechanism.SCRAM_SHA_512: 64}
)
"""The size of a stored key and a server key, per mechanism (its hash's digest size)."""


def hash_name(mechanism: ScramMechanism) -> str:
    """The hashlib name of a mechanism's hash; ValueError for UNKNOWN."""
    try:
        return HASH_NAMES[mechanism]
    except KeyError:
        raise ValueError(f"{mechanism!r} is not a SCRAM mechanism") from None


def key_size(mechanism: ScramMechanism) -> int:
    """Bytes of a mechanism's keys (32 for SHA-256, 64 for SHA-512); ValueError for UNKNOWN."""
    try:
        return KEY_SIZES[mechanism]
    except KeyError:
        raise ValueError(f"{mechanism!r} is not a SCRAM mechanism") from None


def mechanism_by_name(name: str) -> ScramMechanism:
    """SCRAM-SHA-256 or SCRAM-SHA-512 by its SASL name; ValueError otherwise."""
    for mechanism in HASH_NAMES:
        if mechanism.mechanism_name == name:
            return mechanism
    raise ValueError(f"unknown SCRAM mechanism {name!r}; use SCRAM-SHA-256 or SCRAM-SHA-512")
