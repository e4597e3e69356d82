"""The timeline's rows as CSV (formulas defused) and JSON (values as they are)."""

from __future__ import annotations

import csv
import io
import json

from api.console.exports import to_csv, to_json
from api.console.timeline import Page, Row


def _page(text: str) -> Page:
    row = Row(
        offset=3,
        timestamp=0,
        principal='=HYPERLINK("http://evil")',
        client=None,
        entity_kind="config",
        entity="-topic",
        kind="Config",
        text=text,
    )
    return Page(rows=[row], after=-1, next_after=None, last_read=3, scanned=4)


def test_csv_cells_a_spreadsheet_would_run_are_quoted() -> None:
    rows = list(csv.reader(io.StringIO(to_csv(_page("@SUM(1)")))))
    assert rows[1][0] == "3"
    assert rows[1][1] == "1970-01-01T00:00:00.000Z"
    assert rows[1][3] == '\'=HYPERLINK("http://evil")'
    assert rows[1][6] == "'-topic"
    assert rows[1][8] == "'@SUM(1)"


def test_json_keeps_values_and_the_cursor() -> None:
    data = json.loads(to_json(_page("@SUM(1)")))
    assert data["rows"][0]["principal"] == '=HYPERLINK("http://evil")'
    assert data["rows"][0]["client"] is None
    assert data["next_after"] is None
