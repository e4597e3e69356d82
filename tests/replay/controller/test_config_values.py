"""Config values: Kafka's types at their bounds, its range checks, and the one stored text."""

from __future__ import annotations

import pytest

from replay.controller.config_values import (
    LONG_MAX,
    ConfigDef,
    ConfigType,
    InvalidConfigError,
    at_least,
    between,
    canonical_text,
    one_of,
    parse_value,
    throttled_replicas,
)


def _def(kind: ConfigType, **kwargs: object) -> ConfigDef:
    return ConfigDef(name="k", type=kind, default=None, doc="A key.", **kwargs)  # type: ignore[arg-type]


def _refused(definition: ConfigDef, text: str) -> str:
    with pytest.raises(InvalidConfigError) as info:
        parse_value(definition, text)
    message = str(info.value)
    assert message.startswith(f"Invalid value {text} for configuration k: ")
    return message.removeprefix(f"Invalid value {text} for configuration k: ")


@pytest.mark.parametrize(
    ("kind", "low", "high"),
    [
        (ConfigType.SHORT, -(2**15), 2**15 - 1),
        (ConfigType.INT, -(2**31), 2**31 - 1),
        (ConfigType.LONG, -(2**63), 2**63 - 1),
    ],
)
def test_integer_types_hold_exactly_javas_range(kind: ConfigType, low: int, high: int) -> None:
    definition = _def(kind)
    assert parse_value(definition, str(low)) == low
    assert parse_value(definition, f" {high} ") == high
    assert canonical_text(definition, "+0007") == "7"
    for outside in (low - 1, high + 1):
        assert _refused(definition, str(outside)) == f"Not a number of type {kind.value}"
    assert _refused(definition, "1.5") == f"Not a number of type {kind.value}"
    assert _refused(definition, "") == f"Not a number of type {kind.value}"


def test_long_max_is_javas() -> None:
    assert LONG_MAX == 2**63 - 1


def test_booleans_are_true_or_false_in_any_case() -> None:
    definition = _def(ConfigType.BOOLEAN)
    assert parse_value(definition, " TRUE ") is True
    assert parse_value(definition, "False") is False
    assert canonical_text(definition, "True") == "true"
    assert canonical_text(definition, "FALSE") == "false"
    for bad in ("yes", "1", "", "truee"):
        assert _refused(definition, bad) == "Expected value to be either true or false"


def test_doubles_are_finite() -> None:
    definition = _def(ConfigType.DOUBLE)
    assert parse_value(definition, "0.5") == 0.5
    assert canonical_text(definition, "1") == "1.0"
    assert canonical_text(definition, " 2.50 ") == "2.5"
    for bad in ("x", "nan", "inf", "-Infinity", "1e400"):
        assert _refused(definition, bad) == "Not a number of type DOUBLE"


def test_lists_are_comma_separated_and_items_trimmed() -> None:
    definition = _def(ConfigType.LIST)
    assert parse_value(definition, "") == ()
    assert parse_value(definition, "   ") == ()
    assert parse_value(definition, " a , b,c ") == ("a", "b", "c")
    assert canonical_text(definition, " a , b ") == "a,b"
    for bad in ("a,,b", "a,", ",a", "a, ,b"):
        assert _refused(definition, bad).startswith("a list item is empty")


def test_strings_are_stored_trimmed() -> None:
    definition = _def(ConfigType.STRING)
    assert parse_value(definition, "  delete ") == "delete"
    assert canonical_text(definition, "x") == "x"


def test_at_least_is_inclusive() -> None:
    definition = _def(ConfigType.INT, check=at_least(1))
    assert parse_value(definition, "1") == 1
    assert _refused(definition, "0") == "Value must be at least 1"
    real = _def(ConfigType.DOUBLE, check=at_least(0.5))
    assert parse_value(real, "0.5") == 0.5
    assert _refused(real, "0.25") == "Value must be at least 0.5"


def test_between_is_inclusive_at_both_ends() -> None:
    definition = _def(ConfigType.DOUBLE, check=between(0, 1))
    assert parse_value(definition, "0") == 0.0
    assert parse_value(definition, "1") == 1.0
    for bad in ("-0.001", "1.001"):
        assert _refused(definition, bad) == "Value must be no less than 0 and no more than 1"
    halves = _def(ConfigType.DOUBLE, check=between(0.5, 1.5))
    assert _refused(halves, "2") == "Value must be no less than 0.5 and no more than 1.5"


def test_one_of_checks_a_string_or_every_list_item() -> None:
    single = _def(ConfigType.STRING, check=one_of("delete", "compact"))
    assert parse_value(single, "compact") == "compact"
    assert _refused(single, "Delete") == "String must be one of: delete, compact"
    listed = _def(ConfigType.LIST, check=one_of("delete", "compact"))
    assert parse_value(listed, "delete,compact") == ("delete", "compact")
    assert _refused(listed, "delete,x") == "String must be one of: delete, compact"
    assert _refused(listed, "x,delete") == "String must be one of: delete, compact"


def test_throttled_replicas_are_a_star_or_partition_broker_pairs() -> None:
    definition = _def(ConfigType.LIST, check=throttled_replicas)
    assert parse_value(definition, "*") == ("*",)
    assert parse_value(definition, "0:1, 1:2") == ("0:1", "1:2")
    assert parse_value(definition, "") == ()
    for bad in ("*,0:1", "0", "0:", ":1", "a:1", "0:b", "0-1", "0:1:2"):
        assert _refused(definition, bad).startswith("must be the literal '*'"), bad
    assert throttled_replicas(("0:1",)) is None


def test_a_key_is_writable_and_shown_unless_defined_otherwise() -> None:
    definition = _def(ConfigType.STRING)
    assert (definition.read_only, definition.sensitive, definition.synonyms) == (False, False, ())
    assert definition.check is None
