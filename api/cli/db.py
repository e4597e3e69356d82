"""`mlog db upgrade|current|check`: the snapshot database's schema (Alembic revisions).

The snapshot database is `--db URL` (env MLOG_DATABASE_URL), by default the SQLite file
`<data-dir>/snapshots.db`.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import TYPE_CHECKING, TextIO

from api.cli.common import EXIT_DAMAGED, EXIT_OK, add_global_options
from api.cli.created_paths import removed_on_failure
from api.cli.output import emit
from api.service.snapshots import open_store
from metadata_log.private_files import make_dirs
from replay.sql.revision import SchemaState

if TYPE_CHECKING:
    from api.service.settings import Settings


def cmd_db_upgrade(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Create or migrate the snapshot tables up to this code's head revision."""
    with open_store(settings) as store:
        path = store.sqlite_path()
        # A database (and directory) made for an upgrade that fails goes with it.
        with removed_on_failure(path) if path is not None else contextlib.nullcontext():
            if path is not None:
                make_dirs(path.parent)
            before, after = store.upgrade()
    if before.revision == after.revision:
        text = f"{store.shown_url}: already at head revision {after.revision}"
    else:
        text = f"{store.shown_url}: upgraded from {before.revision or 'empty'} to {after.revision}"
    emit(settings, out, {"from": before.revision, "to": after.revision}, text)
    return EXIT_OK


def cmd_db_current(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Show the database's schema revision and how it compares with this code."""
    with open_store(settings, create=False) as store:
        status = store.status()
    emit(
        settings,
        out,
        {"revision": status.revision, "head": status.head, "state": status.state.value},
        f"{store.shown_url}: {status.describe()}",
    )
    return EXIT_OK


def cmd_db_check(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """Exit 0 if the schema is at head and matches the models, 1 otherwise."""
    with open_store(settings, create=False) as store:
        status = store.status()
        drift = store.drift() if status.state is SchemaState.CURRENT else []
    ok = status.state is SchemaState.CURRENT and not drift
    text = f"{store.shown_url}: {status.describe()}"
    if drift:
        text += "; but the tables differ from the models: " + "; ".join(drift)
    emit(
        settings,
        out,
        {"ok": ok, "state": status.state.value, "revision": status.revision, "drift": drift},
        text,
    )
    return EXIT_OK if ok else EXIT_DAMAGED


def add_verbs(db: argparse.ArgumentParser) -> None:
    """The verbs of `mlog db` and their flags, on the noun's parser."""
    verbs = db.add_subparsers(dest="verb", metavar="VERB", required=True)
    for name, handler, text in (
        ("upgrade", cmd_db_upgrade, "create or migrate the snapshot tables to the head revision"),
        ("current", cmd_db_current, "show the schema revision"),
        ("check", cmd_db_check, "exit 0 if the schema is current and matches the code"),
    ):
        sub = verbs.add_parser(name, help=text)
        add_global_options(sub)
        sub.set_defaults(handler=handler)
