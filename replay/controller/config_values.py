"""What a config value is: Kafka's config types, range checks, and parsing to canonical text.

A key's definition (`ConfigDef`) names its type, default and range check; `parse_value` turns
the text a client sends into a typed value (or says what is wrong, in Kafka's words), and
`canonical_text` turns it back into the one text that is stored, so ``"01"`` and ``"1"`` are one
value. The keys themselves are in `config_defs`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass

from records.fields import INT32_MAX, INT32_MIN, INT64_MAX
from replay.controller.limits import INT16_MAX

LONG_MAX = INT64_MAX
"""Java's `Long.MAX_VALUE`: the largest LONG value (and Kafka's "no limit" for many keys)."""
_INT_RANGES = {
    "SHORT": (-INT16_MAX - 1, INT16_MAX),
    "INT": (INT32_MIN, INT32_MAX),
    "LONG": (-INT64_MAX - 1, INT64_MAX),
}


class InvalidConfigError(ValueError):
    """An unknown key or a value that does not fit its key (Kafka's INVALID_CONFIG, 40)."""


class ConfigType(enum.Enum):
    """Kafka's ``ConfigDef.Type`` values that the known keys use."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    SHORT = "SHORT"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"


Parsed = bool | int | float | str | tuple[str, ...]
Check = Callable[[Parsed], str | None]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One known key.

    ``check`` returns a reason when a parsed value is out of range. ``synonyms`` are the
    cluster keys that supply a topic key's default, strongest first, each with the factor that
    turns its value into this key's unit (``log.retention.hours`` -> ms is 3,600,000).
    """

    name: str
    type: ConfigType
    default: str | None
    doc: str
    check: Check | None = None
    synonyms: tuple[tuple[str, int], ...] = ()
    read_only: bool = False
    sensitive: bool = False


# ---------------------------------------------------------------------------- checks


def at_least(minimum: float) -> Check:
    """A check refusing numbers below `minimum` (Kafka's `Range.atLeast`)."""

    def check(value: Parsed) -> str | None:
        assert isinstance(value, int | float)
        return None if value >= minimum else f"Value must be at least {_number(minimum)}"

    return check


def between(low: float, high: float) -> Check:
    """A check refusing numbers outside `low`..`high` (Kafka's `Range.between`)."""

    def check(value: Parsed) -> str | None:
        assert isinstance(value, int | float)
        if low <= value <= high:
            return None
        return f"Value must be no less than {_number(low)} and no more than {_number(high)}"

    return check


def one_of(*allowed: str) -> Check:
    """A check refusing a string, or a list item, not in `allowed` (Kafka's `ValidString`)."""

    def check(value: Parsed) -> str | None:
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if item not in allowed:
                return f"String must be one of: {', '.join(allowed)}"
        return None

    return check


def throttled_replicas(value: Parsed) -> str | None:
    """Kafka's ``ThrottledReplicaListValidator``: ``*`` or ``partition:broker`` pairs."""
    assert isinstance(value, tuple)
    if value == ("*",):
        return None
    for item in value:
        partition, sep, broker = item.partition(":")
        if not (sep and partition.strip().isdigit() and broker.strip().isdigit()):
            return (
                "must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )
    return None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


# ---------------------------------------------------------------------------- parsing


def parse_value(definition: ConfigDef, text: str) -> Parsed:
    """Parse and check ``text`` for ``definition``; InvalidConfigError says what is wrong."""

    def invalid(reason: str) -> InvalidConfigError:
        return InvalidConfigError(
            f"Invalid value {text} for configuration {definition.name}: {reason}"
        )

    kind = definition.type
    stripped = text.strip()
    parsed: Parsed
    if kind is ConfigType.BOOLEAN:
        lowered = stripped.lower()
        if lowered not in ("true", "false"):
            raise invalid("Expected value to be either true or false")
        parsed = lowered == "true"
    elif kind.value in _INT_RANGES:
        low, high = _INT_RANGES[kind.value]
        try:
            number = int(stripped)
        except ValueError:
            raise invalid(f"Not a number of type {kind.value}") from None
        if not low <= number <= high:
            raise invalid(f"Not a number of type {kind.value}")
        parsed = number
    elif kind is ConfigType.DOUBLE:
        try:
            real = float(stripped)
        except ValueError:
            raise invalid("Not a number of type DOUBLE") from None
        if not math.isfinite(real):
            raise invalid("Not a number of type DOUBLE")
        parsed = real
    elif kind is ConfigType.LIST:
        parsed = tuple(item.strip() for item in stripped.split(",")) if stripped else ()
        if any(not item for item in parsed):
            raise invalid("a list item is empty; separate items with single commas")
    else:
        parsed = stripped
    if definition.check is not None:
        reason = definition.check(parsed)
        if reason is not None:
            raise invalid(reason)
    return parsed


def canonical_text(definition: ConfigDef, text: str) -> str:
    """The one text stored for `text` under `definition`; InvalidConfigError if it does not fit."""
    parsed = parse_value(definition, text)
    if isinstance(parsed, bool):
        return "true" if parsed else "false"
    if isinstance(parsed, tuple):
        return ",".join(parsed)
    if isinstance(parsed, float):
        return repr(parsed)
    return str(parsed)
