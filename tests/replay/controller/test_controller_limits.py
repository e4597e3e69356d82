"""The field limits every command checks before it makes a record (replay/controller/limits.py)."""

from __future__ import annotations

import pytest

from records.fields import INT32_MAX, INT32_MIN, INT64_MAX
from replay.controller.errors import ApiError, ErrorCode
from replay.controller.limits import (
    INT16_MAX,
    MAX_ECHO,
    MAX_LABEL_LENGTH,
    check_int,
    check_label,
    check_text,
    clip,
    echo,
)


def test_the_bounds_are_the_wire_formats() -> None:
    """Kafka's int16 (replication factor), Avro's int and long: one past each is refused."""
    assert (INT16_MAX, INT32_MIN, INT32_MAX, INT64_MAX) == (
        32_767,
        -2_147_483_648,
        2_147_483_647,
        9_223_372_036_854_775_807,
    )
    assert MAX_LABEL_LENGTH == 255
    assert MAX_ECHO == 60


def test_a_short_value_is_quoted_whole_and_a_long_one_is_cut() -> None:
    exact = "x" * (MAX_ECHO - 2)  # repr adds the quotes: exactly MAX_ECHO characters
    assert clip(exact) == repr(exact)
    longer = "x" * (MAX_ECHO - 1)
    assert clip(longer) == repr(longer)[:MAX_ECHO] + f"... ({MAX_ECHO - 1} characters)"
    assert clip(list(range(100))).endswith(f"... ({len(repr(list(range(100))))} characters)")
    assert clip(5) == "5"


def test_a_clients_string_is_logged_as_is_only_when_printable_and_short() -> None:
    """`echo` (the ACL and credential handlers' log lines): a printable string of up to
    MAX_ECHO characters as is, anything else as `clip` quotes it."""
    exact = "u" * MAX_ECHO
    assert echo(exact) == exact
    assert echo("") == ""
    longer = "u" * (MAX_ECHO + 1)
    assert echo(longer) == clip(longer) != longer
    assert echo("User:al\nice") == repr("User:al\nice")
    assert echo("\x1b[2J") == repr("\x1b[2J")


def _refusal(call: object, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> str:
    assert callable(call)
    with pytest.raises(ApiError) as info:
        call()
    assert info.value.error_code == code
    assert str(info.value) == f"{code.name} ({int(code)}): {info.value.message}"
    return info.value.message


@pytest.mark.parametrize("value", [1, 3])
def test_check_int_takes_both_ends_of_its_range(value: int) -> None:
    check_int(value, what="n", low=1, high=3, code=ErrorCode.INVALID_PARTITIONS)


@pytest.mark.parametrize("value", [0, 4, -(2**70), 2**70])
def test_check_int_refuses_outside_its_range(value: int) -> None:
    message = _refusal(
        lambda: check_int(value, what="n", low=1, high=3, code=ErrorCode.INVALID_PARTITIONS),
        ErrorCode.INVALID_PARTITIONS,
    )
    assert message.startswith("n must be in 1..3, got")


@pytest.mark.parametrize("value", [True, False, 1.0, "1", None])
def test_check_int_refuses_what_is_not_an_int(value: object) -> None:
    message = _refusal(
        lambda: check_int(value, what="n", low=0, high=3, code=ErrorCode.INVALID_REQUEST)  # type: ignore[arg-type]
    )
    assert message == f"n must be an integer, got {value!r}"


def test_check_text_refuses_a_non_string_and_a_lone_surrogate() -> None:
    check_text("héllo ✓", what="name")
    assert _refusal(lambda: check_text(5, what="name")) == "name must be a string, got 5"  # type: ignore[arg-type]
    message = _refusal(
        lambda: check_text("a\udc80", what="name", code=ErrorCode.INVALID_CONFIG),
        ErrorCode.INVALID_CONFIG,
    )
    assert "is not valid Unicode text" in message


def test_check_label_refuses_empty_long_and_control_characters() -> None:
    check_label("r" * MAX_LABEL_LENGTH, what="rack")
    check_label("rack-1 é", what="rack")
    assert _refusal(lambda: check_label("", what="rack")) == "rack cannot be empty"
    assert _refusal(lambda: check_label("  ", what="rack")) == "rack cannot be empty"
    message = _refusal(lambda: check_label("r" * (MAX_LABEL_LENGTH + 1), what="rack"))
    assert message.endswith(f"is longer than {MAX_LABEL_LENGTH} characters")
    message = _refusal(lambda: check_label("abcd", what="host", max_length=3))
    assert message == "host 'abcd' is longer than 3 characters"
    check_label("abc", what="host", max_length=3)
    for bad, code in (
        ("a\nb", "000A"),
        ("a\x00", "0000"),
        ("a\u200eb", "200E"),
        ("a\u2028b", "2028"),
    ):
        message = _refusal(lambda bad=bad: check_label(bad, what="rack"))
        assert f"control character U+{code}" in message
    _refusal(lambda: check_label(7, what="rack"))  # type: ignore[arg-type]
    _refusal(
        lambda: check_label("", what="rack", code=ErrorCode.INVALID_CONFIG),
        ErrorCode.INVALID_CONFIG,
    )
