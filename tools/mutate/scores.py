"""The score table of tools/mutate/README.md, one row per module, written by the runner.

A whole-module run (`make mutate`, with or without `AGAIN=1`; not `--since`) gives the row's
mutants, caught and raw score. The non-equivalent score is a judgement (which survivors
behave the same for every input), so it is kept from the row before only while the counts
are unchanged; otherwise it reads *to judge*.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).resolve().parent / "README.md"
"""The file whose score table the runner keeps."""

HEADER = "| module | scope | mutants | caught | raw | non-equivalent |"
TO_JUDGE = "*to judge*"
_ROW = re.compile(
    r"^\| `(?P<module>[^`]+)` \| (?P<scope>[^|]*?) \| (?P<mutants>\d+) \| (?P<caught>\d+) \|"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One module's latest whole-module score."""

    module: str
    mutants: int
    caught: int

    @property
    def raw(self) -> str:
        """Caught / mutants, as the table prints it."""
        return f"{100 * self.caught / self.mutants:.1f}%" if self.mutants else "—"


def updated(text: str, row: Row) -> str:
    """`text` with the score table's row of `row.module` replaced (or added, in module order).

    Raises ValueError if `text` has no score table.
    """
    lines = text.splitlines()
    try:
        start = lines.index(HEADER)
    except ValueError:
        raise ValueError(f"no score table (a line {HEADER!r}) to update") from None
    end = start + 2
    while end < len(lines) and lines[end].startswith("| `"):
        end += 1
    judged = TO_JUDGE
    rows = lines[start + 2 : end]
    kept = []
    for line in rows:
        match = _ROW.match(line)
        if match is None or match["module"] != row.module or match["scope"].strip() != "whole":
            kept.append(line)
            continue
        if (int(match["mutants"]), int(match["caught"])) == (row.mutants, row.caught):
            judged = line.rstrip(" |").rsplit("|", 1)[1].strip()
    if row.caught == row.mutants:
        judged = "**100.0%**"
    new = f"| `{row.module}` | whole | {row.mutants} | {row.caught} | {row.raw} | {judged} |"
    kept.append(new)
    kept.sort(key=_module_order)
    return "\n".join([*lines[: start + 2], *kept, *lines[end:]]) + "\n"


def _module_order(line: str) -> int:
    """Rows grouped by package in the table's order (a stable sort keeps the rest as written)."""
    match = _ROW.match(line)
    module = match["module"] if match else line
    packages = ("records/", "metadata_log/", "api/", "replay/")
    return next((i for i, p in enumerate(packages) if module.startswith(p)), len(packages))


def record(row: Row, table: Path = TABLE) -> None:
    """Write a whole-module run's score into the table (its module's row)."""
    table.write_text(updated(table.read_text(), row))
