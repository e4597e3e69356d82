"""The timeline, its exports, the cluster at a point and compare, through the test client."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from api import Metadata
from api.console import travel
from tests.support.console import CLIENT_ID, HOSTILE, HOSTILE_PRINCIPAL, Client, sign_in


@pytest.fixture
async def signed_in(client: Client) -> Client:
    assert await sign_in(client) == 303
    return client


async def _json(client: Client, query: str) -> dict[str, Any]:
    answer = await client.get(f"/timeline.json?{query}")
    assert answer.status == 200, await answer.text()
    loaded: dict[str, Any] = json.loads(await answer.text())
    return loaded


def _rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = data["rows"]
    return rows


async def test_the_timeline_says_what_changed_before_and_after(signed_in: Client) -> None:
    rows = _rows(await _json(signed_in, "entity=config"))
    texts = [r["change"] for r in rows]
    assert "config topic orders: retention.ms set to 86400000" in texts
    assert "config topic orders: retention.ms 86400000 -> 3600000" in texts
    first = rows[0]
    assert first["offset"] == 8
    assert first["principal"] == "User:alice"
    assert first["entity_kind"] == "config"
    assert first["entity"] == "topic orders"


async def test_internal_records_are_hidden_unless_asked(signed_in: Client) -> None:
    plain = _rows(await _json(signed_in, ""))
    assert all(r["entity_kind"] != "internal" for r in plain)
    every = _rows(await _json(signed_in, "internal=1"))
    assert [r["offset"] for r in every] == list(range(19))
    assert len(plain) == 18


async def test_a_batch_with_a_client_write_names_its_client(signed_in: Client) -> None:
    rows = _rows(await _json(signed_in, "after=15"))
    assert [r["offset"] for r in rows] == [16, 17]
    assert {r["client"] for r in rows} == {str(CLIENT_ID)}
    earlier = _rows(await _json(signed_in, "after=7&limit=1"))
    assert earlier[0]["client"] is None


@pytest.mark.parametrize(
    ("query", "offsets"),
    [
        ("principal=User%3Aalice&entity=broker", [1, 2, 3]),
        ("kind=Partition&q=orders", [5, 6, 7]),
        ("entity=acl", [17]),
        ("q=PAYMENTS", [10, 11, 16, 17]),
        ("entity=user", [12, 13, 14, 15]),
    ],
)
async def test_filters_pick_the_rows(signed_in: Client, query: str, offsets: list[int]) -> None:
    assert [r["offset"] for r in _rows(await _json(signed_in, query))] == offsets


async def test_time_filters_bound_the_rows(signed_in: Client) -> None:
    every = _rows(await _json(signed_in, ""))
    at = every[4]["timestamp"]
    later = _rows(await _json(signed_in, f"since={at}"))
    assert later and all(r["timestamp"] >= at for r in later)
    assert later[0]["offset"] <= 5
    earlier = _rows(await _json(signed_in, f"until={at}"))
    assert earlier and all(r["timestamp"] <= at for r in earlier)


async def test_pages_follow_each_other_by_offset(signed_in: Client) -> None:
    seen: list[object] = []
    after = -1
    while True:
        data = await _json(signed_in, f"limit=4&after={after}")
        seen.extend(r["offset"] for r in _rows(data))
        if data["next_after"] is None:
            break
        assert isinstance(data["next_after"], int)
        after = data["next_after"]
    assert seen == [o for o in range(19) if o != 18]


async def test_the_timeline_page_links_its_next_page_and_exports(signed_in: Client) -> None:
    page = await signed_in.get("/timeline?limit=2&entity=broker")
    html = await page.text()
    assert page.status == 200
    assert 'id="next"' in html
    # The cursor is the last entry of the batch holding the second broker row: entries
    # appended in one millisecond by one principal read as one batch (`batches`), so how far
    # it reaches depends on the clock. Followed, it gives the rest of the broker rows.
    link = re.search(r'href="/timeline\?after=(\d+)&amp;entity=broker&amp;limit=2" id="next"', html)
    assert link is not None, html
    nxt = await (
        await signed_in.get(f"/timeline?after={link.group(1)}&entity=broker&limit=2")
    ).text()
    first, rest = (
        [int(o) for o in re.findall(r'<td class="num">(\d+)</td>', p)] for p in (html, nxt)
    )
    assert first[:2] == [1, 2] and first + rest == [1, 2, 3], (first, rest)
    assert 'href="/timeline.csv?entity=broker&amp;limit=2"' in html


async def test_newest_goes_to_the_cursor_of_the_last_rows(signed_in: Client) -> None:
    answer = await signed_in.get("/timeline?newest=1&limit=3&q=x", allow_redirects=False)
    assert answer.status == 303
    assert answer.headers["Location"] == "/timeline?after=15&q=x&limit=3"
    page = await (await signed_in.get(answer.headers["Location"])).text()
    assert "to the log's end" in page
    assert ">16</td>" in page


async def test_csv_export_holds_the_filtered_rows(signed_in: Client) -> None:
    answer = await signed_in.get("/timeline.csv?entity=acl")
    assert answer.headers["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(await answer.text())))
    assert rows[0][:3] == ["offset", "time", "timestamp"]
    assert [r[0] for r in rows[1:]] == ["17"]
    assert rows[1][3] == HOSTILE_PRINCIPAL  # starts with "U": not a formula, kept as is
    assert "X-Mlog-Next-After" not in answer.headers  # the whole log was read


async def test_the_cluster_at_a_point(signed_in: Client) -> None:
    page = await signed_in.get("/cluster?at=5&topic=orders")
    html = await page.text()
    assert page.status == 200
    assert 'id="offset">7<' in html  # inside the batch that creates orders: its end
    assert "the log's last offset is 18)" in html  # the end, with the slider's range
    assert 'max="18"' in html
    assert "orders" in html
    assert "payments" not in html
    now = await (await signed_in.get("/cluster")).text()
    assert "payments" in now
    assert "retention.ms" in now


async def test_the_cluster_at_a_time(signed_in: Client) -> None:
    every = _rows(await _json(signed_in, ""))
    page = await signed_in.get(f"/cluster?at={every[-1]['time']}")
    assert page.status == 200
    assert "payments" in await page.text()


async def test_compare_shows_fields_before_and_after(signed_in: Client) -> None:
    page = await signed_in.get("/diff?from=8&to=9")
    html = await page.text()
    assert page.status == 200
    assert "retention.ms" in html
    assert "86400000" in html
    assert "3600000" in html
    nothing = await (await signed_in.get("/diff?from=9&to=9")).text()
    assert "No changes." in nothing


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/timeline?after=abc", "after=&#39;abc&#39; is not a number"),
        ("/timeline?after=-5", "after=-5 is out of range"),
        ("/timeline?limit=0", "limit=0 is out of range"),
        ("/timeline?since=yesterday", "since: "),
        ("/timeline?since=2026-01-02&until=2026-01-01", "until is before since"),
        ("/timeline?entity=planet", "is not a kind of entity"),
        ("/timeline?kind=%3Cb%3E", "is not a kind of change"),
        ("/timeline?internal=yes", "internal takes 1"),
        ("/timeline?after=99999", "past the end of the log"),
        ("/timeline?newest=2", "newest takes 1"),
        ("/timeline?q=" + "x" * 300, "at most 200"),
        ("/cluster?at=99999", "past the end of the log"),
        ("/cluster?at=-7", "is not an offset"),
        ("/cluster?at=not-a-time", "neither an offset"),
        ("/cluster?topic=nope", "does not exist"),
        ("/cluster?at=1970-01-01T00:00:00Z", "before the log"),
        ("/diff?from=5&to=99999", "past the end"),
        ("/diff?from=banana", "neither an offset"),
    ],
)
async def test_bad_input_gets_a_page_saying_what_is_wrong(
    signed_in: Client, path: str, says: str
) -> None:
    answer = await signed_in.get(path)
    html = await answer.text()
    assert answer.status == 400, html
    assert says in html
    assert "Traceback" not in html


@pytest.mark.parametrize(
    "path",
    [
        "/timeline",
        "/timeline?internal=1",
        "/timeline?q=payments",
        "/cluster",
        "/cluster?topic=payments",
        "/diff?from=-1",
        "/diff?from=15",
        "/timeline?principal=" + HOSTILE,
        "/cluster?q=" + HOSTILE,
        "/cluster?at=" + HOSTILE,
        "/map",
        "/map?topic=payments",
        "/map?namespace=&q=" + HOSTILE,
        "/map?topic=" + HOSTILE,
        "/map?at=" + HOSTILE,
        "/charts?after=-1",
        "/charts?after=-1&by=day&internal=1",
        "/charts?principal=" + HOSTILE,
        "/entity?topic=payments",
    ],
)
async def test_hostile_text_is_shown_as_text(signed_in: Client, path: str) -> None:
    answer = await signed_in.get(path)
    html = await answer.text()
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert "onerror=alert(1)>" not in html or "&gt;" in html
    # The map shows no principal or config value: only its echoed parameters are hostile.
    shows_values = not path.startswith("/map")
    if answer.status == 200 and shows_values and "principal=" not in path and "q=" not in path:
        assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html


async def test_json_export_keeps_hostile_values_as_data(signed_in: Client) -> None:
    rows = _rows(await _json(signed_in, "after=15"))
    assert rows[0]["change"] == f"config topic payments: x.note set to {HOSTILE}"
    assert rows[0]["principal"] == HOSTILE_PRINCIPAL


class CountedImages:
    """A handle that counts the images it builds (the cost of a page at a point)."""

    def __init__(self, md: Metadata) -> None:
        self.md, self.built = md, 0

    def image(self, **point: Any) -> Any:
        self.built += 1
        return self.md.image(**point)

    def wait_past(self, gt: int, *, wait_ms: int) -> int:
        return self.md.wait_past(gt, wait_ms=wait_ms)


@pytest.mark.parametrize(("at", "offset"), [(None, 18), ("9", 9)])
def test_a_point_and_the_logs_end_cost_one_image(
    history_dir: Path, at: str | None, offset: int
) -> None:
    with Metadata.open(history_dir) as md:
        counted = CountedImages(md)
        image, last = travel.image_and_last(counted, travel.parse_point(at, "at"))  # type: ignore[arg-type]
    assert (image.provenance.offset, last, counted.built) == (offset, 18, 1)
