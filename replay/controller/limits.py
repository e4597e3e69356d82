"""What a record field can hold, checked before a command produces the record.

Avro's `int` is a 32-bit and `long` a 64-bit signed integer; Kafka's replication factor is an
int16 on the wire. Strings must be valid UTF-8 (no lone surrogates), and names shown in tables
(racks, hosts, listener names) may not hold control characters, which break a table's lines.
Each check raises the Kafka error code its caller names, with the value clipped in the message.
"""

from __future__ import annotations

import unicodedata

from replay.controller.errors import ApiError, ErrorCode

INT16_MAX = 2**15 - 1

MAX_LABEL_LENGTH = 255
"""Racks, hosts and listener names: a DNS name's limit, far above any real one."""

MAX_ECHO = 60
"""Characters of a refused value quoted in an error message."""


def clip(value: object) -> str:
    """`repr(value)`, cut to `MAX_ECHO` characters (with the full length) if longer."""
    text = repr(value)
    if len(text) <= MAX_ECHO:
        return text
    size = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters"
    return f"{text[:MAX_ECHO]}... ({size})"


def echo(value: str) -> str:
    """A client's string for a log line: as is when printable and short, else `clip`ped."""
    return value if value.isprintable() and len(value) <= MAX_ECHO else clip(value)


def check_int(value: int, *, what: str, low: int, high: int, code: ErrorCode) -> None:
    """Refuse `value` with `code` unless it is an int in `low..high`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(code, f"{what} must be an integer, got {clip(value)}")
    if not low <= value <= high:
        raise ApiError(code, f"{what} must be in {low}..{high}, got {clip(value)}")


def check_text(value: str, *, what: str, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
    """Refuse a string that is not a str or cannot be stored as UTF-8 (a lone surrogate)."""
    if not isinstance(value, str):
        raise ApiError(code, f"{what} must be a string, got {clip(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ApiError(
            code, f"{what} {clip(value)} is not valid Unicode text ({exc.reason})"
        ) from None


def check_label(
    value: str,
    *,
    what: str,
    max_length: int = MAX_LABEL_LENGTH,
    code: ErrorCode = ErrorCode.INVALID_REQUEST,
) -> None:
    """Refuse an empty, over-long, non-UTF-8 label, or one with control characters or NUL."""
    check_text(value, what=what, code=code)
    if not value.strip():
        raise ApiError(code, f"{what} cannot be empty")
    if len(value) > max_length:
        raise ApiError(code, f"{what} {clip(value)} is longer than {max_length} characters")
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")), None)
    if bad is not None:
        raise ApiError(
            code,
            f"{what} {clip(value)} contains the control character U+{ord(bad):04X}; "
            "use printable characters only",
        )
