"""The partition map: counts per namespace, topic and partition, per broker, paged and bounded."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from api import Metadata
from api.console import partition_map
from api.console.errors import BadInput
from api.console.map_counts import Row
from api.console.partition_map import MapQuery, PartitionMap
from api.console.travel import Point, parse_point
from records.model import NO_LEADER, DeleteTopicPartitionsRecord, Mode, PartitionChangeRecord
from replay.image import MetadataImage
from tests.support.console import HOSTILE, Client, sign_in


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetadataImage]:
    """Brokers 1-4 (racks r2, r1, r1, r3), topics `a` (default namespace, 3 partitions),
    `org:b` (3) and `org:team:c` (150); `a-0` offline, `a-1` under-replicated, `org:b` being
    cut to one partition (`org:b-1` READ_ONLY, `org:b-2` NONE)."""
    data_dir = tmp_path_factory.mktemp("map") / "data"
    with Metadata.open(data_dir) as md:
        for broker, rack in ((1, "r2"), (2, "r1"), (3, "r1"), (4, "r3")):
            md.register_broker(broker, rack=rack)
        md.create_namespace("org")
        md.create_namespace("org:team")
        md.create_topic("a", partitions=3, replication_factor=2)
        md.create_topic("org:b", partitions=3, replication_factor=3)
        md.create_topic("org:team:c", partitions=150, replication_factor=1)
        now = md.image()
        a, b = now.topics.get_by_name("a"), now.topics.get_by_name("org:b")
        assert a is not None and b is not None
        md.append(
            [
                PartitionChangeRecord(topic_id=a.topic_id, partition_id=0, leader=NO_LEADER),
                PartitionChangeRecord(
                    topic_id=a.topic_id, partition_id=1, isr=(a.partitions[1].leader,)
                ),
                DeleteTopicPartitionsRecord(
                    topic_id=b.topic_id, partition_count=1, delete_after_ms=0, created_ms=0
                ),
                PartitionChangeRecord(topic_id=b.topic_id, partition_id=1, mode=Mode.READ_ONLY),
                PartitionChangeRecord(topic_id=b.topic_id, partition_id=2, mode=Mode.NONE),
            ]
        )
        yield md.image()


def _map(image: MetadataImage, **fields: object) -> PartitionMap:
    return partition_map.partition_map(image, MapQuery(point=Point(), **fields))  # type: ignore[arg-type]  # test fields


def _rows(view: PartitionMap) -> dict[str, Row]:
    return {row.name: row for row in view.rows}


def test_namespaces_are_rows_with_their_partitions_per_broker(image: MetadataImage) -> None:
    view = _map(image)
    rows = _rows(view)
    assert list(rows) == ["", "org", "org:team"]
    assert (rows[""].topics, rows[""].partitions, rows[""].offline) == (1, 3, 1)
    assert rows[""].under_replicated == 1
    assert (rows["org"].read_only, rows["org"].no_mode) == (1, 1)
    assert rows["org:team"].partitions == 150
    assert view.totals.partitions == 156
    # Every partition with a leader is led by one broker; each replica is held by one.
    for row in (*view.rows, view.totals):
        cells = [row.cell(b.id) for b in view.brokers]
        assert sum(c.leaders for c in cells) == row.partitions - row.offline
    assert sum(c.leaders + c.followers for c in view.totals.cells.values()) == 3 * 2 + 3 * 3 + 150


def test_broker_columns_are_grouped_by_rack_and_say_their_state(image: MetadataImage) -> None:
    view = _map(image)
    assert [(b.rack, b.id) for b in view.brokers] == [("r1", 2), ("r1", 3), ("r2", 1), ("r3", 4)]
    assert {b.state for b in view.brokers} <= {"fenced", "unfenced", "shutting down"}


def test_a_namespaces_topics_are_rows(image: MetadataImage) -> None:
    view = _map(image, namespace="org")
    assert view.level == "topics"
    (row,) = view.rows
    assert (row.name, row.partitions, row.read_only, row.no_mode) == ("org:b", 3, 1, 1)
    assert [r.name for r in _map(image, namespace="").rows] == ["a"]
    assert not _map(image, namespace="org", q="zzz").rows


def test_a_topics_partitions_show_each_brokers_role(image: MetadataImage) -> None:
    view = _map(image, topic="a")
    first, second, third = view.partitions
    assert first.offline and first.leader == "none"
    assert second.under_replicated and not second.offline
    assert sorted(second.roles.values()) == ["lagging", "leader"]
    assert sorted(third.roles.values()) == ["follower", "leader"]
    assert (view.totals.offline, view.totals.under_replicated) == (1, 1)
    modes = [p.mode for p in _map(image, topic="org:b").partitions]
    assert modes == ["READ_WRITE", "READ_ONLY", "NONE"]


def test_rows_and_broker_columns_are_paged(
    image: MetadataImage, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _map(image, topic="org:team:c")
    assert (len(first.partitions), first.pages, first.row_count) == (100, 2, 150)
    second = _map(image, topic="org:team:c", page=1)
    assert [p.partition for p in second.partitions] == list(range(100, 150))
    with pytest.raises(BadInput, match="page=2 is past the last page"):
        _map(image, topic="org:team:c", page=2)
    monkeypatch.setattr(partition_map, "MAX_COLUMNS", 3)
    monkeypatch.setattr(partition_map, "MAX_ROWS", 2)
    view = _map(image)
    assert (len(view.brokers), view.broker_count, view.bpages) == (3, 4, 2)
    assert [b.id for b in _map(image, bpage=1).brokers] == [4]
    assert len(view.rows) == 2 and view.pages == 2
    assert view.cells <= (partition_map.MAX_ROWS + 1) * partition_map.MAX_COLUMNS


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"namespace": "nope"}, "namespace='nope' does not exist"),
        ({"topic": "nope"}, "topic='nope' does not exist"),
        ({"topic": "a", "namespace": "org"}, "not both"),
        ({"page": "x"}, "page='x' is not a number"),
        ({"bpage": "-1"}, "bpage=-1 is out of range"),
        ({"q": "x" * 201}, "q is 201 characters long"),
    ],
)
def test_bad_parameters_say_what_is_wrong(
    image: MetadataImage, params: dict[str, str], says: str
) -> None:
    with pytest.raises(BadInput, match=says):
        partition_map.partition_map(image, partition_map.parse_query(params, Point()))


def test_a_query_carries_its_point_and_scope_in_its_links() -> None:
    query = partition_map.parse_query({"namespace": "", "page": "2"}, parse_point("7", "at"))
    assert query.level == "topics"
    assert query.params() == {"at": "7", "namespace": "", "page": "2"}
    assert query.params(namespace=None, page=0) == {"at": "7"}


# ------------------------------------------------------------------------ the page


@pytest.fixture
async def signed_in(client: Client) -> Client:
    assert await sign_in(client) == 303
    return client


async def test_the_map_page_drills_down_from_namespaces_to_partitions(signed_in: Client) -> None:
    page = await signed_in.get("/map")
    html = await page.text()
    assert page.status == 200, html
    assert "(default)" in html and 'href="/map?namespace="' in html
    topics = await (await signed_in.get("/map?namespace=")).text()
    assert 'href="/map?topic=orders"' in topics and "payments" in topics
    partitions = await (await signed_in.get("/map?topic=orders&at=9")).text()
    assert "Partition map of topic orders at offset" in partitions
    assert partitions.count('class="cell role leader"') == 3


async def test_the_map_at_a_point_before_a_topic_has_no_row_for_it(signed_in: Client) -> None:
    html = await (await signed_in.get("/map?namespace=&at=9")).text()
    assert "orders" in html and "payments" not in html
    assert "the log's last offset is 18)" in html  # the end, not the point's
    missing = await signed_in.get("/map?topic=payments&at=9")
    assert missing.status == 400
    assert "does not exist at offset 9" in await missing.text()


async def test_a_bad_point_or_page_gets_a_page_saying_so(signed_in: Client) -> None:
    for path, says in (
        ("/map?at=banana", "neither an offset"),
        ("/map?at=99999", "past the end"),
        ("/map?page=9", "past the last page"),
        ("/map?q=" + "x" * 300, "at most 200"),
    ):
        answer = await signed_in.get(path)
        html = await answer.text()
        assert answer.status == 400, (path, html)
        assert says in html and "Traceback" not in html


async def test_hostile_names_in_the_map_are_text(signed_in: Client) -> None:
    html = await (await signed_in.get("/map?namespace=&q=" + HOSTILE)).text()
    assert "<script>alert" not in html and "<img src=x" not in html
