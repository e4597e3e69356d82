"""The service with snapshots: start from snapshot + tail, the policy, a database down or behind."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from pathlib import Path

import pytest

from api.service import snapshots
from api.service.service import MetadataService
from api.service.settings import load_settings
from api.service.snapshot_runners import ForkedRunner, SnapshotRunner, ThreadRunner
from api.service.snapshots import (
    MAX_CHAIN,
    MIN_CADENCE_BYTES,
    RECORD_BYTES,
    Snapshotter,
    cadence_bytes,
    image_records,
    open_snapshotter,
)
from metadata_log.reader import LogReader
from records.model import ConfigResourceType
from replay.controller.commands import (
    AlterConfig,
    AlterConfigOp,
    ConfigResource,
    CreatableTopic,
    RegisterBroker,
)
from replay.controller.config_defs import SNAPSHOT_BYTES_KEY, SNAPSHOT_INTERVAL_KEY
from replay.loader import load_image
from replay.sql import revision, schema
from replay.sql.errors import SchemaAheadError
from replay.sql.store import SnapshotInfo, SnapshotStore, sqlite_url


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def _open(
    log_dir: Path,
    url: str,
    clock: Clock | None = None,
    *,
    retention: int = 10,
    retention_bytes: int | None = None,
    retry_ms: int = 1,
    max_chain: int = MAX_CHAIN,
    runner: SnapshotRunner | None = None,
) -> MetadataService:
    clock = clock or Clock()
    snapshotter = Snapshotter(
        SnapshotStore(url),
        clock_ms=clock,
        retention=retention,
        retention_bytes=retention_bytes,
        retry_ms=retry_ms,
        max_chain=max_chain,
        runner=runner,
    )
    return MetadataService.open(log_dir, snapshots=snapshotter, clock_ms=clock)


def _snapshotter(service: MetadataService) -> Snapshotter:
    found = service._snapshots  # the hook under test
    assert found is not None
    return found


def _register(service: MetadataService, *ids: int) -> None:
    for broker_id in ids:
        request = RegisterBroker(broker_id=broker_id)
        service.execute(functools.partial(service.controller.register_broker, request=request))


def _create(service: MetadataService, name: str, partitions: int = 3) -> None:
    topic = CreatableTopic(name=name, num_partitions=partitions, replication_factor=2)
    (result,) = service.execute(functools.partial(service.controller.create_topics, topics=[topic]))
    assert result.outcome.ok


def _set_cluster(service: MetadataService, key: str, value: str) -> None:
    change = (
        ConfigResource(type=ConfigResourceType.BROKER, name=""),
        [AlterConfig(name=key, op=AlterConfigOp.SET, value=value)],
    )
    (result,) = service.execute(
        functools.partial(service.controller.incremental_alter_configs, changes=[change])
    )
    assert result.outcome.ok, result.outcome


def _replayed(log_dir: Path) -> object:
    with LogReader.open(log_dir) as log:
        return load_image(log)


def test_restart_starts_from_the_newest_snapshot_plus_the_tail(
    tmp_path: Path, database_url: str
) -> None:
    log_dir = tmp_path / "log"
    with _open(log_dir, database_url) as service:
        _register(service, 1, 2, 3)
        for n in range(5):
            _create(service, f"t{n}")
        snapshotter = _snapshotter(service)
        info = snapshotter.request(service.image, service.log).result()
        assert info is not None
        assert info.offset == service.image.provenance.offset
        for n in range(5, 8):
            _create(service, f"t{n}")
        before = service.image
    with _open(log_dir, database_url) as service:
        started = _snapshotter(service).started_from
        assert started is not None
        assert started.id == info.id
        assert service.image == before
        assert service.image == _replayed(log_dir)
        _create(service, "after-restart")


def test_the_default_database_is_created_with_the_first_snapshot(tmp_path: Path) -> None:
    settings = load_settings(data_dir=str(tmp_path), env={})
    database = tmp_path / "snapshots.db"
    with MetadataService.open(settings.log_dir, snapshots=open_snapshotter(settings)) as service:
        _register(service, 1, 2)
        _create(service, "t")
        # No snapshot due yet: the store is not opened, the file not created.
        assert not database.exists()
        assert _snapshotter(service).started_from is None
        _set_cluster(service, SNAPSHOT_BYTES_KEY, "1")
        _create(service, "u")
        info = _snapshotter(service).wait()
        assert info is not None
        assert database.exists()
        before = service.image
    with MetadataService.open(settings.log_dir, snapshots=open_snapshotter(settings)) as service:
        started = _snapshotter(service).started_from
        assert started is not None and started.id == info.id
        assert service.image == before


def _snapshot_each_creation(
    service: MetadataService, count: int, *, partitions: int
) -> list[SnapshotInfo]:
    """With a snapshot every byte, create `count` topics, each followed by its snapshot."""
    _set_cluster(service, SNAPSHOT_BYTES_KEY, "1")
    snapshotter = _snapshotter(service)
    written = []
    for n in range(count):
        snapshotter.wait()
        _create(service, f"t{n}", partitions=partitions)
        info = snapshotter.wait()
        assert info is not None
        written.append(info)
    return written


def test_the_byte_policy_takes_snapshots_and_retention_keeps_the_newest(
    tmp_path: Path, database_url: str
) -> None:
    log_dir = tmp_path / "log"
    with _open(log_dir, database_url, retention=2) as service:
        _register(service, 1, 2)
        assert SnapshotStore(database_url).snapshots() == []
        offsets = [info.offset for info in _snapshot_each_creation(service, 4, partitions=1)]
        assert offsets[-1] == service.image.provenance.offset
    with SnapshotStore(database_url) as store:
        kept = store.snapshots()
        assert [s.offset for s in kept][-2:] == offsets[-2:]
        assert all(store.verify(s.id).ok for s in kept)
        # The newest are increments; what else is kept is the chain they load from.
        assert [s.chain_length for s in kept] == list(range(len(kept)))
        assert all(s.base_id == b.id for s, b in zip(kept[1:], kept, strict=False))


@pytest.mark.parametrize("runner", [ThreadRunner, ForkedRunner])
def test_retention_by_bytes_keeps_the_newest_full_snapshots_that_fit(
    tmp_path: Path, database_url: str, runner: type[SnapshotRunner]
) -> None:
    log_dir = tmp_path / "log"
    with _open(log_dir, database_url, retention_bytes=0, max_chain=0, runner=runner()) as service:
        _register(service, 1, 2)
        written = _snapshot_each_creation(service, 3, partitions=2)
        assert all((info.content_bytes or 0) > 0 for info in written)
    with SnapshotStore(database_url) as store:
        # A bound of 0 bytes keeps the newest alone, whatever its size.
        assert [s.id for s in store.snapshots()] == [written[-1].id]


@pytest.mark.parametrize("runner", [ThreadRunner, ForkedRunner])
def test_increments_are_chained_up_to_max_chain_then_a_full_snapshot(
    tmp_path: Path, database_url: str, runner: type[SnapshotRunner]
) -> None:
    # In a forked child (as `mlog serve` writes them) the base image is the child's copy.
    log_dir = tmp_path / "log"
    with _open(log_dir, database_url, retention=2, max_chain=2, runner=runner()) as service:
        _register(service, 1, 2)
        for n in range(40):
            _create(service, f"t{n}", partitions=4)
        snapshotter = _snapshotter(service)
        written = []
        for n in range(6):
            _create(service, f"u{n}", partitions=2)
            info = snapshotter.request(service.image, service.log).result()
            assert info is not None
            written.append(info)
        before = service.image
    assert [i.chain_length for i in written] == [0, 1, 2, 0, 1, 2]
    assert [i.base_id for i in written[3:]] == [None, written[3].id, written[4].id]
    with SnapshotStore(database_url) as store:
        # Retention keeps the newest two and the full snapshot they are written on.
        assert [s.id for s in store.snapshots()] == [w.id for w in written[3:]]
        increment = store.get(written[-1].id)
        assert sum(store.count_rows(increment.id).values()) < 10
    with _open(log_dir, database_url) as service:
        started = _snapshotter(service).started_from
        assert started is not None and started.id == written[-1].id
        assert service.image == before == _replayed(log_dir)


def test_the_byte_policy_counts_uncompressed_record_bytes_and_the_backlog_at_restart(
    tmp_path: Path, database_url: str
) -> None:
    log_dir = tmp_path / "log"
    with _open(log_dir, database_url) as service:
        _register(service, 1, 2)
        for n in range(20):
            _create(service, f"t{n:02d}", partitions=4)
        appended = service.log.record_bytes_appended
        # Every entry counts at its uncompressed size, whatever snappy makes of it on disk.
        assert appended > 0
        assert appended == service.log.record_bytes_after(-1)
        assert service.log.record_bytes_after(-1, limit=10) >= 10
        # A threshold just above what was written: not due yet; after a restart, the entries
        # already in the log still count towards it.
        _set_cluster(service, SNAPSHOT_BYTES_KEY, str(appended * 2))
        assert not _snapshotter(service).due(service.image, service.log)
    with _open(log_dir, database_url) as service:
        snapshotter = _snapshotter(service)
        assert snapshotter.started_from is None
        assert not snapshotter.due(service.image, service.log)
        for n in range(20, 45):
            _create(service, f"t{n:02d}", partitions=4)
        info = snapshotter.wait()
        assert info is not None, "the backlog from before the restart plus new entries is due"


def test_the_cadence_is_the_key_or_the_image_s_size_in_records_if_less() -> None:
    key = 20 * 2**20
    assert cadence_bytes(key, 0) == MIN_CADENCE_BYTES  # an empty image: the floor
    assert cadence_bytes(key, 110_000) == 110_000 * RECORD_BYTES  # 100k partitions: ~7 MiB
    assert cadence_bytes(key, 1_100_000) == key  # 1M partitions: the key
    assert cadence_bytes(1000, 1_100_000) == 1000  # a key below the floor still rules
    assert cadence_bytes(key, 2**31 - 1) == key


def test_a_small_image_is_snapshotted_once_its_own_size_of_records_is_appended(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "log"
    with _open(log_dir, database_url) as service:
        snapshotter = _snapshotter(service)
        _register(service, 1, 2)
        _create(service, "first", partitions=8)
        first = snapshotter.request(service.image, service.log).result()
        assert first is not None
        assert first.record_count >= image_records(service.image)
        assert snapshotter.measured_records == first.record_count
        # The floor off, so a test-sized image shows the rule: the key (20 MiB) is not reached.
        monkeypatch.setattr(snapshots, "MIN_CADENCE_BYTES", 0)
        since = service.log.record_bytes_appended
        n = 0
        while snapshotter.written is first:
            _create(service, f"t{n:03d}", partitions=2)
            snapshotter.wait()
            n += 1
            assert n < 200, "no snapshot by the image-sized cadence"
        appended = service.log.record_bytes_appended - since
        assert first.record_count * RECORD_BYTES <= appended < 20 * 2**20


def test_a_start_from_the_log_alone_measures_the_image_it_replayed(tmp_path: Path) -> None:
    log_dir = tmp_path / "log"
    with _open(log_dir, sqlite_url(tmp_path / "snapshots.db")) as service:
        _register(service, 1, 2)
        _create(service, "a", partitions=8)
        _create(service, "b", partitions=3)
        assert image_records(service.image) == 2 + 11
        assert _snapshotter(service).measured_records == 0  # started from an empty log
    with _open(log_dir, sqlite_url(tmp_path / "snapshots.db")) as service:
        assert _snapshotter(service).started_from is None
        assert _snapshotter(service).measured_records == 13


def test_the_interval_policy_needs_new_entries(tmp_path: Path, database_url: str) -> None:
    clock = Clock()
    with _open(tmp_path / "log", database_url, clock) as service:
        _register(service, 1, 2)
        snapshotter = _snapshotter(service)
        assert snapshotter.wait() is None  # nothing due yet
        _set_cluster(service, SNAPSHOT_INTERVAL_KEY, "60000")
        clock.now += 60_000
        _create(service, "t", partitions=1)
        info = snapshotter.wait()
        assert info is not None and info.offset == service.image.provenance.offset
        clock.now += 120_000
        assert not snapshotter.due(service.image, service.log)  # no entry since
        _set_cluster(service, SNAPSHOT_INTERVAL_KEY, "0")
        clock.now += 10**9
        _create(service, "u", partitions=1)
        assert not snapshotter.due(service.image, service.log)  # 0 = no time limit


def test_a_database_that_is_down_costs_a_full_replay_and_is_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log_dir = tmp_path / "log"
    with MetadataService.open(log_dir) as service:
        _register(service, 1, 2)
        _create(service, "t")
    missing_dir = tmp_path / "not-yet"
    url = f"sqlite:///{missing_dir / 'snapshots.db'}"
    clock = Clock()
    caplog.set_level(logging.WARNING)
    with _open(log_dir, url, clock, retry_ms=30_000) as service:
        assert service.image == _replayed(log_dir)
        assert "replaying the whole log" in caplog.text
        snapshotter = _snapshotter(service)
        _set_cluster(service, SNAPSHOT_BYTES_KEY, "1")
        assert not snapshotter.due(service.image, service.log)  # waiting to retry
        missing_dir.mkdir()
        clock.now += 30_000
        _create(service, "u")
        info = snapshotter.wait()
        assert info is not None
        assert snapshotter.last_error is None


def test_a_schema_behind_is_a_warning_and_ahead_is_refused(
    tmp_path: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    log_dir = tmp_path / "log"
    with _open(log_dir, database_url) as service:
        _register(service, 1)
    # the code pretends to know a revision newer than any the database has seen (Alembic's
    # head, and the one recognised without Alembic)
    monkeypatch.setattr(schema, "head_revision", lambda: "9999")
    monkeypatch.setattr(revision, "HEAD_REVISION", "9999")
    caplog.set_level(logging.WARNING)
    with _open(log_dir, database_url) as service:
        assert "db upgrade" in caplog.text
        assert service.image == _replayed(log_dir)
    monkeypatch.setattr(schema, "head_revision", lambda: "0000")
    monkeypatch.setattr(revision, "HEAD_REVISION", "0000")
    monkeypatch.setattr(schema, "script_directory", _only_revision("0000"))
    with pytest.raises(SchemaAheadError, match="upgrade metadata-log"):
        _open(log_dir, database_url)
    monkeypatch.undo()
    with _open(log_dir, database_url) as service:  # the lock was released
        assert service.image == _replayed(log_dir)


def _only_revision(revision: str) -> object:
    class _Script:
        def __init__(self) -> None:
            self.revision = revision

    class _Scripts:
        def walk_revisions(self) -> list[_Script]:
            return [_Script()]

    return _Scripts


async def test_snapshots_go_on_beside_concurrent_submits(tmp_path: Path, database_url: str) -> None:
    log_dir = tmp_path / "log"
    service = _open(log_dir, database_url)
    _register(service, 1, 2, 3)
    _set_cluster(service, SNAPSHOT_BYTES_KEY, "1")

    async def create(n: int) -> None:
        topic = CreatableTopic(name=f"c{n}", num_partitions=2, replication_factor=2)
        (result,) = await service.submit(
            functools.partial(service.controller.create_topics, topics=[topic])
        )
        assert result.outcome.ok

    await asyncio.gather(*(create(n) for n in range(60)))
    await service.aclose()
    with (
        SnapshotStore(database_url) as store,
        LogReader.open(log_dir) as log,
    ):
        infos = store.snapshots()
        assert infos
        for info in infos:
            assert store.load(info.id) == load_image(log, lte=info.offset)


def test_commits_go_on_while_the_first_snapshot_opens_the_store(tmp_path: Path) -> None:
    """The worker opens the store (creates the database, migrates it) with the loop's lock free."""
    database = tmp_path / "snapshots.db"
    opening = threading.Event()
    release = threading.Event()

    def slow_open() -> SnapshotStore:
        opening.set()
        release.wait(30)
        return SnapshotStore(sqlite_url(database))

    snapshotter = Snapshotter(slow_open, file=database)
    with MetadataService.open(tmp_path / "log", snapshots=snapshotter) as service:
        _set_cluster(service, SNAPSHOT_BYTES_KEY, "1")
        assert opening.wait(30)  # the first snapshot is opening the store on the worker
        # What the event loop does after each commit: ask whether a snapshot is due.
        commit = threading.Thread(target=snapshotter.committed, args=(service.image, service.log))
        try:
            commit.start()
            commit.join(timeout=20)
            assert not commit.is_alive(), "a commit waited for the store to open"
        finally:
            release.set()
            commit.join()
        info = snapshotter.wait()
        assert info is not None and database.exists()


def test_the_settings_chain_length_reaches_the_snapshotter(tmp_path: Path) -> None:
    settings = load_settings(data_dir=str(tmp_path), env={"MLOG_SNAPSHOT_MAX_CHAIN": "0"})
    assert open_snapshotter(settings).max_chain == 0
    assert open_snapshotter(load_settings(data_dir=str(tmp_path), env={})).max_chain == 8


def test_the_settings_byte_bound_reaches_the_snapshotter(tmp_path: Path) -> None:
    env = {"MLOG_SNAPSHOT_RETENTION_BYTES": "1048576"}
    assert open_snapshotter(load_settings(data_dir=str(tmp_path), env=env)).retention_bytes == (
        1048576
    )
    assert open_snapshotter(load_settings(data_dir=str(tmp_path), env={})).retention_bytes is None
