"""The snapshot store: write, list, load, verify and delete snapshots of the image in SQL.

A snapshot is written in one transaction (the `snapshots` row and every content row) and so
becomes visible only when complete; a writer killed half-way leaves nothing behind. Its checksum
is stored with it and checked on every load. Any SQLAlchemy URL works; SQLite (the default, a
file in the data directory) is written with the driver's `executemany`, PostgreSQL through
psycopg 3 with COPY, anything else with SQLAlchemy Core's executemany.

The store refuses to work on a schema other than its own: an empty database is created on first
use (`create=True`), one that is behind needs `mlog db upgrade`, one that is ahead (written by a
newer metadata-log) is refused. A database at this code's head revision is recognised with one
query; Alembic is imported only to compare any other revision, and to migrate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import (
    Connection,
    Engine,
    Table,
    create_engine,
    delete,
    event,
    func,
    select,
    text,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    NoSuchModuleError,
    SQLAlchemyError,
)

from replay.image import MetadataImage, Provenance
from replay.map_nodes import made_out_of_view
from replay.sql import increments, new_schema, revision, sizes, sqlite_files
from replay.sql.content import (
    ContentChecksum,
    PartitionRowsUnsorted,
    image_rows,
    record_count,
)
from replay.sql.errors import (
    SchemaAheadError,
    SchemaBehindError,
    SchemaError,
    SnapshotChecksumError,
    SnapshotDatabaseDamagedError,
    SnapshotNotFoundError,
    SnapshotStoreError,
    StoreUnavailableError,
)
from replay.sql.info import SnapshotInfo, VerifyResult, check_format, info_of_row
from replay.sql.models import CHANGED_TOPICS, CONTENT_TABLES, FORMAT_VERSION, METADATA, SNAPSHOTS
from replay.sql.partition_runs import RunsUnusable
from replay.sql.revision import VERSION_TABLE, SchemaState, SchemaStatus
from replay.sql.row_io import (
    PACE_ROWS,
    PROGRESS_EVERY,
    Progress,
    paced,
    reporting,
    writer_for,
)

logger = logging.getLogger(__name__)

_SNAPSHOTS = SNAPSHOTS
_TABLES: dict[str, Table] = {t.name: t for t in CONTENT_TABLES}


def parse_url(url: str) -> URL:
    """A database URL, or a SnapshotStoreError that says what a URL looks like."""
    try:
        return make_url(url)
    except ArgumentError:
        raise SnapshotStoreError(
            f"{url!r} is not a database URL; give e.g. sqlite:///path/to/snapshots.db or "
            "postgresql+psycopg://user@host:5432/dbname (--db or MLOG_DATABASE_URL)"
        ) from None


def sqlite_url(path: Path) -> str:
    """The URL of a SQLite database file."""
    return f"sqlite:///{path}"


def _first_line(exc: BaseException) -> str:
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip().splitlines()
    return text[0] if text else type(original).__name__


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C during whose handling `exc` was raised (its context, a few links up), if any."""
    seen: BaseException | None = exc.__context__
    for _ in range(8):
        if seen is None or isinstance(seen, KeyboardInterrupt):
            return seen
        seen = seen.__context__
    return None


_DAMAGE_SQLSTATES = frozenset(("XX001", "XX002"))
"""PostgreSQL's data_corrupted and index_corrupted."""


def _damage(exc: BaseException) -> str | None:
    """The driver's message if `exc` (wrapped by SQLAlchemy or not) says the data is damaged.

    SQLite says SQLITE_CORRUPT ("database disk image is malformed", a damaged page or a cut
    file) or SQLITE_NOTADB (a damaged header); PostgreSQL data_corrupted or index_corrupted.
    """
    original = getattr(exc, "orig", None) or exc
    name = getattr(original, "sqlite_errorname", "") or ""
    if name.startswith("SQLITE_CORRUPT") or name == "SQLITE_NOTADB":
        return _first_line(original)
    if getattr(original, "sqlstate", None) in _DAMAGE_SQLSTATES:
        return _first_line(original)
    return None


class SnapshotStore:
    """Snapshots of the image in one SQL database (open with a URL; close when done).

    Some 550 lines in one class because every method runs on the same engine and its
    error mapping (a database's failure as one `SnapshotStoreError` line): the schema's
    state and migrations, and the snapshots written, listed, loaded, verified and deleted.
    The content as rows is in `content.py` (topics built from them in `topic_builder.py`,
    partition rows read in C by `partition_runs.py`), their fastest I/O per driver in `row_io.py`,
    increments and the reading of a chain in `increments.py`, the tables in `models.py`.
    """

    def __init__(self, url: str, *, create: bool = True) -> None:
        """Bind to the database at `url`; nothing is connected until the first operation.

        With `create`, an empty database gets the schema on first use; without it, the store
        only reads and an empty or missing database simply holds no snapshot.
        """
        self.url = parse_url(url)
        self.create = create
        self.shown_url = self.url.render_as_string(hide_password=True)
        self._engine: Engine | None = None
        self._checked: SchemaStatus | None = None
        self._read_only_url: str | None = None

    # ------------------------------------------------------------------ plumbing

    @property
    def is_sqlite(self) -> bool:
        """Whether the database is SQLite."""
        return self.url.get_backend_name() == "sqlite"

    def sqlite_path(self) -> Path | None:
        """The file of a SQLite database (None for other databases and in-memory SQLite)."""
        if not self.is_sqlite or not self.url.database or self.url.database == ":memory:":
            return None
        return Path(self.url.database)

    def missing(self) -> bool:
        """True for a SQLite file that does not exist yet (a reader then sees no snapshots)."""
        path = self.sqlite_path()
        return path is not None and not path.exists()

    def _absent(self) -> bool:
        """A reader's missing SQLite file: it holds no snapshot, and is neither opened nor made.

        SQLite creates a file it is asked to open, with the umask's mode (0644 under 022): a
        read command (`mlog snapshot list`) must leave a data directory as it found it.
        """
        return not self.create and self.missing()

    @property
    def engine(self) -> Engine:
        """The engine, created on first use."""
        if self._engine is None:
            self._engine = self._create_engine()
        return self._engine

    def _create_engine(self) -> Engine:
        if self._read_only_url is not None:
            return self._create_read_only_engine(self._read_only_url)
        kwargs: dict[str, Any] = {"pool_pre_ping": True}
        url: URL | str = self.url
        if self.is_sqlite:
            kwargs["connect_args"] = {"timeout": 30}
            path = self.sqlite_path()
            if path is not None and self.create:
                sqlite_files.create_private_database(path)
            elif path is not None:
                # A reader opens the file without SQLite's create flag (`mode=rw`): a file
                # removed after `_absent` was asked is an error, never a new 0644 file.
                url = f"sqlite:///file:{quote(str(path.absolute()))}?mode=rw&uri=true"
        elif self.url.get_backend_name() == "postgresql":
            kwargs["connect_args"] = {"connect_timeout": 10}
        try:
            engine = create_engine(url, **kwargs)
        except (NoSuchModuleError, ArgumentError, ImportError) as exc:
            raise SnapshotStoreError(
                f"cannot use database URL {self.shown_url}: {_first_line(exc)}; use "
                "sqlite:///PATH or postgresql+psycopg://USER@HOST/DB"
            ) from None
        if self.is_sqlite:
            event.listen(engine, "connect", sqlite_files.connect)
            event.listen(engine, "begin", sqlite_files.begin)
        return engine

    def _use_read_only_file(self) -> bool:
        """For a reader of a SQLite file it cannot write beside: read it read-only instead.

        A reader (`create=False`) of a data directory it may not write (a read-only mount, an
        archive) cannot create the `-shm` file WAL mode wants, so every read used to warn and
        replay the whole log. SQLite opens such a file with `mode=ro` when the `-wal` and
        `-shm` files are there, and with `immutable=1` when there is no `-wal` (the writer
        closed cleanly, so the main file holds everything). With a `-wal` it cannot read, the
        error stands. Returns whether the engine was switched (once).
        """
        path = self.sqlite_path()
        if self.create or path is None or self._read_only_url is not None or not path.exists():
            return False
        wal = path.with_name(path.name + "-wal")
        options = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
        # The URI form of the file name (`uri=true`) carries SQLite's open options.
        self._read_only_url = f"sqlite:///file:{quote(str(path.resolve()))}?{options}&uri=true"
        self.close()
        return True

    def _create_read_only_engine(self, url: str) -> Engine:
        engine = create_engine(url, connect_args={"timeout": 30}, pool_pre_ping=True)
        event.listen(engine, "connect", sqlite_files.connect_read_only)
        event.listen(engine, "begin", sqlite_files.begin)
        return engine

    def close(self) -> None:
        """Close every pooled connection."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def forget_connections(self) -> None:
        """In a forked child: new connections from here on, the inherited ones left alone.

        The pooled connections belong to the parent process; closing or using them here would
        end or garble its sessions (PostgreSQL's socket, SQLite's locks).
        """
        if self._engine is not None:
            self._engine.dispose(close=False)

    @property
    def shared_between_processes(self) -> bool:
        """Whether another process writing this store is seen here (not in-memory SQLite)."""
        return not self.is_sqlite or self.sqlite_path() is not None

    def __enter__(self) -> SnapshotStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self) -> Connection:
        try:
            return self.engine.connect()
        except DBAPIError as exc:
            if self._use_read_only_file():
                try:
                    return self.engine.connect()
                except DBAPIError:
                    pass  # the original error says more than the read-only retry's

            if _damage(exc) is not None:
                raise self._failed(exc, "opening it") from None
            hint = (
                "check that its directory exists and is writable"
                if self.is_sqlite
                else "check that it is running"
            )
            raise StoreUnavailableError(
                f"cannot reach the snapshot database {self.shown_url}: {_first_line(exc)}; "
                f"{hint}, and the URL (--db or MLOG_DATABASE_URL)"
            ) from None

    def _failed(self, exc: Exception, what: str) -> SnapshotStoreError:
        damage = _damage(exc)
        if damage is not None:
            return SnapshotDatabaseDamagedError(
                f"the snapshot database {self.shown_url} is damaged ({damage}), found while "
                f"{what}. Snapshots are only a cache of the log, which is replayed instead: "
                "restore the database from a backup, or move it aside and run "
                "`mlog snapshot create` to start a new one"
            )
        if isinstance(exc, DBAPIError) and exc.connection_invalidated:
            return StoreUnavailableError(
                f"lost the snapshot database {self.shown_url} while {what}: {_first_line(exc)}"
            )
        return SnapshotStoreError(
            f"snapshot database {self.shown_url} failed while {what}: {_first_line(exc)}"
        )

    def _errors(self) -> tuple[type[Exception], ...]:
        """What a database operation raises: SQLAlchemy's errors and the driver's own.

        Bulk reads and writes use the driver's cursor directly (for speed), whose errors
        SQLAlchemy does not wrap. Evaluated only when an exception is being matched.
        """
        dbapi = getattr(self.engine.dialect, "loaded_dbapi", None)
        error = getattr(dbapi, "Error", None)
        if isinstance(error, type) and issubclass(error, Exception):
            return (SQLAlchemyError, error)
        return (SQLAlchemyError,)

    # ------------------------------------------------------------------ schema

    def status(self) -> SchemaStatus:
        """How the database's schema compares with this code's migrations."""
        from replay.sql import schema  # noqa: PLC0415 - Alembic, imported only when needed

        if self._absent():
            return SchemaStatus(state=SchemaState.EMPTY, revision=None, head=revision.HEAD_REVISION)
        with self._connect() as conn:
            try:
                return schema.schema_status(conn)
            except self._errors() as exc:
                raise self._failed(exc, "reading the schema revision") from None

    def drift(self) -> list[str]:
        """Differences between the database's tables and the models (empty when none)."""
        from replay.sql import schema  # noqa: PLC0415 - Alembic, imported only when needed

        if self._absent():
            return ["no snapshot database yet (no file): `mlog db upgrade` creates it"]
        with self._connect() as conn:
            try:
                return schema.drift(conn)
            except self._errors() as exc:
                raise self._failed(exc, "comparing the schema") from None

    def upgrade(self, revision: str = "head") -> tuple[SchemaStatus, SchemaStatus]:
        """Migrate to `revision` (default the head); returns the status before and after."""
        from replay.sql import schema  # noqa: PLC0415 - Alembic, imported only when needed

        with self._connect() as conn:
            try:
                with conn.begin():
                    before = schema.schema_status(conn)
                    if before.state in (SchemaState.AHEAD, SchemaState.UNMANAGED):
                        raise _schema_error(before, self.shown_url)
                    schema.upgrade(conn, revision)
                after = schema.schema_status(conn)
            except self._errors() as exc:
                raise self._failed(exc, "migrating") from None
        self._checked = after if after.state is SchemaState.CURRENT else None
        return before, after

    def downgrade(self, revision: str) -> SchemaStatus:
        """Migrate down to `revision` ("base" drops every snapshot table)."""
        from replay.sql import schema  # noqa: PLC0415 - Alembic, imported only when needed

        with self._connect() as conn:
            try:
                with conn.begin():
                    schema.downgrade(conn, revision)
                after = schema.schema_status(conn)
            except self._errors() as exc:
                raise self._failed(exc, "migrating") from None
        self._checked = None
        return after

    def ensure_schema(self) -> bool:
        """Check the schema once; returns False if a reader finds no schema (so no snapshots).

        An empty database gets the schema when the store may create it; behind, ahead and
        unmanaged schemas raise a SchemaError that says what to do.
        """
        if self._checked is not None:
            return True
        if self._absent():
            return False
        # Looked at again after `_new`: another process may have created it in between.
        status = self._at_head() or self._new() or self._at_head() or self.status()
        if status.state is SchemaState.EMPTY:
            if not self.create:
                return False
            logger.info("creating the snapshot tables in %s", self.shown_url)
            status = self._create_at_head()
        if status.state is not SchemaState.CURRENT:
            raise _schema_error(status, self.shown_url)
        self._checked = status
        return True

    def _at_head(self) -> SchemaStatus | None:
        """CURRENT if the database's one revision is this code's head, else None (ask Alembic).

        One query, no Alembic: what every start-up against an up-to-date database pays. A
        missing version table (an empty or unmanaged database) is for Alembic to tell apart.
        """
        with self._connect() as conn:
            try:
                rows = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).all()
            except SQLAlchemyError:
                return None
        head = revision.HEAD_REVISION
        if len(rows) != 1 or rows[0][0] != head:
            return None
        return SchemaStatus(state=SchemaState.CURRENT, revision=head, head=head)

    def _new(self) -> SchemaStatus | None:
        """EMPTY if the database holds neither snapshot tables nor a revision, else None."""
        with self._connect() as conn:
            try:
                if not new_schema.is_new(conn):
                    return None
            except self._errors() as exc:
                raise self._failed(exc, "reading the schema revision") from None
        return SchemaStatus(state=SchemaState.EMPTY, revision=None, head=revision.HEAD_REVISION)

    def _create_at_head(self) -> SchemaStatus:
        """Create the schema of a new database at the head revision (`new_schema.py`).

        Another process may create it at the same moment (a server's snapshot and `mlog
        snapshot create`): on SQLite the creation takes the write lock first and looks again,
        on PostgreSQL the one that loses is rolled back; either way the schema the other
        made is what this store then checks.
        """
        with self._connect() as opened:
            conn = opened.execution_options(**{sqlite_files.WRITE_FIRST: True})
            try:
                with conn.begin():
                    created = new_schema.create_if_new(conn)
            except self._errors() as exc:
                made_meanwhile = self._at_head()
                if made_meanwhile is None:
                    raise self._failed(exc, "creating the schema") from None
                return made_meanwhile
        head = revision.HEAD_REVISION
        if created:
            return SchemaStatus(state=SchemaState.CURRENT, revision=head, head=head)
        return self._at_head() or self.status()

    # ------------------------------------------------------------------ reading the index

    def snapshots(
        self,
        *,
        gt: int | None = None,
        lte: int | None = None,
        limit: int | None = None,
        desc: bool = False,
    ) -> list[SnapshotInfo]:
        """Snapshots whose offset is in `gt < offset <= lte`, oldest first (newest with desc)."""
        if not self.ensure_schema():
            return []
        query = select(_SNAPSHOTS)
        if gt is not None:
            query = query.where(_SNAPSHOTS.c.log_offset > gt)
        if lte is not None:
            query = query.where(_SNAPSHOTS.c.log_offset <= lte)
        if desc:
            query = query.order_by(_SNAPSHOTS.c.log_offset.desc(), _SNAPSHOTS.c.id.desc())
        else:
            query = query.order_by(_SNAPSHOTS.c.log_offset, _SNAPSHOTS.c.id)
        if limit is not None:
            query = query.limit(limit)
        with self._connect() as conn:
            try:
                return [info_of_row(row._mapping) for row in conn.execute(query)]
            except self._errors() as exc:
                raise self._failed(exc, "listing snapshots") from None

    def get(self, snapshot_id: int) -> SnapshotInfo:
        """One snapshot's row, or SnapshotNotFoundError."""
        if self.ensure_schema():
            with self._connect() as conn:
                try:
                    row = conn.execute(
                        select(_SNAPSHOTS).where(_SNAPSHOTS.c.id == snapshot_id)
                    ).first()
                except self._errors() as exc:
                    raise self._failed(exc, "reading a snapshot") from None
            if row is not None:
                return info_of_row(row._mapping)
        raise SnapshotNotFoundError(
            f"there is no snapshot {snapshot_id} in {self.shown_url}; `mlog snapshot list` "
            "shows the snapshots"
        )

    def newest(self, *, lte: int | None = None) -> SnapshotInfo | None:
        """The newest snapshot at or before offset `lte` (any, without it), or None."""
        found = self.snapshots(lte=lte, limit=1, desc=True)
        return found[0] if found else None

    # ------------------------------------------------------------------ writing

    def write(
        self,
        image: MetadataImage,
        *,
        progress: Progress | None = None,
        pace: Callable[[], None] | None = None,
        base: tuple[SnapshotInfo, MetadataImage] | None = None,
    ) -> SnapshotInfo:
        """Write a snapshot of `image` in one transaction; returns its row once committed.

        With `base` (a snapshot in this store and the image it holds), the snapshot is an
        increment on it when it can be (`replay.sql.increments`): the base is still there, has
        its content sums, and what changed is at most `INCREMENT_SHARE` of the image; else
        it is written in full. `pace`, if given, is called on the writing thread after every
        `PACE_ROWS` rows: a serving process's way to let its event loop run between slices of
        the write (the image is immutable, so the rows are the same however long it takes).
        """
        if image.provenance.offset < 0:
            raise SnapshotStoreError("the image is empty (no log entry yet); nothing to snapshot")
        self.ensure_schema()
        created = datetime.now(UTC)
        with self._connect() as conn:
            try:
                with conn.begin():
                    planned = None if base is None else increments.increment_on(conn, base, image)
                    snapshot_id = _insert_snapshot(conn, image.provenance, created)
                    writer = writer_for(conn)
                    if planned is None:
                        checksum = ContentChecksum()
                        for table, made in image_rows(image, checksum).items():
                            rows = reporting(made, progress)
                            if pace is not None:
                                rows = paced(rows, pace)
                            writer(conn, _TABLES[table], snapshot_id, rows)
                        chain: dict[str, Any] = {}
                    else:
                        of, made_rows = planned
                        for name, sql_table in _TABLES.items():
                            if made_rows.rows.get(name):
                                rows = reporting(made_rows.rows[name], progress)
                                if pace is not None:
                                    rows = paced(rows, pace)
                                writer(conn, sql_table, snapshot_id, rows)
                        if made_rows.changed_topics:
                            rows = iter(made_rows.changed_topics)
                            writer(conn, CHANGED_TOPICS, snapshot_id, rows)
                        checksum = made_rows.checksum
                        chain = {
                            "base_id": of.id,
                            "chain_length": of.chain_length + 1,
                            "replaced_tables": ",".join(made_rows.replaced),
                        }
                    values = {
                        "checksum": checksum.hexdigest(),
                        "record_count": record_count(checksum),
                        "content_sums": checksum.to_text(),
                        "content_bytes": sizes.measure(conn, [snapshot_id])[snapshot_id],
                        **chain,
                    }
                    conn.execute(
                        _SNAPSHOTS.update().where(_SNAPSHOTS.c.id == snapshot_id).values(values)
                    )
            except self._errors() as exc:
                raise self._failed(exc, "writing a snapshot") from None
        provenance = image.provenance
        return SnapshotInfo(
            id=snapshot_id,
            offset=provenance.offset,
            epoch=provenance.epoch,
            timestamp=provenance.timestamp,
            created_at=created,
            record_count=values["record_count"],
            checksum=values["checksum"],
            format_version=FORMAT_VERSION,
            base_id=chain.get("base_id"),
            chain_length=chain.get("chain_length", 0),
            content_bytes=values["content_bytes"],
        )

    def delete(self, snapshot_id: int) -> SnapshotInfo:
        """Delete one snapshot (all its rows, in one transaction); returns what it was.

        A snapshot an increment is written on is refused: the increment would not load.
        """
        info = self.get(snapshot_id)
        dependents = [s.id for s in self.snapshots() if s.base_id == snapshot_id]
        if dependents:
            raise SnapshotStoreError(
                f"snapshot {snapshot_id} is the base of increment(s) "
                f"{', '.join(map(str, dependents))}; delete those first (newest first), or let "
                "retention delete the chain once a newer full snapshot exists"
            )
        return self.prune([info], what="deleting a snapshot")[0]

    def retain(self, keep: int, *, max_bytes: int | None = None) -> list[SnapshotInfo]:
        """Delete all but the newest `keep` snapshots (keep >= 1); returns the deleted ones.

        With `max_bytes`, of those only the newest whose sizes add up to at most that many
        bytes are kept (the newest always is; `sizes.beyond_bounds`). The bases the kept
        increments need (their whole chain) are kept as well.
        """
        if keep < 1:
            raise SnapshotStoreError(f"retention must keep at least 1 snapshot, got {keep}")
        if max_bytes is not None and max_bytes < 0:
            raise SnapshotStoreError(f"retention's byte bound must be 0 or more, got {max_bytes}")
        newest_first = self.snapshots(desc=True)
        if max_bytes is None:
            return self.prune(newest_first[keep:])
        known = self._sizes(newest_first)
        return self.prune(sizes.beyond_bounds(newest_first, known, keep=keep, max_bytes=max_bytes))

    def _sizes(self, infos: list[SnapshotInfo]) -> dict[int, int]:
        """Each snapshot's size, those without one measured again and kept.

        Without one: written before sizes were counted, or a value that is no size (an edited
        row).
        """
        known: dict[int, int] = {
            i.id: i.content_bytes
            for i in infos
            if isinstance(i.content_bytes, int) and i.content_bytes >= 0
        }
        unmeasured = [i.id for i in infos if i.id not in known]
        if unmeasured:
            with self._connect() as conn:
                try:
                    with conn.begin():
                        measured = sizes.measure(conn, unmeasured)
                        for snapshot_id, size in measured.items():
                            conn.execute(
                                _SNAPSHOTS.update()
                                .where(_SNAPSHOTS.c.id == snapshot_id)
                                .values(content_bytes=size)
                            )
                except self._errors() as exc:
                    raise self._failed(exc, "measuring snapshots") from None
            known.update(measured)
        return known

    def prune(
        self, doomed: Iterable[SnapshotInfo], *, what: str = "deleting old snapshots"
    ) -> list[SnapshotInfo]:
        """Delete these snapshots, but any a snapshot not among them needs; returns the deleted."""
        doomed = list(doomed)
        everything = self.snapshots()
        doomed_ids = {s.id for s in doomed}
        needed = increments.needed_bases(
            {s.id: s.base_id for s in everything},
            [s.id for s in everything if s.id not in doomed_ids],
        )
        deleted = [s for s in doomed if s.id not in needed]
        if deleted:
            with self._connect() as conn:
                try:
                    with conn.begin():
                        _delete_rows(conn, [s.id for s in deleted])
                except self._errors() as exc:
                    raise self._failed(exc, what) from None
        return deleted

    # ------------------------------------------------------------------ loading

    def load(self, snapshot_id: int, *, progress: Progress | None = None) -> MetadataImage:
        """The image a snapshot holds; SnapshotChecksumError if its rows do not match."""
        info = self.get(snapshot_id)
        image, computed = self._read(info, progress)
        if computed != info.checksum:
            raise SnapshotChecksumError(
                f"snapshot {snapshot_id} (offset {info.offset}) does not match its checksum "
                f"(stored {info.checksum[:12]}..., rows give {computed[:12]}...): its rows were "
                "changed or damaged. Delete it (`mlog snapshot delete`); the log rebuilds it"
            )
        return image

    def verify(self, snapshot_id: int) -> VerifyResult:
        """Recompute a snapshot's checksum from its rows (its chain's, for an increment)."""
        info = self.get(snapshot_id)
        try:
            image, computed = self._read(info, None)
        except SnapshotStoreError as exc:
            if isinstance(exc, StoreUnavailableError):
                raise
            return VerifyResult(info=info, computed=None, error=str(exc))
        return VerifyResult(info=info, computed=computed, error=None, image=image)

    def _read(self, info: SnapshotInfo, progress: Progress | None) -> tuple[MetadataImage, str]:
        check_format(info)
        # As in load_image: a load creates millions of long-lived objects and no cycles, and
        # every full collection meanwhile would traverse them all again; the map nodes it
        # made leave the collector's view as it ends (its records were made untracked), so
        # the first young collection after it does not walk them all.
        with made_out_of_view():
            return self._read_rows(info, progress)

    def _read_rows(
        self, info: SnapshotInfo, progress: Progress | None
    ) -> tuple[MetadataImage, str]:
        with self._connect() as conn:
            try:
                with conn.begin():
                    chain = increments.chain_of(conn, info)

                    def read(*, compiled: bool, sort: bool) -> tuple[MetadataImage, str]:
                        checksum = ContentChecksum()
                        image = increments.image_of_chain(
                            conn, chain, checksum, progress, sort=sort, compiled=compiled
                        )
                        return image, checksum.hexdigest()

                    try:
                        try:
                            return read(compiled=True, sort=False)
                        except RunsUnusable:
                            # Rows the compiled reader does not take: the driver's path
                            # reads them, and names any damage.
                            return read(compiled=False, sort=False)
                    except PartitionRowsUnsorted:
                        # The database gave the partitions back out of their written order
                        # (PostgreSQL reusing deleted snapshots' space): sorted by it, then.
                        return read(compiled=False, sort=True)
            except self._errors() as exc:
                interrupt = _interrupt_behind(exc)
                if interrupt is not None:
                    # A Ctrl-C mid-read, the rollback after it refused (a COPY given up
                    # half-way): the interrupt is what happened, not a database failure.
                    raise interrupt from None
                raise self._failed(exc, f"reading snapshot {info.id}") from None

    def count_rows(self, snapshot_id: int) -> dict[str, int]:
        """Rows per table of a snapshot (for `mlog snapshot show`): an increment's own rows.

        An increment's changed topics (`snapshot_changed_topics`) are counted last.
        """
        info = self.get(snapshot_id)
        tables = dict(_TABLES)
        if info.is_increment:
            tables[CHANGED_TOPICS.name] = CHANGED_TOPICS
        counts = {}
        with self._connect() as conn:
            try:
                for name, table in tables.items():
                    counts[name] = conn.execute(
                        select(func.count())
                        .select_from(table)
                        .where(table.c.snapshot_id == snapshot_id)
                    ).scalar_one()
            except self._errors() as exc:
                raise self._failed(exc, "counting rows") from None
        return counts


# ---------------------------------------------------------------------- helpers


def _schema_error(status: SchemaStatus, shown_url: str) -> SchemaError:
    text = f"snapshot database {shown_url}: {status.describe()}"
    if status.state is SchemaState.BEHIND:
        return SchemaBehindError(text)
    if status.state is SchemaState.AHEAD:
        return SchemaAheadError(text)
    return SchemaError(text)


def _insert_snapshot(conn: Connection, provenance: Provenance, created: datetime) -> int:
    result = conn.execute(
        _SNAPSHOTS.insert().values(
            log_offset=provenance.offset,
            epoch=provenance.epoch,
            log_timestamp=provenance.timestamp,
            created_at=created,
            record_count=0,
            checksum="",
            format_version=FORMAT_VERSION,
        )
    )
    key = result.inserted_primary_key
    if key is None:  # pragma: no cover - every supported dialect returns the new id
        raise SnapshotStoreError("the database did not return the new snapshot's id")
    snapshot_id: int = key[0]
    return snapshot_id


def _delete_rows(conn: Connection, snapshot_ids: list[int]) -> None:
    for table in (*CONTENT_TABLES, CHANGED_TOPICS):
        conn.execute(delete(table).where(table.c.snapshot_id.in_(snapshot_ids)))
    conn.execute(delete(_SNAPSHOTS).where(_SNAPSHOTS.c.id.in_(snapshot_ids)))


__all__ = [
    "METADATA",
    "PACE_ROWS",
    "PROGRESS_EVERY",
    "Progress",
    "SnapshotInfo",
    "SnapshotStore",
    "VerifyResult",
    "parse_url",
    "sqlite_url",
]
