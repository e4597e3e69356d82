"""The SQL snapshot store on SQLite and PostgreSQL: snapshot + tail == replay from offset 0."""

from __future__ import annotations

import contextlib
import gc
import os
import random
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from metadata_log.reader import LogReader
from records.model import ScramMechanism
from replay.image import EMPTY_IMAGE
from replay.loader import load_image
from replay.map_nodes import nodes_of, untracking_available
from replay.sql import partition_runs, schema
from replay.sql.errors import (
    SchemaAheadError,
    SchemaBehindError,
    SnapshotChecksumError,
    SnapshotNotFoundError,
    SnapshotStoreError,
)
from replay.sql.store import SnapshotStore
from replay.timetravel import image_at, travel
from tests.support.sql_backends import execute_sql, write_generated_log


@pytest.fixture
def store(database_url: str) -> Iterator[SnapshotStore]:
    with SnapshotStore(database_url) as opened:
        yield opened


@pytest.mark.parametrize("seed", [11, 12])
def test_snapshot_plus_tail_equals_replay_from_zero(
    tmp_path: Path, store: SnapshotStore, seed: int
) -> None:
    end = write_generated_log(
        tmp_path / "log",
        seed=seed,
        batches=500,
        cancels=True,
        security=True,
        client_writes=True,
    )
    rng = random.Random(seed)
    with LogReader.open(tmp_path / "log") as log:
        snapshot_offsets = sorted(rng.sample(range(end), 6))
        for offset in snapshot_offsets:
            info = store.write(load_image(log, lte=offset))
            assert info.offset == offset
        assert [s.offset for s in store.snapshots()] == snapshot_offsets
        targets = snapshot_offsets + rng.sample(range(-1, end), 25) + [end - 1]
        for target in targets:
            expected = load_image(log, lte=target) if target >= 0 else EMPTY_IMAGE
            result = travel(log, store, at_offset=target)
            assert result.image == expected, f"offset {target}"
            assert list(result.image.write()) == list(expected.write())
            used = [o for o in snapshot_offsets if o <= target]
            assert (result.snapshot.offset if result.snapshot else None) == (
                used[-1] if used else None
            )
            assert result.replayed == target - (used[-1] if used else -1)
        for info in store.snapshots():
            loaded = store.load(info.id)
            assert loaded == load_image(log, lte=info.offset)
            assert store.verify(info.id).ok


def test_every_area_round_trips(tmp_path: Path, store: SnapshotStore) -> None:
    end = write_generated_log(
        tmp_path / "log", seed=7, batches=900, cancels=True, security=True, client_writes=True
    )
    with LogReader.open(tmp_path / "log") as log:
        image = load_image(log)
    assert image.namespaces.by_name
    assert len(image.client_writes) == 4  # the generator's four clients, each's last write
    assert {w.principal for w in image.client_writes.ordered()} <= {None, "User:alice"}
    assert any(t.pending_deletion for t in image.topics.by_id.values())
    assert image.configs.resources
    assert len(image.acls.by_id) > 5
    assert {m for _, m in image.scram.credentials} == {
        ScramMechanism.SCRAM_SHA_256,
        ScramMechanism.SCRAM_SHA_512,
    }
    info = store.write(image)
    assert info.record_count == len(list(image.write()))
    assert store.load(info.id) == image
    assert end == image.provenance.offset + 1


@pytest.mark.skipif(
    not (untracking_available() and partition_runs.available()), reason="compiled helpers"
)
def test_a_loaded_image_leaves_its_records_and_map_nodes_out_of_the_collector(
    tmp_path: Path, store: SnapshotStore
) -> None:
    # They can be in no cycle: the first young collection after a load does not walk them.
    write_generated_log(tmp_path / "log", seed=8, batches=200)
    with LogReader.open(tmp_path / "log") as log:
        info = store.write(load_image(log))
    loaded = store.load(info.id)
    partitions = [p for t in loaded.topics.by_id.values() for p in t.partitions]
    nodes = nodes_of(loaded.topics.by_id) + nodes_of(loaded.topics.by_name)
    assert partitions and nodes
    assert not [type(o).__name__ for o in [*partitions, *nodes] if gc.is_tracked(o)][:3]


def test_a_changed_row_fails_the_checksum_and_time_travel_falls_back(
    tmp_path: Path, database_url: str, store: SnapshotStore
) -> None:
    end = write_generated_log(tmp_path / "log", seed=3, batches=300, cancels=True, security=True)
    with LogReader.open(tmp_path / "log") as log:
        older = store.write(load_image(log, lte=end // 2))
        newer = store.write(load_image(log))
        execute_sql(
            database_url,
            f"UPDATE snapshot_partitions SET mode = 'NONE' WHERE snapshot_id = {newer.id}",
        )
        with pytest.raises(SnapshotChecksumError, match="does not match its checksum"):
            store.load(newer.id)
        result = store.verify(newer.id)
        assert not result.ok
        assert store.verify(older.id).ok
        fallback = travel(log, store)
        assert fallback.snapshot == older
        assert any("checksum" in reason for reason in fallback.skipped)
        assert fallback.image == load_image(log)


def test_a_snapshot_of_another_log_is_not_used(tmp_path: Path, store: SnapshotStore) -> None:
    write_generated_log(tmp_path / "a", seed=1, batches=200, security=True)
    write_generated_log(tmp_path / "b", seed=2, batches=200, security=True)
    with LogReader.open(tmp_path / "a") as log_a:
        store.write(load_image(log_a))
    with LogReader.open(tmp_path / "b") as log_b:
        result = travel(log_b, store)
        assert result.snapshot is None
        assert result.image == load_image(log_b)


def test_list_ranges_get_delete_and_retention(tmp_path: Path, store: SnapshotStore) -> None:
    write_generated_log(tmp_path / "log", seed=4, batches=100)
    with LogReader.open(tmp_path / "log") as log:
        infos = [store.write(load_image(log, lte=o)) for o in (10, 20, 30, 40, 50)]
    assert [s.offset for s in store.snapshots(gt=10, lte=40)] == [20, 30, 40]
    assert [s.offset for s in store.snapshots(desc=True, limit=2)] == [50, 40]
    assert store.newest(lte=35) == infos[2]
    assert store.get(infos[0].id) == infos[0]
    store.delete(infos[0].id)
    with pytest.raises(SnapshotNotFoundError, match="snapshot list"):
        store.get(infos[0].id)
    deleted = store.retain(2)
    assert [s.offset for s in deleted] == [30, 20]
    assert [s.offset for s in store.snapshots()] == [40, 50]
    with pytest.raises(SnapshotStoreError, match="at least 1"):
        store.retain(0)
    assert store.retain(1) == [infos[3]]
    assert store.count_rows(infos[4].id)["snapshot_features"] == 1


def test_an_empty_image_is_not_written(store: SnapshotStore) -> None:
    with pytest.raises(SnapshotStoreError, match="empty"):
        store.write(EMPTY_IMAGE)


def test_schema_ahead_is_refused_and_behind_is_reported(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SnapshotStore(database_url) as store:
        store.ensure_schema()
    execute_sql(database_url, "UPDATE alembic_version SET version_num = 'f00d'")
    with SnapshotStore(database_url) as store:
        with pytest.raises(SchemaAheadError, match="newer version wrote it"):
            store.ensure_schema()
        with pytest.raises(SchemaAheadError):
            store.upgrade()
    execute_sql(database_url, "UPDATE alembic_version SET version_num = '0001'")
    monkeypatch.setattr(schema, "head_revision", lambda: "0002")
    with SnapshotStore(database_url) as store, pytest.raises(SchemaBehindError, match="db upgrade"):
        store.ensure_schema()


def test_a_reader_does_not_create_a_missing_sqlite_file(tmp_path: Path) -> None:
    write_generated_log(tmp_path / "log", seed=6, batches=50)
    path = tmp_path / "nothing-here.db"
    with (
        SnapshotStore(f"sqlite:///{path}", create=False) as store,
        LogReader.open(tmp_path / "log") as log,
    ):
        assert store.missing()
        assert image_at(log, store) == load_image(log)
    assert not path.exists()


def _modes(directory: Path, name: str) -> dict[str, int]:
    return {
        p.name: stat.S_IMODE(p.stat().st_mode)
        for p in directory.iterdir()
        if p.name.startswith(name)
    }


@pytest.mark.parametrize("umask", [0o000, 0o022], ids=["umask-000", "umask-022"])
def test_the_sqlite_files_are_0600_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    write_generated_log(tmp_path / "log", seed=7, batches=20)
    old = os.umask(umask)
    try:
        with (
            SnapshotStore(f"sqlite:///{tmp_path / 'snapshots.db'}") as store,
            LogReader.open(tmp_path / "log") as log,
        ):
            store.write(load_image(log))
            written = _modes(tmp_path, "snapshots.db")
        with SnapshotStore(f"sqlite:///{tmp_path / 'snapshots.db'}", create=False) as reader:
            assert len(reader.snapshots()) == 1
            read = _modes(tmp_path, "snapshots.db")
    finally:
        os.umask(old)
    # While a connection is open in WAL mode, SQLite keeps the -wal and -shm files.
    assert set(written) == {"snapshots.db", "snapshots.db-wal", "snapshots.db-shm"}
    assert set(written.values()) == {0o600}
    assert set(read) >= {"snapshots.db", "snapshots.db-shm"}
    assert set(read.values()) == {0o600}


@contextlib.contextmanager
def _unwritable(directory: Path) -> Iterator[None]:
    """`directory` (and what is in it) cannot be written, or the test is skipped.

    chmod is enough for other users; root needs the immutable attribute (chattr +i), which
    not every file system has.
    """
    paths = [directory, *directory.iterdir()]
    modes = {p: p.stat().st_mode for p in paths}
    for p in paths:
        p.chmod(0o555 if p.is_dir() else 0o444)
    immutable = False
    try:
        probe = directory / "probe"
        try:
            probe.touch()
        except OSError:
            pass
        else:
            probe.unlink()
            try:
                chattr = subprocess.run(
                    ["chattr", "+i", *map(str, paths)], check=False, capture_output=True
                )
            except FileNotFoundError:
                pytest.skip("cannot make a directory unwritable here (root without chattr)")
            immutable = chattr.returncode == 0
            if not immutable:
                pytest.skip("cannot make a directory unwritable here (root without chattr +i)")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", *map(str, paths)], check=True)
        for p, mode in modes.items():
            p.chmod(mode)


def test_a_reader_of_an_unwritable_sqlite_directory_uses_its_snapshots(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_generated_log(tmp_path / "log", seed=6, batches=50)
    data = tmp_path / "db"
    data.mkdir()
    url = f"sqlite:///{data / 'snapshots.db'}"
    with LogReader.open(tmp_path / "log") as log:
        image = load_image(log)
        with SnapshotStore(url) as writer:
            info = writer.write(image)
        with _unwritable(data), SnapshotStore(url, create=False) as reader:
            result = travel(log, reader, at_offset=image.provenance.offset)
            assert result.snapshot is not None and result.snapshot.id == info.id
            assert result.image == image
    assert not caplog.records  # no "cannot reach the snapshot database" on every read
    assert sorted(p.name for p in data.iterdir()) == ["snapshots.db"]


def _reads_in_one_transaction(store: SnapshotStore) -> list[str]:
    """Listen to `store`'s engine: each statement it runs, and whether a transaction was open."""
    seen: list[str] = []

    def before(_conn: object, cursor: Any, statement: str, *_args: object) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append("in" if cursor.connection.in_transaction else "outside")

    event.listen(store.engine, "before_cursor_execute", before)
    return seen


def test_every_read_of_a_read_only_sqlite_file_is_one_transaction(tmp_path: Path) -> None:
    # The read-only engine begins its transactions as the writable one does: without that a
    # reader beside a live writer (`mode=ro` with a `-wal`) would read each table at another
    # commit.
    write_generated_log(tmp_path / "log", seed=6, batches=30)
    data = tmp_path / "db"
    data.mkdir()
    url = f"sqlite:///{data / 'snapshots.db'}"
    with LogReader.open(tmp_path / "log") as log:
        image = load_image(log)
    with SnapshotStore(url) as writer:
        info = writer.write(image)
        seen = _reads_in_one_transaction(writer)
        assert writer.load(info.id) == image
        assert seen and set(seen) == {"in"}
    with _unwritable(data), SnapshotStore(url, create=False) as reader:
        assert reader.load(info.id) == image  # switches to the read-only engine
        assert "mode=ro" in str(reader.engine.url)
        seen = _reads_in_one_transaction(reader)
        assert reader.load(info.id) == image
        assert seen and set(seen) == {"in"}


def test_a_store_waits_for_a_lock_or_a_server_as_documented(store: SnapshotStore) -> None:
    # Timeouts no test waits out: read from the driver's connection (docs/snapshots.md).
    with store.engine.connect() as conn:
        if store.is_sqlite:
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
        else:
            dbapi = conn.connection.dbapi_connection
            assert dbapi is not None
            assert dbapi.info.get_parameters()["connect_timeout"] == "10"


def test_bad_urls_are_one_line_errors() -> None:
    with pytest.raises(SnapshotStoreError, match="not a database URL"):
        SnapshotStore("not a url")
    with pytest.raises(SnapshotStoreError, match="cannot use database URL"):
        SnapshotStore("nosuchdb://x/y").status()
