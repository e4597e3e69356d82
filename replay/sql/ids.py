"""Ids in snapshot rows: Kafka's 22-character text form (URL-safe base64 without padding)."""

from __future__ import annotations

import binascii

from records.interning import shared_uuid
from records.uuids import Uuid
from replay.sql.errors import SnapshotContentError

_TO_STANDARD = bytes.maketrans(b"-_", b"+/")
"""URL-safe base64's two letters as standard base64's (what `base64.urlsafe_b64decode` does)."""
_TO_URL_SAFE = bytes.maketrans(b"+/", b"-_")


def parse_id(text: object, what: str) -> Uuid:
    """The id a row holds as text; SnapshotContentError (naming `what`) if it is not one.

    Only an id's own text is one: the 22 characters its 16 bytes encode to (as the store writes
    them). A non-strict decode also took other texts for an id -- a character outside the
    alphabet skipped, or the last one's four spare bits set -- so two topic rows of different
    texts could be one id, and a load kept one of them without a word.
    """
    if not isinstance(text, str) or len(text) != 22:
        raise SnapshotContentError(f"{what} {text!r} is not a 22-character id")
    try:
        ascii_text = text.encode("ascii")
        raw = binascii.a2b_base64(ascii_text.translate(_TO_STANDARD) + b"==")
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16 or _text_of(raw) != ascii_text:
        raise SnapshotContentError(
            f"{what} {text!r} is not a 22-character id (the URL-safe base64 text of 16 bytes, "
            "as the store writes it)"
        )
    return shared_uuid(raw)


def _text_of(raw: bytes) -> bytes:
    """The 22 characters 16 bytes encode to in Kafka's form (URL-safe, unpadded)."""
    return binascii.b2a_base64(raw, newline=False)[:22].translate(_TO_URL_SAFE)
