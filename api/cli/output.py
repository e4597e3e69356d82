"""How `mlog` prints: tables, one-line answers (or their JSON form), times and id lists."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from api.service.settings import Settings


def format_time(ms: int) -> str:
    """A log timestamp (ms since the epoch) as ISO-8601 UTC with milliseconds."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def display_width(text: str) -> int:
    """The columns `text` takes on a terminal: wide (CJK) characters take two, marks none."""
    width = 0
    for char in text:
        if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def print_table(rows: Sequence[Sequence[object]], headers: Sequence[str], out: TextIO) -> None:
    """Print rows as left-aligned columns under a header line (aligned by display width)."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(display_width(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        padded = (c + " " * (w - display_width(c)) for c, w in zip(row, widths, strict=True))
        out.write("  ".join(padded).rstrip() + "\n")


def emit(settings: Settings, out: TextIO, data: Any, text: str) -> None:
    """Print a command's answer: `text` for a person, or `data` as one JSON line (--output json)."""
    if settings.output == "json":
        out.write(json.dumps(data, separators=(",", ":")) + "\n")
    else:
        out.write(text + "\n")


def ints(values: Iterable[int]) -> str:
    """Broker or partition ids as `1,2,3`."""
    return ",".join(str(v) for v in values)
