"""Kafka's `sasl.jaas.config` line: one login module, its control flag and its options.

`org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";`
(or the ScramLoginModule one) is read as Kafka's `JaasConfig` reads it: blanks and `//` or
`/* */` comments between tokens, values quoted with `"` or `'` (backslash escapes inside) or
bare words, and a `;` at the end. Error messages name keys, never values (one is a password).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from api.security.errors import SecurityConfigError

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_WORD = re.compile(r"[^\s=;\"'/]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class JaasLogin:
    """The login module of a `sasl.jaas.config` and the credential its options give."""

    module: str
    flag: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def _error(why: str) -> SecurityConfigError:
    return SecurityConfigError(
        f'sasl.jaas.config: {why}; write it as {PLAIN_MODULE} required username="..." '
        'password="...";'
    )


def _quoted(text: str, start: int) -> tuple[str, int]:
    """The value of a quoted string starting at `start` (its quote) and the index after it."""
    quote, i = text[start], start + 1
    out: list[str] = []
    while i < len(text):
        char = text[i]
        if char == quote:
            return "".join(out), i + 1
        if char == "\n":
            break
        if char == "\\" and i + 1 < len(text):
            following = text[i + 1]
            octal = re.match(r"[0-7]{1,3}", text[i + 1 : i + 4])
            if octal and int(octal.group(), 8) < 256:
                out.append(chr(int(octal.group(), 8)))
                i += 1 + octal.end()
                continue
            out.append(_ESCAPES.get(following, following))
            i += 2
            continue
        out.append(char)
        i += 1
    raise _error("a quoted value is not closed")


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value) tokens: word, string, '=' or ';'."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char.isspace() or char < " ":
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise _error("a /* comment is not closed")
            i = end + 2
        elif char in "=;":
            tokens.append((char, char))
            i += 1
        elif char in "\"'":
            value, i = _quoted(text, i)
            tokens.append(("string", value))
        elif match := _WORD.match(text, i):
            tokens.append(("word", match.group()))
            i = match.end()
        else:
            raise _error(f"unexpected character {char!r} at position {i + 1}")
    return tokens


def parse_jaas(text: str) -> JaasLogin:
    """The one login module of a `sasl.jaas.config`; `SecurityConfigError` says what is wrong."""
    tokens = _tokens(text)
    if not tokens:
        raise _error("no login module is given")
    kind, module = tokens[0]
    if kind != "word":
        raise _error("it must start with the login module's class name")
    if len(tokens) < 2 or tokens[1][0] != "word" or tokens[1][1].lower() not in _FLAGS:
        raise _error(f"the login module needs a control flag ({', '.join(_FLAGS)})")
    flag = tokens[1][1].lower()
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        kind, key = tokens[i]
        if kind != "word":
            raise _error("an option must be key=value")
        if (
            i + 2 >= len(tokens)
            or tokens[i + 1][0] != "="
            or tokens[i + 2][0] not in ("word", "string")
        ):
            raise _error(f"no value is given for {key!r}")
        options[key] = tokens[i + 2][1]
        i += 3
    if i == len(tokens):
        raise _error("the entry does not end with ';'")
    if i + 1 != len(tokens):
        raise _error("it holds more than one login module; give exactly one")
    if module not in (PLAIN_MODULE, SCRAM_MODULE):
        raise _error(f"login module {module} is not supported")
    if options.get("tokenauth", "").lower() == "true":
        raise _error("delegation tokens (tokenauth) are not supported")
    return JaasLogin(
        module=module,
        flag=flag,
        username=options.get("username"),
        password=options.get("password"),
    )
