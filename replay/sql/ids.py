"""Ids in snapshot rows: Kafka's 22-character text form (URL-safe base64 without padding)."""

from __future__ import annotations

import binascii

from records.interning import shared_uuid
from records.uuids import Uuid
from replay.sql.errors import SnapshotContentError

_TO_STANDARD = bytes.maketrans(b"-_", b"+/")
"""URL-safe base64's two letters as standard base64's (what `base64.urlsafe_b64decode` does)."""


def parse_id(text: object, what: str) -> Uuid:
    """The id a row holds as text; SnapshotContentError (naming `what`) if it is not one.

    `base64.urlsafe_b64decode`'s decoding, without its Python layers (a load parses one id a
    topic): the same non-strict `binascii` decode of the same bytes.
    """
    if not isinstance(text, str) or len(text) != 22:
        raise SnapshotContentError(f"{what} {text!r} is not a 22-character id")
    try:
        raw = binascii.a2b_base64(text.encode("ascii").translate(_TO_STANDARD) + b"==")
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise SnapshotContentError(f"{what} {text!r} is not a 22-character id")
    return shared_uuid(raw)
