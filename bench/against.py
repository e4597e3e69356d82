"""`--against TREE`: a benchmark of this checkout beside another one, measured in one run.

The baseline is another checkout of this code at the same API (say the commit before:
`git worktree add /tmp/prev HEAD~1`, with its compiled decoder copied or built in place). Each
measurement runs in a child process per checkout, with that checkout's code first on the path
(`MLOG_BENCH_CODE` for the benchmark script itself, `PYTHONPATH` for the processes it starts);
the two take turns, the first place alternating between rounds so that neither always meets
a warmer cache, and the host's drift falls on both alike. The table shows each checkout's
median figure and the median of the per-round ratios (this / baseline, run next to each
other): fsync latency and CPU speed on this machine drift by +-30% between runs, so unpaired
figures are not comparable.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

THIS = Path(__file__).resolve().parents[1]
"""The checkout this benchmark script belongs to."""

CODE_VARIABLE = "MLOG_BENCH_CODE"
"""Set by a parent `--against` run: the checkout whose code a child measures."""

_T = TypeVar("_T")


def measured_code() -> Path:
    """The checkout whose code this process measures: this one, or the one its parent names."""
    return Path(os.environ.get(CODE_VARIABLE) or THIS)


def code_env(tree: Path) -> dict[str, str]:
    """The environment of a process that runs `tree`'s code, and passes it on to its children."""
    return {**os.environ, CODE_VARIABLE: str(tree), "PYTHONPATH": str(tree)}


def run_child(script: str | Path, argv: Sequence[str], tree: Path) -> Any:
    """Run `script argv` with `tree`'s code; what it printed as JSON on its last stdout line."""
    result = subprocess.run(
        [sys.executable, str(script), *argv],
        env=code_env(tree),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} with {tree} failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def paired(
    round_: int, other: Path, measure: Callable[[Path], _T], *, this: Path = THIS
) -> tuple[_T, _T]:
    """One round: (this, baseline) of `measure(tree)`, the even rounds starting with this one."""
    order = [(this, 0), (other, 1)] if round_ % 2 == 0 else [(other, 1), (this, 0)]
    got: dict[int, _T] = {}
    for tree, slot in order:
        got[slot] = measure(tree)
    return got[0], got[1]


def alternate(
    rounds: int, other: Path, measure: Callable[[Path], _T], *, this: Path = THIS
) -> list[tuple[_T, _T]]:
    """`rounds` pairs (this, baseline) of `measure(tree)`, taking turns at going first."""
    return [paired(round_, other, measure, this=this) for round_ in range(rounds)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """One figure of the comparison: its (this, baseline) value in each round."""

    label: str
    pairs: list[tuple[float, float]]
    unit: str = "/s"
    """The figure's unit; a rate (higher is better) unless `lower_is_better`."""
    lower_is_better: bool = False


def print_table(rows: Sequence[Figure], *, other: Path, this: Path = THIS) -> None:
    """Each figure's medians for this checkout and the baseline, the median ratio, its spread."""
    rounds = max((len(r.pairs) for r in rows), default=0)
    print(f"this:     {this}\nbaseline: {other}\nmedian of {rounds} paired rounds")
    width = max((len(r.label) for r in rows), default=10) + 2
    header = f"{'figure':<{width}}{'this':>14}{'baseline':>14}{'ratio':>8}{'spread':>15}"
    print(header)
    print("-" * len(header))
    for row in rows:
        ours = statistics.median(t for t, _ in row.pairs)
        base = statistics.median(b for _, b in row.pairs)
        ratios = [t / b for t, b in row.pairs if b]
        ratio = statistics.median(ratios) if ratios else float("nan")
        spread = f"{min(ratios):.3f}-{max(ratios):.3f}" if ratios else "-"
        print(
            f"{row.label:<{width}}{_figure(ours, row.unit):>14}{_figure(base, row.unit):>14}"
            f"{ratio:>8.3f}{spread:>15}{'  (lower is better)' if row.lower_is_better else ''}"
        )
    print(
        "ratio: median over rounds of (this / baseline, measured next to each other); "
        "spread: the lowest and highest round's"
    )


def print_columns(rows: Sequence[Sequence[str]]) -> None:
    """Rows of text cells (the first a header, or not), each column padded to its widest."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


def _figure(value: float, unit: str) -> str:
    digits = 0 if abs(value) >= 100 else 2
    return f"{value:,.{digits}f} {unit}"


def reader_opener() -> Callable[[Path], Any]:
    """How the checkout measured opens a lock-free reader of a log directory.

    A checkout from before the log was split by role has no `LogReader`; it opens its readers
    with `MetadataLog.open(..., read_only=True)`. Call it once at import, after the measured
    code is on the path, so that the import is not timed with the first open.
    """
    try:
        from metadata_log.reader import LogReader
    except ImportError:
        from metadata_log import MetadataLog

        def open_old(directory: Path) -> Any:
            return MetadataLog.open(directory, read_only=True)  # type: ignore[call-arg,unused-ignore]

        return open_old
    return LogReader.open
