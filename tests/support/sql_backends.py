"""Database fixtures: every snapshot test runs on SQLite and on a real PostgreSQL.

PostgreSQL comes from MLOG_TEST_POSTGRES_URL (default the local `test` database). Each test run
creates a database of its own and drops it at the end; each test gets a fresh schema in it. When
the server cannot be reached the PostgreSQL cases are skipped with the reason, except under
CI=true, where that is a failure: CI must test both backends.

Import the fixtures into a test module: `from sql_backends import database_url, postgres_url`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", "postgresql")


def _libpq(url: str) -> str:
    """A SQLAlchemy URL as a libpq connection URI (what psycopg.connect takes)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The SQLAlchemy URL of a database created for this test run (dropped afterwards)."""
    base = os.environ.get("MLOG_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    try:
        admin = psycopg.connect(_libpq(base), autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        reason = f"PostgreSQL at {make_url(base).render_as_string()} is unreachable: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI=true: both backends must be tested)")
        pytest.skip(f"{reason}; set MLOG_TEST_POSTGRES_URL to test PostgreSQL")
    name = f"mlog_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield make_url(base).set(database=name).render_as_string(hide_password=False)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh schema in the run's database, as a URL whose search_path points at it."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_libpq(postgres_server), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = make_url(postgres_server).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(_libpq(postgres_server), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database: a SQLite file, or a PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'snapshots.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


def execute_sql(url: str, sql: str, **params: object) -> None:
    """Run one statement in a database of the fixtures, as an editor of its rows would."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql), params)
    finally:
        engine.dispose()


def write_generated_log(
    directory: Path,
    *,
    seed: int,
    batches: int,
    cancels: bool = False,
    security: bool = False,
    client_writes: bool = False,
) -> int:
    """A log of `batches` generated batches (one append each, 1 s apart); returns its end.

    `security` adds ACLs and SCRAM credentials, `client_writes` idempotent writes' notes
    (LogGenerator's opt-ins).
    """
    from itertools import count

    from record_gen import LogGenerator

    from metadata_log import MetadataLog

    ticks = count(1_700_000_000_000, 1000)
    with MetadataLog.open(directory, clock_ms=lambda: next(ticks)) as log:
        generator = LogGenerator(
            seed=seed, cancels=cancels, security=security, client_writes=client_writes
        )
        for batch in generator.batches(batches):
            log.append(batch, principal=f"User:gen{seed}")
        return log.end_offset
