"""The timeline's filters as URL parameters, and pages that stop at their scan budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from api import Metadata
from api.console import timeline
from api.console.timeline import Filters, parse_filters, read_page


def test_filters_round_trip_through_their_url() -> None:
    filters = Filters(after=7, principal="User:a", entity="topic", q="x", internal=True, limit=5)
    assert parse_filters(filters.query()) == filters
    assert Filters().query() == {}
    assert filters.query(after=9)["after"] == "9"


def test_a_page_stops_at_its_scan_budget_and_the_next_goes_on(
    history_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timeline, "SCAN_BUDGET", 4)
    offsets: list[int] = []
    after = -1
    with Metadata.open(history_dir) as md:
        for _ in range(20):
            page = read_page(md, Filters(after=after, entity="user"))
            assert page.scanned <= 4 + 3  # a budget's entries and the rest of the last batch
            offsets.extend(row.offset for row in page.rows)
            if page.next_after is None:
                break
            after = page.next_after
    assert offsets == [12, 13, 14, 15]


def test_a_search_page_stops_at_its_smaller_budget_and_finds_what_one_page_would(
    history_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Metadata.open(history_dir) as md:
        whole = read_page(md, Filters(q="user"))
        assert whole.next_after is None and whole.rows
        monkeypatch.setattr(timeline, "SEARCH_BUDGET", 3)
        found: list[int] = []
        after, pages = -1, 0
        while True:
            page = read_page(md, Filters(after=after, q="user"))
            pages += 1
            assert page.scanned <= 3 + 3  # a budget's entries and the rest of the last batch
            found.extend(row.offset for row in page.rows)
            if page.next_after is None:
                break
            after = page.next_after
        # Without a search the page keeps the larger budget.
        assert read_page(md, Filters(entity="user")).scanned > 6
    assert found == [row.offset for row in whole.rows]
    assert pages > 1
