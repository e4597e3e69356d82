"""What every `mlog` command group shares: exit codes, errors, tables, argument types."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TextIO

from api.service.settings import OUTPUT_FORMATS, Settings
from metadata_log import MetadataLog
from records.errors import MetadataLogError

EXIT_OK = 0
EXIT_DAMAGED = 1
EXIT_ERROR = 2

Handler = Callable[[argparse.Namespace, Settings, TextIO], int]
"""A command: parsed arguments, settings and stdout in; exit code out."""


class CliError(MetadataLogError):
    """A command-line usage problem; the message says how to fix it."""


def format_time(ms: int) -> str:
    """A log timestamp (ms since the epoch) as ISO-8601 UTC with milliseconds."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


def print_table(rows: Sequence[Sequence[object]], headers: Sequence[str], out: TextIO) -> None:
    """Print rows as left-aligned columns under a header line."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")


def open_reader(settings: Settings) -> MetadataLog:
    """The log of the data directory, opened read-only (no lock, no recovery writes)."""
    return MetadataLog.open(settings.log_dir, config=settings.log, read_only=True)


def offset_arg(text: str) -> int:
    """Argument type: an offset (integer >= -1)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an offset (an integer)") from None
    if value < -1:
        raise argparse.ArgumentTypeError(f"{value} is not an offset (must be >= -1)")
    return value


def count_arg(text: str) -> int:
    """Argument type: a count (integer >= 0)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count (an integer)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a count (must be >= 0)")
    return value


def add_global_options(parser: argparse.ArgumentParser, *, suppress: bool = True) -> None:
    """Add --data-dir/--output/--db/--debug; subcommands accept them too (suppress=True there)."""
    default = argparse.SUPPRESS if suppress else None
    parser.add_argument(
        "--data-dir",
        default=default,
        help="data directory (default ./mlog-data, env MLOG_DATA_DIR)",
    )
    parser.add_argument(
        "--output",
        choices=OUTPUT_FORMATS,
        default=default,
        help="output format (default table, env MLOG_OUTPUT)",
    )
    parser.add_argument(
        "--db",
        default=default,
        metavar="URL",
        help="snapshot database URL (default sqlite:///<data-dir>/snapshots.db, env "
        "MLOG_DATABASE_URL)",
    )
    parser.add_argument(
        "--bootstrap-server",
        default=default,
        metavar="HOST:PORT",
        help="run against `mlog serve` there instead of the data directory (env "
        "MLOG_BOOTSTRAP_SERVER)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if suppress else False,
        help="show tracebacks and debug logging",
    )
