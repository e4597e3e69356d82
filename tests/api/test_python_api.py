"""The public Python API (`from api import Metadata`): the CLI's calls, on a directory or server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from api import ApiError, ConfigResourceType, Entity, Metadata, MetadataApiError
from records import NamespaceRecord, Uuid
from replay.errors import ReplayError
from tests.support.server_thread import running_server

NS_ID = Uuid.random()


@pytest.fixture(params=["data-dir", "server"])
def md(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Metadata]:
    """A handle on a data directory (the CLI's convention) or on a server over one."""
    if request.param == "data-dir":
        with Metadata.open(tmp_path / "data", principal="User:py") as handle:
            handle.register_broker(1)
            yield handle
        return
    with (
        running_server(tmp_path / "data" / "log", brokers=1) as server,
        Metadata.connect(f"127.0.0.1:1,{server.address}") as handle,
    ):
        yield handle


def test_commands_time_travel_diff_and_history(md: Metadata) -> None:
    created = md.create_topic("orders", partitions=3)
    assert created.num_partitions == 3
    md.alter_configs(ConfigResourceType.TOPIC, "orders", set={"retention.ms": "1000"})
    md.add_partitions("orders", partitions=4)
    topic = md.image().topics.get_by_name("orders")
    assert topic is not None and len(topic.partitions) == 4
    first = md.history(Entity(topic="orders"))[0].offset
    # Inside the topic's batch: the image at its end, with every partition.
    inside = md.image(at_offset=first)
    assert inside.provenance.offset >= first + 3  # (a server adds its write's note to it)
    at_creation = inside.topics.get_by_name("orders")
    assert at_creation is not None and len(at_creation.partitions) == 3
    _, _, changes = md.diff(first - 1, first)
    assert any(c.kind == "topic" and c.name == "orders" for c in changes)
    assert [e.offset for e in md.read(gt=first - 1, limit=1)] == [first]


def test_a_refused_command_raises_with_kafkas_code(md: Metadata) -> None:
    md.create_topic("orders", partitions=1)
    with pytest.raises(ApiError, match="TOPIC_ALREADY_EXISTS"):
        md.create_topic("orders", partitions=1)


def test_open_takes_the_data_directory_as_the_cli_does(tmp_path: Path) -> None:
    with Metadata.open(tmp_path) as md:
        md.register_broker(1)
        first, last = md.append(
            [NamespaceRecord(name="org", namespace_id=NS_ID)], principal="User:py"
        )
        assert first == last
        with pytest.raises(ReplayError):
            md.append(
                [NamespaceRecord(name="org", namespace_id=NS_ID)]
            )  # replays onto the log: a duplicate
        info = md.take_snapshot()
        assert [s.id for s in md.snapshots()] == [info.id]
    assert (tmp_path / "log").is_dir() and (tmp_path / "snapshots.db").exists()
    with Metadata.open(tmp_path) as md:
        assert md.image().namespaces.exists("org")


def test_a_connected_handle_refuses_what_needs_the_files(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "log", brokers=1) as server,
        Metadata.connect(server.address) as md,
    ):
        assert md.remote
        with pytest.raises(MetadataApiError, match="data directory only"):
            md.snapshots()
        with pytest.raises(MetadataApiError, match="data directory only"):
            md.append([NamespaceRecord(name="org", namespace_id=NS_ID)])


@pytest.mark.spark
def test_audit_sql_answers_rows(tmp_path: Path) -> None:
    with Metadata.open(tmp_path) as md:
        md.register_broker(1)
        md.create_topic("orders", partitions=2)
        rows = md.audit_sql(
            "SELECT record_type, count(*) AS n FROM metadata_log GROUP BY record_type"
        )
    counts = {row["record_type"]: row["n"] for row in rows}
    assert counts["TopicRecord"] == 1 and counts["PartitionRecord"] == 2
