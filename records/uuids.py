"""128-bit ids (topic ids, namespace ids, incarnation ids) shown as Kafka shows them (KIP-516)."""

from __future__ import annotations

import base64
import binascii
import builtins
import os
from dataclasses import dataclass
from typing import ClassVar

from records.slots import new_instance, slot_setter

_DASH = 62
"""The index of '-' in the URL-safe base64 alphabet."""


@dataclass(frozen=True, slots=True)
class Uuid:
    """An immutable 16-byte id; `str()` gives Kafka's 22-char URL-safe base64 without padding."""

    bytes: bytes

    ZERO: ClassVar[Uuid]
    METADATA_TOPIC_ID: ClassVar[Uuid]
    RESERVED: ClassVar[frozenset[Uuid]]

    def __post_init__(self) -> None:
        if len(self.bytes) != 16:
            raise ValueError(f"a Uuid is 16 bytes, got {len(self.bytes)}")

    def __hash__(self) -> int:
        # Ids key the image's maps; hashing the bytes directly is twice as fast as the
        # generated hash of a one-field tuple.
        return hash(self.bytes)

    def __str__(self) -> str:
        return base64.urlsafe_b64encode(self.bytes).rstrip(b"=").decode("ascii")

    def __repr__(self) -> str:
        return f"Uuid({str(self)!r})"

    @classmethod
    def parse(cls, text: str) -> Uuid:
        """Parse a 22-char base64 id (Kafka's form) or a canonical 36-char hex UUID."""
        text = text.strip()
        if len(text) == 22:
            try:
                raw = base64.urlsafe_b64decode(text + "==")
            except (binascii.Error, ValueError):
                raw = b""
            if len(raw) == 16 and str(Uuid(raw)) == text:
                return cls(raw)
        elif len(text) == 36:
            import uuid  # noqa: PLC0415 - rarely needed; importing it costs ~3 ms at start-up

            try:
                parsed = uuid.UUID(text)
            except ValueError:
                parsed = None
            if parsed is not None and str(parsed) == text.lower():
                return cls(parsed.bytes)
        raise ValueError(
            f"{text!r} is not a topic id: expected 22 characters of URL-safe base64 "
            "(as `mlog topics describe` shows) or a 36-character UUID"
        )

    @classmethod
    def of_16_bytes(cls, raw: builtins.bytes) -> Uuid:
        """The id of `raw`, known to be 16 bytes (a `uuid.UUID`'s `.bytes`), without the check.

        Stored through the slot: a request's ids (DeleteTopics, Metadata) come decoded as
        `uuid.UUID`, whose bytes are 16 by construction.
        """
        made: Uuid = new_instance(cls)
        _set_bytes(made, raw)
        return made

    @classmethod
    def random(cls) -> Uuid:
        """Draw a random v4 id that is not reserved and whose text does not start with '-'.

        Kafka redraws ids starting with '-' so they cannot be mistaken for command-line flags.
        """
        while True:
            raw = bytearray(os.urandom(16))
            raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
            raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
            # The text's first character is the top 6 bits of the first byte; 62 is '-'.
            if raw[0] >> 2 == _DASH:
                continue
            value = bytes(raw)
            if value not in _RESERVED_BYTES:
                # 16 bytes by construction: stored through the slot, without `__init__`'s
                # check (a topic creation draws one).
                candidate: Uuid = new_instance(cls)
                _set_bytes(candidate, value)
                return candidate


Uuid.ZERO = Uuid(bytes(16))
Uuid.METADATA_TOPIC_ID = Uuid(bytes(15) + b"\x01")
Uuid.RESERVED = frozenset({Uuid.ZERO, Uuid.METADATA_TOPIC_ID})
_RESERVED_BYTES = frozenset(reserved.bytes for reserved in Uuid.RESERVED)
_set_bytes = slot_setter(Uuid, "bytes")


def _hash_in_c() -> None:
    """Hash ids in C where the decoder's extension is built (`_fastdecode.uuid_hash_of`)."""
    try:
        from records import _fastdecode  # type: ignore[attr-defined]  # noqa: PLC0415
    except ImportError:  # no compiler at install time: the Python method stays
        return
    Uuid.__hash__ = _fastdecode.uuid_hash_of(Uuid)  # type: ignore[method-assign]


_hash_in_c()
