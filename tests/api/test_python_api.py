"""The public Python API (`from api import Metadata`): the CLI's calls, on a directory or server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api import ApiError, ConfigResourceType, Entity, Metadata, MetadataApiError
from api.targets import FIRST_FETCH_PAGE, RemoteTarget
from metadata_log.archive import ArchiveDamage, ArchiveError
from records import NamespaceRecord, Uuid
from replay.errors import ReplayError
from tests.support.archives import SMALL_SEGMENT_ENV, tamper, trimmed_twins
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


def test_the_digest_the_quorum_and_the_wait_for_new_entries(md: Metadata) -> None:
    md.create_topic("orders", partitions=1)
    last = md.image().provenance.offset
    digest = md.digest()
    assert digest.offset == last
    assert digest.token().startswith("mlog-digest:v1:" if md.remote else "mlog-digest:v2:")
    assert md.wait_past(last, wait_ms=0) == last  # nothing new: answers at its deadline
    assert md.wait_past(last - 1, wait_ms=60_000) == last  # already past: at once
    assert 1 in md.image().cluster.brokers
    if md.remote:
        quorum = md.describe_quorum()  # a single server: a quorum of one, its own leader
        assert quorum.leader_id == quorum.current_voters[0].replica_id
        assert set(md.broker_liveness()) <= {1}
        md.reconnect()  # a new connection; the handle reads on
        assert md.image().provenance.offset == last
    else:
        with pytest.raises(MetadataApiError, match="running quorum"):
            md.describe_quorum()
        assert md.broker_liveness() == {}
        outcome = md.verify(digest)
        assert outcome.ok and outcome.digest_ok


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


def test_open_with_an_archive_reads_below_the_local_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in SMALL_SEGMENT_ENV.items():
        monkeypatch.setenv(key, value)
    trimmed, twin, url, _ = trimmed_twins(tmp_path, topics=24)
    with Metadata.open(twin) as whole, Metadata.open(trimmed, archive_url=url) as seen:
        with Metadata.open(trimmed) as local:
            start = next(iter(local.read(limit=1))).offset
        assert start > 20
        assert list(seen.read(lte=start + 2)) == list(whole.read(lte=start + 2))
        assert seen.history(Entity(topic="t3")) == whole.history(Entity(topic="t3"))
        assert seen.image(at_offset=start // 2) == whole.image(at_offset=start // 2)
        assert seen.diff(5, start - 1) == whole.diff(5, start - 1)
    assert (trimmed / "archive-cache" / "objects").is_dir()


def test_open_refuses_a_bad_archive_url(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match="scheme 'ftp'"):
        Metadata.open(tmp_path, archive_url="ftp://host/x")
    with pytest.raises(MetadataApiError, match="give archive_url"):
        Metadata.open(tmp_path, archive_cache=tmp_path / "c")
    assert not (tmp_path / "log").exists()


def test_a_changed_archived_segment_is_never_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in SMALL_SEGMENT_ENV.items():
        monkeypatch.setenv(key, value)
    trimmed, _, url, _ = trimmed_twins(tmp_path, topics=24)
    name = tamper(Path(url.removeprefix("file://")), "avro", 2)
    with (
        Metadata.open(trimmed, archive_url=url, archive_cache=tmp_path / "fresh") as md,
        pytest.raises(ArchiveDamage, match=name),
    ):
        list(md.read(lte=3))


def test_a_handle_replays_only_the_gap_to_a_later_past_point(tmp_path: Path) -> None:
    # A data directory's handle keeps the image before each past point it builds: paging
    # forward (the console's timeline) replays the gap only, with the answers of a new handle.
    with Metadata.open(tmp_path) as md:
        md.register_broker(1)
        for n in range(12):
            md.create_topic(f"t{n}")
        end = md.image().provenance.offset
    points = [end - 20, end - 10, end - 4]
    with Metadata.open(tmp_path) as md:
        forward = [list(md.image(at_offset=p).write()) for p in points]
        assert md._target.images.hits == 2  # type: ignore[union-attr]
    fresh = []
    for point in points:
        with Metadata.open(tmp_path) as md:
            fresh.append(list(md.image(at_offset=point).write()))
    assert forward == fresh


def test_a_read_through_a_server_asks_for_small_pages_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A console page stops after ~50 rows: its first FetchLog asks a few hundred entries, not
    # ten thousand; a long read grows its pages and reads the same entries as the directory.
    asked: list[int] = []
    fetch = RemoteTarget._fetch

    def counting(self: RemoteTarget, offset: int, count: int, wait_ms: int) -> Any:
        asked.append(count)
        return fetch(self, offset, count, wait_ms)

    monkeypatch.setattr(RemoteTarget, "_fetch", counting)
    with running_server(tmp_path / "data" / "log", brokers=1) as server:
        with Metadata.connect(server.address) as md:
            md.create_topic("wide", partitions=3_000)
            end = md.image().provenance.offset
            first = next(iter(md.read()))
            assert first.offset == 0 and asked == [FIRST_FETCH_PAGE]
            asked.clear()
            remote = [(e.offset, e.record) for e in md.read()]
        # 256 + 1,024 entries, then the rest up to the end the first answer named.
        assert asked == [FIRST_FETCH_PAGE, FIRST_FETCH_PAGE * 4, end + 1 - FIRST_FETCH_PAGE * 5]
        with Metadata.open(tmp_path / "data") as md:
            assert remote == [(e.offset, e.record) for e in md.read()]


def test_a_reading_handle_without_snapshots_replays_only_what_was_appended(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    with Metadata.open(data_dir) as writer:
        writer.register_broker(1)
        for n in range(20):
            writer.create_topic(f"t{n}", partitions=2, replication_factor=1)
    assert not (data_dir / "snapshots.db").exists()
    with Metadata.open(data_dir) as reader, Metadata.open(data_dir) as writer:
        before = reader.image()
        writer.create_topic("late", partitions=1, replication_factor=1)
        after = reader.image()
        # Built on the image kept from the last call (one batch before its end: the last
        # topic's batch is replayed again): the other topics are its very objects.
        assert after.topics.get_by_name("late") is not None
        shared = [t for t in before.topics.by_id.values() if after.topics.get(t.topic_id) is t]
        assert len(shared) == 19
        assert after == writer.image()
