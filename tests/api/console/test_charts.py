"""The charts: changes per period by principal and kind, counts over time, an entity's charts."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api import Metadata
from api.console import charts
from api.console.errors import BadInput
from records.entry import LogEntry
from records.model import ClientWriteRecord
from replay.timetravel import Entity
from tests.support.console import HOSTILE, HOSTILE_PRINCIPAL, Client, sign_in

HOUR = 3_600_000
T0 = 1_790_000_000_000 - 1_790_000_000_000 % (24 * HOUR)
"""A day's first millisecond."""


@pytest.fixture(scope="module")
def md(history_dir: Path) -> Iterator[Metadata]:
    with Metadata.open(history_dir) as handle:
        yield handle


class HourApart:
    """The history's handle, its entries read as if each batch was appended an hour apart.

    The history is written within a second; the periods need entries at several hours.
    """

    def __init__(self, md: Metadata) -> None:
        self.md = md

    def image(self, **point: Any) -> Any:
        return self.md.image(**point)

    def read(self, **bounds: Any) -> Iterator[LogEntry]:
        previous: LogEntry | None = None
        hour = -1
        for entry in self.md.read(**bounds):
            if previous is None or (entry.timestamp, entry.principal) != (
                previous.timestamp,
                previous.principal,
            ):
                hour += 1
            previous = entry
            yield dataclasses.replace(entry, timestamp=T0 + hour * HOUR)


def _query(**params: str) -> charts.ChartQuery:
    return charts.parse_query(params)


def _changes(md: Metadata) -> Counter[str]:
    return Counter(
        e.principal or "-" for e in md.read() if not isinstance(e.record, ClientWriteRecord)
    )


def test_changes_are_counted_by_principal_and_kind(md: Metadata) -> None:
    page = charts.read_charts(md, _query(after="-1"))
    assert page.next_after is None and page.scanned == md.image().provenance.offset + 1
    by_principal: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    for period in page.periods:
        by_principal.update(period.by_principal)
        by_kind.update(period.by_kind)
        assert period.changes == sum(period.by_principal.values())
    assert by_principal == _changes(md)
    assert by_kind["Config"] == 3 and by_kind["RegisterBroker"] == 3
    assert "ClientWrite" not in by_kind  # bookkeeping, unless asked
    assert page.periods[-1].topics == 2 and page.periods[-1].partitions == 4
    assert (page.start_topics, page.start_partitions) == (0, 0)


def test_the_timelines_filters_narrow_the_counts(md: Metadata) -> None:
    alice = charts.read_charts(md, _query(principal="User:alice"))
    assert {p for period in alice.periods for p in period.by_principal} == {"User:alice"}
    configs = charts.read_charts(md, _query(kind="Config"))
    assert sum(p.changes for p in configs.periods) == 3
    internal = charts.read_charts(md, _query(internal="1", entity="internal"))
    assert sum(p.changes for p in internal.periods) == 1


def test_periods_follow_the_append_times_and_the_counts_replay(md: Metadata) -> None:
    page = charts.read_charts(HourApart(md), _query(after="-1"))  # type: ignore[arg-type]  # a handle's reads
    labels = [p.label for p in page.periods]
    assert len(labels) == len(set(labels)) > 4
    assert labels[0].endswith("T00") and labels[1].endswith("T01")
    topics = [p.topics for p in page.periods]
    assert topics == sorted(topics) and topics[-1] == 2
    daily = charts.read_charts(HourApart(md), _query(after="-1", by="day"))  # type: ignore[arg-type]  # as above
    assert len(daily.periods) == 1 and daily.periods[0].changes == sum(
        p.changes for p in page.periods
    )


def test_a_window_stops_at_its_period_bound_and_the_next_continues(
    md: Metadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(charts, "MAX_PERIODS", 3)
    handle: Any = HourApart(md)
    first = charts.read_charts(handle, _query(after="-1"))
    assert len(first.periods) == 3 and first.next_after == first.periods[-1].last_offset
    rest = charts.read_charts(handle, _query(after=str(first.next_after)))
    assert rest.after == first.next_after
    assert rest.start_topics == first.periods[-1].topics


def test_a_window_after_an_offset_inside_a_batch_starts_at_its_end(md: Metadata) -> None:
    page = charts.read_charts(md, _query(after="5"))  # 4-7 made `orders` in one batch
    assert page.after == 7
    assert page.start_topics == 1 and page.periods[-1].topics == 2


def test_a_window_reads_at_most_its_budget(md: Metadata, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(charts, "SCAN_BUDGET", 5)
    page = charts.read_charts(md, _query(after="-1"))
    assert page.scanned <= 5 and page.next_after is not None
    # Windows meet at batch ends: each entry is counted once across them.
    counted, after = 0, -1
    while True:
        window = charts.read_charts(md, _query(after=str(after)))
        counted += sum(p.changes for p in window.periods)
        if window.next_after is None:
            break
        assert window.next_after > after
        after = window.next_after
    assert counted == sum(_changes(md).values())
    newest = charts.read_charts(md, _query())  # without a cursor: the last entries
    assert md.image().provenance.offset - 5 <= newest.after and newest.scanned <= 5


def test_a_query_links_its_window() -> None:
    assert _query().params() == {"by": "hour"}
    assert _query(after="-1").params(by="day") == {"by": "day", "after": "-1"}
    since = _query(since="2026-11-22T08:00:00Z", principal="User:a")
    assert since.params() == {"by": "hour", "since": "2026-11-22T08:00:00Z", "principal": "User:a"}
    assert since.params(after="7", since="") == {"by": "hour", "after": "7", "principal": "User:a"}


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"by": "week"}, "by='week' is not a period"),
        ({"q": "orders"}, "no text search"),
        ({"since": "yesterday"}, "since"),
        ({"after": "x"}, "after='x' is not a number"),
    ],
)
def test_bad_parameters_say_what_is_wrong(params: dict[str, str], says: str) -> None:
    with pytest.raises(BadInput, match=says):
        charts.parse_query(params)


def test_an_entitys_samples_follow_its_topic(md: Metadata) -> None:
    found = md.history(Entity(topic="orders"))
    assert charts.chosen(found, 2) == [found[0].offset, found[-1].offset]
    samples = charts.entity_series(md, "orders", None, found)
    assert samples[-1].partitions == 3 and samples[-1].min_isr == 2
    assert len({s.offset for s in samples}) == len(samples) <= charts.ENTITY_SAMPLES
    assert next(c.title for c in charts.entity_charts(samples)) == "Partitions"


def test_chosen_offsets_are_bounded_and_keep_both_ends() -> None:
    entries: Any = [type("E", (), {"offset": n})() for n in range(1000)]
    picked = charts.chosen(entries, 24)
    assert len(picked) == 24 and picked[0] == 0 and picked[-1] == 999


# ------------------------------------------------------------------------ the pages


@pytest.fixture
async def signed_in(client: Client) -> Client:
    assert await sign_in(client) == 303
    return client


async def test_the_charts_page_draws_svg_and_its_numbers(signed_in: Client) -> None:
    answer = await signed_in.get("/charts?after=-1")
    html = await answer.text()
    assert answer.status == 200, html
    assert html.count("<svg") == 4 and "The numbers" in html
    assert "Changes per hour by principal" in html
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html  # the hostile principal, as text
    day = await (await signed_in.get("/charts?by=day&kind=Config")).text()
    assert "Changes per day by kind" in day and 'id="by-hour"' in day


async def test_the_entity_page_charts_a_topic(signed_in: Client) -> None:
    html = await (await signed_in.get("/entity?topic=orders")).text()
    assert 'id="entity-charts"' in html and html.count("<svg") == 3
    assert "ISR size" in html
    broker = await (await signed_in.get("/entity?broker=1")).text()
    assert "<svg" not in broker


@pytest.mark.parametrize(
    "path",
    [
        "/charts?principal=" + HOSTILE,
        "/charts?by=" + HOSTILE,
        "/charts?since=" + HOSTILE,
        "/entity?topic=payments",
    ],
)
async def test_hostile_parameters_are_text(signed_in: Client, path: str) -> None:
    answer = await signed_in.get(path)
    html = await answer.text()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "Traceback" not in html


def test_the_hostile_principal_is_in_the_history(md: Metadata) -> None:
    assert HOSTILE_PRINCIPAL in _changes(md)


class OneRun(HourApart):
    """The history's handle, its entries read as if all were appended in one millisecond by
    one principal in one epoch: one run of batches, as the timeline and the charts group them."""

    def read(self, **bounds: Any) -> Iterator[LogEntry]:
        for entry in self.md.read(**bounds):
            yield dataclasses.replace(entry, timestamp=T0, principal="User:alice", epoch=1)


def test_a_run_over_the_budget_is_read_to_its_end(
    md: Metadata, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its end is a batch's end: the next window starts there, and no entry is left out.
    monkeypatch.setattr(charts, "SCAN_BUDGET", 5)
    page = charts.read_charts(OneRun(md), _query(after="-1"))  # type: ignore[arg-type]
    assert page.scanned == md.image().provenance.offset + 1 > 5
    assert sum(p.changes for p in page.periods) == sum(_changes(md).values())
