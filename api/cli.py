"""The `mlog` command: noun-verb subcommands over a data directory (embedded mode).

Each noun's commands live in their own module (`api.cli_log`, ...); this one builds the parser
and runs a command with the settings, mapping errors to a one-line message and exit code 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from typing import TextIO

from api import cli_audit, cli_cluster, cli_db, cli_log, cli_namespaces, cli_serve
from api.cli_common import EXIT_ERROR, EXIT_OK, Handler, add_global_options
from api.settings import load_settings
from records.errors import MetadataLogError


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
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run `mlog`; returns the exit code (0 ok, 1 verify found damage, 2 error)."""
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
            data_dir=args.data_dir, output=args.output, debug=debug, database_url=args.db
        )
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
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
