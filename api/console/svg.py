"""Charts as inline SVG, built on the server: stacked bars and lines, every text escaped.

The console's pages run no script and load nothing from elsewhere (its Content-Security-Policy
forbids both), so a chart is markup in the page: rectangles, polylines and text elements
with presentation attributes and classes of the console's stylesheet (no `style` attribute:
the policy allows no inline style). Every label, series name and value goes through
`markupsafe.escape`; the numbers are written by this module, never taken as markup. A chart
has at most `MAX_POINTS` points per series and `MAX_SERIES` series (the callers fold the
rest into "other"), so its size is bounded whatever the log holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from markupsafe import Markup, escape

MAX_POINTS = 500
"""The most points (bars or line vertices) one series may have."""

MAX_SERIES = 9
"""The most series one chart draws (each has a colour class `s0`..`s8`)."""

WIDTH, HEIGHT = 760, 220
"""The drawing's size in SVG units (it scales with the page)."""

_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 12, 12, 36
"""Margins: room for the axis labels."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Series:
    """One named series of values, one per label of the chart."""

    name: str
    values: Sequence[int | float]


def _check(labels: Sequence[str], series: Sequence[Series]) -> None:
    if len(labels) > MAX_POINTS:
        raise ValueError(f"a chart takes at most {MAX_POINTS} points, not {len(labels)}")
    if len(series) > MAX_SERIES:
        raise ValueError(f"a chart takes at most {MAX_SERIES} series, not {len(series)}")
    for one in series:
        if len(one.values) != len(labels):
            raise ValueError(f"series {one.name!r} has {len(one.values)} values for {len(labels)}")


def _number(value: float) -> str:
    """A value as an axis label: an integer without decimals, else one decimal."""
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _frame(title: str, top: float, labels: Sequence[str]) -> list[str]:
    """The chart's opening tag, title, axes, the top value and the first and last labels."""
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<line class="axis" x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + plot_h}"/>',
        f'<line class="axis" x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_LEFT + plot_w}" '
        f'y2="{_TOP + plot_h}"/>',
        f'<text class="tick" x="{_LEFT - 6}" y="{_TOP + 10}" text-anchor="end">'
        f"{escape(_number(top))}</text>",
        f'<text class="tick" x="{_LEFT - 6}" y="{_TOP + plot_h}" text-anchor="end">0</text>',
    ]
    if labels:
        base = _TOP + plot_h + 16
        parts.append(f'<text class="tick" x="{_LEFT}" y="{base}">{escape(labels[0])}</text>')
        if len(labels) > 1:
            parts.append(
                f'<text class="tick" x="{_LEFT + plot_w}" y="{base}" text-anchor="end">'
                f"{escape(labels[-1])}</text>"
            )
    return parts


def stacked_bars(title: str, labels: Sequence[str], series: Sequence[Series]) -> Markup:
    """Bars, one per label, each stacked from the series' values (counts, not negative)."""
    _check(labels, series)
    totals = [sum(one.values[i] for one in series) for i in range(len(labels))]
    top = max(totals, default=0) or 1
    parts = _frame(title, top, labels)
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    step = plot_w / max(len(labels), 1)
    width = min(max(step * 0.8, 1.0), 48.0)
    for i, label in enumerate(labels):
        base: float = _TOP + plot_h
        for number, one in enumerate(series):
            value = one.values[i]
            if value <= 0:
                continue
            height = plot_h * value / top
            base -= height
            tip = f"{label} {one.name}: {_number(value)}"
            parts.append(
                f'<rect class="s{number}" x="{_LEFT + i * step:.1f}" y="{base:.1f}" '
                f'width="{width:.1f}" height="{height:.1f}"><title>{escape(tip)}</title></rect>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def lines(title: str, labels: Sequence[str], series: Sequence[Series]) -> Markup:
    """One polyline per series over the labels (values not negative)."""
    _check(labels, series)
    top = max((v for one in series for v in one.values), default=0) or 1
    parts = _frame(title, top, labels)
    plot_w, plot_h = WIDTH - _LEFT - _RIGHT, HEIGHT - _TOP - _BOTTOM
    step = plot_w / max(len(labels) - 1, 1)
    for number, one in enumerate(series):
        xy = [
            (_LEFT + i * step, _TOP + plot_h - plot_h * v / top) for i, v in enumerate(one.values)
        ]
        points = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
        parts.append(
            f'<polyline class="line s{number}" fill="none" points="{points}">'
            f"<title>{escape(one.name)}</title></polyline>"
        )
        # A dot per value: one value draws no line, and the dots carry the numbers.
        for (x, y), label, value in zip(xy, labels, one.values, strict=True):
            tip = f"{label} {one.name}: {_number(value)}"
            parts.append(
                f'<circle class="s{number}" cx="{x:.1f}" cy="{y:.1f}" r="3">'
                f"<title>{escape(tip)}</title></circle>"
            )
    parts.append("</svg>")
    return Markup("".join(parts))


def legend(series: Sequence[Series]) -> Markup:
    """The series' names beside their colours, as an HTML list."""
    items = "".join(
        f'<li><span class="swatch s{number}"></span>{escape(one.name)}</li>'
        for number, one in enumerate(series)
    )
    return Markup(f'<ul class="legend">{items}</ul>')
