"""The `mlog` command: noun-verb subcommands over a data directory (embedded mode).

Each noun's commands live in their own module (`api.cli.log`, ...); this one builds the parser
and runs a command with the settings, mapping errors to a one-line message and exit code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import TextIO

from api.cli import audit as cli_audit
from api.cli import cluster as cli_cluster
from api.cli import db as cli_db
from api.cli import log as cli_log
from api.cli import namespaces as cli_namespaces
from api.cli import serve as cli_serve
from api.cli.common import (
    EXIT_DAMAGED,
    EXIT_ERROR,
    EXIT_OK,
    CliError,
    Handler,
    add_global_options,
)
from api.service.settings import Settings, load_settings
from metadata_log.errors import LogCorruptionError
from records.errors import MetadataLogError
from replay.sql.errors import SnapshotDatabaseDamagedError

REMOTE_NOUNS = (
    *("brokers", "topics", "configs", "leaders", "partitions", "image", "namespaces", "history"),
)
"""Commands that run against a server with `--bootstrap-server` (the others need the data
directory: the log's files, the snapshot database, Spark, or the server itself)."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `mlog`."""
    parser = argparse.ArgumentParser(
        prog="mlog", description="metadata-log: an event-sourced metadata log service"
    )
    add_global_options(parser, suppress=False)
    nouns = parser.add_subparsers(dest="noun", metavar="COMMAND", required=True)
    cli_cluster.add_commands(nouns)
    cli_log.add_commands(nouns)
    cli_namespaces.add_commands(nouns)
    cli_db.add_commands(nouns)
    cli_serve.add_commands(nouns)
    cli_audit.add_commands(nouns)
    for noun in REMOTE_NOUNS:
        nouns.choices[noun].set_defaults(remote=True)
    return parser


def _local_only(args: argparse.Namespace, settings: Settings) -> Settings:
    """Settings for a command that works on the data directory only (log, db, audit, ...).

    `--bootstrap-server` given to it is an error; MLOG_BOOTSTRAP_SERVER in the environment is
    ignored (it names the server for the commands that use one).
    """
    command = f"mlog {args.noun}" + (f" {args.verb}" if getattr(args, "verb", None) else "")
    if args.bootstrap_server:
        raise CliError(
            f"`{command}` works on the data directory only; drop --bootstrap-server (and "
            "give --data-dir)"
        )
    return dataclasses.replace(settings, bootstrap_server=None)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run `mlog`; returns the exit code (0 ok, 1 damaged log data, 2 error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    out = out or sys.stdout
    debug = bool(getattr(args, "debug", False))
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        settings = load_settings(
            data_dir=args.data_dir,
            output=args.output,
            debug=debug,
            database_url=args.db,
            bootstrap_server=args.bootstrap_server,
        )
        if settings.bootstrap_server and not getattr(args, "remote", False):
            settings = _local_only(args, settings)
        handler: Handler = args.handler
        return handler(args, settings, out)
    except BrokenPipeError:
        # The reader went away (`mlog log dump | head`): not an error. Point stdout at
        # /dev/null so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except (MetadataLogError, OSError) as exc:
        if debug:
            traceback.print_exc()
        message = str(exc) if not isinstance(exc, OSError) else f"{exc.strerror}: {exc.filename}"
        print(f"mlog: error: {message}", file=sys.stderr)
        # Damaged data exits 1, as `log verify` and `snapshot verify` do for it; others 2.
        damaged = isinstance(exc, LogCorruptionError | SnapshotDatabaseDamagedError)
        return EXIT_DAMAGED if damaged else EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
