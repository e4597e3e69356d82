"""The principal of a TLS client certificate: its subject DN (RFC 2253) and Kafka's mapping rules.

`subject_dn` writes a certificate's subject as Java's `X500Principal.getName()` does (the last
RDN first, RFC 2253 keywords, backslash escapes), which is what Kafka's
`ssl.principal.mapping.rules` are written against. `PrincipalMapper` applies those rules:
`DEFAULT` (the DN itself) and `RULE:pattern/replacement/` with an optional `L` or `U` suffix;
the first rule whose pattern matches the whole DN gives the user name.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from api.security.errors import SecurityConfigError, SecurityError

ANONYMOUS = "User:ANONYMOUS"
"""The principal of a connection that has not authenticated."""

DEFAULT_RULES = "DEFAULT"
"""Kafka's default `ssl.principal.mapping.rules`."""

_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
"""Python's attribute names of the RFC 2253 keywords Java writes by name."""

_OIDS = {
    "emailAddress": "1.2.840.113549.1.9.1",
    "serialNumber": "2.5.4.5",
    "surname": "2.5.4.4",
    "title": "2.5.4.12",
    "description": "2.5.4.13",
    "businessCategory": "2.5.4.15",
    "postalCode": "2.5.4.17",
    "name": "2.5.4.41",
    "givenName": "2.5.4.42",
    "initials": "2.5.4.43",
    "generationQualifier": "2.5.4.44",
    "dnQualifier": "2.5.4.46",
    "pseudonym": "2.5.4.65",
    "organizationIdentifier": "2.5.4.97",
}
"""OIDs of the other attributes a certificate's subject commonly holds."""

_STRING_TAGS = {"1.2.840.113549.1.9.1": 0x16, "2.5.4.5": 0x13, "2.5.4.46": 0x13}
"""The DER string type of an attribute written as `#hex`: IA5String for e-mail addresses and
PrintableString for serial numbers and DN qualifiers (what RFC 5280 prescribes); UTF8String
for the rest. `getpeercert()` gives the decoded text only, so this is the type a conforming
certificate uses."""

_UTF8_STRING = 0x0C
_ESCAPED = frozenset(',=+<>#;"\\')
_JAVA_SPACE = " \t\n\x0b\f\r"
"""Java's `\\s`, what Kafka allows around the rules."""


class NoMatchingRule(SecurityError):
    """No `ssl.principal.mapping.rules` rule matches a client certificate's DN."""


def _oid(name: str) -> str:
    if re.fullmatch(r"\d+(\.\d+)+", name):
        return name
    if name in _OIDS:
        return _OIDS[name]
    try:
        # The standard library's OID table (OpenSSL's); private but present since Python 3.4.
        return str(ssl._ASN1Object.fromname(name).oid)
    except ValueError:
        raise SecurityError(
            f"the certificate's subject has an attribute of unknown type {name!r}"
        ) from None


def _der_length(length: int) -> bytes:
    if length < 0x80:
        return bytes([length])
    size = (length.bit_length() + 7) // 8
    return bytes([0x80 | size]) + length.to_bytes(size, "big")


def _escape(value: str) -> str:
    """A value escaped as Java's `AVA.toRFC2253String` does (leading and trailing blanks too)."""
    out = "".join("\\" + c if c in _ESCAPED else c for c in value)
    lead = len(out) - len(out.lstrip(" \r"))
    trail = len(out.rstrip(" \r"))
    return "".join("\\" + c if i < lead or i >= trail else c for i, c in enumerate(out))


def _attribute(name: str, value: str) -> str:
    keyword = _KEYWORDS.get(name)
    if keyword is not None:
        return f"{keyword}={_escape(value)}"
    oid = _oid(name)
    data = value.encode("utf-8")
    tag = _STRING_TAGS.get(oid, _UTF8_STRING)
    return f"{oid}=#{bytes([tag]).hex()}{_der_length(len(data)).hex()}{data.hex()}"


def subject_dn(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """A subject (`getpeercert()["subject"]`: RDNs, each of (name, value) pairs) in RFC 2253.

    As Java's `X500Principal.getName()`: the RDNs in reverse order joined by `,`, the values of
    a multi-valued RDN joined by `+`, RFC 2253 keywords by name and other attributes as
    `OID=#hex` of their DER encoding.
    """
    return ",".join(
        "+".join(_attribute(name, value) for name, value in rdn) for rdn in reversed(subject)
    )


# --------------------------------------------------------------------------- mapping rules


def _java_pattern(pattern: str) -> str:
    """A Java regular expression for Python's `re`: `(?<name>` is spelled `(?P<name>`."""
    return re.sub(r"(?<!\\)\(\?<(?=[A-Za-z])", "(?P<", pattern)


def _java_replacement(replacement: str, pattern: re.Pattern[str]) -> Callable[[re.Match[str]], str]:
    r"""A replacement as Kafka's rule gives it to Java's `replaceAll`: `$n`, `${name}`, `\x`.

    As in Kafka, a reference to a group the pattern lacks is literal text (`$4` with three
    groups is "$4"), and `$12` is group 12 if there are 12 groups, else group 1 and a "2".
    ValueError for a `$` that is not a reference and an unknown group name.
    """
    pieces: list[str | int] = []
    i, end, groups = 0, len(replacement), pattern.groups
    while i < end:
        char = replacement[i]
        i += 1
        if char == "\\":
            if i == end:
                raise ValueError("the replacement ends in a lone backslash")
            pieces.append(replacement[i])
            i += 1
        elif char != "$":
            pieces.append(char)
        elif named := re.match(r"\{([A-Za-z][A-Za-z0-9]*)\}", replacement[i:]):
            if named.group(1) not in pattern.groupindex:
                raise ValueError(f"the pattern has no group named {named.group(1)!r}")
            pieces.append(pattern.groupindex[named.group(1)])
            i += named.end()
        elif i < end and replacement[i] in "0123456789":
            number = int(replacement[i])
            if number > groups:
                pieces.append("$")  # Kafka escapes a reference to a missing group
                continue
            i += 1
            while i < end and replacement[i] in "0123456789":
                longer = number * 10 + int(replacement[i])
                if longer > groups:
                    break
                number, i = longer, i + 1
            pieces.append(number)
        else:
            raise ValueError("'$' must be followed by a group number or {name} (write \\$)")

    def expand(match: re.Match[str]) -> str:
        return "".join(
            piece if isinstance(piece, str) else (match.group(piece) or "") for piece in pieces
        )

    return expand


@dataclass(frozen=True, slots=True)
class Rule:
    """One mapping rule: DEFAULT (`pattern` None) or `RULE:pattern/replacement/` with a case."""

    text: str
    pattern: re.Pattern[str] | None
    replace: Callable[[re.Match[str]], str] | None
    case: str
    """`L` (lower case), `U` (upper case) or empty."""

    def apply(self, dn: str) -> str | None:
        """The user name this rule gives a DN, or None if its pattern does not match it all."""
        if self.pattern is None or self.replace is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        # Java's replaceAll over the whole DN: a pattern like `.*` also matches the empty end.
        result = self.pattern.sub(self.replace, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _scan_part(text: str, start: int) -> int:
    """The index of the unescaped `/` ending a rule's pattern or replacement; -1 if none."""
    i = start
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == "/":
            return i
        else:
            i += 1
    return -1


def _invalid(rules: str, at: int, why: str) -> SecurityConfigError:
    return SecurityConfigError(
        f"ssl.principal.mapping.rules is invalid at character {at + 1} ({why}); write rules "
        "as DEFAULT or RULE:pattern/replacement/ with an optional L or U, separated by commas"
    )


def parse_rules(rules: str) -> tuple[Rule, ...]:
    """Kafka's `ssl.principal.mapping.rules`; `SecurityConfigError` says where it is wrong.

    Rules are separated by commas (a rule's pattern and replacement may hold commas), blanks
    around them and empty ones are ignored. No rule at all means DEFAULT.
    """
    found: list[Rule] = []
    i, end = 0, len(rules)
    while True:
        while i < end and (rules[i] in _JAVA_SPACE or rules[i] == ","):
            i += 1
        if i == end:
            break
        if rules.startswith("DEFAULT", i):
            found.append(Rule("DEFAULT", None, None, ""))
            i += len("DEFAULT")
        elif rules.startswith("RULE:", i):
            start = i + len("RULE:")
            middle = _scan_part(rules, start)
            if middle < 0:
                raise _invalid(rules, i, "a RULE needs pattern/replacement/")
            last = _scan_part(rules, middle + 1)
            if last < 0:
                raise _invalid(rules, i, "a RULE's replacement must end with '/'")
            pattern_text, replacement = rules[start:middle], rules[middle + 1 : last]
            i = last + 1
            case = rules[i] if i < end and rules[i] in "LU" else ""
            i += len(case)
            try:
                pattern = re.compile(_java_pattern(pattern_text))
                replace = _java_replacement(replacement, pattern)
            except (re.error, ValueError) as exc:
                raise _invalid(rules, start, f"pattern {pattern_text!r}: {exc}") from None
            text = f"RULE:{pattern_text}/{replacement}/{case}"
            found.append(Rule(text, pattern, replace, case))
        else:
            raise _invalid(rules, i, "expected DEFAULT or RULE:")
        while i < end and rules[i] in _JAVA_SPACE:
            i += 1
        if i < end and rules[i] != ",":
            raise _invalid(rules, i, "expected ',' or the end after a rule")
    return tuple(found) or (Rule("DEFAULT", None, None, ""),)


class PrincipalMapper:
    """Kafka's `SslPrincipalMapper`: a certificate DN to a user name by the first matching rule."""

    def __init__(self, rules: str = DEFAULT_RULES) -> None:
        self.rules = parse_rules(rules)

    def name(self, dn: str) -> str:
        """The user name of a DN; `NoMatchingRule` if no rule matches it."""
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        shown = ", ".join(rule.text for rule in self.rules)
        raise NoMatchingRule(
            f"no ssl.principal.mapping.rules rule applies to the certificate DN {dn!r} "
            f"(rules: {shown}); add a rule for it or end the rules with DEFAULT"
        )

    def principal(self, subject: Sequence[Sequence[tuple[str, str]]]) -> str:
        """`User:<name>` of a `getpeercert()` subject."""
        return "User:" + self.name(subject_dn(subject))

    def peer_principal(self, peercert: Mapping[str, Any] | None) -> str:
        """The principal of a TLS peer: `getpeercert()`'s subject, `User:ANONYMOUS` without one.

        As Kafka: a client that sent no certificate (`ssl.client.auth=none` or `requested`)
        is ANONYMOUS.
        """
        if not peercert or not peercert.get("subject"):
            return ANONYMOUS
        return self.principal(peercert["subject"])
