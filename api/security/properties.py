r"""Java `.properties` files, read as `java.util.Properties.load` reads them (Kafka's configs).

The syntax: a line whose first non-blank character is `#` or `!` is a comment; a key ends at
the first unescaped `=`, `:` or blank, and one `=` or `:` with blanks around it may follow;
a line ending in an odd number of backslashes continues on the next one (whose leading blanks
are dropped); `\t \n \r \f \uXXXX` are escapes and a backslash before any other
character stands for that character. Values keep their trailing blanks (Kafka trims them when
it reads a setting). A key given twice takes its last value, as in Java.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from api.security.errors import SecurityConfigError

MAX_FILE_BYTES = 1 << 20
"""The largest properties file read; a config is a few kilobytes."""

_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX = frozenset("0123456789abcdefABCDEF")


class PropertiesError(SecurityConfigError):
    """A properties file cannot be read or holds a malformed escape; names file and line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Property:
    """One `key=value` of a properties file and the line it starts on (from 1)."""

    key: str
    value: str
    line: int


def _natural_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line); a line ends at LF, CR or CR LF."""
    yield from enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1)


def _continues(line: str) -> bool:
    """Whether a line ends in an odd number of backslashes (the last one joins the next line)."""
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, logical line) of every line that is neither blank nor a comment."""
    lines = _natural_lines(text)
    for number, natural in lines:
        line = natural.lstrip(_BLANKS)
        if not line or line[0] in "#!":
            continue  # a comment never continues, even when it ends in a backslash
        parts = []
        while _continues(line):
            parts.append(line[:-1])
            following = next(lines, None)
            if following is None:
                line = ""
                break
            line = following[1].lstrip(_BLANKS)
        parts.append(line)
        yield number, "".join(parts)


def _unescape(text: str, where: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        char = text[i + 1]
        if char == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not set(digits) <= _HEX:
                raise PropertiesError(
                    f"{where}: malformed \\uXXXX escape (a backslash-u needs four hex digits; "
                    "write \\\\ for a backslash)"
                )
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(char, char))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """The raw (still escaped) key and value of a logical line, as Java's `Properties` splits."""
    end = len(line)
    i, escaped, separated = 0, False, False
    value_start = end
    while i < end:
        char = line[i]
        if not escaped and (char in "=:" or char in _BLANKS):
            value_start, separated = i + 1, char in "=:"
            break
        escaped = char == "\\" and not escaped
        i += 1
    j = value_start
    while j < end:
        char = line[j]
        if char not in _BLANKS:
            if separated or char not in "=:":
                break
            separated = True
        j += 1
    return line[:i], line[j:]


def iter_properties(text: str, *, source: str = "<properties>") -> Iterator[Property]:
    """Every entry of a properties text in order (a repeated key appears each time)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        where = f"{source}:{number}"
        yield Property(
            key=_unescape(raw_key, where), value=_unescape(raw_value, where), line=number
        )


def parse_properties(text: str, *, source: str = "<properties>") -> dict[str, str]:
    """A properties text as a dict (the last value of a repeated key wins, as in Java)."""
    return {entry.key: entry.value for entry in iter_properties(text, source=source)}


def read_properties_text(path: str | os.PathLike[str]) -> str:
    """A properties file's text; `PropertiesError` for a missing, unreadable or huge file.

    UTF-8, or ISO-8859-1 (what Java's `Properties.load` reads) if the bytes are not UTF-8.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise PropertiesError(f"{name}: no such file; give the path of a properties file") from None
    except IsADirectoryError:
        raise PropertiesError(f"{name}: is a directory, not a properties file") from None
    except OSError as exc:
        raise PropertiesError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_FILE_BYTES:
        raise PropertiesError(
            f"{name}: larger than {MAX_FILE_BYTES} bytes; is it really a properties file?"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """A properties file as a dict; `PropertiesError` names the file (and line) on failure."""
    return parse_properties(read_properties_text(path), source=os.fspath(path))
