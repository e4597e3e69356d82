"""A server with an archive answers its log's past below the local log start from the archive.

Twins (`tests.support.archives.trimmed_twins`): a data directory trimmed below the archive and
its untrimmed copy, each served in-process; FetchLog, History, ImageAt, Diff and
DescribeLogDigest below the trimmed one's start answer as the copy's. A changed archived
object is an error naming it; an unreachable archive fails the read, never the writes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from api.client import AdminClient, RemoteError
from api.server.archive_reads import needs_archive, point_needs_archive
from api.server.server import MetadataServer
from api.service.archiving import ArchiveConfig, LogArchiving
from api.service.service import MetadataService
from api.service.settings import Settings
from api.service.snapshots import open_snapshotter, open_store
from metadata_log.archive import ArchiveLocation, claim, read_manifest
from metadata_log.reader import LogReader
from records.entry import LogEntry
from replay.controller.commands import CreatableTopic
from replay.timetravel import Entity
from tests.support.archives import CLUSTER, SMALL_SEGMENT_ENV, tamper, trimmed_twins


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The twins' root: `trimmed`, `twin`, `archive` (copied per test: some tamper)."""
    root = tmp_path_factory.mktemp("twins")
    with pytest.MonkeyPatch.context() as patch:
        for key, value in SMALL_SEGMENT_ENV.items():
            patch.setenv(key, value)
        trimmed_twins(root)
    yield root


@pytest.fixture
def twins(base: Path, tmp_path: Path) -> tuple[Path, Path, Path]:
    """(trimmed data dir, untrimmed twin, archive directory), this test's own copies."""
    for name in ("trimmed", "twin", "archive"):
        shutil.copytree(base / name, tmp_path / name)
    return tmp_path / "trimmed", tmp_path / "twin", tmp_path / "archive"


@asynccontextmanager
async def serving(data: Path, archive: Path | None = None) -> AsyncIterator[MetadataServer]:
    """`data` served on 127.0.0.1 (its snapshots too), archiving to `archive` if given."""
    settings = Settings(data_dir=data)
    service = MetadataService.open(settings.log_dir, snapshots=open_snapshotter(settings))
    archiving = None
    if archive is not None:
        url = f"file://{archive}"
        archiving = LogArchiving.open(
            ArchiveConfig(url=url, interval_ms=100),
            cluster_id=claim(ArchiveLocation.open(url), None) or CLUSTER,
            data_dir=data,
            log_dir=settings.log_dir,
            log_config=settings.log,
            retention=service.retention,
        )
    server = MetadataServer(
        service, host="127.0.0.1", port=0, cluster_id="test-cluster", archiving=archiving
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def log_start(data: Path) -> int:
    with LogReader.open(data / "log") as log:
        return log.log_start_offset


async def fetch_all(client: AdminClient) -> list[LogEntry]:
    """Every entry from offset 0, in FetchLog's pieces."""
    entries: list[LogEntry] = []
    while True:
        got, end = await client.fetch_log(len(entries), max_entries=40)
        entries.extend(got)
        if len(entries) >= end:
            return entries


async def answers(client: AdminClient, start: int, middle_end: int) -> dict[str, object]:
    """Every read below `start` the test compares (`middle_end`: a block's last offset)."""
    entries = await fetch_all(client)
    middle = start // 2
    _, _, changes = await client.diff(str(middle // 2), str(start + 2))
    return {
        "fetch": entries,
        "history t3": await client.history(Entity(topic="t3")),
        "history broker": await client.history(Entity(broker=2), lte=start - 1),
        "image": await client.image_at(at_offset=middle),
        "image at a time": await client.image_at(at_time=str(entries[middle].timestamp)),
        "image above the start": await client.image_at(at_offset=start + 3),  # the local log
        "diff": changes,
        "digests": [(await client.log_digest(o)).token for o in (start - 1, middle_end)],
    }


async def test_reads_below_the_local_start_answer_as_the_untrimmed_log(
    twins: tuple[Path, Path, Path],
) -> None:
    trimmed, twin, archive = twins
    start = log_start(trimmed)
    assert start > 40
    run = read_manifest(ArchiveLocation.open(f"file://{archive}")).run
    middle_end = run[len(run) // 2].next_offset - 1
    async with serving(twin) as server, await AdminClient.connect(server.address) as client:
        expected = await answers(client, start, middle_end)
    async with (
        serving(trimmed, archive) as server,
        await AdminClient.connect(server.address) as client,
    ):
        assert await answers(client, start, middle_end) == expected
    assert expected["history t3"] and expected["fetch"]
    assert (trimmed / "archive-cache" / "objects").is_dir()
    assert not list((trimmed / "archive-cache").glob("view-*")), "the view goes with the server"


async def test_a_changed_archived_object_is_an_error_naming_it(
    twins: tuple[Path, Path, Path],
) -> None:
    trimmed, _, archive = twins
    name = tamper(archive, "avro", 1)
    async with (
        serving(trimmed, archive) as server,
        await AdminClient.connect(server.address) as client,
    ):
        with pytest.raises(RemoteError, match=name.replace(".", r"\.")) as raised:
            await client.fetch_log(0)
        assert "differs from what the manifest says" in str(raised.value)
        with pytest.raises(RemoteError, match=name.replace(".", r"\.")):
            await client.history(Entity(topic="t3"))
        # Above the start the local log answers.
        start = log_start(trimmed)
        entries, _ = await client.fetch_log(start)
        assert entries and entries[0].offset == start


class _Unreachable:
    """A filesystem whose every read fails as a store down does."""

    def __getattr__(self, name: str) -> object:
        def fail(*args: object, **kwargs: object) -> object:
            raise ConnectionRefusedError(111, "Connection refused")

        return fail


async def test_an_unreachable_archive_fails_the_read_and_never_the_writes(
    twins: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    trimmed, _, archive = twins
    async with (
        serving(trimmed, archive) as server,
        await AdminClient.connect(server.address) as client,
    ):
        reads = server.private_apis.archive
        assert reads is not None and reads.archive is not None
        monkeypatch.setattr(reads.archive.location, "fs", _Unreachable())
        with pytest.raises(RemoteError, match=r"cannot be read .*try again once it is back"):
            await client.fetch_log(0)
        (created,) = await client.create_topics([CreatableTopic(name="during-outage")])
        assert created.outcome.ok
        monkeypatch.undo()
        entries, _ = await client.fetch_log(0)
        assert entries[0].offset == 0


async def test_reads_at_or_above_the_local_start_never_touch_the_archive(
    twins: tuple[Path, Path, Path],
) -> None:
    trimmed, _, archive = twins
    start = log_start(trimmed)
    async with (
        serving(trimmed, archive) as server,
        await AdminClient.connect(server.address) as client,
    ):
        entries, _ = await client.fetch_log(start)
        assert entries[0].offset == start
        await client.image_at(at_offset=start + 3)
        await client.history(Entity(topic="late1"), gt=start - 1)
        await client.diff(str(start + 1), str(start + 4))
        await client.log_digest()
        cache = trimmed / "archive-cache"
        assert not list(cache.glob("objects/*")) and not list(cache.glob("view-*"))


def test_which_points_need_the_archive(twins: tuple[Path, Path, Path]) -> None:
    trimmed, _, _ = twins
    settings = Settings(data_dir=trimmed)
    with open_store(settings, create=False) as store, LogReader.open(settings.log_dir) as log:
        start = log.log_start_offset
        (snapshot,) = store.snapshots()
        assert snapshot.offset == start  # `log trim --before-snapshot`: the log starts at it
        assert needs_archive(log, store, 0)
        assert needs_archive(log, store, start - 1), "no snapshot at or below it is kept"
        assert not needs_archive(log, store, start)
        assert not needs_archive(log, store, start + 3)
        assert needs_archive(log, None, start + 3), "no snapshot to replay the local log from"
        assert point_needs_archive(log, store, "1970-01-02T00:00:00Z")  # before every entry
        assert not point_needs_archive(log, store, str(start))
        assert point_needs_archive(log, store, str(start - 2))


async def test_a_server_removes_the_views_a_killed_process_left(
    twins: tuple[Path, Path, Path],
) -> None:
    trimmed, _, archive = twins
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    cache = trimmed / "archive-cache"
    left = cache / f"view-{gone.pid}-0123abcd"
    left.mkdir(parents=True)
    (left / "00000000000000000000.avro").write_bytes(b"")
    alive = cache / f"view-{os.getppid()}-4567cdef"  # this test's parent runs
    alive.mkdir()
    async with serving(trimmed, archive):
        assert not left.exists()
        assert alive.is_dir()
