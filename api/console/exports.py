"""The timeline's filtered rows as CSV and JSON, for auditors' own tools.

A cell that a spreadsheet would take for a formula (it starts with `=`, `+`, `-`, `@`, a tab
or a carriage return) is written with a leading `'`, so a hostile topic name or config value
cannot run in the auditor's spreadsheet (OWASP's CSV injection advice); JSON keeps values
as they are.
"""

from __future__ import annotations

import csv
import io
import json

from api.console.timeline import Page, Row

COLUMNS = ("offset", "time", "timestamp", "principal", "client", "entity_kind", "entity")
COLUMNS_ALL = (*COLUMNS, "kind", "change")

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _cell(value: object) -> object:
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def _values(row: Row) -> list[object]:
    return [
        row.offset,
        row.time,
        row.timestamp,
        row.principal or "",
        row.client or "",
        row.entity_kind,
        row.entity,
        row.kind,
        row.text,
    ]


def to_csv(page: Page) -> str:
    """The page's rows as CSV with a header line."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(COLUMNS_ALL)
    for row in page.rows:
        writer.writerow([_cell(v) for v in _values(row)])
    return out.getvalue()


def to_json(page: Page) -> str:
    """The page's rows as a JSON object: the rows, and the cursor of the rest."""
    rows = [dict(zip(COLUMNS_ALL, _values(row), strict=True)) for row in page.rows]
    for row in rows:
        row["principal"] = row["principal"] or None
        row["client"] = row["client"] or None
    return json.dumps({"rows": rows, "after": page.after, "next_after": page.next_after}, indent=1)
