"""An entity's page: every entry that touched a topic, namespace, broker or user."""

from __future__ import annotations

import pytest

from tests.support.console import HOSTILE, Client, sign_in


@pytest.fixture
async def signed_in(client: Client) -> Client:
    assert await sign_in(client) == 303
    return client


async def test_a_topics_history(signed_in: Client) -> None:
    page = await signed_in.get("/entity?topic=orders")
    html = await page.text()
    assert page.status == 200
    assert "created topic orders with id" in html
    assert "partition orders-2" in html
    assert "retention.ms=3600000" in html


async def test_a_brokers_history_pages(signed_in: Client) -> None:
    first = await (await signed_in.get("/entity?broker=2&limit=2")).text()
    assert "registered broker 2" in first
    assert 'href="/entity?broker=2&amp;gt=' in first
    rest = await (await signed_in.get("/entity?broker=2&gt=5")).text()
    assert "registered broker 2" not in rest


async def test_the_timeline_links_to_entity_pages(signed_in: Client) -> None:
    html = await (await signed_in.get("/timeline?entity=topic")).text()
    assert 'href="/entity?topic=orders"' in html


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/entity", "name one entity"),
        ("/entity?topic=a&broker=1", "name one entity"),
        ("/entity?broker=x", "is not a broker"),
        ("/entity?broker=-3", "is not a broker"),
        ("/entity?topic_id=nope", "is not a topic id"),
        ("/entity?topic=orders&gt=z", "is not a number"),
        ("/entity?topic=orders&limit=0", "out of range"),
    ],
)
async def test_bad_parameters_say_what_is_wrong(signed_in: Client, path: str, says: str) -> None:
    answer = await signed_in.get(path)
    assert answer.status == 400
    assert says in await answer.text()


@pytest.mark.parametrize("path", ["/entity?topic=payments", "/entity?user=" + HOSTILE])
async def test_hostile_text_is_shown_as_text(signed_in: Client, path: str) -> None:
    answer = await signed_in.get(path)
    html = await answer.text()
    assert answer.status == 200
    assert "<script>alert" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html
