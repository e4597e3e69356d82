"""The Alembic migrations, on SQLite and PostgreSQL: one head, no drift, down and up again."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from sqlalchemy import CheckConstraint, create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from replay.sql import revision, schema
from replay.sql.models import METADATA
from replay.sql.schema import SchemaState
from replay.sql.store import SnapshotStore


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def test_one_linear_history_with_a_single_head() -> None:
    scripts = schema.script_directory()
    assert len(scripts.get_heads()) == 1
    revisions = list(scripts.walk_revisions())
    assert revisions[0].revision == schema.head_revision()
    assert revisions[-1].down_revision is None
    for newer, older in itertools.pairwise(revisions):
        assert newer.down_revision == older.revision


def test_the_environment_is_found_in_the_installed_package() -> None:
    location = Path(schema.migrations_location())
    assert (location / "env.py").is_file()
    assert (location / "versions").is_dir()


def test_upgrade_an_empty_database_then_no_drift(database_url: str) -> None:
    with SnapshotStore(database_url) as store:
        assert store.status().state is SchemaState.EMPTY
        before, after = store.upgrade()
        assert before.revision is None
        assert after.state is SchemaState.CURRENT
        assert store.drift() == []
    assert set(METADATA.tables) <= _tables(database_url)


def test_downgrade_and_upgrade_round_trip(database_url: str) -> None:
    with SnapshotStore(database_url) as store:
        store.upgrade()
        after_down = store.downgrade("base")
        assert after_down.state is SchemaState.EMPTY
        assert not set(METADATA.tables) & _tables(database_url)
        _, after_up = store.upgrade()
        assert after_up.state is SchemaState.CURRENT
        assert store.drift() == []


def test_drift_is_detected(database_url: str) -> None:
    with SnapshotStore(database_url) as store:
        store.upgrade()
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP INDEX ix_snapshots_log_offset")
    finally:
        engine.dispose()
    with SnapshotStore(database_url) as store:
        assert any("ix_snapshots_log_offset" in d for d in store.drift())


def test_models_created_directly_match_the_migrations(tmp_path: Path) -> None:
    # A database built from the models (as a new one is: replay/sql/new_schema.py) must hold
    # exactly what the migrations build, seen through the same comparison.
    url = f"sqlite:///{tmp_path / 'models.db'}"
    engine = create_engine(url)
    try:
        METADATA.create_all(engine)
        with engine.connect() as conn:
            assert schema.drift(conn) == []
            assert schema.schema_status(conn).state is SchemaState.UNMANAGED
    finally:
        engine.dispose()


def test_0002_keeps_the_rows_and_still_refuses_an_unknown_mode(database_url: str) -> None:
    row = "(1, 'AAAAAAAAAAAAAAAAAAAAAA', 0, '[1]', '[1]', '[]', '[]', 1, 0, 0, '{mode}')"
    with SnapshotStore(database_url) as store:
        store.upgrade("0001")
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO snapshot_partitions VALUES " + row.format(mode="READ_ONLY")
            )
        with SnapshotStore(database_url) as store:
            _, after = store.upgrade()
            assert after.state is SchemaState.CURRENT
            assert store.drift() == []
        with engine.connect() as conn:
            modes = conn.exec_driver_sql("SELECT mode FROM snapshot_partitions").scalars()
            assert list(modes) == ["READ_ONLY"]
            checks = inspect(conn).get_check_constraints("snapshot_partitions")
            (text,) = [c["sqltext"] for c in checks if "mode" in (c["name"] or "")]
            assert " IN " not in text.upper() and text.count(" OR ") == 2
        for bad in ("WRITE_ONLY", "read_only"):
            try:
                with engine.begin() as conn:
                    conn.exec_driver_sql(
                        "INSERT INTO snapshot_partitions VALUES " + row.format(mode=bad)
                    )
            except IntegrityError:
                continue
            raise AssertionError(f"mode {bad!r} was accepted")
    finally:
        engine.dispose()


def test_the_head_known_without_alembic_is_alembics_head() -> None:
    # The store recognises an up-to-date database from this constant, without Alembic.
    assert schema.head_revision() == revision.HEAD_REVISION


def test_0003_adds_the_security_tables_and_its_downgrade_drops_only_them(
    database_url: str,
) -> None:
    security = {"snapshot_acls", "snapshot_scram_credentials"}
    row = "(1, 'AAAAAAAAAAAAAAAAAAAAAA', 0, '[1]', '[1]', '[]', '[]', 1, 0, 0, 'READ_WRITE')"
    with SnapshotStore(database_url) as store:
        store.upgrade("0002")
    assert not security & _tables(database_url)
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO snapshot_partitions VALUES " + row)
        with SnapshotStore(database_url) as store:
            _, after = store.upgrade()
            assert after.revision == revision.HEAD_REVISION and store.drift() == []
        assert security <= _tables(database_url)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO snapshot_scram_credentials VALUES "
                    "(1, 'alice', 'SCRAM_SHA_256', :salt, :key, :key, 4096)"
                ),
                {"salt": b"\x00salt", "key": b"k" * 32},
            )
            stored = conn.exec_driver_sql("SELECT salt FROM snapshot_scram_credentials").scalar()
            assert stored is not None and bytes(stored) == b"\x00salt"
        with SnapshotStore(database_url) as store:
            assert store.downgrade("0002").revision == "0002"
        assert not security & _tables(database_url)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM snapshot_partitions").scalar() == 1
        with SnapshotStore(database_url) as store:
            _, again = store.upgrade()
            assert again.state is SchemaState.CURRENT and store.drift() == []
    finally:
        engine.dispose()


def test_0004_adds_the_client_writes_table_and_its_downgrade_drops_only_it(
    database_url: str,
) -> None:
    with SnapshotStore(database_url) as store:
        store.upgrade("0003")
    assert "snapshot_client_writes" not in _tables(database_url)
    engine = create_engine(database_url)
    try:
        with SnapshotStore(database_url) as store:
            _, after = store.upgrade("0004")
            assert after.revision == "0004"
        assert "snapshot_client_writes" in _tables(database_url)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO snapshot_client_writes VALUES "
                    "(1, 'AAAAAAAAAAAAAAAAAAAAAA', 0, 9007199254740993, NULL, 19, :answer)"
                ),
                {"answer": b"\x00answer"},
            )
            row = conn.exec_driver_sql(
                "SELECT sequence, response FROM snapshot_client_writes"
            ).one()
            assert row[0] == 9007199254740993 and bytes(row[1]) == b"\x00answer"
        with SnapshotStore(database_url) as store:
            assert store.downgrade("0003").revision == "0003"
        assert "snapshot_client_writes" not in _tables(database_url)
        assert "snapshot_acls" in _tables(database_url)
        with SnapshotStore(database_url) as store:
            _, again = store.upgrade()
            assert again.state is SchemaState.CURRENT and store.drift() == []
    finally:
        engine.dispose()


def test_the_models_keys_and_checks_are_the_migrations(database_url: str) -> None:
    # Alembic's comparison (drift) sees neither primary keys nor CHECK constraints: the models
    # and the migrations could disagree on them unseen.
    with SnapshotStore(database_url) as store:
        store.upgrade()
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:
            inspector = inspect(conn)
            for name, table in METADATA.tables.items():
                keys = inspector.get_pk_constraint(name)["constrained_columns"]
                assert keys == [c.name for c in table.primary_key.columns], name
                built = {
                    c["name"]: sorted(re.findall(r"'(\w+)'", c["sqltext"]))
                    for c in inspector.get_check_constraints(name)
                }
                modelled = {
                    c.name: sorted(re.findall(r"'(\w+)'", str(c.sqltext)))
                    for c in table.constraints
                    if isinstance(c, CheckConstraint)
                }
                assert built == modelled, name
    finally:
        engine.dispose()
