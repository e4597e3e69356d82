"""The charts' SVG: bounded, and every text escaped."""

from __future__ import annotations

import pytest

from api.console import svg
from tests.support.console import HOSTILE


def test_labels_and_names_are_escaped() -> None:
    series = [svg.Series(name=HOSTILE, values=[1, 2])]
    for drawn in (
        svg.stacked_bars(HOSTILE, [HOSTILE, "b"], series),
        svg.lines(HOSTILE, [HOSTILE, "b"], series),
        svg.legend(series),
    ):
        assert "<script>" not in drawn and "<img" not in drawn
        assert "&lt;script&gt;" in drawn
        assert "style=" not in drawn  # the pages' policy allows no inline style


def test_bars_stack_to_the_tallest_total() -> None:
    drawn = svg.stacked_bars("t", ["a", "b"], [svg.Series(name="x", values=[1, 3])])
    assert drawn.count("<rect") == 2
    assert ">3</text>" in drawn  # the axis' top is the largest total


def test_a_chart_refuses_more_points_or_series_than_its_bound() -> None:
    with pytest.raises(ValueError, match="at most"):
        svg.lines("t", ["x"] * (svg.MAX_POINTS + 1), [])
    many = [svg.Series(name=str(n), values=[1]) for n in range(svg.MAX_SERIES + 1)]
    with pytest.raises(ValueError, match="at most"):
        svg.lines("t", ["x"], many)
    with pytest.raises(ValueError, match="has 1 values for 2"):
        svg.lines("t", ["x", "y"], [svg.Series(name="s", values=[1])])
