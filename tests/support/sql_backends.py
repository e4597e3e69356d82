"""Database fixtures: every snapshot test runs on SQLite and on a real PostgreSQL.

PostgreSQL comes from MLOG_TEST_POSTGRES_URL (default the local `test` database). Each test run
creates a database of its own and drops it at the end; each test gets a fresh schema in it. When
the server cannot be reached the PostgreSQL cases are skipped with the reason, except under
CI=true, where that is a failure: CI must test both backends.

The fixtures (`database_url`, `postgres_url`, `postgres_server`) are tests/conftest.py's; this
module keeps what they share and the helpers of the database tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BACKENDS = ("sqlite", pytest.param("postgresql", marks=pytest.mark.postgres))
"""The `database_url` fixture's parameters: the PostgreSQL case is marked `postgres`."""


def libpq(url: str) -> str:
    """A SQLAlchemy URL as a libpq connection URI (what psycopg.connect takes)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


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

    from metadata_log import MetadataLog
    from tests.support.record_gen import LogGenerator

    ticks = count(1_700_000_000_000, 1000)
    with MetadataLog.open(directory, clock_ms=lambda: next(ticks)) as log:
        generator = LogGenerator(
            seed=seed, cancels=cancels, security=security, client_writes=client_writes
        )
        for batch in generator.batches(batches):
            log.append(batch, principal=f"User:gen{seed}")
        return log.end_offset


class LoadWays:
    """Which way each snapshot load read its partitions: "compiled", or the driver's.

    Loads made through `outcome` take the compiled reader (`replay.sql.partition_runs`) where
    `enabled`, the driver's path otherwise; `ways` says which each load took.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from replay.sql import increments, partition_runs

        self.ways: list[str] = []
        self.enabled = True
        made = partition_runs.partition_runs

        def spied(*args: Any) -> Any:
            runs = made(*args) if self.enabled else None
            self.ways.append("driver" if runs is None else "compiled")
            return runs

        monkeypatch.setattr(increments, "partition_runs", spied)

    def outcome(self, url: str, snapshot_id: int, *, enabled: bool) -> tuple[Any, ...]:
        """The load's computed checksum, verify's error, and the image or the load's error."""
        from replay.sql.errors import SnapshotStoreError
        from replay.sql.store import SnapshotStore

        self.enabled = enabled
        with SnapshotStore(url) as store:
            result = store.verify(snapshot_id)
            try:
                loaded: Any = store.load(snapshot_id)
            except SnapshotStoreError as exc:
                loaded = (type(exc).__name__, str(exc))
        return (result.computed, result.error, loaded)

    def check_chain(self, url: str, log_dir: Path, end: int, *, seed: int, count: int) -> None:
        """A chain of `count` snapshots of the log at random offsets (increments on the first)
        loads the same both ways, each the image at its offset with its checksum."""
        import random

        from metadata_log.reader import LogReader
        from replay.image import EMPTY_IMAGE
        from replay.loader import load_image
        from replay.sql.store import SnapshotStore

        rng = random.Random(seed)
        with LogReader.open(log_dir) as log, SnapshotStore(url) as store:
            written: list[Any] = []
            image = EMPTY_IMAGE
            for offset in sorted(rng.sample(range(end), count)):
                image = load_image(log, lte=offset, base=image)
                written.append((store.write(image, base=written[-1] if written else None), image))
        assert written[-1][0].chain_length > 0
        for info, expected in written:
            both = [self.outcome(url, info.id, enabled=e) for e in (True, False)]
            assert both[0] == both[1]
            assert both[0][2] == expected and both[0][0] == info.checksum
