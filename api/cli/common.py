"""What every `mlog` command shares: exit codes, the usage error, argument types, global options."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from api.controller.errors import ApiError
from api.service.settings import OUTPUT_FORMATS
from records.errors import MetadataLogError

if TYPE_CHECKING:
    from api.controller.commands import Outcome
    from api.service.settings import Settings

EXIT_OK = 0
EXIT_DAMAGED = 1
EXIT_ERROR = 2

Handler = Callable[[argparse.Namespace, "Settings", TextIO], int]
"""A command: parsed arguments, settings and stdout in; exit code out."""


class CliError(MetadataLogError):
    """A command-line usage problem; the message says how to fix it."""


def check(outcome: Outcome) -> None:
    """Turn a failed per-item outcome into the command's error (exit 2, one line)."""
    if not outcome.ok:
        raise ApiError(outcome.error_code, outcome.error_message or outcome.error_code.name)


# ---------------------------------------------------------------------- argument types


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


def integer_arg(text: str) -> int:
    """Argument type: any integer (the command checks its range and says why)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    return value


def broker_id_arg(text: str) -> int:
    """Argument type: a broker id (integer >= 0)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a broker id (an integer)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a broker id (must be >= 0)")
    return value


def parse_pairs(values: Sequence[str] | None, flag: str) -> list[tuple[str, str]]:
    """`KEY=VALUE` arguments of a repeatable flag as (key, value) pairs."""
    pairs = []
    for item in values or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CliError(f"{flag} takes KEY=VALUE, got {item!r}")
        pairs.append((key.strip(), value))
    return pairs


# ---------------------------------------------------------------------- shared options


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


def add_range_options(parser: argparse.ArgumentParser) -> None:
    """`--gt N`, `--lte N`, `--limit N`: the keyword-only range of every listing of offsets."""
    parser.add_argument("--gt", type=offset_arg, help="only offsets > N")
    parser.add_argument("--lte", type=offset_arg, help="only offsets <= N")
    parser.add_argument("--limit", type=count_arg, help="at most N rows")


def add_writer_options(parser: argparse.ArgumentParser) -> None:
    """The global options plus `--principal`: for commands that append to the log."""
    add_global_options(parser)
    parser.add_argument(
        "--principal", help="who is asking, stored with each record (default User:<login>)"
    )


def principal(args: argparse.Namespace) -> str:
    """The principal a local write records: `--principal`, else User:<login>."""
    given: str | None = getattr(args, "principal", None)
    if given:
        return given
    import getpass

    return f"User:{getpass.getuser()}"
