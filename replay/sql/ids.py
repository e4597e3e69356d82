"""Ids in snapshot rows: Kafka's 22-character text form (URL-safe base64 without padding)."""

from __future__ import annotations

import base64
import binascii

from records.interning import shared_uuid
from records.uuids import Uuid
from replay.sql.errors import SnapshotContentError


def parse_id(text: object, what: str) -> Uuid:
    """The id a row holds as text; SnapshotContentError (naming `what`) if it is not one."""
    if not isinstance(text, str) or len(text) != 22:
        raise SnapshotContentError(f"{what} {text!r} is not a 22-character id")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        raise SnapshotContentError(f"{what} {text!r} is not a 22-character id")
    return shared_uuid(raw)
