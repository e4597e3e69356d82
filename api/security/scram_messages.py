"""The grammar of SCRAM's messages (RFC 5802 section 7), shared by the server and the client.

Parsers raise ValueError with a reason that never quotes the message (it may hold a proof).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

MAX_MESSAGE_BYTES = 16384
"""The longest SCRAM message either side reads; real ones are a few hundred bytes."""

_ATTRIBUTES = frozenset("acemnprsiv")
"""RFC 5802's attribute letters: none may appear again as an extension (a duplicated field)."""


def escape_name(name: str) -> str:
    """A user name as a SCRAM `saslname`: `=` becomes `=3D` and `,` becomes `=2C`."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(text: str) -> str:
    """The user name of a `saslname`; ValueError for an empty one, NUL or a stray `=`."""
    if not text:
        raise ValueError("the user name is empty")
    if "\x00" in text:
        raise ValueError("the user name holds a NUL")
    parts = text.split("=")
    out = [parts[0]]
    for part in parts[1:]:
        if part.startswith("2C"):
            out.append("," + part[2:])
        elif part.startswith("3D"):
            out.append("=" + part[2:])
        else:
            raise ValueError("the user name holds '=' not followed by 2C or 3D")
    return "".join(out)


def printable(text: str) -> bool:
    """RFC 5802's `printable`: %x21-2B / %x2D-7E (visible ASCII but the comma)."""
    return bool(text) and all("\x21" <= c <= "\x7e" and c != "," for c in text)


def b64decode(text: str) -> bytes:
    """Strict base64 (no stray characters, right padding); ValueError otherwise."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        raise ValueError("a base64 value is not valid base64") from None


def b64(data: bytes) -> str:
    """Bytes as base64 text."""
    return base64.b64encode(data).decode("ascii")


def message_text(message: bytes, what: str) -> str:
    """A message as text; ValueError if it is too long or not UTF-8."""
    if len(message) > MAX_MESSAGE_BYTES:
        raise ValueError(f"the {what} is longer than {MAX_MESSAGE_BYTES} bytes")
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"the {what} is not UTF-8") from None


def attribute(part: str, letter: str) -> str:
    """The value of `letter=value`; ValueError if the field is another one."""
    if not part.startswith(letter + "="):
        raise ValueError(f"attribute {letter!r} is missing or out of place")
    return part[2:]


def extensions(parts: list[str]) -> dict[str, str]:
    """`key=value` extensions after the standard fields; ValueError for a bad or repeated one."""
    found: dict[str, str] = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key.isascii() or not key.isalpha():
            raise ValueError("an extension is not key=value")
        if key in _ATTRIBUTES or key in found:
            raise ValueError(f"attribute {key!r} appears twice")
        if "\x00" in value:
            raise ValueError("an extension holds a NUL")
        found[key] = value
    return found


def xor(left: bytes, right: bytes) -> bytes:
    """Byte-wise XOR of two strings of the same length."""
    return bytes(a ^ b for a, b in zip(left, right, strict=True))


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientFirst:
    """A parsed client-first message; `bare` is the part after the gs2 header."""

    gs2_header: str
    authzid: str
    username: str
    nonce: str
    bare: str
    extensions: dict[str, str]


def parse_client_first(message: bytes) -> ClientFirst:
    """RFC 5802's client-first-message as Kafka accepts it; ValueError says what is wrong."""
    text = message_text(message, "client-first message")
    parts = text.split(",")
    if len(parts) < 4:
        raise ValueError("it has fewer than four fields")
    flag, authz = parts[0], parts[1]
    if flag.startswith("p="):
        raise ValueError("channel binding is not supported; send the gs2 header 'n,,'")
    if flag != "n":
        raise ValueError("the gs2 channel-binding flag must be 'n'")
    authzid = unescape_name(attribute(authz, "a")) if authz else ""
    if parts[2].startswith("m="):
        raise ValueError("mandatory extensions (m=) are not supported")
    username = unescape_name(attribute(parts[2], "n"))
    nonce = attribute(parts[3], "r")
    if not printable(nonce):
        raise ValueError("the nonce is empty or not printable ASCII")
    return ClientFirst(
        gs2_header=f"{flag},{authz},",
        authzid=authzid,
        username=username,
        nonce=nonce,
        bare=",".join(parts[2:]),
        extensions=extensions(parts[4:]),
    )
