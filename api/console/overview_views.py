"""The console's overview pages: the partition map at a point and the charts of the log.

Like every page (`views`), each handler reads its parameters (a bad one is `BadInput`, a 400
page) and asks the session's own handle on a worker thread, so through a server it sees what
the server lets the signed-in principal read: the present image filtered to what it may
DESCRIBE, the past and the log only with the right to read the log (else a 403 page).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from api.console import charts, partition_map, timeline, travel
from api.console.changes import ENTITY_KINDS
from api.console.state import session_of
from api.console.views import KINDS, render


async def map_page(request: web.Request) -> web.StreamResponse:
    """The partition map at a point (`at`), by namespace, a namespace's topics, or a topic's."""
    point = travel.parse_point(request.query.get("at"), "at")
    query = partition_map.parse_query(request.query, point)
    session = session_of(request)

    counts = session.source.map_counts

    def read(md: Any) -> tuple[partition_map.PartitionMap, int]:
        image, last = travel.image_and_last(md, point)
        return partition_map.partition_map(image, query, counts), last

    view, last = await session.source.call(read)
    return render(
        request,
        "map.html",
        view=view,
        query=query,
        last=last,
        time=timeline.iso_time(view.timestamp) if view.timestamp >= 0 else "-",
    )


async def charts_page(request: web.Request) -> web.StreamResponse:
    """Changes per hour or day by principal and kind, and topics and partitions over time."""
    query = charts.parse_query(request.query)
    session = session_of(request)
    page = await session.source.call(lambda md: charts.read_charts(md, query))
    return render(
        request,
        "charts.html",
        page=page,
        query=query,
        drawn=charts.charts_of(page),
        next_query=(
            None if page.next_after is None else query.params(after=str(page.next_after), since="")
        ),
        by_query={"hour": query.params(by="hour"), "day": query.params(by="day")},
        entity_kinds=ENTITY_KINDS,
        kinds=KINDS,
    )
