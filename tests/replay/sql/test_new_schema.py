"""A new database's schema made without Alembic is the migrations' schema, on both databases."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, text

from replay.sql import revision, schema
from replay.sql.errors import SchemaError
from replay.sql.revision import VERSION_TABLE, SchemaState, SchemaStatus
from replay.sql.store import SnapshotStore


def _described(url: str) -> dict[str, Any]:
    """Every table of the database as reflection sees it, and its revision row."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            seen = inspect(conn)
            tables: dict[str, Any] = {}
            for name in sorted(seen.get_table_names()):
                tables[name] = {
                    "columns": [
                        (c["name"], str(c["type"]), c["nullable"], c.get("default"))
                        for c in seen.get_columns(name)
                    ],
                    "key": seen.get_pk_constraint(name),
                    "indexes": sorted(
                        (i["name"], tuple(i["column_names"]), i["unique"])
                        for i in seen.get_indexes(name)
                    ),
                    "checks": sorted(
                        (c["name"], c["sqltext"]) for c in seen.get_check_constraints(name)
                    ),
                    "uniques": sorted(
                        (u["name"], tuple(u["column_names"]))
                        for u in seen.get_unique_constraints(name)
                    ),
                    "foreign": seen.get_foreign_keys(name),
                }
            versions = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).all()
            return {"tables": tables, "versions": [v[0] for v in versions]}
    finally:
        engine.dispose()


def _emptied(url: str) -> None:
    """Every snapshot table and the version table dropped: a new database again."""
    with SnapshotStore(url) as store:
        store.downgrade("base")
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(f"DROP TABLE {VERSION_TABLE}"))
    finally:
        engine.dispose()


def test_the_schema_made_without_alembic_is_the_migrations(database_url: str) -> None:
    with SnapshotStore(database_url) as store:
        store.upgrade()  # every migration, from 0001
    migrated = _described(database_url)
    _emptied(database_url)
    with SnapshotStore(database_url) as store:
        assert store.ensure_schema()  # a new database: created at the head directly
    created = _described(database_url)
    assert created == migrated
    assert created["versions"] == [revision.HEAD_REVISION]
    engine = create_engine(database_url)
    try:
        with engine.connect() as conn:  # and Alembic reads it as its own
            assert schema.schema_status(conn).state is SchemaState.CURRENT
            assert schema.drift(conn) == []
    finally:
        engine.dispose()


def test_a_database_with_an_empty_version_table_is_new(database_url: str) -> None:
    # What `mlog db downgrade base` leaves: no snapshot table, a version table without a row.
    with SnapshotStore(database_url) as store:
        store.upgrade()
        store.downgrade("base")
    with SnapshotStore(database_url) as store:
        assert store.ensure_schema()
        assert store.status().state is SchemaState.CURRENT


def test_tables_without_a_revision_are_not_taken_for_a_new_database(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        with engine.begin() as conn:
            conn.execute(text("CREATE TABLE snapshots (id INTEGER)"))
    finally:
        engine.dispose()
    with SnapshotStore(database_url) as store:
        assert store.status().state is SchemaState.UNMANAGED
        with pytest.raises(SchemaError, match="carry no Alembic revision"):
            store.ensure_schema()


def test_a_schema_another_process_made_meanwhile_is_taken(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with SnapshotStore(database_url) as first:
        assert first.ensure_schema()
    with SnapshotStore(database_url) as second:
        # `second` looked just before `first` created the schema: it found the database new,
        # so its own creation fails (the head is stamped already) and is rolled back.
        real_at_head = second._at_head
        looked: list[bool] = []

        def at_head() -> SchemaStatus | None:
            looked.append(True)
            return None if len(looked) == 1 else real_at_head()

        new = SchemaStatus(state=SchemaState.EMPTY, revision=None, head=revision.HEAD_REVISION)
        monkeypatch.setattr(second, "_at_head", at_head)
        monkeypatch.setattr(second, "_new", lambda: new)
        assert second.ensure_schema()
        assert len(looked) == 2  # before, and after the creation that failed
    assert _described(database_url)["versions"] == [revision.HEAD_REVISION]


_CREATE = """
import sys
from replay.sql.store import SnapshotStore
with SnapshotStore(sys.argv[1]) as store:
    assert store.ensure_schema()
print("alembic" in sys.modules)
"""


_RACE = """
import sys
from replay.sql.store import SnapshotStore
with SnapshotStore(sys.argv[1]) as s:
    print(s.ensure_schema(), s.status().state.name)
"""


def test_processes_creating_one_new_database_at_once_all_go_on(database_url: str) -> None:
    racing = [
        subprocess.Popen(
            [sys.executable, "-c", _RACE, database_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    answers = [process.communicate(timeout=120) for process in racing]
    assert [(out.strip(), err) for out, err in answers] == [("True CURRENT", "")] * len(racing)
    assert _described(database_url)["versions"] == [revision.HEAD_REVISION]


def test_creating_a_new_database_imports_no_alembic(database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CREATE, database_url],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert done.stdout.strip() == "False"
